// src/base/block_pool: reuse, size classes, the cache bound, huge blocks,
// threads, allocation failure and teardown with blocks outstanding.
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/block_pool.h"
#include "base/threads.h"
#include "test.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static hrt_block_pool_stats_t stats_of(hrt_block_pool_t* pool) {
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(pool, &stats);
  return stats;
}

static void same_size_gets_the_same_block_back(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(16 * MIB, &pool));
  unsigned char* first = hrt_block_pool_acquire(pool, 100000);
  size_t capacity = first ? hrt_block_pool_block_capacity(first) : 0;
  int ok = first && (uintptr_t)first % HRT_BLOCK_POOL_ALIGNMENT == 0 &&
           capacity >= 100000;
  if (first) memset(first, 0xA5, 100000);
  hrt_block_pool_give_back(first);
  hrt_block_pool_stats_t cached = stats_of(pool);
  unsigned char* second = hrt_block_pool_acquire(pool, 100000);
  // A reused block keeps its contents: it was not freed and remapped.
  int kept_contents = second && second[0] == 0xA5 && second[99999] == 0xA5;
  hrt_block_pool_give_back(second);
  // Another size in the same class is served by the same block too.
  unsigned char* third = hrt_block_pool_acquire(pool, 100001);
  hrt_block_pool_stats_t stats = stats_of(pool);
  hrt_block_pool_give_back(third);
  hrt_block_pool_release(pool);
  CHECK(ok);
  CHECK_EQ_INT(cached.cached_count, 1);
  CHECK_EQ_INT(cached.cached_bytes, capacity);
  CHECK_EQ_INT(cached.outstanding_count, 0);
  CHECK(second == first);
  CHECK(kept_contents);
  CHECK(third == first);
  CHECK_EQ_INT(stats.allocated_count, 1);
  CHECK_EQ_INT(stats.reused_count, 2);
  CHECK_EQ_INT(stats.outstanding_count, 1);
  CHECK_EQ_INT(stats.cached_count, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
}

static size_t capacity_for(hrt_block_pool_t* pool, size_t size) {
  void* block = hrt_block_pool_acquire(pool, size);
  size_t capacity = block ? hrt_block_pool_block_capacity(block) : 0;
  hrt_block_pool_give_back(block);
  return capacity;
}

static void sizes_round_to_four_classes_per_doubling(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(0, &pool));
  size_t sizes[][2] = {
      {0, 4 * KIB},
      {1, 4 * KIB},
      {5000, 8 * KIB},
      {64 * KIB, 64 * KIB},
      {64 * KIB + 1, 80 * KIB},
      {100000, 112 * KIB},
      {1536 * KIB + 1, 1792 * KIB},
      {1792 * KIB + 1, 2 * MIB},  // rounds up to a huge block
      {2 * MIB, 2 * MIB},
      {2 * MIB + 1, 4 * MIB},  // 2.5 MiB rounds to whole 2 MiB
      {4 * MIB, 4 * MIB},
      {4 * MIB + 1, 6 * MIB},
      {8 * MIB + 1, 10 * MIB},
  };
  size_t count = sizeof(sizes) / sizeof(sizes[0]);
  size_t capacities[sizeof(sizes) / sizeof(sizes[0])];
  for (size_t i = 0; i < count; ++i) {
    capacities[i] = capacity_for(pool, sizes[i][0]);
  }
  hrt_block_pool_stats_t stats = stats_of(pool);
  hrt_block_pool_release(pool);
  for (size_t i = 0; i < count; ++i) {
    if (capacities[i] != sizes[i][1]) {
      fprintf(stderr, "size %zu: capacity %zu, expected %zu\n", sizes[i][0],
              capacities[i], sizes[i][1]);
    }
    CHECK_EQ_INT(capacities[i], sizes[i][1]);
  }
  // With no cache allowed, nothing is reused.
  CHECK_EQ_INT(stats.reused_count, 0);
  CHECK_EQ_INT(stats.cached_bytes, 0);
}

static void cache_keeps_the_newest_blocks_within_its_bound(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(192 * KIB, &pool));
  void* small[4];
  for (int i = 0; i < 4; ++i) small[i] = hrt_block_pool_acquire(pool, 64 * KIB);
  void* large = hrt_block_pool_acquire(pool, 128 * KIB);
  size_t max_cached = 0;
  for (int i = 0; i < 4; ++i) {
    hrt_block_pool_give_back(small[i]);
    size_t cached = stats_of(pool).cached_bytes;
    if (cached > max_cached) max_cached = cached;
  }
  hrt_block_pool_stats_t three_small = stats_of(pool);
  // 128 KiB more only fits once the two oldest 64 KiB blocks are evicted.
  hrt_block_pool_give_back(large);
  hrt_block_pool_stats_t with_large = stats_of(pool);
  void* again_large = hrt_block_pool_acquire(pool, 128 * KIB);
  void* again_small = hrt_block_pool_acquire(pool, 64 * KIB);
  void* fresh_small = hrt_block_pool_acquire(pool, 64 * KIB);
  hrt_block_pool_stats_t after = stats_of(pool);
  hrt_block_pool_give_back(again_large);
  hrt_block_pool_give_back(again_small);
  hrt_block_pool_give_back(fresh_small);
  hrt_block_pool_release(pool);
  CHECK(max_cached <= 192 * KIB);
  CHECK_EQ_INT(three_small.cached_count, 3);
  CHECK_EQ_INT(three_small.cached_bytes, 192 * KIB);
  CHECK_EQ_INT(with_large.cached_count, 2);
  CHECK_EQ_INT(with_large.cached_bytes, 192 * KIB);
  CHECK(again_large == large);
  CHECK(again_small == small[3]);  // the newest small block survived
  CHECK_EQ_INT(after.reused_count, 2);
  CHECK_EQ_INT(after.allocated_count, 6);
}

static void block_larger_than_the_bound_is_freed(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(64 * KIB, &pool));
  void* kept = hrt_block_pool_acquire(pool, 64 * KIB);
  void* too_big = hrt_block_pool_acquire(pool, 4 * MIB);
  hrt_block_pool_give_back(kept);
  hrt_block_pool_give_back(too_big);
  hrt_block_pool_stats_t stats = stats_of(pool);
  hrt_block_pool_release(pool);
  CHECK(kept && too_big);
  CHECK_EQ_INT(stats.cached_count, 1);
  CHECK_EQ_INT(stats.cached_bytes, 64 * KIB);
  CHECK_EQ_INT(stats.outstanding_count, 0);
}

static void huge_blocks_are_2mib_aligned_and_usable(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(64 * MIB, &pool));
  size_t sizes[] = {2 * MIB, 3 * MIB, 4 * MIB + 4096, 9 * MIB};
  unsigned char* blocks[4];
  int aligned = 1;
  for (int i = 0; i < 4; ++i) {
    blocks[i] = hrt_block_pool_acquire(pool, sizes[i]);
    if (!blocks[i]) {
      aligned = 0;
      continue;
    }
    size_t capacity = hrt_block_pool_block_capacity(blocks[i]);
    aligned = aligned && (uintptr_t)blocks[i] % HRT_BLOCK_POOL_HUGE_SIZE == 0 &&
              capacity % HRT_BLOCK_POOL_HUGE_SIZE == 0 && capacity >= sizes[i];
    // Every byte of the capacity is mapped and writable.
    memset(blocks[i], i + 1, capacity);
  }
  for (int i = 0; i < 4; ++i) hrt_block_pool_give_back(blocks[i]);
  unsigned char* again = hrt_block_pool_acquire(pool, 3 * MIB);
  int reused = again == blocks[1] && again[0] == 2 && again[4 * MIB - 1] == 2;
  hrt_block_pool_give_back(again);
  hrt_block_pool_release(pool);
  CHECK(aligned);
  CHECK(reused);
}

static void unsatisfiable_size_returns_null_and_drops_the_cache(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(16 * MIB, &pool));
  hrt_block_pool_give_back(hrt_block_pool_acquire(pool, 2 * MIB));
  hrt_block_pool_stats_t before = stats_of(pool);
  void* too_large_to_round = hrt_block_pool_acquire(pool, SIZE_MAX);
  hrt_block_pool_stats_t after_rounding = stats_of(pool);
  // Rounds fine, but no address space holds it.
  void* too_large_to_map = hrt_block_pool_acquire(pool, SIZE_MAX / 8);
  hrt_block_pool_stats_t after_mapping = stats_of(pool);
  void* small = hrt_block_pool_acquire(pool, 64 * KIB);
  hrt_block_pool_give_back(small);
  hrt_block_pool_release(pool);
  CHECK(too_large_to_round == NULL);
  CHECK(too_large_to_map == NULL);
  CHECK(small != NULL);
  CHECK_EQ_INT(before.cached_count, 1);
  // A size that cannot be rounded is refused before the cache is touched.
  CHECK_EQ_INT(after_rounding.cached_count, 1);
  // A failed allocation frees the cache and tries again before giving up.
  CHECK_EQ_INT(after_mapping.cached_count, 0);
  CHECK_EQ_INT(after_mapping.outstanding_count, 0);
}

static void* give_back_on_thread(void* block) {
  hrt_block_pool_give_back(block);
  return NULL;
}

static void released_pool_lives_until_its_blocks_come_back(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(64 * MIB, &pool));
  void* small = hrt_block_pool_acquire(pool, 256 * KIB);
  void* huge = hrt_block_pool_acquire(pool, 4 * MIB);
  hrt_block_pool_give_back(hrt_block_pool_acquire(pool, 1 * MIB));
  hrt_block_pool_retain(pool);
  hrt_block_pool_release(pool);
  int64_t live_retained = hrt_live_count(HRT_LIVE_BLOCK_POOL);
  hrt_block_pool_release(pool);  // the last reference: the cache goes
  int64_t live_released = hrt_live_count(HRT_LIVE_BLOCK_POOL);
  hrt_thread_t thread;
  CHECK_OK(hrt_thread_create("give-back", give_back_on_thread, huge, &thread));
  hrt_thread_join(&thread);
  int64_t live_one_left = hrt_live_count(HRT_LIVE_BLOCK_POOL);
  hrt_block_pool_give_back(small);  // the last block destroys the pool
  CHECK(small && huge);
  CHECK_EQ_INT(live_retained, 1);
  CHECK_EQ_INT(live_released, 1);
  CHECK_EQ_INT(live_one_left, 1);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
}

static void release_with_nothing_outstanding_destroys_at_once(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(64 * MIB, &pool));
  hrt_block_pool_give_back(hrt_block_pool_acquire(pool, 6 * MIB));
  hrt_block_pool_release(pool);
  hrt_block_pool_release(NULL);
  hrt_block_pool_give_back(NULL);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
}

// Two threads share one pool through a small queue, as the completion thread
// (acquires and fills) and the JavaScript thread (reads and gives back) do,
// while a third acquires and gives back on its own. The bound is small, so
// blocks are also evicted concurrently.
#define QUEUE_CAPACITY 8
#define HANDOFF_COUNT 3000

typedef struct {
  hrt_block_pool_t* pool;
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  unsigned char* queue[QUEUE_CAPACITY];
  size_t sizes[QUEUE_CAPACITY];
  int head, count;
  atomic_int errors;
} handoff_t;

static size_t handoff_size(int i) {
  static const size_t sizes[] = {64 * KIB, 96 * KIB, 200 * KIB, 2 * MIB};
  return sizes[i % 4] + (size_t)(i % 7);
}

static void* produce(void* arg) {
  handoff_t* handoff = arg;
  for (int i = 0; i < HANDOFF_COUNT; ++i) {
    size_t size = handoff_size(i);
    unsigned char* block = hrt_block_pool_acquire(handoff->pool, size);
    if (!block) {
      atomic_fetch_add(&handoff->errors, 1);
      continue;
    }
    block[0] = (unsigned char)i;
    block[size - 1] = (unsigned char)i;
    hrt_mutex_lock(&handoff->mutex);
    while (handoff->count == QUEUE_CAPACITY) {
      hrt_cond_wait(&handoff->cond, &handoff->mutex);
    }
    int slot = (handoff->head + handoff->count) % QUEUE_CAPACITY;
    handoff->queue[slot] = block;
    handoff->sizes[slot] = size;
    ++handoff->count;
    hrt_cond_broadcast(&handoff->cond);
    hrt_mutex_unlock(&handoff->mutex);
  }
  return NULL;
}

static void* consume(void* arg) {
  handoff_t* handoff = arg;
  for (int i = 0; i < HANDOFF_COUNT; ++i) {
    hrt_mutex_lock(&handoff->mutex);
    while (handoff->count == 0) hrt_cond_wait(&handoff->cond, &handoff->mutex);
    unsigned char* block = handoff->queue[handoff->head];
    size_t size = handoff->sizes[handoff->head];
    handoff->head = (handoff->head + 1) % QUEUE_CAPACITY;
    --handoff->count;
    hrt_cond_broadcast(&handoff->cond);
    hrt_mutex_unlock(&handoff->mutex);
    if (block[0] != (unsigned char)i || block[size - 1] != (unsigned char)i) {
      atomic_fetch_add(&handoff->errors, 1);
    }
    hrt_block_pool_give_back(block);
  }
  return NULL;
}

static void* churn(void* arg) {
  handoff_t* handoff = arg;
  for (int i = 0; i < HANDOFF_COUNT; ++i) {
    size_t size = handoff_size(i + 1);
    unsigned char* block = hrt_block_pool_acquire(handoff->pool, size);
    if (!block) {
      atomic_fetch_add(&handoff->errors, 1);
      continue;
    }
    memset(block, 0x5A, 4096);
    if (hrt_block_pool_block_capacity(block) < size) {
      atomic_fetch_add(&handoff->errors, 1);
    }
    hrt_block_pool_give_back(block);
  }
  return NULL;
}

static void threads_acquire_and_give_back_concurrently(void) {
  handoff_t handoff = {.head = 0, .count = 0};
  atomic_init(&handoff.errors, 0);
  hrt_mutex_init(&handoff.mutex);
  hrt_cond_init(&handoff.cond);
  CHECK_OK(hrt_block_pool_create(3 * MIB, &handoff.pool));
  hrt_thread_t threads[3];
  void* (*entries[3])(void*) = {produce, consume, churn};
  int started = 0;
  for (; started < 3; ++started) {
    hrt_status_t status = hrt_thread_create("pool-test", entries[started],
                                            &handoff, &threads[started]);
    if (status != HRT_OK) {
      hrt_status_free(status);
      break;
    }
  }
  for (int i = 0; i < started; ++i) hrt_thread_join(&threads[i]);
  hrt_block_pool_stats_t stats = stats_of(handoff.pool);
  hrt_block_pool_release(handoff.pool);
  hrt_cond_deinit(&handoff.cond);
  hrt_mutex_deinit(&handoff.mutex);
  CHECK_EQ_INT(started, 3);
  CHECK_EQ_INT(atomic_load(&handoff.errors), 0);
  CHECK_EQ_INT(stats.outstanding_count, 0);
  CHECK(stats.cached_bytes <= 3 * MIB);
  CHECK_EQ_INT(stats.reused_count + stats.allocated_count, 2 * HANDOFF_COUNT);
  // How many acquires find a warm block depends on how the threads
  // interleave with the 3 MiB bound's evictions; some always do.
  CHECK(stats.reused_count > 0);
}

// Releasing the pool on one thread while another gives its blocks back: the
// pool is destroyed exactly once, by whichever finishes last.
static void* give_back_all(void* arg) {
  void** blocks = arg;
  for (int i = 0; blocks[i]; ++i) hrt_block_pool_give_back(blocks[i]);
  return NULL;
}

static void release_races_with_give_back(void) {
  for (int round = 0; round < 200; ++round) {
    hrt_block_pool_t* pool = NULL;
    CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
    void* blocks[5] = {NULL};
    for (int i = 0; i < 4; ++i) {
      blocks[i] = hrt_block_pool_acquire(pool, 64 * KIB);
      CHECK(blocks[i]);
    }
    hrt_block_pool_give_back(hrt_block_pool_acquire(pool, 128 * KIB));
    hrt_thread_t thread;
    CHECK_OK(hrt_thread_create("give-back", give_back_all, blocks, &thread));
    hrt_block_pool_release(pool);
    hrt_thread_join(&thread);
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_BLOCK_POOL), 0);
  }
}

static void giving_back_twice_aborts(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(1 * MIB, &pool));
  void* block = hrt_block_pool_acquire(pool, 64 * KIB);
  hrt_block_pool_give_back(block);  // cached: its header stays readable
  fflush(NULL);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(2);
    hrt_block_pool_give_back(block);
    _exit(0);
  }
  int wstatus = 0;
  pid_t waited = waitpid(child, &wstatus, 0);
  hrt_block_pool_release(pool);
  CHECK(waited == child);
  CHECK(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGABRT);
}

static void count_bound_trim_and_live_counts(void) {
  hrt_block_pool_options_t options = {
      .max_cached_bytes = 64 * MIB, .max_cached_count = 2, .count_live = true};
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create_with_options(&options, &pool));
  void* blocks[3];
  for (int i = 0; i < 3; ++i)
    blocks[i] = hrt_block_pool_acquire(pool, 64 * KIB);
  for (int i = 0; i < 3; ++i) hrt_block_pool_give_back(blocks[i]);
  hrt_block_pool_stats_t bounded = stats_of(pool);
  int64_t live_blocks = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  int64_t live_bytes = hrt_live_count(HRT_LIVE_CACHED_BYTES);
  // The newest two were kept: the last one given back comes out first.
  void* again = hrt_block_pool_acquire(pool, 64 * KIB);
  int64_t live_after_acquire = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  hrt_block_pool_give_back(again);
  hrt_block_pool_trim(pool);
  hrt_block_pool_stats_t trimmed = stats_of(pool);
  int64_t live_after_trim = hrt_live_count(HRT_LIVE_CACHED_BYTES);
  // A pool not counted live leaves the counts alone.
  hrt_block_pool_t* quiet = NULL;
  CHECK_OK(hrt_block_pool_create(MIB, &quiet));
  hrt_block_pool_give_back(hrt_block_pool_acquire(quiet, 64 * KIB));
  int64_t live_quiet = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  hrt_block_pool_release(quiet);
  hrt_block_pool_release(pool);
  CHECK(blocks[0] && blocks[1] && blocks[2]);
  CHECK_EQ_INT(bounded.cached_count, 2);
  CHECK_EQ_INT(live_blocks, 2);
  CHECK_EQ_INT(live_bytes, bounded.cached_bytes);
  CHECK(again == blocks[2]);
  CHECK_EQ_INT(live_after_acquire, 1);
  CHECK_EQ_INT(trimmed.cached_count, 0);
  CHECK_EQ_INT(trimmed.cached_bytes, 0);
  CHECK_EQ_INT(live_after_trim, 0);
  CHECK_EQ_INT(live_quiet, 0);
}

static void zero_count_bound_keeps_nothing(void) {
  hrt_block_pool_options_t options = {.max_cached_bytes = 64 * MIB,
                                      .max_cached_count = 0};
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create_with_options(&options, &pool));
  hrt_block_pool_give_back(hrt_block_pool_acquire(pool, 64 * KIB));
  hrt_block_pool_stats_t stats = stats_of(pool);
  hrt_block_pool_release(pool);
  CHECK_EQ_INT(stats.cached_count, 0);
}

static void zeroed_acquire_clears_reused_blocks(void) {
  hrt_block_pool_t* pool = NULL;
  CHECK_OK(hrt_block_pool_create(64 * MIB, &pool));
  // A heap block and a mapped (huge) block, each dirtied, given back and
  // acquired zeroed again.
  const size_t sizes[] = {100 * KIB, 5 * MIB};
  int ok = 1;
  for (int i = 0; i < 2; ++i) {
    unsigned char* fresh = hrt_block_pool_acquire_zeroed(pool, sizes[i]);
    ok = ok && fresh && fresh[0] == 0 && fresh[sizes[i] - 1] == 0;
    if (fresh) memset(fresh, 0xEE, sizes[i]);
    hrt_block_pool_give_back(fresh);
    unsigned char* reused = hrt_block_pool_acquire_zeroed(pool, sizes[i]);
    ok = ok && reused == fresh;
    for (size_t j = 0; ok && j < sizes[i]; ++j) ok = reused[j] == 0;
    hrt_block_pool_give_back(reused);
  }
  hrt_block_pool_release(pool);
  CHECK(ok);
}

TEST_MAIN(TEST_CASE(same_size_gets_the_same_block_back),
          TEST_CASE(count_bound_trim_and_live_counts),
          TEST_CASE(zero_count_bound_keeps_nothing),
          TEST_CASE(zeroed_acquire_clears_reused_blocks),
          TEST_CASE(sizes_round_to_four_classes_per_doubling),
          TEST_CASE(cache_keeps_the_newest_blocks_within_its_bound),
          TEST_CASE(block_larger_than_the_bound_is_freed),
          TEST_CASE(huge_blocks_are_2mib_aligned_and_usable),
          TEST_CASE(unsatisfiable_size_returns_null_and_drops_the_cache),
          TEST_CASE(released_pool_lives_until_its_blocks_come_back),
          TEST_CASE(release_with_nothing_outstanding_destroys_at_once),
          TEST_CASE(threads_acquire_and_give_back_concurrently),
          TEST_CASE(release_races_with_give_back),
          TEST_CASE(giving_back_twice_aborts),
          TEST_CASE(every_object_is_destroyed))

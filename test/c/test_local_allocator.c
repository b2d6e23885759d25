// src/hal/local/local_allocator and its use by the local devices: reuse
// without stale data, the small-size path, the bounds, live counts,
// HALRT_LOCAL_CACHE_BYTES, and the idle and close trims.
#include <stdint.h>
#include <stdlib.h>

#include "base/live.h"
#include "base/threads.h"
#include "hal/local/local_allocator.h"
#include "test.h"
#include "test_submit.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static int all_bytes_are(const unsigned char* data, size_t length,
                         unsigned char value) {
  for (size_t i = 0; i < length; ++i) {
    if (data[i] != value) return 0;
  }
  return 1;
}

static void reused_block_reads_as_zero(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_local_allocator_t allocator;
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  const size_t size = 300 * KIB + 5;
  unsigned char* first = hrt_local_allocator_allocate(&allocator, size, NULL);
  int first_zero = first && all_bytes_are(first, size, 0);
  if (first) memset(first, 0xA5, size);
  int cached = first && hrt_local_allocator_free(&allocator, first, size);
  int64_t blocks = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  int64_t bytes = hrt_live_count(HRT_LIVE_CACHED_BYTES);
  unsigned char* second = hrt_local_allocator_allocate(&allocator, size, NULL);
  // The rounded length (to 64 bytes) is zero as well.
  int second_zero = second && all_bytes_are(second, (size + 63) & ~63u, 0);
  int64_t blocks_in_use = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  if (second) hrt_local_allocator_free(&allocator, second, size);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(first_zero);
  CHECK(cached);
  CHECK_EQ_INT(blocks, 1);
  CHECK(bytes >= (int64_t)size && bytes <= (int64_t)(size + size / 4));
  CHECK(second == first);  // the same warm block
  CHECK(second_zero);
  CHECK_EQ_INT(blocks_in_use, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BLOCK), 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BYTES), 0);
}

static void reused_block_with_data_has_zeros_after_it(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_local_allocator_t allocator;
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  const size_t size = 128 * KIB;
  unsigned char* first = hrt_local_allocator_allocate(&allocator, size, NULL);
  if (first) memset(first, 0xA5, size);
  if (first) hrt_local_allocator_free(&allocator, first, size);
  // One byte less than the block held: the padding up to 64 bytes is zero.
  unsigned char* data = malloc(size - 1);
  if (data) memset(data, 0x3C, size - 1);
  unsigned char* second =
      data ? hrt_local_allocator_allocate(&allocator, size - 1, data) : NULL;
  int holds_data =
      second && all_bytes_are(second, size - 1, 0x3C) && second[size - 1] == 0;
  if (second) hrt_local_allocator_free(&allocator, second, size - 1);
  free(data);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(first && data);
  CHECK(second == first);
  CHECK(holds_data);
}

static void small_buffers_are_not_cached(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_local_allocator_t allocator;
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  const size_t size = HRT_LOCAL_ALLOCATOR_MIN_CACHED_BYTES - 64;
  unsigned char* block = hrt_local_allocator_allocate(&allocator, size, NULL);
  int zero =
      block && all_bytes_are(block, size, 0) && (uintptr_t)block % 64 == 0;
  int cached = block && hrt_local_allocator_free(&allocator, block, size);
  // Zero bytes still get addressable storage.
  void* empty = hrt_local_allocator_allocate(&allocator, 0, NULL);
  if (empty) hrt_local_allocator_free(&allocator, empty, 0);
  size_t cached_bytes = hrt_local_allocator_cached_bytes(&allocator);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(zero);
  CHECK(!cached);
  CHECK(empty != NULL);
  CHECK_EQ_INT(cached_bytes, 0);
}

static void cache_keeps_at_most_its_block_count(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_local_allocator_t allocator;
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  enum { COUNT = HRT_LOCAL_ALLOCATOR_MAX_CACHED_BLOCKS + 8 };
  static void* blocks[COUNT];
  const size_t size = HRT_LOCAL_ALLOCATOR_MIN_CACHED_BYTES;
  int allocated = 1;
  for (int i = 0; i < COUNT; ++i) {
    blocks[i] = hrt_local_allocator_allocate(&allocator, size, NULL);
    allocated = allocated && blocks[i];
  }
  for (int i = 0; i < COUNT; ++i) {
    if (blocks[i]) hrt_local_allocator_free(&allocator, blocks[i], size);
  }
  int64_t cached = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(allocated);
  CHECK_EQ_INT(cached, HRT_LOCAL_ALLOCATOR_MAX_CACHED_BLOCKS);
}

static void default_byte_bound_is_an_eighth_of_small_hosts(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_local_allocator_t allocator;
  // A host of 64 MiB: the cache keeps at most 8 MiB.
  CHECK_OK(hrt_local_allocator_initialize(64 * MIB, &allocator));
  void* blocks[12];
  for (int i = 0; i < 12; ++i) {
    blocks[i] = hrt_local_allocator_allocate(&allocator, MIB, NULL);
  }
  for (int i = 0; i < 12; ++i) {
    if (blocks[i]) hrt_local_allocator_free(&allocator, blocks[i], MIB);
  }
  size_t cached = hrt_local_allocator_cached_bytes(&allocator);
  hrt_local_allocator_trim(&allocator);
  size_t trimmed = hrt_local_allocator_cached_bytes(&allocator);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK_EQ_INT(cached, 8 * MIB);
  CHECK_EQ_INT(trimmed, 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BLOCK), 0);
}

static void environment_sets_or_disables_the_bound(void) {
  hrt_local_allocator_t allocator;
  setenv("HALRT_LOCAL_CACHE_BYTES", "0", 1);
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  void* block = hrt_local_allocator_allocate(&allocator, MIB, NULL);
  int cached = block && hrt_local_allocator_free(&allocator, block, MIB);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(block && !cached);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BLOCK), 0);

  setenv("HALRT_LOCAL_CACHE_BYTES", "2097152", 1);
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  void* blocks[3];
  for (int i = 0; i < 3; ++i) {
    blocks[i] = hrt_local_allocator_allocate(&allocator, MIB, NULL);
  }
  for (int i = 0; i < 3; ++i) {
    if (blocks[i]) hrt_local_allocator_free(&allocator, blocks[i], MIB);
  }
  size_t bytes = hrt_local_allocator_cached_bytes(&allocator);
  hrt_local_allocator_deinitialize(&allocator);
  CHECK_EQ_INT(bytes, 2 * MIB);

  static const char* const bad[] = {"",    "x",  "-1",
                                    "12k", " 5", "99999999999999999999999"};
  for (size_t i = 1; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    setenv("HALRT_LOCAL_CACHE_BYTES", bad[i], 1);
    CHECK_STATUS(hrt_local_allocator_initialize(UINT64_MAX, &allocator),
                 HRT_STATUS_INVALID_ARGUMENT, "HALRT_LOCAL_CACHE_BYTES");
  }
  // Set but empty: the default.
  setenv("HALRT_LOCAL_CACHE_BYTES", bad[0], 1);
  CHECK_OK(hrt_local_allocator_initialize(UINT64_MAX, &allocator));
  int has_cache = allocator.pool != NULL;
  hrt_local_allocator_deinitialize(&allocator);
  CHECK(has_cache);
  // A device made with a bad value fails to be made, naming the variable.
  setenv("HALRT_LOCAL_CACHE_BYTES", "lots", 1);
  hrt_hal_device_t* device = NULL;
  CHECK_STATUS(make_device("local-task?workers=2", &device),
               HRT_STATUS_INVALID_ARGUMENT, "'lots' is not a byte count");
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
}

// Waits up to `seconds` for the live count of `kind` to reach `value`.
static int64_t live_settles_at(hrt_live_kind_t kind, int64_t value,
                               double seconds) {
  int64_t deadline = hrt_time_now_ns() + (int64_t)(seconds * 1e9);
  while (hrt_live_count(kind) != value && hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
  }
  return hrt_live_count(kind);
}

static void idle_device_gives_its_cache_back(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  static const char* const uris[] = {"local-sync", "local-task?workers=2"};
  for (int d = 0; d < 2; ++d) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(uris[d], &device));
    // Freed with no submission ever made: the free itself arms the trim.
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, MIB, NULL, &buffer));
    // Stays cached for a while, then goes (the trim is 0.5 s after idle,
    // so at least that long after this reading).
    int64_t start = hrt_time_now_ns();
    hrt_hal_buffer_release(buffer);
    int64_t cached = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
    int64_t trimmed = live_settles_at(HRT_LIVE_CACHED_BLOCK, 0, 20.0);
    double waited = (double)(hrt_time_now_ns() - start) / 1e9;

    // After a submission that used a buffer freed later by its completion.
    CHECK_OK(hrt_hal_device_allocate_buffer(device, MIB, NULL, &buffer));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 0x5A, 1));
    hrt_hal_command_buffer_finalize(cb);
    completion_t completion;
    CHECK_OK(submit(device, cb, NULL, 0, &completion));
    hrt_hal_buffer_release(buffer);  // the submission holds it
    CHECK_OK(completion_wait(&completion));
    hrt_hal_command_buffer_release(cb);
    int64_t cached_after_work = live_settles_at(HRT_LIVE_CACHED_BLOCK, 1, 5.0);
    int64_t trimmed_after_work =
        live_settles_at(HRT_LIVE_CACHED_BLOCK, 0, 20.0);
    hrt_hal_device_release(device);
    CHECK_EQ_INT(cached, 1);
    CHECK_EQ_INT(trimmed, 0);
    CHECK(waited >= 0.4);
    CHECK_EQ_INT(cached_after_work, 1);
    CHECK_EQ_INT(trimmed_after_work, 0);
    CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BYTES), 0);
  }
}

static void destroyed_device_frees_its_cache_at_once(void) {
  unsetenv("HALRT_LOCAL_CACHE_BYTES");
  hrt_hal_device_t* device = NULL;
  CHECK_OK(make_device("local-task?workers=2", &device));
  hrt_hal_buffer_t* buffers[4];
  for (int i = 0; i < 4; ++i) {
    CHECK_OK(
        hrt_hal_device_allocate_buffer(device, 3 * MIB, NULL, &buffers[i]));
  }
  for (int i = 0; i < 4; ++i) hrt_hal_buffer_release(buffers[i]);
  int64_t cached = hrt_live_count(HRT_LIVE_CACHED_BLOCK);
  int64_t bytes = hrt_live_count(HRT_LIVE_CACHED_BYTES);
  hrt_hal_device_release(device);  // destroyed here, on this thread
  CHECK_EQ_INT(cached, 4);
  CHECK_EQ_INT(bytes, 4 * 4 * MIB);  // 3 MiB rounds to whole 2 MiB
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BLOCK), 0);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_CACHED_BYTES), 0);
}

TEST_MAIN(TEST_CASE(reused_block_reads_as_zero),
          TEST_CASE(reused_block_with_data_has_zeros_after_it),
          TEST_CASE(small_buffers_are_not_cached),
          TEST_CASE(cache_keeps_at_most_its_block_count),
          TEST_CASE(default_byte_bound_is_an_eighth_of_small_hosts),
          TEST_CASE(environment_sets_or_disables_the_bound),
          TEST_CASE(idle_device_gives_its_cache_back),
          TEST_CASE(destroyed_device_frees_its_cache_at_once),
          TEST_CASE(every_object_is_destroyed))

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // MAP_ANONYMOUS, MADV_HUGEPAGE
#endif
#include "base/block_pool.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/live.h"
#include "base/ref.h"
#include "base/threads.h"

// Every block's data is preceded by this header, in the
// HRT_BLOCK_POOL_ALIGNMENT bytes just before it, so that a block can be given
// back by its data pointer. For mapped blocks the header sits at the end of one
// extra page before the 2 MiB-aligned data, so the data's huge pages are not
// shifted by it.
typedef struct hrt_block_header_s hrt_block_header_t;
struct hrt_block_header_s {
  hrt_block_pool_t* pool;
  void* base;            // what free() or munmap() takes
  size_t mapped_length;  // munmap() length; 0 for aligned_alloc() blocks
  size_t capacity;
  // The fields below are guarded by pool->mutex.
  hrt_block_header_t* newer;  // cache list links, while cached
  hrt_block_header_t* older;
  uint32_t state;
};
_Static_assert(sizeof(hrt_block_header_t) <= HRT_BLOCK_POOL_ALIGNMENT,
               "the header fits in the space before the data");

// Distinct from zero and from each other, so that most double give-backs and
// foreign pointers are caught.
#define HRT_BLOCK_STATE_OUTSTANDING 0x6F757473u
#define HRT_BLOCK_STATE_CACHED 0x63616368u

// Requests above this are refused, so that rounding never overflows.
#define HRT_BLOCK_POOL_MAX_SIZE (SIZE_MAX / 4)
#define HRT_BLOCK_POOL_MIN_STEP ((size_t)4096)

struct hrt_block_pool_s {
  hrt_ref_t ref;
  size_t max_cached_bytes;
  size_t max_cached_count;
  bool count_live;
  size_t page_size;
  hrt_mutex_t mutex;
  // Guarded by mutex. The cache is one list, newest (most recently given
  // back) first; acquire takes the newest block of the class and eviction
  // takes the oldest.
  hrt_block_header_t* newest;
  hrt_block_header_t* oldest;
  bool closed;  // the last reference was released
  hrt_block_pool_stats_t stats;
};

static hrt_block_header_t* hrt_block_header(const void* block) {
  return (hrt_block_header_t*)((char*)block - HRT_BLOCK_POOL_ALIGNMENT);
}

static void* hrt_block_data(hrt_block_header_t* header) {
  return (char*)header + HRT_BLOCK_POOL_ALIGNMENT;
}

static size_t hrt_round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The class of `size`: four classes per power of two, then whole 2 MiB from
// HRT_BLOCK_POOL_HUGE_SIZE up. 0 when `size` is too large.
static size_t hrt_block_pool_class_capacity(size_t size) {
  if (size > HRT_BLOCK_POOL_MAX_SIZE) return 0;
  size_t step = HRT_BLOCK_POOL_MIN_STEP;
  while (size / 8 >= step) step *= 2;  // max(4 KiB, 2^floor(log2(size)) / 4)
  size_t capacity = hrt_round_up(size ? size : 1, step);
  if (capacity >= HRT_BLOCK_POOL_HUGE_SIZE) {
    capacity = hrt_round_up(capacity, HRT_BLOCK_POOL_HUGE_SIZE);
  }
  return capacity;
}

static hrt_block_header_t* hrt_block_allocate_small(size_t capacity) {
  void* base = aligned_alloc(HRT_BLOCK_POOL_ALIGNMENT,
                             HRT_BLOCK_POOL_ALIGNMENT + capacity);
  if (!base) return NULL;
  hrt_block_header_t* header = base;
  header->base = base;
  header->mapped_length = 0;
  return header;
}

// Maps `capacity` bytes at a 2 MiB boundary plus one page before it for the
// header: maps 2 MiB more than that and unmaps the ends.
static hrt_block_header_t* hrt_block_map_huge(size_t capacity,
                                              size_t page_size) {
  size_t length = capacity + HRT_BLOCK_POOL_HUGE_SIZE;
  char* raw = mmap(NULL, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  // raw is page-aligned, so data <= raw + 2 MiB and the block fits.
  uintptr_t data_address =
      ((uintptr_t)raw + page_size + HRT_BLOCK_POOL_HUGE_SIZE - 1) &
      ~(uintptr_t)(HRT_BLOCK_POOL_HUGE_SIZE - 1);
  char* data = (char*)data_address;
  char* start = data - page_size;
  char* end = data + capacity;
  if (start > raw) munmap(raw, (size_t)(start - raw));
  if (raw + length > end) munmap(end, (size_t)(raw + length - end));
#ifdef MADV_HUGEPAGE
  // Advice only: without transparent huge pages the block still works.
  madvise(data, capacity, MADV_HUGEPAGE);
#endif
  hrt_block_header_t* header = hrt_block_header(data);
  header->base = start;
  header->mapped_length = capacity + page_size;
  return header;
}

static hrt_block_header_t* hrt_block_allocate(hrt_block_pool_t* pool,
                                              size_t capacity) {
  hrt_block_header_t* header =
      capacity >= HRT_BLOCK_POOL_HUGE_SIZE
          ? hrt_block_map_huge(capacity, pool->page_size)
          : hrt_block_allocate_small(capacity);
  if (!header) return NULL;
  header->pool = pool;
  header->capacity = capacity;
  header->newer = NULL;
  header->older = NULL;
  header->state = HRT_BLOCK_STATE_OUTSTANDING;
  return header;
}

static void hrt_block_free(hrt_block_header_t* header) {
  if (header->mapped_length) {
    munmap(header->base, header->mapped_length);
  } else {
    free(header->base);
  }
}

// Frees a chain linked through `older` (a list detached from the cache).
static void hrt_block_free_chain(hrt_block_header_t* header) {
  while (header) {
    hrt_block_header_t* older = header->older;
    hrt_block_free(header);
    header = older;
  }
}

// Requires pool->mutex. Adds `count` blocks of `bytes` in all to the cache's
// counters (negative: removes them).
static void hrt_block_pool_count_cached(hrt_block_pool_t* pool, int64_t count,
                                        size_t bytes) {
  pool->stats.cached_count += (size_t)count;
  if (count < 0) {
    pool->stats.cached_bytes -= bytes;
  } else {
    pool->stats.cached_bytes += bytes;
  }
  if (pool->count_live) {
    hrt_live_add(HRT_LIVE_CACHED_BLOCK, count);
    hrt_live_add(HRT_LIVE_CACHED_BYTES,
                 count < 0 ? -(int64_t)bytes : (int64_t)bytes);
  }
}

// Requires pool->mutex.
static void hrt_block_pool_unlink(hrt_block_pool_t* pool,
                                  hrt_block_header_t* header) {
  if (header->newer) {
    header->newer->older = header->older;
  } else {
    pool->newest = header->older;
  }
  if (header->older) {
    header->older->newer = header->newer;
  } else {
    pool->oldest = header->newer;
  }
  header->newer = NULL;
  header->older = NULL;
  hrt_block_pool_count_cached(pool, -1, header->capacity);
}

// Requires pool->mutex. Empties the cache and returns its blocks as a chain
// for hrt_block_free_chain(), to be freed after unlocking.
static hrt_block_header_t* hrt_block_pool_detach_cache(hrt_block_pool_t* pool) {
  hrt_block_header_t* chain = pool->newest;
  pool->newest = NULL;
  pool->oldest = NULL;
  hrt_block_pool_count_cached(pool, -(int64_t)pool->stats.cached_count,
                              pool->stats.cached_bytes);
  return chain;
}

static void hrt_block_pool_destroy(hrt_block_pool_t* pool) {
  hrt_mutex_deinit(&pool->mutex);
  free(pool);
  hrt_live_add(HRT_LIVE_BLOCK_POOL, -1);
}

hrt_status_t hrt_block_pool_create_with_options(
    const hrt_block_pool_options_t* options, hrt_block_pool_t** out_pool) {
  *out_pool = NULL;
  hrt_block_pool_t* pool = calloc(1, sizeof(*pool));
  if (!pool) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating a block pool");
  }
  hrt_ref_init(&pool->ref);
  pool->max_cached_bytes = options->max_cached_bytes;
  pool->max_cached_count = options->max_cached_count;
  pool->count_live = options->count_live;
  long page_size = sysconf(_SC_PAGESIZE);
  pool->page_size = page_size > 0 ? (size_t)page_size : 4096;
  hrt_mutex_init(&pool->mutex);
  hrt_live_add(HRT_LIVE_BLOCK_POOL, 1);
  *out_pool = pool;
  return HRT_OK;
}

hrt_status_t hrt_block_pool_create(size_t max_cached_bytes,
                                   hrt_block_pool_t** out_pool) {
  hrt_block_pool_options_t options = {.max_cached_bytes = max_cached_bytes,
                                      .max_cached_count = SIZE_MAX};
  return hrt_block_pool_create_with_options(&options, out_pool);
}

void hrt_block_pool_retain(hrt_block_pool_t* pool) {
  if (pool) hrt_ref_retain(&pool->ref);
}

void hrt_block_pool_release(hrt_block_pool_t* pool) {
  if (!pool || !hrt_ref_release(&pool->ref)) return;
  hrt_mutex_lock(&pool->mutex);
  pool->closed = true;
  hrt_block_header_t* chain = hrt_block_pool_detach_cache(pool);
  bool destroy = pool->stats.outstanding_count == 0;
  hrt_mutex_unlock(&pool->mutex);
  hrt_block_free_chain(chain);
  // Otherwise the last hrt_block_pool_give_back() destroys it.
  if (destroy) hrt_block_pool_destroy(pool);
}

// hrt_block_pool_acquire; sets `*out_mapped` when the block is freshly
// mapped (its pages read as zero).
static void* hrt_block_pool_take(hrt_block_pool_t* pool, size_t size,
                                 bool* out_mapped) {
  *out_mapped = false;
  size_t capacity = hrt_block_pool_class_capacity(size);
  if (!capacity) return NULL;

  hrt_mutex_lock(&pool->mutex);
  hrt_block_header_t* header = pool->newest;
  while (header && header->capacity != capacity) header = header->older;
  if (header) {
    hrt_block_pool_unlink(pool, header);
    header->state = HRT_BLOCK_STATE_OUTSTANDING;
    ++pool->stats.outstanding_count;
    ++pool->stats.reused_count;
  }
  hrt_mutex_unlock(&pool->mutex);
  if (header) return hrt_block_data(header);

  header = hrt_block_allocate(pool, capacity);
  if (!header) {
    // Memory held in the cache may be what is missing: free it and retry.
    hrt_mutex_lock(&pool->mutex);
    hrt_block_header_t* chain = hrt_block_pool_detach_cache(pool);
    hrt_mutex_unlock(&pool->mutex);
    if (!chain) return NULL;
    hrt_block_free_chain(chain);
    header = hrt_block_allocate(pool, capacity);
    if (!header) return NULL;
  }
  hrt_mutex_lock(&pool->mutex);
  ++pool->stats.outstanding_count;
  ++pool->stats.allocated_count;
  hrt_mutex_unlock(&pool->mutex);
  *out_mapped = header->mapped_length != 0;
  return hrt_block_data(header);
}

void* hrt_block_pool_acquire(hrt_block_pool_t* pool, size_t size) {
  bool mapped;
  return hrt_block_pool_take(pool, size, &mapped);
}

void* hrt_block_pool_acquire_zeroed(hrt_block_pool_t* pool, size_t size) {
  bool mapped;
  void* block = hrt_block_pool_take(pool, size, &mapped);
  if (block && !mapped) memset(block, 0, size);
  return block;
}

void hrt_block_pool_trim(hrt_block_pool_t* pool) {
  hrt_mutex_lock(&pool->mutex);
  hrt_block_header_t* chain = hrt_block_pool_detach_cache(pool);
  hrt_mutex_unlock(&pool->mutex);
  hrt_block_free_chain(chain);
}

size_t hrt_block_pool_block_capacity(const void* block) {
  return hrt_block_header(block)->capacity;
}

void hrt_block_pool_give_back(void* block) {
  if (!block) return;
  hrt_block_header_t* header = hrt_block_header(block);
  hrt_block_pool_t* pool = header->pool;

  hrt_mutex_lock(&pool->mutex);
  if (header->state != HRT_BLOCK_STATE_OUTSTANDING) {
    fprintf(stderr,
            "halrt: hrt_block_pool_give_back(%p): not an outstanding block "
            "(given back twice?)\n",
            block);
    abort();
  }
  --pool->stats.outstanding_count;
  hrt_block_header_t* evicted = NULL;  // chain through `older`
  bool keep = !pool->closed && header->capacity <= pool->max_cached_bytes &&
              pool->max_cached_count > 0;
  if (keep) {
    while (pool->stats.cached_bytes + header->capacity >
               pool->max_cached_bytes ||
           pool->stats.cached_count == pool->max_cached_count) {
      hrt_block_header_t* oldest = pool->oldest;
      hrt_block_pool_unlink(pool, oldest);
      oldest->older = evicted;
      evicted = oldest;
    }
    header->state = HRT_BLOCK_STATE_CACHED;
    header->older = pool->newest;
    header->newer = NULL;
    if (pool->newest) {
      pool->newest->newer = header;
    } else {
      pool->oldest = header;
    }
    pool->newest = header;
    hrt_block_pool_count_cached(pool, 1, header->capacity);
  } else {
    header->state = 0;
  }
  bool destroy = pool->closed && pool->stats.outstanding_count == 0;
  hrt_mutex_unlock(&pool->mutex);

  hrt_block_free_chain(evicted);
  if (!keep) hrt_block_free(header);
  if (destroy) hrt_block_pool_destroy(pool);
}

void hrt_block_pool_stats(hrt_block_pool_t* pool,
                          hrt_block_pool_stats_t* out_stats) {
  hrt_mutex_lock(&pool->mutex);
  *out_stats = pool->stats;
  hrt_mutex_unlock(&pool->mutex);
}

// A pool of large host blocks that keeps freed blocks warm for reuse.
//
// Why: on some hosts (paravirtualized guests in particular) the first touch of
// every page is far more expensive than the copy into it, so a fresh malloc
// block per traced tensor costs more than the trace. The pool keeps returned
// blocks, with their pages still faulted in, and hands them out again.
//
// Sizes: a request is rounded up to a size class, four classes per power of
// two in whole 4 KiB (at most 25% slack from 16 KiB up). Classes below 2 MiB
// come from aligned_alloc. Classes of 2 MiB and more are rounded to whole
// 2 MiB (up to 2 MiB slack between 2 and 8 MiB; pages never written are never
// faulted in), mapped with mmap so that the data starts on a 2 MiB boundary,
// and advised MADV_HUGEPAGE where the platform has it. Data is always at least
// 64-byte aligned. A cached block is reused only for a request of the same
// class, so the same tensor size traced again gets a warm block back.
//
// Cache bound: cached blocks (capacities, headers not counted) never total
// more than `max_cached_bytes`, nor number more than `max_cached_count`.
// Returning a block evicts the least recently returned cached blocks until it
// fits; a block larger than the bound itself is freed at once. When an
// allocation fails, the pool frees its cache and tries once more before
// reporting failure. hrt_block_pool_trim() frees the cache on demand.
//
// Live counts: a pool created with `count_live` adds its cached blocks and
// their capacities to HRT_LIVE_CACHED_BLOCK and HRT_LIVE_CACHED_BYTES while
// they are cached.
//
// Threads: every function may be called from any thread, concurrently (one
// mutex guards the cache). The system calls that map, unmap and free memory
// run outside the lock.
//
// Ownership and lifetime: the pool is reference counted and starts with one
// reference owned by its creator. A block remembers its pool, so it is given
// back with the data pointer alone (for example from an external
// ArrayBuffer's finalizer, which receives only that pointer). When the last
// reference is released the cache is freed at once; the pool itself stays
// allocated until its last outstanding block comes back, and blocks that come
// back after that are freed rather than cached. Blocks therefore need no pool
// reference of their own, and the pool counts as live (HRT_LIVE_BLOCK_POOL)
// until both its references and its blocks are gone.
#ifndef HRT_BASE_BLOCK_POOL_H_
#define HRT_BASE_BLOCK_POOL_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct hrt_block_pool_s hrt_block_pool_t;

// Classes of this capacity and above are mapped 2 MiB-aligned and advised as
// huge pages.
#define HRT_BLOCK_POOL_HUGE_SIZE ((size_t)2 << 20)
// The alignment of every block's data.
#define HRT_BLOCK_POOL_ALIGNMENT ((size_t)64)

typedef struct hrt_block_pool_options_s {
  // Either may be 0: nothing is kept (every block returned is freed).
  size_t max_cached_bytes;
  size_t max_cached_count;
  bool count_live;  // cached blocks count in HRT_LIVE_CACHED_*
} hrt_block_pool_options_t;

// RESOURCE_EXHAUSTED when the pool cannot be allocated.
hrt_status_t hrt_block_pool_create_with_options(
    const hrt_block_pool_options_t* options,
    hrt_block_pool_t** out_pool) HRT_MUST_USE;
// A pool bounded by bytes only, not counted live. `max_cached_bytes` may be 0.
hrt_status_t hrt_block_pool_create(size_t max_cached_bytes,
                                   hrt_block_pool_t** out_pool) HRT_MUST_USE;
// Both ignore NULL.
void hrt_block_pool_retain(hrt_block_pool_t* pool);
void hrt_block_pool_release(hrt_block_pool_t* pool);

// A block of at least `size` bytes (uninitialized; a reused block holds its
// previous contents), or NULL when the memory cannot be had (including sizes
// too large to round). The caller owns the block until it hands it to
// hrt_block_pool_give_back(); it does not hold a pool reference for it.
// The caller must hold a reference to `pool`.
void* hrt_block_pool_acquire(hrt_block_pool_t* pool, size_t size);

// Like hrt_block_pool_acquire, but the first `size` bytes read as zero: a
// reused block (or one from the heap) is cleared with memset; a freshly
// mapped one is zero already and is not touched.
void* hrt_block_pool_acquire_zeroed(hrt_block_pool_t* pool, size_t size);

// Frees every cached block now (for example when the pool's user goes idle).
void hrt_block_pool_trim(hrt_block_pool_t* pool);

// The usable bytes of `block` (its class capacity, >= the size acquired).
size_t hrt_block_pool_block_capacity(const void* block);

// Hands `block`, from hrt_block_pool_acquire() of any pool, back to its pool;
// it may be called after the pool's last reference was released. NULL is
// ignored. Giving back a block twice, or a pointer that did not come from a
// pool, aborts the process when detected.
void hrt_block_pool_give_back(void* block);

typedef struct hrt_block_pool_stats_s {
  size_t cached_bytes;       // sum of the capacities of cached blocks
  size_t cached_count;       // blocks in the cache
  size_t outstanding_count;  // blocks acquired and not yet given back
  size_t reused_count;       // acquires served from the cache
  size_t allocated_count;    // acquires that allocated a new block
} hrt_block_pool_stats_t;

// A consistent snapshot of the pool's counters.
void hrt_block_pool_stats(hrt_block_pool_t* pool,
                          hrt_block_pool_stats_t* out_stats);

#endif  // HRT_BASE_BLOCK_POOL_H_

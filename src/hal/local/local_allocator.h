// Host memory for a local device's buffers: a per-device cache that keeps
// freed blocks warm, so that per-call outputs and locals reuse pages already
// faulted in instead of fresh ones (on some hosts a fresh page costs more
// than the work that writes it).
//
// Sizes: storage is 64-byte aligned and its length rounded up to 64 bytes
// (at least 64). Below HRT_LOCAL_ALLOCATOR_MIN_CACHED_BYTES it is plain
// aligned_alloc: glibc keeps blocks that small in its own bins (never
// mmapped), and a cache class would round a 64-byte tensor up to 4 KiB.
// From there up it comes from a block pool (base/block_pool.h): four size
// classes per power of two (at most 25% slack), whole 2 MiB from 2 MiB up
// (mapped 2 MiB-aligned and advised as huge pages); a freed block is reused
// by a later request of the same class.
//
// Bound: the cache keeps at most HRT_LOCAL_ALLOCATOR_MAX_CACHED_BLOCKS blocks
// and max_cached_bytes bytes (block capacities): by default
// HRT_LOCAL_ALLOCATOR_MAX_CACHED_BYTES or an eighth of the host's memory,
// whichever is less, so that one call's working set of a mid-sized model
// stays warm without holding much of a small host. The environment variable
// HALRT_LOCAL_CACHE_BYTES, read when the device is created, sets the byte
// bound instead (0: no cache; every buffer is plain aligned_alloc). Returning
// a block beyond the bound evicts the least recently freed ones.
//
// Zeros: storage handed out never shows an earlier user's data: a buffer
// without initial data reads as zero over its rounded length; one with
// initial data holds that data and zeros after it. Reused blocks are
// cleared with memset on the allocating thread; freshly mapped ones are
// zero already. With HRT_HAL_UNINITIALIZED (hal/device.h) only the bytes
// after `byte_length` are zeroed: the caller overwrites the rest before
// anything reads it.
//
// Trim: hrt_local_allocator_trim() frees every cached block; the device
// calls it from its queue thread once it has been idle for
// HRT_LOCAL_ALLOCATOR_IDLE_TRIM_NS, and deinitialize frees the rest when the
// device is destroyed. Cached blocks and their bytes count in
// halrt.liveObjects() (cachedBlock, cachedBytes).
//
// Threads: allocate and free may run on any thread, concurrently (the pool
// has its own lock): allocate runs where buffers are made (the JS thread
// for device.empty()/tensor() and for an invocation's outputs and locals,
// which are allocated as the call is submitted); free runs where the last
// reference to a buffer drops (the queue thread for locals when a call
// completes; the JS thread, or a finalizer there, for outputs). trim and
// cached_bytes may run on any thread; initialize and deinitialize belong to
// whoever creates and destroys the device, with no buffer left.
#ifndef HRT_HAL_LOCAL_LOCAL_ALLOCATOR_H_
#define HRT_HAL_LOCAL_LOCAL_ALLOCATOR_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/block_pool.h"
#include "base/status.h"

#define HRT_LOCAL_ALLOCATOR_MIN_CACHED_BYTES ((size_t)64 << 10)
#define HRT_LOCAL_ALLOCATOR_MAX_CACHED_BYTES ((uint64_t)256 << 20)
#define HRT_LOCAL_ALLOCATOR_MAX_CACHED_BLOCKS 128
#define HRT_LOCAL_ALLOCATOR_IDLE_TRIM_NS ((int64_t)500 * 1000 * 1000)

typedef struct hrt_local_allocator_s {
  hrt_block_pool_t* pool;  // NULL: nothing is cached
} hrt_local_allocator_t;

// Reads HALRT_LOCAL_CACHE_BYTES (INVALID_ARGUMENT, naming it, when it is not
// a decimal byte count) and creates the cache. `physical_memory` is the
// host's memory in bytes (UINT64_MAX when unknown).
hrt_status_t hrt_local_allocator_initialize(
    uint64_t physical_memory, hrt_local_allocator_t* allocator) HRT_MUST_USE;
// Frees the cache. Every block must have been freed.
void hrt_local_allocator_deinitialize(hrt_local_allocator_t* allocator);

// Storage for a buffer of `byte_length` bytes (the caller checked that it is
// at most SIZE_MAX - 64), initialised from `initial_data` when it is not NULL
// and zero-filled otherwise, or left as it was with HRT_HAL_UNINITIALIZED
// (see Zeros); NULL when out of memory.
void* hrt_local_allocator_allocate(hrt_local_allocator_t* allocator,
                                   size_t byte_length,
                                   const void* initial_data);
// Takes back `storage` from allocate of the same `byte_length`. Returns true
// when it went back to the cache's pool, which keeps it within the bounds
// (the device then arms its idle trim); false when it was freed.
bool hrt_local_allocator_free(hrt_local_allocator_t* allocator, void* storage,
                              size_t byte_length);

// Frees every cached block.
void hrt_local_allocator_trim(hrt_local_allocator_t* allocator);
// Bytes cached now (0 without a cache).
size_t hrt_local_allocator_cached_bytes(hrt_local_allocator_t* allocator);

#endif  // HRT_HAL_LOCAL_LOCAL_ALLOCATOR_H_

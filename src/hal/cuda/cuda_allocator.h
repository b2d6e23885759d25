// Device memory for the CUDA device's buffers, stream-ordered on the
// device's one stream, so that allocating and freeing never wait for the
// GPU on the caller's thread.
//
// Two strategies behind one API, chosen at initialisation:
// - Pool (the driver exports cuMemAllocAsync, cuMemFreeAsync,
//   cuDeviceGetDefaultMemPool, cuMemPoolSetAttribute and cuMemPoolTrimTo,
//   the device reports CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, and the
//   release threshold can be set):
//   blocks come from the device's default memory pool with cuMemAllocAsync
//   and go back with cuMemFreeAsync, both on the stream. The pool's release
//   threshold is set to UINT64_MAX, so that the driver keeps freed memory
//   for reuse instead of returning it at every synchronisation; trim gives
//   it back (cuMemPoolTrimTo to 0).
// - Cache (otherwise): blocks are cuMemAlloc allocations, rounded up to
//   HRT_CUDA_ALLOCATOR_GRANULE bytes. A freed block is kept for reuse by a
//   later request it fits (at least the request, at most twice it), up to
//   HRT_CUDA_ALLOCATOR_MAX_CACHED blocks and
//   HRT_CUDA_ALLOCATOR_MAX_CACHED_BYTES bytes; a block beyond those bounds
//   waits in a release list. cuMemFree (which waits for the GPU) runs only
//   in release_pending, trim and deinitialize, which the device's own
//   threads call.
//
// The rule that makes both safe: free a block only when every piece of work
// that uses it has already been enqueued on the stream (it may still be
// queued or running). Work enqueued later on the same stream runs after, so
// the pool's stream-ordered free runs after the last use, and a cached block
// handed to a new allocation is used by work that runs after the old work.
// The device guarantees this by freeing a buffer only when its last
// reference drops (cuda_device.h).
//
// Threads: every function needs the device's context current on the calling
// thread. allocate and free may be called from any thread (the allocator
// has its own lock) and never wait for the GPU: in the pool, cuMemAllocAsync
// and cuMemFreeAsync; in the cache, a cached block, or cuMemAlloc on a miss
// (which CUDA does not document as waiting for queued work, unlike
// cuMemFree). release_pending, trim and deinitialize are for the device's
// own threads: they may call cuMemFree (deinitialize also runs on the
// creating thread when device creation fails, with nothing to free).
#ifndef HRT_HAL_CUDA_CUDA_ALLOCATOR_H_
#define HRT_HAL_CUDA_CUDA_ALLOCATOR_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "base/threads.h"
#include "hal/cuda/cuda_symbols.h"

#define HRT_CUDA_ALLOCATOR_GRANULE ((size_t)512)
#define HRT_CUDA_ALLOCATOR_MAX_CACHED 64
#define HRT_CUDA_ALLOCATOR_MAX_CACHED_BYTES ((size_t)256 << 20)

// One allocation; owned by the allocator's caller between allocate and
// free, by the allocator otherwise.
typedef struct hrt_cuda_block_s {
  struct hrt_cuda_block_s* next;  // in the allocator's lists
  hrt_cu_deviceptr_t pointer;
  size_t size;  // bytes allocated (at least the request)
} hrt_cuda_block_t;

typedef struct hrt_cuda_allocator_s {
  const hrt_cuda_symbols_t* cu;
  hrt_cu_stream_t stream;
  hrt_cu_mempool_t pool;  // NULL: the cache strategy
  hrt_mutex_t mutex;
  // Cache only; guarded by mutex.
  hrt_cuda_block_t* cached;  // kept for reuse
  uint32_t cached_count;
  size_t cached_bytes;
  hrt_cuda_block_t* releases;  // freed beyond the bounds, not yet released
} hrt_cuda_allocator_t;

// Chooses the strategy for `device`: the pool when every step of setting it
// up succeeds (finding it, setting its release threshold), else the cache.
void hrt_cuda_allocator_initialize(const hrt_cuda_symbols_t* cu,
                                   hrt_cu_device_t device,
                                   hrt_cu_stream_t stream,
                                   hrt_cuda_allocator_t* allocator);
// Releases every cached and pending block (cache) or trims the pool. No
// block may be in use by a buffer any more.
void hrt_cuda_allocator_deinitialize(hrt_cuda_allocator_t* allocator);

// Whether the allocator uses the driver's memory pool.
bool hrt_cuda_allocator_uses_pool(const hrt_cuda_allocator_t* allocator);

// A block of at least `size` bytes (1 when `size` is 0), usable by work
// enqueued on the stream after this returns. Failures are what the driver
// reported (out of memory is RESOURCE_EXHAUSTED); after one, the cache's
// blocks wait in the release list, so that a retry after release_pending
// finds the memory.
hrt_status_t hrt_cuda_allocator_allocate(
    hrt_cuda_allocator_t* allocator, size_t size,
    hrt_cuda_block_t** out_block) HRT_MUST_USE;
// Takes `block` back (see the rule above); allocates nothing, so it cannot
// fail. Returns true when the block waits in the release list for
// release_pending on a device thread.
bool hrt_cuda_allocator_free(hrt_cuda_allocator_t* allocator,
                             hrt_cuda_block_t* block);

// Device threads only: cuMemFree of the blocks in the release list.
void hrt_cuda_allocator_release_pending(hrt_cuda_allocator_t* allocator);
// Device threads only, when the device is idle: gives back every cached
// block (cache) or what the pool holds unused (pool).
void hrt_cuda_allocator_trim(hrt_cuda_allocator_t* allocator);

#endif  // HRT_HAL_CUDA_CUDA_ALLOCATOR_H_

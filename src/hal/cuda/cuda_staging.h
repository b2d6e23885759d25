// Pinned (page-locked) host memory for the CUDA device's transfers.
//
// Asynchronous copies between the device and host only overlap with other
// work, and are only safe to leave in flight, when the host side is pinned
// (cuMemAllocHost). Each submission takes one staging block large enough for
// all its host transfers (update sources, read and trace destinations) on
// the issue thread and gives it back on the completion thread once its last
// event has completed.
//
// The pool keeps released blocks for reuse, but never more than
// HRT_CUDA_STAGING_MAX_CACHED blocks or HRT_CUDA_STAGING_MAX_CACHED_BYTES
// bytes; anything beyond is freed at release. Blocks in use are not
// limited: a submission gets what it needs or RESOURCE_EXHAUSTED.
//
// Threads: acquire and release may be called from any thread that has the
// pool's CUDA context current; the pool has its own lock.
#ifndef HRT_HAL_CUDA_CUDA_STAGING_H_
#define HRT_HAL_CUDA_CUDA_STAGING_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threads.h"
#include "hal/cuda/cuda_symbols.h"

#define HRT_CUDA_STAGING_MAX_CACHED 8
#define HRT_CUDA_STAGING_MAX_CACHED_BYTES ((size_t)64 << 20)

typedef struct hrt_cuda_staging_s {
  void* host;   // NULL for an empty block
  size_t size;  // usable bytes
} hrt_cuda_staging_t;

typedef struct hrt_cuda_staging_pool_s {
  const hrt_cuda_symbols_t* symbols;
  hrt_mutex_t mutex;
  // Guarded by mutex.
  uint32_t cached_count;
  size_t cached_bytes;
  hrt_cuda_staging_t cached[HRT_CUDA_STAGING_MAX_CACHED];
} hrt_cuda_staging_pool_t;

void hrt_cuda_staging_pool_initialize(const hrt_cuda_symbols_t* symbols,
                                      hrt_cuda_staging_pool_t* pool);
// Frees every cached block. No block may be in use.
void hrt_cuda_staging_pool_deinitialize(hrt_cuda_staging_pool_t* pool);

// A block of at least `size` bytes (an empty block for 0). Failures are
// RESOURCE_EXHAUSTED, or what cuMemAllocHost reported.
hrt_status_t hrt_cuda_staging_acquire(
    hrt_cuda_staging_pool_t* pool, uint64_t size,
    hrt_cuda_staging_t* out_block) HRT_MUST_USE;
void hrt_cuda_staging_release(hrt_cuda_staging_pool_t* pool,
                              hrt_cuda_staging_t block);

#endif  // HRT_HAL_CUDA_CUDA_STAGING_H_

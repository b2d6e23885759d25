#include "hal/cuda/cuda_staging.h"

// Requests are rounded up to a power of two from 64 KiB (so that blocks are
// reusable by the next, slightly larger, submission) and, past 64 MiB, to a
// multiple of 1 MiB.
#define HRT_CUDA_STAGING_MIN_SIZE ((size_t)64 << 10)
#define HRT_CUDA_STAGING_LARGE ((size_t)64 << 20)
#define HRT_CUDA_STAGING_LARGE_STEP ((size_t)1 << 20)

void hrt_cuda_staging_pool_initialize(const hrt_cuda_symbols_t* symbols,
                                      hrt_cuda_staging_pool_t* pool) {
  *pool = (hrt_cuda_staging_pool_t){.symbols = symbols};
  hrt_mutex_init(&pool->mutex);
}

void hrt_cuda_staging_pool_deinitialize(hrt_cuda_staging_pool_t* pool) {
  for (uint32_t i = 0; i < pool->cached_count; ++i) {
    // Nothing to report to: freeing only fails on a lost context.
    (void)pool->symbols->cuMemFreeHost(pool->cached[i].host);
  }
  hrt_mutex_deinit(&pool->mutex);
}

static size_t hrt_cuda_staging_round(size_t size) {
  if (size > HRT_CUDA_STAGING_LARGE) {
    return (size + HRT_CUDA_STAGING_LARGE_STEP - 1) &
           ~(HRT_CUDA_STAGING_LARGE_STEP - 1);
  }
  size_t rounded = HRT_CUDA_STAGING_MIN_SIZE;
  while (rounded < size) rounded *= 2;
  return rounded;
}

hrt_status_t hrt_cuda_staging_acquire(hrt_cuda_staging_pool_t* pool,
                                      uint64_t size,
                                      hrt_cuda_staging_t* out_block) {
  if (size == 0) {
    *out_block = (hrt_cuda_staging_t){NULL, 0};
    return HRT_OK;
  }
  if (size > SIZE_MAX - HRT_CUDA_STAGING_LARGE_STEP) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "cannot stage %llu bytes", (unsigned long long)size);
  }
  // The smallest cached block that fits.
  hrt_mutex_lock(&pool->mutex);
  uint32_t best = pool->cached_count;
  for (uint32_t i = 0; i < pool->cached_count; ++i) {
    if (pool->cached[i].size >= size &&
        (best == pool->cached_count ||
         pool->cached[i].size < pool->cached[best].size)) {
      best = i;
    }
  }
  if (best < pool->cached_count) {
    *out_block = pool->cached[best];
    pool->cached[best] = pool->cached[--pool->cached_count];
    pool->cached_bytes -= out_block->size;
    hrt_mutex_unlock(&pool->mutex);
    return HRT_OK;
  }
  hrt_mutex_unlock(&pool->mutex);
  const size_t rounded = hrt_cuda_staging_round((size_t)size);
  void* host = NULL;
  hrt_status_t status =
      HRT_CUDA_CALL(pool->symbols, cuMemAllocHost_v2, (&host, rounded));
  if (status != HRT_OK) {
    return hrt_status_annotate(status,
                               "allocating %zu bytes of pinned "
                               "staging memory",
                               rounded);
  }
  *out_block = (hrt_cuda_staging_t){host, rounded};
  return HRT_OK;
}

void hrt_cuda_staging_release(hrt_cuda_staging_pool_t* pool,
                              hrt_cuda_staging_t block) {
  if (!block.host) return;
  hrt_mutex_lock(&pool->mutex);
  if (pool->cached_count < HRT_CUDA_STAGING_MAX_CACHED &&
      block.size <= HRT_CUDA_STAGING_MAX_CACHED_BYTES - pool->cached_bytes) {
    pool->cached[pool->cached_count++] = block;
    pool->cached_bytes += block.size;
    block.host = NULL;
  }
  hrt_mutex_unlock(&pool->mutex);
  if (block.host) (void)pool->symbols->cuMemFreeHost(block.host);
}

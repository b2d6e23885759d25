#include "hal/cuda/cuda_allocator.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"

// Whether the driver and device offer stream-ordered pools; fills `pool`
// and sets its release threshold.
static bool hrt_cuda_allocator_find_pool(const hrt_cuda_symbols_t* cu,
                                         hrt_cu_device_t device,
                                         hrt_cu_mempool_t* out_pool) {
  if (!cu->cuMemAllocAsync || !cu->cuMemFreeAsync ||
      !cu->cuDeviceGetDefaultMemPool || !cu->cuMemPoolSetAttribute ||
      !cu->cuMemPoolTrimTo) {
    return false;
  }
  int supported = 0;
  if (cu->cuDeviceGetAttribute(&supported,
                               HRT_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                               device) != HRT_CUDA_SUCCESS ||
      !supported) {
    return false;
  }
  uint64_t threshold = UINT64_MAX;
  return cu->cuDeviceGetDefaultMemPool(out_pool, device) == HRT_CUDA_SUCCESS &&
         *out_pool &&
         cu->cuMemPoolSetAttribute(*out_pool,
                                   HRT_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                   &threshold) == HRT_CUDA_SUCCESS;
}

void hrt_cuda_allocator_initialize(const hrt_cuda_symbols_t* cu,
                                   hrt_cu_device_t device,
                                   hrt_cu_stream_t stream,
                                   hrt_cuda_allocator_t* allocator) {
  *allocator = (hrt_cuda_allocator_t){.cu = cu, .stream = stream};
  hrt_cu_mempool_t pool = NULL;
  if (hrt_cuda_allocator_find_pool(cu, device, &pool)) allocator->pool = pool;
  hrt_mutex_init(&allocator->mutex);
}

// cuMemFree of every block in `list`. Nothing to report to: freeing only
// fails on a lost context.
static void hrt_cuda_allocator_free_list(const hrt_cuda_symbols_t* cu,
                                         hrt_cuda_block_t* list) {
  while (list) {
    hrt_cuda_block_t* next = list->next;
    (void)cu->cuMemFree_v2(list->pointer);
    free(list);
    list = next;
  }
}

void hrt_cuda_allocator_deinitialize(hrt_cuda_allocator_t* allocator) {
  hrt_cuda_allocator_release_pending(allocator);
  hrt_cuda_allocator_trim(allocator);
  hrt_mutex_deinit(&allocator->mutex);
}

bool hrt_cuda_allocator_uses_pool(const hrt_cuda_allocator_t* allocator) {
  return allocator->pool != NULL;
}

// The cached block that fits `size` best (the smallest of those between
// `size` and twice it), taken out of the cache; NULL when none does.
static hrt_cuda_block_t* hrt_cuda_allocator_take_cached(
    hrt_cuda_allocator_t* allocator, size_t size) {
  hrt_mutex_lock(&allocator->mutex);
  hrt_cuda_block_t** best = NULL;
  for (hrt_cuda_block_t** link = &allocator->cached; *link;
       link = &(*link)->next) {
    const size_t candidate = (*link)->size;
    if (candidate >= size && candidate / 2 <= size &&
        (!best || candidate < (*best)->size)) {
      best = link;
    }
  }
  hrt_cuda_block_t* block = NULL;
  if (best) {
    block = *best;
    *best = block->next;
    --allocator->cached_count;
    allocator->cached_bytes -= block->size;
  }
  hrt_mutex_unlock(&allocator->mutex);
  return block;
}

hrt_status_t hrt_cuda_allocator_allocate(hrt_cuda_allocator_t* allocator,
                                         size_t size,
                                         hrt_cuda_block_t** out_block) {
  const hrt_cuda_symbols_t* cu = allocator->cu;
  // Drivers reject 0 bytes; an empty buffer still needs an address.
  if (size == 0) size = 1;
  if (!allocator->pool) {
    if (size > SIZE_MAX - HRT_CUDA_ALLOCATOR_GRANULE) {
      return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                             "cannot allocate %zu bytes", size);
    }
    size = (size + HRT_CUDA_ALLOCATOR_GRANULE - 1) &
           ~(HRT_CUDA_ALLOCATOR_GRANULE - 1);
    hrt_cuda_block_t* cached = hrt_cuda_allocator_take_cached(allocator, size);
    if (cached) {
      *out_block = cached;
      return HRT_OK;
    }
  }
  hrt_cuda_block_t* block = NULL;
  HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(sizeof(*block), "device memory block",
                                          (void**)&block));
  block->size = size;
  hrt_status_t status =
      allocator->pool
          ? HRT_CUDA_CALL(cu, cuMemAllocAsync,
                          (&block->pointer, size, allocator->stream))
          : HRT_CUDA_CALL(cu, cuMemAlloc_v2, (&block->pointer, size));
  if (status != HRT_OK) {
    free(block);
    if (!allocator->pool) {
      // What the cache holds goes to the release list, so that a retry
      // after release_pending can have it.
      hrt_mutex_lock(&allocator->mutex);
      hrt_cuda_block_t** tail = &allocator->releases;
      while (*tail) tail = &(*tail)->next;
      *tail = allocator->cached;
      allocator->cached = NULL;
      allocator->cached_count = 0;
      allocator->cached_bytes = 0;
      hrt_mutex_unlock(&allocator->mutex);
    }
    return status;
  }
  *out_block = block;
  return HRT_OK;
}

bool hrt_cuda_allocator_free(hrt_cuda_allocator_t* allocator,
                             hrt_cuda_block_t* block) {
  if (allocator->pool) {
    // Fails only on a lost context, whose memory is gone with it.
    (void)allocator->cu->cuMemFreeAsync(block->pointer, allocator->stream);
    free(block);
    return false;
  }
  hrt_mutex_lock(&allocator->mutex);
  const bool cache = allocator->cached_count < HRT_CUDA_ALLOCATOR_MAX_CACHED &&
                     block->size <= HRT_CUDA_ALLOCATOR_MAX_CACHED_BYTES -
                                        allocator->cached_bytes;
  if (cache) {
    block->next = allocator->cached;
    allocator->cached = block;
    ++allocator->cached_count;
    allocator->cached_bytes += block->size;
  } else {
    block->next = allocator->releases;
    allocator->releases = block;
  }
  hrt_mutex_unlock(&allocator->mutex);
  return !cache;
}

void hrt_cuda_allocator_release_pending(hrt_cuda_allocator_t* allocator) {
  hrt_mutex_lock(&allocator->mutex);
  hrt_cuda_block_t* releases = allocator->releases;
  allocator->releases = NULL;
  hrt_mutex_unlock(&allocator->mutex);
  hrt_cuda_allocator_free_list(allocator->cu, releases);
}

void hrt_cuda_allocator_trim(hrt_cuda_allocator_t* allocator) {
  if (allocator->pool) {
    (void)allocator->cu->cuMemPoolTrimTo(allocator->pool, 0);
    return;
  }
  hrt_mutex_lock(&allocator->mutex);
  hrt_cuda_block_t* cached = allocator->cached;
  allocator->cached = NULL;
  allocator->cached_count = 0;
  allocator->cached_bytes = 0;
  hrt_mutex_unlock(&allocator->mutex);
  hrt_cuda_allocator_free_list(allocator->cu, cached);
}

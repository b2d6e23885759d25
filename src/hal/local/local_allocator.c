#include "hal/local/local_allocator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hal/device.h"

#define HRT_LOCAL_ALLOCATOR_ALIGNMENT ((size_t)64)

// The byte bound: HALRT_LOCAL_CACHE_BYTES when set, else the default.
static hrt_status_t hrt_local_allocator_byte_bound(uint64_t physical_memory,
                                                   uint64_t* out_bytes) {
  const char* text = getenv("HALRT_LOCAL_CACHE_BYTES");
  if (text == NULL || *text == '\0') {
    uint64_t share = physical_memory / 8;
    *out_bytes = share < HRT_LOCAL_ALLOCATOR_MAX_CACHED_BYTES
                     ? share
                     : HRT_LOCAL_ALLOCATOR_MAX_CACHED_BYTES;
    return HRT_OK;
  }
  char* end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno == ERANGE) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "HALRT_LOCAL_CACHE_BYTES: '%s' is not a byte count "
                           "(a decimal integer; 0 disables the cache)",
                           text);
  }
  *out_bytes = value;
  return HRT_OK;
}

hrt_status_t hrt_local_allocator_initialize(uint64_t physical_memory,
                                            hrt_local_allocator_t* allocator) {
  *allocator = (hrt_local_allocator_t){0};
  uint64_t bytes = 0;
  HRT_RETURN_IF_ERROR(hrt_local_allocator_byte_bound(physical_memory, &bytes));
  if (bytes == 0) return HRT_OK;
  hrt_block_pool_options_t options = {
      .max_cached_bytes = bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes,
      .max_cached_count = HRT_LOCAL_ALLOCATOR_MAX_CACHED_BLOCKS,
      .count_live = true,
  };
  return hrt_block_pool_create_with_options(&options, &allocator->pool);
}

void hrt_local_allocator_deinitialize(hrt_local_allocator_t* allocator) {
  hrt_block_pool_release(allocator->pool);
  allocator->pool = NULL;
}

static size_t hrt_local_padded_length(size_t byte_length) {
  size_t padded = (byte_length + HRT_LOCAL_ALLOCATOR_ALIGNMENT - 1) &
                  ~(HRT_LOCAL_ALLOCATOR_ALIGNMENT - 1);
  return padded ? padded : HRT_LOCAL_ALLOCATOR_ALIGNMENT;
}

// Whether storage of `padded` bytes comes from the cache.
static bool hrt_local_allocator_caches(const hrt_local_allocator_t* allocator,
                                       size_t padded) {
  return allocator->pool && padded >= HRT_LOCAL_ALLOCATOR_MIN_CACHED_BYTES;
}

void* hrt_local_allocator_allocate(hrt_local_allocator_t* allocator,
                                   size_t byte_length,
                                   const void* initial_data) {
  size_t padded = hrt_local_padded_length(byte_length);
  void* storage = NULL;
  if (initial_data == HRT_HAL_UNINITIALIZED) {
    storage = hrt_local_allocator_caches(allocator, padded)
                  ? hrt_block_pool_acquire(allocator->pool, padded)
                  : aligned_alloc(HRT_LOCAL_ALLOCATOR_ALIGNMENT, padded);
    if (storage) memset((char*)storage + byte_length, 0, padded - byte_length);
    return storage;
  }
  if (!hrt_local_allocator_caches(allocator, padded)) {
    storage = aligned_alloc(HRT_LOCAL_ALLOCATOR_ALIGNMENT, padded);
    if (storage && !initial_data) memset(storage, 0, padded);
  } else if (!initial_data) {
    return hrt_block_pool_acquire_zeroed(allocator->pool, padded);
  } else {
    storage = hrt_block_pool_acquire(allocator->pool, padded);
  }
  if (storage && initial_data) {
    memcpy(storage, initial_data, byte_length);
    memset((char*)storage + byte_length, 0, padded - byte_length);
  }
  return storage;
}

bool hrt_local_allocator_free(hrt_local_allocator_t* allocator, void* storage,
                              size_t byte_length) {
  if (!hrt_local_allocator_caches(allocator,
                                  hrt_local_padded_length(byte_length))) {
    free(storage);
    return false;
  }
  hrt_block_pool_give_back(storage);
  return true;
}

void hrt_local_allocator_trim(hrt_local_allocator_t* allocator) {
  if (allocator->pool) hrt_block_pool_trim(allocator->pool);
}

size_t hrt_local_allocator_cached_bytes(hrt_local_allocator_t* allocator) {
  if (!allocator->pool) return 0;
  hrt_block_pool_stats_t stats;
  hrt_block_pool_stats(allocator->pool, &stats);
  return stats.cached_bytes;
}

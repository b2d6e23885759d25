#include "base/alloc.h"

#include <stdlib.h>

hrt_status_t hrt_allocate(size_t size, const char* what, void** out_ptr) {
  void* ptr = malloc(size ? size : 1);
  if (!ptr) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating %zu bytes for %s",
                           size, what);
  }
  *out_ptr = ptr;
  return HRT_OK;
}

hrt_status_t hrt_allocate_zeroed(size_t size, const char* what,
                                 void** out_ptr) {
  void* ptr = calloc(1, size ? size : 1);
  if (!ptr) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating %zu bytes for %s",
                           size, what);
  }
  *out_ptr = ptr;
  return HRT_OK;
}

#include "base/alloc.h"

#include <stdlib.h>

// *out_ptr = ptr, or RESOURCE_EXHAUSTED when it is NULL.
static hrt_status_t hrt_allocated(void* ptr, size_t size, const char* what,
                                  void** out_ptr) {
  if (!ptr) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory allocating %zu bytes for %s",
                           size, what);
  }
  *out_ptr = ptr;
  return HRT_OK;
}

hrt_status_t hrt_allocate(size_t size, const char* what, void** out_ptr) {
  return hrt_allocated(malloc(size ? size : 1), size, what, out_ptr);
}

hrt_status_t hrt_allocate_zeroed(size_t size, const char* what,
                                 void** out_ptr) {
  return hrt_allocated(calloc(1, size ? size : 1), size, what, out_ptr);
}

hrt_status_t hrt_reallocate(void* ptr, size_t size, const char* what,
                            void** out_ptr) {
  return hrt_allocated(realloc(ptr, size ? size : 1), size, what, out_ptr);
}

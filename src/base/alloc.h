// Host allocation that reports failure as a status.
//
// Failure is RESOURCE_EXHAUSTED with a message naming `what` and the size.
// Memory is released with free(). Zero-byte requests return a valid pointer.
#ifndef HRT_BASE_ALLOC_H_
#define HRT_BASE_ALLOC_H_

#include <stddef.h>

#include "base/status.h"

hrt_status_t hrt_allocate(size_t size, const char* what,
                          void** out_ptr) HRT_MUST_USE;
hrt_status_t hrt_allocate_zeroed(size_t size, const char* what,
                                 void** out_ptr) HRT_MUST_USE;
// realloc(ptr, size); on failure *out_ptr is left as it was (still owned by
// the caller). `ptr` is *out_ptr's old value, or NULL.
hrt_status_t hrt_reallocate(void* ptr, size_t size, const char* what,
                            void** out_ptr) HRT_MUST_USE;

#endif  // HRT_BASE_ALLOC_H_

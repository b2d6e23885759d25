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

// free(ptr) later, by the next thread that calls hrt_allocate or
// hrt_allocate_zeroed: for what one thread allocates and another releases
// (an invocation's objects, made on the JS thread and released on a
// device's completion thread). free() on another thread takes the malloc
// arena lock of the thread that allocated, which that thread holds while it
// allocates; the two then wait for each other (BENCHMARKS.md, issue 25).
// Any thread, lock-free. `ptr` (NULL is ignored) must hold at least
// sizeof(void*) bytes. What waits stays reachable, bounded by what was
// released since the last allocation.
void hrt_free_deferred(void* ptr);

#endif  // HRT_BASE_ALLOC_H_

// Host allocation that reports failure as a status.
//
// Failure is RESOURCE_EXHAUSTED with a message naming `what` and the size.
// Memory is released with free(), but a recycled block's (below). Zero-byte
// requests return a valid pointer.
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

// Recycled blocks: for records made on one thread and released on another
// at every invocation (its VM record, program call and submission). A
// block released with hrt_free_recycled is kept for the next
// hrt_allocate_recycled of its size class (64-byte classes up to 4 KiB, at
// most 256 kept per class) instead of freed; 64 invocations in flight then
// make and free nothing, where malloc's per-thread caches (7 blocks a size)
// overflow and every block takes malloc's slow paths. The block reads as
// zero. It must be released with hrt_free_recycled (NULL is ignored), never
// free(). Any thread, never waiting: a class another thread is using at
// that moment is passed over. Blocks kept at exit stay reachable.
// Under AddressSanitizer nothing is kept, so that it sees each block used
// after its release.
#if defined(__SANITIZE_ADDRESS__)
#define HRT_RECYCLE_KEEP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HRT_RECYCLE_KEEP 0
#endif
#endif
#ifndef HRT_RECYCLE_KEEP
#define HRT_RECYCLE_KEEP 256  // blocks kept per class
#endif
hrt_status_t hrt_allocate_recycled(size_t size, const char* what,
                                   void** out_ptr) HRT_MUST_USE;
void hrt_free_recycled(void* ptr);

#endif  // HRT_BASE_ALLOC_H_

#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

// The blocks hrt_free_deferred has taken, linked through their first bytes.
typedef struct hrt_deferred_s {
  struct hrt_deferred_s* next;
} hrt_deferred_t;
static _Atomic(hrt_deferred_t*) hrt_deferred_head = NULL;

void hrt_free_deferred(void* ptr) {
  if (!ptr) return;
  hrt_deferred_t* node = ptr;
  node->next = atomic_load_explicit(&hrt_deferred_head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&hrt_deferred_head, &node->next,
                                                node, memory_order_release,
                                                memory_order_relaxed)) {
  }
}

// Frees what hrt_free_deferred has taken, on this thread.
static void hrt_free_deferred_now(void) {
  if (!atomic_load_explicit(&hrt_deferred_head, memory_order_relaxed)) return;
  hrt_deferred_t* node =
      atomic_exchange_explicit(&hrt_deferred_head, NULL, memory_order_acquire);
  while (node) {
    hrt_deferred_t* next = node->next;
    free(node);
    node = next;
  }
}

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
  hrt_free_deferred_now();
  return hrt_allocated(malloc(size ? size : 1), size, what, out_ptr);
}

hrt_status_t hrt_allocate_zeroed(size_t size, const char* what,
                                 void** out_ptr) {
  hrt_free_deferred_now();
  return hrt_allocated(calloc(1, size ? size : 1), size, what, out_ptr);
}

hrt_status_t hrt_reallocate(void* ptr, size_t size, const char* what,
                            void** out_ptr) {
  return hrt_allocated(realloc(ptr, size ? size : 1), size, what, out_ptr);
}

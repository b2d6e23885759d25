#include "base/alloc.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

//===----------------------------------------------------------------------===//
// Recycled blocks
//===----------------------------------------------------------------------===//

#define HRT_RECYCLE_GRAIN ((size_t)64)
#define HRT_RECYCLE_CLASSES 64  // classes of 64 bytes up to 4 KiB

// Before each recycled block's data (16 bytes keep malloc's alignment).
typedef struct hrt_recycled_s {
  struct hrt_recycled_s* next;  // while kept
  size_t class_index;           // HRT_RECYCLE_CLASSES: not kept (too large)
} hrt_recycled_t;

// A class's kept blocks. `busy` is a lock that is never waited for: a
// thread that finds it taken allocates or frees as if nothing were kept,
// so neither side of a busy pair of threads ever sleeps on the other. One
// cache line each, so that the classes of one invocation's records do not
// share one.
typedef struct hrt_recycle_class_s {
  _Alignas(64) atomic_bool busy;
  hrt_recycled_t* head;  // kept blocks, the last released first
  int32_t count;
} hrt_recycle_class_t;

static hrt_recycle_class_t hrt_recycle_classes[HRT_RECYCLE_CLASSES];

// Takes `kept` unless another thread holds it.
static bool hrt_recycle_try_take(hrt_recycle_class_t* kept) {
  return !atomic_load_explicit(&kept->busy, memory_order_relaxed) &&
         !atomic_exchange_explicit(&kept->busy, true, memory_order_acquire);
}

static void hrt_recycle_put(hrt_recycle_class_t* kept) {
  atomic_store_explicit(&kept->busy, false, memory_order_release);
}

hrt_status_t hrt_allocate_recycled(size_t size, const char* what,
                                   void** out_ptr) {
  const size_t class_index = size ? (size - 1) / HRT_RECYCLE_GRAIN : 0;
  hrt_recycled_t* block = NULL;
  if (class_index < HRT_RECYCLE_CLASSES) {
    hrt_recycle_class_t* kept = &hrt_recycle_classes[class_index];
    if (hrt_recycle_try_take(kept)) {
      block = kept->head;
      if (block) {
        kept->head = block->next;
        --kept->count;
      }
      hrt_recycle_put(kept);
    }
    if (block) {
      memset(block + 1, 0, size);
    } else {
      HRT_RETURN_IF_ERROR(hrt_allocate_zeroed(
          sizeof(*block) + (class_index + 1) * HRT_RECYCLE_GRAIN, what,
          (void**)&block));
    }
  } else {
    if (size > SIZE_MAX - sizeof(*block)) {
      return hrt_allocated(NULL, size, what, out_ptr);
    }
    HRT_RETURN_IF_ERROR(
        hrt_allocate_zeroed(sizeof(*block) + size, what, (void**)&block));
  }
  block->class_index =
      class_index < HRT_RECYCLE_CLASSES ? class_index : HRT_RECYCLE_CLASSES;
  *out_ptr = block + 1;
  return HRT_OK;
}

void hrt_free_recycled(void* ptr) {
  if (!ptr) return;
  hrt_recycled_t* block = (hrt_recycled_t*)ptr - 1;
  if (block->class_index < HRT_RECYCLE_CLASSES) {
    hrt_recycle_class_t* kept = &hrt_recycle_classes[block->class_index];
    bool keep = false;
    if (hrt_recycle_try_take(kept)) {
      keep = kept->count < HRT_RECYCLE_KEEP;
      if (keep) {
        block->next = kept->head;
        kept->head = block;
        ++kept->count;
      }
      hrt_recycle_put(kept);
    }
    if (keep) return;
  }
  hrt_free_deferred(block);
}

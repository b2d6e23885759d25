// Intrusive atomic reference counts.
//
// An object starts with one reference owned by its creator. retain/release
// may be called from any thread; the release that drops the count to zero
// returns true and its caller destroys the object, on that same thread.
#ifndef HRT_BASE_REF_H_
#define HRT_BASE_REF_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct hrt_ref_s {
  atomic_int_fast32_t count;
} hrt_ref_t;

static inline void hrt_ref_init(hrt_ref_t* ref) { atomic_init(&ref->count, 1); }

static inline void hrt_ref_retain(hrt_ref_t* ref) {
  atomic_fetch_add_explicit(&ref->count, 1, memory_order_relaxed);
}

// Returns true when this was the last reference: the caller destroys.
// acq_rel: the destroying thread sees every write made before other
// threads' releases (and ThreadSanitizer can model it, unlike a fence).
static inline bool hrt_ref_release(hrt_ref_t* ref) {
  return atomic_fetch_sub_explicit(&ref->count, 1, memory_order_acq_rel) == 1;
}

#endif  // HRT_BASE_REF_H_

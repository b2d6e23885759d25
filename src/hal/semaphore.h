// Timeline semaphores: a monotonically increasing 64-bit value, or a failure.
//
// Any thread may signal, fail, query or wait. Once failed, a semaphore stays
// failed: every waiter (current and future) and every query gets its own copy
// of the failure status, and later signals are ignored. Semaphores live on
// the host, so every driver can signal them from its completion thread.
#ifndef HRT_HAL_SEMAPHORE_H_
#define HRT_HAL_SEMAPHORE_H_

#include <stdint.h>

#include "base/status.h"

typedef struct hrt_hal_semaphore_s hrt_hal_semaphore_t;

hrt_status_t hrt_hal_semaphore_create(
    uint64_t initial_value, hrt_hal_semaphore_t** out_semaphore) HRT_MUST_USE;
void hrt_hal_semaphore_retain(hrt_hal_semaphore_t* semaphore);
void hrt_hal_semaphore_release(hrt_hal_semaphore_t* semaphore);

// Current value, or a copy of the failure.
hrt_status_t hrt_hal_semaphore_query(hrt_hal_semaphore_t* semaphore,
                                     uint64_t* out_value) HRT_MUST_USE;
// Raises the value to `value` and wakes waiters. INVALID_ARGUMENT when
// `value` is not above the current value; a copy of the failure if failed.
hrt_status_t hrt_hal_semaphore_signal(hrt_hal_semaphore_t* semaphore,
                                      uint64_t value) HRT_MUST_USE;
// Fails the semaphore with `status` (consumed; must not be OK). The first
// failure wins; later ones are freed.
void hrt_hal_semaphore_fail(hrt_hal_semaphore_t* semaphore,
                            hrt_status_t status);
// Blocks until the value reaches `value` (OK), the semaphore fails (a copy of
// the failure) or `deadline_ns` on hrt_time_now_ns()'s clock passes
// (DEADLINE_EXCEEDED; a deadline already passed only checks). Never call it
// from the JavaScript thread.
hrt_status_t hrt_hal_semaphore_wait(hrt_hal_semaphore_t* semaphore,
                                    uint64_t value,
                                    int64_t deadline_ns) HRT_MUST_USE;

typedef struct hrt_hal_semaphore_point_s {
  hrt_hal_semaphore_t* semaphore;
  uint64_t value;
} hrt_hal_semaphore_point_t;

#endif  // HRT_HAL_SEMAPHORE_H_

#include "hal/semaphore.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/live.h"
#include "base/ref.h"
#include "base/threads.h"

struct hrt_hal_semaphore_s {
  hrt_ref_t ref;
  hrt_mutex_t mutex;
  hrt_cond_t cond;
  uint64_t value;        // guarded by mutex
  hrt_status_t failure;  // guarded by mutex; owned
};

hrt_status_t hrt_hal_semaphore_create(uint64_t initial_value,
                                      hrt_hal_semaphore_t** out_semaphore) {
  hrt_hal_semaphore_t* semaphore = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*semaphore), "semaphore", (void**)&semaphore));
  hrt_ref_init(&semaphore->ref);
  hrt_mutex_init(&semaphore->mutex);
  hrt_cond_init(&semaphore->cond);
  semaphore->value = initial_value;
  hrt_live_add(HRT_LIVE_SEMAPHORE, 1);
  *out_semaphore = semaphore;
  return HRT_OK;
}

void hrt_hal_semaphore_retain(hrt_hal_semaphore_t* semaphore) {
  if (semaphore) hrt_ref_retain(&semaphore->ref);
}

void hrt_hal_semaphore_release(hrt_hal_semaphore_t* semaphore) {
  if (!semaphore || !hrt_ref_release(&semaphore->ref)) return;
  hrt_status_free(semaphore->failure);
  hrt_cond_deinit(&semaphore->cond);
  hrt_mutex_deinit(&semaphore->mutex);
  free(semaphore);
  hrt_live_add(HRT_LIVE_SEMAPHORE, -1);
}

hrt_status_t hrt_hal_semaphore_query(hrt_hal_semaphore_t* semaphore,
                                     uint64_t* out_value) {
  hrt_mutex_lock(&semaphore->mutex);
  hrt_status_t status = hrt_status_clone(semaphore->failure);
  if (status == HRT_OK) *out_value = semaphore->value;
  hrt_mutex_unlock(&semaphore->mutex);
  return status;
}

hrt_status_t hrt_hal_semaphore_signal(hrt_hal_semaphore_t* semaphore,
                                      uint64_t value) {
  hrt_mutex_lock(&semaphore->mutex);
  hrt_status_t status = hrt_status_clone(semaphore->failure);
  if (status == HRT_OK) {
    if (value <= semaphore->value) {
      status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "semaphore signal to %llu is not above its "
                               "current value %llu",
                               (unsigned long long)value,
                               (unsigned long long)semaphore->value);
    } else {
      semaphore->value = value;
      hrt_cond_broadcast(&semaphore->cond);
    }
  }
  hrt_mutex_unlock(&semaphore->mutex);
  return status;
}

void hrt_hal_semaphore_fail(hrt_hal_semaphore_t* semaphore,
                            hrt_status_t status) {
  hrt_mutex_lock(&semaphore->mutex);
  if (semaphore->failure == HRT_OK) {
    semaphore->failure = status;
    status = HRT_OK;
    hrt_cond_broadcast(&semaphore->cond);
  }
  hrt_mutex_unlock(&semaphore->mutex);
  hrt_status_free(status);
}

hrt_status_t hrt_hal_semaphore_wait(hrt_hal_semaphore_t* semaphore,
                                    uint64_t value, int64_t deadline_ns) {
  hrt_mutex_lock(&semaphore->mutex);
  while (semaphore->failure == HRT_OK && semaphore->value < value) {
    if (!hrt_cond_wait_until(&semaphore->cond, &semaphore->mutex,
                             deadline_ns)) {
      break;
    }
  }
  hrt_status_t status = hrt_status_clone(semaphore->failure);
  if (status == HRT_OK && semaphore->value < value) {
    status = hrt_status_make(HRT_STATUS_DEADLINE_EXCEEDED,
                             "semaphore did not reach %llu (at %llu) before "
                             "the deadline",
                             (unsigned long long)value,
                             (unsigned long long)semaphore->value);
  }
  hrt_mutex_unlock(&semaphore->mutex);
  return status;
}

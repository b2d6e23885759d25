// Submitting command buffers and waiting for them, for the device tests.
#ifndef HRT_TEST_TEST_SUBMIT_H_
#define HRT_TEST_TEST_SUBMIT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/threads.h"
#include "hal/device.h"

// How a submission completed: its status (owned), the thread the completion
// ran on, and its position among all completions of the test binary.
typedef struct {
  hrt_notification_t done;
  hrt_status_t status;
  pthread_t thread;
  int order;
} completion_t;

static atomic_int completion_counter;

static inline void on_complete(void* user_data, hrt_status_t status) {
  completion_t* completion = user_data;
  completion->status = status;
  completion->thread = pthread_self();
  completion->order = atomic_fetch_add(&completion_counter, 1);
  hrt_notification_set(&completion->done);
}

static inline void completion_init(completion_t* completion) {
  memset(completion, 0, sizeof(*completion));
  hrt_notification_init(&completion->done);
}

// Waits (20 s at most) and returns the submission's status (owned).
static inline hrt_status_t completion_wait(completion_t* completion) {
  if (!hrt_notification_wait_until(&completion->done,
                                   hrt_time_now_ns() + 20000000000LL)) {
    return hrt_status_make(HRT_STATUS_DEADLINE_EXCEEDED,
                           "submission did not complete in 20 s");
  }
  hrt_notification_deinit(&completion->done);
  return completion->status;
}

// Submits `cb` with `bindings`; its completion is recorded in `completion`.
static inline hrt_status_t submit(hrt_hal_device_t* device,
                                  hrt_hal_command_buffer_t* cb,
                                  const hrt_hal_buffer_ref_t* bindings,
                                  uint32_t binding_count,
                                  completion_t* completion) {
  completion_init(completion);
  hrt_hal_submission_t submission = {
      .command_buffer = cb,
      .bindings = bindings,
      .binding_count = binding_count,
      .completion = {on_complete, completion},
  };
  return hrt_hal_device_queue_submit(device, &submission);
}

#endif  // HRT_TEST_TEST_SUBMIT_H_

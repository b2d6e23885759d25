// Making devices, submitting command buffers and waiting for them, and the
// scenarios that every device kind runs alike, for the device tests
// (test_local.c, test_cuda.c).
#ifndef HRT_TEST_TEST_SUBMIT_H_
#define HRT_TEST_TEST_SUBMIT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/live.h"
#include "base/threads.h"
#include "hal/device.h"
#include "hal/driver.h"
#include "test.h"

// Creates the device `uri` names, through the built-in drivers.
static inline hrt_status_t make_device(const char* uri,
                                       hrt_hal_device_t** out) {
  uint32_t count = 0;
  const hrt_hal_driver_t* const* drivers = hrt_hal_builtin_drivers(&count);
  return hrt_hal_create_device(drivers, count, uri, out);
}

static inline hrt_hal_buffer_ref_t whole(hrt_hal_buffer_t* buffer) {
  return (hrt_hal_buffer_ref_t){buffer, 0, 0, HRT_HAL_WHOLE_BUFFER};
}

// Objects of a case: each helper makes what the HAL call it wraps makes and,
// when that succeeded, defers the release to the end of the case
// (TEST_DEFER, test.h).

static inline void release_device_(void* device) {
  hrt_hal_device_release(device);
}

static inline void release_buffer_(void* buffer) {
  hrt_hal_buffer_release(buffer);
}

static inline void release_command_buffer_(void* cb) {
  hrt_hal_command_buffer_release(cb);
}

static inline void release_executable_(void* executable) {
  hrt_hal_executable_release(executable);
}

static inline void release_semaphore_(void* semaphore) {
  hrt_hal_semaphore_release(semaphore);
}

static inline hrt_status_t case_device(const char* uri,
                                       hrt_hal_device_t** out) {
  HRT_RETURN_IF_ERROR(make_device(uri, out));
  TEST_DEFER(release_device_, *out);
  return HRT_OK;
}

static inline hrt_status_t case_buffer(hrt_hal_device_t* device,
                                       uint64_t byte_length,
                                       const void* initial_data,
                                       hrt_hal_buffer_t** out) {
  HRT_RETURN_IF_ERROR(
      hrt_hal_device_allocate_buffer(device, byte_length, initial_data, out));
  TEST_DEFER(release_buffer_, *out);
  return HRT_OK;
}

static inline hrt_status_t case_command_buffer(hrt_hal_device_t* device,
                                               hrt_hal_command_buffer_t** out) {
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, out));
  TEST_DEFER(release_command_buffer_, *out);
  return HRT_OK;
}

static inline hrt_status_t case_executable(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out) {
  HRT_RETURN_IF_ERROR(hrt_hal_device_create_executable(device, params, out));
  TEST_DEFER(release_executable_, *out);
  return HRT_OK;
}

// The built-in kernels (format "builtin") on `device`.
static inline hrt_status_t case_builtins(hrt_hal_device_t* device,
                                         hrt_hal_executable_t** out) {
  const hrt_hal_executable_params_t params = {
      .format = HRT_HAL_EXECUTABLE_FORMAT_BUILTIN};
  return case_executable(device, &params, out);
}

static inline hrt_status_t case_semaphore(uint64_t initial_value,
                                          hrt_hal_semaphore_t** out) {
  HRT_RETURN_IF_ERROR(hrt_hal_semaphore_create(initial_value, out));
  TEST_DEFER(release_semaphore_, *out);
  return HRT_OK;
}

// How a submission completed: its status (owned), the thread the completion
// ran on, and its position among all completions counted in this file (a
// binary of several files has a count per file).
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

// Waits and returns the submission's status (owned); ends the test binary
// if it does not complete (its completion would write into `completion`,
// often the stack of a case that has returned).
static inline hrt_status_t completion_wait(completion_t* completion) {
  WAIT_OR_EXIT(&completion->done, "a submission's completion");
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

// Submits `cb` and waits for it.
static inline hrt_status_t run(hrt_hal_device_t* device,
                               hrt_hal_command_buffer_t* cb,
                               const hrt_hal_buffer_ref_t* bindings,
                               uint32_t binding_count) {
  completion_t completion;
  HRT_RETURN_IF_ERROR(submit(device, cb, bindings, binding_count, &completion));
  return completion_wait(&completion);
}

// Finalizes `cb`, whose one command was recorded with status `recorded`
// (owned), runs it if that succeeded, and releases it.
static inline hrt_status_t run_recorded(hrt_hal_device_t* device,
                                        hrt_hal_command_buffer_t* cb,
                                        hrt_status_t recorded) {
  hrt_hal_command_buffer_finalize(cb);
  if (recorded == HRT_OK) recorded = run(device, cb, NULL, 0);
  hrt_hal_command_buffer_release(cb);
  return recorded;
}

// One-command submissions, waited for. Each returns the status of recording
// the command or, when that succeeded, of running it.

static inline hrt_status_t run_dispatch(hrt_hal_device_t* device,
                                        const hrt_hal_dispatch_t* dispatch) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  return run_recorded(device, cb,
                      hrt_hal_command_buffer_dispatch(cb, dispatch));
}

static inline hrt_status_t run_fill(hrt_hal_device_t* device,
                                    hrt_hal_buffer_ref_t target,
                                    uint64_t pattern, uint32_t pattern_length) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  return run_recorded(
      device, cb,
      hrt_hal_command_buffer_fill(cb, target, pattern, pattern_length));
}

// Reads the whole buffer into `out`.
static inline hrt_status_t read_back(hrt_hal_device_t* device,
                                     hrt_hal_buffer_t* buffer, void* out) {
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  return run_recorded(device, cb,
                      hrt_hal_command_buffer_read(cb, whole(buffer), out));
}

// Records and finalizes `add_f32` of `executable` (the built-in kernels)
// over n elements in three binding slots (a, b, out), with `workgroups`
// workgroups of 64.
static inline hrt_status_t record_add(hrt_hal_device_t* device,
                                      hrt_hal_executable_t* executable,
                                      uint32_t n, uint32_t workgroups,
                                      hrt_hal_command_buffer_t** out_cb) {
  uint32_t ordinal = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_executable_lookup(executable, "add_f32", &ordinal));
  hrt_hal_buffer_ref_t slots[3] = {{NULL, 0, 0, HRT_HAL_WHOLE_BUFFER},
                                   {NULL, 1, 0, HRT_HAL_WHOLE_BUFFER},
                                   {NULL, 2, 0, HRT_HAL_WHOLE_BUFFER}};
  hrt_hal_dispatch_t dispatch = {
      executable, ordinal, {workgroups, 1, 1}, {64, 1, 1}, 1, &n, 3, slots, 0};
  hrt_hal_command_buffer_t* cb = NULL;
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_create(device, &cb));
  hrt_status_t status = hrt_hal_command_buffer_dispatch(cb, &dispatch);
  if (status != HRT_OK) {
    hrt_hal_command_buffer_release(cb);
    return status;
  }
  hrt_hal_command_buffer_finalize(cb);
  *out_cb = cb;
  return HRT_OK;
}

//===----------------------------------------------------------------------===//
// Scenarios shared by the device kinds
//===----------------------------------------------------------------------===//

// What signal_later does to `semaphore` after 20 ms: `fail` 0 signals 1,
// 1 fails it with CANCELLED, 2 with DEVICE_LOST (the loss of another device,
// which must not lose the waiting one).
typedef struct {
  hrt_hal_semaphore_t* semaphore;
  int fail;
} late_signal_t;

static inline void* signal_later(void* arg) {
  late_signal_t* late = arg;
  struct timespec pause = {0, 20000000};
  nanosleep(&pause, NULL);
  if (late->fail) {
    hrt_hal_semaphore_fail(
        late->semaphore,
        hrt_status_make(
            late->fail == 2 ? HRT_STATUS_DEVICE_LOST : HRT_STATUS_CANCELLED,
            "upstream"));
  } else {
    hrt_status_free(hrt_hal_semaphore_signal(late->semaphore, 1));
  }
  return NULL;
}

// A fill that waits on a semaphore runs once another thread signals it, and
// then signals its own; a failed wait fails the submission and its signal
// with the wait's status, and the device still works. With
// `foreign_device_loss`, the wait also fails with DEVICE_LOST. With
// `host_visible` (the buffer is host memory), the buffer is checked, before
// anything could satisfy the wait, to show that the fill has not run.
static inline void check_submissions_wait_for_semaphores(
    const char* uri, bool foreign_device_loss, bool host_visible) {
  const int cases = foreign_device_loss ? 3 : 2;
  for (int fail = 0; fail < cases; ++fail) {
    hrt_hal_device_t* device = NULL;
    CHECK_OK(make_device(uri, &device));
    hrt_hal_semaphore_t* wait = NULL;
    hrt_hal_semaphore_t* signal = NULL;
    CHECK_OK(hrt_hal_semaphore_create(0, &wait));
    CHECK_OK(hrt_hal_semaphore_create(10, &signal));
    hrt_hal_buffer_t* buffer = NULL;
    CHECK_OK(hrt_hal_device_allocate_buffer(device, 4, NULL, &buffer));
    hrt_hal_command_buffer_t* cb = NULL;
    CHECK_OK(hrt_hal_command_buffer_create(device, &cb));
    CHECK_OK(hrt_hal_command_buffer_fill(cb, whole(buffer), 9, 4));
    hrt_hal_command_buffer_finalize(cb);
    hrt_hal_semaphore_point_t wait_point = {wait, 1};
    hrt_hal_semaphore_point_t signal_point = {signal, 11};
    completion_t completion;
    completion_init(&completion);
    hrt_hal_submission_t submission = {
        .command_buffer = cb,
        .waits = &wait_point,
        .wait_count = 1,
        .signals = &signal_point,
        .signal_count = 1,
        .completion = {on_complete, &completion},
    };
    CHECK_OK(hrt_hal_device_queue_submit(device, &submission));
    if (host_visible) {
      struct timespec pause = {0, 5000000};
      nanosleep(&pause, NULL);
      CHECK(buffer->host_ptr != NULL);
      CHECK_EQ_INT(*(uint32_t*)buffer->host_ptr, 0);
    }
    late_signal_t late = {wait, fail};
    hrt_thread_t thread;
    CHECK_OK(hrt_thread_create("late", signal_later, &late, &thread));
    hrt_status_t status = completion_wait(&completion);
    hrt_thread_join(&thread);
    uint32_t value32 = 0;
    CHECK_OK(read_back(device, buffer, &value32));
    uint64_t value = 0;
    if (fail) {
      const hrt_status_code_t code =
          fail == 2 ? HRT_STATUS_DEVICE_LOST : HRT_STATUS_CANCELLED;
      CHECK_STATUS(status, code, "upstream");
      CHECK_STATUS(hrt_hal_semaphore_query(signal, &value), code, "upstream");
      CHECK_EQ_INT(value32, 0);  // read after the failure: the device works
    } else {
      CHECK_OK(status);
      CHECK_OK(hrt_hal_semaphore_query(signal, &value));
      CHECK_EQ_INT(value, 11);
      CHECK_EQ_INT(value32, 9);
    }
    hrt_hal_command_buffer_release(cb);
    hrt_hal_buffer_release(buffer);
    hrt_hal_semaphore_release(wait);
    hrt_hal_semaphore_release(signal);
    hrt_hal_device_release(device);
  }
}

// The references that release_everything, a completion, drops: the last
// ones to everything, device included, so the device is destroyed on the
// thread that runs its completions.
typedef struct {
  hrt_hal_device_t* device;
  hrt_hal_command_buffer_t* cb;
  hrt_hal_buffer_t* buffer;
  hrt_notification_t* done;
  int64_t device_refs;  // the device's count before its release there
} last_ref_t;

static inline void release_everything(void* user_data, hrt_status_t status) {
  last_ref_t* refs = user_data;
  hrt_status_free(status);
  hrt_hal_command_buffer_release(refs->cb);
  hrt_hal_buffer_release(refs->buffer);
  refs->device_refs = atomic_load(&refs->device->ref.count);
  hrt_hal_device_release(refs->device);
  hrt_notification_set(refs->done);
}

// Waits (10 s at most) until `count` devices are live.
static inline void wait_for_live_devices(int64_t count) {
  int64_t deadline = hrt_time_now_ns() + 10000000000LL;
  while (hrt_live_count(HRT_LIVE_DEVICE) != count &&
         hrt_time_now_ns() < deadline) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

// A device whose last reference drops in its own completion is destroyed
// (waits 10 s at most for each step). The submission's own reference was
// dropped before the completion ran, so the completion's release is the
// last one (a device made after it shares nothing with this one).
static inline void check_device_released_by_its_completion_is_destroyed(
    const char* uri) {
  // An earlier case's device may still be being freed by its completion
  // thread: let that end (cases hold no device between them), so that the
  // count compared below is this case's alone.
  wait_for_live_devices(0);
  int64_t devices_before = hrt_live_count(HRT_LIVE_DEVICE);
  hrt_notification_t done;
  hrt_notification_init(&done);
  last_ref_t refs = {NULL, NULL, NULL, &done, 0};
  CHECK_OK(make_device(uri, &refs.device));
  CHECK_OK(hrt_hal_device_allocate_buffer(refs.device, 64, NULL, &refs.buffer));
  CHECK_OK(hrt_hal_command_buffer_create(refs.device, &refs.cb));
  CHECK_OK(hrt_hal_command_buffer_fill(refs.cb, whole(refs.buffer), 1, 1));
  hrt_hal_command_buffer_finalize(refs.cb);
  hrt_hal_submission_t submission = {
      .command_buffer = refs.cb,
      .completion = {release_everything, &refs},
  };
  CHECK_OK(hrt_hal_device_queue_submit(refs.device, &submission));
  WAIT_OR_EXIT(&done, "the completion releasing the device");
  hrt_notification_deinit(&done);
  // The thread that ran the completion (detached by then) frees the device
  // as it exits.
  wait_for_live_devices(devices_before);
  CHECK_EQ_INT(hrt_live_count(HRT_LIVE_DEVICE), devices_before);
  CHECK_EQ_INT(refs.device_refs, 1);
}

#endif  // HRT_TEST_TEST_SUBMIT_H_

#include "hal/device.h"

#include "base/copy.h"
#include "base/live.h"

void hrt_hal_device_initialize(const hrt_hal_device_vtable_t* vtable,
                               hrt_hal_device_t* device) {
  hrt_ref_init(&device->ref);
  device->vtable = vtable;
  hrt_live_add(HRT_LIVE_DEVICE, 1);
}

void hrt_hal_device_deinitialize(hrt_hal_device_t* device) {
  (void)device;
  hrt_live_add(HRT_LIVE_DEVICE, -1);
}

void hrt_hal_device_retain(hrt_hal_device_t* device) {
  if (device) hrt_ref_retain(&device->ref);
}

void hrt_hal_device_release(hrt_hal_device_t* device) {
  if (device && hrt_ref_release(&device->ref)) device->vtable->destroy(device);
}

const hrt_hal_device_info_t* hrt_hal_device_info(
    const hrt_hal_device_t* device) {
  return &device->info;
}

const char hrt_hal_uninitialized_tag = 0;

hrt_status_t hrt_hal_device_allocate_buffer(hrt_hal_device_t* device,
                                            uint64_t byte_length,
                                            const void* initial_data,
                                            hrt_hal_buffer_t** out_buffer) {
  return device->vtable->allocate_buffer(device, byte_length, initial_data,
                                         out_buffer);
}

hrt_status_t hrt_hal_device_create_executable(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) {
  return device->vtable->create_executable(device, params, out_executable);
}

hrt_status_t hrt_hal_device_queue_submit(
    hrt_hal_device_t* device, const hrt_hal_submission_t* submission) {
  hrt_hal_command_buffer_t* command_buffer = submission->command_buffer;
  if (!command_buffer || !hrt_hal_command_buffer_is_finalized(command_buffer)) {
    return hrt_status_make(HRT_STATUS_FAILED_PRECONDITION,
                           "submission needs a finalized command buffer");
  }
  if (hrt_hal_command_buffer_device(command_buffer) != device) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "command buffer was recorded for another device");
  }
  if (submission->caller_holds && !submission->completion.fn) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a submission whose caller holds its buffers "
                           "needs a completion");
  }
  HRT_RETURN_IF_ERROR(hrt_hal_command_buffer_validate_bindings(
      command_buffer, submission->bindings, submission->binding_count));
  const hrt_hal_semaphore_point_t* lists[2] = {submission->waits,
                                               submission->signals};
  uint32_t counts[2] = {submission->wait_count, submission->signal_count};
  for (int list = 0; list < 2; ++list) {
    for (uint32_t i = 0; i < counts[list]; ++i) {
      if (!lists[list][i].semaphore) {
        return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                               "%s semaphore %u is NULL",
                               list ? "signal" : "wait", i);
      }
    }
  }
  return device->vtable->queue_submit(device, submission);
}

void hrt_hal_device_copy_host(hrt_hal_device_t* device, void* dst,
                              const void* src, uint64_t byte_length,
                              bool streaming) {
  if (device && device->vtable->copy_host) {
    device->vtable->copy_host(device, dst, src, byte_length, streaming);
  } else {
    hrt_copy(dst, src, (size_t)byte_length, streaming);
  }
}

hrt_hal_loan_t* hrt_hal_device_lend(hrt_hal_device_t* device,
                                    hrt_hal_buffer_t* buffer, const void* data,
                                    uint64_t length, void* spare) {
  if (device == NULL || buffer == NULL || device->vtable->lend == NULL) {
    return NULL;
  }
  return device->vtable->lend(device, buffer, data, length, spare);
}

const void* hrt_hal_loan_open(hrt_hal_loan_t* loan) {
  return loan->device->vtable->loan_open(loan);
}

void hrt_hal_loan_close(hrt_hal_loan_t* loan, bool abandon) {
  loan->device->vtable->loan_close(loan, abandon);
}

#include "hal/pending_submission.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/live.h"

size_t hrt_hal_pending_submission_storage_size(
    const hrt_hal_submission_t* submission) {
  return submission->binding_count * sizeof(hrt_hal_buffer_ref_t) +
         (submission->wait_count + submission->signal_count) *
             sizeof(hrt_hal_semaphore_point_t);
}

// Copies `count` semaphore points and retains their semaphores.
static void hrt_copy_points(hrt_hal_semaphore_point_t* dst,
                            const hrt_hal_semaphore_point_t* src,
                            uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    dst[i] = src[i];
    hrt_hal_semaphore_retain(dst[i].semaphore);
  }
}

void hrt_hal_pending_submission_init(hrt_hal_pending_submission_t* pending,
                                     const hrt_hal_submission_t* submission,
                                     void* storage) {
  pending->bindings = storage;
  pending->waits = (hrt_hal_semaphore_point_t*)(pending->bindings +
                                                submission->binding_count);
  pending->signals = pending->waits + submission->wait_count;
  pending->command_buffer = submission->command_buffer;
  pending->caller_holds = submission->caller_holds;
  if (!pending->caller_holds) {
    hrt_hal_command_buffer_retain(pending->command_buffer);
  }
  pending->binding_count = submission->binding_count;
  for (uint32_t i = 0; i < submission->binding_count; ++i) {
    pending->bindings[i] = submission->bindings[i];
    if (!pending->caller_holds) {
      hrt_hal_buffer_retain(pending->bindings[i].buffer);
    }
  }
  pending->wait_count = submission->wait_count;
  hrt_copy_points(pending->waits, submission->waits, submission->wait_count);
  pending->signal_count = submission->signal_count;
  hrt_copy_points(pending->signals, submission->signals,
                  submission->signal_count);
  pending->completion = submission->completion;
  pending->host_context = submission->host_context;
  pending->dispatch_timing = submission->dispatch_timing;
  hrt_live_add(HRT_LIVE_SUBMISSION, 1);
}

uint32_t hrt_hal_pending_submission_written(
    const hrt_hal_pending_submission_t* pending,
    const hrt_hal_command_t* command, hrt_hal_buffer_ref_t* out) {
  const hrt_hal_buffer_ref_t* target = NULL;
  switch (command->type) {
    case HRT_HAL_COMMAND_FILL:
      target = &command->fill.target;
      break;
    case HRT_HAL_COMMAND_COPY:
      target = &command->copy.target;
      break;
    case HRT_HAL_COMMAND_UPDATE:
      target = &command->update.target;
      break;
    case HRT_HAL_COMMAND_DISPATCH: {
      const hrt_hal_dispatch_t* dispatch = &command->dispatch;
      uint32_t count = 0;
      for (uint32_t i = 0; i < dispatch->binding_count; ++i) {
        if (dispatch->read_only_bindings >> i & 1u) continue;
        out[count++] =
            hrt_hal_pending_submission_resolve(pending, &dispatch->bindings[i]);
      }
      return count;
    }
    case HRT_HAL_COMMAND_READ:
    case HRT_HAL_COMMAND_BARRIER:
    case HRT_HAL_COMMAND_TRACE:
      return 0;
  }
  if (!target) return 0;
  out[0] = hrt_hal_pending_submission_resolve(pending, target);
  return 1;
}

bool hrt_hal_buffer_ranges_overlap(const hrt_hal_buffer_ref_t* a,
                                   const hrt_hal_buffer_ref_t* b) {
  return a->buffer == b->buffer && a->length && b->length &&
         a->offset < b->offset + b->length && b->offset < a->offset + a->length;
}

void hrt_hal_pending_submission_finish(hrt_hal_pending_submission_t* pending,
                                       hrt_status_t status, void* owner,
                                       hrt_hal_device_t* device) {
  for (uint32_t i = 0; i < pending->signal_count; ++i) {
    if (status == HRT_OK) {
      status = hrt_hal_semaphore_signal(pending->signals[i].semaphore,
                                        pending->signals[i].value);
    } else {
      hrt_hal_semaphore_fail(pending->signals[i].semaphore,
                             hrt_status_clone(status));
    }
  }
  hrt_hal_completion_t completion = pending->completion;
  if (!pending->caller_holds) {
    hrt_hal_command_buffer_release(pending->command_buffer);
    for (uint32_t i = 0; i < pending->binding_count; ++i) {
      hrt_hal_buffer_release(pending->bindings[i].buffer);
    }
  }
  for (uint32_t i = 0; i < pending->wait_count; ++i) {
    hrt_hal_semaphore_release(pending->waits[i].semaphore);
  }
  for (uint32_t i = 0; i < pending->signal_count; ++i) {
    hrt_hal_semaphore_release(pending->signals[i].semaphore);
  }
  // Made by the submitting thread (the JS thread, in the binding).
  hrt_free_recycled(owner);
  hrt_live_add(HRT_LIVE_SUBMISSION, -1);
  hrt_hal_device_release(device);
  if (completion.fn) {
    completion.fn(completion.user_data, status);
  } else {
    hrt_status_free(status);
  }
}

hrt_hal_buffer_ref_t hrt_hal_pending_submission_resolve(
    const hrt_hal_pending_submission_t* pending,
    const hrt_hal_buffer_ref_t* ref) {
  hrt_hal_buffer_ref_t resolved = {0};
  hrt_status_free(hrt_hal_buffer_ref_resolve(
      ref, pending->bindings, pending->binding_count, &resolved));
  return resolved;
}

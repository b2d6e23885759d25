// What a device keeps of a submission it has accepted, until it completes:
// the shared bookkeeping of every driver's queue.
//
// init copies the submission's arrays into storage the device provides and
// retains the command buffer and the bound buffers (unless the caller holds
// them: hrt_hal_submission_t.caller_holds) and the semaphores (the caller's
// arrays may go as soon as queue_submit returns). finish runs on
// the device's completion thread: it signals the semaphores in order (one
// that cannot be signalled fails the submission with that status, and the
// semaphores after it are failed with it; a failed submission fails them
// all), drops every reference, frees the device's submission object, drops
// the submission's reference to the device (possibly the last: the
// device's destroy must then not wait for this thread), and then calls the
// completion. So whoever sees the completion and releases the device holds
// its last reference, and a device made next does not share what the old
// one held (a lost CUDA context).
#ifndef HRT_HAL_PENDING_SUBMISSION_H_
#define HRT_HAL_PENDING_SUBMISSION_H_

#include <stdbool.h>
#include <stddef.h>

#include "hal/command_buffer.h"
#include "hal/device.h"

typedef struct hrt_hal_pending_submission_s {
  hrt_hal_command_buffer_t* command_buffer;  // retained unless caller_holds
  bool caller_holds;
  uint32_t binding_count;
  uint32_t wait_count;
  uint32_t signal_count;
  hrt_hal_completion_t completion;
  void* host_context;
  hrt_hal_dispatch_timing_fn_t dispatch_timing;
  hrt_hal_buffer_ref_t* bindings;      // buffers retained (as above)
  hrt_hal_semaphore_point_t* waits;    // semaphores retained
  hrt_hal_semaphore_point_t* signals;  // semaphores retained
} hrt_hal_pending_submission_t;

// Bytes of 8-byte-aligned storage init needs for `submission`'s arrays.
size_t hrt_hal_pending_submission_storage_size(
    const hrt_hal_submission_t* submission);

// Copies and retains (see above); counts a live submission.
void hrt_hal_pending_submission_init(hrt_hal_pending_submission_t* pending,
                                     const hrt_hal_submission_t* submission,
                                     void* storage);

// The concrete range of `ref`, an operand of the pending command buffer.
// Submit validated every operand against these bindings, so it cannot fail.
hrt_hal_buffer_ref_t hrt_hal_pending_submission_resolve(
    const hrt_hal_pending_submission_t* pending,
    const hrt_hal_buffer_ref_t* ref);

// The resolved ranges `command` (of the pending command buffer) may write,
// stored in `out` (room for HRT_HAL_MAX_DISPATCH_BINDINGS); returns their
// count: a fill, copy or update target; a dispatch's bindings but those its
// read_only_bindings marks; nothing for a read, trace or barrier.
uint32_t hrt_hal_pending_submission_written(
    const hrt_hal_pending_submission_t* pending,
    const hrt_hal_command_t* command, hrt_hal_buffer_ref_t* out);

// Whether two resolved ranges share a byte (an empty range shares none).
bool hrt_hal_buffer_ranges_overlap(const hrt_hal_buffer_ref_t* a,
                                   const hrt_hal_buffer_ref_t* b);

// Completion thread. Consumes `status`, frees `owner` (the device's
// submission object holding `pending`, from hrt_allocate_recycled) and
// releases `device` (the
// submission's reference) before calling the completion.
void hrt_hal_pending_submission_finish(hrt_hal_pending_submission_t* pending,
                                       hrt_status_t status, void* owner,
                                       hrt_hal_device_t* device);

#endif  // HRT_HAL_PENDING_SUBMISSION_H_

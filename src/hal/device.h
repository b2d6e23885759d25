// Devices: where buffers live and command buffers run.
//
// Threads and lifetime:
// - Every function here may be called from any thread.
// - A device is reference counted. Buffers and executables retain it, and so
//   does every submission until its completion has run, so a device lives
//   while work is in flight. The last release may happen on the device's own
//   completion thread; implementations handle that (they cannot join
//   themselves): destroy on any other thread joins the device's threads;
//   destroy on the device's own thread detaches it, and that thread frees the
//   device and exits without touching anything else (detach-and-forget). Such
//   a thread can outlive every user of the device, so whoever loads the
//   runtime as a shared library must keep it mapped until the process exits
//   (the Node addon pins itself: src/napi/addon.c).
// - Each device has its own completion thread (a local device's queue and
//   trace threads take turns as one: see local_device.h). A submission's
//   completion callback runs there exactly once, never on the submitting
//   thread, after the device has dropped what the submission retained
//   (command buffer, bound buffers, semaphores) and the submission's
//   reference to the device (possibly the last: see pending_submission.h).
// - A device has one queue: submissions start in FIFO order, each after its
//   waits are satisfied. A wait must therefore never depend on a later
//   submission to the same device; it would block that device for good.
#ifndef HRT_HAL_DEVICE_H_
#define HRT_HAL_DEVICE_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/ref.h"
#include "base/status.h"
#include "hal/buffer.h"
#include "hal/command_buffer.h"
#include "hal/executable.h"
#include "hal/semaphore.h"

typedef struct hrt_hal_device_info_s {
  char driver[32];  // "local-sync", "local-task", "cuda"
  char kind[16];    // "local" or "cuda": selects module executables
  char name[128];   // human readable
  char uri[64];     // canonical URI that recreates this device
  uint32_t ordinal;
  uint32_t worker_count;           // CPU threads running workgroups
  uint64_t total_memory;           // bytes; 0 when unknown
  uint32_t compute_capability[2];  // CUDA only
  uint32_t multiprocessor_count;   // CUDA only
  int32_t driver_version;          // CUDA only
} hrt_hal_device_info_t;

// Called exactly once per accepted submission, on the device's completion
// thread. Takes ownership of `status` (HRT_OK on success).
typedef struct hrt_hal_completion_s {
  void (*fn)(void* user_data, hrt_status_t status);
  void* user_data;
} hrt_hal_completion_t;

// Reports how long one dispatch of a profiled submission took, on the
// device's completion thread, after the dispatch has completed and before
// the submission's completion. Times are hrt_time_now_ns() nanoseconds (a
// GPU device converts its own clock to that timeline); `command_index` is the
// dispatch's position in the command buffer.
typedef void (*hrt_hal_dispatch_timing_fn_t)(void* host_context,
                                             uint32_t command_index,
                                             int64_t start_ns,
                                             int64_t duration_ns);

typedef struct hrt_hal_submission_s {
  hrt_hal_command_buffer_t* command_buffer;  // finalized, same device
  const hrt_hal_buffer_ref_t* bindings;      // concrete refs for the slots
  uint32_t binding_count;
  const hrt_hal_semaphore_point_t* waits;  // all reached before it runs
  uint32_t wait_count;
  const hrt_hal_semaphore_point_t* signals;  // signalled (or failed) after
  uint32_t signal_count;
  hrt_hal_completion_t completion;  // fn may be NULL
  void* host_context;  // passed to trace callbacks; must outlive completion
  hrt_hal_dispatch_timing_fn_t dispatch_timing;  // NULL: not profiled
  // True: the submitter keeps the command buffer and every buffer of
  // `bindings` until the completion has returned (a program call holds them
  // all), so the submission takes no references to them. Needs a
  // completion.
  bool caller_holds;
} hrt_hal_submission_t;

typedef struct hrt_hal_device_s hrt_hal_device_t;
typedef struct hrt_hal_loan_s hrt_hal_loan_t;

typedef struct hrt_hal_device_vtable_s {
  void (*destroy)(hrt_hal_device_t* device);
  hrt_status_t (*allocate_buffer)(hrt_hal_device_t* device,
                                  uint64_t byte_length,
                                  const void* initial_data,
                                  hrt_hal_buffer_t** out_buffer);
  hrt_status_t (*create_executable)(hrt_hal_device_t* device,
                                    const hrt_hal_executable_params_t* params,
                                    hrt_hal_executable_t** out_executable);
  // Called after hrt_hal_device_queue_submit validated the submission.
  hrt_status_t (*queue_submit)(hrt_hal_device_t* device,
                               const hrt_hal_submission_t* submission);
  // Optional (NULL: memcpy or hrt_copy_streaming); see
  // hrt_hal_device_copy_host.
  void (*copy_host)(hrt_hal_device_t* device, void* dst, const void* src,
                    uint64_t byte_length, bool streaming);
  // Optional (NULL: the device lends nothing); see hrt_hal_device_lend.
  hrt_hal_loan_t* (*lend)(hrt_hal_device_t* device, hrt_hal_buffer_t* buffer,
                          const void* data, uint64_t length, void* spare);
  const void* (*loan_open)(hrt_hal_loan_t* loan);
  void (*loan_close)(hrt_hal_loan_t* loan, bool abandon);
} hrt_hal_device_vtable_t;

struct hrt_hal_device_s {
  hrt_ref_t ref;
  const hrt_hal_device_vtable_t* vtable;
  hrt_hal_device_info_t info;
};

// For implementations: sets the common fields (one reference, live count).
void hrt_hal_device_initialize(const hrt_hal_device_vtable_t* vtable,
                               hrt_hal_device_t* device);
// For implementations: the matching live-count decrement in destroy.
void hrt_hal_device_deinitialize(hrt_hal_device_t* device);

void hrt_hal_device_retain(hrt_hal_device_t* device);
void hrt_hal_device_release(hrt_hal_device_t* device);

const hrt_hal_device_info_t* hrt_hal_device_info(
    const hrt_hal_device_t* device);

// Allocates `byte_length` bytes, initialised from `initial_data` when it is
// not NULL and zero-filled otherwise. RESOURCE_EXHAUSTED when out of memory.
// `initial_data` HRT_HAL_UNINITIALIZED leaves the bytes unspecified (memory
// reused from the device's cache keeps what it held, and no fill runs): for
// a caller that overwrites every byte before anything can read one.
hrt_status_t hrt_hal_device_allocate_buffer(
    hrt_hal_device_t* device, uint64_t byte_length, const void* initial_data,
    hrt_hal_buffer_t** out_buffer) HRT_MUST_USE;
extern const char hrt_hal_uninitialized_tag;
#define HRT_HAL_UNINITIALIZED ((const void*)&hrt_hal_uninitialized_tag)

hrt_status_t hrt_hal_device_create_executable(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) HRT_MUST_USE;

// Validates and enqueues a submission. On HRT_OK the device has retained
// everything it needs (command buffer, bound buffers, semaphores) and will
// run the completion exactly once; on error nothing was retained and the
// completion is never called. A failed wait semaphore or a failing command
// fails the signal semaphores and passes the status to the completion.
hrt_status_t hrt_hal_device_queue_submit(hrt_hal_device_t* device,
                                         const hrt_hal_submission_t* submission)
    HRT_MUST_USE;

// memcpy of `byte_length` host bytes (the ranges do not overlap), for a
// trace callback's copy of traced data: on a local-task device's queue
// thread the copy is spread over its workers, which are idle while a trace
// runs there; on any other thread it is a memcpy. `streaming`: the
// destination is not read soon (a block handed to JavaScript, a ring), so
// the stores bypass the caches (base/copy.h).
void hrt_hal_device_copy_host(hrt_hal_device_t* device, void* dst,
                              const void* src, uint64_t byte_length,
                              bool streaming);

// Loans: traced bytes read where they lie, without a copy. A device whose
// buffers are host memory (the local devices) lends the bytes a trace
// callback was given (`length` bytes at `data`, inside `buffer`) to a sink
// that hands them to JavaScript for the length of a callback. Until the
// loan is closed the device keeps them as the trace saw them: a later
// command that may write them first copies them into `spare` (the
// caller's, at least `length` bytes) while the loan is only lent, and
// waits while it is open. The loan keeps `buffer` alive.
//
// Threads and ownership: lend on the device's completion thread, during
// the trace callback that was given `data`; NULL when the device lends
// nothing or is out of memory (then copy). The loan is the caller's until
// close, which frees it; `spare` stays the caller's, free to reuse once
// close returns. open and close run on any thread (the JS thread), open at
// most once and before close.
struct hrt_hal_loan_s {
  hrt_hal_device_t* device;
};
hrt_hal_loan_t* hrt_hal_device_lend(hrt_hal_device_t* device,
                                    hrt_hal_buffer_t* buffer, const void* data,
                                    uint64_t length, void* spare);
// The bytes as the trace saw them (the buffer's own, or `spare` where a
// writer came first), valid until close: writers of them wait until then.
const void* hrt_hal_loan_open(hrt_hal_loan_t* loan);
// Ends the loan and frees it. `abandon`: the bytes may still be read after
// it (memory that could not be taken back from JavaScript): writers go on,
// and the buffer's storage, if it was opened, is never freed, so the bytes
// stay mapped (the buffer and the device still go).
void hrt_hal_loan_close(hrt_hal_loan_t* loan, bool abandon);

#endif  // HRT_HAL_DEVICE_H_

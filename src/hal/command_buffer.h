// Command buffers: a recorded, reusable list of commands for one device.
//
// Recording happens on one thread; hrt_hal_command_buffer_finalize() ends it.
// A finalized command buffer is immutable and may be submitted any number of
// times, concurrently, from any thread. Commands address memory through
// buffer refs: a fixed buffer (retained by the command buffer) or a binding
// slot, filled per submission from the submission's binding table, so one
// recording runs on new data without re-recording.
//
// Ordering: a device executes the commands of one submission in order, and
// each command sees the writes of every command before it (CPU devices run
// them strictly in sequence). barrier() marks that dependency explicitly for
// devices that can overlap commands.
#ifndef HRT_HAL_COMMAND_BUFFER_H_
#define HRT_HAL_COMMAND_BUFFER_H_

#include <stdint.h>

#include "base/ref.h"
#include "base/status.h"
#include "hal/buffer.h"
#include "hal/element_type.h"
#include "hal/executable.h"
#include "hal/tensor_summary.h"

typedef struct hrt_hal_command_buffer_s hrt_hal_command_buffer_t;

typedef enum hrt_hal_command_type_e {
  HRT_HAL_COMMAND_FILL = 0,
  HRT_HAL_COMMAND_COPY,
  HRT_HAL_COMMAND_UPDATE,
  HRT_HAL_COMMAND_READ,
  HRT_HAL_COMMAND_DISPATCH,
  HRT_HAL_COMMAND_BARRIER,
  HRT_HAL_COMMAND_TRACE,
} hrt_hal_command_type_t;

// A trace command's host callback. It runs on the device's completion
// thread once every command before it has completed, with a host copy of
// each traced range (`data[i]`, `lengths[i]` bytes) that is valid only
// during the call, and before the submission completes. A summary or health
// trace (hrt_hal_command_buffer_trace_mode) gets, instead of the bytes, an
// hrt_hal_tensor_summary_t per source (`lengths[i]` is its size), computed
// on the device when every command before it has run. Devices may run
// later commands while it runs (only those that may write a traced range
// wait for it). `submission_context` is the submission's
// hrt_hal_submission_t.host_context. `buffers[i]`, where `buffers` is not
// NULL, is the buffer that `data[i]` lies in, which the callback may lend
// (hrt_hal_device_lend; full traces on devices whose buffers are host
// memory). A non-OK return fails the submission with that status: later
// traces of the submission are not delivered, and later commands may
// already have run (reads included) or not run.
typedef hrt_status_t (*hrt_hal_trace_fn_t)(void* user_data,
                                           void* submission_context,
                                           uint32_t count,
                                           const void* const* data,
                                           const uint64_t* lengths,
                                           hrt_hal_buffer_t* const* buffers);

#define HRT_HAL_MAX_TRACE_SOURCES 32

#define HRT_HAL_MAX_DISPATCH_BINDINGS 32
// The most workgroups one dispatch may have in all (the product of the
// counts): a CPU device runs them one by one, and a grid beyond this would
// run for hours with no way to stop it.
#define HRT_HAL_MAX_DISPATCH_WORKGROUPS (1ull << 32)
#define HRT_HAL_MAX_DISPATCH_CONSTANTS 64

typedef struct hrt_hal_dispatch_s {
  hrt_hal_executable_t* executable;  // retained by the command buffer
  uint32_t entry_ordinal;
  uint32_t workgroup_count[3];  // each >= 1; x < 2^31, y and z <= 65535;
                                // product <= HRT_HAL_MAX_DISPATCH_WORKGROUPS
  uint32_t workgroup_size[3];   // each >= 1; product <= 1024
  uint32_t constant_count;
  const uint32_t* constants;
  uint32_t binding_count;
  const hrt_hal_buffer_ref_t* bindings;
  // Bit i set: the kernel never writes binding i (a built-in's signature
  // says so). Zero, the default, means any binding may be written: what a
  // device must assume of user kernels when it orders a later write after
  // a trace's snapshot (see hrt_hal_pending_submission_written).
  uint32_t read_only_bindings;
} hrt_hal_dispatch_t;

typedef struct hrt_hal_command_s {
  hrt_hal_command_type_t type;
  union {
    struct {
      hrt_hal_buffer_ref_t target;
      uint64_t pattern;         // little-endian bytes, repeated
      uint32_t pattern_length;  // 1, 2, 4 or 8; target length a multiple
    } fill;
    struct {
      hrt_hal_buffer_ref_t source;
      hrt_hal_buffer_ref_t target;  // same length as source
    } copy;
    struct {
      const void* data;  // owned copy taken at record time
      hrt_hal_buffer_ref_t target;
    } update;
    struct {
      hrt_hal_buffer_ref_t source;
      void* host_target;  // caller-owned; must outlive every submission
    } read;
    hrt_hal_dispatch_t dispatch;  // arrays owned by the command buffer
    struct {
      hrt_hal_trace_fn_t fn;
      void* user_data;  // valid until the last submission completes
      uint32_t source_count;
      const hrt_hal_buffer_ref_t* sources;  // owned by the command buffer
      hrt_hal_trace_mode_t mode;
      // [source_count], owned by the command buffer; NULL in FULL mode.
      const hrt_hal_element_type_t* element_types;
    } trace;
  };
} hrt_hal_command_t;

// Creates an empty command buffer recording for `device` (retained).
hrt_status_t hrt_hal_command_buffer_create(
    hrt_hal_device_t* device,
    hrt_hal_command_buffer_t** out_command_buffer) HRT_MUST_USE;
void hrt_hal_command_buffer_retain(hrt_hal_command_buffer_t* command_buffer);
void hrt_hal_command_buffer_release(hrt_hal_command_buffer_t* command_buffer);

// Recording. Each validates its arguments as far as they are known (fixed
// buffers must belong to the device and ranges must fit; slot ranges are
// checked at submit) and fails with FAILED_PRECONDITION after finalize.
hrt_status_t hrt_hal_command_buffer_fill(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t target,
    uint64_t pattern, uint32_t pattern_length) HRT_MUST_USE;
hrt_status_t hrt_hal_command_buffer_copy(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t source,
    hrt_hal_buffer_ref_t target) HRT_MUST_USE;
// Copies `length` bytes of `data` now; target length must equal `length`.
hrt_status_t hrt_hal_command_buffer_update(
    hrt_hal_command_buffer_t* command_buffer, const void* data, uint64_t length,
    hrt_hal_buffer_ref_t target) HRT_MUST_USE;
// Copies the source range to `host_target` when the command executes.
hrt_status_t hrt_hal_command_buffer_read(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_buffer_ref_t source,
    void* host_target) HRT_MUST_USE;
// Copies the dispatch's arrays. Checks counts against the entry, workgroup
// bounds, and the executable's device.
hrt_status_t hrt_hal_command_buffer_dispatch(
    hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_dispatch_t* dispatch) HRT_MUST_USE;
hrt_status_t hrt_hal_command_buffer_barrier(
    hrt_hal_command_buffer_t* command_buffer) HRT_MUST_USE;
// Records a trace of `sources[0..count)` (1 <= count <=
// HRT_HAL_MAX_TRACE_SOURCES); see hrt_hal_trace_fn_t. `user_data` must stay
// valid until the last submission of this command buffer has completed.
hrt_status_t hrt_hal_command_buffer_trace(
    hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_buffer_ref_t* sources, uint32_t count, hrt_hal_trace_fn_t fn,
    void* user_data) HRT_MUST_USE;
// Records a trace of `sources[0..count)` in `mode`. For HRT_HAL_TRACE_FULL
// it is hrt_hal_command_buffer_trace (`element_types` unused). Otherwise
// `element_types[i]` is the element type of source i (its length must be a
// multiple of the element size: INVALID_ARGUMENT naming the source
// otherwise, at record for a fixed buffer, at submit for a slot) and the
// callback gets, for each source, data[i] pointing to an
// hrt_hal_tensor_summary_t and lengths[i] == sizeof(hrt_hal_tensor_summary_t),
// computed on the device; same thread, ordering and failure rules as a full
// trace.
hrt_status_t hrt_hal_command_buffer_trace_mode(
    hrt_hal_command_buffer_t* command_buffer, hrt_hal_trace_mode_t mode,
    const hrt_hal_buffer_ref_t* sources,
    const hrt_hal_element_type_t* element_types, uint32_t count,
    hrt_hal_trace_fn_t fn, void* user_data) HRT_MUST_USE;
// Ends recording, on the recording thread. Other threads may submit the
// command buffer once it has reached them through a synchronizing hand-off
// (a queue or lock), which publishes the recorded commands with it.
void hrt_hal_command_buffer_finalize(hrt_hal_command_buffer_t* command_buffer);

// Reading a finalized command buffer (any thread).
hrt_hal_device_t* hrt_hal_command_buffer_device(
    const hrt_hal_command_buffer_t* command_buffer);
bool hrt_hal_command_buffer_is_finalized(
    const hrt_hal_command_buffer_t* command_buffer);
uint32_t hrt_hal_command_buffer_count(
    const hrt_hal_command_buffer_t* command_buffer);
const hrt_hal_command_t* hrt_hal_command_buffer_at(
    const hrt_hal_command_buffer_t* command_buffer, uint32_t index);
// One more than the highest binding slot any command uses (0 if none).
uint32_t hrt_hal_command_buffer_slot_count(
    const hrt_hal_command_buffer_t* command_buffer);

// Checks a submission's binding table against every slot ref: enough
// entries, concrete buffers of `device`, and in-bounds ranges (lengths
// that must match do). Errors name the command index and operand.
hrt_status_t hrt_hal_command_buffer_validate_bindings(
    const hrt_hal_command_buffer_t* command_buffer,
    const hrt_hal_buffer_ref_t* table, uint32_t table_count) HRT_MUST_USE;

#endif  // HRT_HAL_COMMAND_BUFFER_H_

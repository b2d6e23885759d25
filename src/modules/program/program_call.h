// One call of a program function: allocates its outputs and locals, submits
// the function's recorded command buffer with the call's bindings, and
// completes on the device's completion thread; and the host callbacks that
// the submission runs there (traces, dispatch timings).
//
// Threads: hrt_program_call_begin() runs on the invoking thread; the call
// then belongs to its submission until it completes, when it hands its
// outputs to the invocation's `done` and frees itself (completion thread).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_CALL_H_
#define HRT_MODULES_PROGRAM_PROGRAM_CALL_H_

#include <stdint.h>

#include "modules/program/program_internal.h"
#include "modules/program/program_state.h"

// What one trace command reports; its address is the trace's user_data.
// Made when program_state.c records the command, in the state's arena: lives
// as long as the per-context state.
typedef struct hrt_trace_site_s {
  const hrt_program_state_t* state;
  const hrt_function_t* function;
  uint32_t op_index;
  const char* key;
  const uint32_t* values;  // [count] value indices
  uint32_t every;          // trace only invocations whose sequence % every == 0
  hrt_hal_trace_mode_t mode;  // what the command reports: data or summaries
  // A trace from counts (health): the chain step of each value; the command
  // traces the counts values in full. NULL otherwise.
  const uint8_t* steps;
} hrt_trace_site_t;

// The trace callback of a trace command (hrt_hal_command_buffer_trace_mode):
// `user_data` is its hrt_trace_site_t, `submission_context` the call. Hands
// the traced tensors (their data, or in a summary or health trace their
// summaries) to the HAL module's sink (completion thread).
hrt_status_t hrt_program_call_trace(
    void* user_data, void* submission_context, uint32_t count,
    const void* const* data, const uint64_t* lengths,
    hrt_hal_buffer_t* const* buffers) HRT_MUST_USE;

// The vtable's begin_call of program modules.
hrt_status_t hrt_program_call_begin(hrt_vm_module_t* base, void* opaque,
                                    const hrt_vm_call_t* vm_call) HRT_MUST_USE;

#endif  // HRT_MODULES_PROGRAM_PROGRAM_CALL_H_

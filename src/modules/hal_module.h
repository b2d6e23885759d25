// The HAL module (name "hal"): binds a context to a device and a debug sink.
//
// Programs linked after it run on its device and deliver their traces to its
// sink through hrt_hal_module_trace(). It exports no functions.
// Threads: hrt_hal_module_trace() runs on the device's completion thread;
// the accessors on any thread. The module retains its device and calls the
// sink's release when it is destroyed (see debug_sink.h).
#ifndef HRT_MODULES_HAL_MODULE_H_
#define HRT_MODULES_HAL_MODULE_H_

#include <stdbool.h>

#include "hal/device.h"
#include "modules/debug_sink.h"
#include "modules/sinks/recorder_sink.h"
#include "vm/context.h"
#include "vm/module.h"

// Tells the sink to deliver what it holds (its flush, if it takes it).
// Completion thread, at an invocation's end (debug_sink.h).
void hrt_hal_module_flush(const hrt_vm_module_t* hal_module);

// Whether trace_dispatches covers the dispatch keyed `key`
// ("function:op:entry", see hrt_program_module_dispatch_keys). Called only
// while a context links a program module after the HAL module, on the
// linking thread, once per dispatch the other filters cover.
typedef struct hrt_trace_key_filter_s {
  bool (*fn)(void* user_data, const char* key);
  // Not owned by the module: must stay valid whenever a context links it.
  void* user_data;
} hrt_trace_key_filter_t;

typedef struct hrt_hal_module_options_s {
  // Trace what every dispatch writes (its bindings that are not function
  // inputs), keyed "function:op:kernel", without changing the program.
  bool trace_dispatches;
  // Which dispatches trace_dispatches covers; each filter is off when unset.
  // Copied at creation.
  hrt_trace_key_filter_t trace_keys;   // fn NULL: every key
  const char* const* trace_functions;  // function names (without module)
  uint32_t trace_function_count;
  // Invocations whose sequence (their number in their context, 1, 2, ...)
  // is a multiple of trace_every (0: all).
  uint32_t trace_every;
  // What trace_dispatches traces and trace ops without a mode of their own
  // report: host copies (FULL, the default) or summaries computed on the
  // device (SUMMARY, HEALTH; hal/tensor_summary.h).
  hrt_hal_trace_mode_t trace_mode;
  // Fail the invocation (ABORTED) at the first traced tensor holding NaN or
  // Inf, before the sink sees it: naming the trace key, the tensor and its
  // first bad index (FULL traces) or its NaN, +Inf and -Inf counts (summary
  // and health traces, which need no copy of the tensor).
  bool reject_nonfinite;
  // Time every dispatch and report it to the sink's dispatch_timing.
  bool profile;
  // A flight recorder around the sink (recorder_sink.h) when either limit
  // is set; it needs a sink. A trace rejected by reject_nonfinite is
  // recorded before it fails its invocation.
  hrt_recorder_limits_t flight_recorder;
} hrt_hal_module_options_t;

// `sink` may be NULL (no sink). On error the sink's release is not called.
// INVALID_ARGUMENT for a flight recorder without a sink or with limits out
// of range.
hrt_status_t hrt_hal_module_create(hrt_hal_device_t* device,
                                   const hrt_debug_sink_t* sink,
                                   const hrt_hal_module_options_t* options,
                                   hrt_vm_module_t** out_module) HRT_MUST_USE;

// Whether `module` is a HAL module.
bool hrt_hal_module_isa(const hrt_vm_module_t* module);

// During create_state of `importer`: the HAL module named "hal" linked
// before it (borrowed; the context frees it after the importer's state).
// NOT_FOUND when there is none, INVALID_ARGUMENT when "hal" is another kind
// of module; both name the importer.
hrt_status_t hrt_hal_module_import(hrt_vm_context_t* context,
                                   const hrt_vm_module_t* importer,
                                   hrt_vm_module_t** out_hal) HRT_MUST_USE;
hrt_hal_device_t* hrt_hal_module_device(const hrt_vm_module_t* hal_module);
const hrt_hal_module_options_t* hrt_hal_module_options(
    const hrt_vm_module_t* hal_module);
// Hands one trace to the sink (completion thread), after the non-finite
// check when the module has it (a trace that check rejects goes to the
// flight recorder, if the module has one, and not to the sink).
hrt_status_t hrt_hal_module_trace(
    const hrt_vm_module_t* hal_module, const char* key,
    const hrt_trace_info_t* info, uint32_t count,
    const hrt_trace_tensor_t* tensors) HRT_MUST_USE;

// The module's flight recorder, or NULL when it has none. Borrowed: lives
// as long as the module.
hrt_recorder_sink_t* hrt_hal_module_recorder(const hrt_vm_module_t* hal_module);

// Tells the sink that an invocation failed (its invocation_failed, if it
// takes it). Completion thread, after the invocation's last trace and before
// its completion is reported.
void hrt_hal_module_invocation_failed(const hrt_vm_module_t* hal_module,
                                      const hrt_invocation_failure_t* failure);

// Whether trace_dispatches covers the dispatch keyed `key` of function
// `function` (the function and key filters; trace_every applies per call).
// Linking thread, while a context links (see hrt_trace_key_filter_t).
bool hrt_hal_module_traces_dispatch(const hrt_vm_module_t* hal_module,
                                    const char* function, const char* key);

// Hands dispatch timings to the sink, if it takes them (completion thread).
void hrt_hal_module_dispatch_timing(const hrt_vm_module_t* hal_module,
                                    const hrt_dispatch_timing_t* events,
                                    uint32_t count);

#endif  // HRT_MODULES_HAL_MODULE_H_

// Debug sinks: where traced tensors go.
//
// A sink is a by-value struct of callbacks, each a {fn, user_data} pair. The
// HAL module copies it at creation and then:
// - calls buffer_view_trace on the device's completion thread, once per
//   trace, in program order within one invocation, after every command
//   before the trace has completed. `tensors[i].data` is a host snapshot
//   valid only during the call: a sink that keeps data copies it. In a
//   summary or health trace (info->mode) every tensor has `summary` set
//   instead of `data` (see hrt_trace_tensor_t). A non-OK
//   return fails the invocation that produced the trace with that status.
// - calls dispatch_timing (optional: fn may be NULL) on the completion
//   thread for each dispatch of a profiled invocation, after the dispatch
//   and before the invocation completes;
// - calls invocation_failed (optional: fn may be NULL) on the completion
//   thread when an invocation whose traces go to the sink fails (any
//   failing status: a trace rejected, a kernel error, a lost device), after
//   its last trace and before its failure is reported to its caller. Work
//   refused before it starts (bad inputs, a device already lost) is no
//   failed invocation here: nothing is called for it.
// - calls trace_check (optional: fn may be NULL) where a flight recorder
//   keeps a trace instead of delivering it, with buffer_view_trace's
//   thread and arguments: a non-OK return (what buffer_view_trace would
//   refuse the trace with, e.g. data JavaScript cannot hold) fails the
//   invocation as the delivery would have, and the trace is not kept;
// - calls flush (optional: fn may be NULL) on the completion thread after an
//   invocation's last trace and timing (and after invocation_failed),
//   before its completion is reported: a sink may hold the events that
//   allow it (may_hold) until then, to deliver them together (the JS sink
//   does, js_sink.c).
// - calls release exactly once, when the HAL module is destroyed, on
//   whatever thread drops its last reference (possibly the completion
//   thread). If HAL module creation fails, release is not called and the
//   caller still owns user_data.
// A sink value belongs to exactly one HAL module (or tee, which does release
// its sinks even when its own creation fails): handing one to two would
// release it twice. Every pointer in the arguments (key, info strings,
// tensor names, shapes, data) is valid only during the call. One HAL module
// calls its sink from its device's completion thread only, one call at a
// time; a sink reached from several devices (through several tees) must
// serialize itself.
#ifndef HRT_MODULES_DEBUG_SINK_H_
#define HRT_MODULES_DEBUG_SINK_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "hal/element_type.h"
#include "hal/tensor_summary.h"

// How an invocation is named (see hrt_vm_call_t): `sequence` counts the
// invocations of its context (1, 2, ...; what users see); `invocation` is
// unique in the process, to tell apart invocations of several contexts that
// share one sink.
typedef struct hrt_trace_info_s {
  uint64_t sequence;     // the invocation's number in its context
  const char* function;  // "module.function"
  uint32_t op_index;     // index of the op in the function body
  int64_t time_ns;       // when the trace was taken (hrt_time_now_ns())
  uint64_t invocation;   // the invocation's id, unique in the process
  hrt_hal_trace_mode_t mode;  // what the tensors carry: data or summaries
  // A trace a flight recorder kept and delivers later (recorder_sink.h):
  // sequence, function, op_index and time_ns are the trace's own, and
  // `invocation` is the id of what made the recorder deliver it (the
  // failed invocation, or the dump).
  bool recorded;
  // The device that ran the traced work, for hrt_trace_copy; NULL when
  // none is at hand (a recorded trace).
  struct hrt_hal_device_s* device;
  // The sink may hold the trace back until the invocation's flush: no host
  // call of the invocation comes before its end (a host function runs
  // through another queue than the sink's, so traces before one are not
  // held). False for recorded traces.
  bool may_hold;
} hrt_trace_info_t;

// What a sink calls to copy traced data it keeps: hrt_hal_device_copy_host
// on info->device (spread over a local-task device's idle workers when the
// trace runs on its queue thread), or memcpy; `streaming` as there.
void hrt_trace_copy(const hrt_trace_info_t* info, void* dst, const void* src,
                    uint64_t byte_length, bool streaming);

typedef struct hrt_trace_tensor_s {
  const char* name;  // the traced value's name
  hrt_hal_element_type_t element_type;
  uint32_t rank;
  const int64_t* shape;
  // FULL traces: host bytes, row-major, valid during the call; NULL in
  // summary and health traces.
  const void* data;
  uint64_t byte_length;  // the tensor's bytes, in every mode
  // Summary and health traces: the tensor's summary computed on its device
  // (hal/tensor_summary.h says which fields each mode sets), valid during
  // the call; NULL in FULL traces.
  const hrt_hal_tensor_summary_t* summary;
  // The device buffer `data` lies in, which a sink may lend instead of
  // copying (hrt_hal_device_lend on info->device, during the call); NULL
  // where the bytes are a host copy (a GPU's, a recorded trace's).
  struct hrt_hal_buffer_s* buffer;
} hrt_trace_tensor_t;

typedef struct hrt_dispatch_timing_s {
  uint64_t sequence;     // the invocation's number in its context
  const char* function;  // "module.function"
  uint32_t op_index;
  const char* kernel;  // "executable.entry"
  const char* device;  // the device's URI
  int64_t start_ns;    // hrt_time_now_ns() timeline
  int64_t duration_ns;
  uint64_t invocation;  // the invocation's id, unique in the process
  bool may_hold;        // as in hrt_trace_info_t
} hrt_dispatch_timing_t;

// An invocation that failed (see invocation_failed).
typedef struct hrt_invocation_failure_s {
  uint64_t sequence;     // the invocation's number in its context
  const char* function;  // "module.function"
  uint64_t invocation;   // the invocation's id, unique in the process
  hrt_status_code_t code;
} hrt_invocation_failure_t;

typedef struct hrt_debug_sink_s {
  struct {
    hrt_status_t (*fn)(void* user_data, const char* key,
                       const hrt_trace_info_t* info, uint32_t count,
                       const hrt_trace_tensor_t* tensors);
    void* user_data;
  } buffer_view_trace;
  struct {
    hrt_status_t (*fn)(void* user_data, const char* key,
                       const hrt_trace_info_t* info, uint32_t count,
                       const hrt_trace_tensor_t* tensors);
    void* user_data;
  } trace_check;
  struct {
    void (*fn)(void* user_data, const hrt_dispatch_timing_t* events,
               uint32_t count);
    void* user_data;
  } dispatch_timing;
  struct {
    void (*fn)(void* user_data, const hrt_invocation_failure_t* failure);
    void* user_data;
  } invocation_failed;
  struct {
    void (*fn)(void* user_data);
    void* user_data;
  } flush;
  struct {
    void (*fn)(void* user_data);
    void* user_data;
  } release;
} hrt_debug_sink_t;

// A sink that drops every trace.
hrt_debug_sink_t hrt_debug_sink_null(void);

#endif  // HRT_MODULES_DEBUG_SINK_H_

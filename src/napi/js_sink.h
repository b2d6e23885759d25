// The JavaScript debug sink: JS targets behind the native debug sink of a
// HAL module (modules/debug_sink.h), all served by one channel. A target is
// a function `(key, tensors, info)` taking traces, or an object with any of
// trace(key, tensors, info), timing(event) and invocation(event); in STATS
// mode a target gets natively computed statistics instead of tensor data,
// and a summary or health trace carries summaries alone. Every target sees
// every event, in order; a throw from one does not stop the others.
//
// Threads and ownership:
// - create, begin_invocation, end_invocation, report_invocation and
//   take_error: the JS thread of the env that made the sink.
// - The native callbacks never call N-API: buffer_view_trace and
//   dispatch_timing run on the device's completion thread and may block it
//   (policy WAIT) until JavaScript has taken enough of the bytes bounded by
//   `max_bytes`; under DROP they drop and count instead. release runs on
//   whatever thread drops the HAL module's last reference and finishes the
//   channel (what is queued still drains).
// - The struct is reference counted natively (the HAL module until release,
//   the channel until its finalizer, each invocation in flight); the
//   callbacks are held through a napi_ref, weak while no invocation is in
//   flight (a callback that closes over its own HalModule or Context is
//   collected), strong between begin_invocation and end_invocation, and
//   deleted by the channel's finalizer on the JS thread.
// - A traced tensor too large for one ArrayBuffer fails its invocation
//   (RESOURCE_EXHAUSTED from buffer_view_trace) when a target wants data.
// How batches, time slices and backpressure work: the top of js_sink.c.
#ifndef HRT_NAPI_JS_SINK_H_
#define HRT_NAPI_JS_SINK_H_

#include <node_api.h>
#include <stdint.h>

#include "modules/debug_sink.h"
#include "napi/js_channel.h"

typedef struct hrt_js_sink_s hrt_js_sink_t;

typedef enum hrt_js_sink_policy_e {
  HRT_JS_SINK_WAIT = 0,
  HRT_JS_SINK_DROP,
} hrt_js_sink_policy_t;

typedef enum hrt_js_sink_mode_e {
  HRT_JS_SINK_TENSORS = 0,  // traces carry copies of the tensors
  HRT_JS_SINK_STATS,        // traces carry natively computed statistics
} hrt_js_sink_mode_t;

#define HRT_JS_SINK_MAX_TARGETS 16

typedef struct hrt_js_sink_options_s {
  uint64_t max_bytes;  // the backpressure bound
  hrt_js_sink_policy_t policy;
  // Large trace data (external ArrayBuffers) is lent to the callbacks of its
  // trace and detached as soon as they return, before the next trace is
  // delivered, so that its memory is reused at once instead of when V8
  // collects the ArrayBuffer (HalModule option traceData: 'borrowed'). A
  // device that can lends the traced bytes themselves instead of the sink
  // copying them (hal/device.h: hrt_hal_device_lend), from when the trace's
  // record is delivered until its callbacks return.
  bool borrowed;
} hrt_js_sink_options_t;

// JS thread. Makes a sink for `targets[0..count)` (functions or objects,
// each with its mode) and fills `out_native` with the callbacks to hand to
// hrt_hal_module_create. The caller keeps one reference (`out_sink`) and
// must pass `out_native` to exactly one HAL module (or tee), or call its
// release itself if that fails. Returns false with a pending exception.
bool hrt_js_sink_create(napi_env env, const napi_value* targets,
                        const hrt_js_sink_mode_t* modes, uint32_t count,
                        const hrt_js_sink_options_t* options,
                        hrt_js_sink_t** out_sink, hrt_debug_sink_t* out_native);

// Any thread (the JS thread, the completion thread freeing an invocation
// whose result could not be posted, wherever the HAL module's last
// reference goes). The last release frees only native memory (batches,
// pool reference, mutex); the napi_refs are gone by then (channel
// finalizer).
void hrt_js_sink_retain(hrt_js_sink_t* sink);
void hrt_js_sink_release(hrt_js_sink_t* sink);

// Any thread; fixed for the sink's life. The channel traces travel through.
// Completions of invocations that trace into this sink go through it too, so
// that every trace of an invocation is delivered before its promise settles.
// Borrowed.
hrt_js_channel_t* hrt_js_sink_channel(const hrt_js_sink_t* sink);

// Any thread. What the sink has dropped so far (policy DROP; always 0 under
// WAIT): traces (the count info.dropped reports with each trace) and
// dispatch timings, counted apart.
typedef struct hrt_js_sink_dropped_s {
  uint64_t traces;
  uint64_t timings;
} hrt_js_sink_dropped_t;
hrt_js_sink_dropped_t hrt_js_sink_dropped(hrt_js_sink_t* sink);

// JS thread. An invocation that may trace into the sink started / ended.
void hrt_js_sink_begin_invocation(napi_env env, hrt_js_sink_t* sink);
void hrt_js_sink_end_invocation(napi_env env, hrt_js_sink_t* sink);

// JS thread. Reports an invocation that has completed to target.invocation
// ({sequence, function, startNs, durationNs, ok}), if the target has that
// method, just before its promise settles. A throw is kept like a trace
// callback's (see take_error). `invocation` is the invocation's id and
// `sequence` its number in its context (hrt_vm_invocation_ids_t).
void hrt_js_sink_report_invocation(napi_env env, hrt_js_sink_t* sink,
                                   uint64_t invocation, uint64_t sequence,
                                   const char* function, int64_t start_ns,
                                   int64_t duration_ns, bool ok);

// JS thread. The first value the callback threw for the invocation whose id
// is `invocation`, removed from the sink; NULL when it threw none. A
// callback may throw any value, so a non-NULL result may be `undefined`, a
// string, ...
napi_value hrt_js_sink_take_error(napi_env env, hrt_js_sink_t* sink,
                                  uint64_t invocation);

#endif  // HRT_NAPI_JS_SINK_H_

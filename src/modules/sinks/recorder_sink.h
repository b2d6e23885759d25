// A flight recorder: a debug sink that keeps the last traces instead of
// delivering them, and hands them to the sink it wraps when an invocation
// fails or on demand.
//
// The recorder keeps deep copies (key, info, tensor names, shapes and data,
// or a summary trace's summaries)
// of the last `traces` traces, or of the last traces whose copies take at
// most `bytes` bytes of memory (a copy's bytes: its data plus its key,
// function and tensor names, shapes and bookkeeping,
// hrt_recorder_trace_bytes, or up to a quarter more when it reuses an older
// copy's allocation). A trace whose copy alone is larger than `bytes` is not
// kept: the ring keeps what it held, and the trace is counted as skipped.
// In normal operation nothing reaches the wrapped sink but dispatch
// timings, which pass through as they come.
//
// Delivery hands every held trace to the wrapped sink, oldest first, with
// info.recorded set and info.invocation the id of what caused the delivery,
// and empties the ring: when an invocation fails (the sink's
// invocation_failed, cause = the failed invocation) and on
// hrt_recorder_sink_deliver. A trace that the HAL module rejects as
// non-finite is recorded before the rejection (hrt_recorder_sink_record), so
// it is the last one delivered for its failure.
//
// Threads: the sink's callbacks as every debug sink's (debug_sink.h): the
// device's completion thread, one call at a time. Deliver runs there, or on
// any other thread that is not the JS thread (a dump of a lost device runs on
// a libuv worker thread); the wrapped sink still gets one call at a time (a
// second mutex is held while it runs). The ring's mutex is never held while
// the wrapped sink runs, so hrt_recorder_sink_held runs on any thread without
// waiting for a delivery (a sink that blocks on backpressure).
// Ownership: the recorder owns the wrapped sink and releases it when the
// recorder sink is released; if creation fails, the caller still owns it. Held
// traces are counted in live.h (HRT_LIVE_RECORDED_TRACE and _BYTES).
#ifndef HRT_MODULES_SINKS_RECORDER_SINK_H_
#define HRT_MODULES_SINKS_RECORDER_SINK_H_

#include <stdint.h>

#include "modules/debug_sink.h"

// Upper bounds of the settings.
#define HRT_RECORDER_MAX_TRACES (1u << 20)
#define HRT_RECORDER_MAX_BYTES ((1ull << 53) - 1)

// Exactly one is non-zero.
typedef struct hrt_recorder_limits_s {
  uint32_t traces;  // keep the last `traces` traces
  uint64_t bytes;   // keep the last traces whose copies fit in `bytes`
} hrt_recorder_limits_t;

typedef struct hrt_recorder_sink_s hrt_recorder_sink_t;

// Wraps `sink`, taking ownership of it on success.
// INVALID_ARGUMENT names the limit that is out of range. `*out_recorder` is
// borrowed: valid until `*out_sink` is released.
hrt_status_t hrt_recorder_sink_create(const hrt_debug_sink_t* sink,
                                      const hrt_recorder_limits_t* limits,
                                      hrt_recorder_sink_t** out_recorder,
                                      hrt_debug_sink_t* out_sink) HRT_MUST_USE;

// Keeps a copy of a trace (the sink's buffer_view_trace). RESOURCE_EXHAUSTED
// naming the trace when out of host memory (the oldest traces popped to
// make room for it are gone then).
hrt_status_t hrt_recorder_sink_record(
    hrt_recorder_sink_t* recorder, const char* key,
    const hrt_trace_info_t* info, uint32_t count,
    const hrt_trace_tensor_t* tensors) HRT_MUST_USE;

// Delivers the held traces (see above) with `cause` as their
// info.invocation; `*out_count` receives how many. Every held trace is
// delivered even when the wrapped sink fails one; the first failure is
// returned.
hrt_status_t hrt_recorder_sink_deliver(hrt_recorder_sink_t* recorder,
                                       uint64_t cause,
                                       uint32_t* out_count) HRT_MUST_USE;

// What the recorder holds now (any thread).
typedef struct hrt_recorder_held_s {
  uint32_t traces;
  uint64_t bytes;
  uint64_t skipped;  // traces too large to keep, since creation
} hrt_recorder_held_t;
hrt_recorder_held_t hrt_recorder_sink_held(hrt_recorder_sink_t* recorder);

// The bytes a copy of this trace takes (what `bytes` bounds).
uint64_t hrt_recorder_trace_bytes(const char* key, const hrt_trace_info_t* info,
                                  uint32_t count,
                                  const hrt_trace_tensor_t* tensors);

#endif  // HRT_MODULES_SINKS_RECORDER_SINK_H_

// A debug sink that forwards every trace to several sinks.
//
// Traces, dispatch timings and invocation failures go to `sinks[0..count)` in order; every sink
// sees every trace, and the first error returned wins. Releasing the tee
// releases each sink once. The tee takes ownership of the sinks, also when
// creation fails (it then releases them). Threads as every debug sink
// (modules/debug_sink.h).
#ifndef HRT_MODULES_SINKS_TEE_SINK_H_
#define HRT_MODULES_SINKS_TEE_SINK_H_

#include <stdint.h>

#include "modules/debug_sink.h"

#define HRT_TEE_MAX_SINKS 16

hrt_status_t hrt_tee_sink_create(const hrt_debug_sink_t* sinks, uint32_t count,
                                 hrt_debug_sink_t* out_sink) HRT_MUST_USE;

#endif  // HRT_MODULES_SINKS_TEE_SINK_H_

// Turning a HalModule's `debugSink` option into a native debug sink.
//
// The option is one of:
// - a function (key, tensors, info), or an object with trace / timing /
//   invocation methods: a JavaScript sink (js_sink.h);
// - an object made by halrt.sinks (lib/sinks.js), recognised by its string
//   property `halrtSinkKind`: 'stdio' {maxElements}, 'npy' {directory},
//   'stats' {callback} (a JavaScript sink in STATS mode), 'tee' {sinks}.
// Tees are flattened: the native sinks found are combined with one tee, and
// every JavaScript target found (functions, objects, stats callbacks) is
// served by a single JavaScript sink, whose channel the invocations complete
// through: that is what orders their traces before their promises.
//
// Threads: JS thread only.
#ifndef HRT_NAPI_JS_SINK_SPEC_H_
#define HRT_NAPI_JS_SINK_SPEC_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "modules/debug_sink.h"
#include "napi/js_sink.h"

// Builds the sink `value` describes into `out_sink` (owned by the caller,
// for hrt_hal_module_create, whose failure the caller handles by calling
// out_sink->release). `options` apply to the JavaScript sink, if any.
// `out_js_sink` receives a reference to the JavaScript
// sink inside, or NULL; `out_takes_traces` whether any sink in it receives
// traces (a function, an object with a trace method, or a halrt.sinks sink
// other than a tee of none such). Returns false with a pending exception (a
// HalrtError naming `name`), having built nothing.
bool hrt_js_sink_spec_build(napi_env env, napi_value value, const char* method,
                            const char* name,
                            const hrt_js_sink_options_t* options,
                            hrt_debug_sink_t* out_sink,
                            hrt_js_sink_t** out_js_sink,
                            bool* out_takes_traces);

#endif  // HRT_NAPI_JS_SINK_SPEC_H_

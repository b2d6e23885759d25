// The flight recorder of a HalModule, seen from JavaScript: the native
// methods behind `hal.flightRecorder` (lib/flight_recorder.js), defined on
// the HalModule prototype.
//
// halModule.flightRecorderState() -> null when the module has no recorder,
// else {traces} or {bytes} (the setting) with heldTraces, heldBytes and
// skipped (modules/sinks/recorder_sink.h).
// halModule.flightRecorderDump() -> Promise<number>: delivers the held
// traces to the module's sink and resolves with how many, once the sink has
// them.
//
// Threads: both methods run on the JS thread and never wait for device
// work. A dump is a submission of an empty command buffer to the module's
// device: its completion, on the device's completion thread (where the sink
// is called, one call at a time, after everything submitted before it),
// delivers the held traces and posts the result through the channel the
// traces travel (the JS sink's, so the promise settles after their
// callbacks ran; the env's without a JS sink). A dump holds a reference to
// the HAL module until its completion, and to the JS sink and channel until
// it settles, so close() or a worker ending meanwhile frees everything.
#ifndef HRT_NAPI_JS_RECORDER_H_
#define HRT_NAPI_JS_RECORDER_H_

#include <node_api.h>

napi_value hrt_js_recorder_state(napi_env env, napi_callback_info info);
napi_value hrt_js_recorder_dump(napi_env env, napi_callback_info info);

#endif  // HRT_NAPI_JS_RECORDER_H_

// JavaScript class HalModule: `new HalModule(instance, device, options)`.
//
// Wraps one HAL module reference, plus (when options.debugSink is given) one
// reference to its JS debug sink (js_sink.h). The callback is also stored on
// the object as `debugSink`, so the JS-visible edge HalModule -> callback
// keeps it alive while the sink's own napi_ref is weak. options.flightRecorder
// wraps the sink in a flight recorder (modules/sinks/recorder_sink.h), reached
// through the methods of js_recorder.h.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_HAL_MODULE_H_
#define HRT_NAPI_JS_HAL_MODULE_H_

#include <node_api.h>

#include "napi/js_common.h"
#include "napi/js_sink.h"
#include "napi/js_trace_keys.h"
#include "napi/js_wrap.h"
#include "vm/instance.h"
#include "vm/module.h"

// The handle behind every module object (HalModule and Module): the runtime
// module, the instance it was made for, and the JS sink if it has one.
typedef struct hrt_js_module_handle_s {
  hrt_vm_module_t* module;      // owned reference
  hrt_vm_instance_t* instance;  // owned reference
  hrt_js_sink_t* sink;          // owned reference, or NULL
  // A HalModule's traceDispatches.keys filter, owned, or NULL. The module
  // asks it while contexts link, which only `new Context` does, with this
  // handle pinned.
  hrt_js_trace_keys_t* trace_keys;
} hrt_js_module_handle_t;

extern const hrt_js_class_t hrt_js_hal_module_class;

// Releases everything a handle owns and frees it (the classes' release).
void hrt_js_module_handle_release(void* handle);

napi_value hrt_js_hal_module_define(napi_env env, hrt_js_env_t* state);

#endif  // HRT_NAPI_JS_HAL_MODULE_H_

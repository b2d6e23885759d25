// JavaScript class Context: `new Context(instance, modules)` links modules
// (HalModule and Module objects, in order) into a runtime context.
//
// The object keeps `modules` (a frozen copy of the array) as a property: the
// JS-visible edge Context -> modules -> HalModule.debugSink that keeps a
// debug sink's callback alive while its napi_ref is weak.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_CONTEXT_H_
#define HRT_NAPI_JS_CONTEXT_H_

#include <node_api.h>

#include "napi/js_common.h"
#include "napi/js_sink.h"
#include "napi/js_wrap.h"
#include "vm/context.h"

typedef struct hrt_js_context_handle_s {
  hrt_vm_context_t* context;  // owned reference
  hrt_js_sink_t* sink;        // owned reference to the HAL module's JS sink
} hrt_js_context_handle_t;

extern const hrt_js_class_t hrt_js_context_class;

napi_value hrt_js_context_define(napi_env env, hrt_js_env_t* state);

#endif  // HRT_NAPI_JS_CONTEXT_H_

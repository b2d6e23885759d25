// JavaScript class Instance: wraps one hrt_vm_instance_t reference.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_INSTANCE_H_
#define HRT_NAPI_JS_INSTANCE_H_

#include <node_api.h>

#include "napi/js_common.h"
#include "napi/js_wrap.h"

extern const hrt_js_class_t hrt_js_instance_class;

// Defines the class. Returns NULL with a pending exception on failure.
napi_value hrt_js_instance_define(napi_env env, hrt_js_env_t* state);

#endif  // HRT_NAPI_JS_INSTANCE_H_

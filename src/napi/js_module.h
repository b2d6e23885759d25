// JavaScript class Module: a program module (modules/program/program_module.h).
// Made by the static Module.fromJson(instance, text, baseDir?); lib/ adds
// Module.load(instance, path) and Module.fromObject(instance, object).
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_MODULE_H_
#define HRT_NAPI_JS_MODULE_H_

#include <node_api.h>

#include "napi/js_common.h"
#include "napi/js_hal_module.h"
#include "napi/js_wrap.h"

extern const hrt_js_class_t hrt_js_module_class;

napi_value hrt_js_module_define(napi_env env, hrt_js_env_t* state);

// The module handle of a HalModule or Module object named `name` in messages
// (not closed). Returns false with a pending exception otherwise.
bool hrt_js_arg_module(napi_env env, napi_value value, const char* method,
                       const char* name, hrt_js_module_handle_t** out_handle);

#endif  // HRT_NAPI_JS_MODULE_H_

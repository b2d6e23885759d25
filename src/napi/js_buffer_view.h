// JavaScript class BufferView: wraps one hrt_hal_buffer_view_t reference.
// Created only by Device methods; `new BufferView()` from JavaScript is
// rejected.
//
// A view keeps its buffer, and through it the runtime device, alive, so a
// view stays readable after its Device object is closed or collected.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_BUFFER_VIEW_H_
#define HRT_NAPI_JS_BUFFER_VIEW_H_

#include <node_api.h>

#include "hal/buffer_view.h"
#include "napi/js_common.h"
#include "napi/js_wrap.h"

extern const hrt_js_class_t hrt_js_buffer_view_class;

// Defines the class and stores its constructor in `state`. Returns NULL with
// a pending exception on failure.
napi_value hrt_js_buffer_view_define(napi_env env, hrt_js_env_t* state);

// Wraps `view` (an owned reference, consumed in every case) in a new
// BufferView object. Returns NULL with a pending exception on failure.
napi_value hrt_js_buffer_view_new(napi_env env, hrt_hal_buffer_view_t* view);

// viewDevice(value): the URI of the device holding BufferView `value`'s
// buffer; undefined for a closed view or anything else (lib/objects.js
// prints it). The binding's export.
napi_value hrt_js_buffer_view_device(napi_env env, napi_callback_info info);

#endif  // HRT_NAPI_JS_BUFFER_VIEW_H_

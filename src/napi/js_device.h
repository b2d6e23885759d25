// JavaScript class Device: wraps one hrt_hal_device_t reference. Created only
// by instance.createDevice(); `new Device()` from JavaScript is rejected.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_DEVICE_H_
#define HRT_NAPI_JS_DEVICE_H_

#include <node_api.h>

#include "hal/device.h"
#include "napi/js_common.h"
#include "napi/js_wrap.h"

extern const hrt_js_class_t hrt_js_device_class;

// Defines the class and stores its constructor in `state`. Returns NULL with
// a pending exception on failure.
napi_value hrt_js_device_define(napi_env env, hrt_js_env_t* state);

// Wraps `device` (an owned reference, consumed in every case) in a new Device
// object. Returns NULL with a pending exception on failure.
napi_value hrt_js_device_new(napi_env env, hrt_hal_device_t* device);

// A new BufferView of `dtype`[shape] on `device`: a copy of `data`, or zeros
// when `data` is NULL. Returns NULL with a pending exception (naming
// `method`) on failure.
napi_value hrt_js_device_view_new(napi_env env, const char* method,
                                  hrt_hal_device_t* device,
                                  hrt_hal_element_type_t dtype, uint32_t rank,
                                  const int64_t* shape, const void* data);

#endif  // HRT_NAPI_JS_DEVICE_H_

// nvrtcCompile(source, name, options, arch): the native half of
// halrt.nvrtc.compile (lib/nvrtc.js checks the arguments first).
//
// Compiles on the calling JS thread (NVRTC needs no GPU) and returns
// {ptx, log, arch, version}; a failed compile throws the HalrtError
// hrt_nvrtc_compile gives, with NVRTC's whole log as its `log`.
#ifndef HRT_NAPI_JS_NVRTC_H_
#define HRT_NAPI_JS_NVRTC_H_

#include <node_api.h>

napi_value hrt_js_nvrtc_compile(napi_env env, napi_callback_info info);

#endif  // HRT_NAPI_JS_NVRTC_H_

// JavaScript class Function: one function of a Context, from
// context.lookupFunction(). `fn.invoke(inputs)` returns a Promise of the
// output BufferViews (lib/ adds the {signal} option).
//
// Threads: construction and invoke run on the JS thread. The invocation
// completes on the device's completion thread, which only posts the result
// to a channel: the debug sink's channel when the context's HAL module has a
// JS sink (so that every trace of the invocation is delivered before its
// promise settles: one FIFO), the env's completion channel otherwise. The
// promise settles on the JS thread. When the post fails (the channel is
// closing: env teardown) the completion thread frees the invocation itself,
// releasing its sink, channel and output views there, all native; the
// pending-work counts it would have ended die with the env.
//
// Ownership: a Function holds its own references to the runtime context and
// sink, and the Context object as its `context` property; an invocation in
// flight holds references to the sink and the channel until it is delivered.
#ifndef HRT_NAPI_JS_FUNCTION_H_
#define HRT_NAPI_JS_FUNCTION_H_

#include <node_api.h>

#include "napi/js_common.h"
#include "napi/js_context.h"
#include "vm/module.h"

napi_value hrt_js_function_define(napi_env env, hrt_js_env_t* state);

// A new Function object for `function` of the context whose JS object is
// `context_object` (its wrap `context_wrap`). Returns NULL with a pending
// exception on failure.
napi_value hrt_js_function_new(napi_env env, napi_value context_object,
                               hrt_js_wrap_t* context_wrap,
                               const hrt_vm_function_t* function);

// {name, inputs: [{name, dtype, shape}], outputs: [...]} for `def`.
bool hrt_js_function_signature(napi_env env, const hrt_vm_function_def_t* def,
                               napi_value* out);

#endif  // HRT_NAPI_JS_FUNCTION_H_

// JavaScript class Function: one function of a Context, from
// context.lookupFunction(). `fn.invoke(inputs)` returns a Promise of the
// output BufferViews (lib/ adds the {signal} option); `fn.prepare(inputs)` a
// PreparedCall (js_prepared_call.h), whose runs start here too.
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
#include "napi/js_prepared_call.h"
#include "vm/module.h"

napi_value hrt_js_function_define(napi_env env, hrt_js_env_t* state);

// A new Function object for `function` of the context whose JS object is
// `context_object` (its wrap `context_wrap`). Returns NULL with a pending
// exception on failure.
napi_value hrt_js_function_new(napi_env env, napi_value context_object,
                               hrt_js_wrap_t* context_wrap,
                               const hrt_vm_function_t* function);

// Starts a call of the Function whose wrap is `function_wrap` (alive for this
// call) on `inputs` (borrowed for this call), naming `method` in errors.
// Without `call` the promise resolves with new output BufferViews; with it
// (a reference is held until the run is delivered) the function writes into
// `outputs`, its outputs' views, where it can (hrt_vm_invoke_in_place), the
// results replace `call`'s (hrt_js_prepared_call_take) and the promise
// resolves with undefined. Every failure is a rejection.
napi_value hrt_js_function_start(
    napi_env env, const hrt_js_wrap_t* function_wrap, const char* method,
    hrt_hal_buffer_view_t* const* inputs, uint32_t input_count,
    hrt_js_prepared_call_t* call, hrt_hal_buffer_view_t* const* outputs);

// {name, inputs: [{name, dtype, shape}], outputs: [...]} for `def`.
bool hrt_js_function_signature(napi_env env, const hrt_vm_function_def_t* def,
                               napi_value* out);

#endif  // HRT_NAPI_JS_FUNCTION_H_

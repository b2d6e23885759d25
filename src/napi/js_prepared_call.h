// JavaScript class PreparedCall: fn.prepare(inputs) checks the inputs once
// and holds them; call.run() invokes the function on them, and each run
// writes its results into the call's own output views (`call.outputs`, a
// frozen Array made at prepare, zero-filled until the first run;
// hrt_vm_invoke_in_place). No objects are made per run but the promise: the
// fast path for calling one function on the same tensors again and again.
//
// Threads: JS thread of the owning env, except retain/release (any thread:
// an invocation whose post failed is freed on the completion thread).
//
// Ownership: the object holds its Function as `function` and its outputs as
// `outputs` (read-only, non-configurable). The native call holds a reference
// to each input's view and holds the outputs' wraps (hrt_js_wrap_hold) until
// close() or collection; its own `run` function keeps the object alive
// through a symbol-keyed property the collector traces (the two are
// collected together), and holds the call, the object's wrap and the
// Function's wrap until it is collected (at env teardown finalizers run in
// any order: a `run` finalized last finds them closed, never freed); a run
// in flight holds the native call until it is delivered. close() closes the
// outputs too.
#ifndef HRT_NAPI_JS_PREPARED_CALL_H_
#define HRT_NAPI_JS_PREPARED_CALL_H_

#include <node_api.h>

#include "hal/device.h"
#include "napi/js_common.h"
#include "napi/js_wrap.h"
#include "vm/module.h"

typedef struct hrt_js_prepared_call_s hrt_js_prepared_call_t;

napi_value hrt_js_prepared_call_define(napi_env env, hrt_js_env_t* state);

// A new PreparedCall of the Function `function_object` (its wrap
// `function_wrap`, signature `def`) on `inputs` (checked by the caller;
// each retained here), with zero-filled outputs on `device`. Returns NULL
// with a pending exception on failure.
napi_value hrt_js_prepared_call_new(napi_env env, napi_value function_object,
                                    hrt_js_wrap_t* function_wrap,
                                    const hrt_vm_function_def_t* def,
                                    hrt_hal_device_t* device,
                                    hrt_hal_buffer_view_t* const* inputs,
                                    uint32_t input_count);

void hrt_js_prepared_call_retain(hrt_js_prepared_call_t* call);
void hrt_js_prepared_call_release(hrt_js_prepared_call_t* call);

// Memory of a delivered run's invocation record, kept for the next run (all
// of one call's records have one size); keep returns false when full (the
// caller frees it), reuse NULL when none is kept. JS thread, while the call
// is referenced.
bool hrt_js_prepared_call_keep(hrt_js_prepared_call_t* call, void* record);
void* hrt_js_prepared_call_reuse(hrt_js_prepared_call_t* call);

// A run's results (owned references, consumed) replace the outputs' views;
// an output closed meanwhile, or a call closed or collected, drops them. JS
// thread.
void hrt_js_prepared_call_take(hrt_js_prepared_call_t* call,
                               hrt_hal_buffer_view_t* const* outputs,
                               uint32_t count);

#endif  // HRT_NAPI_JS_PREPARED_CALL_H_

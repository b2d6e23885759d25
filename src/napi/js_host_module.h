// JavaScript class HostModule (lib/host_module.js subclasses it): a callback
// module (modules/callback_module.h) whose functions run JavaScript.
//
// new HostModule(instance, name, defs, runner) makes the native module;
// each call of one of its functions is posted through the channel of its
// invocation's completion (with a debug sink, the sink's: after the traces
// before the call), or the module's own channel (js_channel.h) for a call
// made from C, and on the JS thread handed to `runner(index, tensors,
// info, token)` with copies of the inputs (JS-owned). lib/ ends it with
// finishHostCall(token, outputs, code, message, thrown) exactly once; a
// token collected unfinished ends its call with CANCELLED, and so does env
// teardown for calls not yet delivered, so no invocation waits forever.
//
// Lifetime: the module holds a weak napi_ref to `runner`, deleted on the JS
// thread when the channel finalizes after the native module's release
// callback (the debug sink's mechanism, js_sink.c). JS-visible edges keep
// the runner alive: Context.modules -> HostModule -> runner, and an
// invocation in flight holds its context's HostModules (lib/invoke.js).
// The wrap owns one reference to the native module, as Module does.
//
// Threads: JS thread of the owning env, except the callback module's call
// and release callbacks, which only post to and finish the channel.
#ifndef HRT_NAPI_JS_HOST_MODULE_H_
#define HRT_NAPI_JS_HOST_MODULE_H_

#include <node_api.h>
#include <stdint.h>

#include "napi/js_common.h"
#include "napi/js_wrap.h"

extern const hrt_js_class_t hrt_js_host_module_class;

napi_value hrt_js_host_module_define(napi_env env, hrt_js_env_t* state);

// finishHostCall(token, outputs, code, message, thrown): the binding's
// export (see above). `outputs`: an Array of TypedArrays holding each
// declared output's bytes, or null for a failure with status `code` and
// `message`; `thrown` (a failure's cause, any value) is kept until the
// invocation it failed is settled (hrt_js_host_take_error).
napi_value hrt_js_host_finish(napi_env env, napi_callback_info info);

// JS thread. The value a host function threw for the invocation whose id is
// `invocation`, removed from the env's list; NULL when there is none.
napi_value hrt_js_host_take_error(napi_env env, uint64_t invocation);

// JS thread, env teardown: drops the values still kept.
void hrt_js_host_errors_free(napi_env env, hrt_js_env_t* state);

#endif  // HRT_NAPI_JS_HOST_MODULE_H_

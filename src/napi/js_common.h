// Shared vocabulary of the Node-API binding: per-env state, the macros that
// turn a failed napi_* call into a pending JavaScript exception, and the one
// place where an hrt_status_t becomes a HalrtError.
//
// Threads: everything declared here runs on the JavaScript thread of the env
// it is given, and nowhere else.
#ifndef HRT_NAPI_JS_COMMON_H_
#define HRT_NAPI_JS_COMMON_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "napi/js_channel.h"

typedef struct hrt_js_wrap_s hrt_js_wrap_t;

// Per-env state, owned by the env through napi_set_instance_data and freed by
// its finalizer at env teardown. Never global: each worker thread has its own.
//
// Env teardown (a worker ending in any way, or process exit) quiesces what
// belongs to the env without waiting for device work: channels close (no
// JavaScript runs again; messages still queued or posted later are freed
// natively), debug sinks stop holding back producers, and the finalizers of
// wrapped objects drop their runtime references. A device that still has work
// in flight is not joined: its threads finish that work, find the channels
// closed, and the device is freed on its own thread (hal/device.h). None of
// this touches N-API or the env, and the addon is pinned (addon.c) so that
// code stays mapped after Node unloads the addon with its last env.
typedef struct hrt_js_env_s {
  napi_ref error_class;        // HalrtError; NULL until lib/ wires it in
  napi_ref trace_decoder;      // lib/trace_batch.js; NULL until wired in
  napi_ref device_class;       // Device constructor
  napi_ref buffer_view_class;  // BufferView constructor
  napi_ref module_class;       // Module constructor
  napi_ref function_class;     // Function constructor
  napi_ref prepared_call_class;  // PreparedCall constructor
  // How many hrt_js_new_internal calls are constructing an object now: the
  // constructors of classes users may not construct accept a call only then
  // (no user code runs between the two).
  uint32_t constructing;
  // Carries submission results from device threads to this env. One native
  // reference is owned by this struct and dropped at teardown.
  hrt_js_channel_t* channel;
  // How much of this env's event-loop turn its channels have used
  // (js_channel.h), and lib/'s setImmediate to wait for the next one.
  hrt_js_channel_turn_t turn;
  // Wraps pinned by the binding calls now running on this env's thread,
  // innermost call last (js_wrap.h). Empty whenever no call is running.
  hrt_js_wrap_t** pins;
  size_t pin_count;
  size_t pin_capacity;
  // What host functions threw, until their invocations settle
  // (js_host_module.h).
  struct hrt_js_host_error_s* host_errors;
} hrt_js_env_t;

// The state of `env`, or NULL (with a pending exception) if it is missing.
hrt_js_env_t* hrt_js_env_get(napi_env env);

// Creates an object of a class whose constructor only the binding may call
// (Device, BufferView, ...; see hrt_js_internal_constructor).
bool hrt_js_new_internal(napi_env env, napi_ref class_ref,
                         napi_value* out_object);

// Throws for a failed napi_* call named `call`, unless an exception is already
// pending (the usual case: the call itself threw).
void hrt_js_throw_napi_failure(napi_env env, napi_status status,
                               const char* call);

// Runs `call`; on failure leaves a pending exception and returns `ret`.
#define HRT_NAPI_CALL_BASE(env, call, ret)                       \
  do {                                                           \
    napi_status hrt_napi_status_ = (call);                       \
    if (hrt_napi_status_ != napi_ok) {                           \
      hrt_js_throw_napi_failure((env), hrt_napi_status_, #call); \
      return ret;                                                \
    }                                                            \
  } while (0)

// For napi_callback bodies (return NULL: the exception propagates).
#define HRT_NAPI_CALL(env, call) HRT_NAPI_CALL_BASE(env, call, NULL)

// Property descriptors, one kind each, so that every class agrees: a
// prototype method (writable, configurable, not enumerable, as in a JS
// class), a prototype getter (configurable, not enumerable), a read-only
// enumerable value of an instance, and a static method.
#define HRT_JS_METHOD(name, fn) \
  { (name), NULL, (fn), NULL, NULL, NULL, napi_default_method, NULL }
#define HRT_JS_GETTER(name, fn) \
  { (name), NULL, NULL, (fn), NULL, NULL, napi_configurable, NULL }
#define HRT_JS_VALUE(name, value) \
  { (name), NULL, NULL, NULL, NULL, (value), napi_enumerable, NULL }
// Writable: lib/ wraps it (Module.fromJson reads the constants' files).
#define HRT_JS_STATIC(name, fn) \
  { (name), NULL, (fn), NULL, NULL, NULL, napi_static | napi_writable, NULL }
// For helpers that report failure as `false`.
#define HRT_NAPI_CALL_BOOL(env, call) HRT_NAPI_CALL_BASE(env, call, false)
// For helpers that return napi_status: returns the failed status itself.
#define HRT_NAPI_CALL_STATUS(env, call)                          \
  do {                                                           \
    napi_status hrt_napi_status_ = (call);                       \
    if (hrt_napi_status_ != napi_ok) {                           \
      hrt_js_throw_napi_failure((env), hrt_napi_status_, #call); \
      return hrt_napi_status_;                                   \
    }                                                            \
  } while (0)

// Creates a HalrtError for `status` (consumed). Returns NULL with a pending
// exception when even that fails.
napi_value hrt_js_error_from_status(napi_env env, hrt_status_t status);

// Creates a HalrtError for `status` (consumed) with `cause` as its own,
// non-enumerable `cause` (like `new Error(message, {cause})`; left out if
// even defining it fails). Returns NULL with a pending exception when the
// error cannot be made.
napi_value hrt_js_error_with_cause(napi_env env, hrt_status_t status,
                                   napi_value cause);

// Throws a HalrtError for `status` (consumed; must not be OK).
void hrt_js_throw_status(napi_env env, hrt_status_t status);

// Rejects `deferred` with a HalrtError for `status` (consumed; not OK).
void hrt_js_reject_status(napi_env env, napi_deferred deferred,
                          hrt_status_t status);

// Takes the pending exception; `undefined` when none is pending (a failed
// napi call that threw nothing), so that a promise can still be settled.
napi_value hrt_js_take_pending(napi_env env);

// Takes the pending exception and returns a promise rejected with it. For
// Promise-returning methods, which report every failure as a rejection and
// never throw.
napi_value hrt_js_rejected_with_pending(napi_env env);

// Throws HalrtError(code, formatted message). Always returns false, so
// argument checks can `return hrt_js_throw(...)`.
bool hrt_js_throw(napi_env env, hrt_status_code_t code, const char* format, ...)
    HRT_PRINTF(3, 4);

// Evaluates `expr` (an hrt_status_t); when not OK, annotates it with
// `method`, throws it and returns NULL from the napi_callback.
#define HRT_JS_THROW_IF_ERROR(env, method, expr)                       \
  do {                                                                 \
    hrt_status_t hrt_js_status_ = (expr);                              \
    if (hrt_js_status_ != HRT_OK) {                                    \
      hrt_js_throw_status(                                             \
          (env), hrt_status_annotate(hrt_js_status_, "%s", (method))); \
      return NULL;                                                     \
    }                                                                  \
  } while (0)

// Defines a class and, with `out_ref` != NULL, keeps a reference to its
// constructor there (classes the binding constructs itself). Returns NULL
// with a pending exception on failure.
napi_value hrt_js_define_class(napi_env env, const char* name,
                               napi_callback constructor,
                               const napi_property_descriptor* properties,
                               size_t count, napi_ref* out_ref);

// object[key] = text / number / Array of the shape's dims. False with a
// pending exception on failure.
bool hrt_js_set_string(napi_env env, napi_value object, const char* key,
                       const char* text);
bool hrt_js_set_number(napi_env env, napi_value object, const char* key,
                       double number);
bool hrt_js_shape_array(napi_env env, uint32_t rank, const int64_t* shape,
                        napi_value* out_array);

#endif  // HRT_NAPI_JS_COMMON_H_

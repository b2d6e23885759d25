#include "napi/js_prepared_call.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "napi/js_args.h"
#include "napi/js_buffer_view.h"
#include "napi/js_device.h"
#include "napi/js_function.h"

// Delivered runs' records kept for reuse: as many as a burst of runs in
// flight gives back before the next starts.
#define HRT_JS_PREPARED_CALL_SPARES 64

struct hrt_js_prepared_call_s {
  // The object's, its `run` function's, and one per run in flight.
  atomic_uint refs;
  // The object's wrap and its `function`'s, held by its `run` function
  // (which may outlive both: their finalizers may run in either order).
  hrt_js_wrap_t* self;
  hrt_js_wrap_t* function_wrap;
  uint32_t input_count;  // 0 once the object let go
  // 0 once the object let go (JS thread): a run delivered later drops its
  // results.
  uint32_t output_count;
  hrt_hal_buffer_view_t** inputs;  // [input_count], owned; after `views`
  // [output_count] the outputs' views at the start of a run (JS thread, that
  // run only), after `outputs`.
  hrt_hal_buffer_view_t** views;
  uint32_t spare_count;  // JS thread
  void* spares[HRT_JS_PREPARED_CALL_SPARES];
  hrt_js_wrap_t* outputs[];  // its `outputs`' wraps, held
};

void hrt_js_prepared_call_retain(hrt_js_prepared_call_t* call) {
  atomic_fetch_add_explicit(&call->refs, 1, memory_order_relaxed);
}

void hrt_js_prepared_call_release(hrt_js_prepared_call_t* call) {
  if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) == 1) {
    for (uint32_t i = 0; i < call->spare_count; ++i) free(call->spares[i]);
    free(call);
  }
}

bool hrt_js_prepared_call_keep(hrt_js_prepared_call_t* call, void* record) {
  if (call->spare_count == HRT_JS_PREPARED_CALL_SPARES) return false;
  call->spares[call->spare_count++] = record;
  return true;
}

void* hrt_js_prepared_call_reuse(hrt_js_prepared_call_t* call) {
  return call->spare_count > 0 ? call->spares[--call->spare_count] : NULL;
}

// close() or collection (JS thread): the inputs and the outputs' wraps go at
// once (a run in flight holds its buffers itself), the struct when the last
// run is delivered.
static void hrt_js_prepared_call_drop(void* opaque) {
  hrt_js_prepared_call_t* call = opaque;
  for (uint32_t i = 0; i < call->input_count; ++i) {
    hrt_hal_buffer_view_release(call->inputs[i]);
  }
  call->input_count = 0;
  for (uint32_t i = 0; i < call->output_count; ++i) {
    hrt_js_wrap_unhold(call->outputs[i]);
  }
  call->output_count = 0;
  hrt_js_prepared_call_release(call);
}

static const hrt_js_class_t hrt_js_prepared_call_class = {
    .name = "PreparedCall",
    .release = hrt_js_prepared_call_drop,
};

// Runs `call` (its object's wrap open, pinned or not: nothing here runs
// user code). Every failure is a rejection.
static napi_value hrt_js_prepared_call_start(napi_env env,
                                             hrt_js_prepared_call_t* call,
                                             size_t argc) {
  static const char* const method = "preparedCall.run";
  if (call->self->closed) {
    hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                 "%s: PreparedCall is closed", method);
    return hrt_js_rejected_with_pending(env);
  }
  if (argc > 0) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "%s takes no arguments (got %zu): function.prepare(inputs) "
                 "bound the inputs",
                 method, argc);
    return hrt_js_rejected_with_pending(env);
  }
  for (uint32_t i = 0; i < call->output_count; ++i) {
    call->views[i] = call->outputs[i]->handle;
    if (call->outputs[i]->closed) {
      hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                   "%s: outputs[%u] is closed (close() the PreparedCall to "
                   "let its outputs go)",
                   method, i);
      return hrt_js_rejected_with_pending(env);
    }
  }
  return hrt_js_function_start(env, call->function_wrap, method, call->inputs,
                               call->input_count, call, call->views);
}

// The object's own `run`: bound to its call, so a run unwraps nothing.
static napi_value hrt_js_prepared_call_run_bound(napi_env env,
                                                 napi_callback_info info) {
  size_t argc = 0;
  void* data = NULL;
  if (napi_get_cb_info(env, info, &argc, NULL, NULL, &data) != napi_ok) {
    return hrt_js_rejected_with_pending(env);
  }
  return hrt_js_prepared_call_start(env, data, argc);
}

// JS thread, from GC or at env teardown: the `run` function is gone.
static void hrt_js_prepared_call_run_finalize(napi_env env, void* data,
                                              void* hint) {
  (void)env;
  (void)hint;
  hrt_js_prepared_call_t* call = data;
  hrt_js_wrap_unhold(call->self);
  hrt_js_wrap_unhold(call->function_wrap);
  hrt_js_prepared_call_release(call);
}

void hrt_js_prepared_call_take(hrt_js_prepared_call_t* call,
                               hrt_hal_buffer_view_t* const* outputs,
                               uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    if (i >= call->output_count ||
        !hrt_js_wrap_replace(call->outputs[i], outputs[i])) {
      hrt_hal_buffer_view_release(outputs[i]);
    }
  }
}

napi_value hrt_js_prepared_call_new(napi_env env, napi_value function_object,
                                    hrt_js_wrap_t* function_wrap,
                                    const hrt_vm_function_def_t* def,
                                    hrt_hal_device_t* device,
                                    hrt_hal_buffer_view_t* const* inputs,
                                    uint32_t input_count) {
  static const char* const method = "function.prepare";
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  const uint32_t output_count = def->output_count;
  hrt_js_prepared_call_t* call = calloc(
      1, sizeof(*call) + (2 * output_count + input_count) * sizeof(void*));
  if (call == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    return NULL;
  }
  atomic_init(&call->refs, 1);
  call->function_wrap = function_wrap;
  call->output_count = output_count;
  call->views = (hrt_hal_buffer_view_t**)(call->outputs + output_count);
  call->inputs = call->views + output_count;
  // Made before anything is retained: a failure frees only the struct (the
  // views made so far are garbage).
  napi_value outputs = NULL;
  bool ok =
      napi_create_array_with_length(env, output_count, &outputs) == napi_ok;
  for (uint32_t i = 0; ok && i < output_count; ++i) {
    const hrt_vm_tensor_type_t* type = &def->outputs[i];
    napi_value view = hrt_js_device_view_new(
        env, method, device, type->element_type, type->rank, type->shape, NULL);
    ok = view != NULL && napi_set_element(env, outputs, i, view) == napi_ok;
    if (ok) call->outputs[i] = hrt_js_wrap_find(env, view, NULL);
  }
  if (!ok || napi_object_freeze(env, outputs) != napi_ok) {
    free(call);
    hrt_js_throw_napi_failure(env, napi_generic_failure, method);
    return NULL;
  }
  for (uint32_t i = 0; i < output_count; ++i) {
    hrt_js_wrap_hold(call->outputs[i]);
  }
  for (uint32_t i = 0; i < input_count; ++i) {
    hrt_hal_buffer_view_retain(inputs[i]);
    call->inputs[i] = inputs[i];
  }
  call->input_count = input_count;
  napi_value object = NULL, run = NULL;
  if (!hrt_js_wrap_new(env, state->prepared_call_class,
                       &hrt_js_prepared_call_class, call, &object)) {
    return NULL;
  }
  call->self = hrt_js_wrap_find(env, object, &hrt_js_prepared_call_class);
  HRT_NAPI_CALL(
      env, napi_create_function(env, "run", NAPI_AUTO_LENGTH,
                                hrt_js_prepared_call_run_bound, call, &run));
  hrt_js_prepared_call_retain(call);
  hrt_js_wrap_hold(call->self);
  hrt_js_wrap_hold(call->function_wrap);
  if (napi_add_finalizer(env, run, call, hrt_js_prepared_call_run_finalize,
                         NULL, NULL) != napi_ok) {
    hrt_js_prepared_call_run_finalize(env, call, NULL);
    hrt_js_throw_napi_failure(env, napi_generic_failure, "napi_add_finalizer");
    return NULL;
  }
  const napi_property_descriptor properties[] = {
      HRT_JS_VALUE("function", function_object),
      HRT_JS_VALUE("outputs", outputs),
      {"run", NULL, NULL, NULL, NULL, run, napi_default, NULL},
  };
  HRT_NAPI_CALL(env, napi_define_properties(env, object, 3, properties));
  // `run` keeps its object (and so the function and outputs it names)
  // alive, through a property the collector traces: `const { run } = call`
  // runs on after `call` is unreachable, and the two go together.
  napi_value key = NULL;
  HRT_NAPI_CALL(env, napi_create_symbol(env, NULL, &key));
  const napi_property_descriptor keep = {NULL, key,    NULL,         NULL,
                                         NULL, object, napi_default, NULL};
  HRT_NAPI_CALL(env, napi_define_properties(env, run, 1, &keep));
  return object;
}

static napi_value hrt_js_prepared_call_construct(napi_env env,
                                                 napi_callback_info info) {
  return hrt_js_internal_constructor(
      env, info, "new PreparedCall: use function.prepare(inputs)");
}

// PreparedCall.prototype.run, for a `this` that is not the object whose own
// `run` it is (PreparedCall.prototype.run.call(call)).
static napi_value hrt_js_prepared_call_run(napi_env env,
                                           napi_callback_info info) {
  napi_value this_arg = NULL;
  size_t argc = 0;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, &argc) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_prepared_call_class,
                         "preparedCall.run", NULL, false, &wrap)) {
    return hrt_js_rejected_with_pending(env);
  }
  return hrt_js_prepared_call_start(env, wrap->handle, argc);
}

// call.close(): closes the call and its outputs. Idempotent.
static napi_value hrt_js_prepared_call_close(napi_env env,
                                             napi_callback_info info) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_prepared_call_class,
                         "preparedCall.close", NULL, true, &wrap)) {
    return NULL;
  }
  if (!wrap->closed) {
    const hrt_js_prepared_call_t* call = wrap->handle;
    for (uint32_t i = 0; i < call->output_count; ++i) {
      hrt_js_wrap_close(call->outputs[i]);
    }
  }
  hrt_js_wrap_close(wrap);
  return NULL;
}

napi_value hrt_js_prepared_call_define(napi_env env, hrt_js_env_t* state) {
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("run", hrt_js_prepared_call_run),
      HRT_JS_METHOD("close", hrt_js_prepared_call_close),
  };
  return hrt_js_define_class(
      env, "PreparedCall", hrt_js_prepared_call_construct, properties,
      sizeof(properties) / sizeof(properties[0]), &state->prepared_call_class);
}

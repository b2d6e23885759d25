#include "napi/js_function.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "modules/hal_module.h"
#include "napi/js_args.h"
#include "napi/js_buffer_view.h"
#include "napi/js_channel.h"
#include "napi/js_host_module.h"
#include "napi/js_prepared_call.h"

typedef struct hrt_js_function_handle_s {
  hrt_vm_context_t* context;  // owned reference
  // The wrap of the Function's `context` (a read-only, non-configurable
  // property): alive while the Function object is.
  const hrt_js_wrap_t* context_wrap;
  hrt_vm_function_t function;
  hrt_js_sink_t* sink;  // owned reference, or NULL
  char name[];          // "module.function"
} hrt_js_function_handle_t;

static void hrt_js_function_release(void* opaque) {
  hrt_js_function_handle_t* handle = opaque;
  hrt_vm_context_release(handle->context);
  if (handle->sink != NULL) hrt_js_sink_release(handle->sink);
  free(handle);
}

static const hrt_js_class_t hrt_js_function_class = {
    .name = "Function",
    .release = hrt_js_function_release,
};

#define HRT_JS_MAX_INPUTS 256

// One invocation in flight.
typedef struct hrt_js_invocation_s {
  hrt_js_message_t message;   // first: the channel hands this back
  hrt_js_channel_t* channel;  // retained until delivered
  hrt_js_sink_t* sink;        // retained, or NULL
  napi_deferred deferred;     // JS thread only
  hrt_js_prepared_call_t* call;  // a PreparedCall's run: a reference; or NULL
  hrt_vm_invocation_ids_t ids;
  int64_t start_ns;     // when invoke was called
  int64_t end_ns;       // written on the completion thread
  hrt_status_t status;  // written on the completion thread
  uint32_t output_count;
  hrt_hal_buffer_view_t** outputs;  // owned references, after `name`
  char name[];
} hrt_js_invocation_t;

// Frees the invocation, or with `reuse` (JS thread) hands its memory to its
// PreparedCall for the next run.
static void hrt_js_invocation_free_or_reuse(hrt_js_invocation_t* invocation,
                                            bool reuse) {
  for (uint32_t i = 0; i < invocation->output_count; ++i) {
    hrt_hal_buffer_view_release(invocation->outputs[i]);
  }
  hrt_status_free(invocation->status);
  if (invocation->sink != NULL) hrt_js_sink_release(invocation->sink);
  hrt_js_channel_release(invocation->channel);
  hrt_js_prepared_call_t* call = invocation->call;
  if (!reuse || call == NULL || !hrt_js_prepared_call_keep(call, invocation)) {
    free(invocation);
  }
  if (call != NULL) hrt_js_prepared_call_release(call);
}

static void hrt_js_invocation_free(hrt_js_invocation_t* invocation) {
  hrt_js_invocation_free_or_reuse(invocation, false);
}

// The rejection for an invocation whose debug sink threw `thrown`.
static napi_value hrt_js_sink_failure(napi_env env,
                                      const hrt_js_invocation_t* invocation,
                                      napi_value thrown) {
  napi_value error = hrt_js_error_with_cause(
      env,
      hrt_status_make(HRT_STATUS_ABORTED,
                      "%s: the debug sink threw while handling a trace "
                      "of this invocation (sequence %llu)",
                      invocation->name,
                      (unsigned long long)invocation->ids.sequence),
      thrown);
  return error != NULL ? error : thrown;
}

// An Array of BufferView objects taking the invocation's output references.
static bool hrt_js_outputs_array(napi_env env, hrt_js_invocation_t* invocation,
                                 napi_value* out) {
  HRT_NAPI_CALL_BOOL(
      env, napi_create_array_with_length(env, invocation->output_count, out));
  uint32_t count = invocation->output_count;
  invocation->output_count = 0;
  bool ok = true;
  for (uint32_t i = 0; i < count; ++i) {
    if (!ok) {
      hrt_hal_buffer_view_release(invocation->outputs[i]);
      continue;
    }
    napi_value view = hrt_js_buffer_view_new(env, invocation->outputs[i]);
    ok = view != NULL && napi_set_element(env, *out, i, view) == napi_ok;
  }
  return ok;
}

// JS thread (env != NULL), or teardown (env == NULL: free only).
static void hrt_js_invocation_deliver(napi_env env, hrt_js_channel_t* channel,
                                      hrt_js_message_t* message) {
  (void)channel;
  hrt_js_invocation_t* invocation = (hrt_js_invocation_t*)message;
  if (env == NULL) {
    hrt_js_invocation_free(invocation);
    return;
  }
  // A trace callback that threw fails the invocation as surely as the
  // device does, so the sink's invocation event says ok: false for it too.
  // What the invocation callback itself throws is taken after it ran (and
  // dropped when a trace callback threw first, so that nothing stays kept).
  napi_value thrown = invocation->sink
                          ? hrt_js_sink_take_error(env, invocation->sink,
                                                   invocation->ids.invocation)
                          : NULL;
  if (invocation->sink != NULL) {
    hrt_js_sink_report_invocation(
        env, invocation->sink, invocation->ids.invocation,
        invocation->ids.sequence, invocation->name, invocation->start_ns,
        invocation->end_ns - invocation->start_ns,
        invocation->status == HRT_OK && thrown == NULL);
    napi_value late = hrt_js_sink_take_error(env, invocation->sink,
                                             invocation->ids.invocation);
    if (thrown == NULL) thrown = late;
  }
  napi_value host_thrown =
      invocation->status != HRT_OK
          ? hrt_js_host_take_error(env, invocation->ids.invocation)
          : NULL;
  if (thrown != NULL) {
    napi_reject_deferred(env, invocation->deferred,
                         hrt_js_sink_failure(env, invocation, thrown));
  } else if (host_thrown != NULL) {
    // A host function threw: its value is the cause.
    hrt_status_t status = invocation->status;
    invocation->status = HRT_OK;
    napi_value error = hrt_js_error_with_cause(
        env, hrt_status_annotate(status, "%s", invocation->name), host_thrown);
    napi_reject_deferred(env, invocation->deferred,
                         error != NULL ? error : host_thrown);
  } else if (invocation->status != HRT_OK) {
    hrt_status_t status = invocation->status;
    invocation->status = HRT_OK;
    hrt_js_reject_status(env, invocation->deferred,
                         hrt_status_annotate(status, "%s", invocation->name));
  } else if (invocation->call != NULL) {
    hrt_js_prepared_call_take(invocation->call, invocation->outputs,
                              invocation->output_count);
    invocation->output_count = 0;
    napi_value undefined = NULL;
    napi_get_undefined(env, &undefined);
    napi_resolve_deferred(env, invocation->deferred, undefined);
  } else {
    napi_value outputs = NULL;
    if (hrt_js_outputs_array(env, invocation, &outputs)) {
      napi_resolve_deferred(env, invocation->deferred, outputs);
    } else {
      napi_reject_deferred(env, invocation->deferred, hrt_js_take_pending(env));
    }
  }
  if (invocation->sink != NULL) {
    hrt_js_sink_end_invocation(env, invocation->sink);
  } else {
    hrt_js_channel_end_work(env, invocation->channel);
  }
  hrt_js_invocation_free_or_reuse(invocation, true);
}

// Device completion thread. Never calls N-API.
static void hrt_js_invocation_done(void* user_data, hrt_status_t status,
                                   hrt_hal_buffer_view_t* const* outputs,
                                   uint32_t output_count) {
  hrt_js_invocation_t* invocation = user_data;
  invocation->end_ns = hrt_time_now_ns();
  invocation->status = status;
  for (uint32_t i = 0; i < output_count; ++i) {
    invocation->outputs[i] = outputs[i];
  }
  invocation->output_count = output_count;
  // Once posted, the invocation belongs to the JS thread.
  if (!hrt_js_channel_post(invocation->channel, &invocation->message)) {
    hrt_js_invocation_free(invocation);
  }
}

// The handle of Function wrap `wrap` when it and its context are open.
static bool hrt_js_function_open(napi_env env, const hrt_js_wrap_t* wrap,
                                 const char* method,
                                 hrt_js_function_handle_t** out) {
  if (wrap->closed) {
    return hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                        "%s: its function Function is closed", method);
  }
  hrt_js_function_handle_t* handle = wrap->handle;
  if (handle->context_wrap->closed) {
    return hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                        "%s: its context Context is closed", method);
  }
  *out = handle;
  return true;
}

// The wrap of `this` when it is a Function.
static bool hrt_js_function_this(napi_env env, napi_value this_arg,
                                 const char* method, hrt_js_wrap_t** out) {
  return hrt_js_arg_unwrap(env, this_arg, &hrt_js_function_class, method, NULL,
                           false, out);
}

// Collects the input views (pinned for this call: an element getter may
// close an earlier input).
static bool hrt_js_function_inputs(napi_env env, napi_value value,
                                   const char* method,
                                   hrt_hal_buffer_view_t** views,
                                   uint32_t* out_count) {
  uint32_t count = 0;
  if (!hrt_js_arg_array(env, value, method, "inputs", &count)) return false;
  if (count > HRT_JS_MAX_INPUTS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: inputs has %u entries (at most %d)", method, count,
                        HRT_JS_MAX_INPUTS);
  }
  for (uint32_t i = 0; i < count; ++i) {
    napi_value element = NULL;
    char name[32];
    if (napi_get_element(env, value, i, &element) != napi_ok) {
      snprintf(name, sizeof(name), "inputs[%u]", i);
      return hrt_js_arg_threw(env, method, name, "");
    }
    hrt_js_wrap_t* wrap =
        hrt_js_wrap_find(env, element, &hrt_js_buffer_view_class);
    if (wrap != NULL && !wrap->closed) {
      if (!hrt_js_wrap_pin(env, wrap)) return false;
    } else {
      // Unwrapped again with its name, which only the error needs.
      snprintf(name, sizeof(name), "inputs[%u]", i);
      if (!hrt_js_arg_unwrap(env, element, &hrt_js_buffer_view_class, method,
                             name, false, &wrap)) {
        return false;
      }
    }
    views[i] = wrap->handle;
  }
  *out_count = count;
  return true;
}

napi_value hrt_js_function_start(
    napi_env env, const hrt_js_wrap_t* function_wrap, const char* method,
    hrt_hal_buffer_view_t* const* inputs, uint32_t input_count,
    hrt_js_prepared_call_t* call, hrt_hal_buffer_view_t* const* outputs) {
  hrt_js_function_handle_t* handle = NULL;
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL ||
      !hrt_js_function_open(env, function_wrap, method, &handle)) {
    return hrt_js_rejected_with_pending(env);
  }
  const hrt_vm_function_def_t* def = hrt_vm_function_def(&handle->function);
  size_t name_length = strlen(handle->name) + 1;
  // The output array follows the name, aligned.
  size_t outputs_offset =
      (sizeof(hrt_js_invocation_t) + name_length + sizeof(void*) - 1) &
      ~(sizeof(void*) - 1);
  const size_t size =
      outputs_offset + def->output_count * sizeof(hrt_hal_buffer_view_t*);
  hrt_js_invocation_t* invocation =
      call != NULL ? hrt_js_prepared_call_reuse(call) : NULL;
  if (invocation != NULL) {
    memset(invocation, 0, size);
  } else {
    invocation = calloc(1, size);
  }
  napi_value promise = NULL;
  if (invocation == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    return hrt_js_rejected_with_pending(env);
  }
  memcpy(invocation->name, handle->name, name_length);
  invocation->message.deliver = hrt_js_invocation_deliver;
  invocation->outputs =
      (hrt_hal_buffer_view_t**)((char*)invocation + outputs_offset);
  invocation->sink = handle->sink;
  if (invocation->sink != NULL) hrt_js_sink_retain(invocation->sink);
  invocation->channel =
      invocation->sink ? hrt_js_sink_channel(invocation->sink) : state->channel;
  // With a sink its delivery calls the sink's invocation callback.
  invocation->message.settles_only = invocation->sink == NULL;
  hrt_js_channel_retain(invocation->channel);
  if (call != NULL) hrt_js_prepared_call_retain(call);
  invocation->call = call;
  invocation->start_ns = hrt_time_now_ns();
  if (napi_create_promise(env, &invocation->deferred, &promise) != napi_ok) {
    hrt_js_invocation_free(invocation);
    hrt_js_throw_napi_failure(env, napi_generic_failure, "napi_create_promise");
    return NULL;
  }
  // Host calls travel with the completion (js_host_module.h).
  hrt_status_t status = hrt_vm_invoke_in_place(
      handle->context, &handle->function, inputs, input_count, outputs,
      invocation->channel,
      (hrt_vm_invocation_done_t){hrt_js_invocation_done, invocation},
      &invocation->ids);
  if (status != HRT_OK) {
    hrt_js_reject_status(env, invocation->deferred,
                         hrt_status_annotate(status, "%s", method));
    hrt_js_invocation_free(invocation);
    return promise;
  }
  if (invocation->sink != NULL) {
    hrt_js_sink_begin_invocation(env, invocation->sink);
  } else {
    hrt_js_channel_begin_work(env, invocation->channel);
  }
  return promise;
}

// The arguments of invoke and prepare: `this`, an open Function whose
// context is open, and its inputs (pinned for the call).
typedef struct hrt_js_function_args_s {
  napi_value this_arg;
  hrt_js_wrap_t* wrap;
  hrt_js_function_handle_t* handle;
  uint32_t count;
  hrt_hal_buffer_view_t* views[HRT_JS_MAX_INPUTS];
} hrt_js_function_args_t;

static bool hrt_js_function_args(napi_env env, napi_callback_info info,
                                 const char* method,
                                 hrt_js_function_args_t* out) {
  napi_value argv[1];
  return hrt_js_args_get(env, info, 1, argv, &out->this_arg, NULL) &&
         hrt_js_function_this(env, out->this_arg, method, &out->wrap) &&
         hrt_js_function_open(env, out->wrap, method, &out->handle) &&
         hrt_js_function_inputs(env, argv[0], method, out->views, &out->count);
}

// fn.invoke(inputs) -> Promise<BufferView[]>; every failure is a rejection.
static napi_value hrt_js_function_invoke(napi_env env,
                                         napi_callback_info info) {
  static const char* const method = "function.invoke";
  hrt_js_function_args_t args;
  if (!hrt_js_function_args(env, info, method, &args)) {
    return hrt_js_rejected_with_pending(env);
  }
  return hrt_js_function_start(env, args.wrap, method, args.views, args.count,
                               NULL, NULL);
}

// fn.prepare(inputs) -> PreparedCall; throws for bad inputs.
static napi_value hrt_js_function_prepare(napi_env env,
                                          napi_callback_info info) {
  static const char* const method = "function.prepare";
  hrt_js_function_args_t args;
  if (!hrt_js_function_args(env, info, method, &args)) return NULL;
  const hrt_js_function_handle_t* handle = args.handle;
  HRT_JS_THROW_IF_ERROR(
      env, method,
      hrt_vm_function_check_inputs(&handle->function, args.views, args.count));
  const hrt_vm_module_t* hal =
      hrt_vm_context_module_named(handle->context, "hal");
  if (hal == NULL || !hrt_hal_module_isa(hal)) {
    hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                 "%s: %s has no HAL module in its context to hold its outputs",
                 method, handle->name);
    return NULL;
  }
  return hrt_js_prepared_call_new(
      env, args.this_arg, args.wrap, hrt_vm_function_def(&handle->function),
      hrt_hal_module_device(hal), args.views, args.count);
}

static bool hrt_js_tensor_types(napi_env env, const hrt_vm_tensor_type_t* types,
                                uint32_t count, napi_value* out) {
  HRT_NAPI_CALL_BOOL(env, napi_create_array_with_length(env, count, out));
  for (uint32_t i = 0; i < count; ++i) {
    napi_value object = NULL, name = NULL, dtype = NULL, shape = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &object));
    HRT_NAPI_CALL_BOOL(env, napi_create_string_utf8(env, types[i].name,
                                                    NAPI_AUTO_LENGTH, &name));
    HRT_NAPI_CALL_BOOL(
        env, napi_create_string_utf8(
                 env, hrt_hal_element_type_name(types[i].element_type),
                 NAPI_AUTO_LENGTH, &dtype));
    if (!hrt_js_shape_array(env, types[i].rank, types[i].shape, &shape)) {
      return false;
    }
    HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, "name", name));
    HRT_NAPI_CALL_BOOL(env,
                       napi_set_named_property(env, object, "dtype", dtype));
    HRT_NAPI_CALL_BOOL(env,
                       napi_set_named_property(env, object, "shape", shape));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, *out, i, object));
  }
  return true;
}

bool hrt_js_function_signature(napi_env env, const hrt_vm_function_def_t* def,
                               napi_value* out) {
  napi_value name = NULL, inputs = NULL, outputs = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, out));
  HRT_NAPI_CALL_BOOL(
      env, napi_create_string_utf8(env, def->name, NAPI_AUTO_LENGTH, &name));
  if (!hrt_js_tensor_types(env, def->inputs, def->input_count, &inputs) ||
      !hrt_js_tensor_types(env, def->outputs, def->output_count, &outputs)) {
    return false;
  }
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, *out, "name", name));
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, *out, "inputs", inputs));
  HRT_NAPI_CALL_BOOL(env,
                     napi_set_named_property(env, *out, "outputs", outputs));
  return true;
}

napi_value hrt_js_function_new(napi_env env, napi_value context_object,
                               hrt_js_wrap_t* context_wrap,
                               const hrt_vm_function_t* function) {
  const hrt_js_context_handle_t* context = context_wrap->handle;
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  const hrt_vm_function_def_t* def = hrt_vm_function_def(function);
  size_t length = strlen(function->module->name) + strlen(def->name) + 2;
  hrt_js_function_handle_t* handle = calloc(1, sizeof(*handle) + length);
  if (handle == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                 "context.lookupFunction: out of host memory");
    return NULL;
  }
  snprintf(handle->name, length, "%s.%s", function->module->name, def->name);
  handle->context = context->context;
  hrt_vm_context_retain(handle->context);
  handle->context_wrap = context_wrap;
  handle->function = *function;
  handle->sink = context->sink;
  if (handle->sink != NULL) hrt_js_sink_retain(handle->sink);
  napi_value object = NULL, name = NULL, signature = NULL, inputs = NULL,
             outputs = NULL;
  if (!hrt_js_wrap_new(env, state->function_class, &hrt_js_function_class,
                       handle, &object) ||
      !hrt_js_function_signature(env, def, &signature)) {
    return NULL;
  }
  HRT_NAPI_CALL(
      env, napi_create_string_utf8(env, handle->name, NAPI_AUTO_LENGTH, &name));
  HRT_NAPI_CALL(env,
                napi_get_named_property(env, signature, "inputs", &inputs));
  HRT_NAPI_CALL(env,
                napi_get_named_property(env, signature, "outputs", &outputs));
  const napi_property_descriptor properties[] = {
      HRT_JS_VALUE("name", name),
      HRT_JS_VALUE("context", context_object),
      HRT_JS_VALUE("inputs", inputs),
      HRT_JS_VALUE("outputs", outputs),
  };
  HRT_NAPI_CALL(env, napi_define_properties(env, object, 4, properties));
  return object;
}

static napi_value hrt_js_function_construct(napi_env env,
                                            napi_callback_info info) {
  return hrt_js_internal_constructor(
      env, info, "new Function: use context.lookupFunction(name)");
}

static napi_value hrt_js_function_close(napi_env env, napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_function_class,
                             "function.close");
}

napi_value hrt_js_function_define(napi_env env, hrt_js_env_t* state) {
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("invoke", hrt_js_function_invoke),
      HRT_JS_METHOD("prepare", hrt_js_function_prepare),
      HRT_JS_METHOD("close", hrt_js_function_close),
  };
  return hrt_js_define_class(
      env, "Function", hrt_js_function_construct, properties,
      sizeof(properties) / sizeof(properties[0]), &state->function_class);
}

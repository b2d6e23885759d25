#include "napi/js_host_module.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hal/buffer_view.h"
#include "modules/callback_module.h"
#include "napi/js_args.h"
#include "napi/js_channel.h"
#include "napi/js_hal_module.h"
#include "napi/js_instance.h"
#include "napi/js_submit.h"

// Bounds on what one HostModule declares.
#define HRT_JS_HOST_MAX_FUNCTIONS 1024
#define HRT_JS_HOST_MAX_VALUES 1024

const hrt_js_class_t hrt_js_host_module_class = {
    .name = "HostModule",
    .release = hrt_js_module_handle_release,
};

// What the native module's callbacks reach. Two references: the native
// module's (dropped by its release callback, after finishing the channel)
// and the channel's (dropped by its finalizer, on the JS thread or at env
// teardown, after deleting `runner`). The env can end long before the
// module does.
typedef struct hrt_js_host_s {
  atomic_int refs;
  hrt_js_channel_t* channel;  // one reference, dropped by release's finish
  napi_ref runner;            // weak; JS thread only; NULL once finalized
} hrt_js_host_t;

static void hrt_js_host_unref(hrt_js_host_t* host) {
  if (atomic_fetch_sub(&host->refs, 1) == 1) free(host);
}

// One call on its way to the JS thread.
typedef struct hrt_js_host_message_s {
  hrt_js_message_t base;
  hrt_js_host_t* host;
  hrt_host_call_t* call;
  hrt_host_call_info_t info;
  uint32_t count;
  const hrt_trace_tensor_t* inputs;  // valid until the call is finished
} hrt_js_host_message_t;

// The native side of a token: the call it finishes (NULL once finished).
typedef struct hrt_js_host_token_s {
  hrt_host_call_t* call;
} hrt_js_host_token_t;

// A value a host function threw, kept until its invocation settles (the
// holder object's "value", as in js_sink.c).
typedef struct hrt_js_host_error_s {
  struct hrt_js_host_error_s* next;
  uint64_t invocation;
  napi_ref holder;
} hrt_js_host_error_t;

static void hrt_js_host_cancel(hrt_host_call_t* call, const char* why) {
  hrt_host_call_finish(call, hrt_status_make(HRT_STATUS_CANCELLED, "%s", why),
                       NULL);
}

// Collected without being finished (its promise was dropped), or freed at
// env teardown.
static void hrt_js_host_token_finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  hrt_js_host_token_t* token = data;
  if (token->call != NULL) {
    hrt_js_host_cancel(token->call,
                       "the host function's result was dropped unsettled "
                       "(its promise was garbage-collected, or the "
                       "environment ended)");
  }
  free(token);
}

// [{name, dtype, shape, data}] for the call's inputs, data copied into
// JS-owned arrays.
static bool hrt_js_host_tensors(napi_env env,
                                const hrt_js_host_message_t* message,
                                napi_value* out) {
  HRT_NAPI_CALL_BOOL(env,
                     napi_create_array_with_length(env, message->count, out));
  for (uint32_t i = 0; i < message->count; ++i) {
    const hrt_trace_tensor_t* input = &message->inputs[i];
    napi_value tensor = NULL, shape = NULL, data = NULL;
    void* copy = malloc(input->byte_length ? input->byte_length : 1);
    if (copy == NULL) {
      return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                          "out of host memory copying input '%s'",
                          input->name);
    }
    memcpy(copy, input->data, input->byte_length);
    HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &tensor));
    if (!hrt_js_set_string(env, tensor, "name", input->name) ||
        !hrt_js_set_string(env, tensor, "dtype",
                           hrt_hal_element_type_name(input->element_type)) ||
        !hrt_js_shape_array(env, input->rank, input->shape, &shape) ||
        !hrt_js_typed_array_from_host(env, input->element_type, copy,
                                      input->byte_length, free, &data)) {
      return false;
    }
    HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, tensor, "shape", shape));
    HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, tensor, "data", data));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, *out, i, tensor));
  }
  return true;
}

// The message of the pending exception (taken), for a status.
static void hrt_js_host_pending_text(napi_env env, char* out, size_t size) {
  napi_value error = hrt_js_take_pending(env), message = NULL;
  size_t length = 0;
  snprintf(out, size, "unknown error");
  if (napi_coerce_to_string(env, error, &message) == napi_ok) {
    (void)napi_get_value_string_utf8(env, message, out, size, &length);
  }
}

// runner(index, tensors, {sequence, invocation}, token), on the JS thread.
// Returns the token's native side once it holds the call, or NULL (with a
// pending exception) when the call was not handed over.
static hrt_js_host_token_t* hrt_js_host_run(napi_env env,
                                            hrt_js_host_message_t* message,
                                            napi_value runner) {
  napi_value argv[4], info = NULL, global = NULL, ignored = NULL;
  HRT_NAPI_CALL_BASE(env,
                     napi_create_uint32(env, message->info.function, &argv[0]),
                     NULL);
  if (!hrt_js_host_tensors(env, message, &argv[1])) return NULL;
  HRT_NAPI_CALL_BASE(env, napi_create_object(env, &info), NULL);
  if (!hrt_js_set_number(env, info, "sequence",
                         (double)message->info.sequence) ||
      !hrt_js_set_number(env, info, "invocation",
                         (double)message->info.invocation)) {
    return NULL;
  }
  argv[2] = info;
  hrt_js_host_token_t* token = calloc(1, sizeof(*token));
  if (token == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                 "out of host memory starting a host call");
    return NULL;
  }
  napi_status status = napi_create_object(env, &argv[3]);
  if (status == napi_ok) {
    status = napi_wrap(env, argv[3], token, hrt_js_host_token_finalize, NULL,
                       NULL);
  }
  if (status != napi_ok) {
    free(token);
    hrt_js_throw_napi_failure(env, status, "napi_wrap");
    return NULL;
  }
  token->call = message->call;  // the token ends the call from here on
  HRT_NAPI_CALL_BASE(env, napi_get_global(env, &global), token);
  (void)napi_call_function(env, global, runner, 4, argv, &ignored);
  return token;
}

// JS thread (env != NULL), or teardown (env == NULL: the call is cancelled).
// Every path ends the call or leaves it with a token that will.
static void hrt_js_host_deliver(napi_env env, hrt_js_channel_t* channel,
                                hrt_js_message_t* base) {
  (void)channel;
  hrt_js_host_message_t* message = (hrt_js_host_message_t*)base;
  napi_value runner = NULL;
  if (env == NULL) {
    hrt_js_host_cancel(message->call,
                       "the environment that runs the host function ended");
  } else if (napi_get_reference_value(env, message->host->runner, &runner) !=
                 napi_ok ||
             runner == NULL) {
    hrt_js_host_cancel(message->call,
                       "the HostModule's functions were garbage-collected "
                       "(nothing referenced the HostModule)");
  } else {
    hrt_js_host_token_t* token = hrt_js_host_run(env, message, runner);
    bool pending = false;
    (void)napi_is_exception_pending(env, &pending);
    hrt_host_call_t* call = token ? token->call : message->call;
    if (pending && call != NULL) {
      // The runner threw, or the call never reached it.
      char text[512];
      hrt_js_host_pending_text(env, text, sizeof(text));
      if (token) token->call = NULL;
      hrt_host_call_finish(
          call,
          hrt_status_make(HRT_STATUS_ABORTED, "starting the host call: %s",
                          text),
          NULL);
    } else if (pending) {
      char text[512];
      hrt_js_host_pending_text(env, text, sizeof(text));
    } else if (token == NULL) {
      // Refused without an exception: the env is terminating (a worker
      // that ends), and nothing else would end the call.
      hrt_js_host_cancel(message->call, "the environment that runs the host "
                                        "function is ending");
    }
  }
  free(message);
}

// Device completion thread: posts the call to the JS thread, through the
// channel of its invocation's completion when it has one (info->route, from
// js_function.c): with a debug sink that is the sink's channel, where the
// traces before the call are already queued (they are never held back), so
// the sink sees them before the host function runs. The invocation holds
// that channel until it completes, so after the call.
static void hrt_js_host_call(void* user_data, hrt_host_call_t* call,
                             const hrt_host_call_info_t* info, uint32_t count,
                             const hrt_trace_tensor_t* inputs) {
  hrt_js_host_t* host = user_data;
  hrt_js_host_message_t* message = calloc(1, sizeof(*message));
  if (message == NULL) {
    hrt_host_call_finish(
        call,
        hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                        "out of host memory posting a host call"),
        NULL);
    return;
  }
  *message = (hrt_js_host_message_t){
      .base = {.deliver = hrt_js_host_deliver},
      .host = host,
      .call = call,
      .info = *info,
      .count = count,
      .inputs = inputs,
  };
  hrt_js_channel_t* channel =
      info->route != NULL ? (hrt_js_channel_t*)info->route : host->channel;
  if (!hrt_js_channel_post(channel, &message->base)) {
    free(message);
    hrt_js_host_cancel(call, "the environment that runs the host function "
                             "has ended");
  }
}

// Any thread, when the native module is destroyed.
static void hrt_js_host_release(void* user_data) {
  hrt_js_host_t* host = user_data;
  hrt_js_channel_finish(host->channel);
  hrt_js_host_unref(host);
}

// JS thread (or teardown): after the last message.
static void hrt_js_host_finalize(napi_env env, void* data) {
  hrt_js_host_t* host = data;
  if (host->runner != NULL) napi_delete_reference(env, host->runner);
  host->runner = NULL;
  hrt_js_host_unref(host);
}

// Keeps `thrown` for the invocation `invocation` (JS thread).
static void hrt_js_host_keep_error(napi_env env, uint64_t invocation,
                                   napi_value thrown) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  hrt_js_host_error_t* entry = state ? calloc(1, sizeof(*entry)) : NULL;
  napi_value holder = NULL;
  if (entry == NULL || napi_create_object(env, &holder) != napi_ok ||
      napi_set_named_property(env, holder, "value", thrown) != napi_ok ||
      napi_create_reference(env, holder, 1, &entry->holder) != napi_ok) {
    free(entry);  // the invocation is still rejected, without its cause
    return;
  }
  entry->invocation = invocation;
  entry->next = state->host_errors;
  state->host_errors = entry;
}

napi_value hrt_js_host_take_error(napi_env env, uint64_t invocation) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  for (hrt_js_host_error_t** link = &state->host_errors; *link;
       link = &(*link)->next) {
    hrt_js_host_error_t* entry = *link;
    if (entry->invocation != invocation) continue;
    *link = entry->next;
    napi_value holder = NULL, value = NULL;
    if (napi_get_reference_value(env, entry->holder, &holder) != napi_ok ||
        napi_get_named_property(env, holder, "value", &value) != napi_ok) {
      value = NULL;
    }
    napi_delete_reference(env, entry->holder);
    free(entry);
    return value;
  }
  return NULL;
}

void hrt_js_host_errors_free(napi_env env, hrt_js_env_t* state) {
  while (state->host_errors) {
    hrt_js_host_error_t* entry = state->host_errors;
    state->host_errors = entry->next;
    napi_delete_reference(env, entry->holder);
    free(entry);
  }
}

napi_value hrt_js_host_finish(napi_env env, napi_callback_info info) {
  static const char* const method = "finishHostCall";
  napi_value argv[5];
  hrt_js_host_token_t* token = NULL;
  if (!hrt_js_args_get(env, info, 5, argv, NULL, NULL)) return NULL;
  if (napi_unwrap(env, argv[0], (void**)&token) != napi_ok || token == NULL ||
      token->call == NULL) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "%s: the token is not a host call in progress", method);
    return NULL;
  }
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL(env, napi_typeof(env, argv[1], &type));
  if (type == napi_null) {
    char* code = NULL;
    char* message = NULL;
    hrt_status_code_t status_code = HRT_STATUS_ABORTED;
    if (!hrt_js_arg_string(env, argv[2], method, "code", "ABORTED", &code) ||
        !hrt_js_arg_string(env, argv[3], method, "message", "", &message)) {
      free(code);
      return NULL;
    }
    if (strcmp(code, "INVALID_ARGUMENT") == 0) {
      status_code = HRT_STATUS_INVALID_ARGUMENT;
    }
    hrt_host_call_t* call = token->call;
    token->call = NULL;
    if (!hrt_js_arg_is_undefined(env, argv[4])) {
      hrt_js_host_keep_error(env, hrt_host_call_invocation(call), argv[4]);
    }
    hrt_host_call_finish(call, hrt_status_make(status_code, "%s", message),
                         NULL);
    free(code);
    free(message);
    return NULL;
  }
  uint32_t count = 0;
  if (!hrt_js_arg_array(env, argv[1], method, "outputs", &count)) return NULL;
  if (count > HRT_JS_HOST_MAX_VALUES) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT, "%s: too many outputs",
                 method);
    return NULL;
  }
  const void* data[HRT_JS_HOST_MAX_VALUES];
  for (uint32_t i = 0; i < count; ++i) {
    napi_value element = NULL;
    hrt_js_typed_array_t array;
    char name[32];
    snprintf(name, sizeof(name), "outputs[%u]", i);
    HRT_NAPI_CALL(env, napi_get_element(env, argv[1], i, &element));
    if (!hrt_js_arg_typed_array(env, element, method, name, &array)) {
      return NULL;
    }
    data[i] = array.data;
    hrt_status_t fits =
        hrt_host_call_check_output(token->call, i, count, array.byte_length);
    if (fits != HRT_OK) {
      hrt_js_throw_status(env, hrt_status_annotate(fits, "%s", method));
      return NULL;
    }
  }
  hrt_host_call_t* call = token->call;
  token->call = NULL;
  // No JavaScript runs between reading the arrays and here: the bytes are
  // copied before finish returns.
  hrt_host_call_finish(call, HRT_OK, data);
  return NULL;
}

// Fills `out` from one {name, dtype, shape} of `defs`; `what` names it.
static bool hrt_js_host_type(napi_env env, napi_value value, const char* what,
                             hrt_vm_tensor_type_t* out, char** out_name) {
  static const char* const method = "new HostModule";
  napi_value field = NULL;
  uint64_t count = 0;
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, value, "name", &field));
  if (!hrt_js_arg_string(env, field, method, what, NULL, out_name)) return false;
  out->name = *out_name;
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, value, "dtype", &field));
  if (!hrt_js_arg_dtype(env, field, method, what, &out->element_type)) {
    return false;
  }
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, value, "shape", &field));
  return hrt_js_arg_shape(env, field, method, what, &out->rank, out->shape,
                          &count);
}

// What a constructor reads: the defs and every string they point to.
typedef struct hrt_js_host_defs_s {
  uint32_t count;
  hrt_vm_function_def_t defs[HRT_JS_HOST_MAX_FUNCTIONS];
  char** strings;  // malloc'd, each malloc'd
  uint32_t string_count;
} hrt_js_host_defs_t;

static void hrt_js_host_defs_free(hrt_js_host_defs_t* defs) {
  for (uint32_t i = 0; i < defs->string_count; ++i) free(defs->strings[i]);
  free(defs->strings);
  for (uint32_t i = 0; i < defs->count; ++i) {
    free((void*)defs->defs[i].inputs);
    free((void*)defs->defs[i].outputs);
  }
}

// Keeps `text` (malloc'd) to free with the defs.
static bool hrt_js_host_keep(napi_env env, hrt_js_host_defs_t* defs,
                             char* text) {
  char** grown = realloc(defs->strings,
                         (defs->string_count + 1) * sizeof(*defs->strings));
  if (grown == NULL) {
    free(text);
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "new HostModule: out of host memory");
  }
  defs->strings = grown;
  defs->strings[defs->string_count++] = text;
  return true;
}

// One list of types (inputs or outputs) of function `fn`; messages name
// them as the spec does (functions.<fn>.outputs[0]).
static bool hrt_js_host_types(napi_env env, napi_value def, const char* list,
                              const char* fn, hrt_js_host_defs_t* defs,
                              uint32_t* out_count,
                              const hrt_vm_tensor_type_t** out_types) {
  napi_value array = NULL;
  char what[160];
  snprintf(what, sizeof(what), "functions.%s.%s", fn, list);
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, def, list, &array));
  uint32_t count = 0;
  if (!hrt_js_arg_array(env, array, "new HostModule", what, &count)) {
    return false;
  }
  if (count > HRT_JS_HOST_MAX_VALUES) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "new HostModule: %s has %u values (at most %d)", what,
                        count, HRT_JS_HOST_MAX_VALUES);
  }
  hrt_vm_tensor_type_t* types = calloc(count + 1, sizeof(*types));
  if (types == NULL) {
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "new HostModule: out of host memory");
  }
  *out_types = types;
  *out_count = count;
  for (uint32_t i = 0; i < count; ++i) {
    napi_value value = NULL;
    char* name = NULL;
    snprintf(what, sizeof(what), "functions.%s.%s[%u]", fn, list, i);
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, array, i, &value));
    bool ok = hrt_js_host_type(env, value, what, &types[i], &name);
    if (name != NULL && !hrt_js_host_keep(env, defs, name)) return false;
    if (!ok) return false;
  }
  return true;
}

static bool hrt_js_host_read_defs(napi_env env, napi_value array,
                                  hrt_js_host_defs_t* defs) {
  static const char* const method = "new HostModule";
  uint32_t count = 0;
  if (!hrt_js_arg_array(env, array, method, "defs", &count)) return false;
  if (count > HRT_JS_HOST_MAX_FUNCTIONS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %u functions (at most %d)", method, count,
                        HRT_JS_HOST_MAX_FUNCTIONS);
  }
  for (uint32_t f = 0; f < count; ++f) {
    napi_value def = NULL, field = NULL;
    char* name = NULL;
    char what[32];
    snprintf(what, sizeof(what), "defs[%u].name", f);
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, array, f, &def));
    HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, def, "name", &field));
    bool ok = hrt_js_arg_string(env, field, method, what, NULL, &name);
    if (name != NULL && !hrt_js_host_keep(env, defs, name)) return false;
    if (!ok) return false;
    hrt_vm_function_def_t* out = &defs->defs[f];
    out->name = name;
    defs->count = f + 1;
    if (!hrt_js_host_types(env, def, "inputs", name, defs, &out->input_count,
                           &out->inputs) ||
        !hrt_js_host_types(env, def, "outputs", name, defs,
                           &out->output_count, &out->outputs)) {
      return false;
    }
  }
  return true;
}

// new HostModule(instance, name, defs, runner): lib/host_module.js's super
// call, after it checked the spec.
static napi_value hrt_js_host_module_construct(napi_env env,
                                               napi_callback_info info) {
  static const char* const method = "new HostModule";
  napi_value argv[4], this_arg = NULL, new_target = NULL, runner = NULL;
  hrt_js_wrap_t* instance = NULL;
  char* name = NULL;
  HRT_NAPI_CALL(env, napi_get_new_target(env, info, &new_target));
  if (new_target == NULL) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "HostModule: the constructor must be called with `new`");
    return NULL;
  }
  hrt_js_host_defs_t* defs = calloc(1, sizeof(*defs));
  if (defs == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    return NULL;
  }
  napi_value result = NULL;
  hrt_js_module_handle_t* handle = NULL;
  hrt_js_host_t* host = NULL;
  if (!hrt_js_args_get(env, info, 4, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, argv[0], &hrt_js_instance_class, method,
                         "instance", false, &instance) ||
      !hrt_js_arg_string(env, argv[1], method, "name", NULL, &name) ||
      !hrt_js_host_read_defs(env, argv[2], defs) ||
      !hrt_js_arg_function(env, argv[3], method, "runner", false, &runner)) {
    goto done;
  }
  handle = calloc(1, sizeof(*handle));
  host = calloc(1, sizeof(*host));
  if (handle == NULL || host == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    goto done;
  }
  handle->instance = (hrt_vm_instance_t*)instance->handle;
  hrt_vm_instance_retain(handle->instance);
  atomic_init(&host->refs, 2);
  if (napi_create_reference(env, runner, 0, &host->runner) != napi_ok ||
      hrt_js_channel_create(env, "halrt.host", hrt_js_host_finalize, host,
                            &host->channel) != napi_ok) {
    if (host->runner) napi_delete_reference(env, host->runner);
    goto done;
  }
  // The channel's finalizer owns `host` from here.
  hrt_js_host_t* owned = host;
  host = NULL;
  hrt_callback_module_callbacks_t callbacks = {
      .call = {hrt_js_host_call, owned},
      .release = {hrt_js_host_release, owned},
  };
  hrt_status_t status = hrt_callback_module_create(
      name, defs->count, defs->defs, callbacks, &handle->module);
  if (status != HRT_OK) {
    hrt_js_host_release(owned);  // no module took the callbacks
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    goto done;
  }
  // Once attached the wrap owns the handle (released on failure too).
  hrt_js_module_handle_t* attached = handle;
  handle = NULL;
  if (hrt_js_wrap_attach(env, this_arg, &hrt_js_host_module_class, attached)) {
    result = this_arg;
  }
done:
  if (handle) hrt_js_module_handle_release(handle);
  free(host);
  free(name);
  hrt_js_host_defs_free(defs);
  free(defs);
  return result;
}

static napi_value hrt_js_host_module_close(napi_env env,
                                           napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_host_module_class,
                             "hostModule.close");
}

napi_value hrt_js_host_module_define(napi_env env, hrt_js_env_t* state) {
  (void)state;
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("close", hrt_js_host_module_close),
  };
  return hrt_js_define_class(env, "HostModule", hrt_js_host_module_construct,
                             properties,
                             sizeof(properties) / sizeof(properties[0]), NULL);
}

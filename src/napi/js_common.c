#include "napi/js_common.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "napi/js_wrap.h"

hrt_js_env_t* hrt_js_env_get(napi_env env) {
  void* data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok || data == NULL) {
    hrt_js_throw_napi_failure(env, napi_generic_failure,
                              "napi_get_instance_data");
    return NULL;
  }
  return (hrt_js_env_t*)data;
}

void hrt_js_throw_napi_failure(napi_env env, napi_status status,
                               const char* call) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return;
  const napi_extended_error_info* info = NULL;
  const char* detail = NULL;
  if (napi_get_last_error_info(env, &info) == napi_ok && info != NULL) {
    detail = info->error_message;
  }
  char message[512];
  snprintf(message, sizeof(message), "internal Node-API failure (%d%s%s) in %s",
           (int)status, detail ? ": " : "", detail ? detail : "", call);
  napi_value error = hrt_js_error_from_status(
      env, hrt_status_make(HRT_STATUS_INTERNAL, "%s", message));
  if (error != NULL && napi_throw(env, error) == napi_ok) return;
  // Last resort when not even a HalrtError can be made: a plain Error.
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return;
  napi_throw_error(env, "INTERNAL", message);
}

static napi_value hrt_js_make_string(napi_env env, const char* text) {
  napi_value value = NULL;
  if (napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &value) != napi_ok) {
    return NULL;
  }
  return value;
}

napi_value hrt_js_error_from_status(napi_env env, hrt_status_t status) {
  const char* code_name = hrt_status_code_name(hrt_status_code(status));
  napi_value code = hrt_js_make_string(env, code_name);
  napi_value message = hrt_js_make_string(env, hrt_status_message(status));
  hrt_status_free(status);
  if (code == NULL || message == NULL) return NULL;

  napi_value error = NULL;
  void* data = NULL;
  hrt_js_env_t* state = NULL;
  if (napi_get_instance_data(env, &data) == napi_ok) state = data;
  if (state != NULL && state->error_class != NULL) {
    napi_value error_class = NULL;
    if (napi_get_reference_value(env, state->error_class, &error_class) ==
            napi_ok &&
        error_class != NULL) {
      napi_value args[2] = {message, code};
      if (napi_new_instance(env, error_class, 2, args, &error) == napi_ok) {
        return error;
      }
      bool pending = false;
      if (napi_is_exception_pending(env, &pending) != napi_ok || pending) {
        return NULL;
      }
    }
  }
  // Before lib/ has wired HalrtError in (or if it cannot be constructed): a
  // plain Error that still carries `.code`.
  if (napi_create_error(env, code, message, &error) != napi_ok) return NULL;
  return error;
}

void hrt_js_throw_status(napi_env env, hrt_status_t status) {
  napi_value error = hrt_js_error_from_status(env, status);
  if (error == NULL) {
    hrt_js_throw_napi_failure(env, napi_generic_failure, "creating HalrtError");
    return;
  }
  napi_throw(env, error);
}

void hrt_js_reject_status(napi_env env, napi_deferred deferred,
                          hrt_status_t status) {
  napi_value error = hrt_js_error_from_status(env, status);
  // Settle the promise with whatever went wrong rather than leave it pending
  // forever.
  if (error == NULL) error = hrt_js_take_pending(env);
  napi_reject_deferred(env, deferred, error);
}

bool hrt_js_throw(napi_env env, hrt_status_code_t code, const char* format,
                  ...) {
  va_list args;
  va_start(args, format);
  hrt_status_t status = hrt_status_makev(code, format, args);
  va_end(args);
  hrt_js_throw_status(env, status);
  return false;
}

napi_value hrt_js_error_with_cause(napi_env env, hrt_status_t status,
                                   napi_value cause) {
  napi_value error = hrt_js_error_from_status(env, status);
  if (error == NULL) return NULL;
  const napi_property_descriptor property = {
      "cause", NULL, NULL, NULL, NULL, cause, napi_writable | napi_configurable,
      NULL};
  napi_define_properties(env, error, 1, &property);  // best effort
  return error;
}

napi_value hrt_js_take_pending(napi_env env) {
  napi_value error = NULL;
  if (napi_get_and_clear_last_exception(env, &error) != napi_ok ||
      error == NULL) {
    napi_get_undefined(env, &error);
  }
  return error;
}

napi_value hrt_js_rejected_with_pending(napi_env env) {
  napi_value error = hrt_js_take_pending(env);
  napi_deferred deferred = NULL;
  napi_value promise = NULL;
  HRT_NAPI_CALL(env, napi_create_promise(env, &deferred, &promise));
  HRT_NAPI_CALL(env, napi_reject_deferred(env, deferred, error));
  return promise;
}

bool hrt_js_new_internal(napi_env env, napi_ref class_ref,
                         napi_value* out_object) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return false;
  napi_value constructor = NULL;
  HRT_NAPI_CALL_BOOL(env,
                     napi_get_reference_value(env, class_ref, &constructor));
  ++state->constructing;
  napi_status status = napi_new_instance(env, constructor, 0, NULL, out_object);
  --state->constructing;
  if (status != napi_ok) {
    hrt_js_throw_napi_failure(env, status, "napi_new_instance");
    return false;
  }
  return true;
}

bool hrt_js_set_string(napi_env env, napi_value object, const char* key,
                       const char* text) {
  napi_value value = NULL;
  HRT_NAPI_CALL_BOOL(
      env, napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &value));
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, key, value));
  return true;
}

bool hrt_js_set_number(napi_env env, napi_value object, const char* key,
                       double number) {
  napi_value value = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_double(env, number, &value));
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, key, value));
  return true;
}

bool hrt_js_shape_array(napi_env env, uint32_t rank, const int64_t* shape,
                        napi_value* out_array) {
  HRT_NAPI_CALL_BOOL(env, napi_create_array_with_length(env, rank, out_array));
  for (uint32_t d = 0; d < rank; ++d) {
    napi_value dim = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_create_double(env, (double)shape[d], &dim));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, *out_array, d, dim));
  }
  return true;
}

// `callback` behind hrt_js_wrap_call (js_wrap.h), as the property's data.
static void* hrt_js_call_data(napi_callback callback) {
  return (void*)(intptr_t)callback;
}

napi_value hrt_js_define_class(napi_env env, const char* name,
                               napi_callback constructor,
                               const napi_property_descriptor* properties,
                               size_t count, napi_ref* out_ref) {
  // Static properties go on the class; the others are defined on its
  // prototype afterwards. napi_define_class would give prototype methods a
  // receiver check of V8's own, which throws a TypeError ("Illegal
  // invocation") before the binding runs; defined plainly, a wrong receiver
  // reaches the method, which reports it as a HalrtError (a rejection for
  // methods returning a promise).
  napi_property_descriptor statics[count ? count : 1];
  napi_property_descriptor members[count ? count : 1];
  size_t static_count = 0, member_count = 0;
  for (size_t i = 0; i < count; ++i) {
    napi_property_descriptor property = properties[i];
    // Setters would share `data` with the getter; none exist.
    if (property.method != NULL) {
      property.data = hrt_js_call_data(property.method);
      property.method = hrt_js_wrap_call;
    } else if (property.getter != NULL) {
      property.data = hrt_js_call_data(property.getter);
      property.getter = hrt_js_wrap_call;
    }
    if (property.attributes & napi_static) {
      statics[static_count++] = property;
    } else {
      members[member_count++] = property;
    }
  }
  napi_value result = NULL, prototype = NULL;
  HRT_NAPI_CALL(env,
                napi_define_class(env, name, NAPI_AUTO_LENGTH, hrt_js_wrap_call,
                                  hrt_js_call_data(constructor), static_count,
                                  statics, &result));
  HRT_NAPI_CALL(env,
                napi_get_named_property(env, result, "prototype", &prototype));
  HRT_NAPI_CALL(env,
                napi_define_properties(env, prototype, member_count, members));
  if (out_ref != NULL) {
    HRT_NAPI_CALL(env, napi_create_reference(env, result, 1, out_ref));
  }
  return result;
}

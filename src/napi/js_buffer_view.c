#include "napi/js_buffer_view.h"

#include <stdlib.h>

#include "hal/command_buffer.h"
#include "napi/js_args.h"
#include "napi/js_submit.h"

static void hrt_js_buffer_view_release(void* handle) {
  hrt_hal_buffer_view_release((hrt_hal_buffer_view_t*)handle);
}

const hrt_js_class_t hrt_js_buffer_view_class = {
    .name = "BufferView",
    .release = hrt_js_buffer_view_release,
};

static napi_value hrt_js_buffer_view_construct(napi_env env,
                                               napi_callback_info info) {
  return hrt_js_internal_constructor(
      env, info,
      "new BufferView: BufferView cannot be constructed directly; "
      "use device.tensor(data, shape) or device.empty(shape, "
      "dtype)");
}

static bool hrt_js_buffer_view_this(napi_env env, napi_callback_info info,
                                    const char* method,
                                    hrt_hal_buffer_view_t** out) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_buffer_view_class, method, NULL,
                         false, &wrap)) {
    return false;
  }
  *out = (hrt_hal_buffer_view_t*)wrap->handle;
  return true;
}

// bufferView.shape -> a fresh Array of numbers.
static napi_value hrt_js_buffer_view_shape(napi_env env,
                                           napi_callback_info info) {
  hrt_hal_buffer_view_t* view = NULL;
  if (!hrt_js_buffer_view_this(env, info, "bufferView.shape", &view)) {
    return NULL;
  }
  napi_value array = NULL;
  if (!hrt_js_shape_array(env, hrt_hal_buffer_view_rank(view),
                          hrt_hal_buffer_view_shape(view), &array)) {
    return NULL;
  }
  return array;
}

static napi_value hrt_js_buffer_view_dtype(napi_env env,
                                           napi_callback_info info) {
  hrt_hal_buffer_view_t* view = NULL;
  if (!hrt_js_buffer_view_this(env, info, "bufferView.dtype", &view)) {
    return NULL;
  }
  napi_value value = NULL;
  HRT_NAPI_CALL(
      env, napi_create_string_utf8(env,
                                   hrt_hal_element_type_name(
                                       hrt_hal_buffer_view_element_type(view)),
                                   NAPI_AUTO_LENGTH, &value));
  return value;
}

static napi_value hrt_js_buffer_view_byte_length(napi_env env,
                                                 napi_callback_info info) {
  hrt_hal_buffer_view_t* view = NULL;
  if (!hrt_js_buffer_view_this(env, info, "bufferView.byteLength", &view)) {
    return NULL;
  }
  napi_value value = NULL;
  HRT_NAPI_CALL(
      env, napi_create_double(
               env, (double)hrt_hal_buffer_view_byte_length(view), &value));
  return value;
}

static napi_value hrt_js_buffer_view_rank(napi_env env,
                                          napi_callback_info info) {
  hrt_hal_buffer_view_t* view = NULL;
  if (!hrt_js_buffer_view_this(env, info, "bufferView.rank", &view)) {
    return NULL;
  }
  napi_value value = NULL;
  HRT_NAPI_CALL(
      env, napi_create_uint32(env, hrt_hal_buffer_view_rank(view), &value));
  return value;
}

// bufferView.read([dtype]) -> Promise<TypedArray of the dtype> with a copy
// of the contents, taken after all work submitted to the device before it.
// `dtype`, when given, must be the view's: a checked assertion that lets
// TypeScript type the array of a view whose dtype is only known at run time.
static napi_value hrt_js_buffer_view_read(napi_env env,
                                          napi_callback_info info) {
  static const char* const method = "bufferView.read";
  hrt_hal_buffer_view_t* view = NULL;
  napi_value expected = NULL;
  if (!hrt_js_args_get(env, info, 1, &expected, NULL, NULL) ||
      !hrt_js_buffer_view_this(env, info, method, &view)) {
    return hrt_js_rejected_with_pending(env);
  }
  hrt_hal_element_type_t dtype = hrt_hal_buffer_view_element_type(view);
  if (!hrt_js_arg_is_undefined(env, expected)) {
    hrt_hal_element_type_t expected_dtype = dtype;
    if (!hrt_js_arg_dtype(env, expected, method, "dtype", &expected_dtype)) {
      return hrt_js_rejected_with_pending(env);
    }
    if (expected_dtype != dtype) {
      hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                   "%s: dtype '%s' was asked for but the view is '%s'", method,
                   hrt_hal_element_type_name(expected_dtype),
                   hrt_hal_element_type_name(dtype));
      return hrt_js_rejected_with_pending(env);
    }
  }
  uint64_t byte_length = hrt_hal_buffer_view_byte_length(view);
  if (byte_length == 0) {
    napi_value array = NULL;
    napi_deferred deferred = NULL;
    napi_value promise = NULL;
    if (!hrt_js_typed_array_from_host(env, dtype, NULL, 0, free, &array)) {
      return hrt_js_rejected_with_pending(env);
    }
    HRT_NAPI_CALL(env, napi_create_promise(env, &deferred, &promise));
    HRT_NAPI_CALL(env, napi_resolve_deferred(env, deferred, array));
    return promise;
  }

  // Refused before the copy is made: the promise could never hold it.
  uint64_t limit = hrt_js_max_array_bytes(env);
  if (byte_length > limit) {
    hrt_js_throw_status(
        env, hrt_status_annotate(hrt_js_array_too_large(byte_length, limit),
                                 "%s", method));
    return hrt_js_rejected_with_pending(env);
  }
  void* host_data =
      byte_length <= SIZE_MAX ? malloc((size_t)byte_length) : NULL;
  if (host_data == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                 "%s: out of host memory for %llu bytes", method,
                 (unsigned long long)byte_length);
    return hrt_js_rejected_with_pending(env);
  }
  hrt_hal_device_t* device = hrt_hal_buffer_view_buffer(view)->device;
  hrt_hal_command_buffer_t* command_buffer = NULL;
  hrt_status_t status = hrt_hal_command_buffer_create(device, &command_buffer);
  if (status == HRT_OK) {
    status = hrt_hal_command_buffer_read(
        command_buffer, hrt_hal_buffer_view_ref(view), host_data);
  }
  if (status != HRT_OK) {
    free(host_data);
    if (command_buffer != NULL) {
      hrt_hal_command_buffer_release(command_buffer);
    }
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return hrt_js_rejected_with_pending(env);
  }
  hrt_hal_command_buffer_finalize(command_buffer);
  hrt_js_submit_result_t result = {host_data, byte_length, dtype};
  napi_value promise = NULL;
  bool submitted =
      hrt_js_submit(env, method, device, command_buffer, result, &promise);
  hrt_hal_command_buffer_release(command_buffer);
  return submitted ? promise : NULL;
}

// bufferView.close(): drops the runtime reference. Idempotent.
static napi_value hrt_js_buffer_view_close(napi_env env,
                                           napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_buffer_view_class,
                             "bufferView.close");
}

napi_value hrt_js_buffer_view_new(napi_env env, hrt_hal_buffer_view_t* view) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  napi_value object = NULL;
  if (state == NULL) {
    hrt_hal_buffer_view_release(view);
    return NULL;
  }
  if (!hrt_js_wrap_new(env, state->buffer_view_class, &hrt_js_buffer_view_class,
                       view, &object)) {
    return NULL;
  }
  return object;
}

napi_value hrt_js_buffer_view_device(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value value = NULL;
  napi_value result = NULL;
  HRT_NAPI_CALL(env, napi_get_cb_info(env, info, &argc, &value, NULL, NULL));
  HRT_NAPI_CALL(env, napi_get_undefined(env, &result));
  hrt_js_wrap_t* wrap =
      argc < 1 ? NULL : hrt_js_wrap_find(env, value, &hrt_js_buffer_view_class);
  if (wrap == NULL || wrap->closed || wrap->handle == NULL) return result;
  const hrt_hal_buffer_t* buffer = hrt_hal_buffer_view_buffer(wrap->handle);
  HRT_NAPI_CALL(env, napi_create_string_utf8(
                         env, hrt_hal_device_info(buffer->device)->uri,
                         NAPI_AUTO_LENGTH, &result));
  return result;
}

napi_value hrt_js_buffer_view_define(napi_env env, hrt_js_env_t* state) {
  const napi_property_descriptor properties[] = {
      HRT_JS_GETTER("shape", hrt_js_buffer_view_shape),
      HRT_JS_GETTER("dtype", hrt_js_buffer_view_dtype),
      HRT_JS_GETTER("byteLength", hrt_js_buffer_view_byte_length),
      HRT_JS_GETTER("rank", hrt_js_buffer_view_rank),
      HRT_JS_METHOD("read", hrt_js_buffer_view_read),
      HRT_JS_METHOD("close", hrt_js_buffer_view_close),
  };
  return hrt_js_define_class(
      env, "BufferView", hrt_js_buffer_view_construct, properties,
      sizeof(properties) / sizeof(properties[0]), &state->buffer_view_class);
}

#include "napi/js_device.h"

#include <stdio.h>
#include <string.h>

#include "hal/buffer_view.h"
#include "napi/js_args.h"
#include "napi/js_buffer_view.h"
#include "napi/js_submit.h"

static void hrt_js_device_release(void* handle) {
  hrt_hal_device_release((hrt_hal_device_t*)handle);
}

const hrt_js_class_t hrt_js_device_class = {
    .name = "Device",
    .release = hrt_js_device_release,
};

static napi_value hrt_js_device_construct(napi_env env,
                                          napi_callback_info info) {
  return hrt_js_internal_constructor(
      env, info,
      "new Device: Device cannot be constructed directly; use "
      "instance.createDevice(uri)");
}

static bool hrt_js_device_this(napi_env env, napi_callback_info info,
                               const char* method, size_t count,
                               napi_value* argv, hrt_hal_device_t** out) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, count, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_device_class, method, NULL,
                         false, &wrap)) {
    return false;
  }
  *out = (hrt_hal_device_t*)wrap->handle;
  return true;
}

napi_value hrt_js_device_view_new(napi_env env, const char* method,
                                  hrt_hal_device_t* device,
                                  hrt_hal_element_type_t dtype, uint32_t rank,
                                  const int64_t* shape, const void* data) {
  uint64_t byte_length = 0;
  HRT_JS_THROW_IF_ERROR(
      env, method, hrt_hal_shape_byte_length(dtype, rank, shape, &byte_length));
  hrt_hal_buffer_t* buffer = NULL;
  HRT_JS_THROW_IF_ERROR(
      env, method,
      hrt_hal_device_allocate_buffer(device, byte_length, data, &buffer));
  hrt_hal_buffer_view_t* view = NULL;
  hrt_status_t status =
      hrt_hal_buffer_view_create(buffer, 0, dtype, rank, shape, &view);
  hrt_hal_buffer_release(buffer);
  HRT_JS_THROW_IF_ERROR(env, method, status);
  return hrt_js_buffer_view_new(env, view);
}

// device.tensor(data, shape, dtype?) -> BufferView holding a copy of `data`.
static napi_value hrt_js_device_tensor(napi_env env, napi_callback_info info) {
  static const char* const method = "device.tensor";
  napi_value argv[3];
  hrt_hal_device_t* device = NULL;
  hrt_js_typed_array_t data;
  uint32_t rank = 0;
  int64_t shape[HRT_HAL_MAX_RANK];
  uint64_t element_count = 0;
  if (!hrt_js_device_this(env, info, method, 3, argv, &device) ||
      !hrt_js_arg_typed_array(env, argv[0], method, "data", &data) ||
      !hrt_js_arg_shape(env, argv[1], method, "shape", &rank, shape,
                        &element_count)) {
    return NULL;
  }
  hrt_hal_element_type_t dtype = hrt_js_typed_array_dtype(data.type);
  if (!hrt_js_arg_is_undefined(env, argv[2])) {
    if (!hrt_js_arg_dtype(env, argv[2], method, "dtype", &dtype)) return NULL;
    if (!hrt_js_typed_array_accepts(dtype, data.type)) {
      const char* expected =
          hrt_js_typed_array_type_name(hrt_js_dtype_array_type(dtype));
      const char* got = hrt_js_typed_array_type_name(data.type);
      hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                   "%s: dtype '%s' needs data in %s %s (got %s %s)", method,
                   hrt_hal_element_type_name(dtype), hrt_js_article(expected),
                   expected, hrt_js_article(got), got);
      return NULL;
    }
  }
  // Reading the shape may have run user code (array getters) that detached
  // or resized the data's ArrayBuffer: read the data again, last.
  if (!hrt_js_arg_typed_array(env, argv[0], method, "data", &data)) {
    return NULL;
  }
  if ((uint64_t)data.length != element_count) {
    char text[HRT_HAL_SHAPE_TEXT_MAX];
    hrt_hal_shape_format(rank, shape, text);
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "%s: data has %zu elements but shape %s needs %llu", method,
                 data.length, text, (unsigned long long)element_count);
    return NULL;
  }
  if (dtype == HRT_HAL_ELEMENT_TYPE_BOOL) {
    const uint8_t* bytes = (const uint8_t*)data.data;
    for (size_t i = 0; i < data.length; ++i) {
      if (bytes[i] > 1) {
        hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                     "%s: bool data must be 0 or 1 (data[%zu] is %u)", method,
                     i, (unsigned)bytes[i]);
        return NULL;
      }
    }
  }
  return hrt_js_device_view_new(env, method, device, dtype, rank, shape,
                                data.data);
}

// device.empty(shape, dtype) -> zero-filled BufferView.
static napi_value hrt_js_device_empty(napi_env env, napi_callback_info info) {
  static const char* const method = "device.empty";
  napi_value argv[2];
  hrt_hal_device_t* device = NULL;
  uint32_t rank = 0;
  int64_t shape[HRT_HAL_MAX_RANK];
  uint64_t element_count = 0;
  hrt_hal_element_type_t dtype = HRT_HAL_ELEMENT_TYPE_F32;
  if (!hrt_js_device_this(env, info, method, 2, argv, &device) ||
      !hrt_js_arg_shape(env, argv[0], method, "shape", &rank, shape,
                        &element_count) ||
      !hrt_js_arg_dtype(env, argv[1], method, "dtype", &dtype)) {
    return NULL;
  }
  return hrt_js_device_view_new(env, method, device, dtype, rank, shape, NULL);
}

static bool hrt_js_device_copy_view(napi_env env, napi_value value,
                                    const char* name, hrt_hal_device_t* device,
                                    hrt_hal_buffer_view_t** out_view) {
  static const char* const method = "device.copy";
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_arg_unwrap(env, value, &hrt_js_buffer_view_class, method, name,
                         false, &wrap)) {
    return false;
  }
  hrt_hal_buffer_view_t* view = (hrt_hal_buffer_view_t*)wrap->handle;
  if (hrt_hal_buffer_view_buffer(view)->device != device) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s belongs to another device", method, name);
  }
  *out_view = view;
  return true;
}

// device.copy(source, target) -> Promise<void>. Copies bytes: the views must
// have equal byte lengths (their dtypes and shapes may differ).
static napi_value hrt_js_device_copy(napi_env env, napi_callback_info info) {
  static const char* const method = "device.copy";
  napi_value argv[2];
  hrt_hal_device_t* device = NULL;
  hrt_hal_buffer_view_t* source = NULL;
  hrt_hal_buffer_view_t* target = NULL;
  if (!hrt_js_device_this(env, info, method, 2, argv, &device) ||
      !hrt_js_device_copy_view(env, argv[0], "source", device, &source) ||
      !hrt_js_device_copy_view(env, argv[1], "target", device, &target)) {
    return hrt_js_rejected_with_pending(env);
  }
  uint64_t source_length = hrt_hal_buffer_view_byte_length(source);
  uint64_t target_length = hrt_hal_buffer_view_byte_length(target);
  if (source_length != target_length) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "%s: source has %llu bytes but target has %llu", method,
                 (unsigned long long)source_length,
                 (unsigned long long)target_length);
    return hrt_js_rejected_with_pending(env);
  }

  hrt_hal_command_buffer_t* command_buffer = NULL;
  hrt_status_t status = hrt_hal_command_buffer_create(device, &command_buffer);
  if (status == HRT_OK && source_length != 0) {
    status = hrt_hal_command_buffer_copy(command_buffer,
                                         hrt_hal_buffer_view_ref(source),
                                         hrt_hal_buffer_view_ref(target));
  }
  if (status != HRT_OK) {
    if (command_buffer != NULL) {
      hrt_hal_command_buffer_release(command_buffer);
    }
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return hrt_js_rejected_with_pending(env);
  }
  hrt_hal_command_buffer_finalize(command_buffer);
  hrt_js_submit_result_t no_result = {NULL, 0, HRT_HAL_ELEMENT_TYPE_U8};
  napi_value promise = NULL;
  bool submitted =
      hrt_js_submit(env, method, device, command_buffer, no_result, &promise);
  hrt_hal_command_buffer_release(command_buffer);
  return submitted ? promise : NULL;
}

// device.close(): drops the runtime reference. Idempotent. Views made by the
// device stay usable: their buffers keep the runtime device alive.
static napi_value hrt_js_device_close(napi_env env, napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_device_class, "device.close");
}

// The frozen `device.info` object.
static napi_value hrt_js_device_info_object(napi_env env,
                                            const hrt_hal_device_info_t* info) {
  napi_value object = NULL;
  HRT_NAPI_CALL(env, napi_create_object(env, &object));
  bool is_cuda = strcmp(info->kind, "cuda") == 0;
  if (!hrt_js_set_string(env, object, "driver", info->driver) ||
      !hrt_js_set_string(env, object, "kind", info->kind) ||
      !hrt_js_set_string(env, object, "name", info->name) ||
      !hrt_js_set_string(env, object, "uri", info->uri) ||
      !hrt_js_set_number(env, object, "ordinal", info->ordinal) ||
      !hrt_js_set_number(env, object, "workerCount", info->worker_count) ||
      !hrt_js_set_number(env, object, "totalMemory",
                         (double)info->total_memory)) {
    return NULL;
  }
  napi_value capability = NULL;
  if (is_cuda) {
    HRT_NAPI_CALL(env, napi_create_array_with_length(env, 2, &capability));
    for (uint32_t i = 0; i < 2; ++i) {
      napi_value part = NULL;
      HRT_NAPI_CALL(
          env, napi_create_uint32(env, info->compute_capability[i], &part));
      HRT_NAPI_CALL(env, napi_set_element(env, capability, i, part));
    }
    HRT_NAPI_CALL(env, napi_object_freeze(env, capability));
  } else {
    HRT_NAPI_CALL(env, napi_get_null(env, &capability));
  }
  HRT_NAPI_CALL(env, napi_set_named_property(env, object, "computeCapability",
                                             capability));
  if (!hrt_js_set_number(env, object, "multiprocessorCount",
                         is_cuda ? info->multiprocessor_count : 0) ||
      !hrt_js_set_number(env, object, "driverVersion",
                         is_cuda ? info->driver_version : 0)) {
    return NULL;
  }
  HRT_NAPI_CALL(env, napi_object_freeze(env, object));
  return object;
}

napi_value hrt_js_device_new(napi_env env, hrt_hal_device_t* device) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  napi_value object = NULL;
  napi_value info = NULL;
  if (state == NULL || (info = hrt_js_device_info_object(
                            env, hrt_hal_device_info(device))) == NULL) {
    hrt_hal_device_release(device);
    return NULL;
  }
  if (!hrt_js_wrap_new(env, state->device_class, &hrt_js_device_class, device,
                       &object)) {
    return NULL;
  }
  const napi_property_descriptor property = {
      "info", NULL, NULL, NULL, NULL, info, napi_enumerable, NULL};
  HRT_NAPI_CALL(env, napi_define_properties(env, object, 1, &property));
  return object;
}

napi_value hrt_js_device_define(napi_env env, hrt_js_env_t* state) {
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("tensor", hrt_js_device_tensor),
      HRT_JS_METHOD("empty", hrt_js_device_empty),
      HRT_JS_METHOD("copy", hrt_js_device_copy),
      HRT_JS_METHOD("close", hrt_js_device_close),
  };
  return hrt_js_define_class(env, "Device", hrt_js_device_construct, properties,
                             sizeof(properties) / sizeof(properties[0]),
                             &state->device_class);
}

#include "napi/js_module.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/program/program_module.h"
#include "napi/js_args.h"
#include "napi/js_function.h"
#include "napi/js_host_module.h"
#include "napi/js_instance.h"

const hrt_js_class_t hrt_js_module_class = {
    .name = "Module",
    .release = hrt_js_module_handle_release,
};

bool hrt_js_arg_module(napi_env env, napi_value value, const char* method,
                       const char* name, hrt_js_module_handle_t** out_handle) {
  const hrt_js_wrap_t* any = hrt_js_wrap_find(env, value, NULL);
  const hrt_js_class_t* cls = any != NULL ? any->cls : NULL;
  if (cls != &hrt_js_hal_module_class && cls != &hrt_js_host_module_class &&
      cls != &hrt_js_module_class) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is not a HalModule, HostModule or Module",
                        method, name);
  }
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_arg_unwrap(env, value, cls, method, name, false, &wrap)) {
    return false;
  }
  *out_handle = wrap->handle;
  return true;
}

static napi_value hrt_js_module_construct(napi_env env,
                                          napi_callback_info info) {
  return hrt_js_internal_constructor(
      env, info,
      "new Module: use Module.load(instance, path), "
      "Module.fromObject(instance, object) or a ModuleBuilder");
}

// The fourth argument of Module.fromJson: undefined, or an Array of
// TypedArrays, one per constant (lib/constants.js). Elements are read
// first (a getter may run), pointers taken after, so none is stale.
static bool hrt_js_constant_data(napi_env env, napi_value value,
                                 const char* method,
                                 hrt_program_constant_data_t** out,
                                 uint32_t* out_count) {
  *out = NULL;
  *out_count = 0;
  if (hrt_js_arg_is_undefined(env, value)) return true;
  uint32_t count = 0;
  if (!hrt_js_arg_array(env, value, method, "constants", &count)) return false;
  napi_value* items = calloc(count + 1, sizeof(*items));
  hrt_program_constant_data_t* data = calloc(count + 1, sizeof(*data));
  bool ok = items && data;
  if (!ok) hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  for (uint32_t i = 0; ok && i < count; ++i) {
    ok = napi_get_element(env, value, i, &items[i]) == napi_ok;
    if (!ok) hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT, "%s: constants[%u] cannot be read", method, i);
  }
  for (uint32_t i = 0; ok && i < count; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "constants[%u]", i);
    hrt_js_typed_array_t array;
    ok = hrt_js_arg_typed_array(env, items[i], method, name, &array);
    if (ok) data[i] = (hrt_program_constant_data_t){array.data, array.byte_length};
  }
  free(items);
  if (!ok) {
    free(data);
    return false;
  }
  *out = data;
  *out_count = count;
  return true;
}

// Module.fromJson(instance, text, baseDir?, constants?) -> Module
static napi_value hrt_js_module_from_json(napi_env env,
                                          napi_callback_info info) {
  static const char* const method = "Module.fromJson";
  napi_value argv[4];
  hrt_js_wrap_t* instance = NULL;
  char* text = NULL;
  char* base_dir = NULL;
  if (!hrt_js_args_get(env, info, 4, argv, NULL, NULL) ||
      !hrt_js_arg_string(env, argv[1], method, "text", NULL, &text)) {
    return NULL;
  }
  if (!hrt_js_arg_is_undefined(env, argv[2]) &&
      !hrt_js_arg_string(env, argv[2], method, "baseDir", NULL, &base_dir)) {
    free(text);
    return NULL;
  }
  // The constants first: reading them may run user code, which may close
  // the instance.
  hrt_program_constant_data_t* constants = NULL;
  uint32_t constant_count = 0;
  if (!hrt_js_constant_data(env, argv[3], method, &constants,
                            &constant_count) ||
      !hrt_js_arg_unwrap(env, argv[0], &hrt_js_instance_class, method,
                         "instance", false, &instance)) {
    free(constants);
    free(text);
    free(base_dir);
    return NULL;
  }
  hrt_js_module_handle_t* handle = calloc(1, sizeof(*handle));
  hrt_status_t status =
      handle ? hrt_program_module_create_with_constants(
                   text, strlen(text), base_dir, constants, constant_count,
                   &handle->module)
             : hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                               "out of host memory");
  free(text);
  free(base_dir);
  free(constants);
  if (status != HRT_OK) {
    free(handle);
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return NULL;
  }
  handle->instance = (hrt_vm_instance_t*)instance->handle;
  hrt_vm_instance_retain(handle->instance);
  hrt_js_env_t* state = hrt_js_env_get(env);
  napi_value object = NULL;
  if (state == NULL) {
    hrt_js_module_handle_release(handle);
    return NULL;
  }
  if (!hrt_js_wrap_new(env, state->module_class, &hrt_js_module_class, handle,
                       &object)) {
    return NULL;
  }
  return object;
}

static bool hrt_js_module_this(napi_env env, napi_callback_info info,
                               const char* method,
                               hrt_js_module_handle_t** out) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_module_class, method, NULL,
                         false, &wrap)) {
    return false;
  }
  *out = wrap->handle;
  return true;
}

static napi_value hrt_js_module_name(napi_env env, napi_callback_info info) {
  hrt_js_module_handle_t* handle = NULL;
  if (!hrt_js_module_this(env, info, "module.name", &handle)) return NULL;
  napi_value name = NULL;
  HRT_NAPI_CALL(env, napi_create_string_utf8(env, handle->module->name,
                                             NAPI_AUTO_LENGTH, &name));
  return name;
}

// module.functions -> [{name, inputs, outputs}]
static napi_value hrt_js_module_functions(napi_env env,
                                          napi_callback_info info) {
  hrt_js_module_handle_t* handle = NULL;
  if (!hrt_js_module_this(env, info, "module.functions", &handle)) return NULL;
  const hrt_vm_module_t* module = handle->module;
  napi_value list = NULL;
  HRT_NAPI_CALL(
      env, napi_create_array_with_length(env, module->function_count, &list));
  for (uint32_t i = 0; i < module->function_count; ++i) {
    napi_value signature = NULL;
    if (!hrt_js_function_signature(env, &module->functions[i], &signature)) {
      return NULL;
    }
    HRT_NAPI_CALL(env, napi_set_element(env, list, i, signature));
  }
  return list;
}

static napi_value hrt_js_module_close(napi_env env, napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_module_class, "module.close");
}

napi_value hrt_js_module_define(napi_env env, hrt_js_env_t* state) {
  const napi_property_descriptor properties[] = {
      HRT_JS_STATIC("fromJson", hrt_js_module_from_json),
      HRT_JS_GETTER("name", hrt_js_module_name),
      HRT_JS_GETTER("functions", hrt_js_module_functions),
      HRT_JS_METHOD("close", hrt_js_module_close),
  };
  return hrt_js_define_class(env, "Module", hrt_js_module_construct, properties,
                             sizeof(properties) / sizeof(properties[0]),
                             &state->module_class);
}

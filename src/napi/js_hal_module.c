#include "napi/js_hal_module.h"

#include <stdlib.h>
#include <string.h>

#include "modules/hal_module.h"
#include "napi/js_args.h"
#include "napi/js_device.h"
#include "napi/js_instance.h"
#include "napi/js_sink_spec.h"

#define HRT_JS_DEFAULT_TRACE_BYTES (64ull << 20)

void hrt_js_module_handle_release(void* opaque) {
  hrt_js_module_handle_t* handle = opaque;
  hrt_vm_module_release(handle->module);
  hrt_vm_instance_release(handle->instance);
  if (handle->sink != NULL) hrt_js_sink_release(handle->sink);
  free(handle);
}

const hrt_js_class_t hrt_js_hal_module_class = {
    .name = "HalModule",
    .tag = {0x5c0e7d2a91b34f60ULL, 0x8a1f3e6d2c7b4a95ULL},
    .release = hrt_js_module_handle_release,
};

typedef struct hrt_js_hal_options_s {
  napi_value debug_sink;  // as given (undefined or null: none)
  bool has_sink;
  bool trace_dispatches;
  bool profile;
  bool reject_nonfinite;
  hrt_js_sink_options_t sink;
} hrt_js_hal_options_t;

static bool hrt_js_hal_options(napi_env env, napi_value options,
                               const char* method, hrt_js_hal_options_t* out) {
  static const char* const known[] = {"debugSink",   "traceDispatches",
                                      "maxTraceBytes", "tracePolicy",
                                      "profile",     "nonFinite"};
  static const char* const policies[] = {"wait", "drop"};
  static const char* const nonfinite[] = {"ignore", "reject"};
  napi_value value = NULL;
  napi_valuetype type = napi_undefined;
  int policy = 0, nonfinite_choice = 0;
  if (!hrt_js_arg_options(env, options, method, "options", known, 6) ||
      !hrt_js_arg_option(env, options, "debugSink", &out->debug_sink) ||
      !hrt_js_arg_option(env, options, "traceDispatches", &value) ||
      !hrt_js_arg_bool(env, value, method, "options.traceDispatches", false,
                       &out->trace_dispatches) ||
      !hrt_js_arg_option(env, options, "profile", &value) ||
      !hrt_js_arg_bool(env, value, method, "options.profile", false,
                       &out->profile) ||
      !hrt_js_arg_option(env, options, "maxTraceBytes", &value) ||
      !hrt_js_arg_uint64(env, value, method, "options.maxTraceBytes",
                         HRT_JS_DEFAULT_TRACE_BYTES, 1,
                         (uint64_t)9007199254740991ull,
                         &out->sink.max_bytes) ||
      !hrt_js_arg_option(env, options, "tracePolicy", &value) ||
      !hrt_js_arg_choice(env, value, method, "options.tracePolicy", policies,
                         2, &policy) ||
      !hrt_js_arg_option(env, options, "nonFinite", &value) ||
      !hrt_js_arg_choice(env, value, method, "options.nonFinite", nonfinite, 2,
                         &nonfinite_choice)) {
    return false;
  }
  out->sink.policy = policy == 1 ? HRT_JS_SINK_DROP : HRT_JS_SINK_WAIT;
  out->reject_nonfinite = nonfinite_choice == 1;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, out->debug_sink, &type));
  out->has_sink = type != napi_undefined && type != napi_null;
  return true;
}

// new HalModule(instance, device, {debugSink, traceDispatches, profile,
// nonFinite, maxTraceBytes, tracePolicy})
static napi_value hrt_js_hal_module_construct(napi_env env,
                                              napi_callback_info info) {
  static const char* const method = "new HalModule";
  napi_value argv[3], this_arg = NULL, new_target = NULL;
  hrt_js_wrap_t* instance = NULL;
  hrt_js_wrap_t* device = NULL;
  hrt_js_hal_options_t options = {0};
  HRT_NAPI_CALL(env, napi_get_new_target(env, info, &new_target));
  if (new_target == NULL) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "HalModule: the constructor must be called with `new`");
    return NULL;
  }
  if (!hrt_js_args_get(env, info, 3, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, argv[0], &hrt_js_instance_class, method,
                         "instance", false, &instance) ||
      !hrt_js_arg_unwrap(env, argv[1], &hrt_js_device_class, method, "device",
                         false, &device) ||
      !hrt_js_hal_options(env, argv[2], method, &options)) {
    return NULL;
  }
  hrt_js_module_handle_t* handle = calloc(1, sizeof(*handle));
  if (handle == NULL) {
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    return NULL;
  }
  hrt_debug_sink_t native_sink;
  if (options.has_sink &&
      !hrt_js_sink_spec_build(env, options.debug_sink, method,
                              "options.debugSink", &options.sink,
                              &native_sink, &handle->sink)) {
    free(handle);
    return NULL;
  }
  hrt_hal_module_options_t module_options = {
      .trace_dispatches = options.trace_dispatches,
      .reject_nonfinite = options.reject_nonfinite,
      .profile = options.profile,
  };
  hrt_status_t status = hrt_hal_module_create(
      (hrt_hal_device_t*)device->handle, options.has_sink ? &native_sink : NULL,
      &module_options, &handle->module);
  if (status != HRT_OK) {
    // No module took the sink: release it as the module would have.
    if (options.has_sink) native_sink.release.fn(native_sink.release.user_data);
    if (handle->sink != NULL) hrt_js_sink_release(handle->sink);
    free(handle);
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return NULL;
  }
  handle->instance = (hrt_vm_instance_t*)instance->handle;
  hrt_vm_instance_retain(handle->instance);
  // The JS-visible edges: HalModule -> device object and -> the sink as
  // given (which reaches every callback in it).
  napi_value trace_dispatches = NULL, profile = NULL, sink_value = NULL;
  HRT_NAPI_CALL(
      env, napi_get_boolean(env, options.trace_dispatches, &trace_dispatches));
  HRT_NAPI_CALL(env, napi_get_boolean(env, options.profile, &profile));
  sink_value = options.debug_sink;
  if (!options.has_sink) HRT_NAPI_CALL(env, napi_get_null(env, &sink_value));
  const napi_property_descriptor properties[] = {
      {"device", NULL, NULL, NULL, NULL, argv[1], napi_enumerable, NULL},
      {"debugSink", NULL, NULL, NULL, NULL, sink_value, napi_enumerable, NULL},
      {"traceDispatches", NULL, NULL, NULL, NULL, trace_dispatches,
       napi_enumerable, NULL},
      {"profile", NULL, NULL, NULL, NULL, profile, napi_enumerable, NULL},
  };
  if (!hrt_js_wrap_attach(env, this_arg, &hrt_js_hal_module_class, handle)) {
    return NULL;
  }
  HRT_NAPI_CALL(env, napi_define_properties(env, this_arg, 4, properties));
  return this_arg;
}

static napi_value hrt_js_hal_module_name(napi_env env,
                                         napi_callback_info info) {
  (void)info;
  napi_value name = NULL;
  HRT_NAPI_CALL(env, napi_create_string_utf8(env, "hal", 3, &name));
  return name;
}

static napi_value hrt_js_hal_module_close(napi_env env,
                                          napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_hal_module_class,
                             "halModule.close");
}

napi_value hrt_js_hal_module_define(napi_env env, hrt_js_env_t* state) {
  (void)state;
  const napi_property_descriptor properties[] = {
      {"name", NULL, NULL, hrt_js_hal_module_name, NULL, NULL, napi_default,
       NULL},
      {"close", NULL, hrt_js_hal_module_close, NULL, NULL, NULL,
       napi_default_method, NULL},
  };
  return hrt_js_define_class(env, "HalModule", hrt_js_hal_module_construct,
                             properties,
                             sizeof(properties) / sizeof(properties[0]), NULL);
}

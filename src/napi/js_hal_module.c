#include "napi/js_hal_module.h"

#include <stdio.h>
#include <stdlib.h>

#include "modules/hal_module.h"
#include "napi/js_args.h"
#include "napi/js_device.h"
#include "napi/js_instance.h"
#include "napi/js_recorder.h"
#include "napi/js_sink_spec.h"

#define HRT_JS_DEFAULT_TRACE_BYTES (64ull << 20)

void hrt_js_module_handle_release(void* opaque) {
  hrt_js_module_handle_t* handle = opaque;
  hrt_vm_module_release(handle->module);
  hrt_vm_instance_release(handle->instance);
  if (handle->sink != NULL) hrt_js_sink_release(handle->sink);
  hrt_js_trace_keys_free(handle->trace_keys);
  free(handle);
}

const hrt_js_class_t hrt_js_hal_module_class = {
    .name = "HalModule",
    .release = hrt_js_module_handle_release,
};

#define HRT_JS_MAX_TRACE_FUNCTIONS 64

typedef struct hrt_js_hal_options_s {
  napi_value debug_sink;  // as given (undefined or null: none)
  bool has_sink;
  napi_value trace_dispatches_value;  // as given
  bool trace_dispatches;
  // traceDispatches filters; owned, freed by the caller.
  hrt_js_trace_keys_t* trace_keys;
  uint32_t trace_function_count;
  char* trace_functions[HRT_JS_MAX_TRACE_FUNCTIONS];
  uint32_t trace_every;
  bool profile;
  bool reject_nonfinite;
  hrt_recorder_limits_t flight_recorder;
  hrt_hal_trace_mode_t trace_mode;
  hrt_js_sink_options_t sink;
} hrt_js_hal_options_t;

static void hrt_js_hal_options_free(hrt_js_hal_options_t* options) {
  hrt_js_trace_keys_free(options->trace_keys);
  for (uint32_t i = 0; i < options->trace_function_count; ++i) {
    free(options->trace_functions[i]);
  }
}

// traceDispatches: a boolean, or {keys: RegExp, functions: [names], every: N}
// (which turns tracing on with those filters).
static bool hrt_js_trace_dispatches(napi_env env, napi_value value,
                                    const char* method,
                                    hrt_js_hal_options_t* out) {
  static const char* const known[] = {"keys", "functions", "every"};
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type != napi_object) {
    return hrt_js_arg_bool(env, value, method, "options.traceDispatches", false,
                           &out->trace_dispatches);
  }
  out->trace_dispatches = true;
  napi_value field = NULL;
  uint64_t every = 0;
  uint32_t count = 0;
  if (!hrt_js_arg_options(env, value, method, "options.traceDispatches", known,
                          3) ||
      !hrt_js_arg_option(env, value, method, "options.traceDispatches", "every",
                         &field) ||
      !hrt_js_arg_uint64(env, field, method, "options.traceDispatches.every", 1,
                         1, UINT32_MAX, &every) ||
      !hrt_js_arg_option(env, value, method, "options.traceDispatches", "keys",
                         &field)) {
    return false;
  }
  out->trace_every = (uint32_t)every;
  if (!hrt_js_arg_is_undefined(env, field) &&
      !hrt_js_trace_keys_read(env, field, method, &out->trace_keys)) {
    return false;
  }
  if (!hrt_js_arg_option(env, value, method, "options.traceDispatches",
                         "functions", &field))
    return false;
  if (hrt_js_arg_is_undefined(env, field)) return true;
  if (!hrt_js_arg_array(env, field, method, "options.traceDispatches.functions",
                        &count)) {
    return false;
  }
  if (count > HRT_JS_MAX_TRACE_FUNCTIONS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.traceDispatches.functions names %u "
                        "functions (at most %d)",
                        method, count, HRT_JS_MAX_TRACE_FUNCTIONS);
  }
  for (uint32_t i = 0; i < count; ++i) {
    napi_value name = NULL;
    char what[64];
    snprintf(what, sizeof(what), "options.traceDispatches.functions[%u]", i);
    if (napi_get_element(env, field, i, &name) != napi_ok) {
      return hrt_js_arg_threw(env, method, what, "");
    }
    if (!hrt_js_arg_string(env, name, method, what, NULL,
                           &out->trace_functions[i])) {
      return false;
    }
    out->trace_function_count = i + 1;
  }
  return true;
}

// flightRecorder: undefined or null (off), or {traces: N} or {bytes: B}.
static bool hrt_js_flight_recorder(napi_env env, napi_value value,
                                   const char* method,
                                   hrt_recorder_limits_t* out) {
  static const char* const known[] = {"traces", "bytes"};
  napi_valuetype type = napi_undefined;
  napi_value traces = NULL, bytes = NULL;
  uint64_t count = 0;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_undefined || type == napi_null) return true;
  if (type != napi_object) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.flightRecorder must be {traces: N} or "
                        "{bytes: B}",
                        method);
  }
  if (!hrt_js_arg_options(env, value, method, "options.flightRecorder", known,
                          2) ||
      !hrt_js_arg_option(env, value, method, "options.flightRecorder", "traces",
                         &traces) ||
      !hrt_js_arg_option(env, value, method, "options.flightRecorder", "bytes",
                         &bytes)) {
    return false;
  }
  if (hrt_js_arg_is_undefined(env, traces) ==
      hrt_js_arg_is_undefined(env, bytes)) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.flightRecorder takes exactly one of "
                        "traces and bytes",
                        method);
  }
  if (!hrt_js_arg_uint64(env, traces, method, "options.flightRecorder.traces",
                         0, 1, HRT_RECORDER_MAX_TRACES, &count) ||
      !hrt_js_arg_uint64(env, bytes, method, "options.flightRecorder.bytes", 0,
                         1, HRT_RECORDER_MAX_BYTES, &out->bytes)) {
    return false;
  }
  out->traces = (uint32_t)count;
  return true;
}

static bool hrt_js_hal_options(napi_env env, napi_value options,
                               const char* method, hrt_js_hal_options_t* out) {
  static const char* const known[] = {
      "debugSink",   "traceDispatches", "maxTraceBytes",
      "tracePolicy", "traceData",       "profile",
      "nonFinite",   "flightRecorder",  "traceMode"};
  // In hrt_hal_trace_mode_t order.
  static const char* const trace_modes[] = {"full", "summary", "health"};
  static const char* const policies[] = {"wait", "drop"};
  static const char* const nonfinite[] = {"ignore", "reject"};
  static const char* const trace_data[] = {"owned", "borrowed"};
  napi_value value = NULL;
  napi_valuetype type = napi_undefined;
  int policy = 0, nonfinite_choice = 0, trace_data_choice = 0, trace_mode = 0;
  if (!hrt_js_arg_options(env, options, method, "options", known, 9) ||
      !hrt_js_arg_option(env, options, method, "options", "debugSink",
                         &out->debug_sink) ||
      !hrt_js_arg_option(env, options, method, "options", "traceDispatches",
                         &out->trace_dispatches_value) ||
      !hrt_js_trace_dispatches(env, out->trace_dispatches_value, method, out) ||
      !hrt_js_arg_option(env, options, method, "options", "profile", &value) ||
      !hrt_js_arg_bool(env, value, method, "options.profile", false,
                       &out->profile) ||
      !hrt_js_arg_option(env, options, method, "options", "maxTraceBytes",
                         &value) ||
      !hrt_js_arg_uint64(env, value, method, "options.maxTraceBytes",
                         HRT_JS_DEFAULT_TRACE_BYTES, 1,
                         (uint64_t)9007199254740991ull, &out->sink.max_bytes) ||
      !hrt_js_arg_option(env, options, method, "options", "tracePolicy",
                         &value) ||
      !hrt_js_arg_choice(env, value, method, "options.tracePolicy", policies, 2,
                         &policy) ||
      !hrt_js_arg_option(env, options, method, "options", "traceData",
                         &value) ||
      !hrt_js_arg_choice(env, value, method, "options.traceData", trace_data, 2,
                         &trace_data_choice) ||
      !hrt_js_arg_option(env, options, method, "options", "nonFinite",
                         &value) ||
      !hrt_js_arg_choice(env, value, method, "options.nonFinite", nonfinite, 2,
                         &nonfinite_choice) ||
      !hrt_js_arg_option(env, options, method, "options", "flightRecorder",
                         &value) ||
      !hrt_js_flight_recorder(env, value, method, &out->flight_recorder) ||
      !hrt_js_arg_option(env, options, method, "options", "traceMode",
                         &value) ||
      !hrt_js_arg_choice(env, value, method, "options.traceMode", trace_modes,
                         3, &trace_mode)) {
    return false;
  }
  out->trace_mode = (hrt_hal_trace_mode_t)trace_mode;
  out->sink.policy = policy == 1 ? HRT_JS_SINK_DROP : HRT_JS_SINK_WAIT;
  out->sink.borrowed = trace_data_choice == 1;
  out->reject_nonfinite = nonfinite_choice == 1;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, out->debug_sink, &type));
  out->has_sink = type != napi_undefined && type != napi_null;
  if (!out->has_sink &&
      (out->flight_recorder.traces || out->flight_recorder.bytes)) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: options.flightRecorder needs options.debugSink "
                        "(the sink it delivers recorded traces to)",
                        method);
  }
  return true;
}

// new HalModule(instance, device, {debugSink, traceDispatches, traceMode,
// profile, nonFinite, maxTraceBytes, tracePolicy, traceData, flightRecorder})
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
    hrt_js_hal_options_free(&options);
    return NULL;
  }
  hrt_js_module_handle_t* handle = calloc(1, sizeof(*handle));
  if (handle == NULL) {
    hrt_js_hal_options_free(&options);
    hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory",
                 method);
    return NULL;
  }
  // From here on every failure releases the handle through the class's one
  // release function; once attached, the wrap owns it.
  handle->instance = (hrt_vm_instance_t*)instance->handle;
  hrt_vm_instance_retain(handle->instance);
  // The handle owns the key filter the module asks while contexts link.
  handle->trace_keys = options.trace_keys;
  options.trace_keys = NULL;
  hrt_debug_sink_t native_sink;
  bool takes_traces = false;
  hrt_status_t status = HRT_OK;
  if (options.has_sink &&
      !hrt_js_sink_spec_build(env, options.debug_sink, method,
                              "options.debugSink", &options.sink, &native_sink,
                              &handle->sink, &takes_traces)) {
    hrt_js_hal_options_free(&options);
    hrt_js_module_handle_release(handle);
    return NULL;
  }
  if (!takes_traces &&
      (options.flight_recorder.traces || options.flight_recorder.bytes)) {
    // What it would record could reach no one, yet dump() would count it.
    status = hrt_status_make(
        HRT_STATUS_INVALID_ARGUMENT,
        "options.flightRecorder needs a debugSink that takes traces (a "
        "function, an object with a trace method, or a halrt.sinks sink); "
        "options.debugSink has none");
  } else {
    hrt_hal_module_options_t module_options = {
        .trace_dispatches = options.trace_dispatches,
        .trace_keys = handle->trace_keys
                          ? hrt_js_trace_keys_filter(handle->trace_keys)
                          : (hrt_trace_key_filter_t){NULL, NULL},
        .trace_functions = (const char* const*)options.trace_functions,
        .trace_function_count = options.trace_function_count,
        .trace_every = options.trace_every,
        .trace_mode = options.trace_mode,
        .reject_nonfinite = options.reject_nonfinite,
        .profile = options.profile,
        .flight_recorder = options.flight_recorder,
    };
    status = hrt_hal_module_create((hrt_hal_device_t*)device->handle,
                                   options.has_sink ? &native_sink : NULL,
                                   &module_options, &handle->module);
  }
  hrt_js_hal_options_free(&options);  // the module copied the filters
  if (status != HRT_OK) {
    // No module took the sink: release it as the module would have.
    if (options.has_sink) native_sink.release.fn(native_sink.release.user_data);
    hrt_js_module_handle_release(handle);
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return NULL;
  }
  if (!hrt_js_wrap_attach(env, this_arg, &hrt_js_hal_module_class, handle)) {
    return NULL;
  }
  // The JS-visible edges: HalModule -> device object and -> the sink as
  // given (which reaches every callback in it).
  napi_value trace_dispatches = options.trace_dispatches_value;
  napi_value profile = NULL, sink_value = NULL, trace_mode = NULL;
  if (hrt_js_arg_is_undefined(env, trace_dispatches)) {
    HRT_NAPI_CALL(env, napi_get_boolean(env, false, &trace_dispatches));
  }
  HRT_NAPI_CALL(env, napi_get_boolean(env, options.profile, &profile));
  HRT_NAPI_CALL(env, napi_create_string_utf8(
                         env, hrt_hal_trace_mode_name(options.trace_mode),
                         NAPI_AUTO_LENGTH, &trace_mode));
  sink_value = options.debug_sink;
  if (!options.has_sink) HRT_NAPI_CALL(env, napi_get_null(env, &sink_value));
  const napi_property_descriptor properties[] = {
      HRT_JS_VALUE("device", argv[1]),
      HRT_JS_VALUE("debugSink", sink_value),
      HRT_JS_VALUE("traceDispatches", trace_dispatches),
      HRT_JS_VALUE("profile", profile),
      HRT_JS_VALUE("traceMode", trace_mode),
  };
  HRT_NAPI_CALL(env, napi_define_properties(env, this_arg, 5, properties));
  return this_arg;
}

static napi_value hrt_js_hal_module_name(napi_env env,
                                         napi_callback_info info) {
  (void)info;
  napi_value name = NULL;
  HRT_NAPI_CALL(env, napi_create_string_utf8(env, "hal", 3, &name));
  return name;
}

// hal.droppedTraces / hal.droppedTimings: what its debug sink has dropped so
// far under tracePolicy 'drop', those after the last trace delivered
// included (0 without a JavaScript sink: native sinks never drop).
static napi_value hrt_js_hal_module_dropped(napi_env env,
                                            napi_callback_info info,
                                            bool timings) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  napi_value result = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(
          env, this_arg, &hrt_js_hal_module_class,
          timings ? "halModule.droppedTimings" : "halModule.droppedTraces",
          NULL, false, &wrap)) {
    return NULL;
  }
  const hrt_js_module_handle_t* handle = wrap->handle;
  hrt_js_sink_dropped_t dropped = {0, 0};
  if (handle->sink != NULL) dropped = hrt_js_sink_dropped(handle->sink);
  HRT_NAPI_CALL(
      env,
      napi_create_double(
          env, (double)(timings ? dropped.timings : dropped.traces), &result));
  return result;
}

static napi_value hrt_js_hal_module_dropped_traces(napi_env env,
                                                   napi_callback_info info) {
  return hrt_js_hal_module_dropped(env, info, false);
}

static napi_value hrt_js_hal_module_dropped_timings(napi_env env,
                                                    napi_callback_info info) {
  return hrt_js_hal_module_dropped(env, info, true);
}

static napi_value hrt_js_hal_module_close(napi_env env,
                                          napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_hal_module_class,
                             "halModule.close");
}

napi_value hrt_js_hal_module_define(napi_env env, hrt_js_env_t* state) {
  (void)state;
  const napi_property_descriptor properties[] = {
      HRT_JS_GETTER("name", hrt_js_hal_module_name),
      HRT_JS_GETTER("droppedTraces", hrt_js_hal_module_dropped_traces),
      HRT_JS_GETTER("droppedTimings", hrt_js_hal_module_dropped_timings),
      HRT_JS_METHOD("close", hrt_js_hal_module_close),
      HRT_JS_METHOD("flightRecorderState", hrt_js_recorder_state),
      HRT_JS_METHOD("flightRecorderDump", hrt_js_recorder_dump),
  };
  return hrt_js_define_class(env, "HalModule", hrt_js_hal_module_construct,
                             properties,
                             sizeof(properties) / sizeof(properties[0]), NULL);
}

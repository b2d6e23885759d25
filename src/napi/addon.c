// The addon's entry point: per-env state and the exported surface.
//
// Context-aware: NAPI_MODULE_INIT runs once per env (the main thread and each
// worker thread that loads the addon); everything it creates belongs to that
// env and is freed by the instance-data finalizer at env teardown.
//
// Exports (wrapped by lib/index.js, which users require):
//   Instance, Device, BufferView,
//   HalModule, HostModule, Module, Context, Function   classes
//   drivers()                      [{name, available, reason}]
//   dtypes                         frozen Array of dtype names
//   liveObjects()                  {instance, device, ...}: live runtime
//   objects
//   nvrtcCompile(...)              halrt.nvrtc.compile's native half
//   finishHostCall(...)            ends a host call (js_host_module.h)
//   viewDevice(view)               a BufferView's device URI (js_buffer_view.h)
//   isClosed(object)               whether close() was called on an object of
//                                  the binding (js_wrap.h)
//   setErrorClass, setTraceDecoder,
//   setScheduler                   hooks lib/index.js installs (see below)
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/dynlib.h"
#include "base/live.h"
#include "hal/driver.h"
#include "hal/element_type.h"
#include "napi/js_args.h"
#include "napi/js_buffer_view.h"
#include "napi/js_channel.h"
#include "napi/js_common.h"
#include "napi/js_context.h"
#include "napi/js_device.h"
#include "napi/js_function.h"
#include "napi/js_hal_module.h"
#include "napi/js_host_module.h"
#include "napi/js_instance.h"
#include "napi/js_module.h"
#include "napi/js_nvrtc.h"
#include "napi/js_prepared_call.h"
#include "napi/js_wrap.h"

static void hrt_js_delete_ref(napi_env env, napi_ref* ref) {
  if (*ref != NULL) napi_delete_reference(env, *ref);
  *ref = NULL;
}

// JS thread, at env teardown. Wrapped objects are finalized independently
// (each drops its own runtime reference); here only per-env state goes.
static void hrt_js_env_finalize(napi_env env, void* data, void* hint) {
  (void)hint;
  hrt_js_env_t* state = (hrt_js_env_t*)data;
  if (state->channel != NULL) hrt_js_channel_close(state->channel);
  state->channel = NULL;
  hrt_js_delete_ref(env, &state->error_class);
  hrt_js_delete_ref(env, &state->trace_decoder);
  hrt_js_channel_turn_deinit(env, &state->turn);
  hrt_js_delete_ref(env, &state->device_class);
  hrt_js_delete_ref(env, &state->buffer_view_class);
  hrt_js_delete_ref(env, &state->module_class);
  hrt_js_delete_ref(env, &state->function_class);
  hrt_js_delete_ref(env, &state->prepared_call_class);
  hrt_js_wrap_pins_free(state);
  hrt_js_host_errors_free(env, state);
  free(state);
}

// The hooks lib/ installs: JavaScript functions the binding calls.
//   setErrorClass(HalrtError)  every later error is `new HalrtError(message,
//                              code)`
//   setTraceDecoder(deliver)   debug sinks deliver their event batches
//                              through it (lib/trace_batch.js)
//   setScheduler(setImmediate) channels wait for the next turn of the event
//                              loop through it (js_channel.h)
// The property's data is the offset of the hook's napi_ref in the env state.
static napi_value hrt_js_set_hook(napi_env env, napi_callback_info info) {
  napi_value argv[1] = {NULL}, hook = NULL;
  size_t argc = 1;
  void* data = NULL;
  HRT_NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, &data));
  if (!hrt_js_arg_function(env, argv[0], "setHook", "hook", false, &hook)) {
    return NULL;
  }
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  napi_ref* slot = (napi_ref*)((char*)state + (uintptr_t)data);
  napi_ref ref = NULL;
  HRT_NAPI_CALL(env, napi_create_reference(env, hook, 1, &ref));
  hrt_js_delete_ref(env, slot);
  *slot = ref;
  return NULL;
}

// Sets `available` (whether `status` is OK), then `version` when `version`
// is not NULL (the string, or null when unavailable), then `reason` (null,
// or the status message) on `object`.
static napi_status hrt_js_set_availability(napi_env env, napi_value object,
                                           hrt_status_t status,
                                           const char* version) {
  napi_value available = NULL, text = NULL, reason = NULL;
  napi_status result = napi_get_boolean(env, status == HRT_OK, &available);
  if (result == napi_ok) {
    result = napi_set_named_property(env, object, "available", available);
  }
  if (result == napi_ok && version) {
    result = status == HRT_OK ? napi_create_string_utf8(env, version,
                                                        NAPI_AUTO_LENGTH, &text)
                              : napi_get_null(env, &text);
    if (result == napi_ok) {
      result = napi_set_named_property(env, object, "version", text);
    }
  }
  if (result == napi_ok) {
    result = status == HRT_OK
                 ? napi_get_null(env, &reason)
                 : napi_create_string_utf8(env, hrt_status_message(status),
                                           NAPI_AUTO_LENGTH, &reason);
  }
  if (result == napi_ok) {
    result = napi_set_named_property(env, object, "reason", reason);
  }
  return result;
}

// {available, version, reason} of a driver's compiler, as property
// `info.name` of `entry`. Returns false with an exception pending.
static bool hrt_js_set_compiler(napi_env env, const hrt_hal_driver_t* driver,
                                napi_value entry) {
  hrt_hal_compiler_info_t info = {"compiler", 0, 0};
  hrt_status_t status = driver->probe_compiler(&info);
  char version[32];
  snprintf(version, sizeof(version), "%d.%d", info.version_major,
           info.version_minor);
  napi_value object = NULL;
  napi_status result = napi_create_object(env, &object);
  if (result == napi_ok) {
    result = hrt_js_set_availability(env, object, status, version);
  }
  hrt_status_free(status);
  if (result == napi_ok) {
    result = napi_set_named_property(env, entry, info.name, object);
  }
  if (result != napi_ok) {
    hrt_js_throw_napi_failure(env, result, "drivers");
    return false;
  }
  return true;
}

// drivers() -> [{name, available, reason[, <compiler>: {available, version,
// reason}]}] in `auto` preference order.
static napi_value hrt_js_drivers(napi_env env, napi_callback_info info) {
  (void)info;
  uint32_t count = 0;
  const hrt_hal_driver_t* const* drivers = hrt_hal_builtin_drivers(&count);
  napi_value array = NULL;
  HRT_NAPI_CALL(env, napi_create_array_with_length(env, count, &array));
  for (uint32_t i = 0; i < count; ++i) {
    hrt_status_t status = drivers[i]->probe();
    napi_value entry = NULL;
    napi_value name = NULL;
    napi_status result = napi_create_object(env, &entry);
    if (result == napi_ok) {
      result = napi_create_string_utf8(env, drivers[i]->name, NAPI_AUTO_LENGTH,
                                       &name);
    }
    if (result == napi_ok) {
      result = napi_set_named_property(env, entry, "name", name);
    }
    if (result == napi_ok) {
      result = hrt_js_set_availability(env, entry, status, NULL);
    }
    hrt_status_free(status);
    if (result != napi_ok) {
      hrt_js_throw_napi_failure(env, result, "drivers");
      return NULL;
    }
    if (drivers[i]->probe_compiler &&
        !hrt_js_set_compiler(env, drivers[i], entry)) {
      return NULL;
    }
    HRT_NAPI_CALL(env, napi_set_element(env, array, i, entry));
  }
  return array;
}

// liveObjects() -> {instance, device, buffer, ...}: process-wide counts.
static napi_value hrt_js_live_objects(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value object = NULL;
  HRT_NAPI_CALL(env, napi_create_object(env, &object));
  for (int kind = 0; kind < HRT_LIVE_KIND_COUNT_; ++kind) {
    napi_value count = NULL;
    HRT_NAPI_CALL(env, napi_create_int64(
                           env, hrt_live_count((hrt_live_kind_t)kind), &count));
    HRT_NAPI_CALL(env, napi_set_named_property(
                           env, object,
                           hrt_live_kind_name((hrt_live_kind_t)kind), count));
  }
  return object;
}

static napi_value hrt_js_dtypes(napi_env env) {
  napi_value array = NULL;
  HRT_NAPI_CALL(env, napi_create_array_with_length(
                         env, HRT_HAL_ELEMENT_TYPE_COUNT_, &array));
  for (int type = 0; type < HRT_HAL_ELEMENT_TYPE_COUNT_; ++type) {
    napi_value name = NULL;
    HRT_NAPI_CALL(
        env, napi_create_string_utf8(
                 env, hrt_hal_element_type_name((hrt_hal_element_type_t)type),
                 NAPI_AUTO_LENGTH, &name));
    HRT_NAPI_CALL(env, napi_set_element(env, array, (uint32_t)type, name));
  }
  HRT_NAPI_CALL(env, napi_object_freeze(env, array));
  return array;
}

NAPI_MODULE_INIT() {
  // Node unloads the addon with the last env that loaded it, but a device
  // released last by in-flight work is destroyed later on its own thread
  // (hal/device.h), and a worker's env can end while device threads still run
  // halrt code. Pinned, that code stays mapped until the process exits.
  hrt_status_t pinned = hrt_dynlib_pin_containing((const void*)&hrt_js_drivers);
  if (pinned != HRT_OK) {
    napi_throw_error(env, "INTERNAL", hrt_status_message(pinned));
    hrt_status_free(pinned);
    return NULL;
  }
  hrt_js_env_t* state = calloc(1, sizeof(*state));
  if (state == NULL) {
    napi_throw_error(env, "RESOURCE_EXHAUSTED",
                     "halrt: out of host memory loading the addon");
    return NULL;
  }
  napi_status status =
      napi_set_instance_data(env, state, hrt_js_env_finalize, NULL);
  if (status != napi_ok) {
    free(state);
    hrt_js_throw_napi_failure(env, status, "napi_set_instance_data");
    return NULL;
  }
  // From here on the finalizer owns `state` and whatever is filled in.

  HRT_NAPI_CALL(env, hrt_js_channel_create(env, "halrt.completion", NULL, NULL,
                                           &state->channel));

  napi_value instance_class = hrt_js_instance_define(env, state);
  if (instance_class == NULL) return NULL;
  napi_value device_class = hrt_js_device_define(env, state);
  if (device_class == NULL) return NULL;
  napi_value buffer_view_class = hrt_js_buffer_view_define(env, state);
  if (buffer_view_class == NULL) return NULL;
  napi_value hal_module_class = hrt_js_hal_module_define(env, state);
  if (hal_module_class == NULL) return NULL;
  napi_value host_module_class = hrt_js_host_module_define(env, state);
  if (host_module_class == NULL) return NULL;
  napi_value module_class = hrt_js_module_define(env, state);
  if (module_class == NULL) return NULL;
  napi_value context_class = hrt_js_context_define(env, state);
  if (context_class == NULL) return NULL;
  napi_value function_class = hrt_js_function_define(env, state);
  if (function_class == NULL) return NULL;
  napi_value prepared_call_class = hrt_js_prepared_call_define(env, state);
  if (prepared_call_class == NULL) return NULL;
  napi_value dtypes = hrt_js_dtypes(env);
  if (dtypes == NULL) return NULL;

  const napi_property_descriptor properties[] = {
      HRT_JS_VALUE("Instance", instance_class),
      HRT_JS_VALUE("Device", device_class),
      HRT_JS_VALUE("BufferView", buffer_view_class),
      HRT_JS_VALUE("HalModule", hal_module_class),
      HRT_JS_VALUE("HostModule", host_module_class),
      HRT_JS_VALUE("Module", module_class),
      HRT_JS_VALUE("Context", context_class),
      HRT_JS_VALUE("Function", function_class),
      HRT_JS_VALUE("PreparedCall", prepared_call_class),
      HRT_JS_VALUE("dtypes", dtypes),
      {"drivers", NULL, hrt_js_drivers, NULL, NULL, NULL, napi_enumerable,
       NULL},
      {"liveObjects", NULL, hrt_js_live_objects, NULL, NULL, NULL,
       napi_enumerable, NULL},
      {"nvrtcCompile", NULL, hrt_js_nvrtc_compile, NULL, NULL, NULL,
       napi_enumerable, NULL},
      {"finishHostCall", NULL, hrt_js_host_finish, NULL, NULL, NULL,
       napi_enumerable, NULL},
      {"viewDevice", NULL, hrt_js_buffer_view_device, NULL, NULL, NULL,
       napi_enumerable, NULL},
      {"isClosed", NULL, hrt_js_wrap_is_closed, NULL, NULL, NULL,
       napi_enumerable, NULL},
      {"setErrorClass", NULL, hrt_js_set_hook, NULL, NULL, NULL,
       napi_enumerable, (void*)offsetof(hrt_js_env_t, error_class)},
      {"setTraceDecoder", NULL, hrt_js_set_hook, NULL, NULL, NULL,
       napi_enumerable, (void*)offsetof(hrt_js_env_t, trace_decoder)},
      {"setScheduler", NULL, hrt_js_set_hook, NULL, NULL, NULL, napi_enumerable,
       (void*)offsetof(hrt_js_env_t, turn.set_immediate)},
  };
  HRT_NAPI_CALL(
      env, napi_define_properties(env, exports,
                                  sizeof(properties) / sizeof(properties[0]),
                                  properties));
  return exports;
}

#include "napi/js_context.h"

#include <stdio.h>
#include <stdlib.h>

#include "napi/js_args.h"
#include "napi/js_function.h"
#include "napi/js_instance.h"
#include "napi/js_module.h"
#include "napi/js_trace_keys.h"

static void hrt_js_context_release(void* opaque) {
  hrt_js_context_handle_t* handle = opaque;
  hrt_vm_context_release(handle->context);
  if (handle->sink != NULL) hrt_js_sink_release(handle->sink);
  free(handle);
}

const hrt_js_class_t hrt_js_context_class = {
    .name = "Context",
    .release = hrt_js_context_release,
};

#define HRT_JS_MAX_CONTEXT_MODULES 64

// Tests the traceDispatches.keys filter of each HAL module among `modules`
// against the dispatch keys of the program modules among them, and hands
// each filter its answers for the link that follows (which runs no
// JavaScript). Every test runs before any filter gets answers: a test may
// run user code, even a nested `new Context` with the same modules.
static bool hrt_js_context_test_trace_keys(napi_env env, const char* method,
                                           hrt_vm_module_t* const* modules,
                                           uint32_t count,
                                           hrt_js_trace_keys_t* const* filters,
                                           uint32_t filter_count) {
  hrt_js_trace_verdicts_t* verdicts[HRT_JS_MAX_CONTEXT_MODULES] = {NULL};
  for (uint32_t i = 0; i < filter_count; ++i) {
    if (!hrt_js_trace_keys_test(env, filters[i], modules, count, method,
                                &verdicts[i])) {
      for (uint32_t j = 0; j < i; ++j) hrt_js_trace_verdicts_free(verdicts[j]);
      return false;
    }
  }
  for (uint32_t i = 0; i < filter_count; ++i) {
    hrt_js_trace_keys_set_verdicts(filters[i], verdicts[i]);
  }
  return true;
}

// new Context(instance, modules)
static napi_value hrt_js_context_construct(napi_env env,
                                           napi_callback_info info) {
  static const char* const method = "new Context";
  napi_value argv[2], this_arg = NULL, new_target = NULL;
  hrt_js_wrap_t* instance = NULL;
  uint32_t count = 0;
  HRT_NAPI_CALL(env, napi_get_new_target(env, info, &new_target));
  if (new_target == NULL) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "Context: the constructor must be called with `new`");
    return NULL;
  }
  if (!hrt_js_args_get(env, info, 2, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, argv[0], &hrt_js_instance_class, method,
                         "instance", false, &instance) ||
      !hrt_js_arg_array(env, argv[1], method, "modules", &count)) {
    return NULL;
  }
  if (count > HRT_JS_MAX_CONTEXT_MODULES) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                 "%s: modules has %u entries (at most %d)", method, count,
                 HRT_JS_MAX_CONTEXT_MODULES);
    return NULL;
  }
  hrt_vm_module_t* modules[HRT_JS_MAX_CONTEXT_MODULES];
  hrt_js_trace_keys_t* filters[HRT_JS_MAX_CONTEXT_MODULES];
  uint32_t filter_count = 0;
  hrt_js_sink_t* sink = NULL;
  napi_value copy = NULL;
  HRT_NAPI_CALL(env, napi_create_array_with_length(env, count, &copy));
  for (uint32_t i = 0; i < count; ++i) {
    napi_value element = NULL;
    char name[32];
    snprintf(name, sizeof(name), "modules[%u]", i);
    hrt_js_module_handle_t* module = NULL;
    HRT_NAPI_CALL(env, napi_get_element(env, argv[1], i, &element));
    if (!hrt_js_arg_module(env, element, method, name, &module)) return NULL;
    if (module->instance != instance->handle) {
      hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                   "%s: %s belongs to another Instance", method, name);
      return NULL;
    }
    if (module->sink != NULL) sink = module->sink;
    if (module->trace_keys != NULL)
      filters[filter_count++] = module->trace_keys;
    modules[i] = module->module;
    HRT_NAPI_CALL(env, napi_set_element(env, copy, i, element));
  }
  if (!hrt_js_context_test_trace_keys(env, method, modules, count, filters,
                                      filter_count)) {
    return NULL;
  }
  hrt_js_context_handle_t* handle = calloc(1, sizeof(*handle));
  hrt_status_t status =
      handle ? hrt_vm_context_create((hrt_vm_instance_t*)instance->handle,
                                     modules, count, &handle->context)
             : hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                               "out of host memory");
  for (uint32_t i = 0; i < filter_count; ++i) {
    hrt_js_trace_keys_set_verdicts(filters[i], NULL);
  }
  if (status != HRT_OK) {
    free(handle);
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return NULL;
  }
  handle->sink = sink;
  if (sink != NULL) hrt_js_sink_retain(sink);
  if (!hrt_js_wrap_attach(env, this_arg, &hrt_js_context_class, handle)) {
    return NULL;
  }
  HRT_NAPI_CALL(env, napi_object_freeze(env, copy));
  const napi_property_descriptor properties[] = {
      HRT_JS_VALUE("modules", copy),
  };
  HRT_NAPI_CALL(env, napi_define_properties(env, this_arg, 1, properties));
  return this_arg;
}

// context.lookupFunction("module.function") -> Function
static napi_value hrt_js_context_lookup_function(napi_env env,
                                                 napi_callback_info info) {
  static const char* const method = "context.lookupFunction";
  napi_value argv[1], this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  char* name = NULL;
  if (!hrt_js_args_get(env, info, 1, argv, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, &hrt_js_context_class, method, NULL,
                         false, &wrap) ||
      !hrt_js_arg_string(env, argv[0], method, "name", NULL, &name)) {
    return NULL;
  }
  hrt_js_context_handle_t* handle = wrap->handle;
  hrt_vm_function_t function;
  hrt_status_t status =
      hrt_vm_context_lookup_function(handle->context, name, &function);
  free(name);
  HRT_JS_THROW_IF_ERROR(env, method, status);
  return hrt_js_function_new(env, this_arg, wrap, &function);
}

static napi_value hrt_js_context_close(napi_env env, napi_callback_info info) {
  return hrt_js_close_method(env, info, &hrt_js_context_class, "context.close");
}

napi_value hrt_js_context_define(napi_env env, hrt_js_env_t* state) {
  (void)state;
  const napi_property_descriptor properties[] = {
      HRT_JS_METHOD("lookupFunction", hrt_js_context_lookup_function),
      HRT_JS_METHOD("close", hrt_js_context_close),
  };
  return hrt_js_define_class(env, "Context", hrt_js_context_construct,
                             properties,
                             sizeof(properties) / sizeof(properties[0]), NULL);
}

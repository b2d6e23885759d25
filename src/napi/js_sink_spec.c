#include "napi/js_sink_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/npy_sink.h"
#include "modules/stdio_sink.h"
#include "modules/tee_sink.h"
#include "napi/js_args.h"
#include "napi/js_common.h"

#define HRT_JS_STDIO_DEFAULT_ELEMENTS 16

typedef struct hrt_js_spec_builder_s {
  napi_env env;
  const char* method;
  const hrt_js_sink_options_t* options;
  hrt_js_sink_t* js_sink;  // the one JavaScript sink, once built
} hrt_js_spec_builder_t;

static bool hrt_js_build(hrt_js_spec_builder_t* builder, napi_value value,
                         const char* name, int depth,
                         hrt_debug_sink_t* out_sink);

static bool hrt_js_build_js(hrt_js_spec_builder_t* builder, napi_value target,
                            hrt_js_sink_mode_t mode, const char* name,
                            hrt_debug_sink_t* out_sink) {
  if (builder->js_sink != NULL) {
    return hrt_js_throw(builder->env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is a second JavaScript sink; a HalModule "
                        "takes at most one (combine them with halrt.sinks.tee, "
                        "which merges functions and objects into one)",
                        builder->method, name);
  }
  return hrt_js_sink_create(builder->env, target, mode,
                            builder->options->max_bytes,
                            builder->options->policy, &builder->js_sink,
                            out_sink);
}

// Releases what hrt_js_build made for `count` tee children.
static void hrt_js_release_sinks(hrt_debug_sink_t* sinks, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    sinks[i].release.fn(sinks[i].release.user_data);
  }
}

static bool hrt_js_build_tee(hrt_js_spec_builder_t* builder, napi_value spec,
                             const char* name, int depth,
                             hrt_debug_sink_t* out_sink) {
  napi_env env = builder->env;
  napi_value list = NULL;
  uint32_t count = 0;
  char list_name[96];
  snprintf(list_name, sizeof(list_name), "%s.sinks", name);
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, spec, "sinks", &list));
  if (!hrt_js_arg_array(env, list, builder->method, list_name, &count)) {
    return false;
  }
  if (count < 1 || count > HRT_TEE_MAX_SINKS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s must hold 1 to %d sinks (got %u)",
                        builder->method, list_name, HRT_TEE_MAX_SINKS, count);
  }
  hrt_debug_sink_t children[HRT_TEE_MAX_SINKS];
  for (uint32_t i = 0; i < count; ++i) {
    napi_value child = NULL;
    char child_name[112];
    snprintf(child_name, sizeof(child_name), "%s[%u]", list_name, i);
    if (napi_get_element(env, list, i, &child) != napi_ok ||
        !hrt_js_build(builder, child, child_name, depth + 1, &children[i])) {
      hrt_js_release_sinks(children, i);
      return false;
    }
  }
  hrt_status_t status = hrt_tee_sink_create(children, count, out_sink);
  if (status != HRT_OK) {  // the tee released the children
    hrt_js_throw_status(env,
                        hrt_status_annotate(status, "%s", builder->method));
    return false;
  }
  return true;
}

// A halrt.sinks object of kind `kind`.
static bool hrt_js_build_native(hrt_js_spec_builder_t* builder,
                                napi_value spec, const char* kind,
                                const char* name, int depth,
                                hrt_debug_sink_t* out_sink) {
  napi_env env = builder->env;
  napi_value field = NULL;
  char field_name[112];
  hrt_status_t status = HRT_OK;
  if (strcmp(kind, "stdio") == 0) {
    uint64_t max_elements = 0;
    snprintf(field_name, sizeof(field_name), "%s.maxElements", name);
    if (napi_get_named_property(env, spec, "maxElements", &field) != napi_ok ||
        !hrt_js_arg_uint64(env, field, builder->method, field_name,
                           HRT_JS_STDIO_DEFAULT_ELEMENTS, 2, 1u << 30,
                           &max_elements)) {
      return false;
    }
    status = hrt_stdio_sink_create(stdout, (uint32_t)max_elements, out_sink);
  } else if (strcmp(kind, "npy") == 0) {
    char* directory = NULL;
    snprintf(field_name, sizeof(field_name), "%s.directory", name);
    if (napi_get_named_property(env, spec, "directory", &field) != napi_ok ||
        !hrt_js_arg_string(env, field, builder->method, field_name, NULL,
                           &directory)) {
      return false;
    }
    status = hrt_npy_sink_create(directory, out_sink);
    free(directory);
  } else if (strcmp(kind, "stats") == 0) {
    napi_value callback = NULL;
    snprintf(field_name, sizeof(field_name), "%s.callback", name);
    if (napi_get_named_property(env, spec, "callback", &field) != napi_ok ||
        !hrt_js_arg_function(env, field, builder->method, field_name, false,
                             &callback)) {
      return false;
    }
    return hrt_js_build_js(builder, callback, HRT_JS_SINK_STATS, name,
                           out_sink);
  } else if (strcmp(kind, "tee") == 0) {
    return hrt_js_build_tee(builder, spec, name, depth, out_sink);
  } else {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s has unknown sink kind '%s' (expected stdio, "
                        "npy, stats or tee)",
                        builder->method, name, kind);
  }
  if (status != HRT_OK) {
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s: %s",
                                                 builder->method, name));
    return false;
  }
  return true;
}

static bool hrt_js_build(hrt_js_spec_builder_t* builder, napi_value value,
                         const char* name, int depth,
                         hrt_debug_sink_t* out_sink) {
  napi_env env = builder->env;
  if (depth > 8) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s nests tees more than 8 deep", builder->method,
                        name);
  }
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_function) {
    return hrt_js_build_js(builder, value, HRT_JS_SINK_TENSORS, name,
                           out_sink);
  }
  if (type != napi_object) {
    return hrt_js_throw_type(env, value, builder->method, name,
                             "a function, an object with trace / timing / "
                             "invocation methods, or a halrt.sinks sink");
  }
  napi_value kind = NULL;
  napi_valuetype kind_type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env,
                     napi_get_named_property(env, value, "halrtSinkKind", &kind));
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, kind, &kind_type));
  if (kind_type != napi_string) {
    return hrt_js_build_js(builder, value, HRT_JS_SINK_TENSORS, name,
                           out_sink);
  }
  char* text = NULL;
  if (!hrt_js_arg_string(env, kind, builder->method, name, NULL, &text)) {
    return false;
  }
  bool ok = hrt_js_build_native(builder, value, text, name, depth, out_sink);
  free(text);
  return ok;
}

bool hrt_js_sink_spec_build(napi_env env, napi_value value, const char* method,
                            const char* name,
                            const hrt_js_sink_options_t* options,
                            hrt_debug_sink_t* out_sink,
                            hrt_js_sink_t** out_js_sink) {
  hrt_js_spec_builder_t builder = {env, method, options, NULL};
  if (!hrt_js_build(&builder, value, name, 0, out_sink)) {
    // Whatever was built has been released; drop the caller's reference to
    // a JavaScript sink made on the way.
    if (builder.js_sink != NULL) hrt_js_sink_release(builder.js_sink);
    return false;
  }
  *out_js_sink = builder.js_sink;
  return true;
}

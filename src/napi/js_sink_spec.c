#include "napi/js_sink_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/sinks/npy_sink.h"
#include "modules/sinks/stdio_sink.h"
#include "modules/sinks/tee_sink.h"
#include "napi/js_args.h"
#include "napi/js_common.h"

#define HRT_JS_STDIO_DEFAULT_ELEMENTS 16

// What a walk of the description collects: native sinks (built as they are
// met, owned here until handed on) and JavaScript targets (one sink for all
// of them is made at the end). Nested tees are flattened.
typedef struct hrt_js_spec_builder_s {
  napi_env env;
  const char* method;
  uint32_t native_count;
  hrt_debug_sink_t natives[HRT_TEE_MAX_SINKS];
  uint32_t target_count;
  napi_value targets[HRT_JS_SINK_MAX_TARGETS];
  hrt_js_sink_mode_t modes[HRT_JS_SINK_MAX_TARGETS];
  bool takes_traces;  // some sink met has a way to receive traces
} hrt_js_spec_builder_t;

static bool hrt_js_collect(hrt_js_spec_builder_t* builder, napi_value value,
                           const char* name, int depth);

static void hrt_js_release_sinks(hrt_debug_sink_t* sinks, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    sinks[i].release.fn(sinks[i].release.user_data);
  }
}

static bool hrt_js_add_target(hrt_js_spec_builder_t* builder, napi_value target,
                              hrt_js_sink_mode_t mode, const char* name) {
  if (builder->target_count == HRT_JS_SINK_MAX_TARGETS) {
    return hrt_js_throw(builder->env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is JavaScript sink number %d; at most %d may "
                        "be combined",
                        builder->method, name, HRT_JS_SINK_MAX_TARGETS + 1,
                        HRT_JS_SINK_MAX_TARGETS);
  }
  builder->targets[builder->target_count] = target;
  builder->modes[builder->target_count++] = mode;
  return true;
}

// Takes a native sink just built (released if there is no room).
static bool hrt_js_add_native(hrt_js_spec_builder_t* builder,
                              hrt_debug_sink_t sink, const char* name) {
  // One slot stays free for the JavaScript sink made at the end.
  if (builder->native_count + 1 == HRT_TEE_MAX_SINKS) {
    sink.release.fn(sink.release.user_data);
    return hrt_js_throw(builder->env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is one native sink too many (at most %d)",
                        builder->method, name, HRT_TEE_MAX_SINKS - 1);
  }
  builder->natives[builder->native_count++] = sink;
  builder->takes_traces = true;  // stdio and npy
  return true;
}

static bool hrt_js_collect_tee(hrt_js_spec_builder_t* builder, napi_value spec,
                               const char* name, int depth) {
  napi_env env = builder->env;
  napi_value list = NULL;
  uint32_t count = 0;
  char list_name[96];
  snprintf(list_name, sizeof(list_name), "%s.sinks", name);
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, spec, "sinks", &list));
  if (!hrt_js_arg_array(env, list, builder->method, list_name, &count)) {
    return false;
  }
  if (count < 1) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s must hold at least one sink", builder->method,
                        list_name);
  }
  for (uint32_t i = 0; i < count; ++i) {
    napi_value child = NULL;
    char child_name[112];
    snprintf(child_name, sizeof(child_name), "%s[%u]", list_name, i);
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, list, i, &child));
    if (!hrt_js_collect(builder, child, child_name, depth + 1)) return false;
  }
  return true;
}

// A halrt.sinks object of kind `kind`.
static bool hrt_js_collect_kind(hrt_js_spec_builder_t* builder, napi_value spec,
                                const char* kind, const char* name, int depth) {
  hrt_debug_sink_t sink;
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
    status = hrt_stdio_sink_create(stdout, (uint32_t)max_elements, &sink);
  } else if (strcmp(kind, "npy") == 0) {
    char* directory = NULL;
    snprintf(field_name, sizeof(field_name), "%s.directory", name);
    if (napi_get_named_property(env, spec, "directory", &field) != napi_ok ||
        !hrt_js_arg_string(env, field, builder->method, field_name, NULL,
                           &directory)) {
      return false;
    }
    status = hrt_npy_sink_create(directory, &sink);
    free(directory);
  } else if (strcmp(kind, "stats") == 0) {
    napi_value callback = NULL;
    snprintf(field_name, sizeof(field_name), "%s.callback", name);
    if (napi_get_named_property(env, spec, "callback", &field) != napi_ok ||
        !hrt_js_arg_function(env, field, builder->method, field_name, false,
                             &callback)) {
      return false;
    }
    builder->takes_traces = true;
    return hrt_js_add_target(builder, callback, HRT_JS_SINK_STATS, name);
  } else if (strcmp(kind, "tee") == 0) {
    return hrt_js_collect_tee(builder, spec, name, depth);
  } else {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s has unknown sink kind '%s' (expected stdio, "
                        "npy, stats or tee)",
                        builder->method, name, kind);
  }
  if (status != HRT_OK) {
    hrt_js_throw_status(
        env, hrt_status_annotate(status, "%s: %s", builder->method, name));
    return false;
  }
  return hrt_js_add_native(builder, sink, name);
}

// An object target must have at least one of the sink methods, and each it
// has must be a function: an Array of sinks (use halrt.sinks.tee) or an
// object with a misspelt method would otherwise be accepted and never
// called.
static bool hrt_js_check_object_target(hrt_js_spec_builder_t* builder,
                                       napi_value value, const char* name) {
  static const char* const methods[] = {"trace", "timing", "invocation"};
  napi_env env = builder->env;
  bool is_array = false;
  HRT_NAPI_CALL_BOOL(env, napi_is_array(env, value, &is_array));
  if (is_array) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is an Array; combine sinks with "
                        "halrt.sinks.tee(...sinks)",
                        builder->method, name);
  }
  int found = 0;
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); ++i) {
    napi_value method = NULL;
    napi_valuetype type = napi_undefined;
    char method_name[112];
    snprintf(method_name, sizeof(method_name), "%s.%s", name, methods[i]);
    if (napi_get_named_property(env, value, methods[i], &method) != napi_ok) {
      return hrt_js_arg_threw(env, builder->method, method_name, "");
    }
    HRT_NAPI_CALL_BOOL(env, napi_typeof(env, method, &type));
    if (type == napi_undefined) continue;
    if (type != napi_function) {
      return hrt_js_throw_type(env, method, builder->method, method_name,
                               "a function");
    }
    ++found;
    if (strcmp(methods[i], "trace") == 0) builder->takes_traces = true;
  }
  if (found == 0) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s has none of the sink methods trace, timing "
                        "and invocation",
                        builder->method, name);
  }
  return true;
}

static bool hrt_js_collect(hrt_js_spec_builder_t* builder, napi_value value,
                           const char* name, int depth) {
  napi_env env = builder->env;
  if (depth > 8) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s nests tees more than 8 deep", builder->method,
                        name);
  }
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_function) {
    builder->takes_traces = true;
    return hrt_js_add_target(builder, value, HRT_JS_SINK_TENSORS, name);
  }
  if (type != napi_object) {
    return hrt_js_throw_type(env, value, builder->method, name,
                             "a function, an object with trace / timing / "
                             "invocation methods, or a halrt.sinks sink");
  }
  napi_value kind = NULL;
  napi_valuetype kind_type = napi_undefined;
  if (napi_get_named_property(env, value, "halrtSinkKind", &kind) != napi_ok) {
    return hrt_js_arg_threw(env, builder->method, name, ".halrtSinkKind");
  }
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, kind, &kind_type));
  if (kind_type != napi_string) {
    return hrt_js_check_object_target(builder, value, name) &&
           hrt_js_add_target(builder, value, HRT_JS_SINK_TENSORS, name);
  }
  char* text = NULL;
  if (!hrt_js_arg_string(env, kind, builder->method, name, NULL, &text)) {
    return false;
  }
  bool ok = hrt_js_collect_kind(builder, value, text, name, depth);
  free(text);
  return ok;
}

bool hrt_js_sink_spec_build(napi_env env, napi_value value, const char* method,
                            const char* name,
                            const hrt_js_sink_options_t* options,
                            hrt_debug_sink_t* out_sink,
                            hrt_js_sink_t** out_js_sink,
                            bool* out_takes_traces) {
  hrt_js_spec_builder_t builder = {.env = env, .method = method};
  hrt_js_sink_t* js_sink = NULL;
  bool ok = hrt_js_collect(&builder, value, name, 0);
  if (ok && builder.target_count > 0) {
    ok = hrt_js_sink_create(env, builder.targets, builder.modes,
                            builder.target_count, options, &js_sink,
                            &builder.natives[builder.native_count]);
    if (ok) ++builder.native_count;
  }
  if (!ok) {
    hrt_js_release_sinks(builder.natives, builder.native_count);
    return false;
  }
  if (builder.native_count == 1) {
    *out_sink = builder.natives[0];
  } else {
    hrt_status_t status =
        hrt_tee_sink_create(builder.natives, builder.native_count, out_sink);
    if (status != HRT_OK) {  // the tee released its sinks
      if (js_sink != NULL) hrt_js_sink_release(js_sink);
      hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
      return false;
    }
  }
  *out_js_sink = js_sink;
  *out_takes_traces = builder.takes_traces;
  return true;
}

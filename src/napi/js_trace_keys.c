#include "napi/js_trace_keys.h"

#include <stdlib.h>
#include <string.h>

#include "modules/program/program_module.h"
#include "napi/js_args.h"
#include "napi/js_common.h"

typedef struct hrt_js_trace_verdict_s {
  const char* key;  // borrowed from its program module
  bool traced;
} hrt_js_trace_verdict_t;

struct hrt_js_trace_verdicts_s {
  size_t count;
  hrt_js_trace_verdict_t items[];  // sorted by key
};

struct hrt_js_trace_keys_s {
  char* source;  // of the RegExp as given
  char* flags;
  hrt_js_trace_verdicts_t* verdicts;  // for the link now running, or NULL
};

static const char* const hrt_js_keys_name = "options.traceDispatches.keys";

// The RegExp constructor of the global object.
static bool hrt_js_regexp_constructor(napi_env env, napi_value* out) {
  napi_value global = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_get_global(env, &global));
  HRT_NAPI_CALL_BOOL(env, napi_get_named_property(env, global, "RegExp", out));
  return true;
}

bool hrt_js_trace_keys_read(napi_env env, napi_value value, const char* method,
                            hrt_js_trace_keys_t** out_keys) {
  napi_value regexp = NULL, clone = NULL, source = NULL, flags = NULL;
  napi_valuetype type = napi_undefined;
  bool is_regexp = false;
  if (!hrt_js_regexp_constructor(env, &regexp)) return false;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_object) {
    HRT_NAPI_CALL_BOOL(env, napi_instanceof(env, value, regexp, &is_regexp));
  }
  if (!is_regexp) {
    return hrt_js_throw_type(env, value, method, hrt_js_keys_name, "a RegExp");
  }
  // new RegExp(re) copies the pattern and flags out of re's internal slots;
  // the copy's own getters then give them as strings.
  hrt_js_trace_keys_t* keys = calloc(1, sizeof(*keys));
  if (keys == NULL) {
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "%s: out of host memory", method);
  }
  if (napi_new_instance(env, regexp, 1, &value, &clone) != napi_ok ||
      napi_get_named_property(env, clone, "source", &source) != napi_ok ||
      napi_get_named_property(env, clone, "flags", &flags) != napi_ok ||
      !hrt_js_arg_string(env, source, method, hrt_js_keys_name, NULL,
                         &keys->source) ||
      !hrt_js_arg_string(env, flags, method, hrt_js_keys_name, NULL,
                         &keys->flags)) {
    hrt_js_trace_keys_free(keys);
    return false;
  }
  *out_keys = keys;
  return true;
}

void hrt_js_trace_verdicts_free(hrt_js_trace_verdicts_t* verdicts) {
  free(verdicts);
}

void hrt_js_trace_keys_free(hrt_js_trace_keys_t* keys) {
  if (keys == NULL) return;
  hrt_js_trace_verdicts_free(keys->verdicts);
  free(keys->source);
  free(keys->flags);
  free(keys);
}

static int hrt_js_verdict_compare(const void* a, const void* b) {
  return strcmp(((const hrt_js_trace_verdict_t*)a)->key,
                ((const hrt_js_trace_verdict_t*)b)->key);
}

static bool hrt_js_trace_keys_ask(void* user_data, const char* key) {
  const hrt_js_trace_keys_t* keys = user_data;
  if (keys->verdicts == NULL) return false;
  hrt_js_trace_verdict_t wanted = {key, false};
  const hrt_js_trace_verdict_t* found =
      bsearch(&wanted, keys->verdicts->items, keys->verdicts->count,
              sizeof(wanted), hrt_js_verdict_compare);
  return found != NULL && found->traced;
}

hrt_trace_key_filter_t hrt_js_trace_keys_filter(hrt_js_trace_keys_t* keys) {
  return (hrt_trace_key_filter_t){hrt_js_trace_keys_ask, keys};
}

void hrt_js_trace_keys_set_verdicts(hrt_js_trace_keys_t* keys,
                                    hrt_js_trace_verdicts_t* verdicts) {
  hrt_js_trace_verdicts_free(keys->verdicts);
  keys->verdicts = verdicts;
}

// Throws the ABORTED HalrtError for a test of `key` that threw (pending;
// key NULL: making the RegExp again threw).
static bool hrt_js_trace_keys_threw(napi_env env,
                                    const hrt_js_trace_keys_t* keys,
                                    const char* method, const char* key) {
  napi_value thrown = hrt_js_take_pending(env);
  napi_value error = hrt_js_error_with_cause(
      env,
      hrt_status_make(HRT_STATUS_ABORTED,
                      "%s: the HalModule's %s /%s/%s threw %s%s%s", method,
                      hrt_js_keys_name, keys->source, keys->flags,
                      key ? "testing the dispatch key '" : "being made again",
                      key ? key : "", key ? "'" : ""),
      thrown);
  napi_throw(env, error != NULL ? error : thrown);
  return false;
}

// Tests one key: re.lastIndex = 0, then re.test(key).
static bool hrt_js_trace_keys_test_one(napi_env env, napi_value regexp,
                                       napi_value test, const char* key,
                                       bool* out_traced) {
  napi_value zero = NULL, text = NULL, result = NULL, truth = NULL;
  return napi_create_uint32(env, 0, &zero) == napi_ok &&
         napi_set_named_property(env, regexp, "lastIndex", zero) == napi_ok &&
         napi_create_string_utf8(env, key, NAPI_AUTO_LENGTH, &text) ==
             napi_ok &&
         napi_call_function(env, regexp, test, 1, &text, &result) == napi_ok &&
         napi_coerce_to_bool(env, result, &truth) == napi_ok &&
         napi_get_value_bool(env, truth, out_traced) == napi_ok;
}

bool hrt_js_trace_keys_test(napi_env env, const hrt_js_trace_keys_t* keys,
                            hrt_vm_module_t* const* modules, uint32_t count,
                            const char* method,
                            hrt_js_trace_verdicts_t** out_verdicts) {
  size_t total = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t key_count = 0;
    if (hrt_program_module_isa(modules[i])) {
      hrt_program_module_dispatch_keys(modules[i], &key_count);
    }
    total += key_count;
  }
  hrt_js_trace_verdicts_t* verdicts =
      malloc(sizeof(*verdicts) + total * sizeof(verdicts->items[0]));
  if (verdicts == NULL) {
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "%s: out of host memory", method);
  }
  verdicts->count = 0;
  napi_value constructor = NULL, regexp = NULL, test = NULL, args[2];
  if (!hrt_js_regexp_constructor(env, &constructor) ||
      napi_create_string_utf8(env, keys->source, NAPI_AUTO_LENGTH, &args[0]) !=
          napi_ok ||
      napi_create_string_utf8(env, keys->flags, NAPI_AUTO_LENGTH, &args[1]) !=
          napi_ok ||
      napi_new_instance(env, constructor, 2, args, &regexp) != napi_ok ||
      napi_get_named_property(env, regexp, "test", &test) != napi_ok) {
    free(verdicts);
    return hrt_js_trace_keys_threw(env, keys, method, NULL);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (!hrt_program_module_isa(modules[i])) continue;
    uint32_t key_count = 0;
    const char* const* module_keys =
        hrt_program_module_dispatch_keys(modules[i], &key_count);
    for (uint32_t k = 0; k < key_count; ++k) {
      hrt_js_trace_verdict_t* verdict = &verdicts->items[verdicts->count];
      verdict->key = module_keys[k];
      if (!hrt_js_trace_keys_test_one(env, regexp, test, verdict->key,
                                      &verdict->traced)) {
        free(verdicts);
        return hrt_js_trace_keys_threw(env, keys, method, module_keys[k]);
      }
      verdicts->count += 1;
    }
  }
  qsort(verdicts->items, verdicts->count, sizeof(verdicts->items[0]),
        hrt_js_verdict_compare);
  *out_verdicts = verdicts;
  return true;
}

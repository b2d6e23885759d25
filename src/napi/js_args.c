#include "napi/js_args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi/js_common.h"

// Largest integer a JavaScript number holds exactly (Number.MAX_SAFE_INTEGER).
#define HRT_JS_MAX_SAFE_INTEGER 9007199254740991.0

bool hrt_js_args_get(napi_env env, napi_callback_info info, size_t count,
                     napi_value* argv, napi_value* out_this, size_t* out_argc) {
  size_t argc = count;
  HRT_NAPI_CALL_BOOL(env,
                     napi_get_cb_info(env, info, &argc, argv, out_this, NULL));
  if (argc < count) {
    napi_value undefined = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_get_undefined(env, &undefined));
    for (size_t i = argc; i < count; ++i) argv[i] = undefined;
  }
  if (out_argc != NULL) *out_argc = argc;
  return true;
}

bool hrt_js_arg_is_undefined(napi_env env, napi_value value) {
  napi_valuetype type = napi_undefined;
  return napi_typeof(env, value, &type) == napi_ok && type == napi_undefined;
}

// Describes `value` for a message: "-1", "NaN", "'abc'", "an Array",
// "a Float32Array", "an object", ... Runs no user code.
static void hrt_js_describe(napi_env env, napi_value value, char* buffer,
                            size_t buffer_size) {
  napi_valuetype type = napi_undefined;
  snprintf(buffer, buffer_size, "a value");
  if (napi_typeof(env, value, &type) != napi_ok) return;
  switch (type) {
    case napi_undefined:
      snprintf(buffer, buffer_size, "undefined");
      return;
    case napi_null:
      snprintf(buffer, buffer_size, "null");
      return;
    case napi_boolean: {
      bool flag = false;
      napi_get_value_bool(env, value, &flag);
      snprintf(buffer, buffer_size, "%s", flag ? "true" : "false");
      return;
    }
    case napi_number: {
      napi_value text = NULL;
      size_t length = 0;
      if (napi_coerce_to_string(env, value, &text) == napi_ok) {
        napi_get_value_string_utf8(env, text, buffer, buffer_size, &length);
      }
      return;
    }
    case napi_string: {
      char text[40];
      size_t length = 0;
      napi_get_value_string_utf8(env, value, text, sizeof(text), &length);
      snprintf(buffer, buffer_size, "'%s%s'", text,
               length + 1 >= sizeof(text) ? "..." : "");
      return;
    }
    case napi_bigint:
      snprintf(buffer, buffer_size, "a BigInt");
      return;
    case napi_symbol:
      snprintf(buffer, buffer_size, "a Symbol");
      return;
    case napi_function:
      snprintf(buffer, buffer_size, "a function");
      return;
    case napi_external:
      snprintf(buffer, buffer_size, "an external");
      return;
    case napi_object:
      break;
  }
  bool is = false;
  if (napi_is_array(env, value, &is) == napi_ok && is) {
    snprintf(buffer, buffer_size, "an Array");
  } else if (napi_is_typedarray(env, value, &is) == napi_ok && is) {
    napi_typedarray_type array_type = napi_uint8_array;
    napi_get_typedarray_info(env, value, &array_type, NULL, NULL, NULL, NULL);
    const char* name = hrt_js_typed_array_type_name(array_type);
    snprintf(buffer, buffer_size, "%s %s", hrt_js_article(name), name);
  } else if (napi_is_arraybuffer(env, value, &is) == napi_ok && is) {
    snprintf(buffer, buffer_size, "an ArrayBuffer");
  } else if (napi_is_dataview(env, value, &is) == napi_ok && is) {
    snprintf(buffer, buffer_size, "a DataView");
  } else {
    snprintf(buffer, buffer_size, "an object");
  }
}

bool hrt_js_throw_type(napi_env env, napi_value value, const char* method,
                       const char* name, const char* expected) {
  char got[64];
  hrt_js_describe(env, value, got, sizeof(got));
  return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                      "%s: %s must be %s (got %s)", method, name, expected,
                      got);
}

bool hrt_js_arg_string(napi_env env, napi_value value, const char* method,
                       const char* name, const char* fallback, char** out) {
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_undefined && fallback != NULL) {
    char* copy = strdup(fallback);
    if (copy == NULL) {
      return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                          "%s: out of host memory", method);
    }
    *out = copy;
    return true;
  }
  if (type != napi_string) {
    return hrt_js_throw_type(env, value, method, name, "a string");
  }
  size_t length = 0;
  HRT_NAPI_CALL_BOOL(env,
                     napi_get_value_string_utf8(env, value, NULL, 0, &length));
  char* text = malloc(length + 1);
  if (text == NULL) {
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "%s: out of host memory reading %s", method, name);
  }
  napi_status status =
      napi_get_value_string_utf8(env, value, text, length + 1, &length);
  if (status != napi_ok) {
    free(text);
    hrt_js_throw_napi_failure(env, status, "napi_get_value_string_utf8");
    return false;
  }
  if (strlen(text) != length) {
    free(text);
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s must not contain NUL characters", method, name);
  }
  *out = text;
  return true;
}

bool hrt_js_arg_dtype(napi_env env, napi_value value, const char* method,
                      const char* name, hrt_hal_element_type_t* out_type) {
  char* text = NULL;
  if (!hrt_js_arg_string(env, value, method, name, NULL, &text)) return false;
  hrt_status_t status = hrt_hal_element_type_parse(text, out_type);
  free(text);
  if (status != HRT_OK) {
    hrt_js_throw_status(env, hrt_status_annotate(status, "%s", method));
    return false;
  }
  return true;
}

bool hrt_js_arg_shape(napi_env env, napi_value value, const char* method,
                      const char* name, uint32_t* out_rank,
                      int64_t out_shape[HRT_HAL_MAX_RANK],
                      uint64_t* out_element_count) {
  bool is_array = false;
  HRT_NAPI_CALL_BOOL(env, napi_is_array(env, value, &is_array));
  if (!is_array) {
    return hrt_js_throw_type(env, value, method, name,
                             "an Array of dimensions");
  }
  uint32_t rank = 0;
  HRT_NAPI_CALL_BOOL(env, napi_get_array_length(env, value, &rank));
  if (rank > HRT_HAL_MAX_RANK) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s has %u dimensions; at most %d are supported",
                        method, name, rank, HRT_HAL_MAX_RANK);
  }
  // The product of the non-zero dimensions must fit (strides are computed
  // from it), even when a zero makes the element count 0.
  uint64_t count = 1, nonzero = 1;
  bool overflow = false;
  for (uint32_t i = 0; i < rank; ++i) {
    napi_value element = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, value, i, &element));
    napi_valuetype type = napi_undefined;
    HRT_NAPI_CALL_BOOL(env, napi_typeof(env, element, &type));
    double dim = -1;
    if (type == napi_number) {
      HRT_NAPI_CALL_BOOL(env, napi_get_value_double(env, element, &dim));
    }
    if (type != napi_number || !isfinite(dim) || dim < 0 || floor(dim) != dim) {
      char got[64];
      hrt_js_describe(env, element, got, sizeof(got));
      return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                          "%s: %s[%u] must be a non-negative integer (got %s)",
                          method, name, i, got);
    }
    if (dim > HRT_JS_MAX_SAFE_INTEGER) {
      char got[64];
      hrt_js_describe(env, element, got, sizeof(got));
      return hrt_js_throw(
          env, HRT_STATUS_INVALID_ARGUMENT,
          "%s: %s[%u] is too large (got %s; the limit is 2^53-1)", method, name,
          i, got);
    }
    out_shape[i] = (int64_t)dim;
    count *= (uint64_t)out_shape[i];
    if (out_shape[i] != 0 &&
        __builtin_mul_overflow(nonzero, (uint64_t)out_shape[i], &nonzero)) {
      overflow = true;
    }
  }
  if (overflow) {
    char text[HRT_HAL_SHAPE_TEXT_MAX];
    hrt_hal_shape_format(rank, out_shape, text);
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s %s has too many elements (its non-zero "
                        "dimensions multiply past 2^64)",
                        method, name, text);
  }
  *out_rank = rank;
  *out_element_count = count;
  return true;
}

const char* hrt_js_article(const char* noun) {
  // Vowels but not U: "a Uint8Array", "an Int8Array", "an Instance".
  return noun[0] != 0 && strchr("AEIOaeio", noun[0]) != NULL ? "an" : "a";
}

const char* hrt_js_typed_array_type_name(napi_typedarray_type type) {
  switch (type) {
    case napi_int8_array:
      return "Int8Array";
    case napi_uint8_array:
      return "Uint8Array";
    case napi_uint8_clamped_array:
      return "Uint8ClampedArray";
    case napi_int16_array:
      return "Int16Array";
    case napi_uint16_array:
      return "Uint16Array";
    case napi_int32_array:
      return "Int32Array";
    case napi_uint32_array:
      return "Uint32Array";
    case napi_float32_array:
      return "Float32Array";
    case napi_float64_array:
      return "Float64Array";
    case napi_bigint64_array:
      return "BigInt64Array";
    case napi_biguint64_array:
      return "BigUint64Array";
  }
  return "TypedArray";
}

napi_typedarray_type hrt_js_dtype_array_type(hrt_hal_element_type_t type) {
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
    case HRT_HAL_ELEMENT_TYPE_BF16:
    case HRT_HAL_ELEMENT_TYPE_U16:
      return napi_uint16_array;
    case HRT_HAL_ELEMENT_TYPE_F32:
      return napi_float32_array;
    case HRT_HAL_ELEMENT_TYPE_F64:
      return napi_float64_array;
    case HRT_HAL_ELEMENT_TYPE_I8:
      return napi_int8_array;
    case HRT_HAL_ELEMENT_TYPE_U8:
    case HRT_HAL_ELEMENT_TYPE_BOOL:
      return napi_uint8_array;
    case HRT_HAL_ELEMENT_TYPE_I16:
      return napi_int16_array;
    case HRT_HAL_ELEMENT_TYPE_I32:
      return napi_int32_array;
    case HRT_HAL_ELEMENT_TYPE_U32:
      return napi_uint32_array;
    case HRT_HAL_ELEMENT_TYPE_I64:
      return napi_bigint64_array;
    case HRT_HAL_ELEMENT_TYPE_U64:
      return napi_biguint64_array;
    case HRT_HAL_ELEMENT_TYPE_COUNT_:
      break;
  }
  return napi_uint8_array;
}

hrt_hal_element_type_t hrt_js_typed_array_dtype(napi_typedarray_type type) {
  switch (type) {
    case napi_int8_array:
      return HRT_HAL_ELEMENT_TYPE_I8;
    case napi_uint8_array:
    case napi_uint8_clamped_array:
      return HRT_HAL_ELEMENT_TYPE_U8;
    case napi_int16_array:
      return HRT_HAL_ELEMENT_TYPE_I16;
    case napi_uint16_array:
      return HRT_HAL_ELEMENT_TYPE_U16;
    case napi_int32_array:
      return HRT_HAL_ELEMENT_TYPE_I32;
    case napi_uint32_array:
      return HRT_HAL_ELEMENT_TYPE_U32;
    case napi_float32_array:
      return HRT_HAL_ELEMENT_TYPE_F32;
    case napi_float64_array:
      return HRT_HAL_ELEMENT_TYPE_F64;
    case napi_bigint64_array:
      return HRT_HAL_ELEMENT_TYPE_I64;
    case napi_biguint64_array:
      return HRT_HAL_ELEMENT_TYPE_U64;
  }
  return HRT_HAL_ELEMENT_TYPE_U8;
}

bool hrt_js_typed_array_accepts(hrt_hal_element_type_t dtype,
                                napi_typedarray_type array_type) {
  if (dtype == HRT_HAL_ELEMENT_TYPE_U8 &&
      array_type == napi_uint8_clamped_array) {
    return true;
  }
  return hrt_js_dtype_array_type(dtype) == array_type;
}

bool hrt_js_arg_typed_array(napi_env env, napi_value value, const char* method,
                            const char* name, hrt_js_typed_array_t* out) {
  bool is_typed_array = false;
  HRT_NAPI_CALL_BOOL(env, napi_is_typedarray(env, value, &is_typed_array));
  if (!is_typed_array) {
    return hrt_js_throw_type(env, value, method, name, "a TypedArray");
  }
  napi_typedarray_type type = napi_uint8_array;
  size_t length = 0;
  void* data = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_get_typedarray_info(env, value, &type, &length,
                                                   &data, NULL, NULL));
  size_t element_size = 1;
  switch (type) {
    case napi_int16_array:
    case napi_uint16_array:
      element_size = 2;
      break;
    case napi_int32_array:
    case napi_uint32_array:
    case napi_float32_array:
      element_size = 4;
      break;
    case napi_float64_array:
    case napi_bigint64_array:
    case napi_biguint64_array:
      element_size = 8;
      break;
    default:
      break;
  }
  out->type = type;
  out->length = length;
  out->byte_length = length * element_size;
  out->data = out->byte_length == 0 ? NULL : data;
  return true;
}

bool hrt_js_arg_unwrap(napi_env env, napi_value value,
                       const hrt_js_class_t* cls, const char* method,
                       const char* name, bool allow_closed,
                       hrt_js_wrap_t** out_wrap) {
  hrt_js_wrap_t* wrap = hrt_js_wrap_find(env, value, cls);
  if (wrap == NULL) {
    if (name == NULL) {
      return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                          "%s: `this` is not %s %s", method,
                          hrt_js_article(cls->name), cls->name);
    }
    char got[64];
    hrt_js_describe(env, value, got, sizeof(got));
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "%s: %s is not %s %s (got %s)", method, name,
                        hrt_js_article(cls->name), cls->name, got);
  }
  if (wrap->closed && !allow_closed) {
    return hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                        "%s: %s%s%s is closed", method, name ? name : "",
                        name ? " " : "", cls->name);
  }
  if (!hrt_js_wrap_pin(env, wrap)) return false;
  *out_wrap = wrap;
  return true;
}

bool hrt_js_arg_threw(napi_env env, const char* method, const char* name,
                      const char* what) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) != napi_ok || !pending) {
    // Node-API itself failed, with nothing thrown: say so.
    return hrt_js_throw(env, HRT_STATUS_INTERNAL,
                        "%s: reading %s%s failed in Node-API", method, name,
                        what);
  }
  napi_value thrown = hrt_js_take_pending(env);
  napi_value error = hrt_js_error_with_cause(
      env,
      hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                      "%s: reading %s%s threw (the thrown value is the "
                      "error's cause)",
                      method, name, what),
      thrown);
  napi_throw(env, error != NULL ? error : thrown);
  return false;
}

bool hrt_js_arg_options(napi_env env, napi_value value, const char* method,
                        const char* name, const char* const* known,
                        size_t count) {
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_undefined) return true;
  bool is_array = false;
  HRT_NAPI_CALL_BOOL(env, napi_is_array(env, value, &is_array));
  if (type != napi_object || is_array) {
    return hrt_js_throw_type(env, value, method, name, "an object");
  }
  napi_value keys = NULL;
  uint32_t length = 0;
  if (napi_get_property_names(env, value, &keys) != napi_ok) {
    char what[80];
    snprintf(what, sizeof(what), "the keys of %s", name);
    return hrt_js_arg_threw(env, method, what, "");
  }
  HRT_NAPI_CALL_BOOL(env, napi_get_array_length(env, keys, &length));
  for (uint32_t i = 0; i < length; ++i) {
    napi_value key = NULL;
    char text[64];
    size_t text_length = 0;
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, keys, i, &key));
    HRT_NAPI_CALL_BOOL(env, napi_get_value_string_utf8(
                                env, key, text, sizeof(text), &text_length));
    bool found = false;
    for (size_t k = 0; k < count && !found; ++k) {
      found = strcmp(text, known[k]) == 0;
    }
    if (!found) {
      return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                          "%s: unknown option '%s' in %s", method, text, name);
    }
  }
  return true;
}

bool hrt_js_arg_option(napi_env env, napi_value options, const char* method,
                       const char* name, const char* key,
                       napi_value* out_value) {
  if (hrt_js_arg_is_undefined(env, options)) {
    HRT_NAPI_CALL_BOOL(env, napi_get_undefined(env, out_value));
    return true;
  }
  if (napi_get_named_property(env, options, key, out_value) != napi_ok) {
    char what[72];
    snprintf(what, sizeof(what), ".%s", key);
    return hrt_js_arg_threw(env, method, name, what);
  }
  return true;
}

bool hrt_js_arg_bool(napi_env env, napi_value value, const char* method,
                     const char* name, bool fallback, bool* out) {
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_undefined) {
    *out = fallback;
    return true;
  }
  if (type != napi_boolean) {
    return hrt_js_throw_type(env, value, method, name, "a boolean");
  }
  HRT_NAPI_CALL_BOOL(env, napi_get_value_bool(env, value, out));
  return true;
}

bool hrt_js_arg_uint64(napi_env env, napi_value value, const char* method,
                       const char* name, uint64_t fallback, uint64_t min,
                       uint64_t max, uint64_t* out) {
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (type == napi_undefined) {
    *out = fallback;
    return true;
  }
  double number = 0;
  if (type == napi_number) {
    HRT_NAPI_CALL_BOOL(env, napi_get_value_double(env, value, &number));
  }
  if (type != napi_number || number != floor(number) || number < (double)min ||
      number > (double)max || number > HRT_JS_MAX_SAFE_INTEGER) {
    char expected[96];
    snprintf(expected, sizeof(expected), "an integer in [%llu, %llu]",
             (unsigned long long)min, (unsigned long long)max);
    return hrt_js_throw_type(env, value, method, name, expected);
  }
  *out = (uint64_t)number;
  return true;
}

bool hrt_js_arg_function(napi_env env, napi_value value, const char* method,
                         const char* name, bool optional, napi_value* out) {
  napi_valuetype type = napi_undefined;
  HRT_NAPI_CALL_BOOL(env, napi_typeof(env, value, &type));
  if (optional && (type == napi_undefined || type == napi_null)) {
    *out = NULL;
    return true;
  }
  if (type != napi_function) {
    return hrt_js_throw_type(env, value, method, name, "a function");
  }
  *out = value;
  return true;
}

bool hrt_js_arg_array(napi_env env, napi_value value, const char* method,
                      const char* name, uint32_t* out_length) {
  bool is_array = false;
  HRT_NAPI_CALL_BOOL(env, napi_is_array(env, value, &is_array));
  if (!is_array) return hrt_js_throw_type(env, value, method, name, "an Array");
  HRT_NAPI_CALL_BOOL(env, napi_get_array_length(env, value, out_length));
  return true;
}

napi_value hrt_js_close_method(napi_env env, napi_callback_info info,
                               const hrt_js_class_t* cls, const char* method) {
  napi_value this_arg = NULL;
  hrt_js_wrap_t* wrap = NULL;
  if (!hrt_js_args_get(env, info, 0, NULL, &this_arg, NULL) ||
      !hrt_js_arg_unwrap(env, this_arg, cls, method, NULL, true, &wrap)) {
    return NULL;
  }
  hrt_js_wrap_close(wrap);
  return NULL;
}

bool hrt_js_arg_choice(napi_env env, napi_value value, const char* method,
                       const char* name, const char* const* choices, int count,
                       int* out_index) {
  char* text = NULL;
  if (!hrt_js_arg_string(env, value, method, name, choices[0], &text)) {
    return false;
  }
  char expected[160] = "";
  size_t used = 0;
  for (int i = 0; i < count; ++i) {
    if (strcmp(text, choices[i]) == 0) {
      *out_index = i;
      free(text);
      return true;
    }
    int n = snprintf(expected + used, sizeof(expected) - used, "%s'%s'",
                     i == 0           ? ""
                     : i + 1 == count ? " or "
                                      : ", ",
                     choices[i]);
    if (n > 0 && (size_t)n < sizeof(expected) - used) used += (size_t)n;
  }
  hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT, "%s: %s must be %s (got '%s')",
               method, name, expected, text);
  free(text);
  return false;
}

napi_value hrt_js_internal_constructor(napi_env env, napi_callback_info info,
                                       const char* message) {
  napi_value this_arg = NULL;
  HRT_NAPI_CALL(env, napi_get_cb_info(env, info, NULL, NULL, &this_arg, NULL));
  const hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return NULL;
  if (state->constructing == 0) {
    hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT, "%s", message);
    return NULL;
  }
  return this_arg;
}

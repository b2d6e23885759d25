// Argument conversion for every binding function, in one place.
//
// Convention: each function returns true on success; on failure it returns
// false with a pending exception (a HalrtError whose message starts with
// `method`, names the argument and says what was wrong and what was given).
// `method` is the name JavaScript users call ("device.tensor").
//
// Threads: JS thread only.
#ifndef HRT_NAPI_JS_ARGS_H_
#define HRT_NAPI_JS_ARGS_H_

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hal/buffer_view.h"
#include "hal/element_type.h"
#include "napi/js_wrap.h"

// Throws INVALID_ARGUMENT "<method>: <name> must be <expected> (got <what
// value is>)". Always returns false.
bool hrt_js_throw_type(napi_env env, napi_value value, const char* method,
                       const char* name, const char* expected);

// Reads `this` and up to `count` arguments; missing ones are `undefined`.
// `out_argc` (may be NULL) receives the number actually passed.
bool hrt_js_args_get(napi_env env, napi_callback_info info, size_t count,
                     napi_value* argv, napi_value* out_this, size_t* out_argc);

bool hrt_js_arg_is_undefined(napi_env env, napi_value value);

// A string argument, copied into a malloc'd NUL-terminated buffer the caller
// frees. With `fallback` != NULL, undefined yields a copy of `fallback`.
bool hrt_js_arg_string(napi_env env, napi_value value, const char* method,
                       const char* name, const char* fallback, char** out);

// A dtype name ("f32", ...).
bool hrt_js_arg_dtype(napi_env env, napi_value value, const char* method,
                      const char* name, hrt_hal_element_type_t* out_type);

// A shape: an Array of at most HRT_HAL_MAX_RANK non-negative safe integers
// whose product fits in 64 bits. `out_element_count` is that product.
bool hrt_js_arg_shape(napi_env env, napi_value value, const char* method,
                      const char* name, uint32_t* out_rank,
                      int64_t out_shape[HRT_HAL_MAX_RANK],
                      uint64_t* out_element_count);

// A TypedArray's contents, borrowed from its ArrayBuffer for the duration of
// the current call (no JavaScript may run while `data` is used).
typedef struct hrt_js_typed_array_s {
  napi_typedarray_type type;
  size_t length;  // elements
  size_t byte_length;
  const void* data;  // NULL when byte_length is 0
} hrt_js_typed_array_t;

bool hrt_js_arg_typed_array(napi_env env, napi_value value, const char* method,
                            const char* name, hrt_js_typed_array_t* out);

// The TypedArray class used for a dtype ("Float32Array", Uint16Array for
// f16/bf16 raw bits, Uint8Array for bool) and the dtype inferred from a
// TypedArray (Uint8ClampedArray -> u8).
napi_typedarray_type hrt_js_dtype_array_type(hrt_hal_element_type_t type);
const char* hrt_js_typed_array_type_name(napi_typedarray_type type);
hrt_hal_element_type_t hrt_js_typed_array_dtype(napi_typedarray_type type);
// "an" before a vowel, "a" otherwise: for messages naming classes.
const char* hrt_js_article(const char* noun);
// Whether data of `array_type` may be given for `dtype`.
bool hrt_js_typed_array_accepts(hrt_hal_element_type_t dtype,
                                napi_typedarray_type array_type);

// Unwraps an object tagged as `cls` and pins it for the rest of the binding
// call (js_wrap.h), so that its handle stays valid even if user code run by a
// later argument closes it. `name` is the argument ("target"), or NULL for
// the receiver (`this`). Fails with INVALID_ARGUMENT "<name> is not a
// <Class>" for anything else, and with FAILED_PRECONDITION "<Class> is closed"
// when close() was called on it, unless `allow_closed` (then `handle` may be
// NULL).
bool hrt_js_arg_unwrap(napi_env env, napi_value value,
                       const hrt_js_class_t* cls, const char* method,
                       const char* name, bool allow_closed,
                       hrt_js_wrap_t** out_wrap);

// If reading the caller's object `name` left an exception pending (a getter
// or Proxy trap threw), replaces it with INVALID_ARGUMENT "<method>: reading
// <name><what> threw" whose `cause` is the thrown value. Returns false.
bool hrt_js_arg_threw(napi_env env, const char* method, const char* name,
                      const char* what);

// An options object: undefined (no options) or an object whose own keys are
// all in `known[0..count)`; anything else fails naming the key.
bool hrt_js_arg_options(napi_env env, napi_value value, const char* method,
                        const char* name, const char* const* known,
                        size_t count);
// Property `key` of the options object `name`; undefined when `options` is
// undefined.
bool hrt_js_arg_option(napi_env env, napi_value options, const char* method,
                       const char* name, const char* key,
                       napi_value* out_value);

// A boolean; undefined yields `fallback`.
bool hrt_js_arg_bool(napi_env env, napi_value value, const char* method,
                     const char* name, bool fallback, bool* out);

// A safe integer in [min, max]; undefined yields `fallback`.
bool hrt_js_arg_uint64(napi_env env, napi_value value, const char* method,
                       const char* name, uint64_t fallback, uint64_t min,
                       uint64_t max, uint64_t* out);

// One of the strings `choices[0..count)`; undefined yields choice 0.
// `out_index` receives the index.
bool hrt_js_arg_choice(napi_env env, napi_value value, const char* method,
                       const char* name, const char* const* choices, int count,
                       int* out_index);

// A function, or (with `optional`) undefined/null, which yield NULL.
bool hrt_js_arg_function(napi_env env, napi_value value, const char* method,
                         const char* name, bool optional, napi_value* out);

// An Array; `out_length` receives its length.
bool hrt_js_arg_array(napi_env env, napi_value value, const char* method,
                      const char* name, uint32_t* out_length);

// The body of the constructor of a class only the binding constructs
// (hrt_js_new_internal): returns `this` for the binding's own call, and
// throws INVALID_ARGUMENT with `message` (which says what to use instead)
// for any other.
napi_value hrt_js_internal_constructor(napi_env env, napi_callback_info info,
                                       const char* message);

// The body of every class's close(): drops the receiver's runtime reference
// (idempotent; a closed receiver is fine). Returns undefined (NULL).
napi_value hrt_js_close_method(napi_env env, napi_callback_info info,
                               const hrt_js_class_t* cls, const char* method);

#endif  // HRT_NAPI_JS_ARGS_H_

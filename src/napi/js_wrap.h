// The one object model behind every wrapped JavaScript class: a JS object
// carries a type tag (one per class) and a native hrt_js_wrap_t holding
// exactly one owned reference to a runtime object.
//
// Lifetime: the reference is dropped by hrt_js_wrap_close() (close() and
// [Symbol.dispose] in JavaScript) or by the napi_wrap finalizer, whichever
// comes first; the hrt_js_wrap_t itself is freed by the finalizer. Releasing a
// runtime object never calls N-API, so the finalizer is safe at env teardown.
//
// Threads: JS thread of the owning env only.
#ifndef HRT_NAPI_JS_WRAP_H_
#define HRT_NAPI_JS_WRAP_H_

#include <node_api.h>
#include <stdbool.h>

typedef struct hrt_js_class_s {
  const char* name;  // "Device": used in messages
  napi_type_tag tag;
  void (*release)(void* handle);  // drops the runtime reference
} hrt_js_class_t;

typedef struct hrt_js_wrap_s {
  const hrt_js_class_t* cls;
  void* handle;  // owned runtime reference; NULL once closed
} hrt_js_wrap_t;

// Tags `object` as `cls` and attaches `handle` (an owned reference, consumed
// in every case: released on failure). Returns false with a pending exception
// on failure.
bool hrt_js_wrap_attach(napi_env env, napi_value object,
                        const hrt_js_class_t* cls, void* handle);

// Creates an object of a class only the binding may construct (its
// constructor reference in `class_ref`; see hrt_js_new_internal) and
// attaches `handle` as `cls` (an owned reference, consumed in every case).
// Returns false with a pending exception on failure.
bool hrt_js_wrap_new(napi_env env, napi_ref class_ref,
                     const hrt_js_class_t* cls, void* handle,
                     napi_value* out_object);

// True when `value` is an object tagged as `cls`.
bool hrt_js_wrap_is(napi_env env, napi_value value, const hrt_js_class_t* cls);

// The wrap of an object already known to be tagged as `cls`, or NULL with a
// pending exception.
hrt_js_wrap_t* hrt_js_wrap_get(napi_env env, napi_value object);

// Drops the runtime reference if still held. Idempotent.
void hrt_js_wrap_close(hrt_js_wrap_t* wrap);

#endif  // HRT_NAPI_JS_WRAP_H_

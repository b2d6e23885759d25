// The one object model behind every wrapped JavaScript class: a JS object
// wrapped (napi_wrap) with a native hrt_js_wrap_t holding exactly one owned
// reference to a runtime object. The wraps this addon made on a thread are
// listed in that thread's registry, so a pointer napi_unwrap finds on an
// object another addon wrapped is never taken for one (no type tags: one
// private property per object).
//
// Lifetime: the reference is dropped by hrt_js_wrap_close() (close() and
// [Symbol.dispose] in JavaScript) or by the napi_wrap finalizer, whichever
// comes first; the hrt_js_wrap_t itself is freed by the finalizer. Releasing a
// runtime object never calls N-API, so the finalizer is safe at env teardown.
//
// Re-entrancy: reading a JavaScript argument can run user code (a getter, a
// Proxy trap) that calls close() on an object the method already unwrapped.
// So every wrap a binding method unwraps is *pinned* until that method
// returns: close() during the call marks the wrap closed at once (later
// unwraps fail with FAILED_PRECONDITION) but the runtime reference is dropped
// only when the last call pinning it returns. `handle` therefore stays valid
// for the whole call of every method that unwrapped it. Pins are kept on a
// per-env stack and released by hrt_js_wrap_call, the entry point that
// hrt_js_define_class installs in front of every method, getter and
// constructor; unwrapping is only allowed inside such a call.
//
// Threads: JS thread of the owning env only (one env per thread).
#ifndef HRT_NAPI_JS_WRAP_H_
#define HRT_NAPI_JS_WRAP_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct hrt_js_env_s hrt_js_env_t;

typedef struct hrt_js_class_s {
  const char* name;               // "Device": used in messages
  void (*release)(void* handle);  // drops the runtime reference
} hrt_js_class_t;

typedef struct hrt_js_wrap_s {
  const hrt_js_class_t* cls;
  // Owned runtime reference; NULL once released (closed and not pinned).
  void* handle;
  uint32_t pins;   // binding calls now running that unwrapped this wrap
  // Native owners that keep this struct (not the runtime reference) past
  // the object's finalizer (hrt_js_wrap_hold).
  uint32_t holds;
  bool closed;     // close() was called (the reference may still be pinned)
  bool finalized;  // the JS object is gone; freed when the last pin goes
} hrt_js_wrap_t;

// Wraps `object` as `cls` with `handle` (an owned reference, consumed in
// every case: released on failure). Returns false with a pending exception
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

// The wrap of `value` when it is an object this addon wrapped as `cls` (any
// class when `cls` is NULL), else NULL; never leaves an exception pending.
hrt_js_wrap_t* hrt_js_wrap_find(napi_env env, napi_value value,
                                const hrt_js_class_t* cls);

// Pins `wrap` (not closed) until the binding call now running returns.
// Returns false with a pending exception when out of memory.
bool hrt_js_wrap_pin(napi_env env, hrt_js_wrap_t* wrap);

// Marks the wrap closed and drops the runtime reference, at once when no call
// pins it, otherwise when the last pinning call returns. Idempotent.
void hrt_js_wrap_close(hrt_js_wrap_t* wrap);

// Keeps the wrap struct valid after its object is collected, until the
// matching unhold (both on the JS thread): a native owner that outlives the
// object reads `closed` (true once the object is gone) instead of a freed
// struct. The runtime reference is dropped as usual.
void hrt_js_wrap_hold(hrt_js_wrap_t* wrap);
void hrt_js_wrap_unhold(hrt_js_wrap_t* wrap);

// Swaps `handle` (an owned reference) in for the wrap's, releasing the old
// one (or `handle` itself when it is the wrap's), when the wrap is open and
// no call pins it; otherwise returns false and the caller keeps `handle`.
// The new runtime object must be of the same class and stand where the old
// one did (a PreparedCall's outputs).
bool hrt_js_wrap_replace(hrt_js_wrap_t* wrap, void* handle);

// The napi_callback installed for every method, getter and constructor of a
// binding class: `data` is the real napi_callback (as an intptr); calls it
// and then unpins every wrap pinned during the call.
napi_value hrt_js_wrap_call(napi_env env, napi_callback_info info);

// isClosed(value) -> boolean: whether `value` is an object of the binding
// whose close() was called (false for anything else).
napi_value hrt_js_wrap_is_closed(napi_env env, napi_callback_info info);

// Frees the env's pin stack (env teardown; no call is running then).
void hrt_js_wrap_pins_free(hrt_js_env_t* state);

#endif  // HRT_NAPI_JS_WRAP_H_

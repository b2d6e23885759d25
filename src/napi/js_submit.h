// Promise-returning device operations: submit a recorded command buffer and
// settle a promise on the JS thread when the device has run it.
//
// Threads: hrt_js_submit and hrt_js_typed_array_from_host run on the JS
// thread. The submission's completion runs on the device's completion thread;
// it only posts a message to the env's channel (or frees the operation when
// the channel is closed) and never calls N-API. The message is delivered on
// the JS thread, where the promise is resolved or rejected.
//
// Memory a device writes into is malloc'd, never owned by a JavaScript
// ArrayBuffer: a worker may be terminated, and its heap freed, while the
// device thread still writes.
#ifndef HRT_NAPI_JS_SUBMIT_H_
#define HRT_NAPI_JS_SUBMIT_H_

#include <node_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "hal/command_buffer.h"
#include "hal/device.h"
#include "hal/element_type.h"

typedef struct hrt_js_submit_result_s {
  // malloc'd memory the command buffer writes into, or NULL: the promise
  // then resolves with undefined. Owned by the operation once submitted.
  void* host_data;
  uint64_t byte_length;
  hrt_hal_element_type_t dtype;  // the TypedArray the promise resolves with
} hrt_js_submit_result_t;

// Submits `command_buffer` (finalized; borrowed: the device retains it) to
// `device` and returns a promise in `out_promise`. `method` (a static string)
// prefixes error messages. `result.host_data` is owned by this call in every
// case: freed on failure, and on success handed to the resolved TypedArray.
// A failed submit yields a rejected promise, not an exception. Returns false
// with a pending exception only when the promise itself cannot be made.
bool hrt_js_submit(napi_env env, const char* method, hrt_hal_device_t* device,
                   hrt_hal_command_buffer_t* command_buffer,
                   hrt_js_submit_result_t result, napi_value* out_promise);

// Frees host data handed to JavaScript (free, hrt_block_pool_give_back).
// Runs on the JS thread (or at env teardown).
typedef void (*hrt_js_release_fn)(void* data);

// The most bytes halrt hands to JavaScript in one ArrayBuffer (JS thread):
// Node's buffer.constants.MAX_LENGTH, 2^32 on 64-bit hosts up to Node 21 and
// 2^53 - 1 from Node 22 (2^30 - 1 and 2^31 - 1 on 32-bit hosts). Node
// refuses a larger external ArrayBuffer and frees the data as it refuses, so
// sizes are checked against this before the data is made. Tests lower it
// with the environment variable HALRT_MAX_ARRAY_BYTES; nothing raises it.
uint64_t hrt_js_max_array_bytes(napi_env env);

// RESOURCE_EXHAUSTED for data of `byte_length` bytes, over `limit` (from
// hrt_js_max_array_bytes). Any thread.
hrt_status_t hrt_js_array_too_large(uint64_t byte_length, uint64_t limit);

// Makes a TypedArray of `dtype` holding `data` (`byte_length` bytes, at most
// hrt_js_max_array_bytes: RESOURCE_EXHAUSTED otherwise), which
// is consumed in every case: data of HRT_JS_EXTERNAL_MIN_BYTES or more
// becomes an external ArrayBuffer without a copy, released by `release` when
// collected; smaller data (and any where the runtime allows no external
// buffers) is copied into a V8-owned one and released at once. With
// `release` NULL the data is lent, not consumed: it stays the caller's, who
// must detach the ArrayBuffer before reusing it. `data` may be NULL when
// `byte_length` is 0.
bool hrt_js_typed_array_from_host(napi_env env, hrt_hal_element_type_t dtype,
                                  void* data, uint64_t byte_length,
                                  hrt_js_release_fn release,
                                  napi_value* out_array);

#endif  // HRT_NAPI_JS_SUBMIT_H_

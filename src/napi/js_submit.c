#include "napi/js_submit.h"

#include <stdlib.h>
#include <string.h>

#include "napi/js_args.h"
#include "napi/js_channel.h"
#include "napi/js_common.h"
#include "napi/js_trace_batch.h"

typedef struct hrt_js_submit_op_s {
  hrt_js_message_t message;  // first: the channel hands this back
  // Retained from submit until the completion has posted (completion thread).
  hrt_js_channel_t* channel;
  napi_deferred deferred;  // settled on the JS thread only
  const char* method;      // static
  hrt_status_t status;     // written by the completion before posting
  hrt_js_submit_result_t result;
} hrt_js_submit_op_t;

static void hrt_js_submit_op_free(hrt_js_submit_op_t* op) {
  hrt_status_free(op->status);
  free(op->result.host_data);
  free(op);
}

// The external ArrayBuffer's finalizer: `hint` is the data's release
// function.
static void hrt_js_release_external(napi_env env, void* data, void* hint) {
  (void)env;
  ((hrt_js_release_fn)hint)(data);
}

uint64_t hrt_js_max_array_bytes(napi_env env) {
  // Node's limit is no Node-API value: it follows Node's version (Node 22
  // raised it from v8::TypedArray::kMaxLength to Number.MAX_SAFE_INTEGER).
  const napi_node_version* version = NULL;
  bool raised =
      napi_get_node_version(env, &version) == napi_ok && version->major >= 22;
  uint64_t limit = sizeof(void*) == 4 ? (raised ? 0x7fffffffu : 0x3fffffffu)
                   : raised           ? 9007199254740991ull
                                      : 1ull << 32;
  const char* lowered = getenv("HALRT_MAX_ARRAY_BYTES");
  if (lowered != NULL && *lowered != '\0') {
    char* end = NULL;
    unsigned long long value = strtoull(lowered, &end, 10);
    if (*end == '\0' && value < limit) limit = value;
  }
  return limit;
}

hrt_status_t hrt_js_array_too_large(uint64_t byte_length, uint64_t limit) {
  return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                         "%llu bytes do not fit in one JavaScript ArrayBuffer "
                         "(at most %llu bytes here)",
                         (unsigned long long)byte_length,
                         (unsigned long long)limit);
}

// Before data is given away in an external ArrayBuffer. V8 counts the bytes
// of external ArrayBuffers, and every 64 MiB more of them since its last
// full collection starts another (a mark-compact of the whole heap: 0.4 ms
// of the JS thread per 10 MiB traced, besides its marking threads). Young
// ArrayBuffers that already died are freed far more cheaply by a scavenge,
// which V8 runs only when it allocates an ArrayBuffer's memory itself and
// the young ones hold twice the largest semi-space or more
// (Heap::AllocateExternalBackingStore). Allocating a 1-byte ArrayBuffer
// gives it that chance before each large one: arrays a callback dropped
// then go with a scavenge, long before the full collection would come.
// Failure only loses the chance.
static void hrt_js_let_young_buffers_go(napi_env env) {
  void* data = NULL;
  napi_value buffer = NULL;
  (void)napi_create_arraybuffer(env, 1, &data, &buffer);
}

bool hrt_js_typed_array_from_host(napi_env env, hrt_hal_element_type_t dtype,
                                  void* data, uint64_t byte_length,
                                  hrt_js_release_fn release,
                                  napi_value* out_array) {
  uint64_t limit = hrt_js_max_array_bytes(env);
  if (byte_length > limit) {
    if (release != NULL) release(data);
    hrt_js_throw_status(env, hrt_js_array_too_large(byte_length, limit));
    return false;
  }
  napi_value array_buffer = NULL;
  napi_status status = napi_no_external_buffers_allowed;
  // Large data moves into an external ArrayBuffer without a copy; small data
  // is cheaper to copy into one V8 owns (no finalizer to run at GC), and so
  // is everything where the runtime allows no external buffers. Node frees
  // the data of an external ArrayBuffer it refuses only for its size, checked
  // above: any other refusal leaves `data` to us.
  if (byte_length >= HRT_JS_EXTERNAL_MIN_BYTES) {
    if (release != NULL) hrt_js_let_young_buffers_go(env);
    status = napi_create_external_arraybuffer(
        env, data, (size_t)byte_length,
        release ? hrt_js_release_external : NULL, (void*)release,
        &array_buffer);
    if (status == napi_ok) data = NULL;
  }
  if (status == napi_no_external_buffers_allowed) {
    void* copy = NULL;
    status =
        napi_create_arraybuffer(env, (size_t)byte_length, &copy, &array_buffer);
    if (status == napi_ok && byte_length) {
      memcpy(copy, data, (size_t)byte_length);
    }
  }
  if (data != NULL && release != NULL) release(data);
  if (status != napi_ok) {
    hrt_js_throw_napi_failure(env, status, "creating an ArrayBuffer");
    return false;
  }
  size_t element_size = hrt_hal_element_type_size(dtype);
  HRT_NAPI_CALL_BOOL(
      env, napi_create_typedarray(env, hrt_js_dtype_array_type(dtype),
                                  (size_t)(byte_length / element_size),
                                  array_buffer, 0, out_array));
  return true;
}

// JS thread (env != NULL), or teardown (env == NULL: free only).
static void hrt_js_submit_deliver(napi_env env, hrt_js_channel_t* channel,
                                  hrt_js_message_t* message) {
  hrt_js_submit_op_t* op = (hrt_js_submit_op_t*)message;
  if (env == NULL) {
    // The env is gone: its promise with it. Only native memory remains.
    hrt_js_submit_op_free(op);
    return;
  }
  if (op->status != HRT_OK) {
    hrt_status_t status = op->status;
    op->status = HRT_OK;
    hrt_js_reject_status(env, op->deferred,
                         hrt_status_annotate(status, "%s", op->method));
  } else {
    napi_value value = NULL;
    bool ok = true;
    if (op->result.host_data != NULL) {
      void* data = op->result.host_data;
      op->result.host_data = NULL;
      ok = hrt_js_typed_array_from_host(env, op->result.dtype, data,
                                        op->result.byte_length, free, &value);
    } else {
      ok = napi_get_undefined(env, &value) == napi_ok;
    }
    if (ok) {
      napi_resolve_deferred(env, op->deferred, value);
    } else {
      napi_reject_deferred(env, op->deferred, hrt_js_take_pending(env));
    }
  }
  hrt_js_channel_end_work(env, channel);
  hrt_js_submit_op_free(op);
}

// Device completion thread. Never calls N-API.
static void hrt_js_submit_complete(void* user_data, hrt_status_t status) {
  hrt_js_submit_op_t* op = (hrt_js_submit_op_t*)user_data;
  op->status = status;
  hrt_js_channel_t* channel = op->channel;
  op->channel = NULL;
  // Once posted, `op` belongs to the JS thread and may already be gone.
  if (!hrt_js_channel_post(channel, &op->message)) {
    hrt_js_submit_op_free(op);
  }
  hrt_js_channel_release(channel);
}

bool hrt_js_submit(napi_env env, const char* method, hrt_hal_device_t* device,
                   hrt_hal_command_buffer_t* command_buffer,
                   hrt_js_submit_result_t result, napi_value* out_promise) {
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) {
    free(result.host_data);
    return false;
  }
  hrt_js_submit_op_t* op = calloc(1, sizeof(*op));
  if (op == NULL) {
    free(result.host_data);
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "%s: out of host memory", method);
  }
  op->message.deliver = hrt_js_submit_deliver;
  op->message.settles_only = true;
  op->method = method;
  op->result = result;
  napi_value promise = NULL;
  napi_status napi_result = napi_create_promise(env, &op->deferred, &promise);
  if (napi_result != napi_ok) {
    hrt_js_submit_op_free(op);
    hrt_js_throw_napi_failure(env, napi_result, "napi_create_promise");
    return false;
  }

  op->channel = state->channel;
  hrt_js_channel_retain(op->channel);
  hrt_hal_submission_t submission;
  memset(&submission, 0, sizeof(submission));
  submission.command_buffer = command_buffer;
  submission.completion.fn = hrt_js_submit_complete;
  submission.completion.user_data = op;
  hrt_status_t status = hrt_hal_device_queue_submit(device, &submission);
  if (status != HRT_OK) {
    // Not accepted: the completion will never run, so `op` is still ours.
    hrt_js_channel_release(op->channel);
    op->channel = NULL;
    hrt_js_reject_status(env, op->deferred,
                         hrt_status_annotate(status, "%s", method));
    hrt_js_submit_op_free(op);
  } else {
    hrt_js_channel_begin_work(env, state->channel);
  }
  *out_promise = promise;
  return true;
}

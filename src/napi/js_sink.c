#include "napi/js_sink.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "hal/buffer_view.h"
#include "modules/tensor_stats.h"
#include "napi/js_common.h"
#include "napi/js_submit.h"

// What the callback threw, kept until its invocation settles. The value sits
// in a holder object under "value": a callback may throw any value (a string,
// undefined), and napi_create_reference takes only objects before Node-API
// 10. `holder` is NULL when even the holder could not be made; the
// invocation is still rejected then, with `undefined` as the cause.
typedef struct hrt_js_sink_error_s {
  struct hrt_js_sink_error_s* next;
  uint64_t sequence;
  napi_ref holder;
} hrt_js_sink_error_t;

typedef struct hrt_js_sink_target_s {
  napi_ref ref;  // JS thread only; weak while idle, strong while in flight
  hrt_js_sink_mode_t mode;
} hrt_js_sink_target_t;

struct hrt_js_sink_s {
  atomic_int_fast32_t ref_count;
  hrt_js_channel_t* channel;  // the sink's reference; finished by release
  // Immutable after create.
  bool wants_data;   // some target takes tensor copies
  bool wants_stats;  // some target takes statistics
  uint32_t target_count;
  hrt_js_sink_target_t targets[HRT_JS_SINK_MAX_TARGETS];
  // JS thread only.
  uint32_t in_flight;  // invocations begun and not ended
  hrt_js_sink_error_t* errors;
  // Backpressure; guarded by mutex.
  hrt_mutex_t mutex;
  hrt_cond_t drained;
  uint64_t bytes_in_flight;
  uint64_t max_bytes;
  uint64_t dropped;
  hrt_js_sink_policy_t policy;
  bool closed;  // the channel finalized: nothing will drain any more
};

typedef struct hrt_js_trace_tensor_s {
  char* name;
  hrt_hal_element_type_t element_type;
  uint32_t rank;
  int64_t shape[HRT_HAL_MAX_RANK];
  void* data;  // TENSORS: malloc'd copy, handed to an external ArrayBuffer
  uint64_t byte_length;
  hrt_tensor_stats_t stats;  // STATS
} hrt_js_trace_tensor_t;

// One trace on its way to JavaScript. Owns every allocation in it.
typedef struct hrt_js_trace_message_s {
  hrt_js_message_t message;  // first: the channel hands this back
  hrt_js_sink_t* sink;       // retained
  uint64_t bytes;            // counted against the sink's bound
  char* key;
  char* function;
  uint64_t sequence;
  uint32_t op_index;
  int64_t time_ns;
  uint64_t dropped;  // the sink's drop count when this trace was taken
  uint32_t count;
  hrt_js_trace_tensor_t tensors[];
} hrt_js_trace_message_t;

// One dispatch timing on its way to JavaScript (target.timing).
typedef struct hrt_js_timing_message_s {
  hrt_js_message_t message;     // first: the channel hands this back
  hrt_js_sink_t* sink;          // retained
  hrt_dispatch_timing_t event;  // strings owned
} hrt_js_timing_message_t;

// What a timing message counts against the bound: small, but counted, so
// timings too stay bounded when JavaScript is slow.
#define HRT_JS_TIMING_BYTES 128

void hrt_js_sink_retain(hrt_js_sink_t* sink) {
  atomic_fetch_add_explicit(&sink->ref_count, 1, memory_order_relaxed);
}

void hrt_js_sink_release(hrt_js_sink_t* sink) {
  if (atomic_fetch_sub_explicit(&sink->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hrt_cond_deinit(&sink->drained);
  hrt_mutex_deinit(&sink->mutex);
  free(sink);
}

hrt_js_channel_t* hrt_js_sink_channel(const hrt_js_sink_t* sink) {
  return sink->channel;
}

static void hrt_js_trace_message_free(hrt_js_trace_message_t* message) {
  for (uint32_t i = 0; i < message->count; ++i) {
    free(message->tensors[i].name);
    free(message->tensors[i].data);
  }
  free(message->key);
  free(message->function);
  hrt_js_sink_release(message->sink);
  free(message);
}

// Returns `bytes` to the bound and wakes a waiting producer.
static void hrt_js_sink_credit(hrt_js_sink_t* sink, uint64_t bytes) {
  hrt_mutex_lock(&sink->mutex);
  sink->bytes_in_flight -= bytes;
  hrt_cond_broadcast(&sink->drained);
  hrt_mutex_unlock(&sink->mutex);
}

static char* hrt_js_strdup(const char* text) {
  size_t length = strlen(text) + 1;
  char* copy = malloc(length);
  if (copy) memcpy(copy, text, length);
  return copy;
}

//===----------------------------------------------------------------------===//
// JS thread: delivering a trace
//===----------------------------------------------------------------------===//

// {name, dtype, shape, data}; takes the tensor's data.
static bool hrt_js_tensor_object(napi_env env, hrt_js_trace_tensor_t* tensor,
                                 napi_value* out) {
  napi_value object = NULL, shape = NULL, data = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &object));
  if (!hrt_js_set_string(env, object, "name", tensor->name) ||
      !hrt_js_set_string(env, object, "dtype",
                         hrt_hal_element_type_name(tensor->element_type))) {
    return false;
  }
  if (!hrt_js_shape_array(env, tensor->rank, tensor->shape, &shape)) {
    return false;
  }
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, "shape", shape));
  void* bytes = tensor->data;
  tensor->data = NULL;
  if (!hrt_js_typed_array_from_host(env, tensor->element_type, bytes,
                                    tensor->byte_length, &data)) {
    return false;
  }
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, "data", data));
  *out = object;
  return true;
}

// {name, dtype, shape, count, min, max, mean, nanCount, infCount}
static bool hrt_js_stats_object(napi_env env,
                                const hrt_js_trace_tensor_t* tensor,
                                napi_value* out) {
  napi_value object = NULL, shape = NULL;
  const hrt_tensor_stats_t* stats = &tensor->stats;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &object));
  if (!hrt_js_set_string(env, object, "name", tensor->name) ||
      !hrt_js_set_string(env, object, "dtype",
                         hrt_hal_element_type_name(tensor->element_type)) ||
      !hrt_js_shape_array(env, tensor->rank, tensor->shape, &shape) ||
      !hrt_js_set_number(env, object, "count", (double)stats->count) ||
      !hrt_js_set_number(env, object, "min", stats->min) ||
      !hrt_js_set_number(env, object, "max", stats->max) ||
      !hrt_js_set_number(env, object, "mean", stats->mean) ||
      !hrt_js_set_number(env, object, "nanCount", (double)stats->nan_count) ||
      !hrt_js_set_number(env, object, "infCount", (double)stats->inf_count)) {
    return false;
  }
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, object, "shape", shape));
  *out = object;
  return true;
}

// The function to call for `method` and its receiver: the target itself for
// "trace" when it is a function, else target[method] when that is a
// function. False (nothing to call) otherwise.
static bool hrt_js_sink_method(napi_env env, const hrt_js_sink_target_t* entry,
                               const char* method, napi_value* out_fn,
                               napi_value* out_this) {
  napi_value target = NULL, fn = NULL;
  napi_valuetype type = napi_undefined;
  if (entry->ref == NULL ||
      napi_get_reference_value(env, entry->ref, &target) != napi_ok ||
      target == NULL || napi_typeof(env, target, &type) != napi_ok) {
    return false;
  }
  if (type == napi_function) {
    if (strcmp(method, "trace") != 0) return false;
    napi_get_undefined(env, out_this);
    *out_fn = target;
    return true;
  }
  if (napi_get_named_property(env, target, method, &fn) != napi_ok ||
      napi_typeof(env, fn, &type) != napi_ok || type != napi_function) {
    return false;
  }
  *out_fn = fn;
  *out_this = target;
  return true;
}

// Keeps the first value thrown for an invocation, for
// hrt_js_sink_take_error. A callback may throw any value, so it sits in a
// holder object (napi_create_reference takes only objects before Node-API
// 10); with no holder the invocation is still rejected, with `undefined`.
static void hrt_js_sink_keep_error(napi_env env, hrt_js_sink_t* sink,
                                   uint64_t sequence, napi_value error) {
  for (hrt_js_sink_error_t* entry = sink->errors; entry; entry = entry->next) {
    if (entry->sequence == sequence) return;
  }
  hrt_js_sink_error_t* entry = calloc(1, sizeof(*entry));
  if (entry == NULL) return;
  napi_value holder = NULL;
  if (napi_create_object(env, &holder) != napi_ok ||
      napi_set_named_property(env, holder, "value", error) != napi_ok ||
      napi_create_reference(env, holder, 1, &entry->holder) != napi_ok) {
    entry->holder = NULL;
  }
  entry->sequence = sequence;
  entry->next = sink->errors;
  sink->errors = entry;
}

// Makes the arguments of a call for targets of `mode`. False with a pending
// exception on failure.
typedef bool (*hrt_js_sink_args_fn)(napi_env env, void* data,
                                    hrt_js_sink_mode_t mode, napi_value* argv);

// Keeps the pending exception as the error of invocation `sequence`.
static void hrt_js_sink_keep_pending(napi_env env, hrt_js_sink_t* sink,
                                     uint64_t sequence) {
  napi_value error = NULL;
  if (napi_get_and_clear_last_exception(env, &error) == napi_ok &&
      error != NULL) {
    hrt_js_sink_keep_error(env, sink, sequence, error);
  }
}

// Calls `method` on every target that has it, in one handle scope, with the
// arguments `build` makes for the target's mode (made once per mode and
// shared). A throw is kept as the error of invocation `sequence`; the other
// targets still run.
static void hrt_js_sink_call(napi_env env, hrt_js_sink_t* sink,
                             const char* method, size_t argc,
                             hrt_js_sink_args_fn build, void* data,
                             uint64_t sequence) {
  napi_handle_scope scope = NULL;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value argv[2][3];
  bool built[2] = {false, false};
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    const hrt_js_sink_target_t* target = &sink->targets[i];
    napi_value fn = NULL, receiver = NULL, ignored = NULL;
    if (!hrt_js_sink_method(env, target, method, &fn, &receiver)) continue;
    if (!built[target->mode]) {
      if (!build(env, data, target->mode, argv[target->mode])) {
        hrt_js_sink_keep_pending(env, sink, sequence);
        continue;
      }
      built[target->mode] = true;
    }
    if (napi_call_function(env, receiver, fn, argc, argv[target->mode],
                           &ignored) != napi_ok) {
      hrt_js_sink_keep_pending(env, sink, sequence);
    }
  }
  napi_close_handle_scope(env, scope);
}

// (key, tensors or stats, info) for a trace message.
static bool hrt_js_trace_args(napi_env env, void* data, hrt_js_sink_mode_t mode,
                              napi_value* argv) {
  hrt_js_trace_message_t* message = data;
  napi_value list = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_string_utf8(env, message->key,
                                                  NAPI_AUTO_LENGTH, &argv[0]));
  HRT_NAPI_CALL_BOOL(env,
                     napi_create_array_with_length(env, message->count, &list));
  for (uint32_t i = 0; i < message->count; ++i) {
    napi_value item = NULL;
    bool made = mode == HRT_JS_SINK_STATS
                    ? hrt_js_stats_object(env, &message->tensors[i], &item)
                    : hrt_js_tensor_object(env, &message->tensors[i], &item);
    if (!made) return false;
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, list, i, item));
  }
  argv[1] = list;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &argv[2]));
  return hrt_js_set_number(env, argv[2], "sequence",
                           (double)message->sequence) &&
         hrt_js_set_string(env, argv[2], "function", message->function) &&
         hrt_js_set_number(env, argv[2], "op", message->op_index) &&
         hrt_js_set_number(env, argv[2], "timeNs", (double)message->time_ns) &&
         hrt_js_set_number(env, argv[2], "dropped", (double)message->dropped);
}

static void hrt_js_sink_deliver(napi_env env, hrt_js_channel_t* channel,
                                hrt_js_message_t* base) {
  (void)channel;
  hrt_js_trace_message_t* message = (hrt_js_trace_message_t*)base;
  hrt_js_sink_credit(message->sink, message->bytes);
  if (env != NULL) {
    hrt_js_sink_call(env, message->sink, "trace", 3, hrt_js_trace_args, message,
                     message->sequence);
  }
  hrt_js_trace_message_free(message);
}

// {sequence, function, op, kernel, device, startNs, durationNs}
static bool hrt_js_timing_args(napi_env env, void* data,
                               hrt_js_sink_mode_t mode, napi_value* argv) {
  (void)mode;
  const hrt_dispatch_timing_t* event = data;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &argv[0]));
  return hrt_js_set_number(env, argv[0], "sequence", (double)event->sequence) &&
         hrt_js_set_string(env, argv[0], "function", event->function) &&
         hrt_js_set_number(env, argv[0], "op", event->op_index) &&
         hrt_js_set_string(env, argv[0], "kernel", event->kernel) &&
         hrt_js_set_string(env, argv[0], "device", event->device) &&
         hrt_js_set_number(env, argv[0], "startNs", (double)event->start_ns) &&
         hrt_js_set_number(env, argv[0], "durationNs",
                           (double)event->duration_ns);
}

static void hrt_js_timing_message_free(hrt_js_timing_message_t* message) {
  free((char*)message->event.function);
  free((char*)message->event.kernel);
  free((char*)message->event.device);
  hrt_js_sink_release(message->sink);
  free(message);
}

static void hrt_js_timing_deliver(napi_env env, hrt_js_channel_t* channel,
                                  hrt_js_message_t* base) {
  (void)channel;
  hrt_js_timing_message_t* message = (hrt_js_timing_message_t*)base;
  hrt_js_sink_credit(message->sink, HRT_JS_TIMING_BYTES);
  if (env != NULL) {
    hrt_js_sink_call(env, message->sink, "timing", 1, hrt_js_timing_args,
                     &message->event, message->event.sequence);
  }
  hrt_js_timing_message_free(message);
}

typedef struct hrt_js_invocation_event_s {
  uint64_t sequence;
  const char* function;
  int64_t start_ns;
  int64_t duration_ns;
  bool ok;
} hrt_js_invocation_event_t;

static bool hrt_js_invocation_args(napi_env env, void* data,
                                   hrt_js_sink_mode_t mode, napi_value* argv) {
  (void)mode;
  const hrt_js_invocation_event_t* event = data;
  napi_value ok = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_object(env, &argv[0]));
  HRT_NAPI_CALL_BOOL(env, napi_get_boolean(env, event->ok, &ok));
  HRT_NAPI_CALL_BOOL(env, napi_set_named_property(env, argv[0], "ok", ok));
  return hrt_js_set_number(env, argv[0], "sequence", (double)event->sequence) &&
         hrt_js_set_string(env, argv[0], "function", event->function) &&
         hrt_js_set_number(env, argv[0], "startNs", (double)event->start_ns) &&
         hrt_js_set_number(env, argv[0], "durationNs",
                           (double)event->duration_ns);
}

void hrt_js_sink_report_invocation(napi_env env, hrt_js_sink_t* sink,
                                   uint64_t sequence, const char* function,
                                   int64_t start_ns, int64_t duration_ns,
                                   bool ok) {
  hrt_js_invocation_event_t event = {sequence, function, start_ns, duration_ns,
                                     ok};
  hrt_js_sink_call(env, sink, "invocation", 1, hrt_js_invocation_args, &event,
                   sequence);
}

//===----------------------------------------------------------------------===//
// Completion thread: the native sink
//===----------------------------------------------------------------------===//

// Waits for room for `bytes` (WAIT) or decides to drop (DROP). Returns false
// to drop; on true the bytes are counted in flight.
static bool hrt_js_sink_admit(hrt_js_sink_t* sink, uint64_t bytes,
                              uint64_t* out_dropped) {
  hrt_mutex_lock(&sink->mutex);
  bool admitted = true;
  while (!sink->closed && sink->bytes_in_flight != 0 &&
         sink->bytes_in_flight + bytes > sink->max_bytes) {
    if (sink->policy == HRT_JS_SINK_DROP) {
      admitted = false;
      break;
    }
    hrt_cond_wait(&sink->drained, &sink->mutex);
  }
  if (admitted) {
    sink->bytes_in_flight += bytes;
  } else {
    ++sink->dropped;
  }
  *out_dropped = sink->dropped;
  hrt_mutex_unlock(&sink->mutex);
  return admitted;
}

static hrt_status_t hrt_js_sink_trace(void* user_data, const char* key,
                                      const hrt_trace_info_t* info,
                                      uint32_t count,
                                      const hrt_trace_tensor_t* tensors) {
  hrt_js_sink_t* sink = user_data;
  bool copy_data = sink->wants_data;
  uint64_t bytes = sizeof(hrt_js_trace_message_t);
  for (uint32_t i = 0; i < count; ++i) {
    bytes += sizeof(hrt_js_trace_tensor_t) +
             (copy_data ? tensors[i].byte_length : 0);
  }
  uint64_t dropped = 0;
  if (!hrt_js_sink_admit(sink, bytes, &dropped)) return HRT_OK;
  hrt_js_trace_message_t* message =
      calloc(1, sizeof(*message) + count * sizeof(message->tensors[0]));
  bool ok = message != NULL;
  if (ok) {
    message->message.deliver = hrt_js_sink_deliver;
    message->sink = sink;
    hrt_js_sink_retain(sink);
    message->bytes = bytes;
    message->sequence = info->sequence;
    message->op_index = info->op_index;
    message->time_ns = info->time_ns;
    message->dropped = dropped;
    message->key = hrt_js_strdup(key);
    message->function = hrt_js_strdup(info->function);
    ok = message->key && message->function;
    for (uint32_t i = 0; ok && i < count; ++i) {
      const hrt_trace_tensor_t* source = &tensors[i];
      hrt_js_trace_tensor_t* tensor = &message->tensors[i];
      message->count = i + 1;
      tensor->name = hrt_js_strdup(source->name);
      tensor->element_type = source->element_type;
      tensor->rank = source->rank;
      memcpy(tensor->shape, source->shape, source->rank * sizeof(int64_t));
      tensor->byte_length = source->byte_length;
      if (copy_data) {
        tensor->data = malloc(source->byte_length ? source->byte_length : 1);
        if (tensor->data) {
          memcpy(tensor->data, source->data, source->byte_length);
        }
      }
      if (sink->wants_stats) hrt_tensor_stats_compute(source, &tensor->stats);
      ok = tensor->name && (tensor->data || !copy_data);
    }
  }
  if (ok && hrt_js_channel_post(sink->channel, &message->message)) {
    return HRT_OK;
  }
  // Not delivered: out of memory, or the env is gone (nobody to tell).
  if (message) hrt_js_trace_message_free(message);
  hrt_js_sink_credit(sink, bytes);
  if (!ok) {
    return hrt_status_make(HRT_STATUS_RESOURCE_EXHAUSTED,
                           "out of host memory copying trace '%s'", key);
  }
  return HRT_OK;
}

static void hrt_js_sink_timing(void* user_data,
                               const hrt_dispatch_timing_t* events,
                               uint32_t count) {
  hrt_js_sink_t* sink = user_data;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t dropped = 0;
    if (!hrt_js_sink_admit(sink, HRT_JS_TIMING_BYTES, &dropped)) continue;
    hrt_js_timing_message_t* message = calloc(1, sizeof(*message));
    if (message != NULL) {
      message->message.deliver = hrt_js_timing_deliver;
      message->sink = sink;
      hrt_js_sink_retain(sink);
      message->event = events[i];
      message->event.function = hrt_js_strdup(events[i].function);
      message->event.kernel = hrt_js_strdup(events[i].kernel);
      message->event.device = hrt_js_strdup(events[i].device);
      if (message->event.function && message->event.kernel &&
          message->event.device &&
          hrt_js_channel_post(sink->channel, &message->message)) {
        continue;
      }
      hrt_js_timing_message_free(message);
    }
    // Out of memory or no env: a timing is not worth failing work over.
    hrt_js_sink_credit(sink, HRT_JS_TIMING_BYTES);
  }
}

// The HAL module is gone: no more traces. Queued ones still drain.
static void hrt_js_sink_native_release(void* user_data) {
  hrt_js_sink_t* sink = user_data;
  hrt_js_channel_finish(sink->channel);
  hrt_js_sink_release(sink);
}

// JS thread, once: the channel is done (drained, or env teardown).
static void hrt_js_sink_finalize(napi_env env, void* data) {
  hrt_js_sink_t* sink = data;
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    if (sink->targets[i].ref != NULL) {
      napi_delete_reference(env, sink->targets[i].ref);
    }
    sink->targets[i].ref = NULL;
  }
  while (sink->errors) {
    hrt_js_sink_error_t* entry = sink->errors;
    sink->errors = entry->next;
    if (entry->holder != NULL) napi_delete_reference(env, entry->holder);
    free(entry);
  }
  hrt_mutex_lock(&sink->mutex);
  sink->closed = true;
  hrt_cond_broadcast(&sink->drained);
  hrt_mutex_unlock(&sink->mutex);
  hrt_js_sink_release(sink);
}

//===----------------------------------------------------------------------===//
// JS thread: lifetime
//===----------------------------------------------------------------------===//

// Undoes the parts of a create that failed midway (JS thread).
static void hrt_js_sink_destroy_early(napi_env env, hrt_js_sink_t* sink) {
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    napi_delete_reference(env, sink->targets[i].ref);
  }
  hrt_cond_deinit(&sink->drained);
  hrt_mutex_deinit(&sink->mutex);
  free(sink);
}

bool hrt_js_sink_create(napi_env env, const napi_value* targets,
                        const hrt_js_sink_mode_t* modes, uint32_t count,
                        uint64_t max_bytes, hrt_js_sink_policy_t policy,
                        hrt_js_sink_t** out_sink,
                        hrt_debug_sink_t* out_native) {
  if (count < 1 || count > HRT_JS_SINK_MAX_TARGETS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "a debug sink takes 1 to %d JavaScript targets (got "
                        "%u)",
                        HRT_JS_SINK_MAX_TARGETS, count);
  }
  hrt_js_sink_t* sink = calloc(1, sizeof(*sink));
  if (sink == NULL) {
    return hrt_js_throw(env, HRT_STATUS_RESOURCE_EXHAUSTED,
                        "out of host memory creating a debug sink");
  }
  // The caller's, the HAL module's (until release) and the channel's.
  atomic_init(&sink->ref_count, 3);
  hrt_mutex_init(&sink->mutex);
  hrt_cond_init(&sink->drained);
  sink->max_bytes = max_bytes;
  sink->policy = policy;
  for (uint32_t i = 0; i < count; ++i) {
    if (napi_create_reference(env, targets[i], 0, &sink->targets[i].ref) !=
        napi_ok) {
      hrt_js_throw_napi_failure(env, napi_generic_failure,
                                "napi_create_reference");
      hrt_js_sink_destroy_early(env, sink);
      return false;
    }
    sink->targets[i].mode = modes[i];
    sink->target_count = i + 1;
    sink->wants_data |= modes[i] == HRT_JS_SINK_TENSORS;
    sink->wants_stats |= modes[i] == HRT_JS_SINK_STATS;
  }
  if (hrt_js_channel_create(env, "halrt.debugSink", hrt_js_sink_finalize, sink,
                            &sink->channel) != napi_ok) {
    hrt_js_sink_destroy_early(env, sink);
    return false;
  }
  *out_native = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_js_sink_trace, sink},
      .dispatch_timing = {hrt_js_sink_timing, sink},
      .release = {hrt_js_sink_native_release, sink},
  };
  *out_sink = sink;
  return true;
}

// Makes every target's reference strong (or weak again).
static void hrt_js_sink_hold_targets(napi_env env, hrt_js_sink_t* sink,
                                     bool strong) {
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    if (sink->targets[i].ref == NULL) continue;
    if (strong) {
      napi_reference_ref(env, sink->targets[i].ref, NULL);
    } else {
      napi_reference_unref(env, sink->targets[i].ref, NULL);
    }
  }
}

void hrt_js_sink_begin_invocation(napi_env env, hrt_js_sink_t* sink) {
  if (sink->in_flight++ == 0) hrt_js_sink_hold_targets(env, sink, true);
  hrt_js_channel_begin_work(env, sink->channel);
}

void hrt_js_sink_end_invocation(napi_env env, hrt_js_sink_t* sink) {
  if (sink->in_flight == 0) return;
  if (--sink->in_flight == 0) hrt_js_sink_hold_targets(env, sink, false);
  hrt_js_channel_end_work(env, sink->channel);
}

napi_value hrt_js_sink_take_error(napi_env env, hrt_js_sink_t* sink,
                                  uint64_t sequence) {
  for (hrt_js_sink_error_t** link = &sink->errors; *link;
       link = &(*link)->next) {
    hrt_js_sink_error_t* entry = *link;
    if (entry->sequence != sequence) continue;
    napi_value holder = NULL, error = NULL;
    if (entry->holder != NULL) {
      if (napi_get_reference_value(env, entry->holder, &holder) == napi_ok &&
          holder != NULL) {
        napi_get_named_property(env, holder, "value", &error);
      }
      napi_delete_reference(env, entry->holder);
    }
    if (error == NULL) napi_get_undefined(env, &error);
    *link = entry->next;
    free(entry);
    return error;
  }
  return NULL;
}

#include "napi/js_sink.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/threads.h"
#include "hal/element_type.h"
#include "napi/js_args.h"
#include "napi/js_common.h"
#include "napi/js_submit.h"
#include "napi/js_trace_batch.h"

// How it works. A native event is appended to the sink's batch
// (js_trace_batch.h) under the sink's mutex; when the batch goes from empty
// to non-empty one message is posted to the channel. On the JS thread that
// message takes the whole batch (the producer goes on with a spare) and
// hands it to lib/trace_batch.js, which makes the objects and calls the
// targets: one wake-up per batch, not per event.
//
// Holding back: a batch is posted when it gets its first event if the last
// post was HRT_JS_SINK_HOLD_NS or more ago; otherwise it is held, and
// posted by the first append after that time, by the producer's flush (an
// invocation's end, debug_sink.h), by an event that may not be held
// (may_hold: one before a host call, a recorded trace), before the producer
// waits for room, or when the HAL module lets go. Nothing is held while the
// bytes in flight reach half of `max_bytes`: under a tight bound the next
// trace would be dropped or wait for JavaScript. A burst of traces then
// wakes the JS thread about once per HRT_JS_SINK_HOLD_NS instead of once
// per trace (each wake-up takes a core from the device's threads).
//
// Time slices: a batch is delivered within the channel's budget per turn of
// the event loop (js_channel.h); when records are left, its message defers
// itself and the rest is delivered in later turns, the message staying
// first in the channel, so that nothing posted after it (the completions of
// the invocations it traces, the next batch's message) is delivered before
// it. Two messages alternate: the next batch's may be posted while the last
// one's is still delivering. The records buffer and the arrays made over
// it are kept (napi_refs) between slices, and the batch's bytes count
// against the bound until its last slice. The array of a record's large
// data is made only as the record comes (externals(k)), so that nothing of
// the batch holds data already delivered.
//
// Backpressure: the bytes of events appended but not yet delivered (their
// batch's callbacks have not all returned) are bounded by `max_bytes`. When
// a trace would exceed it, WAIT blocks the completion thread until
// JavaScript catches up (nothing is lost; a trace larger than the bound
// waits for an empty queue), and DROP drops the trace and counts it
// (info.dropped; timings are counted apart). A closed sink (env gone) never
// blocks. The bound is at most what one JavaScript ArrayBuffer holds
// (hrt_js_max_array_bytes): a batch's records reach JavaScript in one.
//
// The napi_ref to the targets: the JS-visible edges (Context -> modules ->
// HalModule.debugSink) keep the callbacks alive while the ref is weak. The
// channel's finalizer (JS thread, after the queue has drained, or at env
// teardown) deletes it, so the napi_ref is released because the native
// sink was released, without N-API ever being called off the JS thread.

// What the callback threw, kept until its invocation settles. The value sits
// in a holder object under "value": a callback may throw any value (a string,
// undefined), and napi_create_reference takes only objects before Node-API
// 10. `holder` is NULL when even the holder could not be made; the
// invocation is still rejected then, with `undefined` as the cause.
typedef struct hrt_js_sink_error_s {
  struct hrt_js_sink_error_s* next;
  uint64_t invocation;  // the invocation's id (hrt_trace_info_t)
  napi_ref holder;
} hrt_js_sink_error_t;

// How long after a post the next batch is held back (see above).
#define HRT_JS_SINK_HOLD_NS (1000 * 1000)

// A records buffer up to this size is kept for the next batch.
#define HRT_JS_RECORDS_KEEP_BYTES (1u << 20)

// The batch being delivered, in slices over turns of the event loop (JS
// thread only; see hrt_js_sink_deliver).
typedef struct hrt_js_sink_delivery_s {
  bool active;  // `batch` was taken from the producer and is not done
  hrt_js_trace_batch_t batch;
  // lib/trace_batch.js's arguments for the batch, kept between slices (NULL
  // until a slice leaves records for the next), and the slot to resume at.
  napi_ref args;
  double next;
  // Borrowed data: lent[i] holds the ArrayBuffer over external i until it is
  // taken back (NULL then, or if never lent). Externals before `lent_end`
  // are taken back. takeBack works only while `in_slice`.
  napi_ref* lent;
  size_t lent_end;
  bool in_slice;
} hrt_js_sink_delivery_t;

// A batch's message to the channel. Two alternate: the next batch's may be
// queued while the last one's is still delivering its batch in slices.
typedef struct hrt_js_sink_message_s {
  hrt_js_message_t base;
  hrt_js_sink_t* sink;
} hrt_js_sink_message_t;

struct hrt_js_sink_s {
  atomic_int_fast32_t ref_count;
  hrt_js_channel_t* channel;  // the sink's reference; finished by release
  // Immutable after create.
  hrt_js_trace_contents_t contents;  // what the targets' modes need
  hrt_block_pool_t* pool;            // large trace data; the sink's reference
  uint32_t stats_mask;               // bit i: target i is in STATS mode
  bool borrowed;                     // see hrt_js_sink_options_t
  uint64_t max_array_bytes;          // hrt_js_max_array_bytes at create
  uint32_t target_count;
  // JS thread only; weak while idle, strong while invocations are in flight.
  napi_ref targets[HRT_JS_SINK_MAX_TARGETS];
  // JS thread only.
  uint32_t in_flight;  // invocations begun and not ended
  hrt_js_sink_error_t* errors;
  // The ArrayBuffer batches are copied into for lib/trace_batch.js to read
  // (V8-owned, kept for the next batch while it is small enough).
  napi_ref records_ref;
  void* records_data;
  size_t records_capacity;
  // Borrowed data: lib/trace_batch.js's lend and takeBack (made on first
  // use).
  napi_ref external_ref;
  napi_ref take_back_ref;
  hrt_js_sink_delivery_t delivery;
  // Guarded by mutex: the batch being appended to, the empty spare it is
  // swapped with when the JS thread takes it, whether its message is queued
  // on the channel (then the sink holds a reference for it) and which of
  // the two is posted next, and the bound.
  hrt_mutex_t mutex;
  hrt_cond_t drained;
  hrt_js_trace_batch_t batch;
  hrt_js_trace_batch_t spare;
  hrt_js_sink_message_t messages[2];
  uint32_t next_message;
  bool posted;
  int64_t last_post_ns;  // when `posted` was last set
  uint64_t bytes_in_flight;
  uint64_t max_bytes;
  hrt_js_sink_dropped_t dropped;
  hrt_js_sink_policy_t policy;
  bool closed;  // the channel finalized: nothing will drain any more
};

void hrt_js_sink_retain(hrt_js_sink_t* sink) {
  atomic_fetch_add_explicit(&sink->ref_count, 1, memory_order_relaxed);
}

void hrt_js_sink_release(hrt_js_sink_t* sink) {
  if (atomic_fetch_sub_explicit(&sink->ref_count, 1, memory_order_acq_rel) !=
      1) {
    return;
  }
  hrt_js_trace_batch_deinit(&sink->batch);
  hrt_js_trace_batch_deinit(&sink->spare);
  hrt_js_trace_batch_deinit(&sink->delivery.batch);
  hrt_block_pool_release(sink->pool);
  hrt_cond_deinit(&sink->drained);
  hrt_mutex_deinit(&sink->mutex);
  free(sink);
}

hrt_js_channel_t* hrt_js_sink_channel(const hrt_js_sink_t* sink) {
  return sink->channel;
}

// Under the mutex: returns `bytes` to the bound and wakes a waiting
// producer.
static void hrt_js_sink_credit_locked(hrt_js_sink_t* sink, uint64_t bytes) {
  sink->bytes_in_flight -= bytes;
  hrt_cond_broadcast(&sink->drained);
}

//===----------------------------------------------------------------------===//
// JS thread: delivering a trace
//===----------------------------------------------------------------------===//

// Keeps the first value thrown for an invocation, for
// hrt_js_sink_take_error. A callback may throw any value, so it sits in a
// holder object (napi_create_reference takes only objects before Node-API
// 10); with no holder the invocation is still rejected, with `undefined`.
static void hrt_js_sink_keep_error(napi_env env, hrt_js_sink_t* sink,
                                   uint64_t invocation, napi_value error) {
  for (hrt_js_sink_error_t* entry = sink->errors; entry; entry = entry->next) {
    if (entry->invocation == invocation) return;
  }
  hrt_js_sink_error_t* entry = calloc(1, sizeof(*entry));
  if (entry == NULL) return;
  napi_value holder = NULL;
  if (napi_create_object(env, &holder) != napi_ok ||
      napi_set_named_property(env, holder, "value", error) != napi_ok ||
      napi_create_reference(env, holder, 1, &entry->holder) != napi_ok) {
    entry->holder = NULL;
  }
  entry->invocation = invocation;
  entry->next = sink->errors;
  sink->errors = entry;
}

// Keeps the pending exception, if any, as the error of invocation
// `invocation` (its id).
static void hrt_js_sink_keep_pending(napi_env env, hrt_js_sink_t* sink,
                                     uint64_t invocation) {
  bool pending = false;
  napi_value error = NULL;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
      napi_get_and_clear_last_exception(env, &error) == napi_ok &&
      error != NULL) {
    hrt_js_sink_keep_error(env, sink, invocation, error);
  }
}

// The target's value, or NULL once it has been collected.
static napi_value hrt_js_sink_target(napi_env env, napi_ref ref) {
  napi_value target = NULL;
  if (ref == NULL || napi_get_reference_value(env, ref, &target) != napi_ok) {
    return NULL;
  }
  return target;
}

// The records buffer of at least `size` bytes: the kept one, or a new one
// (kept in its place when small enough).
static bool hrt_js_sink_records_buffer(napi_env env, hrt_js_sink_t* sink,
                                       size_t size, napi_value* out_buffer,
                                       void** out_data) {
  if (size <= sink->records_capacity) {
    HRT_NAPI_CALL_BOOL(
        env, napi_get_reference_value(env, sink->records_ref, out_buffer));
    *out_data = sink->records_data;
    return true;
  }
  if (size > sink->max_array_bytes) {
    // Not reached while the bound is at most that (see create).
    hrt_js_throw_status(
        env,
        hrt_status_annotate(hrt_js_array_too_large(size, sink->max_array_bytes),
                            "a batch of trace records"));
    return false;
  }
  size_t capacity = 64 * 1024;
  while (capacity < size) capacity *= 2;
  HRT_NAPI_CALL_BOOL(
      env, napi_create_arraybuffer(env, capacity, out_data, out_buffer));
  if (capacity > HRT_JS_RECORDS_KEEP_BYTES) return true;
  napi_ref ref = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_create_reference(env, *out_buffer, 1, &ref));
  if (sink->records_ref != NULL) napi_delete_reference(env, sink->records_ref);
  sink->records_ref = ref;
  sink->records_data = *out_data;
  sink->records_capacity = capacity;
  return true;
}

// External `index` of `batch` as a TypedArray. Given away, its block returns
// to the pool when V8 collects the ArrayBuffer; with borrowed data it is
// lent, staying the batch's, and `*out_lent` receives a reference to the
// ArrayBuffer for hrt_js_sink_take_back.
static bool hrt_js_sink_external(napi_env env, const hrt_js_sink_t* sink,
                                 hrt_js_trace_batch_t* batch, size_t index,
                                 napi_value* out_array, napi_ref* out_lent) {
  const hrt_js_trace_external_t* external = &batch->externals[index];
  if (!sink->borrowed) {
    return hrt_js_typed_array_from_host(
        env, external->element_type,
        hrt_js_trace_batch_take_external(batch, index), external->byte_length,
        hrt_block_pool_give_back, out_array);
  }
  void* bytes = (void*)hrt_js_trace_batch_external_bytes(batch, index);
  if (!hrt_js_typed_array_from_host(env, external->element_type, bytes,
                                    external->byte_length, NULL, out_array)) {
    return false;
  }
  napi_value buffer = NULL;
  napi_status status = napi_get_typedarray_info(env, *out_array, NULL, NULL,
                                                NULL, &buffer, NULL);
  if (status == napi_ok) {
    status = napi_create_reference(env, buffer, 1, out_lent);
  }
  if (status != napi_ok) {
    // JavaScript holds the block and it cannot be detached: never reuse it.
    hrt_js_trace_batch_take_external(batch, index);
    hrt_js_throw_napi_failure(env, status, "napi_create_reference");
    return false;
  }
  return true;
}

// Borrowed data: detaches what was lent of the externals from `lent_end` up
// to `to` and forgets it, ending a device's loan of it at once (its writers
// may wait) and leaving its block to the batch's reset. Works with an
// exception pending (a callback that terminated its worker). A buffer found
// detached already, or that cannot be detached, may still be read: its
// block is left, never reused, and its loan abandoned (hal/device.h).
static void hrt_js_sink_take_back(napi_env env,
                                  hrt_js_sink_delivery_t* delivery, size_t to) {
  if (delivery->lent == NULL) return;
  for (size_t i = delivery->lent_end; i < to; ++i) {
    napi_ref ref = delivery->lent[i];
    napi_value buffer = NULL;
    bool detached = true;
    if (ref == NULL) continue;  // never lent (or the delivery failed first)
    delivery->lent[i] = NULL;
    if (napi_get_reference_value(env, ref, &buffer) != napi_ok ||
        buffer == NULL ||
        napi_is_detached_arraybuffer(env, buffer, &detached) != napi_ok ||
        detached || napi_detach_arraybuffer(env, buffer) != napi_ok) {
      hrt_js_trace_batch_take_external(&delivery->batch, i);  // left to leak
    } else {
      hrt_js_trace_batch_end_loan(&delivery->batch, i);
    }
    napi_delete_reference(env, ref);
  }
  if (to > delivery->lent_end) delivery->lent_end = to;
}

// takeBack(to) of lib/trace_batch.js, called when the callbacks of a record
// have returned: takes back the data lent for it and the records before it,
// so that a callback sees the arrays of earlier records detached. Does
// nothing outside a slice of a delivery.
static napi_value hrt_js_sink_take_back_js(napi_env env,
                                           napi_callback_info info) {
  napi_value argv[1] = {NULL};
  size_t argc = 1;
  void* data = NULL;
  uint32_t to = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, &data) != napi_ok) {
    return NULL;
  }
  hrt_js_sink_delivery_t* delivery = &((hrt_js_sink_t*)data)->delivery;
  if (delivery->in_slice && argc == 1 &&
      napi_get_value_uint32(env, argv[0], &to) == napi_ok) {
    size_t count = delivery->batch.external_count;
    hrt_js_sink_take_back(env, delivery, to < count ? to : count);
  }
  return NULL;
}

// externals(k) of lib/trace_batch.js, called once, just before the record
// holding external k is delivered: returns its array (undefined outside a
// slice, or for an external handed out or taken back already). Made only
// now, so that nothing of the batch holds it: owned data given away is
// JavaScript's alone, and V8 may collect it young once the callbacks drop
// it (a batch delivered over many turns would otherwise keep its arrays
// until a full collection). Borrowed data is lent: a device's loan of the
// bytes is opened only now, so that its writers of them wait for this
// record's callbacks alone.
static napi_value hrt_js_sink_external_js(napi_env env,
                                          napi_callback_info info) {
  napi_value argv[1] = {NULL};
  size_t argc = 1;
  void* data = NULL;
  uint32_t index = 0;
  napi_value array = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, &data) != napi_ok) {
    return NULL;
  }
  hrt_js_sink_t* sink = data;
  hrt_js_sink_delivery_t* delivery = &sink->delivery;
  hrt_js_trace_batch_t* batch = &delivery->batch;
  if (!delivery->in_slice || argc != 1 ||
      napi_get_value_uint32(env, argv[0], &index) != napi_ok ||
      index >= batch->external_count) {
    return NULL;
  }
  if (sink->borrowed ? delivery->lent == NULL || index < delivery->lent_end ||
                           delivery->lent[index] != NULL
                     : batch->externals[index].data == NULL) {
    return NULL;
  }
  return hrt_js_sink_external(env, sink, batch, index, &array,
                              sink->borrowed ? &delivery->lent[index] : NULL)
             ? array
             : NULL;
}

// A function of the sink for lib/trace_batch.js, made on first use and kept
// in `*ref`.
static bool hrt_js_sink_function(napi_env env, hrt_js_sink_t* sink,
                                 napi_ref* ref, const char* name,
                                 napi_callback callback,
                                 napi_value* out_function) {
  if (*ref != NULL) {
    HRT_NAPI_CALL_BOOL(env, napi_get_reference_value(env, *ref, out_function));
    return true;
  }
  HRT_NAPI_CALL_BOOL(env, napi_create_function(env, name, NAPI_AUTO_LENGTH,
                                               callback, sink, out_function));
  HRT_NAPI_CALL_BOOL(env, napi_create_reference(env, *out_function, 1, ref));
  return true;
}

// lib/trace_batch.js's arguments for `batch`: (targets, statsMask, records,
// strings, views, externals, takeBack or undefined). `externals` is the
// sink's function that hands out each external as its record comes; with
// borrowed data (`lent` given) it keeps references to their ArrayBuffers in
// `lent`, for takeBack.
static bool hrt_js_sink_batch_args(napi_env env, hrt_js_sink_t* sink,
                                   hrt_js_trace_batch_t* batch,
                                   napi_value* argv, napi_ref* lent) {
  napi_value buffer = NULL;
  void* data = NULL;
  if (!hrt_js_sink_records_buffer(env, sink, batch->size, &buffer, &data)) {
    return false;
  }
  memcpy(data, batch->records, batch->size);
  HRT_NAPI_CALL_BOOL(
      env, napi_create_array_with_length(env, sink->target_count, &argv[0]));
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    napi_value target = hrt_js_sink_target(env, sink->targets[i]);
    if (target == NULL) HRT_NAPI_CALL_BOOL(env, napi_get_null(env, &target));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, argv[0], i, target));
  }
  HRT_NAPI_CALL_BOOL(env, napi_create_uint32(env, sink->stats_mask, &argv[1]));
  HRT_NAPI_CALL_BOOL(
      env, napi_create_typedarray(env, napi_float64_array, batch->size / 8,
                                  buffer, 0, &argv[2]));
  HRT_NAPI_CALL_BOOL(
      env, napi_create_array_with_length(env, batch->string_count, &argv[3]));
  for (size_t i = 0; i < batch->string_count; ++i) {
    napi_value text = NULL;
    HRT_NAPI_CALL_BOOL(
        env, napi_create_string_utf8(env, hrt_js_trace_batch_string(batch, i),
                                     NAPI_AUTO_LENGTH, &text));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, argv[3], (uint32_t)i, text));
  }
  HRT_NAPI_CALL_BOOL(env, napi_create_array(env, &argv[4]));
  for (uint32_t type = 0; type < HRT_HAL_ELEMENT_TYPE_COUNT_; ++type) {
    if (!(batch->dtype_mask & (1u << type))) continue;
    napi_value view = NULL;
    HRT_NAPI_CALL_BOOL(env, napi_create_typedarray(
                                env, hrt_js_dtype_array_type(type),
                                batch->size / hrt_hal_element_type_size(type),
                                buffer, 0, &view));
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, argv[4], type, view));
  }
  if (!hrt_js_sink_function(env, sink, &sink->external_ref, "externals",
                            hrt_js_sink_external_js, &argv[5])) {
    return false;
  }
  if (lent != NULL) {
    return hrt_js_sink_function(env, sink, &sink->take_back_ref, "takeBack",
                                hrt_js_sink_take_back_js, &argv[6]);
  }
  HRT_NAPI_CALL_BOOL(env, napi_get_undefined(env, &argv[6]));
  return true;
}

#define HRT_JS_SINK_BATCH_ARGS 7

// Keeps a batch's arguments for the slices to come.
static bool hrt_js_sink_keep_args(napi_env env,
                                  hrt_js_sink_delivery_t* delivery,
                                  const napi_value* argv) {
  napi_value args = NULL;
  HRT_NAPI_CALL_BOOL(
      env, napi_create_array_with_length(env, HRT_JS_SINK_BATCH_ARGS, &args));
  for (uint32_t i = 0; i < HRT_JS_SINK_BATCH_ARGS; ++i) {
    HRT_NAPI_CALL_BOOL(env, napi_set_element(env, args, i, argv[i]));
  }
  HRT_NAPI_CALL_BOOL(env, napi_create_reference(env, args, 1, &delivery->args));
  return true;
}

// The arguments hrt_js_sink_keep_args kept.
static bool hrt_js_sink_kept_args(napi_env env,
                                  const hrt_js_sink_delivery_t* delivery,
                                  napi_value* argv) {
  napi_value args = NULL;
  HRT_NAPI_CALL_BOOL(env, napi_get_reference_value(env, delivery->args, &args));
  for (uint32_t i = 0; i < HRT_JS_SINK_BATCH_ARGS; ++i) {
    HRT_NAPI_CALL_BOOL(env, napi_get_element(env, args, i, &argv[i]));
  }
  return true;
}

// Drops what the delivery holds in JavaScript: the kept arguments, and the
// references to lent data, taken back first unless the env is going away
// (then no JavaScript runs again, and V8 may refuse to detach).
static void hrt_js_sink_delivery_end(napi_env env,
                                     hrt_js_sink_delivery_t* delivery,
                                     bool take_back) {
  if (take_back) {
    hrt_js_sink_take_back(env, delivery, delivery->batch.external_count);
  }
  for (size_t i = 0;
       delivery->lent != NULL && i < delivery->batch.external_count; ++i) {
    if (delivery->lent[i] != NULL) {
      napi_delete_reference(env, delivery->lent[i]);
    }
  }
  free(delivery->lent);
  delivery->lent = NULL;
  if (delivery->args != NULL) napi_delete_reference(env, delivery->args);
  delivery->args = NULL;
}

// One slice of the delivery: lib/trace_batch.js calls the targets for the
// records from `next` on until the turn's budget is spent (at least one
// record), and what they threw is kept. Returns whether the batch is done:
// every record delivered, or the batch could not be handed over (out of
// memory, a terminating worker), when every invocation it has records of
// fails with the pending exception.
static bool hrt_js_sink_deliver_slice(napi_env env, hrt_js_sink_t* sink) {
  hrt_js_sink_delivery_t* delivery = &sink->delivery;
  hrt_js_trace_batch_t* batch = &delivery->batch;
  napi_handle_scope scope = NULL;
  if (napi_open_handle_scope(env, &scope) != napi_ok) {
    hrt_js_sink_delivery_end(env, delivery, true);  // the batch is dropped
    return true;
  }
  hrt_js_env_t* state = hrt_js_env_get(env);
  napi_value decoder = NULL, global = NULL, result = NULL, argv[9] = {NULL};
  bool first = delivery->args == NULL;
  if (first && sink->borrowed && batch->external_count > 0) {
    delivery->lent = calloc(batch->external_count, sizeof(*delivery->lent));
  }
  double slots = (double)(batch->size / 8);
  bool ok =
      state != NULL &&
      (delivery->lent != NULL || !sink->borrowed ||
       batch->external_count == 0) &&
      napi_get_reference_value(env, state->trace_decoder, &decoder) ==
          napi_ok &&
      decoder != NULL && napi_get_global(env, &global) == napi_ok &&
      (first ? hrt_js_sink_batch_args(env, sink, batch, argv, delivery->lent)
             : hrt_js_sink_kept_args(env, delivery, argv)) &&
      napi_create_double(env, delivery->next, &argv[7]) == napi_ok;
  // The budget left once the arguments are made: making the arrays of large
  // data may have run a garbage collection (js_submit.c).
  const int64_t left = hrt_js_channel_time_left_ns(env);
  ok = ok && napi_create_double(
                 env, left == INT64_MAX ? INFINITY : (double)left / 1e6,
                 &argv[8]) == napi_ok;
  if (ok) {
    delivery->in_slice = true;
    ok = napi_call_function(env, global, decoder, 9, argv, &result) == napi_ok;
    delivery->in_slice = false;
  }
  // [next, invocation, thrown, invocation, thrown, ...] (invocation ids)
  bool is_array = false;
  uint32_t length = 0;
  napi_value value = NULL;
  double next = slots;
  ok = ok && napi_is_array(env, result, &is_array) == napi_ok && is_array &&
       napi_get_array_length(env, result, &length) == napi_ok && length > 0 &&
       napi_get_element(env, result, 0, &value) == napi_ok &&
       napi_get_value_double(env, value, &next) == napi_ok;
  for (uint32_t i = 1; ok && i + 1 < length; i += 2) {
    napi_value invocation = NULL, thrown = NULL;
    int64_t number = 0;
    if (napi_get_element(env, result, i, &invocation) == napi_ok &&
        napi_get_value_int64(env, invocation, &number) == napi_ok &&
        napi_get_element(env, result, i + 1, &thrown) == napi_ok) {
      hrt_js_sink_keep_error(env, sink, (uint64_t)number, thrown);
    }
  }
  bool done = !ok || !(next < slots);
  if (!done && first && !hrt_js_sink_keep_args(env, delivery, argv)) {
    ok = false;
    done = true;
  }
  if (!ok) {
    napi_value error = hrt_js_take_pending(env);
    for (size_t i = 0; i < batch->invocation_count; ++i) {
      hrt_js_sink_keep_error(env, sink, batch->invocations[i], error);
    }
  }
  delivery->next = next;
  if (done) hrt_js_sink_delivery_end(env, delivery, true);
  napi_close_handle_scope(env, scope);
  return done;
}

// JS thread (env != NULL), or teardown (env == NULL: free only). A message
// takes the batch appended so far (the producer goes on with the spare) and
// delivers it in slices: while records are left when the turn's budget is
// spent, the message defers itself and the channel delivers it again, before
// anything posted after it, in the next turn. Done, it returns the batch's
// bytes to the bound.
//
// Order: a trace is appended to the batch whose message was posted before
// its append, or is posted (at the latest by the flush before its
// invocation's completion) before anything its producer posts after it
// through the channel, and is taken with that batch. Whatever is posted
// after the trace (its invocation's completion, the next batch's message)
// queues behind that message, which stays first until its whole batch is
// delivered. So traces arrive in append order, each before the completions
// posted after it.
static void hrt_js_sink_deliver(napi_env env, hrt_js_channel_t* channel,
                                hrt_js_message_t* message) {
  hrt_js_sink_t* sink = ((hrt_js_sink_message_t*)message)->sink;
  hrt_js_sink_delivery_t* delivery = &sink->delivery;
  if (!delivery->active) {
    hrt_mutex_lock(&sink->mutex);
    delivery->batch = sink->batch;
    sink->batch = sink->spare;
    memset(&sink->spare, 0, sizeof(sink->spare));
    sink->posted = false;
    hrt_mutex_unlock(&sink->mutex);
    delivery->active = true;
    delivery->next = 0;
    delivery->lent_end = 0;
  }
  if (env != NULL && !hrt_js_trace_batch_empty(&delivery->batch) &&
      !hrt_js_sink_deliver_slice(env, sink)) {
    hrt_js_channel_defer(channel, message);
    return;
  }
  // With env == NULL the references are gone (hrt_js_sink_finalize).
  free(delivery->lent);
  delivery->lent = NULL;
  delivery->active = false;
  hrt_js_trace_batch_t batch = delivery->batch;
  memset(&delivery->batch, 0, sizeof(delivery->batch));
  uint64_t credit = batch.credit;
  hrt_js_trace_batch_reset(&batch);
  hrt_mutex_lock(&sink->mutex);
  // The spare is empty: only the delivering batch is ever swapped out, so
  // no other delivery took it meanwhile. Its buffers serve the next swap.
  sink->spare = batch;
  hrt_js_sink_credit_locked(sink, credit);
  hrt_mutex_unlock(&sink->mutex);
  hrt_js_sink_release(sink);  // the posted message's reference
}

hrt_js_sink_dropped_t hrt_js_sink_dropped(hrt_js_sink_t* sink) {
  hrt_mutex_lock(&sink->mutex);
  hrt_js_sink_dropped_t dropped = sink->dropped;
  hrt_mutex_unlock(&sink->mutex);
  return dropped;
}

// Calls target.invocation(event) on every object target that has that
// method, in one handle scope; a throw is kept as the invocation's error.
void hrt_js_sink_report_invocation(napi_env env, hrt_js_sink_t* sink,
                                   uint64_t invocation, uint64_t sequence,
                                   const char* function, int64_t start_ns,
                                   int64_t duration_ns, bool ok) {
  napi_handle_scope scope = NULL;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value event = NULL;
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    napi_value target = hrt_js_sink_target(env, sink->targets[i]);
    napi_value method = NULL, ok_value = NULL, ignored = NULL;
    napi_valuetype type = napi_undefined;
    if (target == NULL || napi_typeof(env, target, &type) != napi_ok ||
        type != napi_object ||
        napi_get_named_property(env, target, "invocation", &method) !=
            napi_ok ||
        napi_typeof(env, method, &type) != napi_ok || type != napi_function) {
      hrt_js_sink_keep_pending(env, sink, invocation);  // a throwing getter
      continue;
    }
    // {sequence, function, startNs, durationNs, ok}, shared by the targets.
    if (event == NULL &&
        (napi_create_object(env, &event) != napi_ok ||
         !hrt_js_set_number(env, event, "sequence", (double)sequence) ||
         !hrt_js_set_string(env, event, "function", function) ||
         !hrt_js_set_number(env, event, "startNs", (double)start_ns) ||
         !hrt_js_set_number(env, event, "durationNs", (double)duration_ns) ||
         napi_get_boolean(env, ok, &ok_value) != napi_ok ||
         napi_set_named_property(env, event, "ok", ok_value) != napi_ok)) {
      event = NULL;
      hrt_js_sink_keep_pending(env, sink, invocation);
      break;
    }
    if (napi_call_function(env, target, method, 1, &event, &ignored) !=
        napi_ok) {
      hrt_js_sink_keep_pending(env, sink, invocation);
    }
  }
  napi_close_handle_scope(env, scope);
}

//===----------------------------------------------------------------------===//
// Completion thread: the native sink
//===----------------------------------------------------------------------===//

static void hrt_js_sink_schedule_locked(hrt_js_sink_t* sink, bool now);

// Under the mutex: waits for room for `bytes` (WAIT, or `never_drop`) or
// decides to drop (DROP). Returns false to drop, counted in `*dropped`; on
// true the bytes are counted in flight.
static bool hrt_js_sink_admit_locked(hrt_js_sink_t* sink, uint64_t bytes,
                                     bool never_drop, uint64_t* dropped) {
  bool admitted = true;
  while (!sink->closed && sink->bytes_in_flight != 0 &&
         sink->bytes_in_flight + bytes > sink->max_bytes) {
    // A held batch must reach JavaScript for room to be made.
    hrt_js_sink_schedule_locked(sink, true);
    if (sink->policy == HRT_JS_SINK_DROP && !never_drop) {
      admitted = false;
      break;
    }
    hrt_cond_wait(&sink->drained, &sink->mutex);
  }
  if (admitted) {
    sink->bytes_in_flight += bytes;
  } else {
    ++*dropped;
  }
  return admitted;
}

// Under the mutex: posts the batch's message unless it is posted already or
// the batch is empty, or, unless `now`, held back (see the top). When the
// channel takes nothing any more (the env is gone), nobody will take the
// batch: it is emptied and its bytes returned.
static void hrt_js_sink_schedule_locked(hrt_js_sink_t* sink, bool now) {
  if (sink->posted || hrt_js_trace_batch_empty(&sink->batch)) return;
  const int64_t time_ns = hrt_time_now_ns();
  // A batch that takes half the bound or more is not held: the next trace
  // might not fit beside it, and would be dropped (DROP) or wait for a
  // round trip to JavaScript (WAIT) that posting now saves.
  if (!now && time_ns - sink->last_post_ns < HRT_JS_SINK_HOLD_NS &&
      sink->bytes_in_flight < sink->max_bytes / 2) {
    return;
  }
  hrt_js_sink_retain(sink);  // the posted message's
  if (hrt_js_channel_post(sink->channel,
                          &sink->messages[sink->next_message].base)) {
    sink->posted = true;
    sink->last_post_ns = time_ns;
    sink->next_message ^= 1;
    return;
  }
  // Not the last reference: the caller runs on behalf of the HAL module.
  hrt_js_sink_release(sink);
  hrt_js_sink_credit_locked(sink, sink->batch.credit);
  hrt_js_trace_batch_reset(&sink->batch);
}

// What the sink's targets get of a trace: a summary or health trace
// carries its summaries to every target.
static hrt_js_trace_contents_t hrt_js_sink_contents(
    const hrt_js_sink_t* sink, const hrt_trace_info_t* info) {
  return info->mode == HRT_HAL_TRACE_FULL
             ? sink->contents
             : (hrt_js_trace_contents_t){.summary = true};
}

// Data JavaScript cannot hold fails the invocation, before any copy (and
// before a flight recorder keeps it).
static hrt_status_t hrt_js_sink_check(void* user_data, const char* key,
                                      const hrt_trace_info_t* info,
                                      uint32_t count,
                                      const hrt_trace_tensor_t* tensors) {
  const hrt_js_sink_t* sink = user_data;
  const bool data = hrt_js_sink_contents(sink, info).data;
  for (uint32_t i = 0; data && i < count; ++i) {
    if (tensors[i].byte_length > sink->max_array_bytes) {
      return hrt_status_annotate(
          hrt_js_array_too_large(tensors[i].byte_length, sink->max_array_bytes),
          "trace '%s': tensor '%s'", key, tensors[i].name);
    }
  }
  return HRT_OK;
}

static hrt_status_t hrt_js_sink_trace(void* user_data, const char* key,
                                      const hrt_trace_info_t* info,
                                      uint32_t count,
                                      const hrt_trace_tensor_t* tensors) {
  hrt_js_sink_t* sink = user_data;
  const hrt_js_trace_contents_t contents = hrt_js_sink_contents(sink, info);
  HRT_RETURN_IF_ERROR(hrt_js_sink_check(sink, key, info, count, tensors));
  uint64_t bytes = hrt_js_trace_bytes(key, info, count, tensors, contents);
  hrt_js_trace_extras_t* extras = NULL;
  bool ok = true;
  hrt_mutex_lock(&sink->mutex);
  // A flight recorder's delivery is what the user waited for: its traces
  // wait for room whatever the policy.
  if (!hrt_js_sink_admit_locked(sink, bytes, info->recorded,
                                &sink->dropped.traces)) {
    hrt_mutex_unlock(&sink->mutex);
    return HRT_OK;
  }
  if (hrt_js_trace_needs_extras(count, tensors, contents)) {
    // Large copies and statistics are made without the lock, so that the
    // JS thread never waits for them.
    hrt_mutex_unlock(&sink->mutex);
    ok = hrt_js_trace_extras_make(sink->pool, sink->borrowed, info, count,
                                  tensors, contents, &extras);
    hrt_mutex_lock(&sink->mutex);
  }
  ok = ok && hrt_js_trace_batch_add_trace(&sink->batch, key, info,
                                          sink->dropped.traces, count, tensors,
                                          contents, extras, bytes);
  if (ok) {
    hrt_js_sink_schedule_locked(sink, !info->may_hold);
  } else {
    hrt_js_sink_credit_locked(sink, bytes);
  }
  hrt_mutex_unlock(&sink->mutex);
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
    uint64_t bytes = hrt_js_timing_bytes(&events[i]);
    hrt_mutex_lock(&sink->mutex);
    if (!hrt_js_sink_admit_locked(sink, bytes, false, &sink->dropped.timings)) {
      hrt_mutex_unlock(&sink->mutex);
      continue;
    }
    if (hrt_js_trace_batch_add_timing(&sink->batch, &events[i], bytes)) {
      hrt_js_sink_schedule_locked(sink, !events[i].may_hold);
    } else {
      // Out of memory: a timing is not worth failing work over.
      hrt_js_sink_credit_locked(sink, bytes);
    }
    hrt_mutex_unlock(&sink->mutex);
  }
}

static void hrt_js_sink_flush(void* user_data) {
  hrt_js_sink_t* sink = user_data;
  hrt_mutex_lock(&sink->mutex);
  hrt_js_sink_schedule_locked(sink, true);
  hrt_mutex_unlock(&sink->mutex);
}

// The HAL module is gone: no more traces. Queued (and held) ones still
// drain.
static void hrt_js_sink_native_release(void* user_data) {
  hrt_js_sink_t* sink = user_data;
  hrt_js_sink_flush(sink);
  hrt_js_channel_finish(sink->channel);
  hrt_js_sink_release(sink);
}

// JS thread, once: the channel is done (drained, or env teardown).
static void hrt_js_sink_finalize(napi_env env, void* data) {
  hrt_js_sink_t* sink = data;
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    if (sink->targets[i] != NULL) {
      napi_delete_reference(env, sink->targets[i]);
    }
    sink->targets[i] = NULL;
  }
  if (sink->records_ref != NULL) napi_delete_reference(env, sink->records_ref);
  sink->records_ref = NULL;
  if (sink->external_ref != NULL) {
    napi_delete_reference(env, sink->external_ref);
  }
  sink->external_ref = NULL;
  if (sink->take_back_ref != NULL) {
    napi_delete_reference(env, sink->take_back_ref);
  }
  sink->take_back_ref = NULL;
  // Only at env teardown can a delivery still be under way here.
  hrt_js_sink_delivery_end(env, &sink->delivery, false);
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
    napi_delete_reference(env, sink->targets[i]);
  }
  hrt_block_pool_release(sink->pool);
  hrt_cond_deinit(&sink->drained);
  hrt_mutex_deinit(&sink->mutex);
  free(sink);
}

bool hrt_js_sink_create(napi_env env, const napi_value* targets,
                        const hrt_js_sink_mode_t* modes, uint32_t count,
                        const hrt_js_sink_options_t* options,
                        hrt_js_sink_t** out_sink,
                        hrt_debug_sink_t* out_native) {
  if (count < 1 || count > HRT_JS_SINK_MAX_TARGETS) {
    return hrt_js_throw(env, HRT_STATUS_INVALID_ARGUMENT,
                        "a debug sink takes 1 to %d JavaScript targets (got "
                        "%u)",
                        HRT_JS_SINK_MAX_TARGETS, count);
  }
  hrt_js_env_t* state = hrt_js_env_get(env);
  if (state == NULL) return false;
  if (state->trace_decoder == NULL) {
    return hrt_js_throw(env, HRT_STATUS_FAILED_PRECONDITION,
                        "a JavaScript debug sink needs halrt's JavaScript "
                        "side: load the package with require('halrt'), not "
                        "its addon file");
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
  // A batch's records reach JavaScript in one ArrayBuffer, and a batch never
  // holds more than the bytes in flight (or one trace): so no more in flight
  // than such a buffer can hold.
  sink->max_array_bytes = hrt_js_max_array_bytes(env);
  sink->max_bytes = options->max_bytes < sink->max_array_bytes
                        ? options->max_bytes
                        : sink->max_array_bytes;
  sink->policy = options->policy;
  sink->borrowed = options->borrowed;
  for (int i = 0; i < 2; ++i) {
    sink->messages[i] =
        (hrt_js_sink_message_t){{.deliver = hrt_js_sink_deliver}, sink};
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (napi_create_reference(env, targets[i], 0, &sink->targets[i]) !=
        napi_ok) {
      hrt_js_throw_napi_failure(env, napi_generic_failure,
                                "napi_create_reference");
      hrt_js_sink_destroy_early(env, sink);
      return false;
    }
    sink->target_count = i + 1;
    sink->contents.data |= modes[i] == HRT_JS_SINK_TENSORS;
    sink->contents.stats |= modes[i] == HRT_JS_SINK_STATS;
    if (modes[i] == HRT_JS_SINK_STATS) sink->stats_mask |= 1u << i;
  }
  // Blocks given back while no trace holds them stay cached up to the
  // sink's bound: what a WAIT sink could have in flight anyway.
  hrt_status_t status = hrt_block_pool_create(
      sink->max_bytes > SIZE_MAX ? SIZE_MAX : (size_t)sink->max_bytes,
      &sink->pool);
  if (status != HRT_OK) {
    hrt_js_throw_status(env, status);
    hrt_js_sink_destroy_early(env, sink);
    return false;
  }
  if (hrt_js_channel_create(env, "halrt.debugSink", hrt_js_sink_finalize, sink,
                            &sink->channel) != napi_ok) {
    hrt_js_sink_destroy_early(env, sink);
    return false;
  }
  *out_native = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_js_sink_trace, sink},
      .trace_check = {hrt_js_sink_check, sink},
      .dispatch_timing = {hrt_js_sink_timing, sink},
      .flush = {hrt_js_sink_flush, sink},
      .release = {hrt_js_sink_native_release, sink},
  };
  *out_sink = sink;
  return true;
}

// Makes every target's reference strong (or weak again).
static void hrt_js_sink_hold_targets(napi_env env, hrt_js_sink_t* sink,
                                     bool strong) {
  for (uint32_t i = 0; i < sink->target_count; ++i) {
    if (sink->targets[i] == NULL) continue;
    if (strong) {
      napi_reference_ref(env, sink->targets[i], NULL);
    } else {
      napi_reference_unref(env, sink->targets[i], NULL);
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
                                  uint64_t invocation) {
  for (hrt_js_sink_error_t** link = &sink->errors; *link;
       link = &(*link)->next) {
    hrt_js_sink_error_t* entry = *link;
    if (entry->invocation != invocation) continue;
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

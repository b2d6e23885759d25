#include "modules/sinks/recorder_sink.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/list.h"
#include "base/live.h"
#include "base/threads.h"

// One kept trace: this header, the tensors, their shapes, their data (each
// 16-byte aligned) and the strings, in one allocation of `bytes` bytes: at
// least hrt_recorder_trace_bytes of the trace, at most a quarter more (a
// reused allocation). What the ring and liveObjects count is `bytes`.
typedef struct hrt_recorded_trace_s {
  struct hrt_recorded_trace_s* next;
  uint64_t bytes;
  const char* key;
  hrt_trace_info_t info;
  uint32_t count;
  hrt_trace_tensor_t tensors[];
} hrt_recorded_trace_t;

struct hrt_recorder_sink_s {
  hrt_debug_sink_t sink;  // the wrapped sink, owned
  hrt_recorder_limits_t limits;
  // Held while the wrapped sink runs, so that it gets one call at a time
  // whichever thread delivers (the completion thread, or the thread a dump
  // of a lost device runs on) or passes timings through.
  hrt_mutex_t sink_mutex;
  hrt_mutex_t mutex;
  // Guarded by mutex: the ring, oldest first.
  hrt_recorded_trace_t* head;
  hrt_recorded_trace_t* tail;
  uint32_t count;
  uint64_t bytes;
  uint64_t skipped;
};

static uint64_t hrt_align16(uint64_t size) { return (size + 15) & ~15ull; }

// Layout: where the shapes, the data and the strings start.
typedef struct hrt_recorded_layout_s {
  uint64_t shapes;
  uint64_t data;
  uint64_t strings;
  uint64_t size;
} hrt_recorded_layout_t;

// The bytes a tensor's copy keeps: its summary for a summary or health
// trace (whose data is NULL), else its data.
static uint64_t hrt_recorded_payload(const hrt_trace_tensor_t* tensor) {
  return tensor->summary ? sizeof(*tensor->summary) : tensor->byte_length;
}

static hrt_recorded_layout_t hrt_recorded_layout(
    const char* key, const hrt_trace_info_t* info, uint32_t count,
    const hrt_trace_tensor_t* tensors) {
  hrt_recorded_layout_t layout;
  uint64_t ranks = 0, data = 0, text = strlen(key) + strlen(info->function) + 2;
  for (uint32_t i = 0; i < count; ++i) {
    ranks += tensors[i].rank;
    data += hrt_align16(hrt_recorded_payload(&tensors[i]));
    text += strlen(tensors[i].name) + 1;
  }
  layout.shapes = hrt_align16(sizeof(hrt_recorded_trace_t) +
                              count * sizeof(hrt_trace_tensor_t));
  layout.data = hrt_align16(layout.shapes + ranks * sizeof(int64_t));
  layout.strings = layout.data + data;
  layout.size = layout.strings + text;
  return layout;
}

uint64_t hrt_recorder_trace_bytes(const char* key, const hrt_trace_info_t* info,
                                  uint32_t count,
                                  const hrt_trace_tensor_t* tensors) {
  return hrt_recorded_layout(key, info, count, tensors).size;
}

// Copies a string to `*cursor` and advances it.
static const char* hrt_recorded_string(char** cursor, const char* text) {
  size_t length = strlen(text) + 1;
  char* copy = *cursor;
  memcpy(copy, text, length);
  *cursor += length;
  return copy;
}

// The whole copy of a trace into `entry` (laid out by `layout`).
static void hrt_recorded_copy(hrt_recorded_trace_t* entry,
                              const hrt_recorded_layout_t* layout,
                              const char* key, const hrt_trace_info_t* info,
                              uint32_t count,
                              const hrt_trace_tensor_t* tensors) {
  uint8_t* base = (uint8_t*)entry;
  int64_t* shapes = (int64_t*)(base + layout->shapes);
  uint8_t* data = base + layout->data;
  char* text = (char*)(base + layout->strings);
  entry->next = NULL;
  entry->key = hrt_recorded_string(&text, key);
  entry->info = *info;
  entry->info.function = hrt_recorded_string(&text, info->function);
  entry->info.device = NULL;  // not kept: the trace may outlive it
  entry->count = count;
  for (uint32_t i = 0; i < count; ++i) {
    hrt_trace_tensor_t* tensor = &entry->tensors[i];
    *tensor = tensors[i];
    tensor->buffer = NULL;  // the copy below is what is kept
    tensor->name = hrt_recorded_string(&text, tensors[i].name);
    memcpy(shapes, tensors[i].shape, tensors[i].rank * sizeof(int64_t));
    tensor->shape = shapes;
    shapes += tensors[i].rank;
    uint64_t payload = hrt_recorded_payload(&tensors[i]);
    if (tensors[i].summary) {
      memcpy(data, tensors[i].summary, payload);
      tensor->summary = (const hrt_hal_tensor_summary_t*)data;
    } else {
      // The ring's memory, not the caches, takes the copy.
      hrt_trace_copy(info, data, tensors[i].data, payload, true);
      tensor->data = data;
    }
    data += hrt_align16(payload);
  }
}

static void hrt_recorded_free(hrt_recorded_trace_t* entry) {
  hrt_live_add(HRT_LIVE_RECORDED_TRACE, -1);
  hrt_live_add(HRT_LIVE_RECORDED_BYTES, -(int64_t)entry->bytes);
  free(entry);
}

// Under the mutex: takes the oldest trace out of the ring (still counted
// live: the caller frees or reuses it).
static hrt_recorded_trace_t* hrt_recorder_pop_locked(
    hrt_recorder_sink_t* recorder) {
  hrt_recorded_trace_t* entry = recorder->head;
  recorder->head = entry->next;
  if (recorder->head == NULL) recorder->tail = NULL;
  --recorder->count;
  recorder->bytes -= entry->bytes;
  return entry;
}

// Under the mutex: whether a trace of `bytes` fits beside what is held.
static bool hrt_recorder_fits_locked(const hrt_recorder_sink_t* recorder,
                                     uint64_t bytes) {
  if (recorder->limits.traces) return recorder->count < recorder->limits.traces;
  return recorder->bytes + bytes <= recorder->limits.bytes;
}

hrt_status_t hrt_recorder_sink_record(hrt_recorder_sink_t* recorder,
                                      const char* key,
                                      const hrt_trace_info_t* info,
                                      uint32_t count,
                                      const hrt_trace_tensor_t* tensors) {
  hrt_recorded_layout_t layout = hrt_recorded_layout(key, info, count, tensors);
  // The oldest traces make room; the last one out is reused when it is
  // large enough, at most a quarter larger and still fits, so a steady
  // stream of traces allocates nothing and what is held never exceeds the
  // bound.
  hrt_recorded_trace_t* spare = NULL;
  hrt_mutex_lock(&recorder->mutex);
  if (recorder->limits.bytes && layout.size > recorder->limits.bytes) {
    ++recorder->skipped;
    hrt_mutex_unlock(&recorder->mutex);
    return HRT_OK;
  }
  while (recorder->count && !hrt_recorder_fits_locked(recorder, layout.size)) {
    if (spare != NULL) hrt_recorded_free(spare);
    spare = hrt_recorder_pop_locked(recorder);
  }
  bool reuse = spare != NULL && spare->bytes >= layout.size &&
               spare->bytes - layout.size <= layout.size / 4 &&
               hrt_recorder_fits_locked(recorder, spare->bytes);
  hrt_mutex_unlock(&recorder->mutex);
  hrt_recorded_trace_t* entry = spare;
  if (!reuse) {
    if (spare != NULL) hrt_recorded_free(spare);
    hrt_status_t status =
        hrt_allocate(layout.size, "a recorded trace", (void**)&entry);
    if (status != HRT_OK) {
      return hrt_status_annotate(status, "flight recorder: trace '%s'", key);
    }
    entry->bytes = layout.size;
    hrt_live_add(HRT_LIVE_RECORDED_TRACE, 1);
    hrt_live_add(HRT_LIVE_RECORDED_BYTES, (int64_t)entry->bytes);
  }
  hrt_recorded_copy(entry, &layout, key, info, count, tensors);
  hrt_mutex_lock(&recorder->mutex);
  HRT_LIST_APPEND(recorder->head, recorder->tail, entry, next);
  ++recorder->count;
  recorder->bytes += entry->bytes;
  hrt_mutex_unlock(&recorder->mutex);
  return HRT_OK;
}

hrt_status_t hrt_recorder_sink_deliver(hrt_recorder_sink_t* recorder,
                                       uint64_t cause, uint32_t* out_count) {
  hrt_mutex_lock(&recorder->mutex);
  hrt_recorded_trace_t* entry = recorder->head;
  recorder->head = recorder->tail = NULL;
  recorder->count = 0;
  recorder->bytes = 0;
  hrt_mutex_unlock(&recorder->mutex);
  hrt_status_t result = HRT_OK;
  uint32_t delivered = 0;
  const hrt_debug_sink_t* sink = &recorder->sink;
  hrt_mutex_lock(&recorder->sink_mutex);
  while (entry != NULL) {
    hrt_recorded_trace_t* next = entry->next;
    entry->info.recorded = true;
    entry->info.may_hold = false;
    entry->info.invocation = cause;
    hrt_status_t status = sink->buffer_view_trace.fn(
        sink->buffer_view_trace.user_data, entry->key, &entry->info,
        entry->count, entry->tensors);
    if (result == HRT_OK) {
      result = status;
    } else {
      hrt_status_free(status);
    }
    hrt_recorded_free(entry);
    ++delivered;
    entry = next;
  }
  hrt_mutex_unlock(&recorder->sink_mutex);
  *out_count = delivered;
  return result;
}

hrt_recorder_held_t hrt_recorder_sink_held(hrt_recorder_sink_t* recorder) {
  hrt_mutex_lock(&recorder->mutex);
  hrt_recorder_held_t held = {recorder->count, recorder->bytes,
                              recorder->skipped};
  hrt_mutex_unlock(&recorder->mutex);
  return held;
}

// A trace the wrapped sink would refuse fails its invocation now, as its
// delivery would have, and is not kept.
static hrt_status_t hrt_recorder_sink_trace(void* user_data, const char* key,
                                            const hrt_trace_info_t* info,
                                            uint32_t count,
                                            const hrt_trace_tensor_t* tensors) {
  hrt_recorder_sink_t* recorder = user_data;
  const hrt_debug_sink_t* sink = &recorder->sink;
  if (sink->trace_check.fn) {
    HRT_RETURN_IF_ERROR(sink->trace_check.fn(sink->trace_check.user_data, key,
                                             info, count, tensors));
  }
  return hrt_recorder_sink_record(recorder, key, info, count, tensors);
}

static void hrt_recorder_sink_timing(void* user_data,
                                     const hrt_dispatch_timing_t* events,
                                     uint32_t count) {
  hrt_recorder_sink_t* recorder = user_data;
  const hrt_debug_sink_t* sink = &recorder->sink;
  if (sink->dispatch_timing.fn) {
    hrt_mutex_lock(&recorder->sink_mutex);
    sink->dispatch_timing.fn(sink->dispatch_timing.user_data, events, count);
    hrt_mutex_unlock(&recorder->sink_mutex);
  }
}

// The failed invocation's status already says what went wrong: a sink that
// fails a recorded trace changes nothing about it.
static void hrt_recorder_sink_failed(void* user_data,
                                     const hrt_invocation_failure_t* failure) {
  hrt_recorder_sink_t* recorder = user_data;
  uint32_t count = 0;
  hrt_status_free(
      hrt_recorder_sink_deliver(recorder, failure->invocation, &count));
  const hrt_debug_sink_t* sink = &recorder->sink;
  if (sink->invocation_failed.fn) {
    hrt_mutex_lock(&recorder->sink_mutex);
    sink->invocation_failed.fn(sink->invocation_failed.user_data, failure);
    hrt_mutex_unlock(&recorder->sink_mutex);
  }
}

static void hrt_recorder_sink_flush(void* user_data) {
  hrt_recorder_sink_t* recorder = user_data;
  const hrt_debug_sink_t* sink = &recorder->sink;
  if (sink->flush.fn) {
    hrt_mutex_lock(&recorder->sink_mutex);
    sink->flush.fn(sink->flush.user_data);
    hrt_mutex_unlock(&recorder->sink_mutex);
  }
}

static void hrt_recorder_sink_release(void* user_data) {
  hrt_recorder_sink_t* recorder = user_data;
  while (recorder->head != NULL) {
    hrt_recorded_free(hrt_recorder_pop_locked(recorder));
  }
  recorder->sink.release.fn(recorder->sink.release.user_data);
  hrt_mutex_deinit(&recorder->mutex);
  hrt_mutex_deinit(&recorder->sink_mutex);
  free(recorder);
}

hrt_status_t hrt_recorder_sink_create(const hrt_debug_sink_t* sink,
                                      const hrt_recorder_limits_t* limits,
                                      hrt_recorder_sink_t** out_recorder,
                                      hrt_debug_sink_t* out_sink) {
  hrt_status_t status = HRT_OK;
  if ((limits->traces != 0) == (limits->bytes != 0)) {
    status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "a flight recorder takes exactly one limit, "
                             "traces or bytes");
  } else if (limits->traces > HRT_RECORDER_MAX_TRACES) {
    status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "flight recorder traces must be 1 to %u (got %u)",
                             HRT_RECORDER_MAX_TRACES, limits->traces);
  } else if (limits->bytes > HRT_RECORDER_MAX_BYTES) {
    status = hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "flight recorder bytes must be 1 to %llu (got "
                             "%llu)",
                             (unsigned long long)HRT_RECORDER_MAX_BYTES,
                             (unsigned long long)limits->bytes);
  }
  hrt_recorder_sink_t* recorder = NULL;
  if (status == HRT_OK) {
    status = hrt_allocate_zeroed(sizeof(*recorder), "flight recorder",
                                 (void**)&recorder);
  }
  if (status != HRT_OK) return status;
  recorder->sink = *sink;
  recorder->limits = *limits;
  hrt_mutex_init(&recorder->mutex);
  hrt_mutex_init(&recorder->sink_mutex);
  *out_recorder = recorder;
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_recorder_sink_trace, recorder},
      .dispatch_timing = {hrt_recorder_sink_timing, recorder},
      .invocation_failed = {hrt_recorder_sink_failed, recorder},
      .flush = {hrt_recorder_sink_flush, recorder},
      .release = {hrt_recorder_sink_release, recorder},
  };
  return HRT_OK;
}

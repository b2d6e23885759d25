#include "modules/sinks/tee_sink.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct hrt_tee_sink_s {
  uint32_t count;
  hrt_debug_sink_t sinks[];
} hrt_tee_sink_t;

static hrt_status_t hrt_tee_sink_trace(void* user_data, const char* key,
                                       const hrt_trace_info_t* info,
                                       uint32_t count,
                                       const hrt_trace_tensor_t* tensors) {
  hrt_tee_sink_t* tee = user_data;
  hrt_status_t result = HRT_OK;
  for (uint32_t i = 0; i < tee->count; ++i) {
    const hrt_debug_sink_t* sink = &tee->sinks[i];
    hrt_status_t status = sink->buffer_view_trace.fn(
        sink->buffer_view_trace.user_data, key, info, count, tensors);
    if (result == HRT_OK) {
      result = status;
    } else {
      hrt_status_free(status);
    }
  }
  return result;
}

static hrt_status_t hrt_tee_sink_check(void* user_data, const char* key,
                                       const hrt_trace_info_t* info,
                                       uint32_t count,
                                       const hrt_trace_tensor_t* tensors) {
  hrt_tee_sink_t* tee = user_data;
  for (uint32_t i = 0; i < tee->count; ++i) {
    const hrt_debug_sink_t* sink = &tee->sinks[i];
    if (sink->trace_check.fn) {
      HRT_RETURN_IF_ERROR(sink->trace_check.fn(sink->trace_check.user_data,
                                               key, info, count, tensors));
    }
  }
  return HRT_OK;
}

static void hrt_tee_sink_timing(void* user_data,
                                const hrt_dispatch_timing_t* events,
                                uint32_t count) {
  hrt_tee_sink_t* tee = user_data;
  for (uint32_t i = 0; i < tee->count; ++i) {
    const hrt_debug_sink_t* sink = &tee->sinks[i];
    if (sink->dispatch_timing.fn) {
      sink->dispatch_timing.fn(sink->dispatch_timing.user_data, events, count);
    }
  }
}

static void hrt_tee_sink_failed(void* user_data,
                                const hrt_invocation_failure_t* failure) {
  hrt_tee_sink_t* tee = user_data;
  for (uint32_t i = 0; i < tee->count; ++i) {
    const hrt_debug_sink_t* sink = &tee->sinks[i];
    if (sink->invocation_failed.fn) {
      sink->invocation_failed.fn(sink->invocation_failed.user_data, failure);
    }
  }
}

static void hrt_tee_sink_flush(void* user_data) {
  hrt_tee_sink_t* tee = user_data;
  for (uint32_t i = 0; i < tee->count; ++i) {
    const hrt_debug_sink_t* sink = &tee->sinks[i];
    if (sink->flush.fn) sink->flush.fn(sink->flush.user_data);
  }
}

static void hrt_release_sinks(const hrt_debug_sink_t* sinks, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    sinks[i].release.fn(sinks[i].release.user_data);
  }
}

static void hrt_tee_sink_release(void* user_data) {
  hrt_tee_sink_t* tee = user_data;
  hrt_release_sinks(tee->sinks, tee->count);
  free(tee);
}

hrt_status_t hrt_tee_sink_create(const hrt_debug_sink_t* sinks, uint32_t count,
                                 hrt_debug_sink_t* out_sink) {
  if (count < 1 || count > HRT_TEE_MAX_SINKS) {
    hrt_release_sinks(sinks, count);
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "a tee takes 1 to %d sinks (got %u)",
                           HRT_TEE_MAX_SINKS, count);
  }
  hrt_tee_sink_t* tee = NULL;
  hrt_status_t status = hrt_allocate(
      sizeof(*tee) + count * sizeof(tee->sinks[0]), "tee sink", (void**)&tee);
  if (status != HRT_OK) {
    hrt_release_sinks(sinks, count);
    return status;
  }
  tee->count = count;
  memcpy(tee->sinks, sinks, count * sizeof(tee->sinks[0]));
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_tee_sink_trace, tee},
      .trace_check = {hrt_tee_sink_check, tee},
      .dispatch_timing = {hrt_tee_sink_timing, tee},
      .invocation_failed = {hrt_tee_sink_failed, tee},
      .flush = {hrt_tee_sink_flush, tee},
      .release = {hrt_tee_sink_release, tee},
  };
  return HRT_OK;
}

#include "modules/debug_sink.h"

#include "hal/device.h"

static hrt_status_t hrt_debug_sink_null_trace(
    void* user_data, const char* key, const hrt_trace_info_t* info,
    uint32_t count, const hrt_trace_tensor_t* tensors) {
  (void)user_data;
  (void)key;
  (void)info;
  (void)count;
  (void)tensors;
  return HRT_OK;
}

static void hrt_debug_sink_null_release(void* user_data) { (void)user_data; }

hrt_debug_sink_t hrt_debug_sink_null(void) {
  hrt_debug_sink_t sink = {
      .buffer_view_trace = {hrt_debug_sink_null_trace, NULL},
      .release = {hrt_debug_sink_null_release, NULL},
  };
  return sink;
}

void hrt_trace_copy(const hrt_trace_info_t* info, void* dst, const void* src,
                    uint64_t byte_length, bool streaming) {
  hrt_hal_device_copy_host(info->device, dst, src, byte_length, streaming);
}

#include "modules/sinks/stdio_sink.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/half.h"
#include "base/threads.h"
#include "hal/element_format.h"

typedef struct hrt_stdio_sink_s {
  hrt_mutex_t mutex;  // one trace's text at a time
  FILE* stream;
  uint32_t max_elements;
} hrt_stdio_sink_t;

// `value` (an element of `type` held as a double: min or max) written as
// `type` writes it; integers and bool as the double.
static void hrt_write_element(FILE* stream, hrt_hal_element_type_t type,
                              double value) {
  char text[HRT_HAL_ELEMENT_TEXT_CAPACITY];
  float f32 = (float)value;
  uint16_t half = 0;
  const void* data = &value;
  if (type == HRT_HAL_ELEMENT_TYPE_F32) {
    data = &f32;
  } else if (type == HRT_HAL_ELEMENT_TYPE_F16) {
    half = hrt_f64_to_f16(value);
    data = &half;
  } else if (type == HRT_HAL_ELEMENT_TYPE_BF16) {
    half = hrt_f64_to_bf16(value);
    data = &half;
  } else {
    type = HRT_HAL_ELEMENT_TYPE_F64;
  }
  hrt_hal_element_format(type, data, 0, text);
  fputs(text, stream);
}

static void hrt_write_f64(FILE* stream, const char* label, double value) {
  fprintf(stream, " %s=", label);
  hrt_write_element(stream, HRT_HAL_ELEMENT_TYPE_F64, value);
}

// ` summary: count=6 nan=0 +inf=0 -inf=0 zero=1 min=-1.5 max=3 mean=0.25
// l2=3.5`, or ` health: count=6 nan=0 +inf=0 -inf=0`.
static void hrt_write_summary(FILE* stream, hrt_hal_trace_mode_t mode,
                              const hrt_trace_tensor_t* tensor) {
  const hrt_hal_tensor_summary_t* s = tensor->summary;
  fprintf(stream, " %s: count=%llu nan=%llu +inf=%llu -inf=%llu",
          hrt_hal_trace_mode_name(mode), (unsigned long long)s->count,
          (unsigned long long)s->nan_count,
          (unsigned long long)s->pos_inf_count,
          (unsigned long long)s->neg_inf_count);
  if (mode != HRT_HAL_TRACE_SUMMARY) return;
  fprintf(stream, " zero=%llu min=", (unsigned long long)s->zero_count);
  hrt_write_element(stream, tensor->element_type, s->min);
  fputs(" max=", stream);
  hrt_write_element(stream, tensor->element_type, s->max);
  hrt_write_f64(stream, "mean", hrt_hal_tensor_summary_mean(s));
  hrt_write_f64(stream, "l2", hrt_hal_tensor_summary_l2(s));
}

// `name: 2x3xf32=[[1 2 3] [4 5 6]]` (hal/element_format.h has the format),
// or `name: 2x3xf32 summary: ...` in a summary or health trace.
static void hrt_write_tensor(FILE* stream, hrt_hal_trace_mode_t mode,
                             const hrt_trace_tensor_t* tensor,
                             uint32_t max_elements) {
  fprintf(stream, "%s: ", tensor->name);
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    fprintf(stream, "%lldx", (long long)tensor->shape[d]);
  }
  fputs(hrt_hal_element_type_name(tensor->element_type), stream);
  if (mode != HRT_HAL_TRACE_FULL) {
    hrt_write_summary(stream, mode, tensor);
  } else {
    fputc('=', stream);
    hrt_hal_tensor_format(tensor->element_type, tensor->rank, tensor->shape,
                          tensor->data, max_elements, stream);
  }
  fputc('\n', stream);
}

static hrt_status_t hrt_stdio_sink_trace(void* user_data, const char* key,
                                         const hrt_trace_info_t* info,
                                         uint32_t count,
                                         const hrt_trace_tensor_t* tensors) {
  hrt_stdio_sink_t* sink = user_data;
  // The text is made in memory first, so that the mutex is held for one
  // fwrite only. Out of memory, it is cut short (or lost), never an error.
  char* text = NULL;
  size_t length = 0;
  FILE* memory = open_memstream(&text, &length);
  if (memory) {
    fprintf(memory, "=== %s (%s op %u, invocation %llu%s) ===\n", key,
            info->function, info->op_index, (unsigned long long)info->sequence,
            info->recorded ? ", recorded" : "");
    for (uint32_t i = 0; i < count; ++i) {
      hrt_write_tensor(memory, info->mode, &tensors[i], sink->max_elements);
    }
    fclose(memory);
  }
  hrt_mutex_lock(&sink->mutex);
  if (text) fwrite(text, 1, length, sink->stream);
  fflush(sink->stream);
  hrt_mutex_unlock(&sink->mutex);
  free(text);
  return HRT_OK;
}

static void hrt_stdio_sink_release(void* user_data) {
  hrt_stdio_sink_t* sink = user_data;
  hrt_mutex_deinit(&sink->mutex);
  free(sink);
}

hrt_status_t hrt_stdio_sink_create(FILE* stream, uint32_t max_elements,
                                   hrt_debug_sink_t* out_sink) {
  hrt_stdio_sink_t* sink = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*sink), "stdio sink", (void**)&sink));
  hrt_mutex_init(&sink->mutex);
  sink->stream = stream;
  sink->max_elements = max_elements;
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_stdio_sink_trace, sink},
      .release = {hrt_stdio_sink_release, sink},
  };
  return HRT_OK;
}

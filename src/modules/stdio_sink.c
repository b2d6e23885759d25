#include "modules/stdio_sink.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/threads.h"
#include "hal/element_format.h"

typedef struct hrt_stdio_sink_s {
  hrt_mutex_t mutex;  // one trace's text at a time
  FILE* stream;
  uint32_t max_elements;
} hrt_stdio_sink_t;

// `name: 2x3xf32=[[1 2 3] [4 5 6]]` (hal/element_format.h has the format).
static void hrt_write_tensor(FILE* stream, const hrt_trace_tensor_t* tensor,
                             uint32_t max_elements) {
  fprintf(stream, "%s: ", tensor->name);
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    fprintf(stream, "%lldx", (long long)tensor->shape[d]);
  }
  fprintf(stream, "%s=", hrt_hal_element_type_name(tensor->element_type));
  hrt_hal_tensor_format(tensor->element_type, tensor->rank, tensor->shape,
                        tensor->data, max_elements, stream);
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
      hrt_write_tensor(memory, &tensors[i], sink->max_elements);
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

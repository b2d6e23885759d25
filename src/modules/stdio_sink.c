#include "modules/stdio_sink.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/threads.h"

typedef struct hrt_stdio_sink_s {
  hrt_mutex_t mutex;  // one trace's text at a time
  FILE* stream;
  uint32_t max_elements;
} hrt_stdio_sink_t;

// A growable text buffer; on allocation failure it stops growing and the
// text is cut short rather than lost.
typedef struct hrt_text_s {
  char* data;
  size_t length;
  size_t capacity;
} hrt_text_t;

static void hrt_text_append(hrt_text_t* text, const char* piece) {
  size_t length = strlen(piece);
  if (text->length + length + 1 > text->capacity) {
    size_t capacity = (text->capacity + length + 1) * 2;
    char* grown = realloc(text->data, capacity);
    if (!grown) return;
    text->data = grown;
    text->capacity = capacity;
  }
  memcpy(text->data + text->length, piece, length + 1);
  text->length += length;
}

static void hrt_append_tensor(hrt_text_t* text,
                              const hrt_trace_tensor_t* tensor,
                              uint32_t max_elements) {
  char piece[96];
  hrt_text_append(text, tensor->name);
  hrt_text_append(text, ": ");
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    snprintf(piece, sizeof(piece), "%lldx", (long long)tensor->shape[d]);
    hrt_text_append(text, piece);
  }
  hrt_text_append(text, hrt_hal_element_type_name(tensor->element_type));
  hrt_text_append(text, "=[");
  size_t element_size = hrt_hal_element_type_size(tensor->element_type);
  uint64_t count = element_size ? tensor->byte_length / element_size : 0;
  uint64_t head = count > max_elements ? max_elements / 2 : count;
  uint64_t tail_start = count > max_elements ? count - max_elements / 2 : count;
  for (uint64_t i = 0; i < count; ++i) {
    if (i == head && i < tail_start) {
      snprintf(piece, sizeof(piece), "%s... (%llu elements) ...", i ? " " : "",
               (unsigned long long)count);
      hrt_text_append(text, piece);
      i = tail_start - 1;
      continue;
    }
    if (i) hrt_text_append(text, " ");
    hrt_hal_element_format(tensor->element_type, tensor->data, i, piece,
                           sizeof(piece));
    hrt_text_append(text, piece);
  }
  hrt_text_append(text, "]\n");
}

static hrt_status_t hrt_stdio_sink_trace(void* user_data, const char* key,
                                         const hrt_trace_info_t* info,
                                         uint32_t count,
                                         const hrt_trace_tensor_t* tensors) {
  hrt_stdio_sink_t* sink = user_data;
  hrt_text_t text = {0};
  char header[256];
  snprintf(header, sizeof(header), "=== %s (%s op %u, invocation %llu) ===\n",
           key, info->function, info->op_index,
           (unsigned long long)info->sequence);
  hrt_text_append(&text, header);
  for (uint32_t i = 0; i < count; ++i) {
    hrt_append_tensor(&text, &tensors[i], sink->max_elements);
  }
  hrt_mutex_lock(&sink->mutex);
  if (text.data) fwrite(text.data, 1, text.length, sink->stream);
  fflush(sink->stream);
  hrt_mutex_unlock(&sink->mutex);
  free(text.data);
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
  sink->max_elements = max_elements < 2 ? 2 : max_elements;
  *out_sink = (hrt_debug_sink_t){
      .buffer_view_trace = {hrt_stdio_sink_trace, sink},
      .release = {hrt_stdio_sink_release, sink},
  };
  return HRT_OK;
}

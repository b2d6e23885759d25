#include "hal/buffer_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/live.h"

struct hrt_hal_buffer_view_s {
  hrt_ref_t ref;
  hrt_hal_buffer_t* buffer;  // retained
  hrt_hal_element_type_t element_type;
  uint32_t rank;
  int64_t shape[HRT_HAL_MAX_RANK];
  uint64_t element_count;
  uint64_t byte_offset;
  uint64_t byte_length;
};

static hrt_status_t hrt_shape_element_count(uint32_t rank, const int64_t* shape,
                                            uint64_t* out_count) {
  if (rank > HRT_HAL_MAX_RANK) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "rank %u exceeds the maximum of %d", rank,
                           HRT_HAL_MAX_RANK);
  }
  uint64_t count = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "shape[%u] is negative (%lld)", i,
                             (long long)shape[i]);
    }
    if (shape[i] != 0 && count > UINT64_MAX / (uint64_t)shape[i]) {
      return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                             "shape element count overflows at shape[%u]", i);
    }
    count *= (uint64_t)shape[i];
  }
  *out_count = count;
  return HRT_OK;
}

hrt_status_t hrt_hal_shape_byte_length(hrt_hal_element_type_t element_type,
                                       uint32_t rank, const int64_t* shape,
                                       uint64_t* out_byte_length) {
  size_t element_size = hrt_hal_element_type_size(element_type);
  if (element_size == 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "invalid element type %d", (int)element_type);
  }
  uint64_t count = 0;
  HRT_RETURN_IF_ERROR(hrt_shape_element_count(rank, shape, &count));
  if (count > UINT64_MAX / element_size) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "shape byte size overflows");
  }
  *out_byte_length = count * element_size;
  return HRT_OK;
}

hrt_status_t hrt_hal_buffer_view_create(hrt_hal_buffer_t* buffer,
                                        uint64_t byte_offset,
                                        hrt_hal_element_type_t element_type,
                                        uint32_t rank, const int64_t* shape,
                                        hrt_hal_buffer_view_t** out_view) {
  uint64_t byte_length = 0;
  HRT_RETURN_IF_ERROR(
      hrt_hal_shape_byte_length(element_type, rank, shape, &byte_length));
  size_t element_size = hrt_hal_element_type_size(element_type);
  if (byte_offset % element_size != 0) {
    return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                           "byte offset %llu is not a multiple of the %s "
                           "element size %zu",
                           (unsigned long long)byte_offset,
                           hrt_hal_element_type_name(element_type),
                           element_size);
  }
  if (byte_offset > buffer->byte_length ||
      byte_length > buffer->byte_length - byte_offset) {
    return hrt_status_make(HRT_STATUS_OUT_OF_RANGE,
                           "a view of %llu bytes at offset %llu does not fit "
                           "in a %llu-byte buffer",
                           (unsigned long long)byte_length,
                           (unsigned long long)byte_offset,
                           (unsigned long long)buffer->byte_length);
  }
  hrt_hal_buffer_view_t* view = NULL;
  HRT_RETURN_IF_ERROR(
      hrt_allocate_zeroed(sizeof(*view), "buffer view", (void**)&view));
  hrt_ref_init(&view->ref);
  view->buffer = buffer;
  hrt_hal_buffer_retain(buffer);
  view->element_type = element_type;
  view->rank = rank;
  if (rank) memcpy(view->shape, shape, rank * sizeof(shape[0]));
  view->element_count = byte_length / element_size;
  view->byte_offset = byte_offset;
  view->byte_length = byte_length;
  hrt_live_add(HRT_LIVE_BUFFER_VIEW, 1);
  *out_view = view;
  return HRT_OK;
}

void hrt_hal_shape_format(uint32_t rank, const int64_t* shape,
                          char out[HRT_HAL_SHAPE_TEXT_MAX]) {
  size_t used = 0;
  out[used++] = '[';
  for (uint32_t d = 0; d < rank; ++d) {
    char dim[24];
    int n =
        snprintf(dim, sizeof(dim), "%s%lld", d ? "," : "", (long long)shape[d]);
    if (used + (size_t)n + 5 > HRT_HAL_SHAPE_TEXT_MAX) {
      memcpy(out + used, "...", 3);
      used += 3;
      break;
    }
    memcpy(out + used, dim, (size_t)n);
    used += (size_t)n;
  }
  out[used++] = ']';
  out[used] = 0;
}

void hrt_hal_buffer_view_retain(hrt_hal_buffer_view_t* view) {
  hrt_ref_retain(&view->ref);
}

void hrt_hal_buffer_view_release(hrt_hal_buffer_view_t* view) {
  if (!view || !hrt_ref_release(&view->ref)) return;
  hrt_hal_buffer_release(view->buffer);
  free(view);
  hrt_live_add(HRT_LIVE_BUFFER_VIEW, -1);
}

hrt_hal_buffer_t* hrt_hal_buffer_view_buffer(
    const hrt_hal_buffer_view_t* view) {
  return view->buffer;
}
hrt_hal_element_type_t hrt_hal_buffer_view_element_type(
    const hrt_hal_buffer_view_t* view) {
  return view->element_type;
}
uint32_t hrt_hal_buffer_view_rank(const hrt_hal_buffer_view_t* view) {
  return view->rank;
}
const int64_t* hrt_hal_buffer_view_shape(const hrt_hal_buffer_view_t* view) {
  return view->shape;
}
uint64_t hrt_hal_buffer_view_element_count(const hrt_hal_buffer_view_t* view) {
  return view->element_count;
}
uint64_t hrt_hal_buffer_view_byte_length(const hrt_hal_buffer_view_t* view) {
  return view->byte_length;
}
hrt_hal_buffer_ref_t hrt_hal_buffer_view_ref(
    const hrt_hal_buffer_view_t* view) {
  return (hrt_hal_buffer_ref_t){view->buffer, 0, view->byte_offset,
                                view->byte_length};
}

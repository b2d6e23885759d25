// Buffer views: a typed, shaped window (element type + dims, row-major,
// dense) onto a byte range of a buffer. Immutable once created; any thread may
// read them. A view retains its buffer.
#ifndef HRT_HAL_BUFFER_VIEW_H_
#define HRT_HAL_BUFFER_VIEW_H_

#include <stdint.h>

#include "base/status.h"
#include "hal/buffer.h"
#include "hal/element_type.h"

#define HRT_HAL_MAX_RANK 8

typedef struct hrt_hal_buffer_view_s hrt_hal_buffer_view_t;

// Creates a view of `shape[0..rank)` elements of `element_type` starting at
// `byte_offset` in `buffer`. INVALID_ARGUMENT for a rank above
// HRT_HAL_MAX_RANK, a negative dim, an unaligned offset or a size that
// overflows; OUT_OF_RANGE when the view does not fit in the buffer.
hrt_status_t hrt_hal_buffer_view_create(
    hrt_hal_buffer_t* buffer, uint64_t byte_offset,
    hrt_hal_element_type_t element_type, uint32_t rank, const int64_t* shape,
    hrt_hal_buffer_view_t** out_view) HRT_MUST_USE;

// Computes the byte size of a dense tensor, with the same checks as create.
hrt_status_t hrt_hal_shape_byte_length(hrt_hal_element_type_t element_type,
                                       uint32_t rank, const int64_t* shape,
                                       uint64_t* out_byte_length) HRT_MUST_USE;

// Writes "[2,3]" (rank 0: "[]") into `out`, truncating with "..." if long.
#define HRT_HAL_SHAPE_TEXT_MAX 192
void hrt_hal_shape_format(uint32_t rank, const int64_t* shape,
                          char out[HRT_HAL_SHAPE_TEXT_MAX]);

void hrt_hal_buffer_view_retain(hrt_hal_buffer_view_t* view);
void hrt_hal_buffer_view_release(hrt_hal_buffer_view_t* view);

// Borrowed.
hrt_hal_buffer_t* hrt_hal_buffer_view_buffer(const hrt_hal_buffer_view_t* view);
hrt_hal_element_type_t hrt_hal_buffer_view_element_type(
    const hrt_hal_buffer_view_t* view);
uint32_t hrt_hal_buffer_view_rank(const hrt_hal_buffer_view_t* view);
// [rank] dims. Borrowed.
const int64_t* hrt_hal_buffer_view_shape(const hrt_hal_buffer_view_t* view);
uint64_t hrt_hal_buffer_view_element_count(const hrt_hal_buffer_view_t* view);
uint64_t hrt_hal_buffer_view_byte_length(const hrt_hal_buffer_view_t* view);
// The view's bytes as a buffer ref (for commands).
hrt_hal_buffer_ref_t hrt_hal_buffer_view_ref(const hrt_hal_buffer_view_t* view);

#endif  // HRT_HAL_BUFFER_VIEW_H_

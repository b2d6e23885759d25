// Element types of buffer views. The names are the dtype strings JavaScript
// uses; sizes are in bytes (bool is one byte, 0 or 1).
#ifndef HRT_HAL_ELEMENT_TYPE_H_
#define HRT_HAL_ELEMENT_TYPE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum hrt_hal_element_type_e {
  HRT_HAL_ELEMENT_TYPE_F16 = 0,
  HRT_HAL_ELEMENT_TYPE_BF16,
  HRT_HAL_ELEMENT_TYPE_F32,
  HRT_HAL_ELEMENT_TYPE_F64,
  HRT_HAL_ELEMENT_TYPE_I8,
  HRT_HAL_ELEMENT_TYPE_U8,
  HRT_HAL_ELEMENT_TYPE_I16,
  HRT_HAL_ELEMENT_TYPE_U16,
  HRT_HAL_ELEMENT_TYPE_I32,
  HRT_HAL_ELEMENT_TYPE_U32,
  HRT_HAL_ELEMENT_TYPE_I64,
  HRT_HAL_ELEMENT_TYPE_U64,
  HRT_HAL_ELEMENT_TYPE_BOOL,
  HRT_HAL_ELEMENT_TYPE_COUNT_,
} hrt_hal_element_type_t;

size_t hrt_hal_element_type_size(hrt_hal_element_type_t type);
// "f32", ...; "unknown" for out-of-range values.
const char* hrt_hal_element_type_name(hrt_hal_element_type_t type);
// INVALID_ARGUMENT naming `name` and listing the valid dtypes when unknown.
hrt_status_t hrt_hal_element_type_parse(
    const char* name, hrt_hal_element_type_t* out_type) HRT_MUST_USE;

// Element `index` of an array of `type` at `data`, as a double (f16 and bf16
// converted; 64-bit integers beyond 2^53 lose precision; bool is 0 or 1).
double hrt_hal_element_load(hrt_hal_element_type_t type, const void* data,
                            uint64_t index);
// Whether the type holds floating-point values (NaN and Inf are possible).
bool hrt_hal_element_type_is_float(hrt_hal_element_type_t type);

#endif  // HRT_HAL_ELEMENT_TYPE_H_

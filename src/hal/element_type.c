#include "hal/element_type.h"

#include <string.h>

#include "base/half.h"

static const struct {
  const char* name;
  size_t size;
} hrt_element_types[HRT_HAL_ELEMENT_TYPE_COUNT_] = {
    {"f16", 2}, {"bf16", 2}, {"f32", 4},  {"f64", 8}, {"i8", 1},
    {"u8", 1},  {"i16", 2},  {"u16", 2},  {"i32", 4}, {"u32", 4},
    {"i64", 8}, {"u64", 8},  {"bool", 1},
};

size_t hrt_hal_element_type_size(hrt_hal_element_type_t type) {
  if ((unsigned)type >= HRT_HAL_ELEMENT_TYPE_COUNT_) return 0;
  return hrt_element_types[type].size;
}

const char* hrt_hal_element_type_name(hrt_hal_element_type_t type) {
  if ((unsigned)type >= HRT_HAL_ELEMENT_TYPE_COUNT_) return "unknown";
  return hrt_element_types[type].name;
}

hrt_status_t hrt_hal_element_type_parse(const char* name,
                                        hrt_hal_element_type_t* out_type) {
  for (int i = 0; i < HRT_HAL_ELEMENT_TYPE_COUNT_; ++i) {
    if (strcmp(name, hrt_element_types[i].name) == 0) {
      *out_type = (hrt_hal_element_type_t)i;
      return HRT_OK;
    }
  }
  return hrt_status_make(HRT_STATUS_INVALID_ARGUMENT,
                         "unknown dtype '%s' (expected one of f16, bf16, f32, "
                         "f64, i8, u8, i16, u16, i32, u32, i64, u64, bool)",
                         name);
}

// Reads one element of `size` bytes (unaligned-safe).
#define HRT_LOAD(ctype)                                                \
  (memcpy(&value.ctype##_v, (const char*)data + index * sizeof(ctype), \
          sizeof(ctype)),                                              \
   value.ctype##_v)

double hrt_hal_element_load(hrt_hal_element_type_t type, const void* data,
                            uint64_t index) {
  union {
    uint16_t uint16_t_v;
    float float_v;
    double double_v;
    int8_t int8_t_v;
    uint8_t uint8_t_v;
    int16_t int16_t_v;
    int32_t int32_t_v;
    uint32_t uint32_t_v;
    int64_t int64_t_v;
    uint64_t uint64_t_v;
  } value;
  switch (type) {
    case HRT_HAL_ELEMENT_TYPE_F16:
      return hrt_f16_to_f32(HRT_LOAD(uint16_t));
    case HRT_HAL_ELEMENT_TYPE_BF16:
      return hrt_bf16_to_f32(HRT_LOAD(uint16_t));
    case HRT_HAL_ELEMENT_TYPE_F32:
      return HRT_LOAD(float);
    case HRT_HAL_ELEMENT_TYPE_F64:
      return HRT_LOAD(double);
    case HRT_HAL_ELEMENT_TYPE_I8:
      return HRT_LOAD(int8_t);
    case HRT_HAL_ELEMENT_TYPE_U8:
      return HRT_LOAD(uint8_t);
    case HRT_HAL_ELEMENT_TYPE_BOOL:
      return HRT_LOAD(uint8_t) != 0;
    case HRT_HAL_ELEMENT_TYPE_I16:
      return HRT_LOAD(int16_t);
    case HRT_HAL_ELEMENT_TYPE_U16:
      return HRT_LOAD(uint16_t);
    case HRT_HAL_ELEMENT_TYPE_I32:
      return HRT_LOAD(int32_t);
    case HRT_HAL_ELEMENT_TYPE_U32:
      return HRT_LOAD(uint32_t);
    case HRT_HAL_ELEMENT_TYPE_I64:
      return (double)HRT_LOAD(int64_t);
    case HRT_HAL_ELEMENT_TYPE_U64:
      return (double)HRT_LOAD(uint64_t);
    default:
      return 0;
  }
}

bool hrt_hal_element_type_is_float(hrt_hal_element_type_t type) {
  return type == HRT_HAL_ELEMENT_TYPE_F16 ||
         type == HRT_HAL_ELEMENT_TYPE_BF16 ||
         type == HRT_HAL_ELEMENT_TYPE_F32 || type == HRT_HAL_ELEMENT_TYPE_F64;
}

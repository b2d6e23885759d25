#include "hal/element_type.h"

#include <string.h>

static const struct {
  const char* name;
  size_t size;
} hrt_element_types[HRT_HAL_ELEMENT_TYPE_COUNT_] = {
    {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"i8", 1},
    {"u8", 1},  {"i16", 2},  {"u16", 2}, {"i32", 4}, {"u32", 4},
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

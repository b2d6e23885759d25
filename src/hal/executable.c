#include "hal/executable.h"

#include <string.h>

#include "base/live.h"
#include "hal/device.h"

void hrt_hal_executable_initialize(const hrt_hal_executable_vtable_t* vtable,
                                   hrt_hal_device_t* device, const char* name,
                                   uint32_t entry_count,
                                   const hrt_hal_executable_entry_t* entries,
                                   hrt_hal_executable_t* executable) {
  hrt_ref_init(&executable->ref);
  executable->vtable = vtable;
  executable->device = device;
  executable->name = name;
  executable->entry_count = entry_count;
  executable->entries = entries;
  hrt_hal_device_retain(device);
  hrt_live_add(HRT_LIVE_EXECUTABLE, 1);
}

void hrt_hal_executable_deinitialize(hrt_hal_executable_t* executable) {
  hrt_hal_device_release(executable->device);
  hrt_live_add(HRT_LIVE_EXECUTABLE, -1);
}

void hrt_hal_executable_retain(hrt_hal_executable_t* executable) {
  if (executable) hrt_ref_retain(&executable->ref);
}

void hrt_hal_executable_release(hrt_hal_executable_t* executable) {
  if (!executable || !hrt_ref_release(&executable->ref)) return;
  executable->vtable->destroy(executable);
}

hrt_status_t hrt_hal_executable_lookup(const hrt_hal_executable_t* executable,
                                       const char* entry_name,
                                       uint32_t* out_ordinal) {
  for (uint32_t i = 0; i < executable->entry_count; ++i) {
    if (strcmp(executable->entries[i].name, entry_name) == 0) {
      *out_ordinal = i;
      return HRT_OK;
    }
  }
  return hrt_status_make(HRT_STATUS_NOT_FOUND,
                         "kernel '%s' not found in executable '%s' (%u "
                         "kernels)",
                         entry_name, executable->name, executable->entry_count);
}

static const char* const hrt_hal_param_type_names[] = {
    [HRT_HAL_PARAM_BUFFER] = "buffer", [HRT_HAL_PARAM_U32] = "u32",
    [HRT_HAL_PARAM_I32] = "i32",       [HRT_HAL_PARAM_F32] = "f32",
    [HRT_HAL_PARAM_U64] = "u64",       [HRT_HAL_PARAM_I64] = "i64",
    [HRT_HAL_PARAM_F64] = "f64",
};
#define HRT_HAL_PARAM_TYPE_COUNT \
  (sizeof(hrt_hal_param_type_names) / sizeof(hrt_hal_param_type_names[0]))

const char* hrt_hal_param_type_name(hrt_hal_param_type_t type) {
  return (size_t)type < HRT_HAL_PARAM_TYPE_COUNT
             ? hrt_hal_param_type_names[type]
             : "?";
}

bool hrt_hal_param_type_parse(const char* name, hrt_hal_param_type_t* out) {
  for (size_t i = 0; i < HRT_HAL_PARAM_TYPE_COUNT; ++i) {
    if (strcmp(name, hrt_hal_param_type_names[i]) == 0) {
      *out = (hrt_hal_param_type_t)i;
      return true;
    }
  }
  return false;
}

uint32_t hrt_hal_param_type_words(hrt_hal_param_type_t type) {
  switch (type) {
    case HRT_HAL_PARAM_BUFFER:
      return 0;
    case HRT_HAL_PARAM_U64:
    case HRT_HAL_PARAM_I64:
    case HRT_HAL_PARAM_F64:
      return 2;
    default:
      return 1;
  }
}

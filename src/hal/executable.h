// Executables: a set of kernels loaded for one device, found by entry name.
//
// Created by hrt_hal_device_create_executable() from one of the formats
// below (a device rejects formats it cannot run with INVALID_ARGUMENT).
// Immutable once created; any thread may read the entry table. An executable
// retains its device.
#ifndef HRT_HAL_EXECUTABLE_H_
#define HRT_HAL_EXECUTABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/ref.h"
#include "base/status.h"

typedef struct hrt_hal_device_s hrt_hal_device_t;
typedef struct hrt_hal_executable_s hrt_hal_executable_t;

typedef enum hrt_hal_executable_format_e {
  HRT_HAL_EXECUTABLE_FORMAT_BUILTIN = 0,  // the device's built-in kernels
  HRT_HAL_EXECUTABLE_FORMAT_CPU_LIBRARY,  // path to a kernel library .so
  HRT_HAL_EXECUTABLE_FORMAT_PTX,          // data: PTX text
  HRT_HAL_EXECUTABLE_FORMAT_CUBIN,        // data: cubin image
  HRT_HAL_EXECUTABLE_FORMAT_FATBIN,       // data: fatbin image
} hrt_hal_executable_format_t;

typedef struct hrt_hal_executable_params_s {
  hrt_hal_executable_format_t format;
  const char* path;  // CPU_LIBRARY
  const void* data;  // PTX, CUBIN, FATBIN; copied or consumed before return
  size_t data_length;
} hrt_hal_executable_params_t;

typedef struct hrt_hal_executable_entry_s {
  const char* name;
  uint32_t binding_count;
  uint32_t constant_count;
} hrt_hal_executable_entry_t;

typedef struct hrt_hal_executable_vtable_s {
  void (*destroy)(hrt_hal_executable_t* executable);
} hrt_hal_executable_vtable_t;

struct hrt_hal_executable_s {
  hrt_ref_t ref;
  const hrt_hal_executable_vtable_t* vtable;
  hrt_hal_device_t* device;  // retained
  const char* name;          // for messages; owned by the implementation
  uint32_t entry_count;
  const hrt_hal_executable_entry_t* entries;  // owned by the implementation
};

// For implementations: sets the common fields and retains `device`.
void hrt_hal_executable_initialize(const hrt_hal_executable_vtable_t* vtable,
                                   hrt_hal_device_t* device, const char* name,
                                   uint32_t entry_count,
                                   const hrt_hal_executable_entry_t* entries,
                                   hrt_hal_executable_t* executable);
// For implementations: releases what initialize retained.
void hrt_hal_executable_deinitialize(hrt_hal_executable_t* executable);

void hrt_hal_executable_retain(hrt_hal_executable_t* executable);
void hrt_hal_executable_release(hrt_hal_executable_t* executable);

// NOT_FOUND naming the entry and the executable when absent.
hrt_status_t hrt_hal_executable_lookup(const hrt_hal_executable_t* executable,
                                       const char* entry_name,
                                       uint32_t* out_ordinal) HRT_MUST_USE;

#endif  // HRT_HAL_EXECUTABLE_H_

// Executables: a set of kernels loaded for one device, found by entry name.
//
// Created by hrt_hal_device_create_executable() from one of the formats
// below (a device rejects formats it cannot run with INVALID_ARGUMENT).
// Immutable once created; any thread may read the entry table. An executable
// retains its device.
#ifndef HRT_HAL_EXECUTABLE_H_
#define HRT_HAL_EXECUTABLE_H_

#include <stdbool.h>
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
  HRT_HAL_EXECUTABLE_FORMAT_CUDA_SOURCE,  // data: CUDA C++ source text
} hrt_hal_executable_format_t;

// The type of one declared kernel parameter (docs/cuda.md, typed
// signatures). A BUFFER takes the dispatch's next binding (its 64-bit device
// address); a scalar takes the dispatch's next constant words: one 32-bit
// word for U32, I32 and F32, two for U64, I64 and F64 (low word first).
typedef enum hrt_hal_param_type_e {
  HRT_HAL_PARAM_BUFFER = 0,
  HRT_HAL_PARAM_U32,
  HRT_HAL_PARAM_I32,
  HRT_HAL_PARAM_F32,
  HRT_HAL_PARAM_U64,
  HRT_HAL_PARAM_I64,
  HRT_HAL_PARAM_F64,
} hrt_hal_param_type_t;

// "buffer", "u32", "i32", "f32", "u64", "i64", "f64".
const char* hrt_hal_param_type_name(hrt_hal_param_type_t type);
// The type named `name` (as above); false when there is none.
bool hrt_hal_param_type_parse(const char* name, hrt_hal_param_type_t* out);
// Constant words a scalar takes (1 or 2); 0 for BUFFER.
uint32_t hrt_hal_param_type_words(hrt_hal_param_type_t type);

// One entry a CUDA executable (PTX, CUBIN, FATBIN, CUDA_SOURCE) declares.
typedef struct hrt_hal_entry_decl_s {
  const char* name;        // the entry as dispatches name it
  const char* expression;  // CUDA_SOURCE: the C++ name expression of the
                           // kernel (NVRTC lowers it), or NULL: `name` is
                           // the kernel's symbol (extern "C")
  bool typed;              // false: parameters not declared (inferred)
  uint32_t param_count;
  const hrt_hal_param_type_t* params;  // [param_count], in kernel order
} hrt_hal_entry_decl_t;

// Everything is borrowed for the duration of the create call only.
typedef struct hrt_hal_executable_params_s {
  hrt_hal_executable_format_t format;
  const char* path;  // CPU_LIBRARY
  const void* data;  // PTX, CUBIN, FATBIN, CUDA_SOURCE
  size_t data_length;
  // CUDA_SOURCE: the program's name in compile logs (its file name), and
  // the compiler options.
  const char* source_name;
  uint32_t option_count;
  const char* const* options;
  // CUDA formats: the entries to expose, under distinct names
  // (INVALID_ARGUMENT otherwise). 0: every kernel of the image, with
  // parameters inferred (docs/cuda.md).
  uint32_t entry_decl_count;
  const hrt_hal_entry_decl_t* entry_decls;
} hrt_hal_executable_params_t;

// A kernel of an executable and the dispatches it takes: `binding_count`
// bindings and `constant_count` 32-bit constant words. The kernel's
// parameters are, with `params` NULL, the bindings' device addresses then
// the 32-bit constants (the inferred layout); otherwise the `param_count`
// declared types in kernel order, each BUFFER taking the next binding and
// each scalar the next 1 or 2 constant words (hrt_hal_param_type_words).
// CPU devices see only the counts.
typedef struct hrt_hal_executable_entry_s {
  const char* name;
  uint32_t binding_count;
  uint32_t constant_count;
  uint32_t param_count;
  const hrt_hal_param_type_t* params;
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

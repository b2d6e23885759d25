// Program modules: functions described by data, in the module format
// "halrt.module/1" (JSON; see docs/module-format.md).
//
// Creation parses and validates the whole description; every error is
// INVALID_ARGUMENT (NOT_FOUND for unknown names) with the path of the
// offending field, e.g. `functions.main.body[2].bindings[1]: unknown value
// 'z'`. Executable files are named relative to `base_dir`.
//
// Linking into a context imports the "hal" module linked before it, loads
// the executables for its device's kind (files are read and libraries
// opened then, once per context, not at creation), uploads the module's
// constants, and records one reusable command buffer per function. Each call allocates fresh outputs and locals,
// submits the function's command buffer with the call's bindings, and completes
// on the device's completion thread.
//
// The parts (private to src/modules): program_internal.h (the parsed
// module), program_parse.h (the description's top level), with
// program_fields.h, program_executables.h, program_values.h,
// program_constants.h and program_ops.h; program_state.h (per-context state:
// executables loaded, command buffers recorded); program_call.h (one call).
#ifndef HRT_MODULES_PROGRAM_PROGRAM_MODULE_H_
#define HRT_MODULES_PROGRAM_PROGRAM_MODULE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/module.h"

// `base_dir` may be NULL when the description names no files; it is copied
// (into the resolved paths), as is `json`. A description that declares
// constants needs hrt_program_module_create_with_constants.
hrt_status_t hrt_program_module_create(
    const char* json, size_t length, const char* base_dir,
    hrt_vm_module_t** out_module) HRT_MUST_USE;

// The bytes of one module constant (little-endian elements, row-major).
typedef struct hrt_program_constant_data_s {
  const void* data;
  uint64_t byte_length;
} hrt_program_constant_data_t;

// Creation with the data of the description's "constants", one entry per
// constant in the order they are declared, each exactly its byte length
// (INVALID_ARGUMENT naming the constant otherwise). The bytes are copied:
// the module keeps them to upload when a context links it.
hrt_status_t hrt_program_module_create_with_constants(
    const char* json, size_t length, const char* base_dir,
    const hrt_program_constant_data_t* constants, uint32_t constant_count,
    hrt_vm_module_t** out_module) HRT_MUST_USE;

// Whether `module` is a program module.
bool hrt_program_module_isa(const hrt_vm_module_t* module);

// The key of every dispatch of a program module, in function then op order:
// "function:op:entry", the key its traceDispatches trace has (see
// hal_module.h). Fixed at creation, valid while the module lives.
const char* const* hrt_program_module_dispatch_keys(
    const hrt_vm_module_t* module, uint32_t* out_count);

#endif  // HRT_MODULES_PROGRAM_PROGRAM_MODULE_H_

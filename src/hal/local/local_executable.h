// Executables of the CPU devices: a kernel library that follows the ABI in
// include/halrt/cpu_kernel.h, either the built-in one or a shared library
// loaded from a path (dlopen, then halrt_kernel_library_query).
//
// Loading validates the table (ABI version, non-empty unique names, non-NULL
// functions, binding and constant counts within the dispatch limits) and
// fails with INVALID_ARGUMENT naming the library and the problem; a missing
// file is UNAVAILABLE, a missing query symbol NOT_FOUND. The library stays
// loaded until the executable is destroyed (on any thread).
#ifndef HRT_HAL_LOCAL_LOCAL_EXECUTABLE_H_
#define HRT_HAL_LOCAL_LOCAL_EXECUTABLE_H_

#include "hal/executable.h"
#include "halrt/cpu_kernel.h"

hrt_status_t hrt_local_executable_create(
    hrt_hal_device_t* device, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) HRT_MUST_USE;

// The kernel at `ordinal` (< executable->entry_count) of a local executable.
const halrt_kernel_entry_t* hrt_local_executable_kernel(
    const hrt_hal_executable_t* executable, uint32_t ordinal);

#endif  // HRT_HAL_LOCAL_LOCAL_EXECUTABLE_H_

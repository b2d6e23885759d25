// Executables of the CUDA device: one CUmodule and its kernels.
//
// Formats and where each entry's binding and constant counts come from:
//   BUILTIN  the embedded built-in PTX (builtin_ptx.h); entries are its
//            kernels, counts from the built-in signature table
//            (hal/builtin_signatures.h), which must agree with the PTX.
//   PTX      PTX text (NUL-terminated or not); counts from the `.entry`
//            parameter lists (the rule in cuda_ptx.h).
//   CUBIN,   an image for the driver; entries and counts come from the
//   FATBIN   driver (cuModuleEnumerateFunctions, cuFuncGetName,
//            cuFuncGetParamInfo; CUDA 12.4+): every 8-byte parameter is a
//            binding (a device pointer), every 4-byte one a constant, and
//            bindings come first, as for PTX. Older drivers, and any other
//            parameter size, give UNIMPLEMENTED / INVALID_ARGUMENT.
//   CUDA_    CUDA C++ compiled by NVRTC for the device (cuda_nvrtc.h), or
//   SOURCE   taken from the kernel cache (cuda_kernel_cache.h), into a cubin
//            or PTX, then handled as those; with entry declarations only
//            the declared entries, in order, under their declared names
//            (found by the symbol: the name, or its lowered expression).
// The module is loaded with cuModuleLoadDataEx; a driver rejection (bad
// PTX, wrong architecture) is INVALID_ARGUMENT carrying the JIT error log.
//
// Threads: create with the device's context current on the calling thread
// (the device does this); a source is compiled on that thread. Destroy may run on any thread: it makes the
// context current itself (push/pop) to unload the module.
#ifndef HRT_HAL_CUDA_CUDA_EXECUTABLE_H_
#define HRT_HAL_CUDA_CUDA_EXECUTABLE_H_

#include "hal/builtin_signatures.h"
#include "hal/cuda/cuda_symbols.h"
#include "hal/executable.h"

typedef struct hrt_cuda_kernel_s {
  hrt_cu_function_t function;
  // The built-in kernel's signature (BUILTIN executables only, else NULL):
  // the device checks dispatches against it before launching, since the
  // CUDA kernels trust their constants.
  const hrt_builtin_signature_t* builtin;
} hrt_cuda_kernel_t;

hrt_status_t hrt_cuda_executable_create(
    hrt_hal_device_t* device, const hrt_cuda_symbols_t* symbols,
    hrt_cu_context_t context, const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) HRT_MUST_USE;

// The kernel at `ordinal` (< executable->entry_count) of a CUDA executable.
const hrt_cuda_kernel_t* hrt_cuda_executable_kernel(
    const hrt_hal_executable_t* executable, uint32_t ordinal);

#endif  // HRT_HAL_CUDA_CUDA_EXECUTABLE_H_

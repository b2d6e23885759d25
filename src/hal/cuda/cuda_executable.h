// Executables of the CUDA device: one CUmodule and its kernels.
//
// Formats and where each entry's layout (hal/executable.h) comes from:
//   BUILTIN  the embedded built-in PTX (builtin_ptx.h); entries are its
//            kernels but the device's own (HRT_CUDA_INTERNAL_KERNEL_PREFIX),
//            counts from the built-in signature table
//            (hal/builtin_signatures.h), which must agree with the PTX.
//   PTX      PTX text (NUL-terminated or not); the `.entry` parameter
//            lists (cuda_ptx.h).
//   CUBIN,   an image for the driver; parameter sizes from the driver
//   FATBIN   (cuFuncGetParamInfo; CUDA 12.4+).
//   CUDA_    CUDA C++ compiled by NVRTC for the device (cuda_nvrtc.h), or
//   SOURCE   taken from the kernel cache (cuda_kernel_cache.h), into a cubin
//            or PTX, then handled as those; a declared entry with a name
//            expression is found by the symbol NVRTC lowered it to, and
//            keeps its declared name.
// Without entry declarations (params->entry_decl_count == 0) every kernel
// of the module is an entry with the inferred layout: PTX by the rule in
// cuda_ptx.h; a cubin/fatbin's kernels are listed by the driver
// (cuModuleEnumerateFunctions, cuFuncGetName; CUDA 12.4+, else
// UNIMPLEMENTED) and every 8-byte parameter is a binding, every 4-byte one
// a constant, bindings first (any other size or order is INVALID_ARGUMENT).
// With declarations (distinct names, else INVALID_ARGUMENT) exactly the
// declared entries are exposed, in declaration order, each looked up by
// name (NOT_FOUND when the module lacks it; other kernels are ignored). A typed
// declaration is the entry's layout, checked against the PTX types
// (hrt_cuda_ptx_check) or the driver's parameter sizes (8 bytes for a buffer or
// a 64-bit scalar, 4 for a 32-bit one, the same count); INVALID_ARGUMENT naming
// the kernel, the parameter and both types otherwise, or when it takes more
// buffers or constant words than a dispatch can hold. A driver without
// cuFuncGetParamInfo cannot check a cubin/fatbin, so the declaration is trusted
// there; an untyped declaration is inferred as above (UNIMPLEMENTED for a
// cubin/fatbin on such a driver).
// The module is loaded with cuModuleLoadDataEx; a driver rejection (bad
// PTX, wrong architecture) is INVALID_ARGUMENT carrying the JIT error log.
//
// Threads: create with the device's context current on the calling thread
// (the device does this); a source is compiled on that thread. Destroy may
// run on any thread: it hands the module to the device's completion thread
// to unload (hrt_cuda_device_unload_module).
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
    const hrt_hal_executable_params_t* params,
    hrt_hal_executable_t** out_executable) HRT_MUST_USE;

// The kernel at `ordinal` (< executable->entry_count) of a CUDA executable.
const hrt_cuda_kernel_t* hrt_cuda_executable_kernel(
    const hrt_hal_executable_t* executable, uint32_t ordinal);

#endif  // HRT_HAL_CUDA_CUDA_EXECUTABLE_H_

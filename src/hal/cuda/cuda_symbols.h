// Run-time loading of the CUDA driver library, and CUresult -> status.
//
// The library is `libcuda.so.1`, else `libcuda.so`; when the environment
// variable HALRT_CUDA_LIBRARY is set (and not empty) only that path is tried
// (the C and JavaScript tests point it at test/support/fakecuda). Loading
// happens once per process, on first use, from whichever thread gets there
// first: open the library, resolve every entry of HRT_CUDA_SYMBOLS, call
// cuInit(0) and count the devices. The outcome is cached for the life of
// the process (the library is never unloaded: libcuda does not support it),
// so a later change of HALRT_CUDA_LIBRARY has no effect.
//
// Failures are UNAVAILABLE with the reason: the loader's message for a
// missing library, the missing entry point for an old driver, the cuInit
// error (a stub library, a driver/runtime mismatch), or "no CUDA device".
#ifndef HRT_HAL_CUDA_CUDA_SYMBOLS_H_
#define HRT_HAL_CUDA_CUDA_SYMBOLS_H_

#include <stdbool.h>

#include "base/dynlib.h"
#include "base/status.h"
#include "hal/cuda/cuda_api.h"

typedef struct hrt_cuda_symbols_s {
#define HRT_CUDA_SYMBOL_FIELD(name, params) hrt_cu_result_t(*name) params;
#define HRT_CUDA_SYMBOL_EITHER_FIELD(field, newer, older, params) \
  hrt_cu_result_t(*field) params;
  HRT_CUDA_SYMBOLS(HRT_CUDA_SYMBOL_FIELD, HRT_CUDA_SYMBOL_FIELD,
                   HRT_CUDA_SYMBOL_EITHER_FIELD)
#undef HRT_CUDA_SYMBOL_FIELD
#undef HRT_CUDA_SYMBOL_EITHER_FIELD
  int device_count;       // >= 1
  int driver_version;     // cuDriverGetVersion, e.g. 13000
  hrt_dynlib_t* library;  // open for the life of the process
} hrt_cuda_symbols_t;

// Loads the driver (once per process; thread-safe) and returns the shared,
// immutable table, or a copy of the cached failure. The table lives until
// the process exits; OPTIONAL entries may be NULL.
hrt_status_t hrt_cuda_symbols_load(const hrt_cuda_symbols_t** out_symbols)
    HRT_MUST_USE;

// Resolves every entry of HRT_CUDA_SYMBOLS from `library` into `symbols`
// (the function pointers only; nothing is called). UNAVAILABLE naming the
// first REQUIRED entry, or both names of an EITHER entry, that is missing.
// hrt_cuda_symbols_load uses it; tests call it on other libraries to see
// which names were picked.
hrt_status_t hrt_cuda_symbols_resolve(hrt_dynlib_t* library,
                                      hrt_cuda_symbols_t* symbols) HRT_MUST_USE;

// The status for `result` returned by the entry point named `call`: HRT_OK
// for CUDA_SUCCESS, otherwise a status whose message is "<call> failed:
// <CUDA_ERROR_NAME> (<description>)" and whose code is as below. Name and
// description come from cuGetErrorName / cuGetErrorString; where those are
// missing or fail (the toolkit's stub library), halrt's own names for the
// sticky and device-losing codes and the codes that make CUDA unusable (34,
// 36, 100, 803, 804, 999) and its own sentences for the latter; else
// "CUresult <n>" and "no description". The code is
//   RESOURCE_EXHAUSTED  out of memory, launch out of resources
//   DEVICE_LOST         hrt_cuda_result_loses_device
//   INVALID_ARGUMENT    invalid values, images or PTX
//   NOT_FOUND           a missing kernel or symbol
//   UNAVAILABLE         no device, stub library, driver mismatch
//   UNIMPLEMENTED       not supported
//   INTERNAL            anything else.
hrt_status_t hrt_cuda_result_status(const hrt_cuda_symbols_t* symbols,
                                    hrt_cu_result_t result,
                                    const char* call) HRT_MUST_USE;

// Whether `result` is one of the errors cuda.h calls sticky: every later
// call in the process returns it, and only a new process can use CUDA
// again. Contained (226), illegal address (700), launch timeout (702),
// hardware stack error (714), illegal instruction (715), misaligned
// address (716), invalid address space (717), invalid PC (718), launch
// failed (719), tensor memory leak (721), MPS client terminated (810),
// external device (911).
bool hrt_cuda_result_is_fatal(hrt_cu_result_t result);

// Whether halrt marks the device that sees `result` lost (DEVICE_LOST): a
// fatal result, or one after which its context cannot be used: a
// device-side assert (710), a destroyed context (709), a deinitialized
// driver (4), an uncorrectable ECC (214) or NVLink (220) error.
bool hrt_cuda_result_loses_device(hrt_cu_result_t result);

// Calls `symbols->name args` and converts the result, naming the call.
#define HRT_CUDA_CALL(symbols, name, args) \
  hrt_cuda_result_status((symbols), (symbols)->name args, #name)

#endif  // HRT_HAL_CUDA_CUDA_SYMBOLS_H_

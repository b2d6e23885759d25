#include "hal/cuda/cuda_symbols.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/dynlib.h"

// Written once under hrt_cuda_once, read-only afterwards.
static pthread_once_t hrt_cuda_once = PTHREAD_ONCE_INIT;
static hrt_cuda_symbols_t hrt_cuda_symbols;
static hrt_status_t hrt_cuda_load_status;

hrt_status_t hrt_cuda_symbols_resolve(hrt_dynlib_t* library,
                                      hrt_cuda_symbols_t* symbols) {
  void* address = NULL;
#define HRT_CUDA_RESOLVE_REQUIRED(name, params)                                \
  if (!(address = hrt_dynlib_find(library, #name))) {                          \
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,                             \
                           "library '%s' lacks %s (not a CUDA driver, or one " \
                           "too old for halrt)",                               \
                           hrt_dynlib_path(library), #name);                   \
  }                                                                            \
  memcpy(&symbols->name, &address, sizeof(address));
#define HRT_CUDA_RESOLVE_OPTIONAL(name, params) \
  address = hrt_dynlib_find(library, #name);    \
  memcpy(&symbols->name, &address, sizeof(address));
#define HRT_CUDA_RESOLVE_EITHER(field, newer, older, params)                \
  if (!(address = hrt_dynlib_find(library, #newer)) &&                      \
      !(address = hrt_dynlib_find(library, #older))) {                      \
    return hrt_status_make(HRT_STATUS_UNAVAILABLE,                          \
                           "library '%s' lacks both %s and %s (not a CUDA " \
                           "driver, or one too old for halrt)",             \
                           hrt_dynlib_path(library), #newer, #older);       \
  }                                                                         \
  memcpy(&symbols->field, &address, sizeof(address));
  HRT_CUDA_SYMBOLS(HRT_CUDA_RESOLVE_REQUIRED, HRT_CUDA_RESOLVE_OPTIONAL,
                   HRT_CUDA_RESOLVE_EITHER)
#undef HRT_CUDA_RESOLVE_REQUIRED
#undef HRT_CUDA_RESOLVE_OPTIONAL
#undef HRT_CUDA_RESOLVE_EITHER
  return HRT_OK;
}

// Any failure while bringing the driver up means "no CUDA here".
static hrt_status_t hrt_cuda_unavailable(hrt_status_t status) {
  if (status == HRT_OK || hrt_status_code(status) == HRT_STATUS_UNAVAILABLE) {
    return status;
  }
  hrt_status_t unavailable =
      hrt_status_make(HRT_STATUS_UNAVAILABLE, "%s", hrt_status_message(status));
  hrt_status_free(status);
  return unavailable;
}

static hrt_status_t hrt_cuda_initialize(hrt_cuda_symbols_t* symbols) {
  const char* override = getenv("HALRT_CUDA_LIBRARY");
  static const char* const defaults[] = {"libcuda.so.1", "libcuda.so"};
  const char* const* paths = defaults;
  int path_count = 2;
  if (override && override[0]) {
    paths = &override;
    path_count = 1;
  }
  hrt_dynlib_t* library = NULL;
  hrt_status_t status = hrt_dynlib_open(paths, path_count, &library);
  if (status != HRT_OK) {
    return hrt_status_annotate(status, "CUDA is not usable");
  }
  status = hrt_cuda_symbols_resolve(library, symbols);
  if (status == HRT_OK) {
    status = hrt_cuda_unavailable(HRT_CUDA_CALL(symbols, cuInit, (0)));
  }
  if (status == HRT_OK) {
    status = hrt_cuda_unavailable(
        HRT_CUDA_CALL(symbols, cuDriverGetVersion, (&symbols->driver_version)));
  }
  if (status == HRT_OK) {
    status = hrt_cuda_unavailable(
        HRT_CUDA_CALL(symbols, cuDeviceGetCount, (&symbols->device_count)));
  }
  if (status == HRT_OK && symbols->device_count < 1) {
    status = hrt_status_make(HRT_STATUS_UNAVAILABLE,
                             "no CUDA device (the driver at '%s' reports %d)",
                             hrt_dynlib_path(library), symbols->device_count);
  }
  if (status != HRT_OK) {
    hrt_dynlib_close(library);
    return hrt_status_annotate(status, "CUDA is not usable");
  }
  symbols->library = library;
  return HRT_OK;
}

static void hrt_cuda_load_once(void) {
  hrt_cuda_load_status = hrt_cuda_initialize(&hrt_cuda_symbols);
}

hrt_status_t hrt_cuda_symbols_load(const hrt_cuda_symbols_t** out_symbols) {
  pthread_once(&hrt_cuda_once, hrt_cuda_load_once);
  if (hrt_cuda_load_status != HRT_OK) {
    return hrt_status_clone(hrt_cuda_load_status);
  }
  *out_symbols = &hrt_cuda_symbols;
  return HRT_OK;
}

// Exactly the codes whose cuda.h (CUDA 13) comment says "any further CUDA
// work will return the same error. To continue using CUDA, the process must
// be terminated and relaunched" (or, for 810, just the second sentence).
bool hrt_cuda_result_is_fatal(hrt_cu_result_t result) {
  switch (result) {
    case HRT_CUDA_ERROR_CONTAINED:
    case HRT_CUDA_ERROR_ILLEGAL_ADDRESS:
    case HRT_CUDA_ERROR_LAUNCH_TIMEOUT:
    case HRT_CUDA_ERROR_HARDWARE_STACK_ERROR:
    case HRT_CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case HRT_CUDA_ERROR_MISALIGNED_ADDRESS:
    case HRT_CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case HRT_CUDA_ERROR_INVALID_PC:
    case HRT_CUDA_ERROR_LAUNCH_FAILED:
    case HRT_CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case HRT_CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case HRT_CUDA_ERROR_EXTERNAL_DEVICE:
      return true;
    default:
      return false;
  }
}

bool hrt_cuda_result_loses_device(hrt_cu_result_t result) {
  switch (result) {
    // cuda.h: after a device-side assert "the context cannot be used
    // anymore, and must be destroyed"; halrt's devices share the primary
    // context, so there is nothing left to run on.
    case HRT_CUDA_ERROR_ASSERT:
    case HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED:
    // The driver is shutting down.
    case HRT_CUDA_ERROR_DEINITIALIZED:
    // Not called sticky by cuda.h, but the device's memory can no longer
    // be trusted; halrt stops using it rather than return wrong data.
    case HRT_CUDA_ERROR_ECC_UNCORRECTABLE:
    case HRT_CUDA_ERROR_NVLINK_UNCORRECTABLE:
      return true;
    default:
      return hrt_cuda_result_is_fatal(result);
  }
}

static hrt_status_code_t hrt_cuda_status_code(hrt_cu_result_t result) {
  if (hrt_cuda_result_loses_device(result)) return HRT_STATUS_DEVICE_LOST;
  switch (result) {
    case HRT_CUDA_ERROR_OUT_OF_MEMORY:
    case HRT_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return HRT_STATUS_RESOURCE_EXHAUSTED;
    case HRT_CUDA_ERROR_INVALID_VALUE:
    case HRT_CUDA_ERROR_INVALID_IMAGE:
    case HRT_CUDA_ERROR_NO_BINARY_FOR_GPU:
    case HRT_CUDA_ERROR_INVALID_PTX:
    case HRT_CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case HRT_CUDA_ERROR_INVALID_SOURCE:
    case HRT_CUDA_ERROR_INVALID_HANDLE:
      return HRT_STATUS_INVALID_ARGUMENT;
    case HRT_CUDA_ERROR_NOT_FOUND:
      return HRT_STATUS_NOT_FOUND;
    case HRT_CUDA_ERROR_NOT_INITIALIZED:
    case HRT_CUDA_ERROR_STUB_LIBRARY:
    case HRT_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case HRT_CUDA_ERROR_DEVICE_UNAVAILABLE:
    case HRT_CUDA_ERROR_NO_DEVICE:
    case HRT_CUDA_ERROR_INVALID_DEVICE:
    case HRT_CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case HRT_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case HRT_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return HRT_STATUS_UNAVAILABLE;
    case HRT_CUDA_ERROR_NOT_SUPPORTED:
      return HRT_STATUS_UNIMPLEMENTED;
    default:
      return HRT_STATUS_INTERNAL;
  }
}

// Names (cuda.h's) and, for the codes that explain why CUDA is unusable,
// halrt's own one-sentence descriptions, used when the library cannot name
// a result itself: the toolkit's stub libcuda fails cuGetErrorName and
// cuGetErrorString too, and both are optional entry points.
static const struct {
  hrt_cu_result_t result;
  const char* name;
  const char* description;  // NULL: none of halrt's own
} hrt_cuda_known_results[] = {
    {HRT_CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", NULL},
    {HRT_CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "the CUDA toolkit's stub library was loaded, not the NVIDIA driver"},
    {HRT_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
     "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
     "the installed NVIDIA driver is too old for this call"},
    {HRT_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "the driver found no CUDA-capable GPU"},
    {HRT_CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", NULL},
    {HRT_CUDA_ERROR_NVLINK_UNCORRECTABLE, "CUDA_ERROR_NVLINK_UNCORRECTABLE",
     NULL},
    {HRT_CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED", NULL},
    {HRT_CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", NULL},
    {HRT_CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", NULL},
    {HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     NULL},
    {HRT_CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", NULL},
    {HRT_CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR",
     NULL},
    {HRT_CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
     NULL},
    {HRT_CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", NULL},
    {HRT_CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     NULL},
    {HRT_CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", NULL},
    {HRT_CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", NULL},
    {HRT_CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK", NULL},
    {HRT_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "the NVIDIA kernel driver and libcuda are from different driver "
     "releases"},
    {HRT_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
     "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "the CUDA forward-compatibility driver does not support this GPU"},
    {HRT_CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
     NULL},
    {HRT_CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE", NULL},
    {HRT_CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN",
     "the driver failed for a reason it does not report"},
};

hrt_status_t hrt_cuda_result_status(const hrt_cuda_symbols_t* symbols,
                                    hrt_cu_result_t result, const char* call) {
  if (result == HRT_CUDA_SUCCESS) return HRT_OK;
  const char* name = NULL;
  const char* text = NULL;
  if (symbols->cuGetErrorName &&
      symbols->cuGetErrorName(result, &name) != HRT_CUDA_SUCCESS) {
    name = NULL;
  }
  if (symbols->cuGetErrorString &&
      symbols->cuGetErrorString(result, &text) != HRT_CUDA_SUCCESS) {
    text = NULL;
  }
  for (size_t i = 0;
       i < sizeof(hrt_cuda_known_results) / sizeof(hrt_cuda_known_results[0]);
       ++i) {
    if (hrt_cuda_known_results[i].result != result) continue;
    if (!name) name = hrt_cuda_known_results[i].name;
    if (!text) text = hrt_cuda_known_results[i].description;
  }
  const char* description = text ? text : "no description";
  if (name) {
    return hrt_status_make(hrt_cuda_status_code(result), "%s failed: %s (%s)",
                           call, name, description);
  }
  return hrt_status_make(hrt_cuda_status_code(result),
                         "%s failed: CUresult %d (%s)", call, result,
                         description);
}

// The subset of the CUDA Driver API that halrt uses, declared here so that
// nothing includes cuda.h: building halrt needs no CUDA toolkit, and libcuda
// is loaded at run time (cuda_symbols.h).
//
// Types and values match cuda.h of CUDA 13 (checked by hand; the CUDA ABI
// keeps them stable). Handles are opaque pointers; CUdeviceptr is a 64-bit
// integer on the 64-bit platforms halrt supports.
//
// HRT_CUDA_SYMBOLS is the one table of entry points: every name is the
// exported symbol (with its _v2 suffix where the ABI has one) and its
// parameter list. REQUIRED entries must exist in the loaded library;
// OPTIONAL ones may be missing (older drivers) and are NULL then. EITHER
// entries fill one field from the first of two exported names that exists:
// the newer name where cuda.h maps the old one to it, the old name for
// drivers that predate it. The test double in test/support/fakecuda
// implements the same table.
#ifndef HRT_HAL_CUDA_CUDA_API_H_
#define HRT_HAL_CUDA_CUDA_API_H_

#include <stddef.h>
#include <stdint.h>

typedef int hrt_cu_result_t;  // CUresult
typedef int hrt_cu_device_t;  // CUdevice
typedef uint64_t hrt_cu_deviceptr_t;  // CUdeviceptr
typedef struct hrt_cu_context_s* hrt_cu_context_t;
typedef struct hrt_cu_module_s* hrt_cu_module_t;
typedef struct hrt_cu_function_s* hrt_cu_function_t;
typedef struct hrt_cu_stream_s* hrt_cu_stream_t;
typedef struct hrt_cu_event_s* hrt_cu_event_t;
typedef struct hrt_cu_mempool_s* hrt_cu_mempool_t;  // CUmemoryPool

_Static_assert(sizeof(hrt_cu_deviceptr_t) == sizeof(unsigned long long),
               "CUdeviceptr is unsigned long long");

// CUresult values halrt treats specially.
enum {
  HRT_CUDA_SUCCESS = 0,
  HRT_CUDA_ERROR_INVALID_VALUE = 1,
  HRT_CUDA_ERROR_OUT_OF_MEMORY = 2,
  HRT_CUDA_ERROR_NOT_INITIALIZED = 3,
  HRT_CUDA_ERROR_DEINITIALIZED = 4,
  HRT_CUDA_ERROR_STUB_LIBRARY = 34,
  // 35 is not a driver API code (the runtime API's
  // cudaErrorInsufficientDriver); the driver says 36 for "too old".
  HRT_CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
  HRT_CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  HRT_CUDA_ERROR_NO_DEVICE = 100,
  HRT_CUDA_ERROR_INVALID_DEVICE = 101,
  HRT_CUDA_ERROR_INVALID_IMAGE = 200,
  HRT_CUDA_ERROR_INVALID_CONTEXT = 201,
  HRT_CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  HRT_CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  HRT_CUDA_ERROR_INVALID_PTX = 218,
  HRT_CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
  HRT_CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  HRT_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  HRT_CUDA_ERROR_CONTAINED = 226,
  HRT_CUDA_ERROR_INVALID_SOURCE = 300,
  HRT_CUDA_ERROR_INVALID_HANDLE = 400,
  HRT_CUDA_ERROR_NOT_FOUND = 500,
  HRT_CUDA_ERROR_NOT_READY = 600,
  HRT_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  HRT_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  HRT_CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  HRT_CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  HRT_CUDA_ERROR_ASSERT = 710,
  HRT_CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  HRT_CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  HRT_CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  HRT_CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  HRT_CUDA_ERROR_INVALID_PC = 718,
  HRT_CUDA_ERROR_LAUNCH_FAILED = 719,
  HRT_CUDA_ERROR_TENSOR_MEMORY_LEAK = 721,
  HRT_CUDA_ERROR_NOT_SUPPORTED = 801,
  HRT_CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  HRT_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
  HRT_CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
  HRT_CUDA_ERROR_EXTERNAL_DEVICE = 911,
  HRT_CUDA_ERROR_UNKNOWN = 999,
};

// CUdevice_attribute values.
enum {
  HRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  HRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  HRT_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
};

// CUmemPool_attribute values.
enum {
  HRT_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,  // value type cuuint64_t
};

// CUjit_option values (cuModuleLoadDataEx).
enum {
  HRT_CU_JIT_ERROR_LOG_BUFFER = 5,
  HRT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

// Stream and event flags.
enum {
  HRT_CU_STREAM_NON_BLOCKING = 0x1,
  HRT_CU_EVENT_BLOCKING_SYNC = 0x1,
  HRT_CU_EVENT_DISABLE_TIMING = 0x2,
};

// REQUIRED(name, parameter list) / OPTIONAL(name, parameter list) /
// EITHER(field, newer name, older name, parameter list); every entry
// returns CUresult.
#define HRT_CUDA_SYMBOLS(REQUIRED, OPTIONAL, EITHER)                          \
  REQUIRED(cuInit, (unsigned int flags))                                      \
  REQUIRED(cuDriverGetVersion, (int* version))                                \
  REQUIRED(cuDeviceGetCount, (int* count))                                    \
  REQUIRED(cuDeviceGet, (hrt_cu_device_t * device, int ordinal))              \
  REQUIRED(cuDeviceGetName, (char* name, int length, hrt_cu_device_t device)) \
  REQUIRED(cuDeviceTotalMem_v2, (size_t * bytes, hrt_cu_device_t device))     \
  REQUIRED(cuDeviceGetAttribute,                                              \
           (int* value, int attribute, hrt_cu_device_t device))               \
  REQUIRED(cuDevicePrimaryCtxRetain,                                          \
           (hrt_cu_context_t * context, hrt_cu_device_t device))             \
  REQUIRED(cuDevicePrimaryCtxRelease_v2, (hrt_cu_device_t device))            \
  REQUIRED(cuCtxSetCurrent, (hrt_cu_context_t context))                       \
  REQUIRED(cuCtxPushCurrent_v2, (hrt_cu_context_t context))                   \
  REQUIRED(cuCtxPopCurrent_v2, (hrt_cu_context_t * context))                  \
  REQUIRED(cuStreamCreate, (hrt_cu_stream_t * stream, unsigned int flags))    \
  REQUIRED(cuStreamDestroy_v2, (hrt_cu_stream_t stream))                      \
  REQUIRED(cuStreamSynchronize, (hrt_cu_stream_t stream))                     \
  REQUIRED(cuStreamQuery, (hrt_cu_stream_t stream))                           \
  REQUIRED(cuStreamWaitEvent, (hrt_cu_stream_t stream, hrt_cu_event_t event, \
                               unsigned int flags))                           \
  REQUIRED(cuEventCreate, (hrt_cu_event_t * event, unsigned int flags))       \
  REQUIRED(cuEventRecord, (hrt_cu_event_t event, hrt_cu_stream_t stream))     \
  REQUIRED(cuEventSynchronize, (hrt_cu_event_t event))                        \
  REQUIRED(cuEventDestroy_v2, (hrt_cu_event_t event))                         \
  /* cuda.h 12.8+ defines cuEventElapsedTime as cuEventElapsedTime_v2. */    \
  EITHER(cuEventElapsedTime, cuEventElapsedTime_v2, cuEventElapsedTime,       \
         (float* milliseconds, hrt_cu_event_t start, hrt_cu_event_t end))    \
  REQUIRED(cuMemAlloc_v2, (hrt_cu_deviceptr_t * pointer, size_t bytes))       \
  REQUIRED(cuMemFree_v2, (hrt_cu_deviceptr_t pointer))                        \
  REQUIRED(cuMemAllocHost_v2, (void** pointer, size_t bytes))                 \
  REQUIRED(cuMemFreeHost, (void* pointer))                                    \
  REQUIRED(cuMemcpyHtoDAsync_v2,                                              \
           (hrt_cu_deviceptr_t target, const void* source, size_t bytes,     \
            hrt_cu_stream_t stream))                                          \
  REQUIRED(cuMemcpyDtoHAsync_v2,                                              \
           (void* target, hrt_cu_deviceptr_t source, size_t bytes,           \
            hrt_cu_stream_t stream))                                          \
  REQUIRED(cuMemcpyDtoDAsync_v2,                                              \
           (hrt_cu_deviceptr_t target, hrt_cu_deviceptr_t source,            \
            size_t bytes, hrt_cu_stream_t stream))                            \
  REQUIRED(cuMemsetD8Async, (hrt_cu_deviceptr_t target, unsigned char value, \
                             size_t count, hrt_cu_stream_t stream))           \
  REQUIRED(cuMemsetD16Async,                                                  \
           (hrt_cu_deviceptr_t target, unsigned short value, size_t count,   \
            hrt_cu_stream_t stream))                                          \
  REQUIRED(cuMemsetD32Async, (hrt_cu_deviceptr_t target, unsigned int value, \
                              size_t count, hrt_cu_stream_t stream))          \
  REQUIRED(cuMemsetD2D8Async,                                                 \
           (hrt_cu_deviceptr_t target, size_t pitch, unsigned char value,    \
            size_t width, size_t height, hrt_cu_stream_t stream))             \
  REQUIRED(cuMemsetD2D32Async,                                                \
           (hrt_cu_deviceptr_t target, size_t pitch, unsigned int value,     \
            size_t width, size_t height, hrt_cu_stream_t stream))             \
  REQUIRED(cuModuleLoadDataEx,                                                \
           (hrt_cu_module_t * module, const void* image,                     \
            unsigned int option_count, int* options, void** option_values))   \
  REQUIRED(cuModuleUnload, (hrt_cu_module_t module))                          \
  REQUIRED(cuModuleGetFunction, (hrt_cu_function_t * function,                \
                                 hrt_cu_module_t module, const char* name))   \
  REQUIRED(cuLaunchKernel,                                                    \
           (hrt_cu_function_t function, unsigned int grid_x,                  \
            unsigned int grid_y, unsigned int grid_z, unsigned int block_x,   \
            unsigned int block_y, unsigned int block_z,                       \
            unsigned int shared_bytes, hrt_cu_stream_t stream,                \
            void** params, void** extra))                                     \
  OPTIONAL(cuGetErrorName, (hrt_cu_result_t result, const char** name))       \
  OPTIONAL(cuGetErrorString, (hrt_cu_result_t result, const char** text))     \
  /* CUDA 12.4+: kernel introspection, for cubin and fatbin executables. */   \
  OPTIONAL(cuModuleGetFunctionCount,                                          \
           (unsigned int* count, hrt_cu_module_t module))                     \
  OPTIONAL(cuModuleEnumerateFunctions,                                        \
           (hrt_cu_function_t * functions, unsigned int count,               \
            hrt_cu_module_t module))                                          \
  OPTIONAL(cuFuncGetName, (const char** name, hrt_cu_function_t function))    \
  OPTIONAL(cuFuncGetParamInfo,                                                \
           (hrt_cu_function_t function, size_t index, size_t* offset,        \
            size_t* size))                                                    \
  /* CUDA 11.2+: stream-ordered allocation from memory pools. */             \
  OPTIONAL(cuMemAllocAsync, (hrt_cu_deviceptr_t * pointer, size_t bytes,     \
                             hrt_cu_stream_t stream))                         \
  OPTIONAL(cuMemFreeAsync,                                                    \
           (hrt_cu_deviceptr_t pointer, hrt_cu_stream_t stream))              \
  OPTIONAL(cuDeviceGetDefaultMemPool,                                         \
           (hrt_cu_mempool_t * pool, hrt_cu_device_t device))                 \
  OPTIONAL(cuMemPoolSetAttribute,                                             \
           (hrt_cu_mempool_t pool, int attribute, void* value))               \
  OPTIONAL(cuMemPoolTrimTo, (hrt_cu_mempool_t pool, size_t min_bytes_to_keep))

#endif  // HRT_HAL_CUDA_CUDA_API_H_

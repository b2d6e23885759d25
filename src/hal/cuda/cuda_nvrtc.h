// NVRTC, the CUDA C++ run-time compiler: loaded at run time like libcuda,
// and one compile of a CUDA source for a device.
//
// The library is the first of libnvrtc.so.13, libnvrtc.so.12,
// libnvrtc.so.11.2 (the name every CUDA 11.2-11.8 NVRTC has),
// libnvrtc.so.11.1, libnvrtc.so.11.0 and libnvrtc.so that loads; when the
// environment variable HALRT_NVRTC_LIBRARY is set (and not empty) only that
// path is tried (one with a '/' must be a regular file: a FIFO would block
// dlopen). Loaded once per process (thread-safe); the outcome, success
// or failure, is kept for the life of the process. No library is
// UNAVAILABLE naming every path tried and the loader's message for each.
//
// HRT_NVRTC_SYMBOLS is the one table of entry points (prototypes as in
// nvrtc.h of CUDA 13). REQUIRED entries must exist; OPTIONAL ones are NULL
// where missing (nvrtcGetCUBIN* since CUDA 11.1, nvrtcGet*SupportedArchs
// since 11.2).
//
// Threads: NVRTC programs are independent, so compiles may run on any
// thread, concurrently.
#ifndef HRT_HAL_CUDA_CUDA_NVRTC_H_
#define HRT_HAL_CUDA_CUDA_NVRTC_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dynlib.h"
#include "base/status.h"

typedef int hrt_nvrtc_result_t;  // nvrtcResult
typedef struct hrt_nvrtc_program_s* hrt_nvrtc_program_t;

enum {
  HRT_NVRTC_SUCCESS = 0,
  HRT_NVRTC_ERROR_OUT_OF_MEMORY = 1,
  HRT_NVRTC_ERROR_INVALID_OPTION = 5,
  HRT_NVRTC_ERROR_COMPILATION = 6,
  HRT_NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
};

// REQUIRED(return type, name, parameter list) / OPTIONAL(...).
#define HRT_NVRTC_SYMBOLS(REQUIRED, OPTIONAL)                               \
  REQUIRED(hrt_nvrtc_result_t, nvrtcVersion, (int* major, int* minor))      \
  REQUIRED(const char*, nvrtcGetErrorString, (hrt_nvrtc_result_t result))   \
  REQUIRED(hrt_nvrtc_result_t, nvrtcCreateProgram,                          \
           (hrt_nvrtc_program_t * program, const char* source,              \
            const char* name, int header_count, const char* const* headers, \
            const char* const* include_names))                              \
  REQUIRED(hrt_nvrtc_result_t, nvrtcDestroyProgram,                         \
           (hrt_nvrtc_program_t * program))                                 \
  REQUIRED(hrt_nvrtc_result_t, nvrtcCompileProgram,                         \
           (hrt_nvrtc_program_t program, int option_count,                  \
            const char* const* options))                                    \
  REQUIRED(hrt_nvrtc_result_t, nvrtcGetProgramLogSize,                      \
           (hrt_nvrtc_program_t program, size_t * size))                    \
  REQUIRED(hrt_nvrtc_result_t, nvrtcGetProgramLog,                          \
           (hrt_nvrtc_program_t program, char* log))                        \
  REQUIRED(hrt_nvrtc_result_t, nvrtcGetPTXSize,                             \
           (hrt_nvrtc_program_t program, size_t * size))                    \
  REQUIRED(hrt_nvrtc_result_t, nvrtcGetPTX,                                 \
           (hrt_nvrtc_program_t program, char* ptx))                        \
  REQUIRED(hrt_nvrtc_result_t, nvrtcAddNameExpression,                      \
           (hrt_nvrtc_program_t program, const char* const expression))     \
  REQUIRED(hrt_nvrtc_result_t, nvrtcGetLoweredName,                         \
           (hrt_nvrtc_program_t program, const char* const expression,      \
            const char** lowered_name))                                     \
  OPTIONAL(hrt_nvrtc_result_t, nvrtcGetCUBINSize,                           \
           (hrt_nvrtc_program_t program, size_t * size))                    \
  OPTIONAL(hrt_nvrtc_result_t, nvrtcGetCUBIN,                               \
           (hrt_nvrtc_program_t program, char* cubin))                      \
  OPTIONAL(hrt_nvrtc_result_t, nvrtcGetNumSupportedArchs, (int* count))     \
  OPTIONAL(hrt_nvrtc_result_t, nvrtcGetSupportedArchs, (int* archs))

typedef struct hrt_nvrtc_s {
#define HRT_NVRTC_SYMBOL_FIELD(type, name, params) type(*name) params;
  HRT_NVRTC_SYMBOLS(HRT_NVRTC_SYMBOL_FIELD, HRT_NVRTC_SYMBOL_FIELD)
#undef HRT_NVRTC_SYMBOL_FIELD
  int version_major;  // nvrtcVersion, e.g. 13
  int version_minor;  // e.g. 0
  int arch_count;     // 0 when NVRTC cannot list its architectures
  int* archs;         // [arch_count] ascending, e.g. 75 80 ... 90 100 ...
  // "NVRTC 13.0 <real path of the loaded file> <size> bytes, modified
  // <mtime>": tells builds apart that share a version (patch releases).
  const char* identity;
  hrt_dynlib_t* library;  // open for the life of the process
} hrt_nvrtc_t;

// Loads NVRTC (once per process; thread-safe) and returns the shared,
// immutable table, or a copy of the cached failure.
hrt_status_t hrt_nvrtc_load(const hrt_nvrtc_t** out_nvrtc) HRT_MUST_USE;

// What NVRTC makes for a compute capability: a cubin for `sm_<arch>` when
// NVRTC lists that architecture and can return cubins; otherwise PTX for
// `compute_<arch>` (the driver compiles it for the GPU), where <arch> is
// the newest architecture NVRTC lists that is not newer than the device
// (all of them when it lists none). FAILED_PRECONDITION when every
// architecture NVRTC lists is newer than the device.
typedef struct hrt_nvrtc_target_s {
  char option[40];  // "--gpu-architecture=sm_90"
  bool cubin;       // false: PTX
} hrt_nvrtc_target_t;
hrt_status_t hrt_nvrtc_pick_target(const hrt_nvrtc_t* nvrtc,
                                   uint32_t capability_major,
                                   uint32_t capability_minor,
                                   hrt_nvrtc_target_t* out_target) HRT_MUST_USE;

// The index of the first option that chooses the architecture
// (--gpu-architecture or -arch, alone or followed by '=' or a space), or -1.
int hrt_nvrtc_arch_option(uint32_t option_count, const char* const* options);

// INVALID_ARGUMENT naming options[i] when it chooses the architecture:
// halrt targets the device.
hrt_status_t hrt_nvrtc_check_options(uint32_t option_count,
                                     const char* const* options) HRT_MUST_USE;

// The PTX target an architecture name gives: "sm_XY" or "compute_XY"
// (optionally with NVRTC's 'a' or 'f' suffix) whose XY NVRTC lists; NULL
// gives sm_ of the newest it lists. INVALID_ARGUMENT otherwise, listing
// what NVRTC compiles for.
hrt_status_t hrt_nvrtc_parse_arch(const hrt_nvrtc_t* nvrtc, const char* arch,
                                  hrt_nvrtc_target_t* out_target) HRT_MUST_USE;

// The output of one compile, in one heap block (free() it): this struct,
// then the image (PTX text, or a cubin; 16-byte aligned and followed by a
// NUL either way), then the lowered names.
typedef struct hrt_nvrtc_output_s {
  bool cubin;
  size_t image_length;
  const void* image;
  uint32_t lowered_count;
  const char** lowered_names;  // [lowered_count], one per expression
} hrt_nvrtc_output_t;

// A new output block for an image of `image_length` bytes (left for the
// caller to fill through `image`) and copies of `lowered_names`. Used by
// hrt_nvrtc_compile and by the kernel cache.
hrt_status_t hrt_nvrtc_output_allocate(
    bool cubin, size_t image_length, uint32_t lowered_count,
    const char* const* lowered_names,
    hrt_nvrtc_output_t** out_output) HRT_MUST_USE;

// Compiles the NUL-terminated `source` named `source_name` for `target`.
// Quoted includes resolve next to the including file when `source_name` is
// the source file's absolute path (as nvcc does), and never against the
// current directory (give "-I." for that). Compiles
// with the target option then the user's `options` (so that an option
// expecting a value, such as a trailing "-I", cannot take the target's
// place), adding each of `expressions[0..expression_count)` as a name
// expression and lowering it afterwards. A compile failure is
// INVALID_ARGUMENT "compiling <name> with NVRTC <version>:
// nvrtcCompileProgram failed: <NVRTC error>; log:\n<the log>"; a log over
// 640 bytes is cut after the last line
// end in its first 640 bytes (in a single line: at a character boundary)
// and followed by "\n[log cut: the first N of M bytes]". An invalid name
// expression is INVALID_ARGUMENT naming it; an empty PTX or cubin (options
// such as -dlto ask for other output) is INVALID_ARGUMENT.
hrt_status_t hrt_nvrtc_compile(const hrt_nvrtc_t* nvrtc, const char* source,
                               const char* source_name, uint32_t option_count,
                               const char* const* options,
                               uint32_t expression_count,
                               const char* const* expressions,
                               const hrt_nvrtc_target_t* target,
                               hrt_nvrtc_output_t** out_output) HRT_MUST_USE;

// A compile check (halrt.nvrtc.compile): compiles as hrt_nvrtc_compile
// does, without name expressions, always to PTX (`target->cubin` is
// ignored). *out_log is NVRTC's whole log whenever the program was
// created ("" when it is empty; free it), also when the compile fails with
// the error hrt_nvrtc_compile gives; NULL otherwise. *out_output as there.
hrt_status_t hrt_nvrtc_compile_check(const hrt_nvrtc_t* nvrtc,
                                     const char* source,
                                     const char* source_name,
                                     uint32_t option_count,
                                     const char* const* options,
                                     const hrt_nvrtc_target_t* target,
                                     hrt_nvrtc_output_t** out_output,
                                     char** out_log) HRT_MUST_USE;

// Compiles run by hrt_nvrtc_compile in this process (successful or not).
// Lets tests see that a kernel cache hit compiled nothing.
uint64_t hrt_nvrtc_compile_count(void);

#endif  // HRT_HAL_CUDA_CUDA_NVRTC_H_

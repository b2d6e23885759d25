// The headers a CUDA source includes from disk, found where NVRTC finds
// them (hrt_nvrtc_compile), so that the kernel cache key covers their text
// and an edited header is never served a stale binary.
//
// A quoted include is looked up next to the including file (only when the
// source is a file, named by its absolute path: NVRTC searches no folder for
// an inline source), then in each -I folder of the options, in order; an
// angle include in the -I folders. A name found nowhere is NVRTC's own
// (cuda_fp16.h, covered by its version) or an error the compile reports.
// Found headers are scanned in turn. What the scan cannot follow (an include
// of a macro, #include_next, a -include option, or more than
// HRT_CUDA_MAX_INCLUDES headers) makes the source uncacheable: it is then
// compiled every time. No shared state: any thread.
#ifndef HRT_HAL_CUDA_CUDA_INCLUDES_H_
#define HRT_HAL_CUDA_CUDA_INCLUDES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define HRT_CUDA_MAX_INCLUDES 256

typedef struct hrt_cuda_include_s {
  char* path;  // as NVRTC would open it
  char* text;  // [length], followed by a NUL
  size_t length;
} hrt_cuda_include_t;

typedef struct hrt_cuda_includes_s {
  bool cacheable;
  uint32_t count;
  hrt_cuda_include_t files[HRT_CUDA_MAX_INCLUDES];  // in the order found
} hrt_cuda_includes_t;

// Finds the headers NUL-terminated `source` includes. `source_path` is the
// source file's absolute path, or NULL for an inline source. Fails only when
// memory runs out; unreadable headers are left to the compile to report.
// Release with hrt_cuda_includes_free.
hrt_status_t hrt_cuda_includes_find(
    const char* source, const char* source_path, uint32_t option_count,
    const char* const* options,
    hrt_cuda_includes_t** out_includes) HRT_MUST_USE;
void hrt_cuda_includes_free(hrt_cuda_includes_t* includes);

#endif  // HRT_HAL_CUDA_CUDA_INCLUDES_H_

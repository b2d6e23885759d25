// Kernel entries of a PTX module and how many bindings and constants each
// takes, read from the `.entry` declarations of the PTX text.
//
// halrt passes a dispatch as kernel parameters: each binding as a 64-bit
// device pointer, then each constant as a 32-bit value. So an entry's
// parameter list must be:
//   - zero or more `.param .u64` / `.param .b64` (bindings: pointers), then
//   - zero or more `.param .u32` / `.b32` / `.s32` / `.f32` (constants),
// with any state-space, `.ptr` or `.align N` qualifiers. Anything else (a
// pointer after a 32-bit parameter, 8/16-bit or f64/s64 scalars, structs or
// arrays passed by value) is INVALID_ARGUMENT naming the entry and the
// parameter, and so are more than HRT_HAL_MAX_DISPATCH_BINDINGS pointers or
// HRT_HAL_MAX_DISPATCH_CONSTANTS constants, a module without entries, and a
// name declared twice. `.func` declarations are not kernels and are
// skipped; comments are ignored.
//
// Pure function of the text; any thread.
#ifndef HRT_HAL_CUDA_CUDA_PTX_H_
#define HRT_HAL_CUDA_CUDA_PTX_H_

#include <stdint.h>

#include "base/status.h"

typedef struct hrt_cuda_ptx_entry_s {
  const char* name;  // NUL-terminated, inside the same allocation
  uint32_t binding_count;
  uint32_t constant_count;
} hrt_cuda_ptx_entry_t;

// Parses the NUL-terminated PTX `text`. On success `*out_entries` is one
// heap block holding the entries and their names (release with free()) and
// `*out_count` >= 1.
hrt_status_t hrt_cuda_ptx_parse_entries(const char* text, uint32_t* out_count,
                                        hrt_cuda_ptx_entry_t** out_entries)
    HRT_MUST_USE;

#endif  // HRT_HAL_CUDA_CUDA_PTX_H_

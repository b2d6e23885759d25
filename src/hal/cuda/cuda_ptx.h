// Kernel entries of a PTX module and their parameters, read from the
// `.entry` declarations of the PTX text, and the two ways halrt passes a
// dispatch to them (docs/cuda.md, "Parameter rule"):
//   - inferred (hrt_cuda_ptx_infer): each binding as a 64-bit device
//     pointer, then each constant as a 32-bit value, so the parameter list
//     must be zero or more `.u64` / `.b64` (bindings), then zero or more
//     `.u32` / `.b32` / `.s32` / `.f32` (constants);
//   - declared (hrt_cuda_ptx_check): the module's types, each checked
//     against the PTX type of its parameter.
// State-space, `.ptr` and `.align N` qualifiers are ignored. `.func`
// declarations are not kernels and are skipped, and so are `.entry`
// prototypes (a header closed by ';': nvcc's for a kernel used before its
// definition, and `.extern .entry`); comments are ignored.
//
// Pure functions of their arguments; any thread.
#ifndef HRT_HAL_CUDA_CUDA_PTX_H_
#define HRT_HAL_CUDA_CUDA_PTX_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "hal/executable.h"

// One `.param` of an entry.
typedef struct hrt_cuda_ptx_param_s {
  char type[12];  // its PTX type: ".u64", ".f32", ".b8", ".pred" ...,
                  // or an opaque ".texref", ".samplerref", ".surfref",
                  // which no rule takes (NUL-terminated; longer names
                  // are cut)
  bool array;     // `name[N]`: an array or struct passed by value
  uint32_t line;  // where it is declared, for messages
} hrt_cuda_ptx_param_t;

typedef struct hrt_cuda_ptx_entry_s {
  const char* name;  // NUL-terminated, inside the same allocation
  uint32_t line;     // of the `.entry` name
  uint32_t param_count;
  const hrt_cuda_ptx_param_t* params;  // inside the same allocation
} hrt_cuda_ptx_entry_t;

// Parses the NUL-terminated PTX `text`. On success `*out_entries` is one
// heap block holding the entries, their parameters and names (release with
// free()) and `*out_count` >= 1. INVALID_ARGUMENT for a module without
// entries, a name declared twice, or a parameter list that is not a list of
// `.param .<type> name` closed by ')'.
hrt_status_t hrt_cuda_ptx_parse_entries(const char* text, uint32_t* out_count,
                                        hrt_cuda_ptx_entry_t** out_entries)
    HRT_MUST_USE;

// The inferred layout of `entry`: how many bindings, then 32-bit constants,
// it takes. INVALID_ARGUMENT naming the entry and the parameter when it does
// not follow the rule above (a pointer after a 32-bit parameter, 8/16-bit,
// s64 or f64 scalars, arrays or structs by value) or takes more than
// HRT_HAL_MAX_DISPATCH_BINDINGS pointers or HRT_HAL_MAX_DISPATCH_CONSTANTS
// constants.
hrt_status_t hrt_cuda_ptx_infer(const hrt_cuda_ptx_entry_t* entry,
                                uint32_t* out_binding_count,
                                uint32_t* out_constant_count) HRT_MUST_USE;

// Checks the declared parameter `types` of `entry`: as many as the PTX has,
// each matching its PTX type (buffer: .u64/.b64; u64, i64: .u64/.b64/.s64;
// f64: .f64/.b64; u32, i32: .u32/.s32/.b32; f32: .f32/.b32; an array or
// struct by value matches nothing). INVALID_ARGUMENT naming the entry, the
// parameter index and both types otherwise.
hrt_status_t hrt_cuda_ptx_check(const hrt_cuda_ptx_entry_t* entry,
                                uint32_t count,
                                const hrt_hal_param_type_t* types) HRT_MUST_USE;

#endif  // HRT_HAL_CUDA_CUDA_PTX_H_

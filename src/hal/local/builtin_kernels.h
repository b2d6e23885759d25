// The built-in CPU kernel library ("builtin"), compiled into halrt.
//
// It follows the CPU kernel ABI of include/halrt/cpu_kernel.h exactly as an
// external kernel library would, so the local drivers load it through the
// same path. The kernels' names, bindings, constants, workgroup partitioning
// and edge cases are documented in docs/kernels.md; the CUDA device provides
// the same kernels with the same meaning.
//
// Contract:
// - The returned table and every string in it are static and immutable; the
//   pointer is valid for the life of the process and never NULL.
// - Every kernel is thread-safe and keeps no state between calls. halrt calls
//   it once per workgroup, from any worker thread, in any order and possibly
//   concurrently; each workgroup writes only its own part of the outputs, so
//   the result does not depend on the workgroup count or the order.
// - A kernel returns HALRT_KERNEL_INVALID_ARGUMENT, having written nothing,
//   when the dispatch's arity differs from its table entry or a binding is
//   shorter than its constants imply; otherwise HALRT_KERNEL_OK.
#ifndef HRT_HAL_LOCAL_BUILTIN_KERNELS_H_
#define HRT_HAL_LOCAL_BUILTIN_KERNELS_H_

#include "halrt/cpu_kernel.h"

const halrt_kernel_library_t* hrt_local_builtin_kernel_library(void);

// Instruction sets that a built-in kernel has its own code for (today only
// matmul_f32's micro-kernel). Every variant gives the portable result bit
// for bit; only the speed differs.
typedef enum hrt_builtin_isa_e {
  HRT_BUILTIN_ISA_PORTABLE = 0,  // plain C for the baseline target, any CPU
  HRT_BUILTIN_ISA_AVX2,          // x86 with AVX2
  HRT_BUILTIN_ISA_AVX512,        // x86 with AVX-512F
} hrt_builtin_isa_t;

// matmul_f32 computed with the code for `isa`, or NULL when this build or
// this CPU cannot run it. The library's entry uses the widest one the CPU
// runs, chosen once per process; this lets tests run each of them. Same
// contract as the library's entry; thread-safe.
halrt_kernel_fn_t hrt_local_builtin_matmul_f32_for_isa(hrt_builtin_isa_t isa);

#endif  // HRT_HAL_LOCAL_BUILTIN_KERNELS_H_

// The CUDA built-in kernels as PTX text, generated from kernels/builtin.cu
// by scripts/build-cuda-ptx.js into builtin_ptx.c (committed, so building
// halrt needs no CUDA toolkit). The kernels follow docs/kernels.md.
#ifndef HRT_HAL_CUDA_BUILTIN_PTX_H_
#define HRT_HAL_CUDA_BUILTIN_PTX_H_

// The block every built-in kernel is launched with (threads in x); the
// kernels are written for it (HRT_BUILTIN_BLOCK in kernels/builtin.cu, which
// the generator checks is equal). Dispatches' workgroup sizes are ignored
// for built-ins, as docs/kernels.md says.
#define HRT_CUDA_BUILTIN_BLOCK_SIZE 256

// The PTX also holds the CUDA device's own kernels (the tensor summaries of
// summary and health traces, cuda_issue.c), which are no built-ins: their
// names start with this prefix, and the built-in executable leaves them out.
#define HRT_CUDA_INTERNAL_KERNEL_PREFIX "hrt_"

// NUL-terminated PTX (ISA 7.0, target sm_75). Static, immutable.
extern const char hrt_cuda_builtin_ptx[];

#endif  // HRT_HAL_CUDA_BUILTIN_PTX_H_

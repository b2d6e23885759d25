// The built-in kernels for the CUDA device. Semantics are specified in
// docs/kernels.md (the same names, bindings, constants and results as the
// CPU library in src/hal/local/builtin_kernels.c).
//
// This file is compiled to PTX by scripts/build-cuda-ptx.js, which embeds
// the PTX in src/hal/cuda/builtin_ptx.c; halrt itself needs no CUDA toolkit.
// Edit this file, then run `node scripts/build-cuda-ptx.js` and commit both.
//
// Launch contract (src/hal/cuda/cuda_device.c): grid = the dispatch's
// workgroup count, block = HRT_BUILTIN_BLOCK threads in x (the dispatch's
// workgroup size is ignored, as docs/kernels.md says for built-ins), and the
// host has already checked the bindings against the constants. Every kernel
// loops over its items with a stride of the whole grid, so any grid gives
// the full result.
//
// Floating point: add, sub, mul, div, max, relu and axpy round exactly as the
// CPU does (axpy rounds the product before the sum, __fmul_rn/__fadd_rn, so
// nvcc cannot contract it into a fused multiply-add). matmul accumulates
// with fused multiply-adds and reduce_sum/softmax sum in a tree, which
// docs/kernels.md allows: those agree with the CPU to rounding.
#include <stdint.h>

#define HRT_BUILTIN_BLOCK 256
#define HRT_MATMUL_TILE 16  // HRT_MATMUL_TILE^2 == HRT_BUILTIN_BLOCK

// This thread's linear index in the grid and the number of threads in it.
__device__ static inline uint64_t hrt_thread_index() {
  const uint64_t block = blockIdx.x +
                         (uint64_t)gridDim.x *
                             (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
  return block * blockDim.x + threadIdx.x;
}

__device__ static inline uint64_t hrt_thread_count() {
  return (uint64_t)gridDim.x * gridDim.y * gridDim.z * blockDim.x;
}

__device__ static inline uint64_t hrt_block_index() {
  return blockIdx.x +
         (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
}

__device__ static inline uint64_t hrt_block_count() {
  return (uint64_t)gridDim.x * gridDim.y * gridDim.z;
}

// C fmaxf as the CPU library spells it: a NaN operand is ignored, two NaNs
// give NaN, and max(-0, +0) returns y.
__device__ static inline float hrt_fmaxf(float x, float y) {
  return (x > y || y != y) ? x : y;
}

// Truncating division, total over int32: x / 0 == 0, INT32_MIN / -1 ==
// INT32_MIN.
__device__ static inline int32_t hrt_div_i32(int32_t x, int32_t y) {
  if (y == 0) return 0;
  if (y == -1) return (int32_t)(0u - (uint32_t)x);
  return x / y;
}

#define HRT_GRID_STRIDE(i, n)                                      \
  for (uint64_t i = hrt_thread_index(), hrt_stride_ = hrt_thread_count(); \
       i < (n); i += hrt_stride_)

#define HRT_BINARY_KERNEL(name, type, expr)                                 \
  extern "C" __global__ void name(const type* a, const type* b, type* out, \
                                  uint32_t n) {                            \
    HRT_GRID_STRIDE(i, n) {                                                 \
      const type x = a[i], y = b[i];                                        \
      out[i] = (type)(expr);                                                \
    }                                                                       \
  }

HRT_BINARY_KERNEL(add_f32, float, __fadd_rn(x, y))
HRT_BINARY_KERNEL(sub_f32, float, __fsub_rn(x, y))
HRT_BINARY_KERNEL(mul_f32, float, __fmul_rn(x, y))
HRT_BINARY_KERNEL(div_f32, float, __fdiv_rn(x, y))
HRT_BINARY_KERNEL(max_f32, float, hrt_fmaxf(x, y))
HRT_BINARY_KERNEL(add_i32, uint32_t, x + y)
HRT_BINARY_KERNEL(sub_i32, uint32_t, x - y)
HRT_BINARY_KERNEL(mul_i32, uint32_t, x * y)
HRT_BINARY_KERNEL(div_i32, int32_t, hrt_div_i32(x, y))
HRT_BINARY_KERNEL(max_i32, int32_t, x > y ? x : y)

extern "C" __global__ void fill_u32(uint32_t* out, uint32_t n, uint32_t value) {
  HRT_GRID_STRIDE(i, n) out[i] = value;
}

// src == dst is a no-op copy per element, so binding one buffer twice is
// well defined, as on the CPU.
extern "C" __global__ void copy_u8(const uint8_t* src, uint8_t* dst,
                                   uint32_t n) {
  HRT_GRID_STRIDE(i, n) dst[i] = src[i];
}

extern "C" __global__ void axpy_f32(const float* x, const float* y, float* out,
                                    uint32_t n, uint32_t alpha_bits) {
  const float alpha = __uint_as_float(alpha_bits);
  HRT_GRID_STRIDE(i, n) out[i] = __fadd_rn(__fmul_rn(alpha, x[i]), y[i]);
}

extern "C" __global__ void relu_f32(const float* x, float* out, uint32_t n) {
  HRT_GRID_STRIDE(i, n) {
    const float v = x[i];
    out[i] = v > 0.0f ? v : 0.0f;
  }
}

// c (M×N) = a (M×K) · b (K×N). Each block computes 16×16 tiles of c,
// striding over tile columns with the grid's x and tile rows with its y
// (count[2] is 1, checked by the host), and sums each element's products in
// k order from shared-memory tiles of a and b.
extern "C" __global__ void matmul_f32(const float* a, const float* b, float* c,
                                      uint32_t M, uint32_t K, uint32_t N) {
  __shared__ float a_tile[HRT_MATMUL_TILE][HRT_MATMUL_TILE];
  __shared__ float b_tile[HRT_MATMUL_TILE][HRT_MATMUL_TILE];
  // An empty c has nothing to compute: return before walking tile rows.
  // The condition is the same in every thread, so no barrier is skipped by
  // some threads only.
  if (M == 0 || N == 0) return;
  const uint32_t tx = threadIdx.x % HRT_MATMUL_TILE;
  const uint32_t ty = threadIdx.x / HRT_MATMUL_TILE;
  // In 64 bits: M + 15 wraps in 32 for M near 2^32.
  const uint32_t tile_rows =
      (uint32_t)(((uint64_t)M + HRT_MATMUL_TILE - 1) / HRT_MATMUL_TILE);
  const uint32_t tile_cols =
      (uint32_t)(((uint64_t)N + HRT_MATMUL_TILE - 1) / HRT_MATMUL_TILE);
  for (uint32_t tr = blockIdx.y; tr < tile_rows; tr += gridDim.y) {
    for (uint32_t tc = blockIdx.x; tc < tile_cols; tc += gridDim.x) {
      const uint64_t row = (uint64_t)tr * HRT_MATMUL_TILE + ty;
      const uint64_t col = (uint64_t)tc * HRT_MATMUL_TILE + tx;
      float sum = 0.0f;
      for (uint64_t k0 = 0; k0 < K; k0 += HRT_MATMUL_TILE) {
        a_tile[ty][tx] =
            row < M && k0 + tx < K ? a[row * K + k0 + tx] : 0.0f;
        b_tile[ty][tx] =
            k0 + ty < K && col < N ? b[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (uint32_t k = 0; k < HRT_MATMUL_TILE; ++k) {
          sum = fmaf(a_tile[ty][k], b_tile[k][tx], sum);
        }
        __syncthreads();
      }
      if (row < M && col < N) c[row * N + col] = sum;
    }
  }
}

// Combines the block's `value`s with `op` (associative) in `scratch`
// (shared, blockDim.x <= HRT_BUILTIN_BLOCK floats); every thread gets the
// result.
// The scratch array is declared in each kernel rather than here so that its
// PTX name does not depend on the path nvcc was given.
template <typename Op>
__device__ static float hrt_block_reduce(float* scratch, float value, Op op) {
  const uint32_t t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (uint32_t width = 1; width < blockDim.x; width *= 2) {
    if (t % (2 * width) == 0 && t + width < blockDim.x) {
      scratch[t] = op(scratch[t], scratch[t + width]);
    }
    __syncthreads();
  }
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the next call
  return result;
}

struct hrt_max_op {
  __device__ float operator()(float x, float y) const { return hrt_fmaxf(x, y); }
};
struct hrt_add_op {
  __device__ float operator()(float x, float y) const { return x + y; }
};

// One block per row, striding over rows with the grid.
extern "C" __global__ void softmax_rows_f32(const float* x, float* out,
                                            uint32_t rows, uint32_t cols) {
  __shared__ float scratch[HRT_BUILTIN_BLOCK];
  // No columns, no output: return before walking up to 2^32 rows (the whole
  // grid takes this branch, so no barrier is skipped by some threads only).
  if (cols == 0) return;
  for (uint64_t r = hrt_block_index(); r < rows; r += hrt_block_count()) {
    const float* in_row = x + r * cols;
    float* out_row = out + r * cols;
    float max = __int_as_float(0xff800000);  // -inf
    for (uint32_t j = threadIdx.x; j < cols; j += blockDim.x) {
      max = hrt_fmaxf(max, in_row[j]);
    }
    max = hrt_block_reduce(scratch, max, hrt_max_op());
    // Each thread reads in_row[j] before writing out_row[j], so out may be x.
    float sum = 0.0f;
    for (uint32_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float e = expf(in_row[j] - max);
      out_row[j] = e;
      sum += e;
    }
    const float scale = 1.0f / hrt_block_reduce(scratch, sum, hrt_add_op());
    for (uint32_t j = threadIdx.x; j < cols; j += blockDim.x) {
      out_row[j] *= scale;
    }
  }
}

extern "C" __global__ void reduce_sum_f32(const float* x, float* out,
                                          uint32_t rows, uint32_t cols) {
  __shared__ float scratch[HRT_BUILTIN_BLOCK];
  for (uint64_t r = hrt_block_index(); r < rows; r += hrt_block_count()) {
    const float* row = x + r * cols;
    float sum = 0.0f;
    for (uint32_t j = threadIdx.x; j < cols; j += blockDim.x) sum += row[j];
    sum = hrt_block_reduce(scratch, sum, hrt_add_op());
    if (threadIdx.x == 0) out[r] = sum;
  }
}

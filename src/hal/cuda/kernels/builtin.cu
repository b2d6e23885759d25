// The built-in kernels for the CUDA device. Semantics are specified in
// docs/kernels.md (the same names, bindings, constants and results as the
// CPU library in src/hal/local/builtin_kernels.c).
//
// This file is compiled to PTX by scripts/build-cuda-ptx.js, which embeds
// the PTX in src/hal/cuda/builtin_ptx.c; halrt itself needs no CUDA toolkit.
// Edit this file, then run `node scripts/build-cuda-ptx.js` and commit both.
// The tests also compile it as host C++ on the CUDA model
// (test/support/cuda_model), which the driver test double runs: use only
// what the model provides (no warp intrinsics, atomics or dynamic shared
// memory), and list each new kernel in its builtin_kernels.cc.
//
// Launch contract (src/hal/cuda/cuda_issue.c): grid = the dispatch's
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

// C fminf as hrt_fmaxf spells fmaxf.
__device__ static inline float hrt_fminf(float x, float y) {
  return (x < y || y != y) ? x : y;
}

// max and min with NaN kept, as the CPU devices spell them.
__device__ static inline float hrt_max_nan(float x, float y) {
  return x != x || x > y ? x : y;
}
__device__ static inline float hrt_min_nan(float x, float y) {
  return x != x || x < y ? x : y;
}

#define HRT_ND 6

// Σ c[d]·strides[d] over the coordinates c of element i of dims
// (row-major, HRT_ND of them).
__device__ static inline uint64_t hrt_offset(uint64_t i, const uint32_t* dims,
                                             const uint32_t* strides) {
  uint64_t offset = 0;
  for (int d = HRT_ND - 1; d >= 0; --d) {
    offset += i % dims[d] * strides[d];
    i /= dims[d];
  }
  return offset;
}

__device__ static inline float hrt_binary_op(uint32_t op, float x, float y) {
  switch (op) {
    case 0:
      return __fadd_rn(x, y);
    case 1:
      return __fsub_rn(x, y);
    case 2:
      return __fmul_rn(x, y);
    case 3:
      return __fdiv_rn(x, y);
    case 4:
      return powf(x, y);
    case 5:
      return hrt_fmaxf(x, y);
    case 6:
      return hrt_fminf(x, y);
    case 7:
      return x == y ? 1.0f : 0.0f;
    case 8:
      return hrt_max_nan(x, y);
    default:
      return hrt_min_nan(x, y);
  }
}

// out (dense over dims) = a op b, a and b read at element strides (0:
// broadcast). The host checked op < 10 and the bindings' extents.
extern "C" __global__ void binary_f32(
    const float* a, const float* b, float* out, uint32_t op, uint32_t d0,
    uint32_t d1, uint32_t d2, uint32_t d3, uint32_t d4, uint32_t d5,
    uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t a4,
    uint32_t a5, uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3,
    uint32_t b4, uint32_t b5) {
  const uint32_t dims[HRT_ND] = {d0, d1, d2, d3, d4, d5};
  const uint32_t sa[HRT_ND] = {a0, a1, a2, a3, a4, a5};
  const uint32_t sb[HRT_ND] = {b0, b1, b2, b3, b4, b5};
  uint64_t n = 1;
  for (int d = 0; d < HRT_ND; ++d) n *= dims[d];
  HRT_GRID_STRIDE(i, n) {
    out[i] = hrt_binary_op(op, a[hrt_offset(i, dims, sa)],
                           b[hrt_offset(i, dims, sb)]);
  }
}

// dst[dst_offset + Σ c·ds] = src[src_offset + Σ c·ss] over dims, as bits.
// The host checked both extents.
extern "C" __global__ void strided_copy_f32(
    const uint32_t* src, uint32_t* dst, uint32_t src_offset,
    uint32_t dst_offset, uint32_t d0, uint32_t d1, uint32_t d2, uint32_t d3,
    uint32_t d4, uint32_t d5, uint32_t s0, uint32_t s1, uint32_t s2,
    uint32_t s3, uint32_t s4, uint32_t s5, uint32_t t0, uint32_t t1,
    uint32_t t2, uint32_t t3, uint32_t t4, uint32_t t5) {
  const uint32_t dims[HRT_ND] = {d0, d1, d2, d3, d4, d5};
  const uint32_t ss[HRT_ND] = {s0, s1, s2, s3, s4, s5};
  const uint32_t ds[HRT_ND] = {t0, t1, t2, t3, t4, t5};
  uint64_t n = 1;
  for (int d = 0; d < HRT_ND; ++d) n *= dims[d];
  HRT_GRID_STRIDE(i, n) {
    dst[dst_offset + hrt_offset(i, dims, ds)] =
        src[src_offset + hrt_offset(i, dims, ss)];
  }
}

// max(0, min(1, y)), NaN kept.
__device__ static inline float hrt_unit_clamp(float y) {
  return y != y ? y : y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y;
}

__device__ static inline float hrt_unary_op(uint32_t op, float x, float alpha,
                                            float beta) {
  switch (op) {
    case 0:  // sigmoid
      return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
    case 1:
      return tanhf(x);
    case 2:
      return expf(x);
    case 3:
      return logf(x);
    case 4:
      return __fsqrt_rn(x);
    case 5:
      return -x;
    case 6:
      return fabsf(x);
    case 7:
      return __fdiv_rn(1.0f, x);
    case 8:
      return erff(x);
    case 9:  // leaky relu
      return x < 0.0f ? __fmul_rn(alpha, x) : x;
    case 10:  // hard sigmoid
      return hrt_unit_clamp(__fadd_rn(__fmul_rn(alpha, x), beta));
    case 11:  // hard swish
      return __fmul_rn(x, hrt_unit_clamp(__fadd_rn(__fdiv_rn(x, 6.0f), 0.5f)));
    case 12: {  // clip: min(max(x, alpha), beta)
      const float t = x < alpha ? alpha : x;
      return t > beta ? beta : t;
    }
    default:  // gelu, exact
      return __fmul_rn(
          __fmul_rn(0.5f, x),
          __fadd_rn(1.0f, erff(__fmul_rn(x, 0.70710678118654752f))));
  }
}

// The host checked op < 14.
extern "C" __global__ void unary_f32(const float* x, float* out, uint32_t n,
                                     uint32_t op, uint32_t alpha_bits,
                                     uint32_t beta_bits) {
  const float alpha = __uint_as_float(alpha_bits);
  const float beta = __uint_as_float(beta_bits);
  HRT_GRID_STRIDE(i, n) out[i] = hrt_unary_op(op, x[i], alpha, beta);
}

// out (dense over dims) = cond != 0 ? a : b, each read at element strides,
// bits copied. The host checked the extents.
extern "C" __global__ void where_f32(
    const float* cond, const uint32_t* a, const uint32_t* b, uint32_t* out,
    uint32_t d0, uint32_t d1, uint32_t d2, uint32_t d3, uint32_t d4,
    uint32_t d5, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
    uint32_t c4, uint32_t c5, uint32_t a0, uint32_t a1, uint32_t a2,
    uint32_t a3, uint32_t a4, uint32_t a5, uint32_t b0, uint32_t b1,
    uint32_t b2, uint32_t b3, uint32_t b4, uint32_t b5) {
  const uint32_t dims[HRT_ND] = {d0, d1, d2, d3, d4, d5};
  const uint32_t sc[HRT_ND] = {c0, c1, c2, c3, c4, c5};
  const uint32_t sa[HRT_ND] = {a0, a1, a2, a3, a4, a5};
  const uint32_t sb[HRT_ND] = {b0, b1, b2, b3, b4, b5};
  uint64_t n = 1;
  for (int d = 0; d < HRT_ND; ++d) n *= dims[d];
  HRT_GRID_STRIDE(i, n) {
    out[i] = cond[hrt_offset(i, dims, sc)] != 0.0f ? a[hrt_offset(i, dims, sa)]
                                                    : b[hrt_offset(i, dims, sb)];
  }
}

// t = x, then up to 6 steps on t (docs/kernels.md): a unary op (op < 16) or
// a binary one of t and v (16..25: t op v; 32..41: v op t), v being x,
// y (at element strides), alpha, or y at the element offset alpha (a
// whole number), by operand. The host checked the steps and the extents. chain_health_f32 also counts, after each step, the NaN,
// +Inf and -Inf in t: per block [step][3] words into its slot of `counts`
// (18 words a block).
#define HRT_CHAIN_COUNTS 18
#define HRT_CHAIN_STEP(j) uint32_t op##j, uint32_t alpha##j, uint32_t beta##j
#define HRT_CHAIN_PARAMS                                                    \
  uint32_t steps, uint32_t d0, uint32_t d1, uint32_t d2, uint32_t d3,       \
      uint32_t d4, uint32_t d5, uint32_t y0, uint32_t y1, uint32_t y2,      \
      uint32_t y3, uint32_t y4, uint32_t y5, HRT_CHAIN_STEP(0),             \
      HRT_CHAIN_STEP(1), HRT_CHAIN_STEP(2), HRT_CHAIN_STEP(3),              \
      HRT_CHAIN_STEP(4), HRT_CHAIN_STEP(5)
#define HRT_CHAIN_ARGS                                                      \
  steps, d0, d1, d2, d3, d4, d5, y0, y1, y2, y3, y4, y5, op0, alpha0,       \
      beta0, op1, alpha1, beta1, op2, alpha2, beta2, op3, alpha3, beta3,    \
      op4, alpha4, beta4, op5, alpha5, beta5

// The grid-stride loop of both kernels; `counts` NULL or this thread's
// [step][3] counts to add to.
__device__ static void hrt_chain(const float* x, const float* y, float* out,
                                 uint32_t* counts, HRT_CHAIN_PARAMS) {
  const uint32_t dims[HRT_ND] = {d0, d1, d2, d3, d4, d5};
  const uint32_t sy[HRT_ND] = {y0, y1, y2, y3, y4, y5};
  const uint32_t ops[6] = {op0, op1, op2, op3, op4, op5};
  const uint32_t alphas[6] = {alpha0, alpha1, alpha2, alpha3, alpha4, alpha5};
  const uint32_t betas[6] = {beta0, beta1, beta2, beta3, beta4, beta5};
  uint64_t n = 1;
  for (int d = 0; d < HRT_ND; ++d) n *= dims[d];
  HRT_GRID_STRIDE(i, n) {
    const uint64_t oy = hrt_offset(i, dims, sy);
    float t = x[i];
    for (uint32_t j = 0; j < steps; ++j) {
      const uint32_t op = ops[j] & 0xffu, operand = ops[j] >> 8;
      const float alpha = __uint_as_float(alphas[j]);
      if (op < 16) {
        t = hrt_unary_op(op, t, alpha, __uint_as_float(betas[j]));
      } else {
        const float v = operand == 0   ? x[i]
                        : operand == 1 ? y[oy]
                        : operand == 3 ? y[oy + (uint32_t)alpha]
                                       : alpha;
        t = op < 32 ? hrt_binary_op(op & 15u, t, v)
                    : hrt_binary_op(op & 15u, v, t);
      }
      if (counts && !(fabsf(t) < __uint_as_float(0x7f800000u))) {
        counts[3 * j + (t != t ? 0 : t > 0 ? 1 : 2)] += 1;
      }
    }
    out[i] = t;
  }
}

extern "C" __global__ void chain_f32(const float* x, const float* y,
                                     float* out, HRT_CHAIN_PARAMS) {
  hrt_chain(x, y, out, NULL, HRT_CHAIN_ARGS);
}

extern "C" __global__ void chain_health_f32(const float* x, const float* y,
                                            float* out, uint32_t* counts,
                                            HRT_CHAIN_PARAMS) {
  __shared__ uint32_t shared[HRT_CHAIN_COUNTS][HRT_BUILTIN_BLOCK];
  uint32_t mine[HRT_CHAIN_COUNTS] = {0};
  hrt_chain(x, y, out, mine, HRT_CHAIN_ARGS);
  const uint32_t t = threadIdx.x;
  for (int c = 0; c < HRT_CHAIN_COUNTS; ++c) shared[c][t] = mine[c];
  __syncthreads();
  for (uint32_t width = blockDim.x / 2; width > 0; width /= 2) {
    if (t < width) {
      for (int c = 0; c < HRT_CHAIN_COUNTS; ++c) {
        shared[c][t] += shared[c][t + width];
      }
    }
    __syncthreads();
  }
  if (t < HRT_CHAIN_COUNTS) {
    counts[hrt_block_index() * HRT_CHAIN_COUNTS + t] = shared[t][0];
  }
}
#undef HRT_CHAIN_STEP
#undef HRT_CHAIN_PARAMS
#undef HRT_CHAIN_ARGS

// The valid taps [*first, *end) of a window starting at `start` with
// `dilation` over an input of `size` (as the CPU library finds them).
__device__ static inline void hrt_taps(int64_t start, uint32_t taps,
                                       uint32_t dilation, uint32_t size,
                                       uint32_t* first, uint32_t* end) {
  uint32_t k = 0;
  while (k < taps && start + (int64_t)k * dilation < 0) ++k;
  uint32_t e = k;
  while (e < taps && start + (int64_t)e * dilation < (int64_t)size) ++e;
  *first = k;
  *end = e;
}

// One thread per output element; the products rounded and added in the
// CPU's order (channel, row, column, then the bias), so the result is the
// CPU's bit for bit. The host checked the constants (groups, strides).
extern "C" __global__ void conv2d_f32(
    const float* x, const float* w, const float* bias, float* out, uint32_t N,
    uint32_t C, uint32_t H, uint32_t W, uint32_t M, uint32_t Cg, uint32_t KH,
    uint32_t KW, uint32_t OH, uint32_t OW, uint32_t SH, uint32_t SW,
    uint32_t PT, uint32_t PL, uint32_t DH, uint32_t DW) {
  const uint64_t total = (uint64_t)N * M * OH * OW;
  const uint64_t per_group = M / (C / Cg);
  HRT_GRID_STRIDE(i, total) {
    const uint64_t ow = i % OW, oh = i / OW % OH, m = i / OW / OH % M;
    const uint64_t n = i / OW / OH / M;
    const uint64_t c0 = m / per_group * Cg;
    const int64_t ih0 = (int64_t)(oh * SH) - PT;
    const int64_t iw0 = (int64_t)(ow * SW) - PL;
    uint32_t kh0, kh1, kw0, kw1;
    hrt_taps(ih0, KH, DH, H, &kh0, &kh1);
    hrt_taps(iw0, KW, DW, W, &kw0, &kw1);
    float sum = 0.0f;
    for (uint64_t c = 0; c < Cg; ++c) {
      const float* plane = x + ((n * C + c0 + c) * H) * W;
      const float* taps = w + ((m * Cg + c) * KH) * KW;
      for (uint32_t a = kh0; a < kh1; ++a) {
        const float* line = plane + (uint64_t)(ih0 + (int64_t)a * DH) * W;
        for (uint32_t b = kw0; b < kw1; ++b) {
          sum = __fadd_rn(
              sum, __fmul_rn(taps[a * KW + b], line[iw0 + (int64_t)b * DW]));
        }
      }
    }
    out[i] = __fadd_rn(sum, bias[m]);
  }
}

// One thread per output element, in the CPU's order. op: 0 max, 1 average
// over the taps inside the input, 2 average over all KH·KW, 3 max keeping
// the first NaN.
extern "C" __global__ void pool2d_f32(const float* x, float* out, uint32_t N,
                                      uint32_t C, uint32_t H, uint32_t W,
                                      uint32_t OH, uint32_t OW, uint32_t KH,
                                      uint32_t KW, uint32_t SH, uint32_t SW,
                                      uint32_t PT, uint32_t PL, uint32_t op) {
  const uint64_t total = (uint64_t)N * C * OH * OW;
  HRT_GRID_STRIDE(i, total) {
    const uint64_t ow = i % OW, oh = i / OW % OH, plane_index = i / OW / OH;
    const float* plane = x + plane_index * H * W;
    const int64_t ih0 = (int64_t)(oh * SH) - PT;
    const int64_t iw0 = (int64_t)(ow * SW) - PL;
    uint32_t kh0, kh1, kw0, kw1;
    hrt_taps(ih0, KH, 1, H, &kh0, &kh1);
    hrt_taps(iw0, KW, 1, W, &kw0, &kw1);
    const bool max = op == 0 || op == 3;
    float acc = max ? __int_as_float(0xff800000) : 0.0f;  // -inf
    for (uint32_t a = kh0; a < kh1; ++a) {
      const float* line = plane + (uint64_t)(ih0 + a) * W + iw0;
      for (uint32_t b = kw0; b < kw1; ++b) {
        const float v = line[b];
        acc = op == 0   ? hrt_fmaxf(acc, v)
              : op == 3 ? (v > acc || (v != v && acc == acc) ? v : acc)
                        : __fadd_rn(acc, v);
      }
    }
    const uint64_t taps =
        op == 2 ? (uint64_t)KH * KW : (uint64_t)(kh1 - kh0) * (kw1 - kw0);
    out[i] = max ? acc : __fdiv_rn(acc, (float)taps);
  }
}

// u (1 - t) + v t, each product rounded, never fused; u when t is 0.
__device__ static inline float hrt_lerp(float u, float v, float t) {
  if (t == 0.0f) return u;
  return __fadd_rn(__fmul_rn(u, __fsub_rn(1.0f, t)), __fmul_rn(v, t));
}

// Whether `value` is an integer index below `size` (into *index).
__device__ static inline bool hrt_resize_index(float value, uint64_t size,
                                               uint64_t* index) {
  if (!(value >= 0.0f && value < (float)size) || value != floorf(value)) {
    return false;
  }
  *index = (uint64_t)value;
  return true;
}

// out[p][oh][ow] from x[p] at rows[oh] and cols[ow] (index, index, weight),
// as the CPU library computes it; an index outside the input gives NaN.
// The host checked the extents and that `entry` is 3.
extern "C" __global__ void resize2d_f32(const float* x, const float* rows,
                                        const float* cols, float* out,
                                        uint32_t P, uint32_t H, uint32_t W,
                                        uint32_t OH, uint32_t OW,
                                        uint32_t entry) {
  (void)entry;
  const uint64_t total = (uint64_t)P * OH * OW;
  HRT_GRID_STRIDE(i, total) {
    const uint64_t ow = i % OW, oh = i / OW % OH, p = i / OW / OH;
    const float* plane = x + p * H * W;
    const float* rt = rows + 3 * oh;
    const float* ct = cols + 3 * ow;
    uint64_t i0, i1, j0, j1;
    if (!hrt_resize_index(rt[0], H, &i0) || !hrt_resize_index(rt[1], H, &i1) ||
        !hrt_resize_index(ct[0], W, &j0) || !hrt_resize_index(ct[1], W, &j1)) {
      out[i] = __int_as_float(0x7fc00000);
      continue;
    }
    const float top = hrt_lerp(plane[i0 * W + j0], plane[i0 * W + j1], ct[2]);
    const float bottom =
        rt[2] == 0.0f ? top
                      : hrt_lerp(plane[i1 * W + j0], plane[i1 * W + j1], ct[2]);
    out[i] = hrt_lerp(top, bottom, rt[2]);
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

// bmm_f32: c[z] (M×N, dense) = a[z] · b[z], a and b read at their batch,
// row and k (column) strides. Tiles as matmul_f32's over x and y, batches
// over the grid's z.
extern "C" __global__ void bmm_f32(const float* a, const float* b, float* c,
                                   uint32_t batch, uint32_t M, uint32_t K,
                                   uint32_t N, uint32_t sa_batch,
                                   uint32_t sa_row, uint32_t sa_k,
                                   uint32_t sb_batch, uint32_t sb_k,
                                   uint32_t sb_col) {
  __shared__ float a_part[HRT_MATMUL_TILE][HRT_MATMUL_TILE];
  __shared__ float b_part[HRT_MATMUL_TILE][HRT_MATMUL_TILE];
  // The same in every thread of the grid: no barrier is skipped.
  if (M == 0 || N == 0) return;
  const uint32_t tx = threadIdx.x % HRT_MATMUL_TILE;
  const uint32_t ty = threadIdx.x / HRT_MATMUL_TILE;
  const uint32_t tile_rows =
      (uint32_t)(((uint64_t)M + HRT_MATMUL_TILE - 1) / HRT_MATMUL_TILE);
  const uint32_t tile_cols =
      (uint32_t)(((uint64_t)N + HRT_MATMUL_TILE - 1) / HRT_MATMUL_TILE);
  for (uint32_t z = blockIdx.z; z < batch; z += gridDim.z) {
    const float* az = a + (uint64_t)z * sa_batch;
    const float* bz = b + (uint64_t)z * sb_batch;
    float* cz = c + (uint64_t)z * M * N;
    for (uint32_t tr = blockIdx.y; tr < tile_rows; tr += gridDim.y) {
      for (uint32_t tc = blockIdx.x; tc < tile_cols; tc += gridDim.x) {
        const uint64_t row = (uint64_t)tr * HRT_MATMUL_TILE + ty;
        const uint64_t col = (uint64_t)tc * HRT_MATMUL_TILE + tx;
        float sum = 0.0f;
        for (uint64_t k0 = 0; k0 < K; k0 += HRT_MATMUL_TILE) {
          a_part[ty][tx] = row < M && k0 + tx < K
                               ? az[row * sa_row + (k0 + tx) * sa_k]
                               : 0.0f;
          b_part[ty][tx] = k0 + ty < K && col < N
                               ? bz[(k0 + ty) * sb_k + col * sb_col]
                               : 0.0f;
          __syncthreads();
          for (uint32_t k = 0; k < HRT_MATMUL_TILE; ++k) {
            sum = fmaf(a_part[ty][k], b_part[k][tx], sum);
          }
          __syncthreads();
        }
        if (row < M && col < N) cz[row * N + col] = sum;
      }
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

//===----------------------------------------------------------------------===//
// Tensor summaries (hal/tensor_summary.h), for the device's summary and
// health traces. These are the device's own kernels, not built-ins: their
// names start with hrt_ (HRT_CUDA_INTERNAL_KERNEL_PREFIX), which the
// built-in executable leaves out. cuda_issue.c launches them on the trace
// stream with HRT_BUILTIN_BLOCK threads per block (a power of two, which
// the tree reductions need): hrt_summary_partial with up to
// HRT_CUDA_SUMMARY_MAX_BLOCKS blocks, each writing one partial, then
// hrt_summary_final with one block over those partials.
//
// Numerics: each element is converted to double (f16 and bf16 exactly,
// 64-bit integers rounded to nearest) and folded into its thread's partial
// (the thread's elements in grid-stride order); the block's partials are
// merged in a tree, and the final block merges the blocks' partials, each
// thread a strided share in order, then in a tree. Sums use __dadd_rn and
// __dmul_rn, so nvcc cannot contract them into fused multiply-adds. min
// and max hold finite values only (+inf/-inf while there is none; no NaN
// ever reaches them), so plain comparisons are exact in any order.
//===----------------------------------------------------------------------===//

// The element type codes of hrt_hal_element_type_t (hal/element_type.h) and
// the trace mode HRT_HAL_TRACE_HEALTH (hal/tensor_summary.h).
enum {
  HRT_DTYPE_F16 = 0,
  HRT_DTYPE_BF16,
  HRT_DTYPE_F32,
  HRT_DTYPE_F64,
  HRT_DTYPE_I8,
  HRT_DTYPE_U8,
  HRT_DTYPE_I16,
  HRT_DTYPE_U16,
  HRT_DTYPE_I32,
  HRT_DTYPE_U32,
  HRT_DTYPE_I64,
  HRT_DTYPE_U64,
  HRT_DTYPE_BOOL,
};
#define HRT_TRACE_HEALTH 2u

// hrt_hal_tensor_summary_t: 72 bytes, no padding.
struct hrt_summary_t {
  unsigned long long count;
  unsigned long long nan_count;
  unsigned long long pos_inf_count;
  unsigned long long neg_inf_count;
  unsigned long long zero_count;
  double min;
  double max;
  double sum;
  double sum_squares;
};

__device__ static inline double hrt_inf() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

__device__ static inline void hrt_summary_empty(hrt_summary_t* s) {
  s->count = s->nan_count = s->pos_inf_count = s->neg_inf_count =
      s->zero_count = 0;
  s->min = hrt_inf();
  s->max = -hrt_inf();
  s->sum = s->sum_squares = 0.0;
}

// An f16's value as a double, exactly.
__device__ static inline double hrt_f16_to_f64(uint16_t bits) {
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude =
        mantissa ? __longlong_as_double(0x7ff8000000000000LL) : hrt_inf();
  } else if (exponent == 0) {
    magnitude = (double)mantissa * 5.9604644775390625e-08;  // 2^-24
  } else {
    // (1024 + mantissa) * 2^(exponent - 25), the power built from its bits.
    magnitude = (double)(1024u + mantissa) *
                __longlong_as_double((long long)(exponent - 25 + 1023) << 52);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// Element `i` of `type` at `data` (aligned for its type) as a double.
__device__ static inline double hrt_summary_load(const void* data, uint64_t i,
                                                 uint32_t type) {
  switch (type) {
    case HRT_DTYPE_F16:
      return hrt_f16_to_f64(((const uint16_t*)data)[i]);
    case HRT_DTYPE_BF16:
      return (double)__uint_as_float((uint32_t)((const uint16_t*)data)[i]
                                     << 16);
    case HRT_DTYPE_F32:
      return (double)((const float*)data)[i];
    case HRT_DTYPE_F64:
      return ((const double*)data)[i];
    case HRT_DTYPE_I8:
      return (double)((const int8_t*)data)[i];
    case HRT_DTYPE_U8:
      return (double)((const uint8_t*)data)[i];
    case HRT_DTYPE_I16:
      return (double)((const int16_t*)data)[i];
    case HRT_DTYPE_U16:
      return (double)((const uint16_t*)data)[i];
    case HRT_DTYPE_I32:
      return (double)((const int32_t*)data)[i];
    case HRT_DTYPE_U32:
      return (double)((const uint32_t*)data)[i];
    case HRT_DTYPE_I64:
      return (double)((const long long*)data)[i];
    case HRT_DTYPE_U64:
      return (double)((const unsigned long long*)data)[i];
    default:  // HRT_DTYPE_BOOL
      return ((const uint8_t*)data)[i] != 0 ? 1.0 : 0.0;
  }
}

// Folds one element into `s`: NaN and +/-inf are counted; a finite value is
// counted as zero or not (-0 folded in as +0) and goes into min, max and
// the sums.
__device__ static inline void hrt_summary_fold(hrt_summary_t* s, double v) {
  if (isnan(v)) {
    ++s->nan_count;
  } else if (v == hrt_inf()) {
    ++s->pos_inf_count;
  } else if (v == -hrt_inf()) {
    ++s->neg_inf_count;
  } else {
    if (v == 0.0) {
      ++s->zero_count;
      v = 0.0;
    }
    s->min = v < s->min ? v : s->min;
    s->max = v > s->max ? v : s->max;
    s->sum = __dadd_rn(s->sum, v);
    s->sum_squares = __dadd_rn(s->sum_squares, __dmul_rn(v, v));
  }
}

// Folds partial `from` into `into`.
__device__ static inline void hrt_summary_merge(hrt_summary_t* into,
                                                const hrt_summary_t* from) {
  into->count += from->count;
  into->nan_count += from->nan_count;
  into->pos_inf_count += from->pos_inf_count;
  into->neg_inf_count += from->neg_inf_count;
  into->zero_count += from->zero_count;
  into->min = from->min < into->min ? from->min : into->min;
  into->max = from->max > into->max ? from->max : into->max;
  into->sum = __dadd_rn(into->sum, from->sum);
  into->sum_squares = __dadd_rn(into->sum_squares, from->sum_squares);
}

// Merges the block's partials in `shared` (blockDim.x of them, a power of
// two) in a tree; shared[0] then holds the block's, for every thread.
__device__ static void hrt_summary_block_reduce(hrt_summary_t* shared,
                                                const hrt_summary_t* mine) {
  const uint32_t t = threadIdx.x;
  shared[t] = *mine;
  __syncthreads();
  for (uint32_t width = blockDim.x / 2; width > 0; width /= 2) {
    if (t < width) hrt_summary_merge(&shared[t], &shared[t + width]);
    __syncthreads();
  }
}

// partials[block] = the partial summary of the block's elements of the
// `count` elements of `type` at `data`: those of its threads, grid-stride.
extern "C" __global__ void hrt_summary_partial(const void* data, uint64_t count,
                                               hrt_summary_t* partials,
                                               uint32_t type) {
  __shared__ hrt_summary_t shared[HRT_BUILTIN_BLOCK];
  hrt_summary_t mine;
  hrt_summary_empty(&mine);
  HRT_GRID_STRIDE(i, count) {
    ++mine.count;
    hrt_summary_fold(&mine, hrt_summary_load(data, i, type));
  }
  hrt_summary_block_reduce(shared, &mine);
  if (threadIdx.x == 0) partials[hrt_block_index()] = shared[0];
}

// *out = the summary in `mode` of the `partial_count` partials (launched as
// one block): min and max NaN without a finite element; in HEALTH mode
// zero_count 0 and min, max, sum and sum_squares NaN.
extern "C" __global__ void hrt_summary_final(const hrt_summary_t* partials,
                                             uint32_t partial_count,
                                             hrt_summary_t* out,
                                             uint32_t mode) {
  __shared__ hrt_summary_t shared[HRT_BUILTIN_BLOCK];
  hrt_summary_t mine;
  hrt_summary_empty(&mine);
  for (uint32_t i = threadIdx.x; i < partial_count; i += blockDim.x) {
    hrt_summary_merge(&mine, &partials[i]);
  }
  hrt_summary_block_reduce(shared, &mine);
  if (threadIdx.x != 0) return;
  hrt_summary_t result = shared[0];
  const double nan = __longlong_as_double(0x7ff8000000000000LL);
  if (mode == HRT_TRACE_HEALTH) {
    result.zero_count = 0;
    result.min = result.max = result.sum = result.sum_squares = nan;
  } else if (result.min > result.max) {
    result.min = result.max = nan;
  }
  *out = result;
}

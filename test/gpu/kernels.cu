// Test kernels for the CUDA device, compiled by scripts/build-cuda-ptx.js
// into kernels.ptx (and kernels_sm90.cubin / kernels_sm90.fatbin for the
// H200 check) and committed, so that neither the C tests nor the GPU
// machine need nvcc. The fake driver (test/support/fakecuda) implements the
// same names with the same results on the host.
#include <stdint.h>

// out[i] = a[i] + b[i] for the threads the grid covers (one element per
// thread, no loop): a grid that is too small leaves the tail untouched.
extern "C" __global__ void vector_add_f32(const float* a, const float* b,
                                          float* out, uint32_t n) {
  const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

// out[i] = i for every i < n, whatever the grid and block shapes: each
// thread starts at its linear index in the whole 3-D launch and strides by
// the number of threads in it.
extern "C" __global__ void write_index_u32(uint32_t* out, uint32_t n) {
  const uint64_t block =
      blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
  const uint64_t threads = (uint64_t)blockDim.x * blockDim.y * blockDim.z;
  const uint64_t thread =
      threadIdx.x + (uint64_t)blockDim.x * (threadIdx.y + (uint64_t)blockDim.y * threadIdx.z);
  const uint64_t stride = (uint64_t)gridDim.x * gridDim.y * gridDim.z * threads;
  for (uint64_t i = block * threads + thread; i < n; i += stride) out[i] = (uint32_t)i;
}

// y[i] = a * x[i] + i for every i < n, whatever the grid (grid-stride).
// Its 64-bit integer and double scalars, and a pointer after them, need the
// module to declare its parameters: ["buffer", "i64", "f64", "buffer"].
extern "C" __global__ void scale_offset_f64(const double* x, int64_t n,
                                            double a, double* y) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = a * x[i] + (double)i;
  }
}

// Stores far past `out` (16 TiB on), where nothing is mapped: the launch
// fails with CUDA_ERROR_ILLEGAL_ADDRESS and the context is lost.
extern "C" __global__ void fault_illegal_address(uint32_t* out, uint32_t value) {
  volatile uint32_t* far = out + (1ull << 42);
  far[threadIdx.x] = value;
}

// Kernels that test the CUDA model itself (test_cuda_model.c): well-formed
// ones, one with a missing barrier, and two that no GPU should run (their
// barriers are skipped by some threads). Host build only.
#include <stdint.h>

// out[b] = the sum of block b's blockDim.x inputs, by a tree in shared
// memory; blocks numbered x-fastest.
extern "C" __global__ void block_sum_u32(const uint32_t* in, uint32_t* out) {
  __shared__ uint32_t partial[1024];
  const uint32_t b =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t t = threadIdx.x;
  partial[t] = in[b * blockDim.x + t];
  __syncthreads();
  for (uint32_t width = blockDim.x / 2; width > 0; width /= 2) {
    if (t < width) partial[t] += partial[t + width];
    __syncthreads();
  }
  if (t == 0) out[b] = partial[0];
}

// out[6 * i .. 6 * i + 5] = thread i's threadIdx x, y, z and blockIdx x,
// y, z, threads numbered x-fastest within blocks, blocks x-fastest; and
// dims = blockDim, gridDim.
extern "C" __global__ void indices_u32(uint32_t* out, uint32_t* dims) {
  const uint32_t block =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t thread =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t i = block * blockDim.x * blockDim.y * blockDim.z + thread;
  out[6 * i + 0] = threadIdx.x;
  out[6 * i + 1] = threadIdx.y;
  out[6 * i + 2] = threadIdx.z;
  out[6 * i + 3] = blockIdx.x;
  out[6 * i + 4] = blockIdx.y;
  out[6 * i + 5] = blockIdx.z;
  if (i == 0) {
    dims[0] = blockDim.x;
    dims[1] = blockDim.y;
    dims[2] = blockDim.z;
    dims[3] = gridDim.x;
    dims[4] = gridDim.y;
    dims[5] = gridDim.z;
  }
}

// out[2t] = what thread t reads of thread t + 1's slot after both wrote
// 100 + their index, out[2t + 1] what it reads of thread t - 1's after both
// wrote 200 + theirs: the values written with `barriers`, and without them
// whatever the slots held before.
extern "C" __global__ void neighbours_u32(uint32_t* out, uint32_t barriers) {
  __shared__ uint32_t slot[1024];
  const uint32_t t = threadIdx.x, n = blockDim.x;
  slot[t] = 100 + t;
  if (barriers) __syncthreads();
  const uint32_t next = slot[(t + 1) % n];
  __syncthreads();
  slot[t] = 200 + t;
  if (barriers) __syncthreads();
  const uint32_t previous = slot[(t + n - 1) % n];
  out[2 * t] = next;
  out[2 * t + 1] = previous;
}

// Thread `quitter` returns before the barrier the others wait at.
extern "C" __global__ void early_return(uint32_t* out, uint32_t quitter) {
  if (threadIdx.x == quitter) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Odd and even threads wait at different barriers.
extern "C" __global__ void split_barriers(uint32_t* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

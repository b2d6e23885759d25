// The CUDA execution model on the CPU, for host builds of our own kernels.
//
// A kernel file (src/hal/cuda/kernels/*.cu) is compiled a second time as
// C++17 with this header included first (-include cuda_model.h,
// -ffp-contract=off); its kernels are listed with HRT_MODEL_KERNEL and the
// driver test double (test/support/fakecuda) runs them by name with the
// grid, block and parameters the driver code passed. The PTX halrt embeds
// and this build come from the same file.
//
// The model: gridDim/blockDim/blockIdx/threadIdx as CUDA defines them; the
// blocks of a grid run one after the other on the calling thread, each
// block's threads as cooperative fibers that switch only at
// __syncthreads(); a barrier releases when every thread of the block
// waits at the same one (file and line). Threads run in index order or
// its reverse, the order flipping at each barrier and blocks next to each
// other starting in opposite orders, so a missing barrier shows whichever
// way the threads depend on each other (in a grid of two blocks or more). A barrier some threads skip (a thread ends, or waits at
// another one) is reported as an error naming the block, the threads and
// the barriers: on a GPU it would hang or misbehave. `__shared__`
// variables are one instance per block in flight (per host thread). Built
// with ThreadSanitizer, the model orders threads only as CUDA does, so a
// missing barrier is also a data race report (cuda_model.cc).
//
// What our kernels may use here (anything else does not compile): the
// built-in variables, __syncthreads, static __shared__ arrays, the
// intrinsics below, <math.h>. No warp intrinsics, atomics, dynamic shared
// memory or cooperative groups: none is emulated.
//
// Threads: a launch runs on the calling thread (a fake stream's thread);
// launches on different threads are independent.
#ifndef HRT_TEST_CUDA_MODEL_H_
#define HRT_TEST_CUDA_MODEL_H_

#ifndef __cplusplus
#error "cuda_model.h is for C++ host builds of .cu files"
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_model_launch.h"

struct uint3 {
  unsigned int x, y, z;
};
typedef uint3 dim3;

namespace hrt_model {

// The running block's coordinates and the launch's shape (this thread's).
extern thread_local uint3 block_index;
extern thread_local dim3 grid_dim;
extern thread_local dim3 block_dim;

// The running fiber's thread index in its block.
uint3 thread_index();

// Waits at the barrier at `file`:`line` until every thread of the block
// does; returns at once outside a launch.
void barrier(const char* file, int line);

// Runs the grid in `shape`, calling body(args) once per thread; 0, or -1
// with `message` describing a barrier some threads skipped.
int run_grid(const hrt_model_shape_t* shape, void (*body)(void*), void* args,
             char* message, size_t message_size);

// The host-build entry of kernel F: its parameters' sizes as the launch
// must pass them, and a run that unpacks them into F's arguments.
template <auto F>
struct entry;

template <typename... A, void (*F)(A...)>
struct entry<F> {
  static_assert((std::is_trivially_copyable_v<A> && ...),
                "kernel parameters are copied by their bytes");
  static_assert(sizeof...(A) <= HRT_MODEL_MAX_PARAMS, "too many parameters");

  static int run(const uint8_t* data, const uint16_t* offsets,
                 const hrt_model_shape_t* shape, char* message,
                 size_t message_size) {
    std::tuple<A...> args;
    unpack(args, data, offsets, std::index_sequence_for<A...>());
    return run_grid(
        shape, [](void* p) { std::apply(F, *static_cast<std::tuple<A...>*>(p)); },
        &args, message, message_size);
  }

  template <size_t... I>
  static void unpack(std::tuple<A...>& args, const uint8_t* data,
                     const uint16_t* offsets, std::index_sequence<I...>) {
    (memcpy(&std::get<I>(args), data + offsets[I], sizeof(A)), ...);
  }

  static constexpr hrt_model_kernel_t describe(const char* name) {
    return hrt_model_kernel_t{name,
                              sizeof...(A),
                              {(uint8_t)sizeof(A)...},
                              {std::is_pointer_v<A>...},
                              &run};
  }
};

}  // namespace hrt_model

#define HRT_MODEL_KERNEL(name) ::hrt_model::entry<&name>::describe(#name)

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __syncthreads() ::hrt_model::barrier(__FILE__, __LINE__)
#define threadIdx (::hrt_model::thread_index())
#define blockIdx (::hrt_model::block_index)
#define gridDim (::hrt_model::grid_dim)
#define blockDim (::hrt_model::block_dim)

// Round-to-nearest arithmetic: what IEEE operations on the host do (with
// -ffp-contract=off nothing is fused unless fmaf says so).
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }

inline float __uint_as_float(unsigned int bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}
inline float __int_as_float(int bits) {
  return __uint_as_float((unsigned int)bits);
}
inline double __longlong_as_double(long long bits) {
  double value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

#endif  // HRT_TEST_CUDA_MODEL_H_

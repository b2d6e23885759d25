// The C side of the CUDA model (cuda_model.h): the host builds of our
// kernel files, found by name and launched by the driver test double.
// Everything here is immutable after load and may be used from any thread;
// a launch runs on the calling thread.
#ifndef HRT_TEST_CUDA_MODEL_LAUNCH_H_
#define HRT_TEST_CUDA_MODEL_LAUNCH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HRT_MODEL_MAX_PARAMS 48

typedef struct hrt_model_shape_s {
  uint32_t grid[3];
  uint32_t block[3];
} hrt_model_shape_t;

// A kernel of a host build: its parameters as C++ declares them (their
// sizes, and which are pointers) and its run, which copies parameter i from
// data + offsets[i] and runs the grid; 0, or -1 with `message` set.
typedef struct hrt_model_kernel_s {
  const char* name;
  uint32_t param_count;
  uint8_t param_sizes[HRT_MODEL_MAX_PARAMS];
  bool param_pointers[HRT_MODEL_MAX_PARAMS];
  int (*run)(const uint8_t* data, const uint16_t* offsets,
             const hrt_model_shape_t* shape, char* message,
             size_t message_size);
} hrt_model_kernel_t;

// The kernel named `name` among `count` kernels, or NULL.
const hrt_model_kernel_t* hrt_model_find(const hrt_model_kernel_t* kernels,
                                         size_t count, const char* name);

// The kernel named `name` (its extern "C" name) of src/hal/cuda/kernels/
// builtin.cu's host build, or NULL.
const hrt_model_kernel_t* hrt_model_builtin_kernel(const char* name);

#ifdef __cplusplus
}
#endif

#endif  // HRT_TEST_CUDA_MODEL_LAUNCH_H_

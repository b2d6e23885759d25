// The host build of kernels.cu, for test_cuda_model.c.
#include "../../support/cuda_model/cuda_model.h"
// After the model, which it needs.
#include "kernels.cu"

namespace {

constexpr hrt_model_kernel_t kKernels[] = {
    HRT_MODEL_KERNEL(block_sum_u32),  HRT_MODEL_KERNEL(indices_u32),
    HRT_MODEL_KERNEL(neighbours_u32), HRT_MODEL_KERNEL(early_return),
    HRT_MODEL_KERNEL(split_barriers),
};

}  // namespace

extern "C" const hrt_model_kernel_t* model_test_kernel(const char* name) {
  return hrt_model_find(kKernels, sizeof(kKernels) / sizeof(kKernels[0]), name);
}

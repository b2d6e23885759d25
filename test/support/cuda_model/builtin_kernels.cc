// The host build of src/hal/cuda/kernels/builtin.cu (cuda_model.h): every
// kernel of the file, by name. test_cuda checks that each `.entry` of the
// embedded PTX is listed here, so a kernel added there must be added here.
#include "cuda_model.h"
// After the model, which it needs.
#include "hal/cuda/kernels/builtin.cu"

namespace {

constexpr hrt_model_kernel_t kKernels[] = {
    HRT_MODEL_KERNEL(add_f32),
    HRT_MODEL_KERNEL(sub_f32),
    HRT_MODEL_KERNEL(mul_f32),
    HRT_MODEL_KERNEL(div_f32),
    HRT_MODEL_KERNEL(max_f32),
    HRT_MODEL_KERNEL(add_i32),
    HRT_MODEL_KERNEL(sub_i32),
    HRT_MODEL_KERNEL(mul_i32),
    HRT_MODEL_KERNEL(div_i32),
    HRT_MODEL_KERNEL(max_i32),
    HRT_MODEL_KERNEL(fill_u32),
    HRT_MODEL_KERNEL(copy_u8),
    HRT_MODEL_KERNEL(axpy_f32),
    HRT_MODEL_KERNEL(relu_f32),
    HRT_MODEL_KERNEL(matmul_f32),
    HRT_MODEL_KERNEL(softmax_rows_f32),
    HRT_MODEL_KERNEL(reduce_sum_f32),
    HRT_MODEL_KERNEL(binary_f32),
    HRT_MODEL_KERNEL(unary_f32),
    HRT_MODEL_KERNEL(conv2d_f32),
    HRT_MODEL_KERNEL(pool2d_f32),
    HRT_MODEL_KERNEL(bmm_f32),
    HRT_MODEL_KERNEL(strided_copy_f32),
    HRT_MODEL_KERNEL(chain_f32),
    HRT_MODEL_KERNEL(chain_health_f32),
    HRT_MODEL_KERNEL(resize2d_f32),
    HRT_MODEL_KERNEL(where_f32),
    HRT_MODEL_KERNEL(hrt_summary_partial),
    HRT_MODEL_KERNEL(hrt_summary_final),
};

}  // namespace

extern "C" const hrt_model_kernel_t* hrt_model_builtin_kernel(
    const char* name) {
  return hrt_model_find(kKernels, sizeof(kKernels) / sizeof(kKernels[0]), name);
}

#include "hal/builtin_signatures.h"

#include <string.h>

#define F32 HRT_HAL_ELEMENT_TYPE_F32
#define I32 HRT_HAL_ELEMENT_TYPE_I32
#define U32 HRT_HAL_ELEMENT_TYPE_U32
// An operand of `type` holding constants[a] elements, or constants[a]*[b].
#define IN(type, a)                 \
  {                                 \
    type, false, false, 1, { a, 0 } \
  }
#define OUT(type, a)               \
  {                                \
    type, false, true, 1, { a, 0 } \
  }
#define IN2(type, a, b)             \
  {                                 \
    type, false, false, 2, { a, b } \
  }
#define OUT2(type, a, b)           \
  {                                \
    type, false, true, 2, { a, b } \
  }
#define BINARY(name, type)                                    \
  {                                                           \
    name, 3, 1, 0, { IN(type, 0), IN(type, 0), OUT(type, 0) } \
  }

static const hrt_builtin_signature_t hrt_builtin_signatures[] = {
    {"fill_u32", 1, 2, 0, {OUT(U32, 0)}},
    {"copy_u8",
     2,
     1,
     0,
     {{0, true, false, 1, {0, 0}}, {0, true, true, 1, {0, 0}}}},
    BINARY("add_f32", F32),
    BINARY("sub_f32", F32),
    BINARY("mul_f32", F32),
    BINARY("div_f32", F32),
    BINARY("max_f32", F32),
    BINARY("add_i32", I32),
    BINARY("sub_i32", I32),
    BINARY("mul_i32", I32),
    BINARY("div_i32", I32),
    BINARY("max_i32", I32),
    {"axpy_f32", 3, 2, 1u << 1, {IN(F32, 0), IN(F32, 0), OUT(F32, 0)}},
    {"relu_f32", 2, 1, 0, {IN(F32, 0), OUT(F32, 0)}},
    {"matmul_f32", 3, 3, 0, {IN2(F32, 0, 1), IN2(F32, 1, 2), OUT2(F32, 0, 2)}},
    {"softmax_rows_f32", 2, 2, 0, {IN2(F32, 0, 1), OUT2(F32, 0, 1)}},
    {"reduce_sum_f32", 2, 2, 0, {IN2(F32, 0, 1), OUT(F32, 0)}},
};

const hrt_builtin_signature_t* hrt_builtin_signature_find(const char* name) {
  size_t count =
      sizeof(hrt_builtin_signatures) / sizeof(hrt_builtin_signatures[0]);
  for (size_t i = 0; i < count; ++i) {
    if (strcmp(hrt_builtin_signatures[i].name, name) == 0) {
      return &hrt_builtin_signatures[i];
    }
  }
  return NULL;
}

uint64_t hrt_builtin_binding_min_bytes(const hrt_builtin_signature_t* signature,
                                       uint32_t index,
                                       const uint32_t* constants) {
  const hrt_builtin_binding_t* binding = &signature->bindings[index];
  uint64_t count = 1;
  for (uint8_t i = 0; i < binding->factor_count; ++i) {
    count *= constants[binding->factors[i]];  // < 2^64: two 32-bit factors
  }
  uint64_t size =
      binding->any_type ? 1 : hrt_hal_element_type_size(binding->element_type);
  return count > UINT64_MAX / size ? UINT64_MAX : count * size;
}

#include "hal/builtin_signatures.h"

#include <string.h>

#define F32 HRT_HAL_ELEMENT_TYPE_F32
#define I32 HRT_HAL_ELEMENT_TYPE_I32
#define U32 HRT_HAL_ELEMENT_TYPE_U32
// An operand of `type` holding constants[a] elements, or constants[a]*[b].
#define IN(type, a) {type, false, false, 1, {a}, 0, 0, 0}
#define OUT(type, a) {type, false, true, 1, {a}, 0, 0, 0}
#define IN2(type, a, b) {type, false, false, 2, {a, b}, 0, 0, 0}
#define OUT2(type, a, b) {type, false, true, 2, {a, b}, 0, 0, 0}
#define BYTES(written) {0, true, written, 1, {0}, 0, 0, 0}
// binary_f32's strided inputs (dims at constants 1..6, strides after them)
// and its dense output.
#define DIMS6 {1, 2, 3, 4, 5, 6}
#define STRIDED(base) {F32, false, false, 6, DIMS6, base, 0, 0}
#define DENSE6 {F32, false, true, 6, DIMS6, 0, 0, 0}
#define BINARY(name, type) \
  {name, 3, 1, 0, {IN(type, 0), IN(type, 0), OUT(type, 0)}, 0, 0, NULL}
// conv2d_f32 and pool2d_f32 (NCHW): products of their size constants.
#define F32_OF(written, ...) {F32, false, written, 4, {__VA_ARGS__}, 0, 0, 0}

bool hrt_builtin_conv2d_valid(const uint32_t* k) {
  // N, C, H, W, M, Cg, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW
  return k[5] != 0 && k[1] != 0 && k[1] % k[5] == 0 &&
         k[4] % (k[1] / k[5]) == 0 && k[10] && k[11] && k[14] && k[15];
}

bool hrt_builtin_chain_valid(const uint32_t* k) {
  if (k[0] < 1 || k[0] > 6) return false;
  for (uint32_t j = 0; j < k[0]; ++j) {
    const uint32_t word = k[13 + 3 * j], op = word & 0xffu;
    const uint32_t operand = word >> 8;
    const bool unary = op < 14 && operand == 0;
    const bool binary = ((op >= 16 && op < 26) || (op >= 32 && op < 42)) &&
                        operand <= 3;
    if (!unary && !binary) return false;
    float offset;
    memcpy(&offset, &k[14 + 3 * j], sizeof(offset));
    if (operand == 3 && !(offset >= 0 && offset < 16777216.0f &&
                          (float)(uint32_t)offset == offset)) {
      return false;
    }
  }
  return true;
}

uint32_t hrt_builtin_chain_y_offset(const uint32_t* k) {
  uint32_t offset = 0;
  for (uint32_t j = 0; j < k[0] && j < 6; ++j) {
    const uint32_t* step = k + 13 + 3 * j;
    float alpha;
    memcpy(&alpha, &step[1], sizeof(alpha));
    // Offsets a valid chain cannot have are left to hrt_builtin_chain_valid.
    if (step[0] >> 8 == 3 && alpha > (float)offset && alpha < 16777216.0f) {
      offset = (uint32_t)alpha;
    }
  }
  return offset;
}

// resize2d_f32: table entries of 3 floats.
static bool hrt_builtin_resize2d_valid(const uint32_t* k) { return k[5] == 3; }

// pool2d_f32: strides positive.
static bool hrt_builtin_pool2d_valid(const uint32_t* k) {
  return k[8] != 0 && k[9] != 0;
}

static const hrt_builtin_signature_t hrt_builtin_signatures[] = {
    {"fill_u32", 1, 2, 0, {OUT(U32, 0)}, 0, 0, NULL},
    {"copy_u8", 2, 1, 0, {BYTES(false), BYTES(true)}, 0, 0, NULL},
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
    {"axpy_f32", 3, 2, 1u << 1, {IN(F32, 0), IN(F32, 0), OUT(F32, 0)}, 0, 0, NULL},
    {"relu_f32", 2, 1, 0, {IN(F32, 0), OUT(F32, 0)}, 0, 0, NULL},
    {"matmul_f32",
     3,
     3,
     0,
     {IN2(F32, 0, 1), IN2(F32, 1, 2), OUT2(F32, 0, 2)},
     0,
     0,
     NULL},
    {"softmax_rows_f32", 2, 2, 0, {IN2(F32, 0, 1), OUT2(F32, 0, 1)}, 0, 0, NULL},
    {"reduce_sum_f32", 2, 2, 0, {IN2(F32, 0, 1), OUT(F32, 0)}, 0, 0, NULL},
    {"binary_f32", 3, 19, 0, {STRIDED(7), STRIDED(13), DENSE6}, 0, 10, NULL},
    {"unary_f32", 2, 4, 3u << 2, {IN(F32, 0), OUT(F32, 0)}, 1, 14, NULL},
    // x N·C·H·W, w M·Cg·KH·KW, bias M, out N·M·OH·OW
    {"conv2d_f32",
     4,
     16,
     0,
     {F32_OF(false, 0, 1, 2, 3), F32_OF(false, 4, 5, 6, 7), IN(F32, 4),
      F32_OF(true, 0, 4, 8, 9)},
     0,
     0,
     hrt_builtin_conv2d_valid},
    // x N·C·H·W, out N·C·OH·OW; op 0 max, 1 average inside, 2 average
    // all, 3 max keeping NaN
    {"pool2d_f32",
     2,
     13,
     0,
     {F32_OF(false, 0, 1, 2, 3), F32_OF(true, 0, 1, 4, 5)},
     12,
     4,
     hrt_builtin_pool2d_valid},
    // a [batch, M, K] and b [batch, K, N] at strides, c dense batch·M·N
    {"bmm_f32",
     3,
     10,
     0,
     {{F32, false, false, 3, {0, 1, 2}, 4, 0, 0},
      {F32, false, false, 3, {0, 2, 3}, 7, 0, 0},
      {F32, false, true, 3, {0, 1, 3}, 0, 0, 0}},
     0,
     0,
     NULL},
    // src and dst at offsets and strides over dims (constants 2..7)
    {"strided_copy_f32",
     2,
     20,
     0,
     {{F32, false, false, 6, {2, 3, 4, 5, 6, 7}, 8, 1, 0},
      {F32, false, true, 6, {2, 3, 4, 5, 6, 7}, 14, 2, 0}},
     0,
     0,
     NULL},
    // x dense, y at strides, out dense over dims (constants 1..6); each
    // step's alpha and beta are f32
    {"chain_f32",
     3,
     31,
     0x6db6c000u,
     {{F32, false, false, 6, DIMS6, 0, 0, 0}, STRIDED(7), DENSE6},
     0,
     0,
     hrt_builtin_chain_valid},
    // chain_f32's, and the counts: a slot per workgroup
    {"chain_health_f32",
     4,
     31,
     0x6db6c000u,
     {{F32, false, false, 6, DIMS6, 0, 0, 0},
      STRIDED(7),
      DENSE6,
      {U32, false, true, 0, {0}, 0, 0, HRT_BUILTIN_CHAIN_COUNTS}},
     0,
     0,
     hrt_builtin_chain_valid},
    // x P·H·W, rows OH·3, cols OW·3, out P·OH·OW; constant 5 is 3
    {"resize2d_f32",
     4,
     6,
     0,
     {{F32, false, false, 3, {0, 1, 2}, 0, 0, 0},
      IN2(F32, 3, 5),
      IN2(F32, 4, 5),
      {F32, false, true, 3, {0, 3, 4}, 0, 0, 0}},
     0,
     0,
     hrt_builtin_resize2d_valid},
    // cond, a, b at strides over dims (constants 0..5), out dense
    {"where_f32",
     4,
     24,
     0,
     {{F32, false, false, 6, {0, 1, 2, 3, 4, 5}, 6, 0, 0},
      {F32, false, false, 6, {0, 1, 2, 3, 4, 5}, 12, 0, 0},
      {F32, false, false, 6, {0, 1, 2, 3, 4, 5}, 18, 0, 0},
      {F32, false, true, 6, {0, 1, 2, 3, 4, 5}, 0, 0, 0}},
     0,
     0,
     NULL},
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

// a * b, saturated at UINT64_MAX.
static uint64_t hrt_saturating_product(uint64_t a, uint64_t b) {
  return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

uint64_t hrt_builtin_binding_min_bytes(const hrt_builtin_signature_t* signature,
                                       uint32_t index,
                                       const uint32_t* constants,
                                       const uint32_t* workgroup_count) {
  const hrt_builtin_binding_t* binding = &signature->bindings[index];
  uint64_t count = 1;
  if (binding->per_workgroup) {
    count = binding->per_workgroup;
    for (int i = 0; i < 3; ++i) {
      count = hrt_saturating_product(count, workgroup_count[i]);
    }
  } else if (binding->stride_base) {
    // 1 + the sum of (dim - 1) * stride, saturated.
    for (uint8_t i = 0; i < binding->factor_count && count != 0; ++i) {
      const uint64_t dim = constants[binding->factors[i]];
      const uint64_t step =
          dim == 0 ? 0 : (dim - 1) * constants[binding->stride_base + i];
      count = dim == 0                    ? 0
              : step > UINT64_MAX - count ? UINT64_MAX
                                          : count + step;
    }
    uint64_t offset =
        binding->offset_index ? constants[binding->offset_index - 1] : 0;
    // The chain kernels' y: also read at its steps' offsets (operand 3).
    if (signature->check == hrt_builtin_chain_valid) {
      offset = hrt_builtin_chain_y_offset(constants);
    }
    if (count != 0) {
      count = offset > UINT64_MAX - count ? UINT64_MAX : count + offset;
    }
  } else {
    for (uint8_t i = 0; i < binding->factor_count; ++i) {
      count = hrt_saturating_product(count, constants[binding->factors[i]]);
    }
  }
  uint64_t size =
      binding->any_type ? 1 : hrt_hal_element_type_size(binding->element_type);
  return hrt_saturating_product(count, size);
}

bool hrt_builtin_op_valid(const hrt_builtin_signature_t* signature,
                          const uint32_t* constants) {
  return signature->op_limit == 0 ||
         constants[signature->op_constant] < signature->op_limit;
}

// What the built-in kernels expect of their bindings, for every device.
//
// The built-in kernels have the same names, bindings and constants on every
// device (docs/kernels.md). This table states, per binding, the element type
// it holds and how many elements the constants imply, so a module can be
// validated (and its dispatch outputs traced) before anything runs.
// Immutable; any thread.
#ifndef HRT_HAL_BUILTIN_SIGNATURES_H_
#define HRT_HAL_BUILTIN_SIGNATURES_H_

#include <stdbool.h>
#include <stdint.h>

#include "hal/element_type.h"

#define HRT_BUILTIN_MAX_BINDINGS 4

typedef struct hrt_builtin_binding_s {
  // The element type the binding holds; `any_type` accepts every dtype
  // (byte-wise kernels, which then count bytes).
  hrt_hal_element_type_t element_type;
  bool any_type;
  bool written;  // the kernel writes this binding
  // Element count = product of constants[factors[0..factor_count)]; for a
  // strided binding (stride_base != 0) the factors are dimensions read at
  // element strides constants[stride_base + i], so the count is 1 + the
  // last element's offset (0 when a dimension is 0).
  uint8_t factor_count;
  uint8_t factors[6];
  uint8_t stride_base;
  // Strided bindings: when not 0, constants[offset_index - 1] elements come
  // first (the count grows by it when there is an element).
  uint8_t offset_index;
  // When not 0: the count is this many per workgroup of the dispatch
  // (factors unused).
  uint8_t per_workgroup;
} hrt_builtin_binding_t;

typedef struct hrt_builtin_signature_s {
  const char* name;
  uint32_t binding_count;
  uint32_t constant_count;
  // Bit i set: constant i is an f32 (passed as its bits); else an integer.
  uint32_t float_constants;
  hrt_builtin_binding_t bindings[HRT_BUILTIN_MAX_BINDINGS];
  // When op_limit != 0, constant op_constant selects an operation and must
  // be below op_limit.
  uint8_t op_constant;
  uint8_t op_limit;
  // Further rules on the constants (NULL: none).
  bool (*check)(const uint32_t* constants);
} hrt_builtin_signature_t;

// The signature of built-in kernel `name`, or NULL.
const hrt_builtin_signature_t* hrt_builtin_signature_find(const char* name);

// The bytes binding `index` must hold at least, given the constants and
// the dispatch's workgroup count[3] (element count times element size; the
// byte count for `any_type`).
uint64_t hrt_builtin_binding_min_bytes(const hrt_builtin_signature_t* signature,
                                       uint32_t index,
                                       const uint32_t* constants,
                                       const uint32_t* workgroup_count);

// Whether the constants select an operation the kernel has (always true
// for kernels without one); signature->check says whether they meet its
// other rules (docs/kernels.md, "Validation").
bool hrt_builtin_op_valid(const hrt_builtin_signature_t* signature,
                          const uint32_t* constants);

// conv2d_f32's rules: C >= 1, Cg >= 1 divides C, the groups (C / Cg)
// divide M, strides and dilations positive.
bool hrt_builtin_conv2d_valid(const uint32_t* constants);

// chain_f32's rules: 1 to 6 steps, each a unary op (0..13, operand 0) or a
// binary one (16..25: t op v; 32..41: v op t) of operand 0 (x), 1 (y), 2
// (alpha) or 3 (y at the element offset alpha: a whole number below
// 2^24). Also chain_health_f32's.
bool hrt_builtin_chain_valid(const uint32_t* constants);

// The largest offset an operand-3 step of a valid chain reads y at (0 when
// none): y holds that many elements more than its strides reach.
uint32_t hrt_builtin_chain_y_offset(const uint32_t* constants);

// chain_health_f32's counts per workgroup: per step (6), the NaN, +Inf and
// -Inf after it (u32 each; steps past the chain's count 0).
#define HRT_BUILTIN_CHAIN_COUNTS 18

#endif  // HRT_HAL_BUILTIN_SIGNATURES_H_

// Conversions to and from the 16-bit float formats f16 (IEEE binary16) and
// bf16 (the upper half of an f32). A double is rounded once, to nearest
// with ties to even (no double rounding through f32), exactly as
// lib/half.js encodes numbers; ±Infinity beyond the largest finite value,
// NaN as the quiet NaN 0x7E00 (f16) or 0x7FC0 (bf16). Every f16 and bf16
// value is exact as a float.
#ifndef HRT_BASE_HALF_H_
#define HRT_BASE_HALF_H_

#include <stdint.h>

uint16_t hrt_f64_to_f16(double value);
float hrt_f16_to_f32(uint16_t bits);
uint16_t hrt_f64_to_bf16(double value);
float hrt_bf16_to_f32(uint16_t bits);

#endif  // HRT_BASE_HALF_H_

// Conversions between f32 and the 16-bit float formats f16 (IEEE binary16)
// and bf16 (the upper half of an f32), rounding to nearest even.
#ifndef HRT_BASE_HALF_H_
#define HRT_BASE_HALF_H_

#include <stdint.h>

uint16_t hrt_f32_to_f16(float value);
float hrt_f16_to_f32(uint16_t bits);
uint16_t hrt_f32_to_bf16(float value);
float hrt_bf16_to_f32(uint16_t bits);

#endif  // HRT_BASE_HALF_H_

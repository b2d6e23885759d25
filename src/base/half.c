#include "base/half.h"

#include <math.h>
#include <string.h>

static uint32_t hrt_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float hrt_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t hrt_f32_to_bf16(float value) {
  uint32_t bits = hrt_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return (uint16_t)((bits >> 16) | 0x40u);  // quiet NaN
  }
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

float hrt_bf16_to_f32(uint16_t bits) { return hrt_float((uint32_t)bits << 16); }

uint16_t hrt_f32_to_f16(float value) {
  uint32_t bits = hrt_bits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);   // NaN
  if (magnitude >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // inf
  if (magnitude < 0x38800000u) {
    // Below the smallest normal f16: a multiple of 2^-24, rounded to even.
    return (uint16_t)(sign |
                      (uint32_t)lrintf(hrt_float(magnitude) * 16777216.0f));
  }
  uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

float hrt_f16_to_f32(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {
    float magnitude = (float)mantissa / 16777216.0f;  // subnormal: m * 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return hrt_float(sign | 0x7F800000u | (mantissa << 13));
  return hrt_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

#include "base/half.h"

#include <math.h>
#include <string.h>

static float hrt_float(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

// `value` rounded once, to nearest with ties to even, to a binary float of
// `exponent_bits` and `mantissa_bits` (f16: 5 and 10, bf16: 8 and 7), as its
// bits; beyond the largest finite value it is infinite, NaN is the quiet NaN
// without sign. lib/half.js `encode` is the same algorithm step for step
// (every step here is exact but the one rounding).
static uint16_t hrt_half_from_f64(double value, int exponent_bits,
                                  int mantissa_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const uint32_t infinity = ((1u << exponent_bits) - 1) << mantissa_bits;
  if (isnan(value)) return (uint16_t)(infinity | (1u << (mantissa_bits - 1)));
  uint32_t sign = signbit(value) ? 1u << (exponent_bits + mantissa_bits) : 0;
  double magnitude = fabs(value);
  if (isinf(magnitude)) return (uint16_t)(sign | infinity);
  if (magnitude < ldexp(1.0, 1 - bias)) {
    // Subnormal or zero: a count of the smallest steps. Rounding up to
    // 2^mantissa_bits steps gives the smallest normal, as wanted.
    return (uint16_t)(sign | (uint32_t)nearbyint(
                                 ldexp(magnitude, bias - 1 + mantissa_bits)));
  }
  int exponent;
  double fraction = frexp(magnitude, &exponent);  // [0.5, 1) * 2^exponent
  exponent -= 1;
  double mantissa = nearbyint(ldexp(2 * fraction - 1, mantissa_bits));
  if (mantissa == ldexp(1.0, mantissa_bits)) {
    mantissa = 0;
    exponent += 1;
  }
  if (exponent > bias) return (uint16_t)(sign | infinity);
  return (uint16_t)(sign | ((uint32_t)(exponent + bias) << mantissa_bits) |
                    (uint32_t)mantissa);
}

uint16_t hrt_f64_to_f16(double value) {
  return hrt_half_from_f64(value, 5, 10);
}

uint16_t hrt_f64_to_bf16(double value) {
  return hrt_half_from_f64(value, 8, 7);
}

float hrt_bf16_to_f32(uint16_t bits) { return hrt_float((uint32_t)bits << 16); }

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

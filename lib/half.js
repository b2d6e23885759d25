'use strict';
// Numbers to the bits of the 16-bit float types: IEEE 754 binary16 (f16)
// and bfloat16 (bf16), rounded to nearest, ties to even, directly from the
// double (no intermediate f32, so no double rounding). Values beyond the
// largest finite one round to infinity as IEEE 754 says; NaN becomes the
// quiet NaN with the sign bit clear.

// The format with `exponentBits` and `mantissaBits`.
function format(exponentBits, mantissaBits) {
  const bias = 2 ** (exponentBits - 1) - 1;
  return {
    mantissaBits,
    bias,
    sign: 2 ** (exponentBits + mantissaBits),
    infinity: (2 ** exponentBits - 1) * 2 ** mantissaBits,
    nan: (2 ** exponentBits - 1) * 2 ** mantissaBits + 2 ** (mantissaBits - 1),
    // Halfway between the largest finite value and the next power of two.
    overflow: (2 - 2 ** -(mantissaBits + 1)) * 2 ** bias,
    minNormal: 2 ** (1 - bias),
  };
}

const F16 = format(5, 10);
const BF16 = format(8, 7);

// x >= 0 rounded to an integer, ties to even. x is exact (a power-of-two
// multiple of the input), so the comparison with .5 is too.
function roundHalfEven(x) {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 === 1 ? r - 1 : r;
}

function bits(value, f) {
  if (Number.isNaN(value)) return f.nan;
  const sign = value < 0 || Object.is(value, -0) ? f.sign : 0;
  const a = Math.abs(value);
  if (a >= f.overflow) return sign + f.infinity;
  if (a < f.minNormal) {
    // Subnormal (or zero): units of 2^(1 - bias - mantissaBits); a carry
    // into the exponent field gives the smallest normal, as it should.
    return sign + roundHalfEven(a / 2 ** (1 - f.bias - f.mantissaBits));
  }
  let exponent = Math.floor(Math.log2(a));
  if (2 ** exponent > a) exponent -= 1;
  if (2 ** (exponent + 1) <= a) exponent += 1;
  // The significand with its implicit 1, in units of the last place; a
  // carry to 2^(mantissaBits+1) moves into the exponent field correctly.
  const significand = roundHalfEven(a / 2 ** (exponent - f.mantissaBits));
  return sign + (exponent + f.bias) * 2 ** f.mantissaBits + significand - 2 ** f.mantissaBits;
}

// The f16 bits (0..0xffff) nearest to number `value`.
function f16Bits(value) {
  return bits(value, F16);
}

// The bf16 bits (0..0xffff) nearest to number `value`.
function bf16Bits(value) {
  return bits(value, BF16);
}

module.exports = { f16Bits, bf16Bits };

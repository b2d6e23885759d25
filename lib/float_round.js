'use strict';
// Exact values rounded once to a float dtype. A BigInt beyond 2^53 or a
// decimal literal goes through a double first when converted with Number(),
// and rounding that double again to f32, f16 or bf16 can land on the wrong
// neighbour (2^60 + 2^36 + 1 -> 2^60 instead of 2^60 + 2^37). These round the
// exact value to nearest, ties to even, and return a Number that the dtype
// holds exactly (or ±Infinity past its largest finite value), so storing it
// in a Float32Array or encoding it as a half changes nothing.

// Significand bits (the leading one included), the least normal and the
// greatest exponent.
const FORMATS = {
  f16: { bits: 11, minExponent: -14, maxExponent: 15 },
  bf16: { bits: 8, minExponent: -126, maxExponent: 127 },
  f32: { bits: 24, minExponent: -126, maxExponent: 127 },
  f64: { bits: 53, minExponent: -1022, maxExponent: 1023 },
};

const bitLength = (value) => value.toString(2).length;

// num / den (BigInts, num > 0, den > 0) to nearest in `format`, as a Number.
function roundRatio(num, den, { bits, minExponent, maxExponent }) {
  // e = floor(log2(num / den)).
  let e = bitLength(num) - bitLength(den);
  if ((e >= 0 ? num < den << BigInt(e) : num << BigInt(-e) < den)) e -= 1;
  // The weight of the last significand bit (fixed below the normal range).
  const lsb = Math.max(e, minExponent) - (bits - 1);
  const n = lsb < 0 ? num << BigInt(-lsb) : num;
  const d = lsb > 0 ? den << BigInt(lsb) : den;
  let q = n / d;
  const twiceRest = (n % d) * 2n;
  if (twiceRest > d || (twiceRest === d && (q & 1n) === 1n)) q += 1n;
  // A carry out of the significand makes q 2^bits: the next exponent.
  if (e > maxExponent || (e === maxExponent && q === 1n << BigInt(bits))) return Infinity;
  // q has at most bits + 1 <= 54 bits, the extra one only in a power of
  // two: Number(q) is exact, and so is the scaling.
  return lsb < -1000 ? Number(q) * 2 ** (lsb + 1000) * 2 ** -1000 : Number(q) * 2 ** lsb;
}

// BigInt `value` rounded once to float dtype `dtype`.
function roundBigInt(value, dtype) {
  if (value >= -(2n ** 53n) && value <= 2n ** 53n) return Number(value); // exact already
  const rounded = roundRatio(value < 0n ? -value : value, 1n, FORMATS[dtype]);
  return value < 0n ? -rounded : rounded;
}

const DECIMAL = /^(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

// Significant digits kept of a decimal literal: more than any float dtype
// needs to tell a midpoint from its neighbours (f64's longest has 767).
// Digits beyond are folded into one sticky digit.
const MAX_DIGITS = 800;

// Decimal literal `text` (JSON's number syntax) rounded once to float dtype
// `dtype`.
function roundDecimal(text, dtype) {
  const match = DECIMAL.exec(text);
  const number = Number(text);
  // Zero and ±Infinity as a double are the same in every dtype.
  if (match === null || dtype === 'f64' || number === 0 || !Number.isFinite(number)) return number;
  const [, sign, whole, fraction = '', exponentText = '0'] = match;
  let digits = (whole + fraction).replace(/^0+/, '');
  let exponent = Number(exponentText) - fraction.length;
  if (digits.length > MAX_DIGITS) {
    const rest = digits.slice(MAX_DIGITS);
    digits = digits.slice(0, MAX_DIGITS) + (/[1-9]/.test(rest) ? '1' : '0');
    exponent += rest.length - 1;
  }
  const format = FORMATS[dtype];
  const rounded = exponent >= 0
    ? roundRatio(BigInt(digits) * 10n ** BigInt(exponent), 1n, format)
    : roundRatio(BigInt(digits), 10n ** BigInt(-exponent), format);
  return sign === '-' ? -rounded : rounded;
}

module.exports = { roundBigInt, roundDecimal };

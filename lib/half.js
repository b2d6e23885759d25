'use strict';
// Half-precision floats as raw bits: f16 (IEEE 754 binary16) and bf16 (the
// upper half of a binary32). Encoding rounds to nearest, ties to even,
// directly from the double (no double rounding through f32); values beyond
// the largest finite half become ±Infinity, NaN becomes the quiet NaN.

const util = require('util');
const { HalrtError } = require('./errors');

const F16 = { exponentBits: 5, mantissaBits: 10 };
const BF16 = { exponentBits: 8, mantissaBits: 7 };

function roundHalfEven(x) {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest > 0.5) return floor + 1;
  if (rest < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

function encode(format, value) {
  const { exponentBits, mantissaBits } = format;
  const bias = 2 ** (exponentBits - 1) - 1;
  const exponentMask = 2 ** exponentBits - 1;
  const sign = value < 0 || Object.is(value, -0) ? 1 << (exponentBits + mantissaBits) : 0;
  if (Number.isNaN(value)) return (exponentMask << mantissaBits) | (1 << (mantissaBits - 1));
  const magnitude = Math.abs(value);
  const minNormal = 2 ** (1 - bias);
  if (magnitude < minNormal) {
    // Subnormal (or zero): a count of the smallest steps, 2^(1-bias-mantissaBits).
    // Rounding up to 2^mantissaBits steps gives the smallest normal, as wanted.
    return sign | roundHalfEven(magnitude * 2 ** (bias - 1 + mantissaBits));
  }
  let exponent = Math.floor(Math.log2(magnitude));
  if (2 ** exponent > magnitude) exponent -= 1;
  if (2 ** (exponent + 1) <= magnitude) exponent += 1;
  let mantissa = roundHalfEven((magnitude / 2 ** exponent - 1) * 2 ** mantissaBits);
  if (mantissa === 2 ** mantissaBits) {
    mantissa = 0;
    exponent += 1;
  }
  if (exponent > bias) return sign | (exponentMask << mantissaBits); // ±Infinity
  return sign | ((exponent + bias) << mantissaBits) | mantissa;
}

function decode(format, bits) {
  const { exponentBits, mantissaBits } = format;
  const bias = 2 ** (exponentBits - 1) - 1;
  const exponentMask = 2 ** exponentBits - 1;
  const sign = (bits >> (exponentBits + mantissaBits)) & 1 ? -1 : 1;
  const exponent = (bits >> mantissaBits) & exponentMask;
  const mantissa = bits & (2 ** mantissaBits - 1);
  if (exponent === exponentMask) return mantissa === 0 ? sign * Infinity : NaN;
  if (exponent === 0) return sign * mantissa * 2 ** (1 - bias - mantissaBits);
  return sign * (1 + mantissa / 2 ** mantissaBits) * 2 ** (exponent - bias);
}

function isArrayLike(value) {
  return Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
}

function fail(caller, what, got) {
  return new HalrtError(`${caller}: ${what} (got ${got})`, 'INVALID_ARGUMENT');
}

// A number gives a number; an array of numbers (or a TypedArray) a Uint16Array.
function encoder(format, caller) {
  return function toBits(values) {
    if (typeof values === 'number') return encode(format, values);
    if (!isArrayLike(values)) {
      throw fail(caller, 'values must be a number, an Array of numbers or a TypedArray', describe(values));
    }
    const bits = new Uint16Array(values.length);
    for (let i = 0; i < values.length; ++i) {
      const value = values[i];
      if (typeof value !== 'number') throw fail(caller, `values[${i}] must be a number`, describe(value));
      bits[i] = encode(format, value);
    }
    return bits;
  };
}

// A number (the bits) gives a number; a Uint16Array or Array of bits a
// Float32Array (every f16 and bf16 value is exact in f32).
function decoder(format, caller) {
  return function fromBits(bits) {
    if (typeof bits === 'number') {
      if (!Number.isInteger(bits) || bits < 0 || bits > 0xffff) throw fail(caller, 'bits must be an integer in [0, 65535]', bits);
      return decode(format, bits);
    }
    if (!(bits instanceof Uint16Array) && !Array.isArray(bits)) {
      throw fail(caller, 'bits must be a number, a Uint16Array or an Array of numbers', describe(bits));
    }
    const values = new Float32Array(bits.length);
    for (let i = 0; i < bits.length; ++i) {
      const b = bits[i];
      if (!Number.isInteger(b) || b < 0 || b > 0xffff) throw fail(caller, `bits[${i}] must be an integer in [0, 65535]`, describe(b));
      values[i] = decode(format, b);
    }
    return values;
  };
}

function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return `'${value}'`;
  if (typeof value === 'bigint') return 'a BigInt';
  if (typeof value === 'function') return 'a function'; // not its source text
  if (typeof value === 'object') {
    if (util.types.isProxy(value)) return 'a Proxy'; // no trap runs
    const name = value.constructor?.name ?? 'object';
    // "an Array", "an Int32Array", "a Uint8Array" (said "you-int").
    return `${/^(?:[AEIO]|U(?!int))/.test(name) ? 'an' : 'a'} ${name}`;
  }
  return String(value);
}

module.exports = {
  F16,
  BF16,
  encode,
  decode,
  describe,
  toF16Bits: encoder(F16, 'toF16Bits'),
  fromF16Bits: decoder(F16, 'fromF16Bits'),
  toBF16Bits: encoder(BF16, 'toBF16Bits'),
  fromBF16Bits: decoder(BF16, 'fromBF16Bits'),
};

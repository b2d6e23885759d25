'use strict';
// Shared test utilities (not a spec file: mocha runs test/*.test.js).

const assert = require('assert');
const halrt = require('..');

/** The TypedArray class read() returns for each dtype. */
const ARRAY_TYPES = {
  f16: Uint16Array,
  bf16: Uint16Array,
  f32: Float32Array,
  f64: Float64Array,
  i8: Int8Array,
  u8: Uint8Array,
  i16: Int16Array,
  u16: Uint16Array,
  i32: Int32Array,
  u32: Uint32Array,
  i64: BigInt64Array,
  u64: BigUint64Array,
  bool: Uint8Array,
};

/** Distinct, edge-heavy sample values per dtype (cycled to fill `count`). */
const SAMPLES = {
  // 1.0, -2.0, +inf, smallest subnormal, NaN, 65504 (max), -0
  f16: [0x3c00, 0xc000, 0x7c00, 0x0001, 0x7e00, 0x7bff, 0x8000],
  // 1.0, -1.0, +inf, 3.140625, NaN, -0
  bf16: [0x3f80, 0xbf80, 0x7f80, 0x4049, 0x7fc0, 0x8000],
  f32: [1.5, -2.25, 3.4028234663852886e38, 1e-45, NaN, -0, Infinity],
  f64: [Math.PI, -Number.MAX_VALUE, Number.MIN_VALUE, NaN, -Infinity, 1 / 3],
  i8: [-128, 127, 0, -1, 42],
  u8: [0, 255, 1, 128, 77],
  i16: [-32768, 32767, 0, -1, 1234],
  u16: [0, 65535, 1, 32768, 4321],
  i32: [-2147483648, 2147483647, 0, -1, 123456789],
  u32: [0, 4294967295, 1, 2147483648, 987654321],
  i64: [-(2n ** 63n), 2n ** 63n - 1n, 0n, -1n, 1234567890123456789n],
  u64: [0n, 2n ** 64n - 1n, 1n, 2n ** 63n, 9876543210987654321n],
  bool: [1, 0, 0, 1, 1],
};

/** A TypedArray of `count` sample values of `dtype`, offset by `seed`. */
function sampleData(dtype, count, seed = 0) {
  const Type = ARRAY_TYPES[dtype];
  const samples = SAMPLES[dtype];
  const data = new Type(count);
  for (let i = 0; i < count; ++i) data[i] = samples[(i + seed) % samples.length];
  return data;
}

/** Element count of a shape ([] is a scalar: 1). */
function elementCount(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Asserts that `fn` throws (or, for a promise / async function, rejects
 * with) a HalrtError with `code` whose message includes every `parts` string.
 */
function checkHalrtError(error, code, parts) {
  assert.ok(error instanceof halrt.HalrtError, `expected a HalrtError, got ${error && error.stack}`);
  assert.strictEqual(error.code, code, `code of: ${error.message}`);
  for (const part of parts) {
    assert.ok(error.message.includes(part), `message ${JSON.stringify(error.message)} lacks ${JSON.stringify(part)}`);
  }
  return true;
}

function assertThrowsHalrt(fn, code, ...parts) {
  assert.throws(fn, (error) => checkHalrtError(error, code, parts));
}

async function assertRejectsHalrt(promiseOrFn, code, ...parts) {
  await assert.rejects(promiseOrFn, (error) => checkHalrtError(error, code, parts));
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Runs GC and lets finalizers run until liveObjects() equals `baseline`. */
async function settleLiveObjects(baseline, rounds = 20) {
  let live = halrt.liveObjects();
  for (let i = 0; i < rounds; ++i) {
    if (global.gc) global.gc();
    await tick();
    await new Promise((resolve) => setTimeout(resolve, 5));
    live = halrt.liveObjects();
    if (JSON.stringify(live) === JSON.stringify(baseline)) break;
  }
  return live;
}

module.exports = {
  ARRAY_TYPES,
  sampleData,
  elementCount,
  assertThrowsHalrt,
  assertRejectsHalrt,
  settleLiveObjects,
  tick,
};

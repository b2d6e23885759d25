'use strict';
// Property-based tests (fast-check) over the JavaScript API: whatever the
// arguments, a call either succeeds with the right result or fails with a
// HalrtError carrying a documented code and a message naming the method
// (promise-returning methods: a rejection, never a throw); never a
// TypeError, never a crash; liveObjects() is back to its baseline once
// everything made is closed.
//
// Seeded: HALRT_PROPERTY_SEED (default in test/support/property.js) and
// HALRT_PROPERTY_RUNS (a multiplier of every numRuns); a failure message
// starts with both. HALRT_PROPERTY_LOG=1 logs each case before it runs.
// The properties under "defects of issue 10" pin defects fixed there
// (wrong receivers, re-entrant argument reading).
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const util = require('util');
const { spawn } = require('child_process');
const fc = require('fast-check');
const halrt = require('..');
const npy = require('../lib/npy');
const { ARRAY_TYPES, BUILTIN, DEVICE_URIS, liveBaseline, randomFloats } = require('./helpers');
const {
  SEED, RUNS, CODES, ELEMENT_SIZE, checkProperty, logCase, assertHalrtError, attempt, settle, assertNoLeak,
  closeEverything, fillBytes, bytesOf, rerunHint,
} = require('./support/property');

const DTYPES = halrt.dtypes;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const U64_MAX = 2n ** 64n - 1n;
// Valid shapes that would allocate more than this are not generated for the
// success path (a discarded case); huge ones must fail.
const SMALL_BYTES = 4 * 1024 * 1024;
const HUGE_BYTES = 2n ** 44n;

//===----------------------------------------------------------------------===//
// Arbitrary values: specs that print readably and are materialised per run
//===----------------------------------------------------------------------===//

/** Junk arguments by name; `scope` supplies live objects of other classes. */
const JUNK = {
  undefined: () => undefined,
  null: () => null,
  true: () => true,
  zero: () => 0,
  minusOne: () => -1,
  half: () => 0.5,
  NaN: () => NaN,
  Infinity: () => Infinity,
  emptyString: () => '',
  string: () => 'f32',
  bigint: () => 2n,
  symbol: () => Symbol('junk'),
  object: () => ({}),
  array: () => [1],
  nestedArray: () => [[1]],
  function: () => function junk() {},
  date: () => new Date(0),
  arrayBuffer: () => new ArrayBuffer(8),
  dataView: () => new DataView(new ArrayBuffer(8)),
  float32Array: () => new Float32Array(2),
  fakeView: () => ({ shape: [1], dtype: 'f32', byteLength: 4, rank: 1, read() {}, close() {} }),
  viewPrototype: () => Object.create(halrt.BufferView.prototype),
  proxy: () => new Proxy({}, {}),
  arrayProxy: () => new Proxy([1], {}),
  boxedString: () => new String('f32'),
  boxedNumber: () => new Number(1),
  device: (scope) => scope.device,
  instance: (scope) => scope.instance,
  closedDevice: (scope) => scope.closedDevice,
};
const junkArb = fc.constantFrom(...Object.keys(JUNK)).map((junk) => ({ junk }));
const makeJunk = (spec, scope) => JUNK[spec.junk](scope);

const TYPED_ARRAYS = [
  'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
  'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'Buffer',
];
const INFERRED_DTYPE = {
  Int8Array: 'i8', Uint8Array: 'u8', Uint8ClampedArray: 'u8', Buffer: 'u8', Int16Array: 'i16', Uint16Array: 'u16',
  Int32Array: 'i32', Uint32Array: 'u32', Float32Array: 'f32', Float64Array: 'f64', BigInt64Array: 'i64',
  BigUint64Array: 'u64',
};
// Dtypes whose data may be in each array type (Buffer is a Uint8Array).
const MATCHING_DTYPES = {
  ...Object.fromEntries(Object.entries(INFERRED_DTYPE).map(([type, dtype]) => [type, [dtype]])),
  Uint8Array: ['u8', 'bool'], Buffer: ['u8', 'bool'], Uint16Array: ['u16', 'f16', 'bf16'],
};
function arrayAccepts(dtype, type) {
  const base = type === 'Buffer' ? 'Uint8Array' : type;
  return ARRAY_TYPES[dtype].name === base || (dtype === 'u8' && base === 'Uint8ClampedArray');
}

const INTEGER_RANGES = {
  i8: [-128, 127], u8: [0, 255], i16: [-32768, 32767], u16: [0, 65535], i32: [-(2 ** 31), 2 ** 31 - 1],
  u32: [0, 2 ** 32 - 1], i64: [-(2 ** 63), 2 ** 63], u64: [0, 2 ** 64],
};
/** What tensor() makes of `data` converted to `dtype`: {values} or {error}. */
function convertModel(data, dtype) {
  const values = [];
  for (const v of data) {
    const n = Number(v);
    if (dtype === 'f16' || dtype === 'bf16') values.push((dtype === 'f16' ? halrt.toF16Bits : halrt.toBF16Bits)(n));
    else if (dtype === 'f32') values.push(Math.fround(n));
    else if (dtype === 'f64') values.push(n);
    else if (dtype === 'bool') {
      if (n !== 0 && n !== 1) return { error: true };
      values.push(n);
    } else if (typeof v === 'bigint') {
      const [lo, hi] = INTEGER_RANGES[dtype];
      if (v < BigInt(lo) || v >= BigInt(hi) + (dtype.endsWith('64') ? 0n : 1n)) return { error: true };
      values.push(dtype.endsWith('64') ? v : n);
    } else {
      const [lo, hi] = INTEGER_RANGES[dtype];
      if (!Number.isInteger(n) || n < lo || n > hi) return { error: true };
      if (dtype.endsWith('64') && !Number.isSafeInteger(n)) return { error: true };
      values.push(dtype.endsWith('64') ? BigInt(n) : n);
    }
  }
  return { values };
}
/** A Buffer's bytes as `dtype`: {values} or {error}. */
function reinterpretModel(data, dtype) {
  if (data.byteLength % ELEMENT_SIZE[dtype] !== 0) return { error: true };
  return { values: new ARRAY_TYPES[dtype](Uint8Array.from(data).buffer) };
}
/** Junk that tensor() now takes as host data: numbers, BigInts, booleans, Arrays, ArrayBuffers. */
function isHostJunk(value) {
  return ['number', 'bigint', 'boolean'].includes(typeof value) || value instanceof ArrayBuffer ||
    util.types.isTypedArray(value) || (Array.isArray(value) && !util.types.isProxy(value));
}

/** A TypedArray of `type` and `length`, at element `offset` of a larger buffer, filled from `seed`. */
function makeTypedArray(type, length, offset, fill, seed) {
  const total = length + offset;
  const whole = type === 'Buffer' ? Buffer.alloc(total) : new globalThis[type](total);
  fillBytes(bytesOf(whole), seed, fill);
  return whole.subarray(offset);
}

// Dimensions: mostly small, sometimes huge, sometimes not a dimension at all.
const dimArb = fc.oneof(
  { weight: 40, arbitrary: fc.integer({ min: 0, max: 4 }) },
  { weight: 2, arbitrary: fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 44, MAX_SAFE, 2 ** 53, 2 ** 64, 1e300, Number.MAX_VALUE) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(-1, -0, 0.5, 2.5, NaN, Infinity, -Infinity, -(2 ** 31), Number.MIN_VALUE, '2', 2n,
      null, undefined, true, [2], {}),
  },
);
// Shapes: arrays of dims (up to rank 10), and other things.
const shapeArb = fc.oneof(
  { weight: 16, arbitrary: fc.array(dimArb, { maxLength: 4 }) },
  { weight: 2, arbitrary: fc.array(dimArb, { minLength: 7, maxLength: 10 }) },
  { weight: 1, arbitrary: junkArb },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.record({ sparse: fc.integer({ min: 1, max: 3 }) }),
      fc.record({ getters: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 4 }) }),
      fc.record({ throwsAt: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ int32Array: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }) }),
      fc.record({ arrayLike: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }) }),
    ),
  },
);

/** The sentinel a throwing shape getter throws: it must come back unchanged. */
class GetterError extends Error {}

function makeShape(spec, scope) {
  if (Array.isArray(spec)) return spec.slice();
  if (spec.junk) return makeJunk(spec, scope);
  if (spec.sparse) return new Array(spec.sparse);
  if (spec.getters) {
    const shape = new Array(spec.getters.length);
    spec.getters.forEach((dim, i) => Object.defineProperty(shape, i, { get: () => dim, enumerable: true }));
    return shape;
  }
  if (spec.throwsAt !== undefined) {
    const shape = new Array(spec.throwsAt + 1).fill(1);
    Object.defineProperty(shape, spec.throwsAt, {
      get() {
        throw new GetterError('shape getter threw');
      },
    });
    return shape;
  }
  if (spec.int32Array) return Int32Array.from(spec.int32Array);
  return { length: spec.arrayLike.length, ...spec.arrayLike };
}

/**
 * What the binding makes of a shape: {ok, dims, count} (count a BigInt), or
 * {ok: false} (INVALID_ARGUMENT), {throws: error} (a getter threw), or
 * {ambiguous: true} (an intermediate product overflows 64 bits although a
 * later dimension is 0: rejected or accepted).
 */
function shapeModel(shape) {
  if (!Array.isArray(shape) || util.types.isProxy(shape)) return { ok: false, part: 'shape' };
  if (shape.length > 8) return { ok: false, part: 'shape' };
  const dims = [];
  let count = 1n;
  let overflowed = false;
  for (let i = 0; i < shape.length; ++i) {
    let dim;
    try {
      dim = shape[i];
    } catch (error) {
      return { throws: error };
    }
    if (typeof dim !== 'number' || !Number.isInteger(dim) || dim < 0 || dim > MAX_SAFE) return { ok: false, part: 'shape' };
    dims.push(dim + 0);
    count *= BigInt(dim);
    if (count > U64_MAX) overflowed = true;
  }
  if (count > U64_MAX) return { ok: false, part: 'shape' };
  if (overflowed) return { ambiguous: true, dims, count };
  return { ok: true, dims, count };
}

const dtypeArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ omit: true }) },
  { weight: 4, arbitrary: fc.constant({ matching: true }) },
  { weight: 4, arbitrary: fc.constantFrom(...DTYPES) },
  { weight: 1, arbitrary: fc.constantFrom('F32', 'float32', 'f 32', 'f32\u0000', 'bool ', 'i128', 'u1', 'bfloat16', 'uint8') },
  { weight: 1, arbitrary: junkArb },
);
function makeDtype(spec, dataSpec, scope) {
  if (typeof spec === 'string') return spec;
  if (spec.omit) return undefined;
  if (spec.matching) {
    if (!dataSpec.type) return 'f32';
    const choices = MATCHING_DTYPES[dataSpec.type];
    return choices[dataSpec.seed % choices.length];
  }
  return makeJunk(spec, scope);
}

//===----------------------------------------------------------------------===//
// Devices, tensors
//===----------------------------------------------------------------------===//

// Every tensor-shaped property runs on each of these (HALRT_TEST_DEVICES).
const uriArb = fc.constantFrom(...DEVICE_URIS);

describe(`property: the JavaScript API under arbitrary arguments (seed ${SEED}, runs x${RUNS})`, function () {
  this.timeout(120000 * Math.max(1, RUNS));
  let instance;
  const devices = {};
  let closedDevice;
  let baseline;

  before(async () => {
    // The seed is printed so that a crash (no failure message) can be rerun.
    process.stdout.write(`      ${rerunHint()}\n`);
    instance = new halrt.Instance();
    for (const uri of DEVICE_URIS) devices[uri] = instance.createDevice(uri);
    closedDevice = instance.createDevice('local-sync');
    closedDevice.close();
    baseline = await liveBaseline();
  });
  after(() => {
    for (const device of Object.values(devices)) device.close();
    instance.close();
  });

  const scopeFor = (uri) => ({ instance, device: devices[uri], closedDevice });

  describe('device.tensor(data, shape, dtype) and device.empty(shape, dtype)', () => {
    const dataArb = fc.oneof(
      {
        weight: 10,
        arbitrary: fc.record({
          type: fc.constantFrom(...TYPED_ARRAYS),
          length: fc.oneof({ weight: 3, arbitrary: fc.constant('match') }, { weight: 1, arbitrary: fc.nat(70) }),
          offset: fc.nat(3),
          fill: fc.constantFrom('bits', 'bool', 'zero'),
          seed: fc.nat(),
        }),
      },
      { weight: 1, arbitrary: junkArb },
    );

    it('tensor() round-trips through read() bit-exactly, or throws INVALID_ARGUMENT naming the argument', async () => {
      const property = fc.asyncProperty(uriArb, dataArb, shapeArb, dtypeArb, fc.boolean(),
        async (uri, dataSpec, shapeSpec, dtypeSpec, passDtype) => {
          logCase('tensor', { uri, dataSpec, shapeSpec, dtypeSpec, passDtype });
          const scope = scopeFor(uri);
          const device = devices[uri];
          const shape = makeShape(shapeSpec, scope);
          const shapeInfo = shapeModel(makeShape(shapeSpec, scope));
          let data;
          let type = dataSpec.type;
          if (dataSpec.junk) {
            data = makeJunk(dataSpec, scope);
            if (util.types.isTypedArray(data)) type = data.constructor.name;
          } else {
            const matched = shapeInfo.ok && shapeInfo.count <= 4096n ? Number(shapeInfo.count) : 3;
            const length = dataSpec.length === 'match' ? matched : dataSpec.length;
            data = makeTypedArray(dataSpec.type, length, dataSpec.offset, dataSpec.fill, dataSpec.seed);
          }
          const dtype = makeDtype(dtypeSpec, dataSpec, scope);
          const explicit = passDtype || dtype !== undefined;
          const snapshot = type ? Buffer.from(bytesOf(data)) : null;

          // The model, in the binding's order: data, shape, dtype, data type, length, bool values.
          // TypedArrays of another dtype are converted in JavaScript first
          // (errors name data[i]), a Buffer given a dtype is reinterpreted.
          let expected;
          const knownDtype = typeof dtype === 'string' && DTYPES.includes(dtype);
          const effective = dtype === undefined ? INFERRED_DTYPE[type] : dtype;
          let converted = null;
          if (type && knownDtype && !arrayAccepts(effective, type)) {
            converted = type === 'Buffer' ? reinterpretModel(data, effective) : convertModel(data, effective);
          }
          if (!type) {
            expected = isHostJunk(data) ? { host: true } : { error: 'data' };
          } else if (converted && converted.error) {
            expected = { error: 'data' };
          } else if (shapeInfo.throws) {
            expected = { sentinel: true };
          } else if (shapeInfo.ok === false) {
            expected = { error: 'shape' };
          } else if (dtype !== undefined && !knownDtype) {
            expected = { error: 'dtype' };
          } else {
            const length = converted ? converted.values.length : data.length;
            if (BigInt(length) !== shapeInfo.count) {
              expected = { error: shapeInfo.ambiguous ? 'shape' : 'data' };
            } else if (effective === 'bool' && !converted && data.some((v) => v > 1)) {
              expected = { error: 'bool' };
            } else {
              expected = { ok: true, dtype: effective, dims: shapeInfo.dims, ambiguous: shapeInfo.ambiguous };
            }
          }

          const made = [];
          const result = attempt(() => (explicit ? device.tensor(data, shape, dtype) : device.tensor(data, shape)));
          try {
            if (!result.ok) {
              if (expected.sentinel) {
                assert.ok(result.error instanceof GetterError, `the getter's own error, got ${result.error}`);
                return;
              }
              if (expected.host && result.error instanceof GetterError) return;
              assert.ok(!expected.ok || shapeInfo.ambiguous, `expected success, got ${result.error && result.error.message}`);
              // An ambiguous shape may be rejected first, naming the shape.
              const part = shapeInfo.ambiguous && /shape/.test(String(result.error && result.error.message)) ? 'shape' : expected.error;
              assertHalrtError(result.error, {
                codes: ['INVALID_ARGUMENT'], methods: ['device.tensor'], parts: part ? [part] : [],
              });
              return;
            }
            const view = result.value;
            made.push(view);
            if (expected.host) {
              // Plain host data (a number, an Array): its elements, as many as the shape needs.
              assert.ok(view instanceof halrt.BufferView);
              const read = await settle(view.read(), 'bufferView.read()');
              if (!read.ok) assert.fail(`read() rejected: ${read.error && read.error.message}`);
              assert.strictEqual(read.value.length, view.numel);
              return;
            }
            assert.ok(expected.ok, `expected a ${expected.error || 'getter'} error, got a view`);
            assert.ok(view instanceof halrt.BufferView);
            assert.strictEqual(view.dtype, expected.dtype);
            assert.deepStrictEqual(view.shape, expected.dims);
            assert.strictEqual(view.rank, expected.dims.length);
            const length = converted ? converted.values.length : data.length;
            assert.strictEqual(view.byteLength, length * ELEMENT_SIZE[expected.dtype]);
            // A copy: changing the source afterwards changes nothing.
            bytesOf(data).fill(0xa5);
            const read = await settle(view.read(), 'bufferView.read()');
            if (!read.ok) assert.fail(`read() rejected: ${read.error && read.error.message}`);
            assert.ok(read.value instanceof ARRAY_TYPES[expected.dtype], `read() gives ${read.value.constructor.name}`);
            assert.strictEqual(read.value.length, length);
            if (converted) {
              assert.deepStrictEqual(Array.from(read.value), Array.from(converted.values), 'read() returns the converted values');
            } else {
              assert.ok(bytesOf(read.value).equals(snapshot), 'read() returns the bytes given, bit for bit');
            }
          } finally {
            closeEverything(made);
            await assertNoLeak(baseline);
          }
        });
      await checkProperty(property, 300);
    });

    it('empty() is zero-filled with the shape and dtype given, or throws (INVALID_ARGUMENT; RESOURCE_EXHAUSTED when huge)', async () => {
      const property = fc.asyncProperty(uriArb, shapeArb, fc.oneof(dtypeArb, fc.constantFrom(...DTYPES)),
        async (uri, shapeSpec, dtypeSpec) => {
          logCase('empty', { uri, shapeSpec, dtypeSpec });
          const scope = scopeFor(uri);
          const device = devices[uri];
          const shape = makeShape(shapeSpec, scope);
          const shapeInfo = shapeModel(makeShape(shapeSpec, scope));
          const dtype = makeDtype(dtypeSpec, {}, scope);
          let expected;
          if (shapeInfo.throws) {
            expected = { sentinel: true };
          } else if (shapeInfo.ok === false) {
            expected = { error: 'shape', codes: ['INVALID_ARGUMENT'] };
          } else if (typeof dtype !== 'string' || !DTYPES.includes(dtype)) {
            expected = { error: 'dtype', codes: ['INVALID_ARGUMENT'] };
          } else {
            const bytes = shapeInfo.count * BigInt(ELEMENT_SIZE[dtype]);
            if (shapeInfo.ambiguous || bytes > U64_MAX) {
              expected = { error: '', codes: ['INVALID_ARGUMENT', 'RESOURCE_EXHAUSTED', 'OUT_OF_RANGE'], maybeOk: true };
            } else if (bytes >= HUGE_BYTES) {
              expected = { error: '', codes: ['RESOURCE_EXHAUSTED'] };
            } else {
              fc.pre(bytes <= BigInt(SMALL_BYTES)); // never allocate GiBs
              expected = { ok: true, dims: shapeInfo.dims, count: Number(shapeInfo.count), bytes: Number(bytes) };
            }
          }
          const made = [];
          const result = attempt(() => device.empty(shape, dtype));
          try {
            if (!result.ok) {
              if (expected.sentinel) {
                assert.ok(result.error instanceof GetterError, `the getter's own error, got ${result.error}`);
                return;
              }
              assert.ok(!expected.ok, `expected success, got ${result.error && result.error.message}`);
              if (shapeInfo.ambiguous && /shape/.test(String(result.error && result.error.message))) {
                assertHalrtError(result.error, { codes: ['INVALID_ARGUMENT'], methods: ['device.empty'] });
              } else {
                assertHalrtError(result.error, { codes: expected.codes, methods: ['device.empty'], parts: [expected.error] });
              }
              return;
            }
            const view = result.value;
            made.push(view);
            assert.ok(expected.ok || expected.maybeOk, `expected ${expected.codes}, got a view of shape [${view.shape}]`);
            if (!expected.ok) return;
            assert.deepStrictEqual([view.dtype, view.shape, view.rank, view.byteLength],
              [dtype, expected.dims, expected.dims.length, expected.bytes]);
            const read = await settle(view.read(), 'bufferView.read()');
            if (!read.ok) assert.fail(`read() rejected: ${read.error && read.error.message}`);
            assert.ok(read.value instanceof ARRAY_TYPES[dtype]);
            assert.strictEqual(read.value.length, expected.count);
            assert.ok(bytesOf(read.value).every((byte) => byte === 0), 'zero-filled');
          } finally {
            closeEverything(made);
            await assertNoLeak(baseline);
          }
        });
      await checkProperty(property, 300);
    });

    it('instance.createDevice(uri) makes a device or throws a HalrtError naming createDevice', async () => {
      const part = fc.constantFrom('local-sync', 'local-task', 'cuda', 'auto', 'local', 'Local-Sync', '', 'cpu', 'local-sync ');
      const query = fc.oneof(
        fc.constant(''),
        fc.record({
          key: fc.constantFrom('workers', 'worker', 'WORKERS', '', 'x'),
          value: fc.constantFrom('1', '2', '0', '-1', '1025', '99999999999', 'abc', '', '2x', '1.5', ' 2', '0x2'),
        }).map(({ key, value }) => `?${key}=${value}`),
        fc.constantFrom('?', '?workers', '?workers=1&workers=2', '?workers=1&x=2', '#frag'),
      );
      const ordinal = fc.constantFrom('', '://0', '://1', '://-1', '://', '://abc', '://99999999999999999999', '//0');
      const uriSpec = fc.oneof(
        { weight: 6, arbitrary: fc.tuple(part, ordinal, query).map((pieces) => pieces.join('')) },
        { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
        { weight: 1, arbitrary: junkArb },
      );
      const property = fc.asyncProperty(uriSpec, async (spec) => {
        logCase('createDevice', spec);
        const uri = typeof spec === 'string' ? spec : makeJunk(spec, scopeFor(DEVICE_URIS[0]));
        const made = [];
        const result = attempt(() => instance.createDevice(uri));
        try {
          if (!result.ok) {
            assertHalrtError(result.error, { methods: ['instance.createDevice'] });
            if (uri !== undefined && typeof uri !== 'string') assert.strictEqual(result.error.code, 'INVALID_ARGUMENT');
            return;
          }
          made.push(result.value);
          assert.ok(result.value instanceof halrt.Device);
          assert.strictEqual(typeof result.value.info.uri, 'string');
          // The canonical URI recreates an equal device.
          const again = instance.createDevice(result.value.info.uri);
          made.push(again);
          assert.deepStrictEqual(again.info, result.value.info);
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 100);
    });
  });

  //===--------------------------------------------------------------------===//
  // device.copy() and read()
  //===--------------------------------------------------------------------===//

  const smallShapeArb = fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 });
  const rarely = (arbitrary, otherwise, weight = 5) =>
    fc.oneof({ weight, arbitrary: fc.constant(otherwise) }, { weight: 1, arbitrary });

  /** A tensor of `dtype` and `shape` on `device` holding data from `seed`. */
  function makeView(device, dtype, shape, seed, fill = 'bits') {
    const count = shape.reduce((a, b) => a * b, 1);
    let data;
    if (fill === 'floats' && dtype === 'f32') {
      data = randomFloats(count, seed);
    } else {
      data = makeTypedArray(ARRAY_TYPES[dtype].name, count, 0, dtype === 'bool' ? 'bool' : fill === 'floats' ? 'bits' : fill, seed);
    }
    return device.tensor(data, shape, dtype);
  }

  describe('device.copy(source, target) and bufferView.read()', () => {
    const viewArb = fc.record({
      kind: fc.constant('view'),
      dtype: fc.constantFrom(...DTYPES),
      shape: smallShapeArb,
      device: rarely(fc.constant('B'), 'A', 4),
      closed: rarely(fc.constant(true), false),
      seed: fc.nat(),
    });
    // A target of the source's byte length (when the dtype's size divides it).
    const reshapeArb = fc.record({
      kind: fc.constant('reshape'),
      dtype: fc.constantFrom(...DTYPES),
      device: rarely(fc.constant('B'), 'A', 4),
      closed: rarely(fc.constant(true), false),
      seed: fc.nat(),
    });
    const copyArb = fc.record({
      uri: uriArb,
      source: fc.oneof({ weight: 8, arbitrary: viewArb }, { weight: 1, arbitrary: junkArb }),
      target: fc.oneof(
        { weight: 4, arbitrary: viewArb },
        { weight: 5, arbitrary: reshapeArb },
        { weight: 1, arbitrary: fc.constant({ kind: 'same' }) },
        { weight: 1, arbitrary: junkArb },
      ),
      closeDevice: rarely(fc.constant(true), false, 8),
    });

    it('copy() resolves and the target then reads the source\'s bytes, or rejects with the documented code naming the argument', async () => {
      const property = fc.asyncProperty(copyArb, async (spec) => {
        logCase('copy', spec);
        const made = [];
        try {
          const a = instance.createDevice(spec.uri);
          const b = instance.createDevice('local-sync');
          made.push(a, b);
          const scope = { instance, device: a, closedDevice };
          const onDevice = (which) => (which === 'A' ? a : b);
          const views = {};
          const make = (role, viewSpec) => {
            if (viewSpec.junk) return { value: makeJunk(viewSpec, scope), junk: true };
            if (viewSpec.kind === 'same') return views.source;
            let dtype = viewSpec.dtype;
            let shape = viewSpec.shape;
            if (viewSpec.kind === 'reshape') {
              const bytes = views.source && !views.source.junk ? views.source.bytes : 4;
              shape = bytes % ELEMENT_SIZE[dtype] === 0 ? [bytes / ELEMENT_SIZE[dtype]] : [1];
            }
            const view = makeView(onDevice(viewSpec.device), dtype, shape, viewSpec.seed);
            made.push(view);
            const entry = { value: view, view: true, bytes: view.byteLength, device: viewSpec.device, closed: viewSpec.closed };
            return entry;
          };
          views.source = make('source', spec.source);
          views.target = make('target', spec.target);
          // Snapshots before anything is closed.
          const snapshot = {};
          for (const role of ['source', 'target']) {
            if (views[role].view) {
              const read = await settle(views[role].value.read(), 'bufferView.read()');
              if (!read.ok) assert.fail(`read() of a fresh view rejected: ${read.error && read.error.message}`);
              snapshot[role] = Buffer.from(bytesOf(read.value));
            }
          }
          for (const role of ['source', 'target']) if (views[role].closed) views[role].value.close();
          if (spec.closeDevice) a.close();

          let expected = { ok: true };
          if (spec.closeDevice) {
            expected = { codes: ['FAILED_PRECONDITION'], parts: ['closed'] };
          } else {
            for (const role of ['source', 'target']) {
              const entry = views[role];
              if (entry.junk) expected = { codes: ['INVALID_ARGUMENT'], parts: [role] };
              else if (entry.closed) expected = { codes: ['FAILED_PRECONDITION'], parts: [role] };
              else if (entry.device !== 'A') expected = { codes: ['INVALID_ARGUMENT'], parts: [role] };
              if (!expected.ok) break;
            }
            if (expected.ok && views.source.bytes !== views.target.bytes) {
              expected = { codes: ['INVALID_ARGUMENT'], parts: ['bytes'] };
            }
          }

          const call = attempt(() => a.copy(views.source.value, views.target.value));
          if (!call.ok) assert.fail(`device.copy() threw instead of rejecting: ${call.error && call.error.stack}`);
          // A read submitted after the copy sees the copy (reads are ordered on the queue).
          const early = expected.ok ? views.target.value.read() : null;
          const copied = await settle(call.value, 'device.copy()');
          if (!expected.ok) {
            assert.ok(!copied.ok, `expected ${expected.codes} (${expected.parts}), but copy() resolved`);
            assertHalrtError(copied.error, { codes: expected.codes, methods: ['device.copy'], parts: expected.parts });
          } else {
            if (!copied.ok) assert.fail(`expected copy() to resolve, got ${copied.error && copied.error.stack}`);
            assert.strictEqual(copied.value, undefined);
            const target = await settle(early, 'bufferView.read()');
            if (!target.ok) assert.fail(`read() rejected: ${target.error && target.error.message}`);
            assert.ok(bytesOf(target.value).equals(snapshot.source), 'the target holds the source\'s bytes');
          }
          // Every view reads back (closed ones reject), the source unchanged,
          // the target unchanged unless the copy happened.
          for (const role of ['source', 'target']) {
            const entry = views[role];
            if (!entry.view) continue;
            const read = await settle(entry.value.read(), 'bufferView.read()');
            if (entry.closed) {
              assert.ok(!read.ok, 'read() of a closed view rejects');
              assertHalrtError(read.error, { codes: ['FAILED_PRECONDITION'], methods: ['bufferView.read'], parts: ['closed'] });
              continue;
            }
            if (!read.ok) assert.fail(`read() rejected: ${read.error && read.error.stack}`);
            assert.ok(read.value instanceof ARRAY_TYPES[entry.value.dtype]);
            const want = role === 'target' && expected.ok ? snapshot.source : snapshot[role];
            assert.ok(bytesOf(read.value).equals(want), `${role} reads ${role === 'target' && expected.ok ? 'the copy' : 'unchanged'}`);
          }
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 200);
    });
  });

  //===--------------------------------------------------------------------===//
  // function.invoke()
  //===--------------------------------------------------------------------===//

  describe('function.invoke(inputs, options)', () => {
    // The functions, their reference computations (inputs: arrays read back).
    const FUNCTIONS = {
      add: {
        define: (f) => f.input('a', 'f32', [5]).input('b', 'f32', [5]).output('out', 'f32', [5])
          .dispatch('k.add_f32', { workgroups: [2], bindings: ['a', 'b', 'out'], constants: [5] }),
        reference: ([a, b]) => [Float32Array.from(a, (v, i) => v + b[i])],
      },
      relu: {
        define: (f) => f.input('x', 'f32', [2, 3]).output('y', 'f32', [2, 3])
          .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [6] }),
        reference: ([x]) => [Float32Array.from(x, (v) => (v > 0 ? v : 0))],
      },
      addi: {
        define: (f) => f.input('a', 'i32', [4]).input('b', 'i32', [4]).output('c', 'i32', [4])
          .dispatch('k.add_i32', { workgroups: [3], bindings: ['a', 'b', 'c'], constants: [4] }),
        reference: ([a, b]) => [Int32Array.from(a, (v, i) => (v + b[i]) | 0)],
      },
      none: {
        define: (f) => f.output('o', 'u8', [3]).output('s', 'bool', []).fill('o', 7).fill('s', true),
        reference: () => [Uint8Array.of(7, 7, 7), Uint8Array.of(1)],
      },
    };
    const programs = {};
    let other; // a device no context runs on
    let module;

    before(async () => {
      const builder = new halrt.ModuleBuilder('p').executable('k', BUILTIN);
      for (const [name, { define }] of Object.entries(FUNCTIONS)) builder.function(name, define);
      module = builder.build(instance);
      other = instance.createDevice('local-sync');
      for (const uri of DEVICE_URIS) {
        const hal = new halrt.HalModule(instance, devices[uri]);
        programs[uri] = { hal, context: new halrt.Context(instance, [hal, module]) };
      }
      baseline = await liveBaseline();
    });
    after(async () => {
      for (const { hal, context } of Object.values(programs)) context.close(), hal.close();
      module.close();
      other.close();
      baseline = await liveBaseline();
    });

    const itemArb = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          kind: fc.constant('view'),
          dtype: rarely(fc.constantFrom(...DTYPES), 'declared', 4),
          shape: rarely(smallShapeArb, 'declared', 4),
          device: rarely(fc.constant('other'), 'same', 6),
          closed: rarely(fc.constant(true), false, 8),
          seed: fc.nat(),
        }),
      },
      { weight: 1, arbitrary: junkArb },
    );
    const inputsArb = fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record({
          declared: fc.constant(true),
          seed: fc.nat(),
          fill: fc.constantFrom('bits', 'floats'),
          alias: rarely(fc.constant(true), false),
          mutate: fc.option(fc.record({ at: fc.nat(3), item: itemArb }), { freq: 3 }),
        }),
      },
      { weight: 2, arbitrary: fc.record({ items: fc.array(itemArb, { maxLength: 4 }) }) },
      { weight: 1, arbitrary: junkArb },
    );
    const optionsArb = fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom('omit', 'empty', 'signal') },
      { weight: 1, arbitrary: fc.constantFrom('aborted', 'badSignal') },
      { weight: 1, arbitrary: junkArb },
    );
    const invokeArb = fc.record({
      uri: uriArb,
      fn: fc.constantFrom(...Object.keys(FUNCTIONS)),
      inputs: inputsArb,
      options: optionsArb,
      closeFunction: rarely(fc.constant(true), false, 15),
      closeContext: rarely(fc.constant(true), false, 15),
      twice: rarely(fc.constant(true), false, 4),
    });

    const sameValue = (actual, expected) => (Number.isNaN(expected) ? Number.isNaN(actual) : Object.is(actual, expected));

    it('invoke() resolves with outputs equal to the JavaScript reference, or rejects with the documented code', async () => {
      const property = fc.asyncProperty(invokeArb, async (spec) => {
        logCase('invoke', spec);
        const made = [];
        try {
          const device = devices[spec.uri];
          const scope = { instance, device, closedDevice };
          let context = programs[spec.uri].context;
          if (spec.closeContext) {
            context = new halrt.Context(instance, [programs[spec.uri].hal, module]);
            made.push(context);
          }
          const fn = context.lookupFunction(`p.${spec.fn}`);
          made.push(fn);
          const declared = fn.inputs;

          // The inputs argument, and what the model knows of each entry.
          let inputs;
          let entries = null;
          if (spec.inputs.junk) {
            inputs = makeJunk(spec.inputs, scope);
            // A junk Array is an inputs array of things that are not views.
            if (Array.isArray(inputs) && !util.types.isProxy(inputs)) entries = inputs.map((value) => ({ junk: true, value }));
          } else {
            let items;
            if (spec.inputs.declared) {
              items = declared.map((_, i) => ({
                kind: 'view', dtype: 'declared', shape: 'declared', device: 'same', closed: false,
                seed: spec.inputs.seed + i, fill: spec.inputs.fill,
              }));
              if (spec.inputs.mutate) {
                const at = spec.inputs.mutate.at % (items.length + 1);
                items[at] = spec.inputs.mutate.item;
              }
            } else {
              items = spec.inputs.items;
            }
            entries = items.map((item, i) => {
              if (item.junk) return { junk: true, value: makeJunk(item, scope) };
              const dtype = item.dtype === 'declared' ? (declared[i] ? declared[i].dtype : 'f32') : item.dtype;
              const shape = item.shape === 'declared' ? (declared[i] ? declared[i].shape : [1]) : item.shape;
              const view = makeView(item.device === 'same' ? device : other, dtype, shape, item.seed, item.fill || 'bits');
              made.push(view);
              return { view: true, value: view, dtype, shape, device: item.device, closed: item.closed };
            });
            if (spec.inputs.declared && spec.inputs.alias && entries.length === 2 && !entries[0].junk) {
              entries[1] = entries[0];
            }
            inputs = entries.map((entry) => entry.value);
          }
          // The input data, before anything is closed.
          const data = [];
          for (const entry of entries || []) {
            if (!entry.view) continue;
            const read = await settle(entry.value.read(), 'bufferView.read()');
            if (!read.ok) assert.fail(`read() of a fresh view rejected: ${read.error && read.error.message}`);
            data.push(read.value);
          }
          for (const entry of entries || []) if (entry.closed) entry.value.close();
          if (spec.closeFunction) fn.close();
          if (spec.closeContext) context.close();

          let options;
          let signal;
          switch (spec.options) {
            case 'omit': break;
            case 'empty': options = {}; break;
            case 'signal': signal = new AbortController().signal; options = { signal }; break;
            case 'aborted': options = { signal: AbortSignal.abort() }; break;
            case 'badSignal': options = { signal: { aborted: false } }; break;
            default: options = makeJunk(spec.options, scope);
          }

          // The model, in the order the checks run.
          let expected = null;
          const fail = (codes, parts = []) => {
            expected = expected || { codes, parts };
          };
          if (options !== undefined && (options === null || typeof options !== 'object')) fail(['INVALID_ARGUMENT'], ['options']);
          else if (options !== undefined && options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
            fail(['INVALID_ARGUMENT'], ['signal']);
          } else if (options !== undefined && ['named', 'read'].some((key) => options[key] !== undefined && typeof options[key] !== 'boolean')) {
            fail(['INVALID_ARGUMENT'], ['options.']);
          } else if (options !== undefined && options.signal && options.signal.aborted) fail(['CANCELLED'], ['aborted']);
          if (spec.closeFunction) fail(['FAILED_PRECONDITION'], ['closed']);
          if (spec.closeContext) fail(['FAILED_PRECONDITION'], ['closed']);
          // Host data among the entries (here: junk numbers, Arrays, bytes that
          // fit no signature) is checked in JavaScript first, in order.
          if (entries && entries.some((entry) => entry.junk && isHostJunk(entry.value))) {
            if (entries.length !== declared.length) fail(['INVALID_ARGUMENT'], [`takes ${declared.length} inputs`]);
            entries.forEach((entry, i) => entry.junk && fail(['INVALID_ARGUMENT'], [`inputs[${i}]`]));
          }
          const named = inputs !== null && typeof inputs === 'object' && !util.types.isProxy(inputs) &&
            [Object.prototype, null].includes(Object.getPrototypeOf(inputs));
          if (named) {
            // Inputs by name: here a junk object, right only for a function without inputs.
            if (Object.keys(inputs).length > 0 || declared.length > 0) fail(['INVALID_ARGUMENT'], ['input']);
          } else if (!Array.isArray(inputs) || util.types.isProxy(inputs)) fail(['INVALID_ARGUMENT'], ['inputs']);
          (entries || []).forEach((entry, i) => {
            if (entry.junk) fail(['INVALID_ARGUMENT'], [`inputs[${i}]`]);
            else if (entry.closed) fail(['FAILED_PRECONDITION'], [`inputs[${i}]`, 'closed']);
          });
          if (entries && entries.length !== declared.length) fail(['INVALID_ARGUMENT']);
          // Every input's signature is checked before any device (when the call is prepared).
          (entries || []).forEach((entry, i) => {
            if (!declared[i]) return;
            if (entry.dtype !== declared[i].dtype || JSON.stringify(entry.shape) !== JSON.stringify(declared[i].shape)) {
              fail(['INVALID_ARGUMENT']);
            }
          });
          (entries || []).forEach((entry) => entry.device !== 'same' && fail(['INVALID_ARGUMENT'], ['another device']));

          const invoke = () => {
            const call = attempt(() => (spec.options === 'omit' ? fn.invoke(inputs) : fn.invoke(inputs, options)));
            if (!call.ok) assert.fail(`invoke() threw instead of rejecting: ${call.error && call.error.stack}`);
            return call.value;
          };
          const promises = spec.twice ? [invoke(), invoke()] : [invoke()];
          for (const promise of promises) {
            const result = await settle(promise, 'function.invoke()');
            if (result.ok) made.push(...result.value);
            if (expected) {
              assert.ok(!result.ok, `expected ${expected.codes} (${expected.parts}), but invoke() resolved`);
              assertHalrtError(result.error, { codes: expected.codes, methods: ['function.invoke', `p.${spec.fn}`], parts: expected.parts });
              continue;
            }
            if (!result.ok) assert.fail(`expected invoke() to resolve, got ${result.error && result.error.stack}`);
            const outputs = result.value;
            assert.ok(Array.isArray(outputs));
            assert.strictEqual(outputs.length, fn.outputs.length);
            const want = FUNCTIONS[spec.fn].reference(data);
            for (let i = 0; i < outputs.length; ++i) {
              assert.ok(outputs[i] instanceof halrt.BufferView);
              assert.deepStrictEqual([outputs[i].dtype, outputs[i].shape], [fn.outputs[i].dtype, fn.outputs[i].shape]);
              const read = await settle(outputs[i].read(), 'bufferView.read()');
              if (!read.ok) assert.fail(`read() of an output rejected: ${read.error && read.error.message}`);
              assert.ok(read.value instanceof ARRAY_TYPES[fn.outputs[i].dtype]);
              assert.strictEqual(read.value.length, want[i].length);
              for (let j = 0; j < want[i].length; ++j) {
                assert.ok(sameValue(read.value[j], want[i][j]),
                  `${fn.outputs[i].name}[${j}]: got ${read.value[j]}, expected ${want[i][j]} (inputs ${data.map((d) => d[j])})`);
              }
            }
          }
          if (signal) assert.strictEqual(signal.aborted, false);
          // The function does not write its inputs.
          let k = 0;
          for (const entry of entries || []) {
            if (!entry.view) continue;
            const before = data[k++];
            if (entry.closed) continue;
            const read = await settle(entry.value.read(), 'bufferView.read()');
            if (!read.ok) assert.fail(`read() of an input rejected: ${read.error && read.error.message}`);
            assert.ok(bytesOf(read.value).equals(bytesOf(before)), 'inputs are unchanged');
          }
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 250);
    });
  });

  //===--------------------------------------------------------------------===//
  // Module descriptions
  //===--------------------------------------------------------------------===//

  describe('Module.fromObject / fromJson / ModuleBuilder with mutated descriptions', () => {
    const mutantValueArb = fc.oneof(
      fc.constantFrom(0, -1, 1, 2, 1.5, -0, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 32 + 1, 2 ** 53, 2 ** 63, 2 ** 64, 1e308,
        -1e308, Number.MIN_VALUE, NaN, Infinity, 65535, 65536, 1024, 1025),
      fc.integer({ min: -3, max: 70000 }),
      fc.constantFrom('', 'x', 'y', 'h', 'hal', 'f32', 'bool', 'i64', 'k', 'k.relu_f32', 'k.nope', 'nope.add_f32', 'lib.scale',
        '.', 'k.', '.relu_f32', '1x', 'a-b', '\u00e9', 'a\u0000b', 'dispatch', 'fill', 'copy', 'trace', 'barrier',
        'halrt.module/1', 'halrt.module/2', 'a'.repeat(300), '/dev/zero', '/', 'libhalrt_missing.so'),
      fc.string({ maxLength: 6 }),
      fc.constantFrom(true, false, null),
      fc.constantFrom([], {}, [0], [1, 1, 1, 1], [65536], [2 ** 31 - 1, 2], [1, 1, 1, 1, 1, 1, 1, 1, 1], [[1]], { builtin: true },
        { f32: 1 }, { f32: 'x' }, { library: '' }, { ptx: { text: '' } }, { name: 'v', dtype: 'f32', shape: [2] },
        { op: 'barrier' }, { op: 'fill', target: 'y', value: 1 }, { op: 'trace', key: 'k', values: ['x'] }),
      fc.array(fc.integer({ min: -2, max: 70000 }), { maxLength: 4 }),
    );
    const mutationArb = fc.record({
      select: fc.nat(),
      action: fc.constantFrom('delete', 'replace', 'replace', 'replace', 'rename', 'addKey', 'wrapDeep', 'duplicate', 'scale', 'scale'),
      value: mutantValueArb,
      key: fc.constantFrom('x', 'unknown', '__proto__', 'constructor', '', 'a b', 'op', 'name', 'inputs', 'local', 'cuda',
        'builtin', 'toString', 'main2', 'entries', 'params'),
      depth: fc.constantFrom(1, 2, 31, 32, 33, 63, 64, 65, 300, 100000),
      factor: fc.constantFrom(0, -1, 2, 3, 1024, 2 ** 20, 2 ** 31, 2 ** 32, 0.5, 1e300),
    });
    const { BASES, mutate, mustReject, expectedSignatures, runnable } = require('./support/property-modules');
    const CREATE_CODES = ['INVALID_ARGUMENT', 'NOT_FOUND', 'RESOURCE_EXHAUSTED'];
    const FROM = ['Module.fromObject', 'Module.fromJson'];

    /**
     * Checks an accepted module against its description, links it and runs
     * every function with zero-filled inputs when it is small enough.
     */
    async function exercise(module, parsed, { uri, traceDispatches, base, pristine }, made) {
      assert.strictEqual(module.name, parsed.name);
      const signatures = expectedSignatures(parsed);
      const normalise = (list) => JSON.parse(JSON.stringify(list, (key, v) => (Object.is(v, -0) ? 0 : v)));
      assert.deepStrictEqual(module.functions, normalise(signatures), 'module.functions describes the module');
      const traced = [];
      const hal = new halrt.HalModule(instance, devices[uri], {
        traceDispatches,
        debugSink(key, tensors, info) {
          traced.push({ key, tensors, info });
        },
      });
      made.push(hal);
      const linked = attempt(() => new halrt.Context(instance, [hal, module]));
      if (!linked.ok) {
        assertHalrtError(linked.error, { methods: ['new Context'] });
        return;
      }
      made.push(linked.value);
      if (!runnable(parsed)) return;
      for (const signature of module.functions) {
        const fn = linked.value.lookupFunction(`${module.name}.${signature.name}`);
        made.push(fn);
        const inputs = signature.inputs.map(({ shape, dtype }) => devices[uri].empty(shape, dtype));
        made.push(...inputs);
        const result = await settle(fn.invoke(inputs), 'function.invoke()');
        if (!result.ok) {
          assertHalrtError(result.error, { methods: ['function.invoke', fn.name] });
          continue;
        }
        made.push(...result.value);
        assert.strictEqual(result.value.length, signature.outputs.length);
        for (let i = 0; i < result.value.length; ++i) {
          const output = result.value[i];
          assert.deepStrictEqual([output.dtype, output.shape], [signature.outputs[i].dtype, signature.outputs[i].shape]);
          const read = await settle(output.read(), 'bufferView.read()');
          if (!read.ok) assert.fail(`read() of an output rejected: ${read.error && read.error.message}`);
          const want = pristine && BASES[base].outputs && BASES[base].outputs[signature.name];
          if (want) assert.ok(bytesOf(read.value).equals(bytesOf(want[i])), `${signature.name} output ${i}: ${read.value}`);
        }
      }
      for (const { tensors } of traced) {
        assert.ok(Array.isArray(tensors));
        for (const tensor of tensors) {
          assert.ok(DTYPES.includes(tensor.dtype));
          assert.strictEqual(tensor.data.length, tensor.shape.reduce((a, b) => a * b, 1));
        }
      }
    }

    it('fromObject() of a mutated module is a HalrtError (a must-reject rule: INVALID_ARGUMENT or NOT_FOUND) or a module that describes itself, links or fails cleanly, and runs', async () => {
      const junkOrValid = (arbitrary, valid, weight = 10) => fc.oneof({ weight, arbitrary: fc.constant(valid) }, { weight: 1, arbitrary });
      const spec = fc.record({
        uri: uriArb,
        base: fc.nat(BASES.length - 1),
        mutations: fc.array(mutationArb, { maxLength: 3 }),
        instance: junkOrValid(fc.oneof(junkArb, fc.constant('closed')), 'ok'),
        options: junkOrValid(fc.oneof(junkArb, junkArb.map((junk) => ({ baseDir: junk }))), 'omit'),
        traceDispatches: fc.boolean(),
      });
      const property = fc.asyncProperty(spec, async (s) => {
        logCase('fromObject', s);
        const made = [];
        try {
          const description = structuredClone(BASES[s.base].description);
          for (const m of s.mutations) mutate(description, m);
          let parsed;
          try {
            parsed = JSON.parse(JSON.stringify(description));
          } catch {
            parsed = undefined; // not serialisable (nested too deeply for JSON.stringify)
          }
          let target = instance;
          if (s.instance === 'closed') {
            target = new halrt.Instance();
            target.close();
          } else if (s.instance !== 'ok') {
            target = makeJunk(s.instance, { instance, device: devices[s.uri], closedDevice });
          }
          const scope = { instance, device: devices[s.uri], closedDevice };
          const options = s.options === 'omit' ? undefined : s.options.junk ? makeJunk(s.options, scope)
            : { baseDir: makeJunk(s.options.baseDir, scope) };
          // Options default only when undefined; otherwise they must be a
          // non-Array object, whose baseDir, when given, is a string.
          const badOptions = options !== undefined &&
            (options === null || typeof options !== 'object' || Array.isArray(options) ||
             (options.baseDir !== undefined && typeof options.baseDir !== 'string'));
          const badArguments = target !== instance || badOptions;
          const result = attempt(() => (options === undefined ? halrt.Module.fromObject(target, description)
            : halrt.Module.fromObject(target, description, options)));
          const reason = badArguments ? 'bad instance or options' : parsed === undefined ? 'not serialisable' : mustReject(parsed);
          if (!result.ok) {
            assertHalrtError(result.error, {
              codes: badArguments ? ['INVALID_ARGUMENT', 'FAILED_PRECONDITION'] : CREATE_CODES, methods: FROM,
            });
            assert.ok(reason, `rejected a module that docs/module-format.md accepts (${result.error.message}): ${JSON.stringify(parsed)}`);
            return;
          }
          made.push(result.value);
          assert.ok(!reason, `accepted a module that must be rejected (${reason}): ${JSON.stringify(parsed).slice(0, 2000)}`);
          await exercise(result.value, parsed, { ...s, pristine: s.mutations.length === 0 }, made);
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      // A case random runs meet rarely, then random ones.
      const examples = [[{ uri: DEVICE_URIS[0], base: 0, mutations: [], instance: 'ok', options: { junk: 'null' }, traceDispatches: false }]];
      await checkProperty(property, 200, { examples });
    });

    it('fromJson() of edited module text is a HalrtError (INVALID_ARGUMENT for text JSON.parse rejects) or a module that describes itself and runs', async () => {
      const TOKENS = ['', ',', '{', '}', '[', ']', ':', '"', '\\', '\\u0000', '\\ud800', '1e999', '-0', '1.5', '1.0', '01', '0x1',
        '1'.repeat(70), '9'.repeat(20), 'true', 'null', 'NaN', '\u0000', '\u2028', '"x":1,', '"name":"dup",', '/*c*/', ' ',
        '\n', '['.repeat(70), '-', '+1', '"\\u00'];
      const spec = fc.record({
        uri: uriArb,
        base: fc.nat(BASES.length - 1),
        indent: fc.constantFrom(0, 1),
        edits: fc.array(fc.record({
          at: fc.nat(),
          remove: fc.nat(4),
          insert: fc.oneof(fc.constantFrom(...TOKENS), fc.string({ maxLength: 3 })),
        }), { minLength: 1, maxLength: 3 }),
      });
      const property = fc.asyncProperty(spec, async (s) => {
        logCase('fromJson', s);
        const made = [];
        try {
          let text = JSON.stringify(BASES[s.base].description, null, s.indent);
          for (const edit of s.edits) {
            const at = edit.at % (text.length + 1);
            text = text.slice(0, at) + edit.insert + text.slice(at + edit.remove);
          }
          let parsed;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          const reason = parsed === undefined ? 'JSON.parse rejects it' : mustReject(parsed);
          const result = attempt(() => halrt.Module.fromJson(instance, text, os.tmpdir()));
          if (!result.ok) {
            assertHalrtError(result.error, {
              codes: parsed === undefined ? ['INVALID_ARGUMENT'] : CREATE_CODES, methods: ['Module.fromJson'],
            });
            return;
          }
          made.push(result.value);
          assert.ok(!reason, `accepted text that must be rejected (${reason}): ${JSON.stringify(text)}`);
          await exercise(result.value, parsed, { ...s, traceDispatches: false, pristine: false }, made);
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 300);
    });

    it('ModuleBuilder with arbitrary arguments: build() gives a module or a HalrtError, and no builder method throws anything else', async () => {
      const argArb = fc.oneof(
        { weight: 4, arbitrary: fc.constant({ valid: true }) },
        { weight: 1, arbitrary: junkArb },
      );
      const callArb = fc.record({
        method: fc.constantFrom('input', 'output', 'local', 'dispatch', 'fill', 'copy', 'trace', 'barrier'),
        args: fc.array(argArb, { minLength: 3, maxLength: 3 }),
      });
      const spec = fc.record({
        uri: uriArb,
        name: argArb,
        executable: fc.tuple(argArb, argArb),
        fnName: argArb,
        define: argArb,
        calls: fc.array(callArb, { maxLength: 5 }),
      });
      const VALID = {
        input: ['x', 'f32', [4]],
        output: ['y', 'f32', [4]],
        local: ['t', 'f32', [4]],
        dispatch: ['k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [4] }, undefined],
        fill: ['y', 1, undefined],
        copy: ['x', 'y', undefined],
        trace: ['key', ['y'], undefined],
        barrier: [undefined, undefined, undefined],
      };
      const property = fc.asyncProperty(spec, async (s) => {
        logCase('ModuleBuilder', s);
        const scope = { instance, device: devices[s.uri], closedDevice };
        const arg = (a, valid) => (a.valid ? valid : makeJunk(a, scope));
        const made = [];
        try {
          const outcome = attempt(() => {
            const builder = new halrt.ModuleBuilder(arg(s.name, 'b'))
              .executable(arg(s.executable[0], 'k'), arg(s.executable[1], BUILTIN));
            builder.function(arg(s.fnName, 'f'), arg(s.define, (f) => {
              for (const call of s.calls) f[call.method](...call.args.map((a, i) => arg(a, VALID[call.method][i])));
            }));
            builder.toObject();
            const module = builder.build(instance);
            made.push(module);
            return module;
          });
          if (!outcome.ok) assertHalrtError(outcome.error, { methods: ['Module.fromObject', 'Module.fromJson', 'ModuleBuilder.function', 'ModuleBuilder.toObject', 'FunctionBuilder.dispatch', 'FunctionBuilder.trace'] });
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 150);
    });
  });

  //===--------------------------------------------------------------------===//
  // The command line
  //===--------------------------------------------------------------------===//

  describe('`halrt run` with bad arguments and files', () => {
    const BIN = path.join(__dirname, '..', 'bin', 'halrt.js');
    let dir;
    const file = (name) => path.join(dir, name);
    // The modules a case runs, and a valid value of each input.
    const MODULES = {
      mlp: { inputs: { x: [4, 8], w1: [8, 16], w2: [16, 3] }, dtype: 'f32' },
      m64: { inputs: { a: [3] }, dtype: 'i64' },
    };

    before(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-property-cli-'));
      fs.copyFileSync(path.join(__dirname, '..', 'examples', 'mlp.halrt.json'), file('mlp.halrt.json'));
      fs.writeFileSync(file('m64.halrt.json'), JSON.stringify(new halrt.ModuleBuilder('m64')
        .function('main', (f) => f.input('a', 'i64', [3]).output('b', 'i64', [3]).copy('a', 'b')).toObject()));
      for (const [name, shape] of Object.entries(MODULES.mlp.inputs)) {
        const count = shape.reduce((x, y) => x * y, 1);
        fs.writeFileSync(file(`${name}.npy`), npy.serialize({ dtype: 'f32', shape, data: randomFloats(count, count) }));
      }
      fs.writeFileSync(file('a.npy'), npy.serialize({ dtype: 'i64', shape: [3], data: BigInt64Array.of(1n, -2n, 3n) }));
      fs.writeFileSync(file('wrongShape.npy'), npy.serialize({ dtype: 'f32', shape: [2, 2], data: new Float32Array(4) }));
      fs.writeFileSync(file('wrongDtype.npy'), npy.serialize({ dtype: 'i32', shape: [4, 8], data: new Int32Array(32) }));
      fs.writeFileSync(file('truncated.npy'), npy.serialize({ dtype: 'f32', shape: [4, 8], data: new Float32Array(32) }).subarray(0, 100));
      const huge = npy.serialize({ dtype: 'f32', shape: [1], data: new Float32Array(1) }).toString('latin1')
        .replace("'shape': (1,)", "'shape': (1099511627776,)");
      fs.writeFileSync(file('huge.npy'), Buffer.from(huge, 'latin1'));
      const wide = Buffer.alloc(16);
      Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 2, 0]).copy(wide);
      wide.writeUInt32LE(0xfffffff0, 8);
      fs.writeFileSync(file('wideHeader.npy'), wide);
      fs.writeFileSync(file('notnpy.npy'), '{"not": "npy"}');
      fs.writeFileSync(file('badjson.halrt.json'), '{"format": "halrt.module/1"');
      fs.writeFileSync(file('invalid.halrt.json'), '{"format": "halrt.module/2", "name": "m", "functions": {}}');
      fs.mkdirSync(file('adir'));
    });
    after(() => fs.rmSync(dir, { recursive: true, force: true }));

    // One fault per case; `status`: the exit codes allowed (2 for bad arguments and files).
    const faultArb = fc.oneof(
      fc.record({ fault: fc.constant('module'), which: fc.constantFrom('missing', 'adir', '/dev/null', 'badjson', 'invalid', 'random'), text: fc.string({ maxLength: 8 }) }),
      fc.record({
        fault: fc.constant('inputValue'),
        value: fc.oneof(
          fc.constantFrom('[1,2', '', 'null', '{}', '"s"', '[[1],[2,[3]]]', '[true]', '[1.5,2,3]', '[0.5]', 'NaN', '1e999', '[[]]', '-', '[,]',
            '[1e400, 1, 2]', '[1, 2, "3"]', '[9007199254740993, 1, 2]', '[-1e30, 1, 2]', '[1,2,3,4]'),
          fc.string({ maxLength: 6 }),
          fc.json({ maxDepth: 2 }),
        ),
      }),
      fc.record({ fault: fc.constant('inputFile'), which: fc.constantFrom('missing', 'adir', '/dev/null', 'notnpy', 'wrongShape', 'wrongDtype', 'truncated', 'huge', 'wideHeader', '') }),
      fc.record({ fault: fc.constant('inputSpec'), spec: fc.constantFrom('=1', 'x', '=', 'nosuch=[1]', 'x==[1]', ' x=[1]', 'x=@', '@x.npy') }),
      fc.record({ fault: fc.constant('missingInput') }),
      fc.record({ fault: fc.constant('option'), args: fc.constantFrom(
        ['--repeat', '0'], ['--repeat', '-1'], ['--repeat', 'abc'], ['--repeat', '1.5'], ['--repeat', ''], ['--repeat', '9007199254740993'],
        ['--device', 'nope'], ['--device', ''], ['--device', 'local-task?workers=0'], ['--device', 'local-sync?workers=2'],
        ['--device', 'cuda://x'], ['--device', 'local-sync://1'], ['--trace', 'bogus'], ['--trace', 'npy:'], ['--trace', 'npy'],
        ['--trace', 'STDIO'], ['--function', 'nope'], ['--function', ''], ['--function', 'main.x'], ['--bogus'], ['--input'],
      ) }),
      fc.record({ fault: fc.constant('unwritable'), args: fc.constantFrom(['--trace', 'npy:/dev/null/sub'], ['--output', '/dev/null/out'], ['--profile', '/dev/null/p.json']) }),
    );
    const cliArb = fc.record({ module: fc.constantFrom('mlp', 'm64'), fault: faultArb, seed: fc.nat() });

    // Whether the CLI would take `text` as a JSON value for an input of `shape` and `dtype`.
    function acceptsJson(text, shape, dtype) {
      let json;
      try {
        json = JSON.parse(text);
      } catch {
        return false;
      }
      const values = [json].flat(Infinity);
      if (values.some((v) => typeof v !== 'number' && typeof v !== 'boolean')) return false;
      if (dtype === 'i64' && values.some((v) => typeof v === 'number' && !Number.isInteger(v))) return false;
      return values.length === shape.reduce((a, b) => a * b, 1);
    }

    function run(args) {
      return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk) => (stdout += chunk));
        child.stderr.on('data', (chunk) => (stderr += chunk));
        const timer = setTimeout(() => child.kill('SIGKILL'), 30000);
        child.on('error', reject);
        child.on('close', (status, signal) => {
          clearTimeout(timer);
          resolve({ status, signal, stdout, stderr });
        });
      });
    }

    it('exits 2 (1 where a file cannot be written) with one line on stderr, nothing on stdout, no stack trace and no signal', async () => {
      const property = fc.asyncProperty(cliArb, async ({ module, fault, seed }) => {
        logCase('cli', { module, fault, seed });
        const { inputs } = MODULES[module];
        const names = Object.keys(inputs);
        let moduleFile = file(`${module}.halrt.json`);
        const inputArgs = new Map(names.map((name) => [name, `${name}=@${file(`${name}.npy`)}`]));
        const extra = ['--device', 'local-sync'];
        let status = [2];
        const target = names[seed % names.length];
        switch (fault.fault) {
          case 'module':
            if (fault.which === 'random') {
              moduleFile = file(`random-${seed}.halrt.json`);
              fs.writeFileSync(moduleFile, fault.text);
            } else {
              moduleFile = fault.which.startsWith('/') ? fault.which : file(`${fault.which}.halrt.json`.replace('adir.halrt.json', 'adir'));
            }
            break;
          case 'inputValue':
            fc.pre(!acceptsJson(fault.value, inputs[target], MODULES[module].dtype));
            inputArgs.set(target, `${target}=${fault.value}`);
            break;
          case 'inputFile':
            inputArgs.set(target, `${target}=@${fault.which.startsWith('/') || fault.which === '' ? fault.which : file(fault.which === 'adir' ? 'adir' : `${fault.which}.npy`)}`);
            break;
          case 'inputSpec':
            inputArgs.set(target, fault.spec);
            break;
          case 'missingInput':
            inputArgs.delete(target);
            break;
          case 'option':
            extra.push(...fault.args);
            break;
          default: // unwritable
            extra.push(...fault.args);
            status = [1, 2];
        }
        const args = ['run', moduleFile, ...[...inputArgs.values()].map((spec) => `--input=${spec}`), ...extra];
        const result = await run(args);
        const shown = `halrt ${args.join(' ')}\n  -> status ${result.status}, signal ${result.signal}\n  stdout ${JSON.stringify(result.stdout)}\n  stderr ${JSON.stringify(result.stderr)}`;
        assert.strictEqual(result.signal, null, `killed by a signal: ${shown}`);
        assert.ok(status.includes(result.status), `exit status ${status.join(' or ')} expected: ${shown}`);
        assert.strictEqual(result.stdout, '', `nothing on stdout: ${shown}`);
        assert.match(result.stderr, /^[^\n]+\n$/, `exactly one line on stderr: ${shown}`);
        assert.doesNotMatch(result.stderr, /\bat .*:\d+:\d+|node:internal|\b(TypeError|RangeError|ReferenceError)\b/, `no stack trace or JavaScript error: ${shown}`);
      });
      // Cases that once slipped through, then random ones.
      const examples = [
        [{ module: 'm64', fault: { fault: 'inputValue', value: '[1.5,2,3]' }, seed: 0 }],
        [{ module: 'mlp', fault: { fault: 'inputFile', which: 'wideHeader' }, seed: 1 }],
      ];
      await checkProperty(property, 10, { examples });
    });
  });

  //===--------------------------------------------------------------------===//
  // Defects fixed under issue 10
  //===--------------------------------------------------------------------===//

  describe('defects of issue 10', () => {
    const METHODS = [
      ['BufferView', 'read', 'promise'], ['BufferView', 'close', 'sync'], ['BufferView', 'shape', 'getter'],
      ['BufferView', 'dtype', 'getter'], ['BufferView', 'byteLength', 'getter'], ['BufferView', 'rank', 'getter'],
      ['Device', 'copy', 'promise'], ['Device', 'tensor', 'sync'], ['Device', 'empty', 'sync'], ['Device', 'close', 'sync'],
      ['Instance', 'createDevice', 'sync'], ['Instance', 'close', 'sync'],
      ['Function', 'invoke', 'promise'], ['Function', 'close', 'sync'],
      ['Context', 'lookupFunction', 'sync'], ['Context', 'close', 'sync'],
      ['Module', 'name', 'getter'], ['Module', 'functions', 'getter'], ['Module', 'close', 'sync'],
      ['HalModule', 'close', 'sync'], // HalModule.prototype.name is the constant 'hal' whatever the receiver
    ];
    const ARGUMENTS = {
      read: () => [], close: () => [], copy: (o) => [o.view, o.view], tensor: () => [new Float32Array(1), [1]],
      empty: () => [[1], 'f32'], createDevice: () => ['local-sync'], invoke: () => [[]], lookupFunction: () => ['w.f'],
    };
    const RECEIVERS = ['instance', 'device', 'view', 'hal', 'module', 'context', 'fn'];
    const CLASS_OF = { instance: 'Instance', device: 'Device', view: 'BufferView', hal: 'HalModule', module: 'Module', context: 'Context', fn: 'Function' };

    it('wrong receiver (issue 10): every method called on a wrong receiver throws a HalrtError (promise methods reject), never a TypeError', async () => {
      const spec = fc.record({
        method: fc.nat(METHODS.length - 1),
        receiver: fc.oneof(junkArb, fc.constantFrom(...RECEIVERS).map((object) => ({ object }))),
      });
      const property = fc.asyncProperty(spec, async ({ method: index, receiver }) => {
        const [cls, name, kind] = METHODS[index];
        fc.pre(!receiver.object || CLASS_OF[receiver.object] !== cls);
        logCase('receiver', { cls, name, kind, receiver });
        const made = [];
        try {
          const device = devices[DEVICE_URIS[0]];
          const view = device.empty([1], 'f32');
          const hal = new halrt.HalModule(instance, device);
          const module = new halrt.ModuleBuilder('w').function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
          const context = new halrt.Context(instance, [hal, module]);
          const fn = context.lookupFunction('w.f');
          made.push(view, hal, module, context, fn);
          const objects = { instance, device, view, hal, module, context, fn };
          const self = receiver.object ? objects[receiver.object] : makeJunk(receiver, { instance, device, closedDevice });
          // Some junk is a real object (the device): a right receiver, not this property's case.
          if (self instanceof halrt[cls]) return;
          const descriptor = Object.getOwnPropertyDescriptor(halrt[cls].prototype, name);
          const call = () => (kind === 'getter' ? descriptor.get.call(self) : descriptor.value.apply(self, (ARGUMENTS[name] || (() => []))(objects)));
          const result = attempt(call);
          const what = `${cls}.prototype.${name} on ${receiver.object || receiver.junk}`;
          if (kind === 'promise') {
            if (!result.ok) assert.fail(`${what} threw instead of rejecting: ${result.error}`);
            const settled = await settle(result.value, what);
            assert.ok(!settled.ok, `${what} resolved`);
            assertHalrtError(settled.error, { codes: ['INVALID_ARGUMENT'] });
          } else {
            assert.ok(!result.ok, `${what} did not throw`);
            assertHalrtError(result.error, { codes: ['INVALID_ARGUMENT'] });
          }
        } finally {
          closeEverything(made);
          await assertNoLeak(baseline);
        }
      });
      await checkProperty(property, 100);
    });

    it('re-entrancy (issue 10): getters and Proxies that close objects while arguments are read never crash the process (run in a child process)', async function () {
      const script = path.join(__dirname, 'support', 'property-reentrancy.js');
      const result = await new Promise((resolve, reject) => {
        const child = spawn(process.execPath, ['--expose-gc', script], {
          env: { ...process.env, HALRT_PROPERTY_SEED: String(SEED), HALRT_PROPERTY_RUNS: String(RUNS) },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (chunk) => (output += chunk));
        child.stderr.on('data', (chunk) => (output += chunk));
        const timer = setTimeout(() => child.kill('SIGKILL'), 90000);
        child.on('error', reject);
        child.on('close', (status, signal) => {
          clearTimeout(timer);
          resolve({ status, signal, output });
        });
      });
      // The child logs each case before it runs it: after a crash the last case is the culprit.
      const cases = result.output.split('\n').filter((line) => line.startsWith('[property reentrancy]'));
      const tail = result.output.split('\n').filter((line) => !line.startsWith('[property reentrancy]')).join('\n');
      assert.ok(result.signal === null && result.status === 0,
        `${rerunHint('node --expose-gc test/support/property-reentrancy.js')}\nthe child ${result.signal ? `was killed by ${result.signal}` : `exited with ${result.status}`}` +
        ` after ${cases.length} case(s); last case: ${cases[cases.length - 1] || 'none'}\n${tail.slice(-4000)}`);
    });
  });
});

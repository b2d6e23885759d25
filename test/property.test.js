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
// Properties named "KNOWN DEFECT (...)" pin defects being fixed under
// issue 10; they fail until the fix lands and are not skipped.
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
          if (dataSpec.junk) {
            data = makeJunk(dataSpec, scope);
          } else {
            const matched = shapeInfo.ok && shapeInfo.count <= 4096n ? Number(shapeInfo.count) : 3;
            const length = dataSpec.length === 'match' ? matched : dataSpec.length;
            data = makeTypedArray(dataSpec.type, length, dataSpec.offset, dataSpec.fill, dataSpec.seed);
          }
          const dtype = makeDtype(dtypeSpec, dataSpec, scope);
          const explicit = passDtype || dtype !== undefined;
          const snapshot = dataSpec.junk ? null : Buffer.from(bytesOf(data));

          // The model, in the binding's order: data, shape, dtype, data type, length, bool values.
          let expected;
          if (dataSpec.junk) {
            expected = { error: 'data' };
          } else if (shapeInfo.throws) {
            expected = { sentinel: true };
          } else if (shapeInfo.ok === false) {
            expected = { error: 'shape' };
          } else if (dtype !== undefined && (typeof dtype !== 'string' || !DTYPES.includes(dtype))) {
            expected = { error: 'dtype' };
          } else {
            const effective = dtype === undefined ? INFERRED_DTYPE[dataSpec.type] : dtype;
            if (!arrayAccepts(effective, dataSpec.type)) {
              expected = { error: 'dtype' };
            } else if (BigInt(data.length) !== shapeInfo.count) {
              expected = { error: shapeInfo.ambiguous ? 'shape' : 'data' };
            } else if (effective === 'bool' && data.some((v) => v > 1)) {
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
              assert.ok(!expected.ok || expected.ambiguous, `expected success, got ${result.error && result.error.message}`);
              assertHalrtError(result.error, {
                codes: ['INVALID_ARGUMENT'], methods: ['device.tensor'], parts: expected.ok ? [] : [expected.error],
              });
              return;
            }
            const view = result.value;
            made.push(view);
            assert.ok(expected.ok, `expected a ${expected.error || 'getter'} error, got a view`);
            assert.ok(view instanceof halrt.BufferView);
            assert.strictEqual(view.dtype, expected.dtype);
            assert.deepStrictEqual(view.shape, expected.dims);
            assert.strictEqual(view.rank, expected.dims.length);
            assert.strictEqual(view.byteLength, data.length * ELEMENT_SIZE[expected.dtype]);
            // A copy: changing the source afterwards changes nothing.
            bytesOf(data).fill(0xa5);
            const read = await settle(view.read(), 'bufferView.read()');
            if (!read.ok) assert.fail(`read() rejected: ${read.error && read.error.message}`);
            assert.ok(read.value instanceof ARRAY_TYPES[expected.dtype], `read() gives ${read.value.constructor.name}`);
            assert.strictEqual(read.value.length, data.length);
            assert.ok(bytesOf(read.value).equals(snapshot), 'read() returns the bytes given, bit for bit');
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
              assertHalrtError(result.error, { codes: expected.codes, methods: ['device.empty'], parts: [expected.error] });
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
});

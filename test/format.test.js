'use strict';
// One way to print numbers: halrt.format and halrt.formatNumber (lib/format.js)
// against the table test/c/test_format.c checks the C side against
// (test/fixtures/number-format.json), and the native stdio sink against
// halrt.format on random bit patterns of every float dtype.
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const fc = require('fast-check');
const halrt = require('..');
const half = require('../lib/half');
const { ARRAY_OF } = require('../lib/host_data');
const { SEED } = require('./support/property');
const { assertThrowsHalrt } = require('./helpers');

const FIXTURE = require('./fixtures/number-format.json');

/** A one-element array of `dtype` holding bit pattern `bits` (hex text). */
function arrayOfBits(dtype, bits) {
  const Type = ARRAY_OF[dtype];
  const bytes = new Uint8Array(Type.BYTES_PER_ELEMENT);
  let rest = BigInt(bits);
  for (let i = 0; i < bytes.length; ++i, rest >>= 8n) bytes[i] = Number(rest & 0xffn);
  return new Type(bytes.buffer);
}

/** The value the element of `array` stands for, as formatNumber takes it. */
function valueOf(dtype, array) {
  if (dtype === 'f16' || dtype === 'bf16') return half.decode(dtype === 'f16' ? half.F16 : half.BF16, array[0]);
  if (dtype === 'bool') return array[0] !== 0;
  return array[0];
}

describe('halrt.format and halrt.formatNumber', () => {
  it('write every element of the shared table as the table says', () => {
    assert.ok(FIXTURE.elements.length > 90);
    const wrong = [];
    for (const { dtype, bits, text } of FIXTURE.elements) {
      const array = arrayOfBits(dtype, bits);
      const formatted = halrt.format(array, { dtype, shape: [] });
      const single = halrt.formatNumber(valueOf(dtype, array), dtype);
      if (formatted !== text || single !== text) wrong.push(`${dtype} ${bits}: ${formatted}, ${single}; expected ${text}`);
    }
    assert.deepStrictEqual(wrong, []);
  });

  it('lib/half.js rounds doubles to f16 and bf16 as the shared table says (as src/base/half.c does)', () => {
    assert.ok(FIXTURE.halfFromDouble.length > 20);
    for (const row of FIXTURE.halfFromDouble) {
      const value = new Float64Array(BigUint64Array.of(BigInt(row.double)).buffer)[0];
      assert.strictEqual(halrt.toF16Bits(value), Number(row.f16), `f16 of ${row.double}`);
      assert.strictEqual(halrt.toBF16Bits(value), Number(row.bf16), `bf16 of ${row.double}`);
    }
  });

  it("a module's fill of f16 and bf16 rounds the double once, as toF16Bits and toBF16Bits do", async () => {
    // Through f32 first, 1 + 2^-11 + 2^-40 would become the tie 1 + 2^-11 and round to 1.
    const values = FIXTURE.halfFromDouble.map((row) => new Float64Array(BigUint64Array.of(BigInt(row.double)).buffer)[0])
      .filter((x) => Number.isFinite(x) && !Object.is(x, -0));
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const filled = [];
    const hal = new halrt.HalModule(instance, device, { debugSink: (key, [h, b]) => filled.push([h.data[0], b.data[0]]) });
    const module = new halrt.ModuleBuilder('m').function('f', (f) => {
      f.local('h', 'f16', [1]).local('b', 'bf16', [1]);
      for (const x of values) f.fill('h', x).fill('b', x).trace(String(x), ['h', 'b']);
      return f;
    }).build(instance);
    const context = new halrt.Context(instance, [hal, module]);
    const fn = context.lookupFunction('m.f');
    try {
      await fn.invoke([]);
      assert.deepStrictEqual(filled, values.map((x) => [halrt.toF16Bits(x), halrt.toBF16Bits(x)]));
    } finally {
      for (const object of [fn, context, module, hal, device, instance]) object.close();
    }
  });

  it('floats are the fewest digits, rounded half away from zero, that read back as the value', () => {
    // Independent of the table: each text reads back (as a double rounded to
    // the dtype) as the value, and the value rounded to one digit fewer
    // (toPrecision rounds half away from zero) does not.
    const round = { f64: (x) => x, f32: Math.fround, f16: (x) => halrt.fromF16Bits(halrt.toF16Bits(x)), bf16: (x) => halrt.fromBF16Bits(halrt.toBF16Bits(x)) };
    const value = fc.oneof(
      fc.double({ noNaN: true }).map((x) => ['f64', x]),
      fc.float({ noNaN: true }).map((x) => ['f32', x]),
      fc.integer({ min: 0, max: 0xffff }).map((bits) => ['f16', half.decode(half.F16, bits)]),
      fc.integer({ min: 0, max: 0xffff }).map((bits) => ['bf16', half.decode(half.BF16, bits)]),
    ).filter(([, x]) => !Number.isNaN(x));
    fc.assert(fc.property(value, ([dtype, x]) => {
      const text = halrt.formatNumber(x, dtype);
      assert.ok(Object.is(round[dtype](Number(text)), x), `${dtype} ${x}: ${text} reads back`);
      if (!Number.isFinite(x) || x === 0) return;
      assert.match(text, Math.abs(x) >= 1e-6 && Math.abs(x) < 1e21 ? /^-?\d+(\.\d+)?$/ : /^-?\d(\.\d+)?e[-+]\d+$/);
      const digits = text.replace(/e.*$/, '').replace(/[-.]/g, '').replace(/^0+|0+$/g, '').length;
      if (digits > 1) {
        const shorter = Number(Math.abs(x).toPrecision(digits - 1));
        assert.notStrictEqual(round[dtype](shorter), Math.abs(x), `${dtype} ${x}: ${digits - 1} digits would do`);
      }
    }), { seed: SEED, numRuns: 20000 });
  });

  it('tensors nest with spaces; beyond maxElements each dimension longer than 6 shows 3 ... 3', () => {
    const ramp = (n) => Float32Array.from({ length: n }, (_, i) => i + 1);
    const f32 = (data, shape, maxElements) => halrt.format(data, { dtype: 'f32', shape, maxElements });
    assert.strictEqual(f32(ramp(6), [2, 3]), '[[1 2 3] [4 5 6]]');
    assert.strictEqual(f32(ramp(1), []), '1');
    assert.strictEqual(f32(ramp(100), [100]), '[1 2 3 ... 98 99 100]');
    assert.strictEqual(f32(ramp(16), [16]), `[${Array.from(ramp(16)).join(' ')}]`, '16 elements: whole by default');
    assert.strictEqual(f32(ramp(17), [17]), '[1 2 3 ... 15 16 17]');
    assert.strictEqual(f32(ramp(100), [100], 100), `[${Array.from(ramp(100)).join(' ')}]`);
    assert.strictEqual(f32(ramp(7), [7], 6), '[1 2 3 ... 5 6 7]');
    assert.strictEqual(f32(ramp(6), [6], 2), '[1 2 3 4 5 6]', 'a dimension of 6 is whole even when summarised');
    assert.strictEqual(f32(ramp(20), [10, 2]), '[[1 2] [3 4] [5 6] ... [15 16] [17 18] [19 20]]');
    assert.strictEqual(f32(ramp(100), [10, 10]),
      '[[1 2 3 ... 8 9 10] [11 12 13 ... 18 19 20] [21 22 23 ... 28 29 30] ... [71 72 73 ... 78 79 80] [81 82 83 ... 88 89 90] [91 92 93 ... 98 99 100]]');
    assert.strictEqual(f32(ramp(0), [3, 0]), '[[] [] []]');
    assert.strictEqual(f32(ramp(0), [0, 3]), '[]');
    assert.strictEqual(halrt.format(Uint8Array.of(1, 0), { dtype: 'bool', shape: [2] }), '[true false]');
    assert.strictEqual(halrt.format(BigUint64Array.of(2n ** 64n - 1n), { dtype: 'u64', shape: [1] }), '[18446744073709551615]');
    assert.strictEqual(halrt.format(Uint16Array.of(0x3c00, 0x5c01), { dtype: 'f16', shape: [2] }), '[1 256.3]');
  });

  it('an empty tensor summarises its innermost [] beyond maxElements, as it would elements (no text of 2^31-1 [])', () => {
    const empty = (shape, maxElements) => halrt.format(new Float32Array(0), { dtype: 'f32', shape, maxElements });
    assert.strictEqual(empty([7, 0], 7), '[[] [] [] [] [] [] []]');
    assert.strictEqual(empty([7, 0], 6), '[[] [] [] ... [] [] []]');
    assert.strictEqual(empty([2 ** 31 - 1, 0]), '[[] [] [] ... [] [] []]');
    assert.strictEqual(empty([2 ** 40, 2 ** 40, 0]), '[[[] [] [] ... [] [] []] [[] [] [] ... [] [] []] [[] [] [] ... [] [] []] ... ' +
      '[[] [] [] ... [] [] []] [[] [] [] ... [] [] []] [[] [] [] ... [] [] []]]');
    assert.strictEqual(empty([0, 2 ** 40], 2), '[]');
  });

  it('the shape is read once and the data by its own type and length: getters, Proxies and own properties change nothing', () => {
    const data = Float32Array.of(1, 2, 3, 4, 5, 6);
    // Each later read of shape[1] says 1000: a second read would walk past the data.
    let reads = 0;
    const shape = [2, 3];
    Object.defineProperty(shape, 1, { get: () => (++reads === 1 ? 3 : 1000) });
    assert.strictEqual(halrt.format(data, { dtype: 'f32', shape }), '[[1 2 3] [4 5 6]]');
    reads = 0;
    const proxy = new Proxy([2, 3], { get: (target, key) => (key === '1' && ++reads > 1 ? 1000 : target[key]) });
    assert.strictEqual(halrt.format(data, { dtype: 'f32', shape: proxy }), '[[1 2 3] [4 5 6]]');
    // A getter that shrinks the data's resizable buffer runs before its length is read.
    const buffer = new ArrayBuffer(24, { maxByteLength: 24 });
    const shrinking = [6];
    Object.defineProperty(shrinking, 0, { get: () => (buffer.resize(8), 6) });
    assertThrowsHalrt(() => halrt.format(new Float32Array(buffer), { dtype: 'f32', shape: shrinking }),
      'INVALID_ARGUMENT', 'halrt.format: data has 2 elements but shape [6] has 6');
    const long = Float32Array.of(1, 2);
    Object.defineProperty(long, 'length', { value: 6 });
    assertThrowsHalrt(() => halrt.format(long, { dtype: 'f32', shape: [6] }), 'INVALID_ARGUMENT', 'halrt.format: data has 2 elements but shape [6] has 6');
    const disguised = Float32Array.of(1.5);
    Object.defineProperty(disguised, 'constructor', { value: Uint16Array });
    assertThrowsHalrt(() => halrt.format(disguised, { dtype: 'f16', shape: [1] }), 'INVALID_ARGUMENT', 'halrt.format: data must be a Uint16Array for dtype f16');
    class Floats extends Float32Array {}
    assert.strictEqual(halrt.format(Floats.of(0.5, 2), { dtype: 'f32', shape: [2] }), '[0.5 2]', 'a subclass is its type');
    assertThrowsHalrt(() => halrt.format(new Proxy(data, {}), { dtype: 'f32', shape: [6] }), 'INVALID_ARGUMENT',
      'halrt.format: data must be a Float32Array for dtype f32 (got a Proxy)');
  });

  it("a dtype named like an Object.prototype member ('constructor', '__proto__') is unknown, not a crash", () => {
    for (const dtype of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      assertThrowsHalrt(() => halrt.format(new Uint8Array(1), { dtype, shape: [1] }), 'INVALID_ARGUMENT', `halrt.format: options.dtype: unknown dtype '${dtype}'`);
      assertThrowsHalrt(() => halrt.formatNumber(1, dtype), 'INVALID_ARGUMENT', `halrt.formatNumber: dtype: unknown dtype '${dtype}'`);
    }
  });

  it('a bad argument is INVALID_ARGUMENT naming it', () => {
    const data = new Float32Array(6);
    const cases = [
      [() => halrt.format(data), 'halrt.format: options must be an object with dtype and shape (got undefined)'],
      [() => halrt.format(data, { dtype: 'f8', shape: [6] }), "halrt.format: options.dtype: unknown dtype 'f8' (expected one of f16, bf16, f32"],
      [() => halrt.format(data, { dtype: 'f32', shape: [2, -3] }), 'halrt.format: options.shape must be an Array of at most 8 non-negative integers (got [2,-3])'],
      [() => halrt.format(data, { dtype: 'f32', shape: '6' }), "options.shape must be an Array of at most 8 non-negative integers (got '6')"],
      [() => halrt.format(data, { dtype: 'f32', shape: new Array(2 ** 32 - 1) }), 'options.shape must be an Array of at most 8 non-negative integers (got an Array of 4294967295 elements)'],
      [() => halrt.format(data, { dtype: () => 'f32', shape: [6] }), 'halrt.format: options.dtype: unknown dtype a function (expected'],
      [() => halrt.format(data, { dtype: 'f32', shape: [6], maxElements: 1 }), 'halrt.format: options.maxElements must be an integer in [2, 1073741824] (got 1)'],
      [() => halrt.format(data, { dtype: 'i32', shape: [6] }), 'halrt.format: data must be an Int32Array for dtype i32 (got a Float32Array)'],
      [() => halrt.format([1, 2], { dtype: 'f32', shape: [2] }), 'halrt.format: data must be a Float32Array for dtype f32 (got an Array)'],
      [() => halrt.format(data, { dtype: 'f32', shape: [2, 2] }), 'halrt.format: data has 6 elements but shape [2,2] has 4'],
      [() => halrt.formatNumber(0.1, 'f16'), 'halrt.formatNumber: value 0.1 is not exact in f16'],
      [() => halrt.formatNumber(0.1, 'f32'), 'halrt.formatNumber: value 0.1 is not exact in f32'],
      [() => halrt.formatNumber(1n, 'f64'), 'halrt.formatNumber: value must be a number for f64 (got a BigInt)'],
      [() => halrt.formatNumber('1', 'i32'), "halrt.formatNumber: value must be a number, BigInt or boolean for i32 (got '1')"],
      [() => halrt.formatNumber(1.5, 'i32'), 'halrt.formatNumber: value is 1.5, not an integer for i32'],
      [() => halrt.formatNumber(300, 'u8'), 'halrt.formatNumber: value is 300, outside the range of u8'],
      [() => halrt.formatNumber(2n ** 64n, 'u64'), 'halrt.formatNumber: value is 18446744073709551616, outside the range of u64'],
      [() => halrt.formatNumber(2, 'bool'), 'halrt.formatNumber: value is 2; bool data must be true, false, 0 or 1'],
      [() => halrt.formatNumber(1, 'int'), "halrt.formatNumber: dtype: unknown dtype 'int'"],
    ];
    for (const [fn, message] of cases) assertThrowsHalrt(fn, 'INVALID_ARGUMENT', message);
    assert.strictEqual(halrt.formatNumber(NaN, 'f16'), 'NaN');
    assert.strictEqual(halrt.formatNumber(-0, 'f32'), '-0');
    assert.strictEqual(halrt.formatNumber(2n ** 63n - 1n, 'i64'), '9223372036854775807');
    assert.strictEqual(halrt.formatNumber(true, 'bool'), 'true');
    assert.strictEqual(halrt.formatNumber(0, 'bool'), 'false');
  });
});

describe('the stdio sink prints what halrt.format writes', function () {
  this.timeout(60000);

  /**
   * Traces `tensors` ({name, dtype, shape, data}) once through a stdio sink
   * with `maxElements` in a child process; returns the lines it printed.
   */
  function printedByStdioSink(tensors, maxElements) {
    const spec = tensors.map(({ name, dtype, shape, data }) => ({
      name, dtype, shape, bytes: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
    }));
    const source = `
      const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
      const { ARRAY_OF } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'host_data'))});
      const { spec, maxElements } = JSON.parse(require('fs').readFileSync(0, 'utf8'));
      (async () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice('local-sync');
        const hal = new halrt.HalModule(instance, device, { debugSink: halrt.sinks.stdio({ maxElements }) });
        const module = new halrt.ModuleBuilder('m').function('f', (f) => {
          for (const t of spec) f.input(t.name, t.dtype, t.shape);
          return f.trace('all', spec.map((t) => t.name));
        }).build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        const fn = context.lookupFunction('m.f');
        const views = spec.map((t) => {
          const bytes = Buffer.from(t.bytes, 'base64');
          const Type = ARRAY_OF[t.dtype];
          const data = new Type(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
          return device.tensor(data, t.shape, t.dtype);
        });
        await fn.invoke(views);
        for (const o of [...views, fn, context, module, hal, device, instance]) o.close();
      })().catch((error) => { console.error(error); process.exitCode = 1; });
    `;
    const result = spawnSync(process.execPath, ['-e', source], {
      input: JSON.stringify({ spec, maxElements }), encoding: 'utf8', timeout: 50000, maxBuffer: 1 << 28,
    });
    assert.strictEqual(result.error, undefined, String(result.error));
    assert.strictEqual(result.status, 0, result.stderr);
    const lines = result.stdout.split('\n');
    assert.strictEqual(lines[0], '=== all (m.f op 0, invocation 1) ===');
    assert.strictEqual(lines.length, tensors.length + 2, 'a line per tensor');
    return lines.slice(1, -1);
  }

  function expectedLine({ name, dtype, shape, data }, maxElements) {
    return `${name}: ${[...shape, dtype].join('x')}=${halrt.format(data, { dtype, shape, maxElements })}`;
  }

  function assertSameLines(tensors, maxElements) {
    const printed = printedByStdioSink(tensors, maxElements);
    tensors.forEach((tensor, i) => {
      const expected = expectedLine(tensor, maxElements);
      if (printed[i] !== expected) {
        // Name the first element that differs, not just the (long) line.
        const got = printed[i].split(/[[\] ]+/);
        const want = expected.split(/[[\] ]+/);
        const at = want.findIndex((word, j) => word !== got[j]);
        assert.fail(`${tensor.name} (${tensor.dtype}): the sink printed '${got[at]}' where halrt.format wrote '${want[at]}' (seed ${SEED})`);
      }
    });
  }

  it('on every f16 and bf16 bit pattern, and random f32 and f64 bit patterns', () => {
    const every = Uint16Array.from({ length: 0x10000 }, (_, i) => i);
    const [f32Bits] = fc.sample(fc.uint32Array({ minLength: 50000, maxLength: 50000 }), { seed: SEED, numRuns: 1 });
    const [f64Bits] = fc.sample(fc.bigUint64Array({ minLength: 20000, maxLength: 20000 }), { seed: SEED, numRuns: 1 });
    // fast-check's float and double lean on edge cases: zeros, extremes, subnormals, near-integers.
    const [f32Edges] = fc.sample(fc.float32Array({ minLength: 5000, maxLength: 5000 }), { seed: SEED, numRuns: 1 });
    const [f64Edges] = fc.sample(fc.float64Array({ minLength: 5000, maxLength: 5000 }), { seed: SEED, numRuns: 1 });
    const tensors = [
      { name: 'f16', dtype: 'f16', shape: [256, 256], data: every },
      { name: 'bf16', dtype: 'bf16', shape: [0x10000], data: every },
      { name: 'f32', dtype: 'f32', shape: [50000], data: new Float32Array(f32Bits.buffer) },
      { name: 'f64', dtype: 'f64', shape: [20000], data: new Float64Array(f64Bits.buffer) },
      { name: 'f32_edges', dtype: 'f32', shape: [5000], data: f32Edges },
      { name: 'f64_edges', dtype: 'f64', shape: [5000], data: f64Edges },
    ];
    assertSameLines(tensors, 2 ** 30);
  });

  it('on random shapes, summarised or not', () => {
    const dtype = fc.constantFrom('f16', 'bf16', 'f32', 'f64', 'i8', 'u64', 'i64', 'bool');
    const shape = fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 4 });
    const tensor = fc.tuple(dtype, shape, fc.integer()).map(([d, s, seed]) => {
      const count = s.reduce((a, b) => a * b, 1);
      const bytes = new Uint8Array(count * ARRAY_OF[d].BYTES_PER_ELEMENT);
      let state = seed >>> 0;
      for (let k = 0; k < bytes.length; ++k) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        bytes[k] = state >>> 24;
      }
      if (d === 'bool') bytes.forEach((b, k) => { bytes[k] = b & 1; });
      return { dtype: d, shape: s, data: new ARRAY_OF[d](bytes.buffer) };
    });
    const samples = fc.sample(tensor, { seed: SEED, numRuns: 32 }).map((t, i) => ({ ...t, name: `t${i}` }));
    for (const maxElements of [2, 16, 100]) assertSameLines(samples, maxElements);
  });

  it('on empty tensors, whose innermost [] beyond maxElements are summarised (2^31-1 rows: a short line, at once)', () => {
    const empty = [[7, 0], [2 ** 31 - 1, 0], [3, 2 ** 31 - 1, 0], [0, 2 ** 31 - 1]].map((shape, i) => ({
      name: `e${i}`, dtype: 'u8', shape, data: new Uint8Array(0),
    }));
    assertSameLines(empty, 6);
    assert.deepStrictEqual(printedByStdioSink(empty.slice(0, 2), 16), ['e0: 7x0xu8=[[] [] [] [] [] [] []]', 'e1: 2147483647x0xu8=[[] [] [] ... [] [] []]']);
  });
});

describe('halrt.formatNumber: integer dtypes', () => {
  it('refuses a boolean for an integer dtype (booleans are bool values)', () => {
    for (const [value, dtype] of [[true, 'i32'], [false, 'u8'], [true, 'i64'], [false, 'u64']]) {
      assertThrowsHalrt(() => halrt.formatNumber(value, dtype), 'INVALID_ARGUMENT',
        `halrt.formatNumber: value is ${value}, a boolean, for ${dtype}`);
    }
    assert.strictEqual(halrt.formatNumber(false, 'bool'), 'false');
  });

  it('takes an exact integer number beyond 2^53 for i64 and u64, in range, as its BigInt', () => {
    assert.strictEqual(halrt.formatNumber(2 ** 60, 'i64'), '1152921504606846976');
    assert.strictEqual(halrt.formatNumber(-(2 ** 63), 'i64'), '-9223372036854775808');
    assert.strictEqual(halrt.formatNumber(2 ** 63, 'u64'), '9223372036854775808');
    assert.strictEqual(halrt.formatNumber(-(2 ** 60), 'i64'), '-1152921504606846976');
    for (const [value, dtype, text] of [[2 ** 63, 'i64', '9223372036854775808'], [2 ** 64, 'u64', '18446744073709551616'], [-1, 'u64', '-1']]) {
      assertThrowsHalrt(() => halrt.formatNumber(value, dtype), 'INVALID_ARGUMENT', `halrt.formatNumber: value is ${text}, outside the range of ${dtype}`);
    }
    for (const value of [1.5, NaN, Infinity]) {
      assertThrowsHalrt(() => halrt.formatNumber(value, 'i64'), 'INVALID_ARGUMENT', `halrt.formatNumber: value is ${value}, not an integer for i64`);
    }
  });
});

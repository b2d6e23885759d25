'use strict';
const assert = require('assert');
const halrt = require('..');
const {
  ARRAY_TYPES, DEVICE_URIS, sampleData, elementCount, assertThrowsHalrt, assertRejectsHalrt, inChild,
} = require('./helpers');

const SHAPES = [[], [5], [2, 3], [2, 1, 3]];
const BYTES = { f16: 2, bf16: 2, f32: 4, f64: 8, i8: 1, u8: 1, i16: 2, u16: 2, i32: 4, u32: 4, i64: 8, u64: 8, bool: 1 };

for (const uri of DEVICE_URIS) {
  describe(`tensors on ${uri}`, () => {
    let instance;
    let device;
    before(() => {
      instance = new halrt.Instance();
      device = instance.createDevice(uri);
    });
    after(() => {
      device.close();
      instance.close();
    });

    for (const dtype of halrt.dtypes) {
      it(`round-trips ${dtype} data of rank 0..3 through tensor() and read()`, async () => {
        for (const [index, shape] of SHAPES.entries()) {
          const data = sampleData(dtype, elementCount(shape), index);
          const view = device.tensor(data, shape, dtype);
          try {
            assert.strictEqual(view.dtype, dtype);
            assert.deepStrictEqual(view.shape, shape);
            assert.strictEqual(view.rank, shape.length);
            assert.strictEqual(view.byteLength, elementCount(shape) * BYTES[dtype]);
            const result = await view.read();
            assert.ok(result instanceof ARRAY_TYPES[dtype], `${dtype} reads as ${ARRAY_TYPES[dtype].name}`);
            assert.strictEqual(result.constructor, ARRAY_TYPES[dtype]);
            assert.deepStrictEqual(result, data);
          } finally {
            view.close();
          }
        }
      });

      it(`empty() of ${dtype} reads zeros`, async () => {
        const view = device.empty([3, 2], dtype);
        try {
          assert.strictEqual(view.dtype, dtype);
          assert.deepStrictEqual(view.shape, [3, 2]);
          const result = await view.read();
          assert.deepStrictEqual(result, new ARRAY_TYPES[dtype](6));
        } finally {
          view.close();
        }
      });

      it(`copy() of ${dtype} then read() gives the source values`, async () => {
        const data = sampleData(dtype, 6, 1);
        const source = device.tensor(data, [2, 3], dtype);
        const target = device.empty([2, 3], dtype);
        try {
          assert.strictEqual(await device.copy(source, target), undefined);
          assert.deepStrictEqual(await target.read(), data);
          assert.deepStrictEqual(await source.read(), data, 'the source is unchanged');
        } finally {
          source.close();
          target.close();
        }
      });
    }

    it('infers the dtype from the TypedArray', async () => {
      const cases = [
        [new Float32Array([1, 2]), 'f32'], [new Float64Array([1, 2]), 'f64'],
        [new Int8Array([1, -2]), 'i8'], [new Uint8Array([1, 2]), 'u8'],
        [new Uint8ClampedArray([1, 2]), 'u8'], [new Int16Array([1, -2]), 'i16'],
        [new Uint16Array([1, 2]), 'u16'], [new Int32Array([1, -2]), 'i32'],
        [new Uint32Array([1, 2]), 'u32'], [new BigInt64Array([1n, -2n]), 'i64'],
        [new BigUint64Array([1n, 2n]), 'u64'], [Buffer.from([7, 8]), 'u8'],
      ];
      for (const [data, dtype] of cases) {
        const view = device.tensor(data, [2]);
        try {
          assert.strictEqual(view.dtype, dtype, data.constructor.name);
          assert.deepStrictEqual(Array.from(await view.read()), Array.from(data));
        } finally {
          view.close();
        }
      }
    });

    it('accepts a Uint8ClampedArray for u8 and reads back a Uint8Array', async () => {
      const view = device.tensor(new Uint8ClampedArray([0, 128, 255]), [3], 'u8');
      try {
        const result = await view.read();
        assert.strictEqual(result.constructor, Uint8Array);
        assert.deepStrictEqual(result, new Uint8Array([0, 128, 255]));
      } finally {
        view.close();
      }
    });

    it('copies data from a TypedArray that views part of a larger buffer', async () => {
      const backing = new Float32Array([9, 1, 2, 3, 4, 9]);
      const window = backing.subarray(1, 5);
      const view = device.tensor(window, [2, 2]);
      try {
        window.fill(0);
        assert.deepStrictEqual(await view.read(), new Float32Array([1, 2, 3, 4]));
      } finally {
        view.close();
      }
    });

    it('takes a copy when tensor() is called: later writes do not show', async () => {
      const data = new Int32Array([1, 2, 3]);
      const view = device.tensor(data, [3]);
      try {
        data[0] = 100;
        assert.deepStrictEqual(await view.read(), new Int32Array([1, 2, 3]));
      } finally {
        view.close();
      }
    });

    it('handles zero-element tensors', async () => {
      const a = device.tensor(new Float32Array(0), [0, 3]);
      const b = device.empty([4, 0], 'i64');
      try {
        assert.strictEqual(a.byteLength, 0);
        assert.deepStrictEqual(a.shape, [0, 3]);
        const result = await a.read();
        assert.ok(result instanceof Float32Array);
        assert.strictEqual(result.length, 0);
        assert.deepStrictEqual(await b.read(), new BigInt64Array(0));
        await device.copy(a, device.empty([0], 'u8'));
      } finally {
        a.close();
        b.close();
      }
    });

    it('copies between views of different dtypes with equal byte lengths', async () => {
      const source = device.tensor(new Uint32Array([0x3f800000, 0x40000000]), [2]);
      const target = device.empty([2], 'f32');
      try {
        await device.copy(source, target);
        assert.deepStrictEqual(await target.read(), new Float32Array([1, 2]));
      } finally {
        source.close();
        target.close();
      }
    });

    it('reads of one view see earlier copies into it, in submission order', async () => {
      const a = device.tensor(new Int32Array([1, 2, 3, 4]), [4]);
      const b = device.tensor(new Int32Array([5, 6, 7, 8]), [4]);
      const target = device.empty([4], 'i32');
      try {
        const first = device.copy(a, target);
        const readA = target.read();
        const second = device.copy(b, target);
        const readB = target.read();
        await Promise.all([first, second]);
        assert.deepStrictEqual(await readA, new Int32Array([1, 2, 3, 4]));
        assert.deepStrictEqual(await readB, new Int32Array([5, 6, 7, 8]));
      } finally {
        a.close();
        b.close();
        target.close();
      }
    });

    it('returns a fresh shape array each time', () => {
      const view = device.empty([2, 3], 'f32');
      try {
        const shape = view.shape;
        shape.push(7);
        assert.deepStrictEqual(view.shape, [2, 3]);
        assert.notStrictEqual(view.shape, view.shape);
      } finally {
        view.close();
      }
    });

    it('returns a read result that owns its memory', async () => {
      const view = device.tensor(new Float64Array([1, 2, 3]), [3]);
      const first = await view.read();
      const second = await view.read();
      view.close();
      first[0] = 42;
      assert.deepStrictEqual(second, new Float64Array([1, 2, 3]));
      assert.strictEqual(first.byteOffset, 0);
      assert.strictEqual(first.buffer.byteLength, 24);
    });
  });
}

describe('BigInts and decimal literals round once to float dtypes', () => {
  const { roundBigInt, roundDecimal } = require('../lib/float_round');
  const big = 2n ** 60n + 2n ** 36n + 1n; // just past the f32 midpoint 2^60 + 2^36

  it('tensor() of a BigInt (an Array element or a BigInt64Array) is the nearest float, not the nearest to a double', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      const cases = [
        [[big], 'f32', Float32Array.of(2 ** 60 + 2 ** 37)],
        [[-big], 'f32', Float32Array.of(-(2 ** 60 + 2 ** 37))],
        [BigInt64Array.of(big), 'f32', Float32Array.of(2 ** 60 + 2 ** 37)],
        [BigUint64Array.of(2n ** 64n - 1n), 'f32', Float32Array.of(2 ** 64)],
        [[big], 'f64', Float64Array.of(2 ** 60 + 2 ** 36)],
        // bf16 keeps 8 bits: 2^60 + 2^52 + 1 is past the midpoint of 2^60 and 2^60 + 2^53.
        [[2n ** 60n + 2n ** 52n + 1n], 'bf16', Uint16Array.of(halrt.toBF16Bits(2 ** 60 + 2 ** 53))],
        [[2n ** 54n + 2n ** 43n + 1n], 'f16', Uint16Array.of(0x7c00)], // far past 65504: Infinity
        [[2n ** 60n + 2n ** 36n], 'f32', Float32Array.of(2 ** 60)], // an exact tie goes to even
      ];
      for (const [data, dtype, expected] of cases) {
        const view = device.tensor(data, [1], dtype);
        assert.deepStrictEqual(await view.read(), expected, `${data[0]} as ${dtype}`);
        view.close();
      }
    } finally {
      device.close();
      instance.close();
    }
  });

  it('a decimal literal on either side of an f32 midpoint rounds to that side', () => {
    // For random f32 neighbours a < b, the exact midpoint m as a decimal:
    // m itself goes to the even one, m plus or minus 10^-60 relative to the neighbour on that side.
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const exact = (x) => { // x (a double) as an exact decimal string
      let [mantissa, exponent] = [x, 0];
      while (!Number.isInteger(mantissa)) { mantissa *= 2; exponent -= 1; }
      const digits = (BigInt(mantissa) * 5n ** BigInt(-exponent)).toString().padStart(-exponent + 1, '0');
      return exponent === 0 ? digits : `${digits.slice(0, exponent)}.${digits.slice(exponent)}`;
    };
    for (let i = 0; i < 300; ++i) {
      const a = Math.fround((random() + 0.5) * 2 ** Math.floor(random() * 200 - 100));
      const bits = new Uint32Array(Float32Array.of(a).buffer)[0];
      const b = new Float32Array(Uint32Array.of(bits + 1).buffer)[0];
      const m = exact((a + b) / 2); // exact: one more bit than f32 has
      const even = bits % 2 === 0 ? a : b;
      assert.strictEqual(roundDecimal(m, 'f32'), even, `${m} ties to even`);
      // Just above: m with 10^-60 of its last place added; just below: m
      // less that (m - 1 + 0.99...9 for an integer m, else its last digit 5 as 4999...).
      const above = `${m}${m.includes('.') ? '' : '.'}${'0'.repeat(60)}1`;
      const below = m.includes('.') ? `${m.slice(0, -1)}4${'9'.repeat(60)}` : `${BigInt(m) - 1n}.${'9'.repeat(60)}`;
      assert.strictEqual(roundDecimal(above, 'f32'), b, `just above ${m}`);
      assert.strictEqual(roundDecimal(below, 'f32'), a, `just below ${m}`);
      assert.strictEqual(roundDecimal(`-${above}`, 'f32'), -b);
    }
    assert.strictEqual(roundDecimal('1.00000005960464477539062500001', 'f32'), 1 + 2 ** -23);
    assert.strictEqual(roundDecimal('1.00000005960464477539062499999', 'f32'), 1);
    assert.strictEqual(roundDecimal('1e300', 'f32'), Infinity);
    assert.strictEqual(roundDecimal('-1e-300', 'f32'), -0);
    assert.strictEqual(roundDecimal('1e-45', 'f32'), 2 ** -149);
    assert.strictEqual(roundDecimal(`1.${'0'.repeat(5000)}1`, 'f32'), 1, 'digits past 800 fold into a sticky one');
    assert.strictEqual(roundBigInt(2n ** 53n + 1n, 'f64'), 2 ** 53);
  });
});

describe('view.toArray()', () => {
  it('gives nested Arrays in the view\'s shape: numbers, decoded halves, BigInts, booleans; a scalar alone', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      const cases = [
        [[[1, 2, 3], [4, 5, 6]], 'f32', [[1, 2, 3], [4, 5, 6]]],
        [[[[-1]], [[2]]], 'i8', [[[-1]], [[2]]]],
        [[[1n, -(2n ** 63n)]], 'i64', [[1n, -(2n ** 63n)]]],
        [[2n ** 64n - 1n], 'u64', [2n ** 64n - 1n]],
        [[true, false, true], 'bool', [true, false, true]],
        [[0.5, 65504, -Infinity], 'f16', [0.5, 65504, -Infinity]],
        [[1.5, -2], 'bf16', [1.5, -2]],
        [7, 'i32', 7],
        [[[], []], 'f32', [[], []]],
      ];
      for (const [data, dtype, expected] of cases) {
        const view = device.tensor(data, null, dtype);
        assert.deepStrictEqual(await view.toArray(), expected, dtype);
        view.close();
      }
      const nan = device.tensor([NaN], [1], 'f16');
      assert.ok(Number.isNaN((await nan.toArray())[0]));
      nan.close();
      await assertRejectsHalrt(nan.toArray(), 'FAILED_PRECONDITION', 'bufferView.toArray: BufferView is closed');
      await assertRejectsHalrt(halrt.BufferView.prototype.toArray.call({}), 'INVALID_ARGUMENT', 'bufferView.toArray: `this` is not a BufferView');
    } finally {
      device.close();
      instance.close();
    }
  });
});

describe('tensor argument errors', () => {
  let instance;
  let device;
  let other;
  before(() => {
    instance = new halrt.Instance();
    device = instance.createDevice('local-sync');
    other = instance.createDevice('local-sync');
  });
  after(() => {
    device.close();
    other.close();
    instance.close();
  });

  it('rejects data whose length does not match the shape', () => {
    assertThrowsHalrt(() => device.tensor(new Float32Array(5), [2, 3]), 'INVALID_ARGUMENT',
      'device.tensor: data has 5 elements but shape [2,3] needs 6');
    assertThrowsHalrt(() => device.tensor(new Float32Array(2), []), 'INVALID_ARGUMENT',
      'device.tensor: data has 2 elements but shape [] needs 1');
  });

  it('rejects an unknown dtype, listing the valid ones', () => {
    assertThrowsHalrt(() => device.tensor(new Float32Array(2), [2], 'f33'), 'INVALID_ARGUMENT',
      'device.tensor: ', "unknown dtype 'f33'", 'bf16');
    assertThrowsHalrt(() => device.empty([2], 'float32'), 'INVALID_ARGUMENT',
      'device.empty: ', "unknown dtype 'float32'");
    assertThrowsHalrt(() => device.empty([2], 7), 'INVALID_ARGUMENT',
      'device.empty: dtype must be a string (got 7)');
    assertThrowsHalrt(() => device.empty([2]), 'INVALID_ARGUMENT',
      'device.empty: dtype must be a string (got undefined)');
    // Names of Object.prototype members are no dtypes, whatever the data.
    for (const dtype of ['constructor', '__proto__', 'toString']) {
      for (const data of [[1, 2], Float32Array.of(1, 2), Buffer.alloc(2)]) {
        assertThrowsHalrt(() => device.tensor(data, [2], dtype), 'INVALID_ARGUMENT', `device.tensor: unknown dtype '${dtype}'`);
      }
    }
  });

  it('rejects negative, fractional, NaN, infinite and non-number dims, naming the index', () => {
    const bad = [
      [[2, -1], 1, '-1'], [[1.5], 0, '1.5'], [[NaN], 0, 'NaN'], [[3, Infinity], 1, 'Infinity'],
      [[-Infinity], 0, '-Infinity'], [['2'], 0, "'2'"], [[null], 0, 'null'], [[2, 2, undefined], 2, 'undefined'],
      [[2n], 0, 'a BigInt'], [[{}], 0, 'an object'],
    ];
    for (const [shape, index, got] of bad) {
      assertThrowsHalrt(() => device.empty(shape, 'f32'), 'INVALID_ARGUMENT',
        `device.empty: shape[${index}] must be a non-negative integer (got ${got})`);
    }
    assertThrowsHalrt(() => device.tensor(new Float32Array(6), [2, -1]), 'INVALID_ARGUMENT',
      'device.tensor: shape[1] must be a non-negative integer (got -1)');
  });

  it('rejects huge dims and shapes whose size overflows', () => {
    assertThrowsHalrt(() => device.empty([1e300], 'f32'), 'INVALID_ARGUMENT',
      'device.empty: shape[0] is too large (got 1e+300');
    assertThrowsHalrt(() => device.empty([2 ** 53], 'u8'), 'INVALID_ARGUMENT', 'shape[0] is too large');
    assertThrowsHalrt(() => device.empty([2 ** 40, 2 ** 40], 'u8'), 'INVALID_ARGUMENT',
      'device.empty: shape [1099511627776,1099511627776] has too many elements');
    assertThrowsHalrt(() => device.empty([2 ** 53 - 1, 2 ** 11], 'f64'), 'INVALID_ARGUMENT',
      'device.empty: ', 'overflow');
    assertThrowsHalrt(() => device.tensor(new Uint8Array(4), [2 ** 53 - 1]), 'INVALID_ARGUMENT',
      'device.tensor: data has 4 elements but shape [9007199254740991] needs 9007199254740991');
    // A zero makes no elements, however large the rest (as long as they multiply within 64 bits).
    for (const shape of [[2 ** 20, 2 ** 20, 0], [0, 2 ** 30, 2 ** 30]]) {
      const view = device.empty(shape, 'f32');
      assert.deepStrictEqual([view.numel, view.byteLength], [0, 0]);
      view.close();
    }
    assertThrowsHalrt(() => device.empty([2 ** 40, 2 ** 40, 0], 'f32'), 'INVALID_ARGUMENT', 'its non-zero dimensions multiply past 2^64');
  });

  it('bytes: a detached ArrayBuffer, and an unknown dtype with an ArrayBuffer, name what is wrong', () => {
    const detached = new ArrayBuffer(8);
    structuredClone(detached, { transfer: [detached] });
    assertThrowsHalrt(() => device.tensor(detached, [0], 'f32'), 'INVALID_ARGUMENT', 'device.tensor: data is a detached ArrayBuffer');
    assertThrowsHalrt(() => device.tensor(new ArrayBuffer(4), [4], 'f8'), 'INVALID_ARGUMENT', "device.tensor: unknown dtype 'f8' (expected one of");
  });

  it('a nested Array\'s elements are read once: a getter that changes its answer cannot slip a value past the checks', async () => {
    let reads = 0;
    const row = [1, 2];
    Object.defineProperty(row, 1, { get: () => (++reads === 1 ? 2 : 'oops'), enumerable: true });
    const view = device.tensor([row, [3, 4]], null, 'i32');
    assert.deepStrictEqual(Array.from(await view.read()), [1, 2, 3, 4]);
    assert.strictEqual(reads, 1);
    view.close();
  });

  it('a huge sparse Array is INVALID_ARGUMENT at its first hole, before anything of its length is built (no V8 fatal error)', function () {
    this.timeout(60000);
    // In a child: the old walk ended Node with "invalid size error" (SIGTRAP), uncatchable.
    const results = inChild(`
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]).fill('y', 1));
      const fn = new halrt.Context(instance, [new halrt.HalModule(instance, device), module.build(instance)]).lookupFunction('m.f');
      const huge = () => new Array(2 ** 32 - 1);
      const nested = () => { const outer = huge(); outer[0] = [1, 2]; return outer; };
      const outcome = (promise) => promise.then(() => 'ok', (error) => ({ code: error.code, message: error.message }));
      (async () => {
        console.log(JSON.stringify([
          settle(() => device.tensor(huge())),
          settle(() => device.tensor([huge()])),
          settle(() => device.tensor(nested())),
          settle(() => device.tensor(huge(), [2 ** 32 - 1], 'u8')),
          await outcome(fn.invoke(huge())),
          await outcome(fn.invoke([huge()])),
          await outcome(halrt.compare(module, huge())),
          await outcome(halrt.compare(module, [], { devices: Object.assign(huge(), ['local-sync', 'local-task']) })),
        ]));
      })();`, {});
    const hole = 'must be a number, BigInt or boolean (got a hole (an empty slot of a sparse Array))';
    const expected = [
      `device.tensor: data[0] ${hole}`,
      `device.tensor: data[0][0] ${hole}`,
      'device.tensor: data[1] must be an Array of 2 elements (got a hole) (ragged data)',
      `device.tensor: data[0] ${hole}`,
      'function.invoke: inputs has 4294967295 entries (at most 256)',
      `function.invoke: m.f: inputs[0][0] ${hole}`,
      'halrt.compare: inputs[0] must be host data (a TypedArray, an Array, bytes or a number; got a hole)',
      'halrt.compare: options.devices must be an Array of at least 2 device URIs (got an Array)',
    ];
    assert.deepStrictEqual(results, expected.map((message) => ({ code: 'INVALID_ARGUMENT', message })));
  });

  it('reports an allocation too large for host memory as RESOURCE_EXHAUSTED', () => {
    // 2^58 bytes: beyond any x86-64 or arm64 address space.
    assertThrowsHalrt(() => device.empty([2 ** 52, 8], 'f64'), 'RESOURCE_EXHAUSTED',
      'device.empty: ', 'out of host memory');
  });

  it('rejects a shape that is not an Array', () => {
    assertThrowsHalrt(() => device.tensor(new Float32Array(4), 4), 'INVALID_ARGUMENT',
      'device.tensor: shape must be an Array of dimensions (got 4)');
    assertThrowsHalrt(() => device.empty('4', 'f32'), 'INVALID_ARGUMENT',
      "device.empty: shape must be an Array of dimensions (got '4')");
    assertThrowsHalrt(() => device.empty({ length: 1, 0: 1 }, 'f32'), 'INVALID_ARGUMENT',
      'device.empty: shape must be an Array of dimensions (got an object)');
    assertThrowsHalrt(() => device.empty(new Int32Array([2]), 'f32'), 'INVALID_ARGUMENT',
      'device.empty: shape must be an Array of dimensions (got an Int32Array)');
    assertThrowsHalrt(() => device.tensor(new Float32Array(1)), 'INVALID_ARGUMENT',
      'device.tensor: shape must be an Array of dimensions (got undefined)');
  });

  it('rejects a rank above 8', () => {
    assertThrowsHalrt(() => device.empty([1, 1, 1, 1, 1, 1, 1, 1, 1], 'f32'), 'INVALID_ARGUMENT',
      'device.empty: shape has 9 dimensions; at most 8 are supported');
    // A long sparse shape with nested data is named by its length, not walked or printed.
    assertThrowsHalrt(() => device.tensor([[1, 2], [3, 4]], new Array(2 ** 32 - 1)), 'INVALID_ARGUMENT',
      'device.tensor: shape has 4294967295 dimensions; at most 8 are supported');
    const view = device.empty([1, 1, 1, 1, 1, 1, 1, 2], 'f32');
    assert.strictEqual(view.rank, 8);
    view.close();
  });

  it('rejects data that is not a TypedArray, an Array or bytes', () => {
    const cases = [
      [new DataView(new ArrayBuffer(8)), 'a DataView'], [undefined, 'undefined'],
      [{ length: 2 }, 'an Object'], ['ab', "'ab'"], [new Proxy([1, 2], {}), 'a Proxy'],
    ];
    for (const [data, got] of cases) {
      assertThrowsHalrt(() => device.tensor(data, [2]), 'INVALID_ARGUMENT',
        'device.tensor: data must be a TypedArray, an Array, a number, BigInt or boolean, or bytes', `(got ${got})`);
    }
    // A Proxy's traps never run.
    const trapped = new Proxy([1, 2], { get() { throw new Error('trap ran'); }, getPrototypeOf() { throw new Error('trap ran'); } });
    assertThrowsHalrt(() => device.tensor(trapped, [2]), 'INVALID_ARGUMENT', '(got a Proxy)');
  });

  it('converts a TypedArray of another dtype only where exact, naming the first bad element', async () => {
    assertThrowsHalrt(() => device.tensor(Float32Array.of(1, 2.5), [2], 'i32'), 'INVALID_ARGUMENT',
      'device.tensor: data[1] is 2.5, not an integer for i32');
    assertThrowsHalrt(() => device.tensor(Int8Array.of(1, -1), [2], 'bool'), 'INVALID_ARGUMENT',
      'device.tensor: data[1] is -1; bool data must be true, false, 0 or 1');
    assertThrowsHalrt(() => device.tensor(Uint8ClampedArray.of(0, 2), [2], 'bool'), 'INVALID_ARGUMENT',
      'device.tensor: data[1] is 2; bool data must be true, false, 0 or 1');
    assertThrowsHalrt(() => device.tensor(Float64Array.of(2 ** 31), [1], 'i32'), 'INVALID_ARGUMENT',
      'device.tensor: data[0] is 2147483648, outside the range of i32');
    const view = device.tensor(Int32Array.of(1, -2), [2], 'i64');
    assert.deepStrictEqual(await view.read(), BigInt64Array.of(1n, -2n));
    view.close();
  });

  it('rejects bool data other than 0 and 1', () => {
    assertThrowsHalrt(() => device.tensor(new Uint8Array([0, 1, 2]), [3], 'bool'), 'INVALID_ARGUMENT',
      'device.tensor: bool data must be 0 or 1 (data[2] is 2)');
  });

  it('copy() rejects views of another device or another instance', async () => {
    const mine = device.empty([2], 'f32');
    const theirs = other.empty([2], 'f32');
    const instance2 = new halrt.Instance();
    const device2 = instance2.createDevice('local-sync');
    const foreign = device2.empty([2], 'f32');
    try {
      await assertRejectsHalrt(device.copy(theirs, mine), 'INVALID_ARGUMENT',
        'device.copy: source belongs to another device');
      await assertRejectsHalrt(device.copy(mine, theirs), 'INVALID_ARGUMENT',
        'device.copy: target belongs to another device');
      await assertRejectsHalrt(device.copy(foreign, mine), 'INVALID_ARGUMENT',
        'device.copy: source belongs to another device');
    } finally {
      mine.close();
      theirs.close();
      foreign.close();
      device2.close();
      instance2.close();
    }
  });

  it('copy() rejects things that are not BufferViews', async () => {
    const view = device.empty([2], 'f32');
    try {
      await assertRejectsHalrt(device.copy({}, view), 'INVALID_ARGUMENT',
        'device.copy: source is not a BufferView (got an object)');
      await assertRejectsHalrt(device.copy(view, device), 'INVALID_ARGUMENT',
        'device.copy: target is not a BufferView');
      await assertRejectsHalrt(device.copy(view), 'INVALID_ARGUMENT',
        'device.copy: target is not a BufferView (got undefined)');
      await assertRejectsHalrt(device.copy(new Float32Array(2), view), 'INVALID_ARGUMENT',
        'device.copy: source is not a BufferView (got a Float32Array)');
    } finally {
      view.close();
    }
  });

  it('copy() rejects views of different byte lengths', async () => {
    const a = device.empty([2], 'f32');
    const b = device.empty([3], 'f32');
    try {
      await assertRejectsHalrt(device.copy(a, b), 'INVALID_ARGUMENT',
        'device.copy: source has 8 bytes but target has 12');
    } finally {
      a.close();
      b.close();
    }
  });

  it('Promise-returning methods reject instead of throwing', () => {
    const promise = device.copy(1, 2);
    assert.ok(promise instanceof Promise);
    return assertRejectsHalrt(promise, 'INVALID_ARGUMENT', 'device.copy: source is not a BufferView');
  });
});

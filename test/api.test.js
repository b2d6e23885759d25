'use strict';
// The short path (issue 12, API): tensors from plain arrays and converted
// TypedArrays, invoke with host data and names, halrt.load, readable
// objects and the f16/bf16 helpers.
const assert = require('assert');
const path = require('path');
const util = require('util');
const halrt = require('..');
const { assertThrowsHalrt, assertRejectsHalrt, settleLiveObjects } = require('./helpers');

const MLP = path.join(__dirname, '..', 'examples', 'mlp.halrt.json');

// f16 bits of a few values, from the IEEE 754 binary16 encoding.
const F16_TABLE = [
  [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [0.5, 0x3800], [65504, 0x7bff],
  [65519, 0x7bff], [65520, 0x7c00], [Infinity, 0x7c00], [-Infinity, 0xfc00], [2 ** -24, 0x0001],
  [2 ** -25, 0x0000], [3 * 2 ** -25, 0x0002], [2 ** -14, 0x0400], [1 + 2 ** -11, 0x3c00],
  [1 + 3 * 2 ** -11, 0x3c02], [0.1, 0x2e66], [NaN, 0x7e00],
];

describe('f16 and bf16 helpers', () => {
  it('encode numbers to f16 bits, rounding to nearest even', () => {
    for (const [value, bits] of F16_TABLE) {
      assert.strictEqual(halrt.toF16Bits(value), bits, `${value}`);
    }
    assert.deepStrictEqual(halrt.toF16Bits(F16_TABLE.map(([v]) => v)), Uint16Array.from(F16_TABLE, ([, b]) => b));
  });

  it('decode every finite f16 back to the value that encodes to it', () => {
    const bits = Uint16Array.from({ length: 65536 }, (_, i) => i);
    const values = halrt.fromF16Bits(bits);
    assert.ok(values instanceof Float32Array);
    for (let b = 0; b < 65536; ++b) {
      if (Number.isNaN(values[b])) {
        assert.strictEqual(b & 0x7c00, 0x7c00, `bits ${b} decode to NaN`);
        continue;
      }
      assert.strictEqual(halrt.toF16Bits(values[b]), b, `bits ${b}`);
    }
    assert.strictEqual(halrt.fromF16Bits(0x3c00), 1);
  });

  it('bf16 equals the f32 bits rounded to nearest even, from a Float32Array', () => {
    const f32 = new Float32Array(5000);
    const words = new Uint32Array(f32.buffer);
    for (let i = 0; i < words.length; ++i) words[i] = (Math.imul(i, 2654435761) ^ (i << 7)) >>> 0;
    const bits = halrt.toBF16Bits(f32);
    for (let i = 0; i < f32.length; ++i) {
      if (Number.isNaN(f32[i])) continue;
      const w = words[i];
      assert.strictEqual(bits[i], ((w + 0x7fff + ((w >>> 16) & 1)) >>> 16) & 0xffff, `f32 word ${w.toString(16)}`);
    }
    assert.deepStrictEqual(halrt.fromBF16Bits(Uint16Array.of(0x3f80, 0xc040)), Float32Array.of(1, -3));
  });

  it('reject what is not numbers or bits', () => {
    assertThrowsHalrt(() => halrt.toF16Bits('1'), 'INVALID_ARGUMENT', "toF16Bits: values must be a number");
    assertThrowsHalrt(() => halrt.toBF16Bits([1, 'x']), 'INVALID_ARGUMENT', 'toBF16Bits: values[1] must be a number');
    assertThrowsHalrt(() => halrt.fromF16Bits([1, 70000]), 'INVALID_ARGUMENT', 'fromF16Bits: bits[1] must be an integer in [0, 65535]');
    assertThrowsHalrt(() => halrt.fromBF16Bits(1.5), 'INVALID_ARGUMENT', 'fromBF16Bits: bits must be an integer');
  });
});

describe('tensor() from host data', () => {
  let instance;
  let device;
  before(() => {
    instance = new halrt.Instance();
    device = instance.createDevice('local-sync');
  });
  after(() => {
    device.close();
    instance.close();
  });
  // Every view a test makes, closed after it.
  const made = [];
  const tensor = (...args) => {
    const view = device.tensor(...args);
    made.push(view);
    return view;
  };
  const empty = (...args) => {
    const view = device.empty(...args);
    made.push(view);
    return view;
  };
  afterEach(() => {
    for (const view of made.splice(0)) view.close();
  });

  it('takes nested Arrays, inferring the shape (f32 by default)', async () => {
    const view = tensor([[1, 2, 3], [4, 5, 6]]);
    assert.strictEqual(view.dtype, 'f32');
    assert.deepStrictEqual(view.shape, [2, 3]);
    assert.deepStrictEqual(await view.read(), Float32Array.of(1, 2, 3, 4, 5, 6));
    assert.deepStrictEqual(tensor(7).shape, []);
    assert.deepStrictEqual(tensor([]).shape, [0]);
    assert.deepStrictEqual(tensor([[[1], [2]]], null, 'i32').shape, [1, 2, 1]);
    assert.deepStrictEqual(tensor([1, 2, 3, 4], [2, 2], 'u8').shape, [2, 2]);
    assert.strictEqual(tensor([true, false]).dtype, 'bool');
    assert.deepStrictEqual(await tensor([true, false]).read(), Uint8Array.of(1, 0));
    assert.deepStrictEqual(await tensor([2n ** 62n, -1n]).read(), BigInt64Array.of(2n ** 62n, -1n));
    assert.deepStrictEqual(await tensor([3, -4], null, 'i64').read(), BigInt64Array.of(3n, -4n));
    assert.deepStrictEqual(await tensor([2 ** 53 - 1], null, 'u64').read(), BigUint64Array.of(2n ** 53n - 1n));
  });

  it('rejects ragged arrays, naming the path of the first bad row', () => {
    assertThrowsHalrt(() => tensor([[1, 2], [3]]), 'INVALID_ARGUMENT',
      'device.tensor: data[1] has 1 element but its siblings have 2 (ragged data)');
    assertThrowsHalrt(() => tensor([[[1, 2], [3, 4]], [[5, 6], [7]]]), 'INVALID_ARGUMENT',
      'device.tensor: data[1][1] has 1 element but its siblings have 2');
    assertThrowsHalrt(() => tensor([[1, 2], 3]), 'INVALID_ARGUMENT', 'device.tensor: data[1] must be an Array of 2 elements (got 3)');
    assertThrowsHalrt(() => tensor([1, [2]]), 'INVALID_ARGUMENT', 'device.tensor: data[1] is an Array where its siblings are elements');
    assertThrowsHalrt(() => tensor([1, 'a']), 'INVALID_ARGUMENT', "device.tensor: data[1] must be a number, BigInt or boolean (got 'a')");
  });

  it('rejects Arrays nested deeper than 8, and an Array that contains itself, without recursing', () => {
    assert.deepStrictEqual(tensor([[[[[[[[1]]]]]]]]).shape, [1, 1, 1, 1, 1, 1, 1, 1]);
    const deep = 'device.tensor: data nests Arrays more than 8 deep (a tensor has at most 8 dimensions)';
    assertThrowsHalrt(() => tensor([[[[[[[[[1]]]]]]]]]), 'INVALID_ARGUMENT', deep);
    let nested = [1];
    for (let i = 0; i < 200000; ++i) nested = [nested];
    assertThrowsHalrt(() => tensor(nested), 'INVALID_ARGUMENT', deep);
    const itself = [];
    itself.push(itself);
    assertThrowsHalrt(() => tensor(itself), 'INVALID_ARGUMENT', deep);
  });

  it('converts numbers to f16 and bf16 rounding to nearest even', async () => {
    const values = F16_TABLE.map(([v]) => v);
    assert.deepStrictEqual(await tensor(values, null, 'f16').read(), Uint16Array.from(F16_TABLE, ([, b]) => b));
    assert.deepStrictEqual(await tensor(Float32Array.from(values), [values.length], 'f16').read(),
      halrt.toF16Bits(Float32Array.from(values)));
    assert.deepStrictEqual(await tensor([1, -3], null, 'bf16').read(), Uint16Array.of(0x3f80, 0xc040));
    // A Uint16Array for f16/bf16 is raw bits, as before.
    assert.deepStrictEqual(await tensor(Uint16Array.of(0x3c00), [1], 'f16').read(), Uint16Array.of(0x3c00));
  });

  it('converts TypedArrays to another dtype where exact; Float64Array to f32 rounds', async () => {
    assert.deepStrictEqual(await tensor(Float64Array.of(0.1, 2), [2], 'f32').read(), Float32Array.of(0.1, 2));
    assert.deepStrictEqual(await tensor(Float32Array.of(1, -2), [2], 'i32').read(), Int32Array.of(1, -2));
    assert.deepStrictEqual(await tensor(Int32Array.of(5, -6), [2], 'i64').read(), BigInt64Array.of(5n, -6n));
    assert.deepStrictEqual(await tensor(Int8Array.of(0, 1), [2], 'bool').read(), Uint8Array.of(0, 1));
    assert.deepStrictEqual(await tensor(BigInt64Array.of(7n), [1], 'u8').read(), Uint8Array.of(7));
    assert.deepStrictEqual(await tensor(Uint8Array.of(200), [1], 'f64').read(), Float64Array.of(200));
  });

  it('rejects lossy conversions as INVALID_ARGUMENT naming the index', () => {
    assertThrowsHalrt(() => tensor([1, 1.7], null, 'i32'), 'INVALID_ARGUMENT', 'device.tensor: data[1] is 1.7, not an integer for i32');
    assertThrowsHalrt(() => tensor([[0, 1], [2, 300]], null, 'u8'), 'INVALID_ARGUMENT', 'device.tensor: data[1][1] is 300, outside the range of u8');
    assertThrowsHalrt(() => tensor([2 ** 60], null, 'i64'), 'INVALID_ARGUMENT', 'device.tensor: data[0] is 1152921504606847000, not exact as a number');
    assertThrowsHalrt(() => tensor([-1], null, 'u64'), 'INVALID_ARGUMENT', 'device.tensor: data[0] is -1, outside the range of u64');
    assertThrowsHalrt(() => tensor([2n ** 64n], null, 'u64'), 'INVALID_ARGUMENT', 'outside the range of u64');
    assertThrowsHalrt(() => tensor(Float32Array.of(0, 0.5), [2], 'i32'), 'INVALID_ARGUMENT', 'device.tensor: data[1] is 0.5, not an integer for i32');
    assertThrowsHalrt(() => tensor(Int16Array.of(1, -1), [2], 'u16'), 'INVALID_ARGUMENT', 'device.tensor: data[1] is -1, outside the range of u16');
    assertThrowsHalrt(() => tensor([0, 2], null, 'bool'), 'INVALID_ARGUMENT', 'device.tensor: data[1] is 2; bool data must be true, false, 0 or 1');
    assertThrowsHalrt(() => tensor([NaN], null, 'i8'), 'INVALID_ARGUMENT', 'data[0] is NaN, not an integer for i8');
  });

  it('reinterprets Buffer and ArrayBuffer bytes only when a dtype is given', async () => {
    const bytes = Buffer.from(Float32Array.of(1.5, -2).buffer);
    assert.deepStrictEqual(await tensor(bytes, [2], 'f32').read(), Float32Array.of(1.5, -2));
    assert.deepStrictEqual(await tensor(bytes.buffer, [4], 'u16').read(), new Uint16Array(bytes.buffer.slice(0)));
    // An unaligned Buffer (a slice of a pool) is copied, not viewed.
    const unaligned = Buffer.concat([Buffer.from([9]), bytes]).subarray(1);
    assert.deepStrictEqual(await tensor(unaligned, [2], 'f32').read(), Float32Array.of(1.5, -2));
    // Without a dtype a Buffer is u8 (its bytes as they are); an ArrayBuffer needs one.
    assert.deepStrictEqual(await tensor(bytes, [8]).read(), new Uint8Array(bytes));
    assertThrowsHalrt(() => tensor(new ArrayBuffer(4), [1]), 'INVALID_ARGUMENT', 'device.tensor: data is an ArrayBuffer of raw bytes; give a dtype to reinterpret them');
    assertThrowsHalrt(() => tensor(Buffer.alloc(6), [1], 'f32'), 'INVALID_ARGUMENT',
      'device.tensor: data has 6 bytes, not a multiple of 4 (the size of f32)');
    // A SharedArrayBuffer is bytes like an ArrayBuffer (copied).
    const shared = new SharedArrayBuffer(8);
    new Float32Array(shared).set([3, 4]);
    assert.deepStrictEqual(await tensor(shared, [2], 'f32').read(), Float32Array.of(3, 4));
    assertThrowsHalrt(() => tensor(shared, [2]), 'INVALID_ARGUMENT', 'data is a SharedArrayBuffer of raw bytes; give a dtype');
  });

  it('reshapes a flat Array to a given shape, never a nested one; other data is named in the error', async () => {
    assert.deepStrictEqual((await tensor([1, 2, 3, 4], [2, 2]).read()), Float32Array.of(1, 2, 3, 4));
    assert.deepStrictEqual(tensor([[1, 2], [3, 4]], [2, 2]).shape, [2, 2]);
    assert.deepStrictEqual(tensor(7, [1, 1]).shape, [1, 1]);
    assertThrowsHalrt(() => tensor([[1, 2], [3, 4]], [4]), 'INVALID_ARGUMENT',
      'device.tensor: data is nested with shape [2,2] but shape is [4]');
    assertThrowsHalrt(() => tensor([[1, 2], [3, 4]], [4, 1]), 'INVALID_ARGUMENT', 'shape [2,2] but shape is [4,1]');
    for (const [data, what] of [[{}, 'an Object'], ['1', "'1'"], [undefined, 'undefined'], [new DataView(new ArrayBuffer(4)), 'a DataView']]) {
      assertThrowsHalrt(() => tensor(data, [1], 'f32'), 'INVALID_ARGUMENT',
        'device.tensor: data must be a TypedArray, an Array, a number, BigInt or boolean, or bytes', `(got ${what})`);
    }
  });

  it('views have numel and size', () => {
    const view = empty([2, 3, 4], 'u8');
    assert.strictEqual(view.numel, 24);
    assert.strictEqual(view.size, 24);
    assert.strictEqual(empty([], 'f32').numel, 1);
  });

  it('read(dtype) asserts the dtype: the array when it is the view\'s, INVALID_ARGUMENT otherwise', async () => {
    const view = tensor([1n, -2n], null, 'i64');
    assert.deepStrictEqual(await view.read('i64'), new BigInt64Array([1n, -2n]));
    assert.deepStrictEqual(await view.read(undefined), new BigInt64Array([1n, -2n]));
    await assertRejectsHalrt(view.read('u64'), 'INVALID_ARGUMENT', "bufferView.read: dtype 'u64' was asked for but the view is 'i64'");
    await assertRejectsHalrt(view.read('float'), 'INVALID_ARGUMENT', "bufferView.read: unknown dtype 'float'");
    await assertRejectsHalrt(view.read(5), 'INVALID_ARGUMENT', 'bufferView.read: dtype must be a string');
    view.close();
    await assertRejectsHalrt(view.read('i64'), 'FAILED_PRECONDITION', 'closed');
  });
});

describe('invoke with host data, names and options', () => {
  let instance;
  let device;
  let hal;
  let module;
  let context;
  let fn;
  const x = Array.from({ length: 4 }, (_, i) => Array.from({ length: 8 }, (_, j) => (i + j) % 3));
  const w1 = Array.from({ length: 8 }, (_, i) => Array.from({ length: 16 }, (_, j) => ((i * j) % 5) / 5));
  const w2 = Array.from({ length: 16 }, (_, i) => Array.from({ length: 3 }, (_, j) => ((i + 2 * j) % 4) / 4));
  let expected;

  before(async () => {
    instance = new halrt.Instance();
    device = instance.createDevice('local-sync');
    hal = new halrt.HalModule(instance, device);
    module = halrt.Module.load(instance, MLP);
    context = new halrt.Context(instance, [hal, module]);
    fn = context.lookupFunction('mlp.main');
    const inputs = [device.tensor(x), device.tensor(w1), device.tensor(w2)];
    const [y] = await fn.invoke(inputs);
    expected = await y.read();
    for (const view of [y, ...inputs]) view.close();
  });
  after(() => {
    for (const o of [fn, context, module, hal, device, instance]) o.close();
  });

  it('uploads Arrays and TypedArrays to the function device and closes them after', async () => {
    const before = halrt.liveObjects().bufferView;
    const [y] = await fn.invoke([x, Float32Array.from(w1.flat()), w2]);
    assert.deepStrictEqual(await y.read(), expected);
    y.close();
    assert.strictEqual(halrt.liveObjects().bufferView, before);
  });

  it('takes inputs by name and rejects unknown or missing names', async () => {
    const [y] = await fn.invoke({ w2, x, w1 });
    assert.deepStrictEqual(await y.read(), expected);
    y.close();
    await assertRejectsHalrt(fn.invoke({ x, w1, w2, bias: [1] }), 'INVALID_ARGUMENT',
      "function.invoke: mlp.main: inputs has no input named 'bias' (the inputs are x, w1, w2)");
    await assertRejectsHalrt(fn.invoke({ x, w2 }), 'INVALID_ARGUMENT', "function.invoke: mlp.main: input 'w1' is missing (inputs.w1)");
    await assertRejectsHalrt(fn.invoke({ x, w1: [[1]], w2 }), 'INVALID_ARGUMENT', "input 1 ('w1') must have shape [8,16] (inputs.w1 has [1,1])");
    await assertRejectsHalrt(fn.invoke({ x, w1, w2: [[0.5, 1.7, 'a']] }), 'INVALID_ARGUMENT', "function.invoke: mlp.main: inputs.w2[0][2] must be a number, BigInt or boolean (got 'a')");
  });

  it('checks host inputs against the signature', async () => {
    await assertRejectsHalrt(fn.invoke([x.slice(1), w1, w2]), 'INVALID_ARGUMENT',
      "function.invoke: mlp.main: input 0 ('x') must have shape [4,8] (inputs[0] has [3,8])");
    await assertRejectsHalrt(fn.invoke([new Float64Array(32), w1, w2]), 'INVALID_ARGUMENT',
      "function.invoke: mlp.main: input 0 ('x') must be f32 in a Float32Array (inputs[0] is a Float64Array)");
    await assertRejectsHalrt(fn.invoke([new Float32Array(31), w1, w2]), 'INVALID_ARGUMENT',
      "function.invoke: mlp.main: input 0 ('x') must have 32 elements for shape [4,8] (inputs[0] has 31)");
    await assertRejectsHalrt(fn.invoke([x, w1, [[1, 2]]]), 'INVALID_ARGUMENT', "input 2 ('w2') must have shape [16,3] (inputs[2] has [1,2])");
    await assertRejectsHalrt(fn.invoke([x, [[1, 2], [3]], w2]), 'INVALID_ARGUMENT', 'function.invoke: mlp.main: inputs[1][1] has 1 element but its siblings have 2');
  });

  it('returns named outputs and host arrays on request', async () => {
    const { probs } = await fn.invoke([x, w1, w2], { named: true });
    assert.ok(probs instanceof halrt.BufferView);
    assert.deepStrictEqual(await probs.read(), expected);
    probs.close();
    const before = halrt.liveObjects().bufferView;
    const [host] = await fn.invoke([x, w1, w2], { read: true });
    assert.deepStrictEqual(host, expected);
    assert.strictEqual(halrt.liveObjects().bufferView, before);
    assert.deepStrictEqual(await fn.invoke({ x, w1, w2 }, { named: true, read: true }), { probs: expected });
    await assertRejectsHalrt(fn.invoke([x, w1, w2], { read: 1 }), 'INVALID_ARGUMENT', 'function.invoke: options.read must be a boolean (got 1)');
  });

  it('lookupFunction takes a bare name when one module exports it', () => {
    const main = context.lookupFunction('main');
    assert.strictEqual(main.name, 'mlp.main');
    const other = halrt.Module.load(instance, MLP);
    const renamed = halrt.Module.fromObject(instance, { ...JSON.parse(require('fs').readFileSync(MLP, 'utf8')), name: 'mlp2' },
      { baseDir: path.dirname(MLP) });
    const both = new halrt.Context(instance, [hal, other, renamed]);
    assertThrowsHalrt(() => both.lookupFunction('main'), 'INVALID_ARGUMENT',
      "context.lookupFunction: 'main' is ambiguous: 'mlp.main', 'mlp2.main'; qualify it");
    const qualified = both.lookupFunction('mlp2.main');
    assert.strictEqual(qualified.name, 'mlp2.main');
    assertThrowsHalrt(() => context.lookupFunction('nope'), 'NOT_FOUND',
      "context.lookupFunction: no linked module exports a function 'nope' (functions: mlp.main)");
    for (const o of [main, qualified, both, other, renamed]) o.close();
  });
});

describe('halrt.load', () => {
  it('makes every object, exposes functions as methods and closes all', async () => {
    const traces = [];
    const baseline = halrt.liveObjects();
    const m = await halrt.load(MLP, { device: 'local-sync', debugSink: (key) => traces.push(key) });
    assert.strictEqual(m.name, 'mlp');
    assert.strictEqual(m.device.info.uri, 'local-sync');
    assert.deepStrictEqual(Object.keys(m.functions), ['main']);
    const x = new Float32Array(32).fill(1);
    const w1 = new Float32Array(128).fill(0.5);
    const w2 = new Float32Array(48).fill(0.25);
    const [y] = await m.main(x, w1, w2);
    const [byName] = await m.main({ x, w1, w2 });
    assert.deepStrictEqual(await byName.read(), await y.read());
    assert.deepStrictEqual(traces, ['layer1', 'logits', 'probs', 'layer1', 'logits', 'probs']);
    y.close();
    byName.close();
    m.close();
    assert.strictEqual(m.closed, true);
    await assertRejectsHalrt(m.main(x, w1, w2), 'FAILED_PRECONDITION');
    m.close();
    // Everything load() made is released (the sink's block pool included).
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });

  it('m.main(inputs..., options) and m.main({inputs}, options) take invoke\'s options; a stray argument says what it got and how to call', async () => {
    const m = await halrt.load(MLP, { device: 'local-sync' });
    const x = new Float32Array(32).fill(0.5);
    const w1 = new Float32Array(128).fill(0.25);
    const w2 = Float32Array.from({ length: 48 }, (_, i) => i % 3);
    try {
      const [expected] = await m.functions.main.invoke([x, w1, w2], { read: true });
      const [read] = await m.main(x, w1, w2, { read: true });
      assert.deepStrictEqual(read, expected);
      assert.deepStrictEqual(await m.main({ x, w1, w2 }, { named: true, read: true }), { probs: expected });
      const [view] = await m.main({ x, w1, w2 });
      assert.ok(view instanceof halrt.BufferView);
      view.close();
      const aborted = new AbortController();
      aborted.abort();
      await assertRejectsHalrt(m.main(x, w1, w2, { signal: aborted.signal }), 'CANCELLED');
      const usage = 'call it as m.main(x, w1, w2, options?) or m.main({x, w1, w2}, options?)';
      await assertRejectsHalrt(m.main(x, w1, w2, { read: true }, 5), 'INVALID_ARGUMENT',
        'loadedModule.main: it takes 3 inputs and options, but got 5 arguments (argument 5 is 5)', usage);
      await assertRejectsHalrt(m.main(x, w1, w2, 'read'), 'INVALID_ARGUMENT',
        "loadedModule.main: argument 4 must be the options object {named, read, signal} (got 'read')", usage);
      await assertRejectsHalrt(m.main(x, w1, { read: true }), 'INVALID_ARGUMENT',
        "loadedModule.main: argument 3 is an object where input 'w2' belongs (options come after every input)", usage);
      await assertRejectsHalrt(m.main({ x, w1, w2 }, { read: true }, null), 'INVALID_ARGUMENT',
        'loadedModule.main: it takes an object of inputs and options, but got 3 arguments (argument 3 is null)');
      await assertRejectsHalrt(m.main(x, w1, w2, { read: 'yes' }), 'INVALID_ARGUMENT', "options.read must be a boolean (got 'yes')");
      // A throwing getter in the options rejects too; nothing throws.
      const throwing = { get read() { throw new Error('boom'); } };
      await assertRejectsHalrt(m.main(x, w1, w2, throwing), 'INVALID_ARGUMENT', 'function.invoke: reading options threw (boom)');
      await assertRejectsHalrt(m.functions.main.invoke([x, w1, w2], throwing), 'INVALID_ARGUMENT', 'function.invoke: reading options threw (boom)');
      // Inputs: a getter that throws is INVALID_ARGUMENT with the thrown value as
      // cause (invoke rejects, prepare throws); only own properties name inputs.
      const main = m.functions.main;
      const boom = Symbol('boom');
      const named = { x, w1, get w2() { throw boom; } };
      const listed = [x, w1];
      Object.defineProperty(listed, 2, { get() { throw boom; }, enumerable: true });
      for (const inputs of [named, listed]) {
        const rejected = await main.invoke(inputs).then(() => null, (error) => error);
        assert.ok(rejected instanceof halrt.HalrtError && rejected.code === 'INVALID_ARGUMENT' && rejected.cause === boom, String(rejected));
        assert.match(rejected.message, /^function\.invoke: mlp\.main: reading inputs threw \(Symbol\(boom\)\)/);
        assertThrowsHalrt(() => main.prepare(inputs), 'INVALID_ARGUMENT', 'function.prepare: mlp.main: reading inputs threw');
      }
      Object.prototype.w2 = w2; // eslint-disable-line no-extend-native
      try {
        await assertRejectsHalrt(main.invoke({ x, w1 }), 'INVALID_ARGUMENT', "input 'w2' is missing (inputs.w2)");
        assertThrowsHalrt(() => main.prepare({ x, w1 }), 'INVALID_ARGUMENT', "input 'w2' is missing (inputs.w2)");
      } finally {
        delete Object.prototype.w2;
      }
    } finally {
      m.close();
    }
  });

  it("a function named 'then' or like a member is only in functions: await gives the LoadedModule", async () => {
    const file = path.join(require('os').tmpdir(), `halrt-then-${process.pid}.halrt.json`);
    const copy = (f) => f.input('x', 'f32', [1]).output('y', 'f32', [1]).copy('x', 'y');
    require('fs').writeFileSync(file, JSON.stringify(new halrt.ModuleBuilder('m').function('then', copy).function('close', copy).toObject()));
    const baseline = halrt.liveObjects();
    try {
      const m = await halrt.load(file, { device: 'local-sync' });
      assert.ok(m instanceof halrt.LoadedModule);
      assert.strictEqual(m.then, undefined);
      assert.deepStrictEqual(Object.keys(m.functions), ['then', 'close']);
      const [y] = await m.functions.then.invoke([Float32Array.of(2.5)]);
      assert.deepStrictEqual(await y.read(), Float32Array.of(2.5));
      y.close();
      m.close();
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
    } finally {
      require('fs').rmSync(file);
    }
  });

  it("a function named '__proto__' is an own key of functions like any other, from load() and ModuleBuilder", async () => {
    const file = path.join(require('os').tmpdir(), `halrt-proto-${process.pid}.halrt.json`);
    const copy = (f) => f.input('x', 'f32', [1]).output('y', 'f32', [1]).copy('x', 'y');
    const builder = new halrt.ModuleBuilder('m').function('__proto__', copy).function('main', copy);
    assert.deepStrictEqual(Object.keys(builder.toObject().functions), ['__proto__', 'main']);
    require('fs').writeFileSync(file, JSON.stringify(builder.toObject()));
    const baseline = halrt.liveObjects();
    try {
      const m = await halrt.load(file, { device: 'local-sync' });
      assert.deepStrictEqual(Object.keys(m.functions), ['__proto__', 'main']);
      assert.strictEqual(Object.getPrototypeOf(m.functions), Object.prototype);
      const proto = m.functions.__proto__;
      assert.ok(proto instanceof halrt.Function);
      assert.deepStrictEqual(await proto.invoke([Float32Array.of(3)], { read: true }), [Float32Array.of(3)]);
      m.close();
      assert.strictEqual(proto.closed, true, 'close() closes it too');
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
    } finally {
      require('fs').rmSync(file);
    }
  });

  it('closes with Symbol.dispose', async () => {
    const m = await halrt.load(MLP, { device: 'local-sync' });
    m[Symbol.dispose]();
    assert.strictEqual(m.closed, true);
  });

  it('rejects bad arguments and closes what it made', async () => {
    const baseline = halrt.liveObjects();
    // Errors name halrt.load and its argument, not the step that failed.
    await assertRejectsHalrt(halrt.load(path.join(__dirname, 'no-such.halrt.json'), { device: 'local-sync' }), 'NOT_FOUND', 'halrt.load: cannot read', 'no-such.halrt.json');
    await assertRejectsHalrt(halrt.load(MLP, { device: 'nope' }), 'NOT_FOUND', "halrt.load: options.device: unknown driver 'nope'");
    // A colon for "://" gets the URI it meant.
    await assertRejectsHalrt(halrt.load(MLP, { device: 'local-task:2' }), 'INVALID_ARGUMENT',
      "halrt.load: options.device: malformed device URI 'local-task:2': did you mean 'local-task://2'?");
    await assertRejectsHalrt(halrt.load(MLP, { device: 'local-sync', traceDispatches: 3 }), 'INVALID_ARGUMENT', 'halrt.load: options.traceDispatches');
    await assertRejectsHalrt(halrt.load(MLP, 'local-sync'), 'INVALID_ARGUMENT', 'halrt.load: options must be an object');
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });
});

const show = (object) => util.inspect(object, { breakLength: Infinity });

describe('readable objects', () => {
  it('util.inspect and toString show what a user needs; nothing prints {}', async () => {
    const m = await halrt.load(MLP, { device: 'local-sync' });
    const view = m.device.tensor([[1, 2], [3, 4]], null, 'i32');
    assert.strictEqual(util.inspect(view, { breakLength: Infinity }),
      "BufferView { dtype: 'i32', shape: [ 2, 2 ], device: 'local-sync', byteLength: 16, closed: false }");
    assert.strictEqual(String(view), 'BufferView(i32[2,2] on local-sync)');
    const [y] = await m.main(new Float32Array(32), new Float32Array(128), new Float32Array(48));
    assert.strictEqual(String(y), 'BufferView(f32[4,3] on local-sync)');
    view.close();
    assert.match(show(view), /closed: true/);
    assert.match(show(view), /dtype: undefined/);
    assert.strictEqual(String(view), 'BufferView(closed)');
    const main = 'mlp.main(x: f32[4,8], w1: f32[8,16], w2: f32[16,3]) -> (probs: f32[4,3])';
    assert.strictEqual(String(m.functions.main), `Function(${main})`);
    assert.strictEqual(show(m.module, { breakLength: Infinity }),
      `Module { name: 'mlp', functions: [ '${main.slice('mlp.'.length)}' ], closed: false }`);
    assert.strictEqual(String(m.module), 'Module(mlp)');
    assert.strictEqual(String(m.device), 'Device(local-sync)');
    assert.match(show(m.device), /Device \{ uri: 'local-sync', name: 'CPU[^']*', closed: false \}/);
    assert.strictEqual(String(m.context), 'Context(hal, mlp)');
    assert.match(show(m.context), /Context \{ modules: \[ 'hal', 'mlp' \], closed: false \}/);
    assert.match(show(m.halModule), /HalModule \{ device: 'local-sync', debugSink: false/);
    assert.match(show(m.instance), /Instance \{ closed: false \}/);
    assert.match(show(m), /LoadedModule \{\s*name: 'mlp',\s*device: 'local-sync',/);
    assert.strictEqual(String(m), 'LoadedModule(mlp: main on local-sync)');
    // A wrong receiver is a HalrtError, as on the native classes.
    for (const [member, call] of [
      ['close', () => halrt.LoadedModule.prototype.close.call({})],
      ['toString', () => halrt.LoadedModule.prototype.toString.call({})],
      ['closed', () => Object.getOwnPropertyDescriptor(halrt.LoadedModule.prototype, 'closed').get.call({})],
    ]) {
      assertThrowsHalrt(call, 'INVALID_ARGUMENT', `loadedModule.${member}: \`this\` is not a LoadedModule`);
    }
    for (const object of [view, y, m, m.instance, m.device, m.halModule, m.module, m.context, m.functions.main]) {
      assert.doesNotMatch(show(object), /\{\}/);
      assert.doesNotMatch(String(object), /\[object /);
    }
    const trace = halrt.sinks.chromeTrace(path.join(require('os').tmpdir(), `halrt-api-${process.pid}.json`));
    assert.strictEqual(show(trace), `ChromeTrace { path: '${trace.path.replace(/\\/g, '\\\\')}', events: 2, closed: false }`); // its two metadata events
    assert.strictEqual(String(trace), `ChromeTrace(${trace.path})`);
    trace.close();
    require('fs').rmSync(trace.path);
    const builder = new halrt.ModuleBuilder('b').executable('k', { local: { builtin: true } }).function('f', () => {});
    assert.strictEqual(show(builder), "ModuleBuilder { name: 'b', executables: [ 'k' ], functions: [ 'f' ] }");
    assert.strictEqual(String(builder), 'ModuleBuilder(b)');
    y.close();
    m.close();
    assert.match(show(m.instance), /closed: true/);
    assert.match(show(m.module), /Module \{ name: undefined, functions: undefined, closed: true \}/);
    // A closed Context still names the modules it linked, closed or not.
    assert.strictEqual(String(m.context), 'Context(hal, mlp)');
    assert.match(show(m.context), /Context \{ modules: \[ 'hal', 'mlp' \], closed: true \}/);
  });

  it('a flight recorder shows its setting and what it holds, before and after close()', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const hal = new halrt.HalModule(instance, device, { debugSink: () => {}, flightRecorder: { bytes: 4096 } });
    const recorder = hal.flightRecorder;
    assert.strictEqual(show(recorder), 'FlightRecorder { bytes: 4096, heldTraces: 0, heldBytes: 0, skipped: 0 }');
    assert.strictEqual(String(recorder), 'FlightRecorder({ bytes: 4096 })');
    assert.match(show(hal), /flightRecorder: \{ bytes: 4096 \}, closed: false \}/);
    hal.close();
    assert.strictEqual(show(recorder), 'FlightRecorder { bytes: 4096, closed: true }');
    assert.match(show(hal), /flightRecorder: \{ bytes: 4096 \}, closed: true \}/);
    const plain = new halrt.HalModule(instance, device, {});
    assert.match(show(plain), /flightRecorder: null/);
    plain.close();
    device.close();
    instance.close();
  });
});

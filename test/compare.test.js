'use strict';
// halrt.compare (lib/compare.js): devices that agree, a divergence planted
// at a known op (a kernel library that adds one ULP where the built-in does
// not, run on the CUDA test double against local-sync in a child process),
// the tolerance rules on synthetic traces, and bad arguments.
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { compareTraces } = require('../lib/compare');
const {
  DEVICE_URIS, FAKE_CUDA, assertRejectsHalrt, buildNativeFixtures, liveBaseline, plantedModule, settleLiveObjects,
} = require('./helpers');

const ROOT = path.join(__dirname, '..');
const EXAMPLE = path.join(ROOT, 'examples', 'mlp.halrt.json');

// Inputs of examples/mlp.halrt.json (x 4x8, w1 8x16, w2 16x3).
function mlpInputs() {
  const wave = (n, scale) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * scale));
  return { x: wave(32, 0.7), w1: wave(128, 0.3), w2: wave(48, 1.1) };
}

// Runs `script` (it gets `halrt`, `planted` and `print`) in a child process
// on the CUDA test double; resolves with what it printed, parsed.
function onFakeCuda(script) {
  const source = `
    const halrt = require(${JSON.stringify(ROOT)});
    const planted = ${JSON.stringify(plantedModule())};
    const print = (value) => process.stdout.write(JSON.stringify(value));
    (async () => { ${script} })().catch((error) => { console.error(error); process.exit(3); });`;
  const child = spawnSync(process.execPath, ['-e', source], {
    encoding: 'utf8',
    timeout: 60000,
    env: { ...process.env, HALRT_CUDA_LIBRARY: FAKE_CUDA },
  });
  assert.strictEqual(child.status, 0, `child: ${child.stderr}`);
  return JSON.parse(child.stdout);
}

// A trace of one tensor named `name` (as the debug sink delivers it).
function trace(key, dtype, shape, data, op = 0) {
  return { key, function: 'm.main', op, tensors: [{ name: 'v', dtype, shape, data }] };
}

// compareTraces on one trace per device: its first divergence (or null).
function firstOf(dtype, reference, other, tolerances = {}) {
  const tol = { rtol: 1e-5, atol: 1e-8, ulps: 0, integers: false, ...tolerances };
  const shape = [reference.length];
  return compareTraces([trace('t', dtype, shape, reference)], [trace('t', dtype, shape, other)], ['ref', 'dev'], tol).first;
}

describe('halrt.compare', function () {
  this.timeout(60000);

  let baseline;
  beforeEach(async () => {
    baseline = await liveBaseline();
  });
  afterEach(async () => {
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });

  // Two CPU devices by default; in the CUDA pass (HALRT_TEST_DEVICES=cuda) local-sync against it.
  const devices = DEVICE_URIS.length >= 2 ? [...DEVICE_URIS] : ['local-sync', ...DEVICE_URIS];

  // The CPU devices agree bit for bit; CUDA's matmul fuses and its softmax
  // sums in a tree, so it agrees to rounding (docs/kernels.md): a few ULPs
  // of the products' magnitude, which cancellation makes large relative to
  // a small logit.
  const tolerance = devices.includes('cuda') ? { atol: 1e-6 } : {};

  it(`${devices.join(' and ')} agree on examples/mlp.halrt.json, every dispatch and trace compared`, async () => {
    const inputs = mlpInputs();
    const result = await halrt.compare(EXAMPLE, inputs, { devices, ...tolerance });
    assert.strictEqual(result.agree, true);
    assert.strictEqual(result.first, null);
    assert.deepStrictEqual(result.devices, devices);
    assert.strictEqual(result.function, 'mlp.main');
    // [key, elements]: 4x16 values up to layer1, then 4x3.
    const keys = [['main:0:matmul_f32', 64], ['main:1:relu_f32', 64], ['layer1', 64], ['main:3:matmul_f32', 12],
      ['logits', 12], ['main:5:softmax_rows_f32', 12], ['probs', 12], ['outputs', 12]];
    assert.deepStrictEqual(result.summary.map((s) => [s.key, s.elements]), keys);
    for (const s of result.summary) {
      assert.deepStrictEqual([s.device, s.mismatches], [devices[1], 0]);
    }
  });

  it('takes a ModuleBuilder or a description object, named inputs and options.function', async () => {
    const builder = new halrt.ModuleBuilder('two')
      .executable('k', { local: { builtin: true }, cuda: { builtin: true } })
      .function('double', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] }))
      .function('neg', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
        .dispatch('k.sub_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] }));
    for (const module of [builder, builder.toObject()]) {
      const result = await halrt.compare(module, { x: [1, 2, 3] }, { function: 'neg', devices });
      assert.strictEqual(result.agree, true);
      assert.strictEqual(result.function, 'two.neg');
      assert.deepStrictEqual(result.summary.map((s) => s.key), ['neg:0:sub_f32', 'outputs']);
    }
  });

  it("leaves out trace ops in 'summary' and 'health' mode (no elements to compare)", async () => {
    const builder = new halrt.ModuleBuilder('s')
      .executable('k', { local: { builtin: true }, cuda: { builtin: true } })
      .function('f', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] })
        .trace('health', ['y'], { mode: 'health' })
        .trace('summary', ['y'], { mode: 'summary' })
        .trace('full', ['y']));
    const result = await halrt.compare(builder, { x: [1, 2, 3] }, { devices });
    assert.strictEqual(result.agree, true);
    assert.deepStrictEqual(result.summary.map((s) => s.key), ['f:0:add_f32', 'full', 'outputs']);
  });

  describe('a divergence planted at op 1 (local kernel library vs the built-in on the CUDA test double)', () => {
    before(buildNativeFixtures);

    it('is found at op 1, p.add_f32, element [1][2], with its distances and a per-key summary', () => {
      const { exact, withinUlp, cpu, live } = onFakeCuda(`
        const inputs = [[[1, 2, 3], [4, 5, 6]], [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]];
        const devices = ['cuda', 'local-sync'];
        const exact = await halrt.compare(planted, inputs, { devices, rtol: 0, atol: 0 });
        const withinUlp = await halrt.compare(planted, inputs, { devices, rtol: 0, atol: 0, ulps: 1 });
        const cpu = await halrt.compare(planted, inputs, { devices: ['local-sync', 'local-task'], rtol: 0, atol: 0 });
        for (let i = 0; i < 200 && halrt.liveObjects().device; ++i) await new Promise((r) => setTimeout(r, 10));
        print({ exact, withinUlp, cpu, live: halrt.liveObjects() });`);
      assert.strictEqual(exact.agree, false);
      const ulp = 2 ** -21; // one ULP of 7 in f32
      assert.deepStrictEqual(exact.first, {
        devices: ['cuda', 'local-sync'],
        what: 'value',
        message: 't[1][2] is 7 on cuda but 7.000000476837158 on local-sync',
        key: 'main:1:add_f32',
        function: 'planted.main',
        op: 1,
        kernel: 'add_f32',
        tensor: 't',
        dtype: 'f32',
        index: [1, 2],
        values: [7, 7 + ulp],
        abs: ulp,
        rel: ulp / 7,
        ulps: 1,
      });
      assert.deepStrictEqual(exact.summary.map((s) => [s.key, s.mismatches, s.maxUlps]), [
        ['main:0:add_f32', 0, 0], ['main:1:add_f32', 1, 1], ['sum', 1, 1], ['main:3:mul_f32', 1, 1], ['outputs', 1, 1],
      ]);
      assert.strictEqual(withinUlp.agree, true);
      assert.strictEqual(cpu.agree, true);
      assert.strictEqual(live.device, 0);
      assert.strictEqual(live.instance, 0);
    });
  });

  describe('the tolerance rule', () => {
    it('|a - b| <= atol + rtol * |b| (b the reference device\'s element)', () => {
      assert.strictEqual(firstOf('f32', Float32Array.of(100), Float32Array.of(100.0009765625)), null);
      const far = firstOf('f32', Float32Array.of(100), Float32Array.of(100.001953125));
      assert.deepStrictEqual([far.abs, far.ulps], [0.001953125, 256]);
      assert.strictEqual(firstOf('f32', Float32Array.of(0), Float32Array.of(1e-9)), null);
      assert.ok(firstOf('f32', Float32Array.of(0), Float32Array.of(2e-8)));
      assert.strictEqual(firstOf('f32', Float32Array.of(0), Float32Array.of(2e-8), { atol: 1e-7 }), null);
    });

    it('NaN equals NaN only at the same element; infinities only of the same sign', () => {
      assert.strictEqual(firstOf('f32', Float32Array.of(NaN, 1), Float32Array.of(NaN, 1)), null);
      const nan = firstOf('f32', Float32Array.of(1, NaN), Float32Array.of(NaN, 1));
      assert.deepStrictEqual([nan.index, nan.values, nan.abs, nan.ulps], [[0], [1, NaN], NaN, NaN]);
      assert.strictEqual(firstOf('f32', Float32Array.of(Infinity, -Infinity), Float32Array.of(Infinity, -Infinity)), null);
      const inf = firstOf('f64', Float64Array.of(Infinity), Float64Array.of(-Infinity), { atol: 1e300 });
      assert.deepStrictEqual([inf.abs, inf.values], [Infinity, [Infinity, -Infinity]]);
      // The largest f32 is 1 ULP from Infinity, and still not close to it.
      const max = firstOf('f32', Float32Array.of(Infinity), Float32Array.of(3.4028234663852886e38), { ulps: 1 });
      assert.deepStrictEqual([max.abs, max.ulps], [Infinity, 1]);
    });

    it('+0 and -0 are equal (0 ULPs apart); ULPs count across zero', () => {
      assert.strictEqual(firstOf('f32', Float32Array.of(0), Float32Array.of(-0), { rtol: 0, atol: 0 }), null);
      const tiny = 2 ** -149;
      const across = firstOf('f32', Float32Array.of(tiny), Float32Array.of(-tiny), { rtol: 0, atol: 0 });
      assert.strictEqual(across.ulps, 2);
      assert.strictEqual(firstOf('f32', Float32Array.of(tiny), Float32Array.of(-tiny), { rtol: 0, atol: 0, ulps: 2 }), null);
    });

    it('ULPs of f32, f64 and of f16 and bf16 in their own formats (their data are bits)', () => {
      const f32 = firstOf('f32', Float32Array.of(1), Float32Array.of(1 + 2 ** -23 * 3), { rtol: 0, atol: 0 });
      assert.strictEqual(f32.ulps, 3);
      const f64 = firstOf('f64', Float64Array.of(-1), Float64Array.of(-1 - 2 ** -52), { rtol: 0, atol: 0 });
      assert.deepStrictEqual([f64.ulps, f64.abs], [1, 2 ** -52]);
      // f16 1 (0x3c00) and its next (0x3c01): 1 ULP of f16, far beyond rtol 1e-5.
      const f16 = firstOf('f16', Uint16Array.of(0x3c00), Uint16Array.of(0x3c01));
      assert.deepStrictEqual([f16.ulps, f16.values, f16.abs], [1, [1, 1 + 2 ** -10], 2 ** -10]);
      assert.strictEqual(firstOf('f16', Uint16Array.of(0x3c00), Uint16Array.of(0x3c01), { ulps: 1 }), null);
      // f16 -0 (0x8000) and the smallest positive subnormal: 1 ULP.
      assert.strictEqual(firstOf('f16', Uint16Array.of(0x8000), Uint16Array.of(0x0001), { rtol: 0, atol: 0 }).ulps, 1);
      const bf16 = firstOf('bf16', Uint16Array.of(0xbf80), Uint16Array.of(0xbf82));
      assert.deepStrictEqual([bf16.ulps, bf16.values], [2, [-1, -1 - 2 ** -6]]);
    });

    it('integers are exact unless atol or rtol is given; ulps does not apply to them', () => {
      const i32 = firstOf('i32', Int32Array.of(5), Int32Array.of(6), { ulps: 10 });
      assert.deepStrictEqual([i32.abs, i32.rel, i32.ulps, i32.values], [1, 0.2, null, [5, 6]]);
      assert.strictEqual(firstOf('i32', Int32Array.of(5), Int32Array.of(6), { atol: 1, integers: true }), null);
      // Within the default rtol (1e-5 * 1e6 = 10), yet a mismatch: the defaults are for floats.
      assert.strictEqual(firstOf('i32', Int32Array.of(1e6), Int32Array.of(1e6 + 1)).abs, 1);
      assert.strictEqual(firstOf('i32', Int32Array.of(1e6), Int32Array.of(1e6 + 1), { integers: true }), null);
      const i64 = firstOf('i64', BigInt64Array.of(2n ** 62n), BigInt64Array.of(2n ** 62n + 1n));
      assert.deepStrictEqual([i64.abs, i64.values], [1, [2n ** 62n, 2n ** 62n + 1n]]);
      assert.ok(firstOf('bool', Uint8Array.of(0), Uint8Array.of(1)));
      // 64-bit distances are compared with the bound exactly: 2^53 + 1 is
      // beyond atol 2^53, though it rounds to 2^53 as a Number.
      const far = firstOf('i64', BigInt64Array.of(0n), BigInt64Array.of(2n ** 53n + 1n), { rtol: 0, atol: 2 ** 53, integers: true });
      assert.deepStrictEqual(far && far.values, [0n, 2n ** 53n + 1n]);
      assert.strictEqual(firstOf('i64', BigInt64Array.of(0n), BigInt64Array.of(2n ** 53n), { rtol: 0, atol: 2 ** 53, integers: true }), null);
      assert.ok(firstOf('u64', BigUint64Array.of(2n ** 64n - 1n), BigUint64Array.of(2n ** 64n - 3n), { rtol: 0, atol: 1.5, integers: true }));
      // A bound past every double (rtol 1e300 times 2^64) takes every distance (it threw a RangeError).
      assert.strictEqual(firstOf('u64', BigUint64Array.of(2n ** 64n - 1n), BigUint64Array.of(0n), { rtol: 1e300, atol: 0, integers: true }), null);
      assert.strictEqual(firstOf('i64', BigInt64Array.of(-(2n ** 63n)), BigInt64Array.of(2n ** 63n - 1n), { rtol: 1e300, atol: 1e300, integers: true }), null);
    });

    it('a key with float and integer tensors has the float tensors\' largest ULP distance; a key with none, null', () => {
      const tol = { rtol: 0, atol: 0, ulps: 0, integers: false };
      const mixed = (f, n) => ({ key: 'k', function: 'm.f', op: null, tensors: [
        { name: 'n', dtype: 'i32', shape: [1], data: Int32Array.of(n) },
        { name: 'f', dtype: 'f32', shape: [1], data: Float32Array.of(f) },
      ] });
      const { summary } = compareTraces([mixed(1, 3)], [mixed(1 + 2 ** -23 * 2, 4)], ['ref', 'dev'], tol);
      assert.deepStrictEqual(summary.map((e) => [e.maxUlps, e.maxAbs, e.mismatches]), [[2, 1, 2]]);
      const ints = compareTraces([trace('i', 'i32', [1], Int32Array.of(1), 0)], [trace('i', 'i32', [1], Int32Array.of(1), 0)], ['ref', 'dev'], tol);
      assert.strictEqual(ints.summary[0].maxUlps, null);
    });

    it('reports the element index in every dimension, and the first divergence in program order', () => {
      const shape = [2, 3];
      const tol = { rtol: 0, atol: 0, ulps: 0, integers: false };
      const ref = [trace('a', 'f32', shape, new Float32Array(6), 0), trace('b', 'f32', shape, new Float32Array(6), 1)];
      const dev = [trace('a', 'f32', shape, Float32Array.of(0, 0, 0, 0, 0, 1), 0),
        trace('b', 'f32', shape, Float32Array.of(1, 1, 0, 0, 0, 0), 1)];
      const { first, summary } = compareTraces(ref, dev, ['ref', 'dev'], tol);
      assert.deepStrictEqual([first.key, first.index, first.op], ['a', [1, 2], 0]);
      assert.deepStrictEqual(summary.map((s) => [s.key, s.mismatches, s.maxAbs, s.elements]), [['a', 1, 1, 6], ['b', 2, 1, 6]]);
    });

    it('different keys, tensors, dtypes, shapes or trace counts are divergences naming what differs', () => {
      const tol = { rtol: 0, atol: 0, ulps: 0, integers: false };
      const names = ['ref', 'dev'];
      const one = (key, dtype = 'f32', shape = [1]) => trace(key, dtype, shape, dtype === 'f32' ? new Float32Array(shape[0]) : new Int32Array(shape[0]));
      const cases = [
        [[one('a')], [one('b')], 'structure', "key 'a' on ref but 'b' on dev"],
        [[one('a')], [one('a', 'i32')], 'structure', 'tensor 0: dtype f32 on ref but i32 on dev'],
        [[one('a', 'f32', [2])], [one('a')], 'structure', 'tensor v: shape [2] on ref but [1] on dev'],
        [[one('a'), one('c')], [one('a')], 'count', '2 traces on ref but 1 on dev'],
        [[one('a')], [{ ...one('a'), tensors: [] }], 'structure', '1 tensors on ref but 0 on dev'],
      ];
      for (const [ref, dev, what, message] of cases) {
        const { first } = compareTraces(ref, dev, names, tol);
        assert.deepStrictEqual([first.what, first.message], [what, message]);
      }
    });
  });

  describe('bad arguments', () => {
    const inputs = () => Object.values(mlpInputs());

    it('options.devices: not an Array of at least two URIs, or a device that cannot be made', async () => {
      // eslint-disable-next-line no-sparse-arrays
      for (const bad of [['local-sync'], 'local-sync,local-task', [1, 2], [], new Array(2), ['local-sync', , 'local-task']]) {
        await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { devices: bad }), 'INVALID_ARGUMENT', 'options.devices must be an Array of at least 2');
      }
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { devices: ['local-sync', 'nonesuch'] }),
        'NOT_FOUND', "halrt.compare: options.devices[1] 'nonesuch': unknown driver");
    });

    it('options.rtol, atol and ulps: negative, not finite, not numbers; ulps not an integer', async () => {
      for (const [name, value] of [['rtol', -1], ['atol', NaN], ['atol', Infinity], ['rtol', '0.1'], ['ulps', 1.5], ['ulps', -1]]) {
        await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { [name]: value }), 'INVALID_ARGUMENT', `options.${name} must be`);
      }
      // An integer past 2^53 - 1 is not one a Number holds exactly.
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { ulps: 2 ** 60 }), 'INVALID_ARGUMENT', 'options.ulps must be an integer in [0, 2^53 - 1]');
    });

    it('an unknown option or function, options not an object, a bad module', async () => {
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { device: 'cuda' }), 'INVALID_ARGUMENT', "unknown option 'device'");
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { function: 'nope' }), 'NOT_FOUND', "options.function 'nope': module 'mlp' has main");
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), { function: 5 }), 'INVALID_ARGUMENT', "options.function must be a function name (got 5): module 'mlp' has main");
      const none = { format: 'halrt.module/1', name: 'z', functions: {} };
      await assertRejectsHalrt(halrt.compare(none, []), 'INVALID_ARGUMENT', "options.function is required: module 'z' has no functions");
      await assertRejectsHalrt(halrt.compare(EXAMPLE, inputs(), null), 'INVALID_ARGUMENT', 'options must be an object');
      await assertRejectsHalrt(halrt.compare(42, inputs()), 'INVALID_ARGUMENT', 'module must be a module file path');
      await assertRejectsHalrt(halrt.compare(Buffer.from('{}'), inputs()), 'INVALID_ARGUMENT', 'module must be a module file path, a ModuleBuilder or a module description object (got a Buffer');
      await assertRejectsHalrt(halrt.compare(path.join(ROOT, 'nonesuch.json'), inputs()), 'NOT_FOUND', 'nonesuch.json');
    });

    it('inputs: BufferViews (bound to one device) and data a device rejects', async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      const view = device.tensor(new Float32Array(32), [4, 8]);
      try {
        await assertRejectsHalrt(halrt.compare(EXAMPLE, [view, ...inputs().slice(1)]), 'INVALID_ARGUMENT', 'inputs[0] must be host data');
      } finally {
        view.close();
        device.close();
        instance.close();
      }
      await assertRejectsHalrt(halrt.compare(EXAMPLE, [new Float32Array(3), ...inputs().slice(1)]), 'INVALID_ARGUMENT',
        'halrt.compare: on local-sync: ');
      // Only an Array or a plain object holds inputs; before any device is made.
      for (const bad of [new Float32Array(4), new Map(), new (class Inputs {})(), 'x', null]) {
        await assertRejectsHalrt(halrt.compare(EXAMPLE, bad), 'INVALID_ARGUMENT', 'halrt.compare: inputs must be an Array or an object of host data');
      }
    });

    it('a device the module has no executable for fails naming the device, and nothing is left open', async () => {
      const baseline = await liveBaseline();
      const builder = new halrt.ModuleBuilder('m').executable('k', { local: { library: path.join(ROOT, 'nonesuch.so') } })
        .function('f', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [2] }));
      const error = await halrt.compare(builder, [Float32Array.of(1, 2)], { devices: ['local-sync', 'local-task'] }).then(
        () => assert.fail('compare resolved'), (e) => e);
      assert.ok(error instanceof halrt.HalrtError, String(error));
      assert.match(error.message, /^halrt\.compare: on local-sync: /);
      assert.ok(error.cause instanceof halrt.HalrtError);
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
    });
  });
});

describe('halrt.compare: infinite relative distances and module arguments', function () {
  this.timeout(60000);

  it('a finite value or the opposite infinity against an infinite reference is Infinity apart, not NaN', () => {
    const tol = { rtol: 1e-5, atol: 1e-8, ulps: 0, integers: false };
    for (const dtype of ['f32', 'f64']) {
      const Type = dtype === 'f32' ? Float32Array : Float64Array;
      for (const [reference, other] of [[Infinity, 1], [Infinity, -Infinity], [-Infinity, 0], [-Infinity, Infinity]]) {
        const shape = [1];
        const { first, summary } = compareTraces([trace('t', dtype, shape, Type.of(reference))], [trace('t', dtype, shape, Type.of(other))],
          ['ref', 'dev'], tol);
        assert.deepStrictEqual([first.values, first.abs, first.rel], [[reference, other], Infinity, Infinity], `${dtype} ${reference} vs ${other}`);
        assert.strictEqual(summary[0].maxRel, Infinity, `${dtype} ${reference} vs ${other}`);
      }
    }
    // Equal infinities are 0 apart; a NaN against a number stays NaN.
    assert.strictEqual(firstOf('f32', Float32Array.of(Infinity), Float32Array.of(Infinity)), null);
    assert.ok(Number.isNaN(firstOf('f32', Float32Array.of(Infinity), Float32Array.of(NaN)).rel));
  });

  it('a URL, a Map or a Date as the module is refused naming halrt.compare and module, before any device is made', async () => {
    const baseline = await liveBaseline();
    const file = new URL(`file://${EXAMPLE}`);
    await assertRejectsHalrt(halrt.compare(file, Object.values(mlpInputs())), 'INVALID_ARGUMENT',
      'halrt.compare: module must be a module file path, a ModuleBuilder or a module description object (got an URL; a file URL is given as its path');
    for (const bad of [new Map(), new Date(0)]) {
      await assertRejectsHalrt(halrt.compare(bad, Object.values(mlpInputs())), 'INVALID_ARGUMENT',
        'halrt.compare: module must be a module file path, a ModuleBuilder or a module description object (got a');
    }
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });
});

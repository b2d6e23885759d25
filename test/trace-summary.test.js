'use strict';
// Trace modes (HalModule traceMode, a trace op's mode): 'summary' and
// 'health' traces deliver a summary per tensor computed on the device, equal
// to a host computation over the same tensor traced in 'full' mode; the
// mode's precedence; nonFinite 'reject' from summaries; the sinks (stats,
// stdio, Chrome trace counters, npy); bad values.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const util = require('util');
const { spawnSync } = require('child_process');
const halrt = require('..');
const half = require('../lib/half');
const {
  DEVICE_URIS, assertThrowsHalrt, makeProgram, randomFloats, sampleData,
} = require('./helpers');

const DTYPES = ['f16', 'bf16', 'f32', 'f64', 'i8', 'u8', 'i16', 'u16', 'i32', 'u32', 'i64', 'u64', 'bool'];

/** Element i of a full trace's data as the double a summary folds in. */
function elementValue(data, dtype, i) {
  if (dtype === 'f16') return half.decode(half.F16, data[i]);
  if (dtype === 'bf16') return half.decode(half.BF16, data[i]);
  if (dtype === 'bool') return data[i] ? 1 : 0;
  return Number(data[i]); // 64-bit integers rounded to the nearest double
}

/** The summary of a full trace's tensor, computed here (the reference). */
function hostSummary(data, dtype) {
  const s = { count: data.length, nanCount: 0, posInfCount: 0, negInfCount: 0, zeroCount: 0 };
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let sumSquares = 0;
  let sumAbs = 0;
  let finite = 0;
  for (let i = 0; i < data.length; ++i) {
    const x = elementValue(data, dtype, i);
    if (Number.isNaN(x)) ++s.nanCount;
    else if (x === Infinity) ++s.posInfCount;
    else if (x === -Infinity) ++s.negInfCount;
    else {
      if (x === 0) ++s.zeroCount;
      min = Math.min(min, x);
      max = Math.max(max, x);
      sum += x;
      sumSquares += x * x;
      sumAbs += Math.abs(x);
      ++finite;
    }
  }
  s.min = finite ? min : NaN;
  s.max = finite ? max : NaN;
  s.mean = finite ? sum / finite : NaN;
  s.l2 = Math.sqrt(sumSquares);
  return { summary: s, meanScale: finite ? sumAbs / finite : 0 };
}

// Sums may be folded in another order on the device (chunks, threads,
// blocks): mean and l2 agree to this relative tolerance (of the mean of the
// magnitudes for the mean, which may cancel; of l2 itself for l2), and are
// equal when not finite. Counts, min and max are exact.
const RTOL = 1e-12;

function assertNear(actual, expected, scale, what) {
  if (!Number.isFinite(expected)) {
    assert.ok(Object.is(actual, expected), `${what}: got ${actual}, expected ${expected}`);
    return;
  }
  assert.ok(Math.abs(actual - expected) <= RTOL * scale, `${what}: got ${actual}, expected ${expected} (within ${RTOL} of ${scale})`);
}

/** Checks a delivered summary (of `mode`) against the host computation over `data`. */
function assertSummaryOf(summary, data, dtype, mode, what) {
  const { summary: want, meanScale } = hostSummary(data, dtype);
  const counts = ['count', 'nanCount', 'posInfCount', 'negInfCount'];
  if (mode === 'health') {
    assert.deepStrictEqual(Object.keys(summary), ['mode', ...counts], what);
  } else {
    assert.deepStrictEqual(Object.keys(summary), ['mode', ...counts, 'zeroCount', 'min', 'max', 'mean', 'l2'], what);
    assert.strictEqual(summary.zeroCount, want.zeroCount, `${what}.zeroCount`);
    // min and max are exact; a zero is +0 (-0 is folded in as +0).
    assert.ok(Object.is(summary.min, want.min === 0 ? 0 : want.min), `${what}.min: ${summary.min} vs ${want.min}`);
    assert.ok(Object.is(summary.max, want.max === 0 ? 0 : want.max), `${what}.max: ${summary.max} vs ${want.max}`);
    if (Number.isNaN(want.mean)) assert.ok(Number.isNaN(summary.mean), `${what}.mean`);
    else assertNear(summary.mean, want.mean, meanScale, `${what}.mean`);
    assertNear(summary.l2, want.l2, want.l2, `${what}.l2`);
  }
  assert.strictEqual(summary.mode, mode, `${what}.mode`);
  for (const field of counts) assert.strictEqual(summary[field], want[field], `${what}.${field}`);
}

function recorder() {
  const calls = [];
  return { calls, sink: (key, tensors, info) => calls.push({ key, tensors, info }) };
}

/** A function m.f copying x to y and tracing y in every mode (keys 'full', 'summary', 'health'). */
function tracedCopy(uri, dtype, count, halOptions) {
  return makeProgram(uri, (b) => b.function('f', (f) => f
    .input('x', dtype, [count]).output('y', dtype, [count])
    .copy('x', 'y')
    .trace('full', ['y'], { mode: 'full' })
    .trace('summary', ['y'], { mode: 'summary' })
    .trace('health', ['y'], { mode: 'health' })), { hal: halOptions });
}

for (const uri of DEVICE_URIS) {
  describe(`trace modes (${uri})`, function () {
    this.timeout(60000);

    for (const dtype of DTYPES) {
      it(`summary and health traces of ${dtype} equal a host computation over the same tensor traced in full`, async () => {
        const { calls, sink } = recorder();
        const count = 1000;
        const p = tracedCopy(uri, dtype, count, { debugSink: sink });
        const x = p.device.tensor(sampleData(dtype, count, 3), [count], dtype);
        try {
          const [y] = await p.lookup('f').invoke([x]);
          y.close();
          assert.deepStrictEqual(calls.map((c) => [c.key, c.info.mode]), [['full', 'full'], ['summary', 'summary'], ['health', 'health']]);
          const [full, summary, health] = calls.map((c) => c.tensors[0]);
          assert.deepStrictEqual(Object.keys(summary).sort(), ['dtype', 'name', 'shape', 'summary']);
          assert.deepStrictEqual([summary.name, summary.dtype, summary.shape], ['y', dtype, [count]]);
          assert.deepStrictEqual([health.name, health.dtype, health.shape], ['y', dtype, [count]]);
          assertSummaryOf(summary.summary, full.data, dtype, 'summary', `${dtype} summary`);
          assertSummaryOf(health.summary, full.data, dtype, 'health', `${dtype} health`);
        } finally {
          x.close();
          p.close();
        }
      });
    }

    it('a summary over many chunks (300001 f32 values, some NaN and Inf) equals the host computation', async () => {
      const { calls, sink } = recorder();
      const count = 300001;
      const p = tracedCopy(uri, 'f32', count, { debugSink: sink });
      const values = randomFloats(count, 7, 1000);
      for (const [i, v] of [[5, NaN], [70000, Infinity], [140000, -Infinity], [299999, NaN], [12, 0]]) values[i] = v;
      const x = p.device.tensor(values, [count]);
      try {
        (await p.lookup('f').invoke([x]))[0].close();
        const [full, summary, health] = calls.map((c) => c.tensors[0]);
        assertSummaryOf(summary.summary, full.data, 'f32', 'summary', 'summary');
        assertSummaryOf(health.summary, full.data, 'f32', 'health', 'health');
        assert.deepStrictEqual([health.summary.nanCount, health.summary.posInfCount, health.summary.negInfCount], [2, 1, 1]);
      } finally {
        x.close();
        p.close();
      }
    });

    it('an empty tensor summarises to zero counts and NaN figures', async () => {
      const { calls, sink } = recorder();
      const p = tracedCopy(uri, 'f32', 0, { debugSink: sink });
      const x = p.device.tensor(new Float32Array(0), [0]);
      try {
        (await p.lookup('f').invoke([x]))[0].close();
        const { summary } = calls[1].tensors[0];
        assert.deepStrictEqual([summary.count, summary.nanCount, summary.zeroCount], [0, 0, 0]);
        assert.ok(Number.isNaN(summary.min) && Number.isNaN(summary.max) && Number.isNaN(summary.mean));
        assert.strictEqual(summary.l2, 0);
      } finally {
        x.close();
        p.close();
      }
    });

    it("traceMode sets traceDispatches traces and trace ops without a mode; an op's mode overrides it", async () => {
      const { calls, sink } = recorder();
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [4]).output('y', 'f32', [4])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] })
        .trace('default', ['y'])
        .trace('own', ['y'], { mode: 'full' })
        .trace('summarised', ['x', 'y'], { mode: 'summary' })), { hal: { debugSink: sink, traceDispatches: true, traceMode: 'health' } });
      const x = p.device.tensor(Float32Array.from([1, -2, NaN, Infinity]), [4]);
      try {
        assert.strictEqual(p.hal.traceMode, 'health');
        (await p.lookup('f').invoke([x]))[0].close();
        assert.deepStrictEqual(calls.map((c) => [c.key, c.info.mode, c.info.op]), [
          ['f:0:add_f32', 'health', 0], ['default', 'health', 1], ['own', 'full', 2], ['summarised', 'summary', 3]]);
        assert.deepStrictEqual(calls[0].tensors[0].summary, { mode: 'health', count: 4, nanCount: 1, posInfCount: 1, negInfCount: 0 });
        assert.deepStrictEqual(Array.from(calls[2].tensors[0].data), [2, -4, NaN, Infinity]);
        assert.deepStrictEqual(calls[3].tensors.map((t) => [t.name, t.summary.min, t.summary.max, t.summary.l2]),
          [['x', -2, 1, Math.sqrt(5)], ['y', -4, 2, Math.sqrt(20)]]);
      } finally {
        x.close();
        p.close();
      }
    });

    it("traceMode defaults to 'full'", () => {
      const p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'f32', [1]).fill('y', 1)));
      try {
        assert.strictEqual(p.hal.traceMode, 'full');
        assert.match(util.inspect(p.hal), /traceMode: 'full'/);
      } finally {
        p.close();
      }
    });

    it("nonFinite 'reject' rejects from a health summary, naming the key, the tensor and the counts, before the sink sees it", async () => {
      const { calls, sink } = recorder();
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [6]).output('y', 'f32', [6])
        .copy('x', 'y')
        .trace('checked', ['y'])), { hal: { debugSink: sink, traceMode: 'health', nonFinite: 'reject' } });
      const fine = p.device.tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [6]);
      const bad = p.device.tensor(Float32Array.from([NaN, 1, -Infinity, NaN, Infinity, NaN]), [6]);
      try {
        (await p.lookup('f').invoke([fine]))[0].close();
        assert.strictEqual(calls.length, 1);
        await assert.rejects(p.lookup('f').invoke([bad]), (error) => {
          assert.ok(error instanceof halrt.HalrtError);
          assert.strictEqual(error.code, 'ABORTED');
          assert.match(error.message, /trace 'checked': tensor 'y' holds non-finite values \(3 NaN, 1 \+Inf, 1 -Inf of 6 elements\)/);
          return true;
        });
        assert.strictEqual(calls.length, 1);
      } finally {
        closeViews(fine, bad);
        p.close();
      }
    });

    it('halrt.sinks.stats reports the summary of summary and health traces', async () => {
      const calls = [];
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'i32', [5]).output('y', 'i32', [5])
        .copy('x', 'y')
        .trace('s', ['y'], { mode: 'summary' })
        .trace('h', ['y'], { mode: 'health' })), { hal: { debugSink: halrt.sinks.stats((key, stats, info) => calls.push({ key, stats, info })) } });
      const x = p.device.tensor(Int32Array.from([4, -7, 0, 9, 1]), [5]);
      try {
        (await p.lookup('f').invoke([x]))[0].close();
        assert.deepStrictEqual(calls.map((c) => [c.key, c.info.mode]), [['s', 'summary'], ['h', 'health']]);
        assert.deepStrictEqual(calls[0].stats, [{ name: 'y', dtype: 'i32', shape: [5], count: 5, min: -7, max: 9, mean: 1.4, nanCount: 0, infCount: 0 }]);
        assert.deepStrictEqual(calls[1].stats, [{ name: 'y', dtype: 'i32', shape: [5], count: 5, min: NaN, max: NaN, mean: NaN, nanCount: 0, infCount: 0 }]);
      } finally {
        x.close();
        p.close();
      }
    });

    it('halrt.sinks.chromeTrace writes summary and health traces as counter events too', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-summary-'));
      const file = path.join(dir, 'trace.json');
      const chrome = halrt.sinks.chromeTrace(file);
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [3]).output('y', 'f32', [3])
        .copy('x', 'y')
        .trace('s', ['y'], { mode: 'summary' })
        .trace('h', ['x', 'y'], { mode: 'health' })
        .trace('full', ['y'])), { hal: { debugSink: chrome } });
      const x = p.device.tensor(Float32Array.from([3, NaN, -4]), [3]);
      try {
        (await p.lookup('f').invoke([x]))[0].close();
        chrome.close();
        const events = JSON.parse(fs.readFileSync(file, 'utf8'));
        const instants = events.filter((e) => e.ph === 'i').map((e) => e.name);
        assert.deepStrictEqual(instants, ['s', 'h', 'full']);
        const counters = events.filter((e) => e.ph === 'C');
        assert.deepStrictEqual(counters.map((e) => [e.name, e.cat, e.args]), [
          ['s/y', 'summary', { count: 3, nanCount: 1, posInfCount: 0, negInfCount: 0, zeroCount: 0, min: -4, max: 3, mean: -0.5, l2: 5 }],
          ['h/x', 'summary', { count: 3, nanCount: 1, posInfCount: 0, negInfCount: 0 }],
          ['h/y', 'summary', { count: 3, nanCount: 1, posInfCount: 0, negInfCount: 0 }],
        ]);
        const instant = events.find((e) => e.ph === 'i' && e.name === 's');
        assert.strictEqual(counters[0].ts, instant.ts);
      } finally {
        chrome.close();
        x.close();
        p.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('halrt.sinks.npy writes nothing for summary and health traces', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-summary-npy-'));
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [3]).output('y', 'f32', [3])
        .copy('x', 'y')
        .trace('h', ['y'], { mode: 'health' })
        .trace('full', ['y'])), { hal: { debugSink: halrt.sinks.npy(dir) } });
      const x = p.device.tensor(Float32Array.from([1, 2, 3]), [3]);
      try {
        (await p.lookup('f').invoke([x]))[0].close();
        const lines = fs.readFileSync(path.join(dir, 'index.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
        assert.deepStrictEqual(lines.map((l) => l.key), ['full']);
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), [lines[0].file, 'index.jsonl'].sort());
      } finally {
        x.close();
        p.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('halrt.sinks.stdio prints the summary of summary and health traces', () => {
      const source = `
        const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
        (async () => {
          const instance = new halrt.Instance();
          const device = instance.createDevice(${JSON.stringify(uri)});
          const hal = new halrt.HalModule(instance, device, { debugSink: halrt.sinks.stdio(), traceMode: 'summary' });
          const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
            .function('f', (f) => f.input('x', 'f32', [2, 3]).output('y', 'f32', [2, 3])
              .copy('x', 'y').trace('s', ['y']).trace('h', ['y'], { mode: 'health' }))
            .build(instance);
          const context = new halrt.Context(instance, [hal, module]);
          const x = device.tensor(Float32Array.from([0.1, -1.5, 0, NaN, 3, -Infinity]), [2, 3]);
          const [y] = await context.lookupFunction('m.f').invoke([x]);
          y.close();
        })();
      `;
      const result = spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 20000 });
      assert.strictEqual(result.status, 0, result.stderr);
      const mean = (Math.fround(0.1) - 1.5 + 3) / 4;
      const l2 = Math.sqrt(Math.fround(0.1) ** 2 + 1.5 ** 2 + 9);
      assert.strictEqual(result.stdout, [
        '=== s (m.f op 1, invocation 1) ===',
        `y: 2x3xf32 summary: count=6 nan=1 +inf=0 -inf=1 zero=1 min=-1.5 max=3 mean=${halrt.formatNumber(mean, 'f64')} l2=${halrt.formatNumber(l2, 'f64')}`,
        '=== h (m.f op 2, invocation 1) ===',
        'y: 2x3xf32 health: count=6 nan=1 +inf=0 -inf=1',
        '',
      ].join('\n'));
    });
  });
}

// chain_health_f32's steps over x [n] with y [2·3] read as a scale and a
// shift per channel (3 channels of n/3), then reciprocal, sqrt, · x, neg:
// the step constants, exact ops that make infinities and NaN.
const HEALTH_STEPS = [[18 | (1 << 8), 0], [16 | (3 << 8), 3], [7, 0], [4, 0], [18, 0], [5, 0]];
function chainConstants(n, steps) {
  const words = steps.flatMap(([op, alpha]) => [op, { f32: alpha }, { f32: 0 }]);
  while (words.length < 18) words.push(0, { f32: 0 }, { f32: 0 });
  return [steps.length, 1, 1, 1, 1, 3, n / 3, 0, 0, 0, 0, 1, 0, ...words];
}

for (const uri of DEVICE_URIS) {
  describe(`health traces from chain_health_f32's counts (${uri})`, function () {
    this.timeout(60000);

    it('report what a health trace of each step\'s value reports, in any grid; the reported values are never allocated', async () => {
      const n = 3 * 700;
      const { calls, sink } = recorder();
      // f: the counted chain, its six steps reported from the counts; g:
      // the chain cut after each step, each value traced in health mode.
      const p = makeProgram(uri, (b) => b
        .function('f', (f) => {
          f.input('x', 'f32', [n]).input('y', 'f32', [6]).output('out', 'f32', [n]).local('counts', 'u32', [5, 6, 3]);
          // Never written: a [2^31 - 1] f32 (8 GiB) only the trace names.
          f.local('huge', 'f32', [2 ** 31 - 1]);
          for (let j = 0; j < 5; ++j) f.local(`s${j}`, 'f32', [n]);
          f.dispatch('k.chain_health_f32', { workgroups: [5], bindings: ['x', 'y', 'out', 'counts'], constants: chainConstants(n, HEALTH_STEPS) });
          const values = ['s0', 's1', 's2', 's3', 's4', 'out'];
          f.trace('steps', values, { mode: 'health', counts: values.map((_, step) => ({ value: 'counts', step })) });
          return f.trace('huge', ['huge'], { mode: 'health', counts: [{ value: 'counts', step: 2 }] });
        })
        .function('g', (f) => {
          f.input('x', 'f32', [n]).input('y', 'f32', [6]).output('out', 'f32', [n]);
          for (let j = 0; j < 5; ++j) f.local(`s${j}`, 'f32', [n]);
          const values = ['s0', 's1', 's2', 's3', 's4', 'out'];
          values.forEach((v, j) => f.dispatch('k.chain_f32', { workgroups: [2], bindings: ['x', 'y', v], constants: chainConstants(n, HEALTH_STEPS.slice(0, j + 1)) }));
          return f.trace('steps', values, { mode: 'health' });
        }), { hal: { debugSink: sink } });
      const x = randomFloats(n, 5, 3);
      x[0] = 0;
      x[1] = -0;
      x[2] = Infinity;
      x[3] = NaN;
      x[700] = -Infinity;
      const inputs = [p.device.tensor(x, [n]), p.device.tensor(Float32Array.of(2, 0, -1, 0.5, 1e-30, Infinity), [6])];
      try {
        for (const fn of ['f', 'g']) (await p.lookup(fn).invoke(inputs)).forEach((o) => o.close());
        const [counted, huge, scanned] = calls;
        assert.deepStrictEqual(counted.info.mode, 'health');
        assert.deepStrictEqual(counted.tensors.map((t) => [t.name, t.dtype, t.shape]), scanned.tensors.map((t) => [t.name, t.dtype, t.shape]));
        assert.deepStrictEqual(counted.tensors.map((t) => t.summary), scanned.tensors.map((t) => t.summary));
        const nonFinite = scanned.tensors.map(({ summary: s }) => s.nanCount + s.posInfCount + s.negInfCount);
        assert.ok(nonFinite.every((c) => c > 0) && new Set(nonFinite).size > 2, `counts ${nonFinite}`);
        assert.deepStrictEqual([huge.tensors[0].name, huge.tensors[0].shape, huge.tensors[0].summary.count], ['huge', [2 ** 31 - 1], 2 ** 31 - 1]);
        assert.strictEqual(huge.tensors[0].summary.nanCount, counted.tensors[2].summary.nanCount);
      } finally {
        closeViews(...inputs);
        p.close();
      }
    });
  });
}

describe('module descriptions as objects', () => {
  it('keep -0 in constants (JSON.stringify writes 0), also through ModuleBuilder.toObject', async () => {
    const instance = new halrt.Instance();
    try {
      const device = instance.createDevice('local-sync');
      const hal = new halrt.HalModule(instance, device);
      // y = x · alpha: 1 · -0 is -0, 1 · +0 is +0.
      const description = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('x', 'f32', [1]).output('y', 'f32', [1])
          .dispatch('k.chain_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 18 | (2 << 8), { f32: -0 }, -0, ...new Array(15).fill(0)] }))
        .toObject();
      assert.ok(Object.is(description.functions.f.body[0].constants[14].f32, -0));
      const module = halrt.Module.fromObject(instance, description);
      const context = new halrt.Context(instance, [hal, module]);
      const [y] = await context.lookupFunction('m.f').invoke([Float32Array.of(1)], { read: true });
      assert.ok(Object.is(y[0], -0), `${y[0]}`);
    } finally {
      instance.close();
    }
  });

  it('locals no op uses take no memory, however large: even a sum past 2^64 bytes runs', async () => {
    const instance = new halrt.Instance();
    try {
      const device = instance.createDevice('local-sync');
      const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
          .local('a', 'f32', [2 ** 31 - 1, 2 ** 31 - 1]).local('b', 'f32', [2 ** 31 - 1, 2 ** 31 - 1])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }))
        .build(instance);
      const context = new halrt.Context(instance, [new halrt.HalModule(instance, device), module]);
      const [y] = await context.lookupFunction('m.f').invoke([Float32Array.of(1, 2, 3, 4)], { read: true });
      assert.deepStrictEqual(Array.from(y), [2, 4, 6, 8]);
    } finally {
      instance.close();
    }
  });
});

describe("trace op counts: bad values name the field", () => {
  it('counts need mode health, one entry per value, a u32 [W, 6, 3] value, a step 0 to 5 and f32 values', () => {
    const instance = new halrt.Instance();
    const build = (trace, extra = []) => halrt.Module.fromObject(instance, {
      format: 'halrt.module/1',
      name: 'm',
      functions: {
        f: {
          inputs: [],
          outputs: [{ name: 'y', dtype: 'f32', shape: [4] }],
          locals: [{ name: 'c', dtype: 'u32', shape: [2, 6, 3] }, { name: 'i', dtype: 'i32', shape: [4] }, ...extra],
          body: [{ op: 'trace', key: 'k', values: ['y'], mode: 'health', counts: [{ value: 'c', step: 0 }], ...trace }],
        },
      },
    });
    try {
      build({}).close();
      const field = 'functions.f.body[0].counts';
      assertThrowsHalrt(() => build({ mode: undefined }), 'INVALID_ARGUMENT', `${field}: counts report health only: the trace needs "mode": "health"`);
      assertThrowsHalrt(() => build({ mode: 'summary' }), 'INVALID_ARGUMENT', `${field}: counts report health only`);
      assertThrowsHalrt(() => build({ counts: [] }), 'INVALID_ARGUMENT', `${field}: must have one entry per value (1), not 0`);
      assertThrowsHalrt(() => build({ counts: {} }), 'INVALID_ARGUMENT', field);
      assertThrowsHalrt(() => build({ counts: [{ value: 'c', step: 0, x: 1 }] }), 'INVALID_ARGUMENT', `${field}[0]: unknown field 'x'`);
      assertThrowsHalrt(() => build({ counts: [{ value: 'nope', step: 0 }] }), 'NOT_FOUND', `${field}[0].value: unknown value 'nope'`);
      assertThrowsHalrt(() => build({ counts: [{ value: 'i', step: 0 }] }), 'INVALID_ARGUMENT', `${field}[0].value: 'i' must be u32 of shape [W, 6, 3]`);
      assertThrowsHalrt(() => build({ counts: [{ value: 'd', step: 0 }] }, [{ name: 'd', dtype: 'u32', shape: [2, 6, 2] }]), 'INVALID_ARGUMENT', `${field}[0].value: 'd' must be u32 of shape [W, 6, 3]`);
      assertThrowsHalrt(() => build({ counts: [{ value: 'd', step: 0 }] }, [{ name: 'd', dtype: 'u32', shape: [0, 6, 3] }]), 'INVALID_ARGUMENT', `${field}[0].value: 'd' must be u32`);
      for (const step of [-1, 6, 1.5, '1', undefined]) {
        assertThrowsHalrt(() => build({ counts: [{ value: 'c', step }] }), 'INVALID_ARGUMENT', `${field}[0].step: must be an integer in [0, 5]`);
      }
      assertThrowsHalrt(() => build({ values: ['i'] }), 'INVALID_ARGUMENT', `${field}[0]: reports 'i', which is i32: counts are of f32 chain steps`);
    } finally {
      instance.close();
    }
  });
});

describe('trace modes: bad values', () => {
  it('HalModule refuses a traceMode that is not full, summary or health, naming options.traceMode', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      for (const traceMode of ['stats', 'Full', 1, null, true]) {
        assertThrowsHalrt(() => new halrt.HalModule(instance, device, { traceMode }), 'INVALID_ARGUMENT', 'options.traceMode');
      }
    } finally {
      device.close();
      instance.close();
    }
  });

  it("ModuleBuilder's trace() takes its options as an object", () => {
    const f = () => new halrt.ModuleBuilder('m').function('f', (b) => b.output('y', 'f32', [1]).trace('k', ['y'], null));
    assertThrowsHalrt(f, 'INVALID_ARGUMENT', 'FunctionBuilder.trace: options must be an object');
    const typo = () => new halrt.ModuleBuilder('m').function('f', (b) => b.output('y', 'f32', [1]).trace('k', ['y'], { Mode: 'health' }));
    assertThrowsHalrt(typo, 'INVALID_ARGUMENT', "FunctionBuilder.trace: unknown option 'Mode' (known: mode, counts)");
    const body = new halrt.ModuleBuilder('m').function('f', (b) => b.output('y', 'f32', [1])
      .trace('a', ['y']).trace('b', ['y'], {}).trace('c', ['y'], { mode: 'health' })).toObject().functions.f.body;
    assert.deepStrictEqual(body, [
      { op: 'trace', key: 'a', values: ['y'] }, { op: 'trace', key: 'b', values: ['y'] }, { op: 'trace', key: 'c', values: ['y'], mode: 'health' }]);
  });

  it("a trace op's mode must be full, summary or health: the error names the field", () => {
    const instance = new halrt.Instance();
    const build = (mode) => halrt.Module.fromObject(instance, {
      format: 'halrt.module/1',
      name: 'm',
      functions: { f: { inputs: [], outputs: [{ name: 'y', dtype: 'f32', shape: [1] }], body: [{ op: 'fill', target: 'y', value: 1 }, { op: 'trace', key: 'k', values: ['y'], mode }] } },
    });
    try {
      assertThrowsHalrt(() => build('stats'), 'INVALID_ARGUMENT', "functions.f.body[1].mode: unknown trace mode 'stats' (expected one of full, summary, health)");
      assertThrowsHalrt(() => build(3), 'INVALID_ARGUMENT', 'functions.f.body[1].mode');
      build('health').close();
    } finally {
      instance.close();
    }
  });
});

function closeViews(...views) {
  for (const view of views) view.close();
}

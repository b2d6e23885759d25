'use strict';
// info.sequence numbers the invocations of each context: 1 for its first,
// then 2, 3, ... over all its functions, whatever other contexts (sharing
// the HalModule, its sink or the module) do. `every` counts in the same
// numbers, and so do the native sinks and the error messages.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { BUILTIN, DEVICE_URIS, closeAll, npyFileName, readNpyIndex } = require('./helpers');

/** A module with functions f and g, each adding 1 to x and tracing y. */
function buildModule(instance, name = 'm') {
  return new halrt.ModuleBuilder(name).executable('k', BUILTIN)
    .function('f', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [2] })
      .trace('y', ['y']))
    .function('g', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [2] })
      .trace('y', ['y']))
    .build(instance);
}

/**
 * One HalModule with `halOptions` and one module, linked into `count`
 * contexts; `fns[c]` is context c's m.f, `gs[c]` its m.g.
 */
function setup(uri, halOptions, count = 2) {
  const instance = new halrt.Instance();
  const device = instance.createDevice(uri);
  const hal = new halrt.HalModule(instance, device, halOptions);
  const module = buildModule(instance);
  const contexts = Array.from({ length: count }, () => new halrt.Context(instance, [hal, module]));
  const fns = contexts.map((context) => context.lookupFunction('m.f'));
  const gs = contexts.map((context) => context.lookupFunction('m.g'));
  const x = device.tensor(Float32Array.from([1, 2]), [2]);
  return {
    instance, device, hal, module, contexts, fns, gs, x,
    async run(fn) {
      closeAll(await fn.invoke([x]));
    },
    close() {
      closeAll(x, fns, gs, contexts, module, hal, device, instance);
    },
  };
}

for (const uri of DEVICE_URIS) {
  describe(`invocation numbers (${uri})`, () => {
    it('each context numbers its invocations from 1, over all its functions; traces, timings and invocation events agree', async () => {
      const traces = [];
      const timings = [];
      const invocations = [];
      const s = setup(uri, {
        debugSink: {
          trace: (key, tensors, info) => traces.push([info.function, info.sequence]),
          timing: (event) => timings.push(event.sequence),
          invocation: (event) => invocations.push(event.sequence),
        },
        profile: true,
      });
      try {
        // Context 0: f, g, f; context 1: g, f; interleaved.
        await s.run(s.fns[0]);
        await s.run(s.gs[1]);
        await s.run(s.gs[0]);
        await s.run(s.fns[1]);
        await s.run(s.fns[0]);
        assert.deepStrictEqual(traces, [['m.f', 1], ['m.g', 1], ['m.g', 2], ['m.f', 2], ['m.f', 3]]);
        assert.deepStrictEqual(timings, [1, 1, 2, 2, 3]);
        assert.deepStrictEqual(invocations, [1, 1, 2, 2, 3]);
      } finally {
        s.close();
      }
    });

    it('an invoke() rejected before it starts (bad inputs) takes no number', async () => {
      const seen = [];
      const s = setup(uri, { debugSink: (key, tensors, info) => seen.push(info.sequence) }, 1);
      const wrong = s.device.tensor(Float32Array.from([1, 2, 3]), [3]);
      try {
        await assert.rejects(s.fns[0].invoke([wrong]), { code: 'INVALID_ARGUMENT' });
        await assert.rejects(s.fns[0].invoke([]), { code: 'INVALID_ARGUMENT' });
        await s.run(s.fns[0]);
        await assert.rejects(s.fns[0].invoke([wrong]), { code: 'INVALID_ARGUMENT' });
        await s.run(s.fns[0]);
        assert.deepStrictEqual(seen, [1, 2]);
      } finally {
        wrong.close();
        s.close();
      }
    });

    it('every: N traces the N-th, 2N-th, ... invocation of each context, counted separately', async () => {
      const seen = [];
      const s = setup(uri, { debugSink: (key, tensors, info) => seen.push([key, info.sequence]), traceDispatches: { every: 3 } }, 3);
      try {
        // Six rounds over three contexts: each context's 3rd and 6th calls.
        for (let round = 0; round < 6; ++round) {
          for (const fn of s.fns) await s.run(fn);
        }
        const dispatchTraces = seen.filter(([key]) => key === 'f:0:add_f32');
        assert.deepStrictEqual(dispatchTraces.map(([, sequence]) => sequence), [3, 3, 3, 6, 6, 6]);
        assert.strictEqual(seen.filter(([key]) => key === 'y').length, 18, 'trace ops are not filtered');
      } finally {
        s.close();
      }
    });

    it('a sink that throws on one context\'s invocation 1 rejects that one only, citing its sequence, while the other context\'s invocation 1 runs', async () => {
      let thrown = 0;
      const s = setup(uri, {
        debugSink: (key, tensors, info) => {
          if (info.function === 'm.f' && info.sequence === 1) {
            thrown += 1;
            throw new Error('refused');
          }
        },
      });
      try {
        // In flight together: f on context 0 and g on context 1, both sequence 1.
        const results = await Promise.allSettled([s.fns[0].invoke([s.x]), s.gs[1].invoke([s.x])]);
        assert.strictEqual(thrown, 1);
        assert.strictEqual(results[0].status, 'rejected');
        assert.strictEqual(results[0].reason.code, 'ABORTED');
        assert.strictEqual(results[0].reason.message, 'm.f: the debug sink threw while handling a trace of this invocation (sequence 1)');
        assert.strictEqual(results[0].reason.cause.message, 'refused');
        assert.strictEqual(results[1].status, 'fulfilled', String(results[1].reason));
        closeAll(results[1].value);
        // The same on the second context is its invocation 2: fine.
        await s.run(s.fns[1]);
        assert.strictEqual(thrown, 1);
      } finally {
        s.close();
      }
    });

    it('the npy sink names files and indexes them by per-context sequence; a name already taken gets .1', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-seq-'));
      const s = setup(uri, { debugSink: halrt.sinks.npy(dir) });
      try {
        await s.run(s.fns[0]);
        await s.run(s.fns[1]);
        await s.run(s.fns[1]);
        const index = readNpyIndex(dir);
        assert.deepStrictEqual(index.map((line) => [line.file, line.sequence]), [
          [npyFileName(1, 'y', 0), 1],
          [npyFileName(1, 'y', 0).replace(/\.npy$/, '.1.npy'), 1],
          [npyFileName(2, 'y', 0), 2],
        ]);
        assert.deepStrictEqual(fs.readdirSync(dir).sort(), [...index.map((line) => line.file), 'index.jsonl'].sort());
      } finally {
        s.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('the Chrome trace labels traces, dispatches and invocations with the per-context sequence', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-seq-'));
      const file = path.join(dir, 'trace.json');
      const sink = halrt.sinks.chromeTrace(file);
      const s = setup(uri, { debugSink: sink, profile: true });
      try {
        await s.run(s.fns[0]);
        await s.run(s.fns[1]);
        await s.run(s.fns[0]);
        sink.close();
        const events = JSON.parse(fs.readFileSync(file, 'utf8')).filter((e) => e.args && 'sequence' in e.args);
        const sequences = events.map((e) => e.args.sequence);
        assert.ok(events.length >= 9, `${events.length} events`);
        // Three kinds per invocation, in invocation order: 1, 1, 2.
        const runs = [];
        for (const value of sequences) if (runs.length === 0 || runs[runs.length - 1] !== value) runs.push(value);
        assert.deepStrictEqual(runs, [1, 2], 'context 0 call 1, context 1 call 1 (also 1), context 0 call 2');
        assert.strictEqual(sequences.filter((v) => v === 1).length, 2 * sequences.filter((v) => v === 2).length);
      } finally {
        s.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

describe('invocation numbers: the stdio sink', () => {
  it('prints the per-context sequence: a second context starts at 1 again', () => {
    const source = `
      const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
      const { BUILTIN } = require(${JSON.stringify(path.join(__dirname, 'helpers'))});
      (async () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice('local-sync');
        const hal = new halrt.HalModule(instance, device, { debugSink: halrt.sinks.stdio() });
        const module = new halrt.ModuleBuilder('m').executable('k', BUILTIN)
          .function('f', (f) => f.input('x', 'f32', [1]).output('y', 'f32', [1])
            .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [1] }).trace('y', ['y']))
          .build(instance);
        const x = device.tensor(Float32Array.from([1]), [1]);
        for (const order of [0, 1, 0]) {
          const contexts = globalThis.contexts ??= [new halrt.Context(instance, [hal, module]), new halrt.Context(instance, [hal, module])];
          const [y] = await contexts[order].lookupFunction('m.f').invoke([x]);
          y.close();
        }
      })();
    `;
    const result = spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 20000 });
    assert.strictEqual(result.status, 0, result.stderr);
    assert.deepStrictEqual(result.stdout.split('\n').filter((line) => line.startsWith('===')), [
      '=== y (m.f op 1, invocation 1) ===',
      '=== y (m.f op 1, invocation 1) ===',
      '=== y (m.f op 1, invocation 2) ===',
    ]);
  });
});

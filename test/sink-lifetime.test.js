'use strict';
// Lifetime of the JavaScript debug sink: garbage collection through cycles,
// worker termination and process exit with traces in flight, and an idle
// sink never keeping the process alive.
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const { Worker } = require('worker_threads');
const halrt = require('..');
const {
  BUILTIN, DEVICE_URIS, closeAll, liveBaseline, makeProgram, settleLiveObjects, tick,
} = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));

/** Runs GC with turns of the event loop until `done()` or `rounds` pass. */
async function collectUntil(done, rounds = 100) {
  for (let i = 0; i < rounds && !done(); ++i) {
    global.gc();
    await tick();
    if (i % 4 === 3) await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return done();
}

describe('debug sink and garbage collection', function () {
  this.timeout(20000);
  before(function () {
    if (typeof global.gc !== 'function') this.skip();
  });

  for (const uri of DEVICE_URIS) {
    it(`a sink closing over its own HalModule, Context and Function is collected with them (${uri})`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const baseline = await liveBaseline();
      const collected = new Set();
      const registry = new FinalizationRegistry((name) => collected.add(name));
      let traces = 0;
      await (async () => {
        let hal = null;
        let context = null;
        let fn = null;
        const sink = (key, tensors) => {
          // The cycle: sink -> hal, context, fn -> ... -> sink.
          assert.ok(hal && context && fn);
          traces += tensors[0].data[0];
        };
        hal = new halrt.HalModule(instance, device, { debugSink: sink, traceDispatches: true });
        const module = new halrt.ModuleBuilder('m').executable('k', BUILTIN)
          .function('f', (f) => f.input('x', 'i32', [4]).output('y', 'i32', [4])
            .dispatch('k.add_i32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }).trace('y', ['y']))
          .build(instance);
        context = new halrt.Context(instance, [hal, module]);
        fn = context.lookupFunction('m.f');
        for (const [object, name] of [[sink, 'sink'], [hal, 'hal'], [context, 'context'], [fn, 'function'], [module, 'module']]) {
          registry.register(object, name);
        }
        const x = device.tensor(Int32Array.from([1, 2, 3, 4]), [4]);
        for (let i = 0; i < 3; ++i) {
          const [y] = await fn.invoke([x]);
          assert.deepStrictEqual(await y.read(), Int32Array.from([2, 4, 6, 8]));
        }
      })();
      assert.strictEqual(traces, 2 * 2 * 3, 'two traces per invocation, each starting with 2');
      const all = ['sink', 'hal', 'context', 'function', 'module'];
      assert.ok(await collectUntil(() => all.every((name) => collected.has(name))),
        `collected: ${[...collected].sort().join(', ')}`);
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      device.close();
      instance.close();
    });
  }

  for (const uri of DEVICE_URIS) {
    it(`a sink closing over only its Context is collected once the Context is unreachable (${uri})`, async () => {
      const p = makeProgram(uri, () => {});
      const instance = p.instance;
      const device = p.device;
      const baseline = await liveBaseline();
      const collected = new Set();
      const registry = new FinalizationRegistry((name) => collected.add(name));
      await (async () => {
        const holder = {};
        const sink = () => void holder.context.modules.length;
        const hal = new halrt.HalModule(instance, device, { debugSink: sink });
        const module = new halrt.ModuleBuilder('c').function('f', (f) => f.output('y', 'u8', [2]).fill('y', 1).trace('y', ['y'])).build(instance);
        holder.context = new halrt.Context(instance, [hal, module]);
        registry.register(sink, 'sink');
        registry.register(holder.context, 'context');
        const [y] = await holder.context.lookupFunction('c.f').invoke([]);
        y.close();
      })();
      assert.ok(await collectUntil(() => collected.size === 2), `collected: ${[...collected].join(', ')}`);
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      p.close();
    });

    it(`a sink reachable only through its HalModule survives GC and still receives traces (${uri})`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const received = [];
      let sinkCollected = false;
      const registry = new FinalizationRegistry(() => {
        sinkCollected = true;
      });
      const hal = (() => {
        const sink = (key, tensors) => received.push([key, tensors[0].data[0]]);
        registry.register(sink, 'sink');
        return new halrt.HalModule(instance, device, { debugSink: sink });
      })();
      const module = new halrt.ModuleBuilder('s').function('f', (f) => f.output('y', 'i32', [1]).fill('y', 77).trace('v', ['y'])).build(instance);
      // Collect hard while the sink's only JS-visible edge is hal.debugSink.
      await collectUntil(() => false, 10);
      assert.strictEqual(sinkCollected, false);
      const context = new halrt.Context(instance, [hal, module]);
      const fn = context.lookupFunction('s.f');
      try {
        const [y] = await fn.invoke([]);
        y.close();
        assert.deepStrictEqual(received, [['v', 77]]);
      } finally {
        closeAll(fn, context, module, hal, device, instance);
      }
    });

    it(`a sink whose only owner is an invocation in flight is kept until that invocation has delivered its traces (${uri})`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const baseline = await liveBaseline();
      let traces = 0;
      let sinkCollected = false;
      let halCollectedInFlight = false;
      let settled = false;
      const registry = new FinalizationRegistry((name) => {
        if (name === 'sink') sinkCollected = true;
        if (name === 'hal' && !settled) halCollectedInFlight = true;
      });
      // Long enough that GC runs while the device works: a real GPU needs
      // bigger matrices than the CPU devices, the CUDA test double (which
      // runs each GPU thread on the CPU, under ASan in test:asan) smaller.
      const double = device.info.kind === 'cuda' && device.info.name.startsWith('fakecuda');
      const N = device.info.kind !== 'cuda' ? 256 : double ? 128 : 1024;
      const pending = (() => {
        const sink = () => {
          traces += 1;
        };
        registry.register(sink, 'sink');
        const hal = new halrt.HalModule(instance, device, { debugSink: sink });
        registry.register(hal, 'hal');
        const module = new halrt.ModuleBuilder('g').executable('k', BUILTIN).function('f', (f) => {
          f.input('x', 'f32', [N, N]).output('y', 'f32', [N, N]);
          for (let i = 0; i < 16; ++i) {
            f.dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'x', 'y'], constants: [N, N, N] }).trace(`t${i}`, ['y']);
          }
        }).build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        const x = device.tensor(new Float32Array(N * N).fill(1), [N, N]);
        return context.lookupFunction('g.f').invoke([x]);
      })();
      // Only the promise is left; GC runs while the device works.
      pending.then(() => {
        settled = true;
      }, () => {
        settled = true;
      });
      while (!settled) {
        global.gc();
        await tick();
      }
      const [y] = await pending;
      assert.strictEqual((await y.read())[0], N);
      y.close();
      assert.ok(halCollectedInFlight, 'the HalModule object was collected while the invocation ran');
      assert.strictEqual(traces, 16, 'every trace reached the sink');
      assert.ok(await collectUntil(() => sinkCollected), 'and then the sink was collected');
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      device.close();
      instance.close();
    });

    it(`owned trace data a callback dropped is not held while the rest of its batch is delivered in later turns (${uri})`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const N = 1 << 18; // 1 MiB of f32: large data, in an external ArrayBuffer
      const traces = 4;
      const dropped = [];
      const stillHeld = [];
      const sink = (key, tensors) => {
        // Each callback outlasts a turn's budget, so the next record of the
        // batch comes in a later turn, after this callback's WeakRef stops
        // keeping its target.
        global.gc();
        stillHeld.push(dropped.filter((ref) => ref.deref() !== undefined).length);
        dropped.push(new WeakRef(tensors[0].data.buffer));
        const end = performance.now() + 3;
        while (performance.now() < end);
      };
      const hal = new halrt.HalModule(instance, device, { debugSink: sink });
      const module = new halrt.ModuleBuilder('w').function('f', (f) => {
        f.input('x', 'f32', [N]);
        for (let i = 0; i < traces; ++i) f.trace(`t${i}`, ['x']);
      }).build(instance);
      const context = new halrt.Context(instance, [hal, module]);
      const x = device.tensor(new Float32Array(N).fill(2), [N]);
      try {
        await context.lookupFunction('w.f').invoke([x]);
        assert.deepStrictEqual(stillHeld, new Array(traces).fill(0));
      } finally {
        closeAll(x, context, module, hal, device, instance);
      }
    });
  }
});

describe('debug sink in worker_threads', function () {
  this.timeout(60000);

  for (const uri of DEVICE_URIS) {
    it(`a worker builds a traced program, awaits it and exits cleanly (${uri})`, async () => {
      const before = await liveBaseline();
      const worker = new Worker(`
        const { parentPort } = require('worker_threads');
        const halrt = require(${LIB});
        (async () => {
          const instance = new halrt.Instance();
          const device = instance.createDevice(${JSON.stringify(uri)});
          const traces = [];
          const hal = new halrt.HalModule(instance, device, {
            traceDispatches: true,
            debugSink: (key, tensors, info) => traces.push([key, info.op, Array.from(tensors[0].data)]),
          });
          const module = new halrt.ModuleBuilder('w').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
            .function('f', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
              .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [3] }).trace('out', ['y']))
            .build(instance);
          const context = new halrt.Context(instance, [hal, module]);
          const fn = context.lookupFunction('w.f');
          const x = device.tensor(Float32Array.from([-1, 2, -3]), [3]);
          const [y] = await fn.invoke([x]);
          parentPort.postMessage({ traces, y: await y.read() });
          // Left unclosed on purpose: worker teardown releases them.
        })().catch((error) => parentPort.postMessage({ error: String(error && error.stack) }));
      `, { eval: true });
      const messages = [];
      worker.on('message', (message) => messages.push(message));
      const code = await new Promise((resolve, reject) => {
        worker.on('error', reject);
        worker.on('exit', resolve);
      });
      assert.strictEqual(code, 0);
      assert.strictEqual(messages.length, 1);
      assert.strictEqual(messages[0].error, undefined, messages[0].error);
      assert.deepStrictEqual(messages[0].traces, [['f:0:relu_f32', 0, [0, 2, 0]], ['out', 1, [0, 2, 0]]]);
      assert.deepStrictEqual(messages[0].y, Float32Array.from([0, 2, 0]));
      assert.deepStrictEqual(await settleLiveObjects(before), before);
    });
  }

  it("terminating a worker inside a callback that was lent data (traceData 'borrowed') takes the data back", async () => {
    const before = await liveBaseline();
    for (let round = 0; round < 3; ++round) {
      const worker = new Worker(`
        const { parentPort } = require('worker_threads');
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice('${DEVICE_URIS[round % DEVICE_URIS.length]}');
        const N = 32768; // 128 KiB: lent, not copied
        const hal = new halrt.HalModule(instance, device, {
          traceData: 'borrowed',
          debugSink: () => { parentPort.postMessage('inside'); const end = Date.now() + 5000; while (Date.now() < end); },
        });
        const module = new halrt.ModuleBuilder('t').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('f', (f) => f.input('x', 'f32', [N]).output('y', 'f32', [N])
            .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [N] }).trace('y', ['y']))
          .build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        context.lookupFunction('t.f').invoke([device.tensor(new Float32Array(N), [N])]);
      `, { eval: true });
      await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      assert.strictEqual(await worker.terminate(), 1);
    }
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  it('terminating workers with traced invocations in flight, 20 times, neither crashes nor leaks', async () => {
    const before = await liveBaseline();
    for (let round = 0; round < 20; ++round) {
      const uri = DEVICE_URIS[round % DEVICE_URIS.length];
      const policy = round % 4 < 2 ? 'wait' : 'drop';
      // 64 KiB tensors travel as external blocks, lent under 'borrowed'.
      const traceData = round % 2 === 0 ? 'owned' : 'borrowed';
      const worker = new Worker(`
        const { parentPort } = require('worker_threads');
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice('${uri}');
        let seen = 0;
        const hal = new halrt.HalModule(instance, device, {
          traceDispatches: true, maxTraceBytes: 8192, tracePolicy: '${policy}', traceData: '${traceData}',
          debugSink: () => { seen += 1; const end = Date.now() + 1; while (Date.now() < end); },
        });
        const module = new halrt.ModuleBuilder('t').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('f', (f) => f.input('x', 'f32', [16384]).output('y', 'f32', [16384])
            .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [16384] })
            .trace('a', ['x', 'y']).trace('b', ['y']))
          .build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        const fn = context.lookupFunction('t.f');
        const x = device.tensor(new Float32Array(16384).fill(-1), [16384]);
        const pump = () => {
          for (let i = 0; i < 8; ++i) fn.invoke([x]).then(([y]) => y.close());
          setImmediate(pump);
        };
        pump();
        parentPort.postMessage('busy');
      `, { eval: true });
      await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      // Vary the moment of termination relative to traces and completions.
      if (round % 3 === 1) await tick();
      if (round % 3 === 2) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.strictEqual(await worker.terminate(), 1);
    }
    // The main thread still runs traced invocations correctly.
    for (const uri of DEVICE_URIS) {
      const keys = [];
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [2]).output('y', 'f32', [2])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [2] }).trace('y', ['y'])),
      { hal: { debugSink: (key, tensors) => keys.push([key, Array.from(tensors[0].data)]) } });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from([1.5, -4]), [2]);
      const [y] = await fn.invoke([x]);
      assert.deepStrictEqual(await y.read(), Float32Array.from([3, -8]));
      assert.deepStrictEqual(keys, [['y', [3, -8]]], uri);
      closeAll(y, x, fn);
      p.close();
    }
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });
});

describe('debug sink and process lifetime', function () {
  this.timeout(60000);

  function runChild(source, timeout = 15000) {
    return spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout });
  }

  // A traced program in a child: `fn`, `x` and `traces` are defined.
  const PRELUDE = `
    const halrt = require(${LIB});
    const instance = new halrt.Instance();
    const device = instance.createDevice(process.env.HALRT_TEST_DEVICE);
    let traces = 0;
    const hal = new halrt.HalModule(instance, device, {
      traceDispatches: true, maxTraceBytes: Number(process.env.HALRT_TEST_MAX), tracePolicy: process.env.HALRT_TEST_POLICY,
      debugSink: (key) => { traces += 1; if (globalThis.onTrace) globalThis.onTrace(key); },
    });
    const module = new halrt.ModuleBuilder('p').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
      .function('f', (f) => f.input('x', 'f32', [4096]).output('y', 'f32', [4096])
        .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [4096] })
        .trace('a', ['x', 'y']).trace('b', ['y']))
      .build(instance);
    const context = new halrt.Context(instance, [hal, module]);
    const fn = context.lookupFunction('p.f');
    const x = device.tensor(new Float32Array(4096).fill(-2), [4096]);
  `;

  function runProgram(body, { uri = 'local-task?workers=2', policy = 'wait', max = 1 << 26 } = {}) {
    return spawnSync(process.execPath, ['-e', PRELUDE + body], {
      encoding: 'utf8',
      timeout: 15000,
      env: { ...process.env, HALRT_TEST_DEVICE: uri, HALRT_TEST_POLICY: policy, HALRT_TEST_MAX: String(max) },
    });
  }

  function assertExitedZero(result) {
    assert.strictEqual(result.error, undefined, `the process did not exit on its own: ${result.error}`);
    assert.strictEqual(result.signal, null, result.stderr);
    assert.strictEqual(result.status, 0, result.stderr);
  }

  for (const uri of DEVICE_URIS) {
    for (const [policy, max] of [['wait', 1 << 26], ['wait', 16384], ['drop', 16384]]) {
      it(`process.exit(0) with traces in flight exits 0 (${uri}, ${policy}, maxTraceBytes ${max})`, () => {
        const options = { uri, policy, max };
        // Right after starting the invocations.
        assertExitedZero(runProgram('for (let i = 0; i < 64; ++i) fn.invoke([x]); process.exit(0);', options));
        // From inside the sink, with more traces queued behind it.
        assertExitedZero(runProgram(`
          globalThis.onTrace = () => { if (traces === 5) process.exit(0); };
          for (let i = 0; i < 64; ++i) fn.invoke([x]);
        `, options));
        // A moment later, from a timer.
        assertExitedZero(runProgram('for (let i = 0; i < 64; ++i) fn.invoke([x]); setTimeout(() => process.exit(0), 2);', options));
      });
    }
  }

  for (const uri of DEVICE_URIS) {
    it(`an idle HalModule with a sink and an unclosed Context do not keep the process alive (${uri})`, () => {
      const started = Date.now();
      const result = runChild(`
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice(${JSON.stringify(uri)});
        const hal = new halrt.HalModule(instance, device, { debugSink: () => {} });
        const never = new halrt.HalModule(instance, instance.createDevice(${JSON.stringify(uri)}), { debugSink: () => {} });
        const module = new halrt.ModuleBuilder('i').function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1).trace('y', ['y'])).build(instance);
        const context = new halrt.Context(instance, [hal, module]);
        globalThis.keep = [instance, device, hal, never, module, context, context.lookupFunction('i.f')];
      `);
      assertExitedZero(result);
      assert.ok(Date.now() - started < 10000);
    });

    it(`a process that awaits a traced invocation prints its results and exits on its own (${uri})`, () => {
      const result = runProgram(`
        fn.invoke([x]).then(async ([y]) => {
          const values = await y.read();
          console.log('traces', traces, 'y', values[0], values[4095]);
        });
      `, { uri });
      assertExitedZero(result);
      assert.strictEqual(result.stdout.trim(), 'traces 3 y 0 0');
    });

    it(`pending traced invocations keep the process alive until they have settled (${uri})`, () => {
      const result = runProgram(`
        let settled = 0;
        for (let i = 0; i < 20; ++i) fn.invoke([x]).then(() => { settled += 1; });
        process.on('exit', () => console.log('settled', settled, 'traces', traces));
      `, { uri, policy: 'wait', max: 16384 });
      assertExitedZero(result);
      assert.strictEqual(result.stdout.trim(), 'settled 20 traces 60');
    });
  }
});

describe('debug sink: teardown while a burst is delivered in slices', function () {
  this.timeout(60000);

  // A burst of 32 x 16 traces of `n` f32 to a sink that takes 1 ms per call
  // under 'wait' (at least 512 ms), and a 30 ms timer, set by the first
  // trace, that calls `onTimer(traces)` in the middle of it: it fires only
  // because the loop turns between slices of the burst.
  const BURST = (uri, n, traceData) => `
    const halrt = require(${LIB});
    const instance = new halrt.Instance();
    const device = instance.createDevice('${uri}');
    const N = ${n};
    let traces = 0;
    const hal = new halrt.HalModule(instance, device, {
      tracePolicy: 'wait', traceData: '${traceData}',
      debugSink: () => {
        traces += 1;
        if (traces === 1) setTimeout(() => onTimer(traces), 30);
        const end = process.hrtime.bigint() + 1000000n;
        while (process.hrtime.bigint() < end);
      },
    });
    const module = new halrt.ModuleBuilder('t').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
      .function('f', (f) => {
        f.input('x', 'f32', [N]).output('y', 'u8', [1]).fill('y', 1);
        for (let i = 0; i < 16; ++i) f.trace('t' + i, ['x']);
      })
      .build(instance);
    const context = new halrt.Context(instance, [hal, module]);
    const fn = context.lookupFunction('t.f');
    const x = device.tensor(new Float32Array(N), [N]);
    for (let i = 0; i < 32; ++i) fn.invoke([x]);
  `;

  for (const uri of DEVICE_URIS) {
    it(`process.exit(0) from a timer that fires in the middle of the burst exits 0 (${uri})`, () => {
      const result = spawnSync(process.execPath, ['-e', `
        const onTimer = (traces) => { console.log(traces); process.exit(0); };
        ${BURST(uri, 16, 'owned')}
      `], { encoding: 'utf8', timeout: 15000 });
      assert.strictEqual(result.error, undefined, `the process did not exit on its own: ${result.error}`);
      assert.strictEqual(result.signal, null, result.stderr);
      assert.strictEqual(result.status, 0, result.stderr);
      const traces = Number(result.stdout.trim());
      assert.ok(traces > 0 && traces < 512, `the timer ran after ${traces} of 512 traces`);
    });
  }

  it('terminating a worker from the middle of the burst (small data, large owned and borrowed data) neither crashes nor leaks', async () => {
    const before = await liveBaseline();
    for (let round = 0; round < 4; ++round) {
      const uri = DEVICE_URIS[round % DEVICE_URIS.length];
      // 64 Ki f32 travel as external blocks: given away, or lent.
      const n = round < 2 ? 16 : 65536;
      const traceData = round === 3 ? 'borrowed' : 'owned';
      const worker = new Worker(`
        const { parentPort } = require('worker_threads');
        const onTimer = (traces) => parentPort.postMessage(traces);
        ${BURST(uri, n, traceData)}
      `, { eval: true });
      const traces = await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      assert.ok(traces > 0 && traces < 512, `the timer ran after ${traces} of 512 traces`);
      assert.strictEqual(await worker.terminate(), 1);
    }
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });
});

'use strict';
// The flight recorder (HalModule option flightRecorder, hal.flightRecorder):
// the last traces kept natively, delivered to the sink marked recorded when
// an invocation fails or on dump(), nothing delivered in normal operation.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { Worker } = require('worker_threads');
const halrt = require('..');
const {
  DEVICE_URIS, assertRejectsHalrt, assertThrowsHalrt, buildNativeFixtures, closeAll, cudaDriver, inChild, liveBaseline, makeProgram,
  settleLiveObjects,
} = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));
const TEST_KERNELS = path.join(__dirname, '..', 'build', 'ctest', 'kernels_good.so');
const GPU_KERNELS = { ptx: path.join(__dirname, 'gpu', 'kernels.ptx'), entries: { fault_illegal_address: ['buffer', 'u32'] } };

// f(x): traces x as 'in', then y = x * x, traced as 'sq'. With nonFinite
// 'reject' a NaN in x fails the call at 'in'.
function squareProgram(uri, hal) {
  return makeProgram(uri, (b) => b.function('f', (f) => f
    .input('x', 'f32', [4]).output('y', 'f32', [4])
    .trace('in', ['x'])
    .dispatch('k.mul_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] })
    .trace('sq', ['y'])), { hal });
}

// The sink's calls and the settling of invocations, in the order they came.
function recorderLog() {
  const events = [];
  const sink = (key, tensors, info) => {
    events.push({ key, sequence: info.sequence, recorded: info.recorded, data: Array.from(tensors[0].data) });
  };
  return { events, sink };
}

const filled = (value) => [value, value, value, value];

for (const uri of DEVICE_URIS) {
  describe(`flight recorder (${uri})`, () => {
    it('a NaN at the 10th invocation delivers exactly the last 3 traces, in order, recorded, before the rejection', async () => {
      const { events, sink } = recorderLog();
      const p = squareProgram(uri, { debugSink: sink, nonFinite: 'reject', flightRecorder: { traces: 3 } });
      const fn = p.lookup('f');
      try {
        for (let i = 1; i <= 9; ++i) {
          const x = p.device.tensor(Float32Array.from(filled(i)), [4]);
          const [y] = await fn.invoke([x]);
          closeAll(x, y);
        }
        assert.deepStrictEqual(events, [], 'nothing is delivered in normal operation');
        assert.strictEqual(p.hal.flightRecorder.heldTraces, 3);
        const x = p.device.tensor(Float32Array.of(10, NaN, 10, 10), [4]);
        const rejected = fn.invoke([x]).catch((error) => {
          events.push({ rejected: error.code });
        });
        await rejected;
        x.close();
        assert.strictEqual(events.length, 4);
        assert.deepStrictEqual(events.slice(0, 2), [
          { key: 'in', sequence: 9, recorded: true, data: filled(9) },
          { key: 'sq', sequence: 9, recorded: true, data: filled(81) },
        ]);
        const last = events[2];
        assert.deepStrictEqual([last.key, last.sequence, last.recorded], ['in', 10, true]);
        assert.ok(Number.isNaN(last.data[1]) && last.data[0] === 10, 'the rejected trace is the last one, NaN and all');
        assert.deepStrictEqual(events[3], { rejected: 'ABORTED' });
        assert.strictEqual(p.hal.flightRecorder.heldTraces, 0, 'a delivery empties the ring');
      } finally {
        closeAll(fn);
        p.close();
      }
    });

    it('health traces are recorded as their summaries: a NaN delivers the counts, no data', async () => {
      const events = [];
      const sink = (key, tensors, info) => {
        events.push({ key, sequence: info.sequence, recorded: info.recorded, mode: info.mode, data: tensors[0].data, summary: tensors[0].summary });
      };
      const p = squareProgram(uri, { debugSink: sink, nonFinite: 'reject', traceMode: 'health', flightRecorder: { traces: 2 } });
      const fn = p.lookup('f');
      try {
        const x = p.device.tensor(Float32Array.of(1, 2, 3, 4), [4]);
        const [y] = await fn.invoke([x]);
        closeAll(x, y);
        assert.deepStrictEqual(events, []);
        const bad = p.device.tensor(Float32Array.of(1, NaN, -Infinity, 4), [4]);
        const error = await fn.invoke([bad]).catch((e) => e);
        bad.close();
        assert.strictEqual(error.code, 'ABORTED');
        const health = (nanCount, negInfCount) => ({ mode: 'health', count: 4, nanCount, posInfCount: 0, negInfCount });
        assert.deepStrictEqual(events, [
          { key: 'sq', sequence: 1, recorded: true, mode: 'health', data: undefined, summary: health(0, 0) },
          { key: 'in', sequence: 2, recorded: true, mode: 'health', data: undefined, summary: health(1, 1) },
        ]);
      } finally {
        closeAll(fn);
        p.close();
      }
    });

    it("with tracePolicy 'drop' recorded traces are never dropped: dump()'s count is what the sink got", async () => {
      const seen = [];
      const n = 65536;
      const p = makeProgram(uri, (b) => b.function('f', (f) => f.input('x', 'f32', [n]).output('y', 'f32', [n])
        .copy('x', 'y').trace('t', ['y'])), {
        hal: { debugSink: (key, tensors, info) => seen.push([info.sequence, info.dropped, tensors[0].data.length]), flightRecorder: { traces: 40 }, tracePolicy: 'drop', maxTraceBytes: 1 << 20 },
      });
      const fn = p.lookup('f');
      try {
        const x = p.device.tensor(new Float32Array(n), [n]);
        for (let i = 0; i < 40; ++i) {
          const [y] = await fn.invoke([x]);
          y.close();
        }
        x.close();
        assert.strictEqual(await p.hal.flightRecorder.dump(), 40);
        assert.deepStrictEqual(seen, Array.from({ length: 40 }, (_, i) => [i + 1, 0, n]));
      } finally {
        closeAll(fn);
        p.close();
      }
    });

    it('dump() delivers the held traces and resolves with their count once the sink has them', async () => {
      const { events, sink } = recorderLog();
      const p = squareProgram(uri, { debugSink: sink, flightRecorder: { traces: 8 } });
      const fn = p.lookup('f');
      try {
        for (let i = 1; i <= 3; ++i) {
          const x = p.device.tensor(Float32Array.from(filled(i)), [4]);
          const [y] = await fn.invoke([x]);
          closeAll(x, y);
        }
        const recorder = p.hal.flightRecorder;
        assert.strictEqual(recorder, p.hal.flightRecorder);
        assert.deepStrictEqual([recorder.traces, recorder.bytes, recorder.heldTraces], [8, undefined, 6]);
        assert.ok(recorder.heldBytes >= 6 * 16);
        assert.deepStrictEqual(events, []);
        assert.strictEqual(await recorder.dump(), 6);
        assert.deepStrictEqual(events.map((e) => [e.key, e.sequence, e.recorded, e.data[0]]), [
          ['in', 1, true, 1], ['sq', 1, true, 1], ['in', 2, true, 2], ['sq', 2, true, 4], ['in', 3, true, 3], ['sq', 3, true, 9],
        ]);
        assert.deepStrictEqual([recorder.heldTraces, recorder.heldBytes], [0, 0]);
        assert.strictEqual(await recorder.dump(), 0, 'nothing twice');
        assert.strictEqual(events.length, 6);
      } finally {
        closeAll(fn);
        p.close();
      }
    });

    it('dump() with invocations in flight keeps program order and never delivers a trace twice', async () => {
      const keys = [];
      const p = squareProgram(uri, { debugSink: (key, tensors, info) => keys.push([info.sequence, key]), flightRecorder: { traces: 1000 } });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from(filled(2)), [4]);
      try {
        const calls = [];
        const dumps = [];
        for (let i = 0; i < 20; ++i) {
          calls.push(fn.invoke([x]));
          if (i % 5 === 4) dumps.push(p.hal.flightRecorder.dump());
        }
        for (const [y] of await Promise.all(calls)) y.close();
        dumps.push(p.hal.flightRecorder.dump());
        const counts = await Promise.all(dumps);
        assert.strictEqual(counts.reduce((a, b) => a + b, 0), 40);
        assert.strictEqual(keys.length, 40);
        const expected = [];
        for (let s = 1; s <= 20; ++s) expected.push([s, 'in'], [s, 'sq']);
        assert.deepStrictEqual(keys, expected);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });

    it('bytes keeps the last traces whose copies fit and skips a trace larger than the bound', async () => {
      const { events, sink } = recorderLog();
      // A trace of one f32[4] takes a few hundred bytes: 1000 hold 2 to 5 of
      // them, never all 8.
      const p = squareProgram(uri, { debugSink: sink, flightRecorder: { bytes: 1000 } });
      const fn = p.lookup('f');
      try {
        for (let i = 1; i <= 4; ++i) {
          const x = p.device.tensor(Float32Array.from(filled(i)), [4]);
          const [y] = await fn.invoke([x]);
          closeAll(x, y);
        }
        const recorder = p.hal.flightRecorder;
        assert.deepStrictEqual([recorder.bytes, recorder.traces, recorder.skipped], [1000, undefined, 0]);
        const held = recorder.heldTraces;
        assert.ok(held >= 2 && held < 8, `held ${held}`);
        assert.ok(recorder.heldBytes <= 1000 && recorder.heldBytes > 1000 / 2);
        assert.strictEqual(await recorder.dump(), held);
        // The newest ones, ending with the last invocation's.
        const last = events.slice(-2).map((e) => [e.key, e.sequence]);
        assert.deepStrictEqual(last, [['in', 4], ['sq', 4]]);
        assert.strictEqual(events.length, held);
      } finally {
        closeAll(fn);
        p.close();
      }
      const big = squareProgram(uri, { debugSink: sink, flightRecorder: { bytes: 64 } });
      const g = big.lookup('f');
      try {
        const x = big.device.tensor(Float32Array.from(filled(1)), [4]);
        const [y] = await g.invoke([x]);
        closeAll(x, y);
        assert.deepStrictEqual([big.hal.flightRecorder.heldTraces, big.hal.flightRecorder.skipped], [0, 2]);
      } finally {
        closeAll(g);
        big.close();
      }
    });

    it('held traces count in liveObjects() and go with close()', async () => {
      const baseline = await liveBaseline();
      const p = squareProgram(uri, { debugSink: () => {}, flightRecorder: { traces: 5 } });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from(filled(1)), [4]);
      for (let i = 0; i < 4; ++i) {
        const [y] = await fn.invoke([x]);
        y.close();
      }
      const live = halrt.liveObjects();
      assert.strictEqual(live.recordedTrace, baseline.recordedTrace + 5);
      assert.strictEqual(live.recordedBytes - baseline.recordedBytes, p.hal.flightRecorder.heldBytes);
      closeAll(x, fn);
      p.close();
      const after = await settleLiveObjects(baseline);
      assert.deepStrictEqual(after, baseline);
    });

    it('a closed HalModule: dump() rejects and the counts throw', async () => {
      const p = squareProgram(uri, { debugSink: () => {}, flightRecorder: { traces: 2 } });
      const recorder = p.hal.flightRecorder;
      p.close();
      await assertRejectsHalrt(recorder.dump(), 'FAILED_PRECONDITION', 'closed');
      assertThrowsHalrt(() => recorder.heldTraces, 'FAILED_PRECONDITION', 'closed');
    });

    it('a wrong receiver or a FlightRecorder made by hand is INVALID_ARGUMENT, never a TypeError', async () => {
      const p = squareProgram(uri, { debugSink: () => {}, flightRecorder: { traces: 2 } });
      try {
        const FlightRecorder = p.hal.flightRecorder.constructor;
        for (const member of ['traces', 'bytes', 'heldTraces', 'heldBytes', 'skipped']) {
          const { get } = Object.getOwnPropertyDescriptor(FlightRecorder.prototype, member);
          for (const receiver of [{}, null, 5, p.hal]) {
            assertThrowsHalrt(() => get.call(receiver), 'INVALID_ARGUMENT', `flightRecorder.${member}: \`this\` is not a FlightRecorder`);
          }
        }
        await assertRejectsHalrt(FlightRecorder.prototype.dump.call({}), 'INVALID_ARGUMENT', 'flightRecorder.dump: `this` is not a FlightRecorder');
        assertThrowsHalrt(() => new FlightRecorder(), 'INVALID_ARGUMENT', 'new FlightRecorder: read hal.flightRecorder instead');
        assertThrowsHalrt(() => Object.getOwnPropertyDescriptor(halrt.HalModule.prototype, 'flightRecorder').get.call({}),
          'INVALID_ARGUMENT', 'halModule.flightRecorder: `this` is not a HalModule');
        assert.strictEqual(await p.hal.flightRecorder.dump(), 0);
      } finally {
        p.close();
      }
    });

    if (uri.startsWith('cuda')) {
      // In a child process: the fault loses the primary context that every
      // CUDA device of the process shares.
      it('a kernel fault (DEVICE_LOST) delivers the recorded traces before the invocation rejects', function () {
        if (!cudaDriver().available) this.skip();
        const script = `
          const halrt = require(${LIB});
          const events = [];
          (async () => {
            const instance = new halrt.Instance();
            const device = instance.createDevice(${JSON.stringify(uri)});
            const hal = new halrt.HalModule(instance, device, {
              debugSink: (key, tensors, info) => events.push([key, info.sequence, info.recorded]),
              flightRecorder: { traces: 2 },
            });
            const module = new halrt.ModuleBuilder('d')
              .executable('t', { cuda: ${JSON.stringify(GPU_KERNELS)} })
              .function('ok', (f) => f.input('x', 'f32', [4]).trace('in', ['x']))
              .function('fault', (f) => f.output('y', 'u32', [4])
                .dispatch('t.fault_illegal_address', { workgroups: [1], workgroupSize: [4], bindings: ['y'], constants: [7] }))
              .build(instance);
            const context = new halrt.Context(instance, [hal, module]);
            const x = device.tensor(Float32Array.of(1, 2, 3, 4), [4]);
            for (let i = 0; i < 3; ++i) await context.lookupFunction('d.ok').invoke([x]);
            events.push('clean');
            await context.lookupFunction('d.fault').invoke([]).catch((error) => events.push(error.code));
            process.stdout.write(JSON.stringify(events));
          })().catch((error) => process.stdout.write(JSON.stringify({ crashed: String(error && error.stack) })));
        `;
        const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60000 });
        assert.strictEqual(child.status, 0, child.stderr);
        assert.deepStrictEqual(JSON.parse(child.stdout), ['clean', ['in', 2, true], ['in', 3, true], 'DEVICE_LOST']);
      });

      it('dump() still delivers after another HalModule lost the shared device', function () {
        if (!cudaDriver().available) this.skip();
        const script = `
          const halrt = require(${LIB});
          const events = [];
          (async () => {
            const instance = new halrt.Instance();
            const device = instance.createDevice(${JSON.stringify(uri)});
            const recording = new halrt.HalModule(instance, device, {
              debugSink: (key, tensors, info) => events.push([key, info.sequence, info.recorded]),
              flightRecorder: { traces: 5 },
            });
            const other = new halrt.HalModule(instance, device, {});
            const traced = new halrt.ModuleBuilder('a').executable('k', { cuda: { builtin: true } })
              .function('ok', (f) => f.input('x', 'f32', [4]).trace('in', ['x'])).build(instance);
            const faulty = new halrt.ModuleBuilder('b').executable('t', { cuda: ${JSON.stringify(GPU_KERNELS)} })
              .function('fault', (f) => f.output('y', 'u32', [4])
                .dispatch('t.fault_illegal_address', { workgroups: [1], workgroupSize: [4], bindings: ['y'], constants: [7] }))
              .build(instance);
            const a = new halrt.Context(instance, [recording, traced]);
            const b = new halrt.Context(instance, [other, faulty]);
            const x = device.tensor(Float32Array.of(1, 2, 3, 4), [4]);
            for (let i = 0; i < 3; ++i) await a.lookupFunction('a.ok').invoke([x]);
            await b.lookupFunction('b.fault').invoke([]).catch((error) => events.push(error.code));
            events.push(await recording.flightRecorder.dump(), recording.flightRecorder.heldTraces);
            process.stdout.write(JSON.stringify(events));
          })().catch((error) => process.stdout.write(JSON.stringify({ crashed: String(error && error.stack) })));
        `;
        const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60000 });
        assert.strictEqual(child.status, 0, child.stderr);
        assert.deepStrictEqual(JSON.parse(child.stdout), ['DEVICE_LOST', ['in', 1, true], ['in', 2, true], ['in', 3, true], 3, 0]);
      });
    } else {
      it('a kernel error delivers the recorded traces before the invocation rejects', async () => {
        buildNativeFixtures();
        const { events, sink } = recorderLog();
        const p = makeProgram(uri, (b) => b
          .executable('t', { local: { library: TEST_KERNELS } })
          .function('ok', (f) => f.input('x', 'f32', [4]).trace('in', ['x']))
          // worker_ids fails (INVALID_ARGUMENT) when its binding has less
          // than 4 bytes per workgroup.
          .function('bad', (f) => f.input('x', 'f32', [4]).local('w', 'u32', [1]).trace('in', ['x'])
            .dispatch('t.worker_ids', { workgroups: [2], bindings: ['w'] })), {
          hal: { debugSink: sink, flightRecorder: { traces: 2 } },
        });
        const ok = p.lookup('ok');
        const bad = p.lookup('bad');
        const x = p.device.tensor(Float32Array.from(filled(5)), [4]);
        try {
          for (let i = 0; i < 3; ++i) await ok.invoke([x]);
          assert.deepStrictEqual(events, []);
          await bad.invoke([x]).then(() => assert.fail('resolved'), (error) => events.push({ rejected: error.code }));
          assert.deepStrictEqual(events, [
            { key: 'in', sequence: 3, recorded: true, data: filled(5) },
            { key: 'in', sequence: 4, recorded: true, data: filled(5) },
            { rejected: 'INVALID_ARGUMENT' },
          ]);
        } finally {
          closeAll(x, ok, bad);
          p.close();
        }
      });
    }

    it('dump() settles whatever is closed before it completes, in every order (the code after await runs)', () => {
      // Closing the Function, Context, Module and HalModule at once drops the
      // HAL module's last reference on the completion thread: the dump's
      // result must be posted before that finishes the sink's channel.
      const results = inChild(`
        const orders = [];
        const permute = (rest, order) => rest.length === 0 ? orders.push(order)
          : rest.forEach((name, i) => permute([...rest.slice(0, i), ...rest.slice(i + 1)], [...order, name]));
        permute(['fn', 'context', 'module', 'hal'], []);
        (async () => {
          const out = [];
          for (const order of orders) {
            const instance = new halrt.Instance();
            const device = instance.createDevice(args.uri);
            const seen = [];
            const hal = new halrt.HalModule(instance, device, { debugSink: (key) => seen.push(key), flightRecorder: { traces: 4 } });
            const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
              .function('f', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]).trace('in', ['x'])
                .dispatch('k.mul_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }))
              .build(instance);
            const context = new halrt.Context(instance, [hal, module]);
            const fn = context.lookupFunction('m.f');
            const x = device.tensor(Float32Array.of(1, 2, 3, 4), [4]);
            const [y] = await fn.invoke([x]);
            const dump = hal.flightRecorder.dump();
            const objects = { fn, context, module, hal };
            for (const name of order) objects[name].close();
            out.push([order.join(','), await dump, seen.length]);
            x.close(); y.close(); device.close(); instance.close();
          }
          console.log(JSON.stringify(out));
        })();`, { uri });
      assert.strictEqual(results.length, 24);
      for (const [order, count, seen] of results) assert.deepStrictEqual([order, count, seen], [order, 1, 1]);
    });

    it('a worker ending with traces held and a dump in flight, and process.exit, neither crash nor leak', async () => {
      const before = await liveBaseline();
      const body = `
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice(${JSON.stringify(uri)});
        const hal = new halrt.HalModule(instance, device, {
          debugSink: () => { const end = Date.now() + 2; while (Date.now() < end); },
          flightRecorder: { traces: 64 },
        });
        const module = new halrt.ModuleBuilder('t').executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('f', (f) => f.input('x', 'f32', [4096]).output('y', 'f32', [4096])
            .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [4096] }).trace('y', ['x', 'y']))
          .build(instance);
        const fn = new halrt.Context(instance, [hal, module]).lookupFunction('t.f');
        const x = device.tensor(new Float32Array(4096).fill(-1), [4096]);
        const pump = () => {
          for (let i = 0; i < 8; ++i) fn.invoke([x]).then(([y]) => y.close());
          hal.flightRecorder.dump();
          setImmediate(pump);
        };
        pump();
      `;
      for (let round = 0; round < 4; ++round) {
        const worker = new Worker(`${body}; require('worker_threads').parentPort.postMessage('busy');`, { eval: true });
        await new Promise((resolve, reject) => {
          worker.once('message', resolve);
          worker.once('error', reject);
        });
        if (round % 2 === 1) await new Promise((resolve) => setTimeout(resolve, 10));
        assert.strictEqual(await worker.terminate(), 1);
      }
      assert.deepStrictEqual(await settleLiveObjects(before), before);
      const child = spawnSync(process.execPath, ['-e', `${body}; setTimeout(() => process.exit(0), 5);`], {
        encoding: 'utf8', timeout: 20000, env: { ...process.env },
      });
      assert.strictEqual(child.signal, null, child.stderr);
      assert.strictEqual(child.status, 0, child.stderr);
    });

    it('several contexts share the HAL module\'s one ring', async () => {
      const { events, sink } = recorderLog();
      const p = squareProgram(uri, { debugSink: sink, flightRecorder: { traces: 10 } });
      const other = new halrt.Context(p.instance, [p.hal, p.module]);
      const f1 = p.lookup('f');
      const f2 = other.lookupFunction('m.f');
      const x = p.device.tensor(Float32Array.from(filled(3)), [4]);
      try {
        for (const fn of [f1, f2, f1]) {
          const [y] = await fn.invoke([x]);
          y.close();
        }
        assert.strictEqual(await p.hal.flightRecorder.dump(), 6);
        assert.deepStrictEqual(events.map((e) => [e.key, e.sequence]), [['in', 1], ['sq', 1], ['in', 1], ['sq', 1], ['in', 2], ['sq', 2]]);
      } finally {
        closeAll(x, f1, f2, other);
        p.close();
      }
    });

    it('a sink that throws on a recorded trace rejects what caused the delivery', async () => {
      const p = squareProgram(uri, {
        debugSink: (key, tensors, info) => {
          if (info.recorded) throw new Error(`no room for ${key} #${info.sequence}`);
        },
        nonFinite: 'reject',
        flightRecorder: { traces: 2 },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from(filled(1)), [4]);
      const bad = p.device.tensor(Float32Array.of(NaN, 1, 1, 1), [4]);
      try {
        const [y] = await fn.invoke([x]);
        y.close();
        const dumped = await p.hal.flightRecorder.dump().then(() => null, (error) => error);
        assert.strictEqual(dumped.code, 'ABORTED');
        assert.match(dumped.message, /dump: the debug sink threw while handling a recorded trace/);
        assert.strictEqual(dumped.cause.message, 'no room for in #1');
        const failed = await fn.invoke([bad]).then(() => null, (error) => error);
        assert.strictEqual(failed.code, 'ABORTED');
        assert.strictEqual(failed.cause.message, 'no room for in #2');
        // The next invocation and dump work.
        const [z] = await fn.invoke([x]);
        z.close();
        assert.strictEqual(p.hal.flightRecorder.heldTraces, 2);
      } finally {
        closeAll(x, bad, fn);
        p.close();
      }
    });

    it('a native sink (npy) gets the recorded traces on dump()', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-recorder-'));
      const p = squareProgram(uri, { debugSink: halrt.sinks.npy(dir), flightRecorder: { traces: 3 } });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from(filled(2)), [4]);
      try {
        for (let i = 0; i < 2; ++i) {
          const [y] = await fn.invoke([x]);
          y.close();
        }
        assert.deepStrictEqual(fs.readdirSync(dir).filter((name) => name.endsWith('.npy')), []);
        assert.strictEqual(await p.hal.flightRecorder.dump(), 3);
        const index = fs.readFileSync(path.join(dir, 'index.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line));
        assert.deepStrictEqual(index.map((e) => [e.key, e.sequence]), [['sq', 1], ['in', 2], ['sq', 2]]);
      } finally {
        closeAll(x, fn);
        p.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('dispatch timings pass through', async () => {
      const timings = [];
      const traces = [];
      const p = squareProgram(uri, {
        debugSink: { trace: (key) => traces.push(key), timing: (event) => timings.push(event.op) },
        profile: true,
        flightRecorder: { traces: 4 },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from(filled(1)), [4]);
      try {
        const [y] = await fn.invoke([x]);
        y.close();
        assert.deepStrictEqual(timings, [1]);
        assert.deepStrictEqual(traces, []);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });
  });
}

describe('flight recorder: options', () => {
  const instance = new halrt.Instance();
  const device = instance.createDevice('local-sync');
  after(() => closeAll(device, instance));
  const make = (options) => new halrt.HalModule(instance, device, { debugSink: () => {}, ...options });

  it('is off by default: hal.flightRecorder is null', () => {
    const hal = make({});
    assert.strictEqual(hal.flightRecorder, null);
    hal.close();
    const again = make({ flightRecorder: null });
    assert.strictEqual(again.flightRecorder, null);
    again.close();
  });

  it('refuses bad settings naming the field', () => {
    assertThrowsHalrt(() => make({ flightRecorder: { traces: 0 } }), 'INVALID_ARGUMENT', 'options.flightRecorder.traces');
    assertThrowsHalrt(() => make({ flightRecorder: { traces: 2 ** 20 + 1 } }), 'INVALID_ARGUMENT', 'options.flightRecorder.traces');
    assertThrowsHalrt(() => make({ flightRecorder: { traces: 1.5 } }), 'INVALID_ARGUMENT', 'options.flightRecorder.traces');
    assertThrowsHalrt(() => make({ flightRecorder: { bytes: -1 } }), 'INVALID_ARGUMENT', 'options.flightRecorder.bytes');
    assertThrowsHalrt(() => make({ flightRecorder: { bytes: 2 ** 53 } }), 'INVALID_ARGUMENT', 'options.flightRecorder.bytes');
    assertThrowsHalrt(() => make({ flightRecorder: { traces: 2, bytes: 10 } }), 'INVALID_ARGUMENT', 'options.flightRecorder', 'exactly one');
    assertThrowsHalrt(() => make({ flightRecorder: {} }), 'INVALID_ARGUMENT', 'options.flightRecorder', 'exactly one');
    assertThrowsHalrt(() => make({ flightRecorder: { count: 2 } }), 'INVALID_ARGUMENT', 'options.flightRecorder');
    assertThrowsHalrt(() => make({ flightRecorder: 3 }), 'INVALID_ARGUMENT', 'options.flightRecorder');
    assertThrowsHalrt(() => new halrt.HalModule(instance, device, { flightRecorder: { traces: 2 } }),
      'INVALID_ARGUMENT', 'options.flightRecorder needs options.debugSink');
  });

  it('needs a sink that takes traces: one of only timing and invocation methods is refused, nothing kept', async () => {
    const baseline = await liveBaseline();
    for (const debugSink of [{ timing() {} }, halrt.sinks.tee({ timing() {} }, { invocation() {} })]) {
      assertThrowsHalrt(() => new halrt.HalModule(instance, device, { debugSink, flightRecorder: { traces: 2 } }),
        'INVALID_ARGUMENT', 'options.flightRecorder needs a debugSink that takes traces');
    }
    for (const debugSink of [() => {}, { trace() {} }, halrt.sinks.stats(() => {}), halrt.sinks.tee({ timing() {} }, halrt.sinks.stdio())]) {
      new halrt.HalModule(instance, device, { debugSink, flightRecorder: { traces: 2 } }).close();
    }
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });
});

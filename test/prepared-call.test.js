'use strict';
// fn.prepare(inputs) and call.run(): results against fn.invoke() on the same
// inputs, outputs written in place (and zeroed where the function does not
// write them whole), many runs in flight, traces, every bad input, close()
// mid-flight, and what a collected call leaves behind.
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const { Worker } = require('worker_threads');
const halrt = require('..');
const {
  DEVICE_URIS, assertThrowsHalrt, assertRejectsHalrt, closeAll, makeProgram, randomFloats, liveBaseline,
  settleLiveObjects,
} = require('./helpers');

const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose');

// c = a + b and d = relu(c) on f32[n].
function addRelu(n) {
  return (b) => b.function('f', (f) => f
    .input('a', 'f32', [n]).input('b', 'f32', [n]).output('c', 'f32', [n]).output('d', 'f32', [n])
    .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'b', 'c'], constants: [n] })
    .dispatch('k.relu_f32', { workgroups: [1], bindings: ['c', 'd'], constants: [n] }));
}

// y = a + b over the first `written` of `n` elements: the rest of y is
// whatever a new buffer holds, zeros.
function partial(n, written) {
  return (b) => b.function('f', (f) => f
    .input('a', 'f32', [n]).input('b', 'f32', [n]).output('y', 'f32', [n])
    .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'b', 'y'], constants: [written] }));
}

const readAll = (views) => Promise.all(views.map((view) => view.read()));
const LIB = JSON.stringify(path.join(__dirname, '..'));

describe('PreparedCall', () => {
  for (const uri of DEVICE_URIS) {
    describe(uri, () => {
      it('runs give what invoke() gives, in the same output views every time', async () => {
        const n = 37;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = p.device.tensor(randomFloats(n, 1), [n]);
        const b = p.device.tensor(randomFloats(n, 2), [n]);
        try {
          const call = fn.prepare([a, b]);
          assert.ok(call instanceof halrt.PreparedCall);
          assert.strictEqual(call.function, fn);
          assert.ok(Object.isFrozen(call.outputs));
          assert.strictEqual(call.outputs.length, 2);
          const [c, d] = call.outputs;
          assert.deepStrictEqual(c.shape, [n]);
          assert.strictEqual(d.dtype, 'f32');
          assert.deepStrictEqual(await readAll(call.outputs), [new Float32Array(n), new Float32Array(n)], 'zeros before the first run');
          assert.strictEqual(await call.run(), undefined);
          const expected = await fn.invoke([a, b]);
          assert.deepStrictEqual(await readAll(call.outputs), await readAll(expected));
          assert.strictEqual(call.outputs[0], c, 'the same objects');
          // The call holds its inputs' buffers: new data written into them
          // is what the next run reads.
          const a2 = p.device.tensor(randomFloats(n, 3), [n]);
          await p.device.copy(a2, a);
          await call.run();
          const again = await fn.invoke([a2, b]);
          assert.deepStrictEqual(await readAll(call.outputs), await readAll(again));
          assert.match(String(call), /^PreparedCall\(m\.f\)$/);
          call.close();
          assert.ok(call.closed);
          assert.ok(c.closed && d.closed, 'close() closes the outputs');
          closeAll(expected, again, a2);
        } finally {
          closeAll(a, b, fn);
          p.close();
        }
      });

      it('takes host data and named inputs, and keeps its inputs after their views close', async () => {
        const n = 8;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = Float32Array.from({ length: n }, (_, i) => i - 4);
        const b = new Float32Array(n).fill(1);
        try {
          const named = fn.prepare({ b, a });
          await named.run();
          assert.deepStrictEqual(await named.outputs[1].read(), Float32Array.from(a, (v) => Math.max(v + 1, 0)));
          const av = p.device.tensor(a, [n]);
          const bv = p.device.tensor(b, [n]);
          const views = fn.prepare([av, bv]);
          closeAll(av, bv);
          await views.run();
          assert.deepStrictEqual(await views.outputs[0].read(), Float32Array.from(a, (v) => v + 1));
          closeAll(named, views);
        } finally {
          fn.close();
          p.close();
        }
      });

      it('zeroes an output the function does not write whole before each run, as a new buffer is', async () => {
        const p = makeProgram(uri, partial(8, 4));
        const fn = p.lookup('f');
        const a = p.device.tensor(Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8), [8]);
        const b = p.device.tensor(new Float32Array(8).fill(10), [8]);
        const nines = p.device.tensor(new Float32Array(8).fill(9), [8]);
        try {
          const call = fn.prepare([a, b]);
          const [y] = call.outputs;
          const want = Float32Array.of(11, 12, 13, 14, 0, 0, 0, 0);
          for (let i = 0; i < 3; ++i) {
            await p.device.copy(nines, y); // whatever the output held
            await call.run();
            assert.deepStrictEqual(await y.read(), want, `run ${i}`);
          }
          const [fresh] = await fn.invoke([a, b]);
          assert.deepStrictEqual(await fresh.read(), want);
          closeAll(fresh, call);
        } finally {
          closeAll(a, b, nines, fn);
          p.close();
        }
      });

      it('chains: a call on another call\'s outputs reads its latest results', async () => {
        const n = 5;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = p.device.tensor(Float32Array.of(-2, -1, 0, 1, 2), [n]);
        const b = p.device.tensor(new Float32Array(n).fill(1), [n]);
        try {
          const first = fn.prepare([a, b]);
          const second = fn.prepare(first.outputs); // (a + b) + relu(a + b)
          await first.run();
          await second.run();
          assert.deepStrictEqual(await second.outputs[0].read(), Float32Array.of(-1, 0, 2, 4, 6));
          await p.device.copy(b, a); // a = 1s
          await first.run();
          await second.run();
          assert.deepStrictEqual(await second.outputs[0].read(), new Float32Array(n).fill(4));
          closeAll(second, first);
        } finally {
          closeAll(a, b, fn);
          p.close();
        }
      });

      it('runs many in flight, in order; each settles after its trace, with its own sequence number', async () => {
        const n = 16;
        const seen = [];
        const p = makeProgram(uri, (b) => b.function('f', (f) => f
          .input('a', 'f32', [n]).input('b', 'f32', [n]).output('c', 'f32', [n])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'b', 'c'], constants: [n] })
          .trace('sum', ['c'])), { hal: { debugSink: (key, tensors, info) => seen.push(info.sequence) } });
        const fn = p.lookup('f');
        const a = p.device.tensor(randomFloats(n, 5), [n]);
        const b = p.device.tensor(randomFloats(n, 6), [n]);
        try {
          const call = fn.prepare([a, b]);
          const settled = [];
          const runs = Array.from({ length: 64 }, (_, i) => call.run().then(() => settled.push([i, seen.length])));
          await Promise.all(runs);
          assert.deepStrictEqual(settled.map(([i]) => i), Array.from({ length: 64 }, (_, i) => i));
          for (const [i, traces] of settled) assert.ok(traces >= i + 1, `run ${i} settled before its trace`);
          assert.deepStrictEqual(seen, Array.from({ length: 64 }, (_, i) => i + 1));
          const [expected] = await fn.invoke([a, b]);
          assert.deepStrictEqual(await call.outputs[0].read(), await expected.read());
          closeAll(expected, call);
        } finally {
          closeAll(a, b, fn);
          p.close();
        }
      });

      it('refuses bad inputs when prepared, as invoke() does, and bad runs as rejections', async () => {
        const n = 4;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = p.device.tensor(new Float32Array(n), [n]);
        const short = p.device.tensor(new Float32Array(3), [3]);
        const ints = p.device.empty([n], 'i32');
        try {
          assertThrowsHalrt(() => fn.prepare([a]), 'INVALID_ARGUMENT', 'function.prepare', 'takes 2 inputs (got 1)');
          assertThrowsHalrt(() => fn.prepare([a, short]), 'INVALID_ARGUMENT', "input 1 ('b') must have shape [4] (got [3])");
          assertThrowsHalrt(() => fn.prepare([a, ints]), 'INVALID_ARGUMENT', "input 1 ('b') must be f32 (got i32)");
          assertThrowsHalrt(() => fn.prepare([a, 'x']), 'INVALID_ARGUMENT', 'function.prepare: inputs[1] is not a BufferView');
          assertThrowsHalrt(() => fn.prepare({ a }), 'INVALID_ARGUMENT', "function.prepare: m.f: input 'b' is missing");
          assertThrowsHalrt(() => fn.prepare(), 'INVALID_ARGUMENT', 'function.prepare', 'inputs');
          assertThrowsHalrt(() => halrt.Function.prototype.prepare.call({}, [a, a]), 'INVALID_ARGUMENT', '`this` is not a Function');
          assertThrowsHalrt(() => new halrt.PreparedCall(), 'INVALID_ARGUMENT', 'use function.prepare(inputs)');
          const call = fn.prepare([a, a]);
          await assertRejectsHalrt(call.run(a), 'INVALID_ARGUMENT', 'preparedCall.run takes no arguments (got 1)');
          await assertRejectsHalrt(halrt.PreparedCall.prototype.run.call({}), 'INVALID_ARGUMENT', '`this` is not a PreparedCall');
          await halrt.PreparedCall.prototype.run.call(call); // the prototype's run on the object
          call.outputs[1].close();
          await assertRejectsHalrt(call.run(), 'FAILED_PRECONDITION', 'outputs[1] is closed');
          call.close();
          call.close(); // idempotent
          await assertRejectsHalrt(call.run(), 'FAILED_PRECONDITION', 'preparedCall.run: PreparedCall is closed');
          const detached = fn.prepare([a, a]);
          const { run } = detached;
          await run();
          detached[dispose]();
          await assertRejectsHalrt(run(), 'FAILED_PRECONDITION', 'PreparedCall is closed');
        } finally {
          closeAll(a, short, ints, fn);
          p.close();
        }
      });

      it('rejects runs once its function or context is closed, and prepares nothing then', async () => {
        const n = 4;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const other = p.lookup('f');
        const a = p.device.tensor(new Float32Array(n), [n]);
        try {
          const call = fn.prepare([a, a]);
          const otherCall = other.prepare([a, a]);
          fn.close();
          await assertRejectsHalrt(call.run(), 'FAILED_PRECONDITION', 'preparedCall.run: its function Function is closed');
          assertThrowsHalrt(() => fn.prepare([a, a]), 'FAILED_PRECONDITION', 'function.prepare: Function is closed');
          p.context.close();
          await assertRejectsHalrt(otherCall.run(), 'FAILED_PRECONDITION', 'its context Context is closed');
          assertThrowsHalrt(() => other.prepare([a, a]), 'FAILED_PRECONDITION', 'its context Context is closed');
          closeAll(call, otherCall);
        } finally {
          closeAll(a, other);
          p.close();
        }
      });

      it('closing the call with runs in flight settles them; their results go nowhere', async () => {
        const n = 1 << 16;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = p.device.tensor(randomFloats(n, 7), [n]);
        try {
          const call = fn.prepare([a, a]);
          const runs = Array.from({ length: 8 }, () => call.run());
          call.close();
          assert.deepStrictEqual(await Promise.all(runs), new Array(8).fill(undefined));
          assert.ok(call.outputs.every((view) => view.closed));
        } finally {
          closeAll(a, fn);
          p.close();
        }
      });

      it('frees what it holds once closed or collected, runs in flight included', async () => {
        const n = 64;
        const p = makeProgram(uri, addRelu(n));
        const fn = p.lookup('f');
        const a = p.device.tensor(randomFloats(n, 8), [n]);
        const baseline = await liveBaseline();
        // Not in the async function: its suspended frame would keep the last
        // call reachable.
        const prepareAndDrop = (i) => {
          const call = fn.prepare([a, p.device.tensor(randomFloats(n, i), [n])]);
          call.run(); // dropped in flight
          if (i % 2 === 0) call.close();
        };
        try {
          for (let i = 0; i < 50; ++i) prepareAndDrop(i);
          assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
        } finally {
          closeAll(a, fn);
          p.close();
        }
      });
      it('its bound run keeps the call and its outputs alive; the two are collected together', async () => {
        const n = 8;
        const p = makeProgram(uri, addRelu(n));
        const a = p.device.tensor(randomFloats(n, 11), [n]);
        const expected = Array.from(await a.read(), (x) => x + x);
        const baseline = await liveBaseline();
        // Made outside the async function (its frame would keep the call);
        // only `run`, one output and weak references leave it.
        const keepRun = () => {
          const fn = p.lookup('f');
          const call = fn.prepare([a, a]);
          return { run: call.run, c: call.outputs[0], call: new WeakRef(call), d: new WeakRef(call.outputs[1]) };
        };
        try {
          const held = keepRun();
          const { call, d } = held;
          for (let i = 0; i < 3; ++i) {
            await new Promise((resolve) => setTimeout(resolve, 5));
            global.gc();
            assert.strictEqual(await held.run(), undefined, `run ${i} after a full collection`);
            assert.deepStrictEqual(Array.from(await held.c.read()), expected);
            assert.ok(call.deref() !== undefined && d.deref() !== undefined, 'kept by run');
          }
          held.run = null;
          held.c = null;
          // deref() keeps its target for the rest of the job: collect first.
          for (let i = 0; i < 20; ++i) {
            await new Promise((resolve) => setTimeout(resolve, 5));
            global.gc();
            if (call.deref() === undefined) break;
          }
          assert.strictEqual(call.deref(), undefined, 'collected with its run');
          assert.strictEqual(d.deref(), undefined);
          assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
        } finally {
          closeAll(a);
          p.close();
        }
      });
    });
  }

  it('an input on another device: each run rejects, naming it', async () => {
    const p = makeProgram('local-sync', addRelu(4));
    const other = p.instance.createDevice('local-task?workers=2');
    const fn = p.lookup('f');
    const a = p.device.tensor(new Float32Array(4), [4]);
    const b = other.tensor(new Float32Array(4), [4]);
    try {
      const call = fn.prepare([a, b]);
      await assertRejectsHalrt(call.run(), 'INVALID_ARGUMENT', 'preparedCall.run', "input 1 ('b') is on another device");
      await assertRejectsHalrt(call.run(), 'INVALID_ARGUMENT', "input 1 ('b') is on another device");
      call.close();
    } finally {
      closeAll(a, b, other, fn);
      p.close();
    }
  });

  it("a host function: each run writes its results into the same output views, which another call reads", async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task?workers=2');
    let k = 0;
    const host = new halrt.HostModule(instance, 'host', {
      f: {
        inputs: [{ name: 'x', dtype: 'f32', shape: [2] }],
        outputs: [{ name: 'y', dtype: 'f32', shape: [2] }],
        impl: (x) => x.data.map((v) => v + k++),
      },
    });
    const hal = new halrt.HalModule(instance, device);
    const context = new halrt.Context(instance, [hal, host]);
    const fn = context.lookupFunction('host.f');
    try {
      const call = fn.prepare([Float32Array.of(10, 20)]);
      const [y] = call.outputs;
      const chained = fn.prepare(call.outputs); // y + k, k++
      await call.run();
      assert.deepStrictEqual(await y.read(), Float32Array.of(10, 21));
      await call.run();
      assert.strictEqual(call.outputs[0], y);
      assert.deepStrictEqual(await y.read(), Float32Array.of(12, 23));
      await chained.run();
      assert.deepStrictEqual(await chained.outputs[0].read(), Float32Array.of(16, 28));
      closeAll(chained, call);
    } finally {
      closeAll(fn, context, host, hal, device, instance);
    }
  });

  it('a worker that ends with runs in flight, and process.exit mid-run: nothing left, no crash', async () => {
    const before = await liveBaseline();
    const script = `
      const halrt = require(${LIB});
      const { parentPort } = require('worker_threads');
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const hal = new halrt.HalModule(instance, device, { debugSink: () => {} });
      const n = 1 << 16;
      const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('a', 'f32', [n]).output('c', 'f32', [n])
          .dispatch('k.add_f32', { workgroups: [4], bindings: ['a', 'a', 'c'], constants: [n] })
          .trace('t', ['c']))
        .build(instance);
      const call = new halrt.Context(instance, [hal, module]).lookupFunction('m.f').prepare([new Float32Array(n)]);
      const again = () => call.run().then(again, () => {});
      for (let i = 0; i < 16; ++i) again();
      parentPort.postMessage('running');`;
    const worker = new Worker(script, { eval: true });
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await worker.terminate();
    assert.deepStrictEqual(await settleLiveObjects(before), before);
    const exit = spawnSync(process.execPath, ['-e', `
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const module = new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('a', 'f32', [4]).output('c', 'f32', [4])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'a', 'c'], constants: [4] }))
        .build(instance);
      const call = new halrt.Context(instance, [new halrt.HalModule(instance, device), module]).lookupFunction('m.f').prepare([[1, 2, 3, 4]]);
      let runs = 0;
      const again = () => call.run().then(() => { if (++runs === 100) process.exit(7); again(); });
      for (let i = 0; i < 8; ++i) again();`], { encoding: 'utf8', timeout: 20000 });
    assert.strictEqual(exit.signal, null, exit.stderr);
    assert.strictEqual(exit.status, 7, exit.stderr);
  });
});

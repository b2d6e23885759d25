'use strict';
// Modules, contexts and functions: building and loading modules, linking
// them, invoking functions (values checked against JavaScript references),
// cancellation, and every kind of bad input.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const halrt = require('..');
const {
  BUILTIN, DEVICE_URIS, SLEEP_PTX, assertThrowsHalrt, assertRejectsHalrt, assertClose, closeAll, makeProgram, randomFloats,
  inChild, liveBaseline, reference, settleLiveObjects, unreadableFiles, waitFor,
} = require('./helpers');

const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose');

// matmul -> add -> relu, every intermediate an output.
function mlp(M, K, N, workgroups = [1, 1, 1]) {
  return (b) => b.function('main', (f) => f
    .input('x', 'f32', [M, K]).input('w', 'f32', [K, N]).input('bias', 'f32', [M, N])
    .output('y', 'f32', [M, N]).output('t', 'f32', [M, N]).output('u', 'f32', [M, N])
    .dispatch('k.matmul_f32', { workgroups, bindings: ['x', 'w', 't'], constants: [M, K, N] })
    .dispatch('k.add_f32', { workgroups: [3], bindings: ['t', 'bias', 'u'], constants: [M * N] })
    .dispatch('k.relu_f32', { workgroups: [2], bindings: ['u', 'y'], constants: [M * N] }));
}

describe('Module', () => {
  let instance;
  before(() => {
    instance = new halrt.Instance();
  });
  after(() => instance.close());

  it('ModuleBuilder.toObject() is the halrt.module/1 description the builder was given', () => {
    const object = new halrt.ModuleBuilder('mlp')
      .executable('k', { local: { builtin: true } })
      .function('main', (f) => f
        .input('x', 'f32', [2, 3]).output('y', 'f32', [2, 3]).local('t', 'i32', [4])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [6] })
        .dispatch('k.axpy_f32', { workgroups: [1, 1], bindings: ['x', 'x', 'y'], constants: [6, { f32: 0.5 }], workgroupSize: [32] })
        .fill('t', 7).copy('x', 'y').barrier().trace('after', ['y', 't']))
      .toObject();
    assert.deepStrictEqual(object, {
      format: 'halrt.module/1',
      name: 'mlp',
      executables: { k: { local: { builtin: true } } },
      functions: {
        main: {
          inputs: [{ name: 'x', dtype: 'f32', shape: [2, 3] }],
          outputs: [{ name: 'y', dtype: 'f32', shape: [2, 3] }],
          locals: [{ name: 't', dtype: 'i32', shape: [4] }],
          body: [
            { op: 'dispatch', kernel: 'k.relu_f32', workgroups: [1], bindings: ['x', 'y'], constants: [6] },
            { op: 'dispatch', kernel: 'k.axpy_f32', workgroups: [1, 1], bindings: ['x', 'x', 'y'], constants: [6, { f32: 0.5 }], workgroupSize: [32] },
            { op: 'fill', target: 't', value: 7 },
            { op: 'copy', source: 'x', target: 'y' },
            { op: 'barrier' },
            { op: 'trace', key: 'after', values: ['y', 't'] },
          ],
        },
      },
    });
  });

  it('toObject() returns a deep copy each call', () => {
    const builder = new halrt.ModuleBuilder('m').function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1));
    const first = builder.toObject();
    first.functions.f.body.push({ op: 'barrier' });
    assert.strictEqual(builder.toObject().functions.f.body.length, 1);
    assert.notStrictEqual(builder.toObject(), builder.toObject());
  });

  it('name and functions describe the module (signatures in declaration order)', () => {
    const module = new halrt.ModuleBuilder('two')
      .executable('k', { local: { builtin: true } })
      .function('first', (f) => f.input('a', 'i32', [3]).input('b', 'i32', [3]).output('c', 'i32', [3])
        .dispatch('k.add_i32', { workgroups: [1], bindings: ['a', 'b', 'c'], constants: [3] }))
      .function('second', (f) => f.output('s', 'bool', []).local('t', 'f64', [2, 2]).fill('s', 1))
      .build(instance);
    try {
      assert.strictEqual(module.name, 'two');
      assert.deepStrictEqual(module.functions, [
        {
          name: 'first',
          inputs: [{ name: 'a', dtype: 'i32', shape: [3] }, { name: 'b', dtype: 'i32', shape: [3] }],
          outputs: [{ name: 'c', dtype: 'i32', shape: [3] }],
        },
        { name: 'second', inputs: [], outputs: [{ name: 's', dtype: 'bool', shape: [] }] },
      ]);
      assert.notStrictEqual(module.functions, module.functions, 'a fresh array each time');
    } finally {
      module.close();
    }
  });

  it('Module.load, fromObject and fromJson make the same module', () => {
    const object = new halrt.ModuleBuilder('same').executable('k', { local: { builtin: true } })
      .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [4] }))
      .toObject();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-module-'));
    const file = path.join(dir, 'same.halrt.json');
    fs.writeFileSync(file, JSON.stringify(object, null, 2));
    const modules = [];
    try {
      modules.push(halrt.Module.load(instance, file));
      modules.push(halrt.Module.fromObject(instance, object));
      modules.push(halrt.Module.fromObject(instance, object, { baseDir: dir }));
      modules.push(halrt.Module.fromJson(instance, JSON.stringify(object)));
      modules.push(halrt.Module.fromJson(instance, JSON.stringify(object), dir));
      for (const module of modules) {
        assert.ok(module instanceof halrt.Module);
        assert.strictEqual(module.name, 'same');
        assert.deepStrictEqual(module.functions, modules[0].functions);
      }
    } finally {
      closeAll(modules);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('close() is idempotent, [Symbol.dispose] closes, and a closed Module refuses name and functions', () => {
    const module = new halrt.ModuleBuilder('c').function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
    module.close();
    module.close();
    module[dispose]();
    assertThrowsHalrt(() => module.name, 'FAILED_PRECONDITION', 'module.name: Module is closed');
    assertThrowsHalrt(() => module.functions, 'FAILED_PRECONDITION', 'module.functions: Module is closed');
  });
});

describe('Context and Function', () => {
  for (const uri of DEVICE_URIS) {
    describe(uri, () => {
      it('exposes its frozen modules, and functions with name, context and signature', () => {
        const p = makeProgram(uri, mlp(2, 3, 4));
        try {
          assert.ok(Array.isArray(p.context.modules));
          assert.ok(Object.isFrozen(p.context.modules));
          assert.strictEqual(p.context.modules.length, 2);
          assert.strictEqual(p.context.modules[0], p.hal);
          assert.strictEqual(p.context.modules[1], p.module);
          assert.strictEqual(p.hal.name, 'hal');
          assert.strictEqual(p.hal.device, p.device);
          assert.strictEqual(p.hal.debugSink, null);
          assert.strictEqual(p.hal.traceDispatches, false);
          const fn = p.lookup('main');
          assert.ok(fn instanceof halrt.Function);
          assert.strictEqual(fn.name, 'm.main');
          assert.strictEqual(fn.context, p.context);
          assert.deepStrictEqual(fn.inputs, [
            { name: 'x', dtype: 'f32', shape: [2, 3] },
            { name: 'w', dtype: 'f32', shape: [3, 4] },
            { name: 'bias', dtype: 'f32', shape: [2, 4] },
          ]);
          assert.deepStrictEqual(fn.outputs, ['y', 't', 'u'].map((name) => ({ name, dtype: 'f32', shape: [2, 4] })));
          const again = p.lookup('main');
          assert.notStrictEqual(again, fn, 'each lookup makes a new Function');
          closeAll(fn, again);
        } finally {
          p.close();
        }
      });

      for (const [M, K, N, workgroups] of [[1, 1, 1, [1, 1, 1]], [3, 5, 2, [2, 2, 1]], [17, 9, 33, [4, 3, 1]], [64, 48, 40, [5, 7, 1]]]) {
        it(`matmul -> add -> relu outputs equal the JavaScript reference (${M}x${K}x${N})`, async () => {
          const p = makeProgram(uri, mlp(M, K, N, workgroups));
          const fn = p.lookup('main');
          const x = randomFloats(M * K, 1 + M);
          const w = randomFloats(K * N, 2 + N);
          const bias = randomFloats(M * N, 3 + K);
          const inputs = [p.device.tensor(x, [M, K]), p.device.tensor(w, [K, N]), p.device.tensor(bias, [M, N])];
          try {
            const outputs = await fn.invoke(inputs);
            assert.strictEqual(outputs.length, 3);
            for (const output of outputs) {
              assert.ok(output instanceof halrt.BufferView);
              assert.deepStrictEqual(output.shape, [M, N]);
              assert.strictEqual(output.dtype, 'f32');
            }
            const [y, t, u] = await Promise.all(outputs.map((o) => o.read()));
            const tRef = reference.matmul(x, w, M, K, N);
            assertClose(t, tRef, { what: 't' });
            const uRef = reference.elementwise(t, bias, (a, b) => a + b, Float32Array);
            assert.deepStrictEqual(u, uRef, 'add_f32 is exact f32 addition');
            assert.deepStrictEqual(y, reference.relu(u), 'relu_f32');
            closeAll(outputs);
          } finally {
            closeAll(inputs, fn);
            p.close();
          }
        });
      }

      it('softmax_rows_f32 and reduce_sum_f32 outputs equal the JavaScript reference', async () => {
        const rows = 7;
        const cols = 13;
        const p = makeProgram(uri, (b) => b.function('stats', (f) => f
          .input('x', 'f32', [rows, cols]).output('s', 'f32', [rows, cols]).output('r', 'f32', [rows])
          .dispatch('k.softmax_rows_f32', { workgroups: [3], bindings: ['x', 's'], constants: [rows, cols] })
          .dispatch('k.reduce_sum_f32', { workgroups: [2], bindings: ['x', 'r'], constants: [rows, cols] })));
        const fn = p.lookup('stats');
        const x = randomFloats(rows * cols, 9, 30);
        const input = p.device.tensor(x, [rows, cols]);
        try {
          const [s, r] = await fn.invoke([input]);
          assertClose(await s.read(), reference.softmaxRows(x, rows, cols), { rtol: 1e-5, atol: 1e-7, what: 'softmax' });
          assertClose(await r.read(), reference.reduceSum(x, rows, cols), { rtol: 1e-5, atol: 1e-5, what: 'reduce' });
          closeAll(s, r);
        } finally {
          closeAll(input, fn);
          p.close();
        }
      });

      it('i32 kernels wrap modulo 2^32 like JavaScript Int32Array arithmetic', async () => {
        const n = 11;
        const p = makeProgram(uri, (b) => b.function('ints', (f) => f
          .input('a', 'i32', [n]).input('b', 'i32', [n])
          .output('sum', 'i32', [n]).output('max', 'i32', [n]).output('diff', 'i32', [n]).output('prod', 'i32', [n])
          .dispatch('k.add_i32', { workgroups: [4], bindings: ['a', 'b', 'sum'], constants: [n] })
          .dispatch('k.max_i32', { workgroups: [1], bindings: ['a', 'b', 'max'], constants: [n] })
          .dispatch('k.sub_i32', { workgroups: [2], bindings: ['a', 'b', 'diff'], constants: [n] })
          .dispatch('k.mul_i32', { workgroups: [11], bindings: ['a', 'b', 'prod'], constants: [n] })));
        const fn = p.lookup('ints');
        const a = Int32Array.from([2147483647, -2147483648, 0, -1, 5, 100000, -7, 3, 65536, 1, -2]);
        const b = Int32Array.from([1, -1, 0, -1, -9, 100000, 7, 3, 65536, 2147483647, -2147483648]);
        const inputs = [p.device.tensor(a, [n]), p.device.tensor(b, [n])];
        try {
          const outputs = await fn.invoke(inputs);
          const [sum, max, diff, prod] = await Promise.all(outputs.map((o) => o.read()));
          assert.deepStrictEqual(sum, reference.elementwise(a, b, (x, y) => x + y, Int32Array));
          assert.deepStrictEqual(max, reference.elementwise(a, b, Math.max, Int32Array));
          assert.deepStrictEqual(diff, reference.elementwise(a, b, (x, y) => x - y, Int32Array));
          assert.deepStrictEqual(prod, reference.elementwise(a, b, Math.imul, Int32Array));
          assert.strictEqual(sum[0], -2147483648, 'INT32_MAX + 1 wraps');
          closeAll(outputs);
        } finally {
          closeAll(inputs, fn);
          p.close();
        }
      });

      it('fill stores its value in each dtype and copy moves bytes unchanged', async () => {
        const p = makeProgram(uri, (b) => b.function('fills', (f) => f
          .input('src', 'u16', [2, 3])
          .output('f64', 'f64', [3]).output('i8', 'i8', [2, 2]).output('u16', 'u16', [5]).output('bool', 'bool', [4])
          .output('f16', 'f16', [3]).output('bf16', 'bf16', [2]).output('i64', 'i64', [2]).output('scalar', 'u32', [])
          .output('copied', 'u16', [2, 3])
          .fill('f64', Math.PI).fill('i8', -128).fill('u16', 65535).fill('bool', true)
          .fill('f16', 1.5).fill('bf16', -2).fill('i64', -9007199254740991).fill('scalar', 4294967295)
          .copy('src', 'copied')));
        const fn = p.lookup('fills');
        const src = Uint16Array.from([1, 2, 3, 65535, 0, 7]);
        const input = p.device.tensor(src, [2, 3]);
        try {
          const outputs = await fn.invoke([input]);
          const values = await Promise.all(outputs.map((o) => o.read()));
          assert.deepStrictEqual(values, [
            new Float64Array(3).fill(Math.PI),
            new Int8Array(4).fill(-128),
            new Uint16Array(5).fill(65535),
            new Uint8Array(4).fill(1),
            new Uint16Array(3).fill(0x3e00),
            new Uint16Array(2).fill(0xc000),
            new BigInt64Array(2).fill(-9007199254740991n),
            new Uint32Array([4294967295]),
            src,
          ]);
          assert.deepStrictEqual(outputs.map((o) => o.shape), [[3], [2, 2], [5], [4], [3], [2], [2], [], [2, 3]]);
          closeAll(outputs);
        } finally {
          closeAll(input, fn);
          p.close();
        }
      });

      it('one module linked into two contexts runs independently in each', async () => {
        const instance = new halrt.Instance();
        const devices = [instance.createDevice(uri), instance.createDevice('local-sync')];
        const module = new halrt.ModuleBuilder('shared').executable('k', BUILTIN)
          .function('double', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
            .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [3] }))
          .build(instance);
        const hals = devices.map((device) => new halrt.HalModule(instance, device));
        const contexts = hals.map((hal) => new halrt.Context(instance, [hal, module]));
        const fns = contexts.map((context) => context.lookupFunction('shared.double'));
        const inputs = devices.map((device, i) => device.tensor(Float32Array.from([i, 1.5, -3]), [3]));
        try {
          const results = await Promise.all(fns.map((fn, i) => fn.invoke([inputs[i]])));
          assert.deepStrictEqual(await results[0][0].read(), Float32Array.from([0, 3, -6]));
          assert.deepStrictEqual(await results[1][0].read(), Float32Array.from([2, 3, -6]));
          closeAll(results);
        } finally {
          closeAll(inputs, fns, contexts, hals, module, devices, instance);
        }
      });

      it('the event loop keeps turning while a long function runs', async function () {
        this.timeout(30000);
        // On CUDA the time is sleep_ms's: a GPU does 24 matmuls of 512 in
        // about a millisecond, and the test double runs each of their
        // threads in turn, which takes half a minute.
        const onCuda = uri === 'cuda';
        const N = onCuda ? 128 : 512;
        const p = makeProgram(uri, (b) => {
          if (onCuda) b.executable('s', { cuda: { ptx: { text: SLEEP_PTX } } });
          b.function('long', (f) => {
            f.input('a', 'f32', [N, N]).input('b', 'f32', [N, N]).output('c', 'f32', [N, N]);
            if (onCuda) {
              f.dispatch('s.sleep_ms', { workgroups: [1], workgroupSize: [1], bindings: ['c'], constants: [300] });
            }
            for (let i = 0; i < (onCuda ? 1 : 24); ++i) {
              f.dispatch('k.matmul_f32', { workgroups: [4, 4, 1], bindings: ['a', 'b', 'c'], constants: [N, N, N] });
            }
          });
        });
        const fn = p.lookup('long');
        const a = p.device.tensor(new Float32Array(N * N).fill(0.5), [N, N]);
        const b = p.device.tensor(new Float32Array(N * N).fill(2), [N, N]);
        let timerFired = 0;
        const interval = setInterval(() => {
          timerFired += 1;
        }, 1);
        try {
          const started = process.hrtime.bigint();
          const pending = fn.invoke([a, b]);
          const issueMs = Number(process.hrtime.bigint() - started) / 1e6;
          const [c] = await pending;
          const totalMs = Number(process.hrtime.bigint() - started) / 1e6;
          clearInterval(interval);
          assert.ok(issueMs < totalMs / 2, `invoke() returned after ${issueMs} ms of a ${totalMs} ms invocation`);
          assert.ok(timerFired >= 1, `a 1 ms interval fired ${timerFired} times during a ${totalMs} ms invocation`);
          const values = await c.read();
          assert.strictEqual(values[0], N);
          assert.strictEqual(values[N * N - 1], N);
          c.close();
        } finally {
          clearInterval(interval);
          closeAll(a, b, fn);
          p.close();
        }
      });

      it('an already-aborted signal rejects with CANCELLED without running the function', async () => {
        const traces = [];
        const p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'i32', [2]).fill('y', 3).trace('y', ['y'])),
          { hal: { debugSink: (key) => traces.push(key) } });
        const fn = p.lookup('f');
        try {
          const controller = new AbortController();
          const reason = new Error('not now');
          controller.abort(reason);
          await assert.rejects(fn.invoke([], { signal: controller.signal }), (error) => {
            assert.ok(error instanceof halrt.HalrtError);
            assert.strictEqual(error.code, 'CANCELLED');
            assert.match(error.message, /m\.f: the invocation was aborted/);
            assert.strictEqual(error.cause, reason);
            return true;
          });
          // Had it run, its trace would arrive before this timer.
          await new Promise((resolve) => setTimeout(resolve, 20));
          assert.deepStrictEqual(traces, [], 'nothing ran');
          // The function still works, and only its own trace arrives.
          const [y] = await fn.invoke([], {});
          assert.deepStrictEqual(await y.read(), new Int32Array([3, 3]));
          y.close();
          assert.deepStrictEqual(traces, ['y']);
        } finally {
          fn.close();
          p.close();
        }
      });

      it('aborting during flight rejects with CANCELLED; the work still finishes and its outputs are closed', async () => {
        const traces = [];
        const N = 256;
        const p = makeProgram(uri, (b) => b.function('f', (f) => f
          .input('a', 'f32', [N, N]).output('c', 'f32', [N, N])
          .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['a', 'a', 'c'], constants: [N, N, N] })
          .trace('done', ['c'])), { hal: { debugSink: (key) => traces.push(key) } });
        const fn = p.lookup('f');
        const a = p.device.tensor(new Float32Array(N * N).fill(1), [N, N]);
        try {
          const baseline = await liveBaseline();
          const controller = new AbortController();
          const pending = fn.invoke([a], { signal: controller.signal });
          controller.abort();
          await assert.rejects(pending, (error) => {
            assert.ok(error instanceof halrt.HalrtError);
            assert.strictEqual(error.code, 'CANCELLED');
            assert.strictEqual(error.cause, controller.signal.reason);
            return true;
          });
          await waitFor(() => traces.length === 1, 10000, 'the trace of the aborted invocation');
          assert.deepStrictEqual(await settleLiveObjects(baseline), baseline, 'the unseen outputs were closed');
          // A signal that is never aborted changes nothing.
          const [c] = await fn.invoke([a], { signal: new AbortController().signal });
          assert.strictEqual((await c.read())[0], N);
          c.close();
        } finally {
          closeAll(a, fn);
          p.close();
        }
      });

      it('close() is idempotent and [Symbol.dispose] closes Context, Function and HalModule', async () => {
        const p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'u8', [1]).fill('y', 9)));
        const fn = p.lookup('f');
        const other = p.lookup('f');
        fn[dispose]();
        fn.close();
        await assertRejectsHalrt(fn.invoke([]), 'FAILED_PRECONDITION', 'function.invoke: Function is closed');
        p.context[dispose]();
        p.context.close();
        assertThrowsHalrt(() => p.context.lookupFunction('m.f'), 'FAILED_PRECONDITION',
          'context.lookupFunction: Context is closed');
        await assertRejectsHalrt(other.invoke([]), 'FAILED_PRECONDITION', 'function.invoke', 'Context is closed');
        p.hal[dispose]();
        p.hal.close();
        assert.strictEqual(p.hal.name, 'hal');
        assertThrowsHalrt(() => new halrt.Context(p.instance, [p.hal, p.module]), 'FAILED_PRECONDITION',
          'new Context: modules[0] HalModule is closed');
        other.close();
        p.close();
      });

      it('a Context keeps working once its HalModule and Module are closed; once it is closed, its functions stay readable but refuse invoke', async () => {
        const traces = [];
        const p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'u8', [1]).fill('y', 9).trace('t', ['y'])),
          { hal: { debugSink: (key, tensors) => traces.push([key, tensors[0].data[0]]) } });
        p.hal.close();
        p.module.close();
        const fn = p.lookup('f');
        const [y] = await fn.invoke([]);
        assert.deepStrictEqual(await y.read(), Uint8Array.of(9));
        assert.deepStrictEqual(traces, [['t', 9]]);
        y.close();
        p.context.close();
        assert.strictEqual(fn.name, 'm.f');
        assert.strictEqual(fn.context, p.context);
        assert.deepStrictEqual(fn.outputs, [{ name: 'y', dtype: 'u8', shape: [1] }]);
        await assertRejectsHalrt(fn.invoke([]), 'FAILED_PRECONDITION', 'function.invoke: its context Context is closed');
        assert.deepStrictEqual(traces, [['t', 9]]);
        fn.close();
        p.close();
      });
    });
  }
});

describe('bad input', () => {
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

  function description(body, overrides = {}) {
    return {
      format: 'halrt.module/1',
      name: 'm',
      executables: { k: { local: { builtin: true } } },
      functions: {
        main: {
          inputs: [{ name: 'a', dtype: 'f32', shape: [4] }, { name: 'b', dtype: 'f32', shape: [4] }],
          outputs: [{ name: 'c', dtype: 'f32', shape: [4] }],
          body: body ?? [{ op: 'dispatch', kernel: 'k.add_f32', workgroups: [1], bindings: ['a', 'b', 'c'], constants: [4] }],
        },
      },
      ...overrides,
    };
  }
  const dispatch = (fields) => [{ op: 'dispatch', kernel: 'k.add_f32', workgroups: [1], bindings: ['a', 'b', 'c'], constants: [4], ...fields }];
  const fromObject = (object) => () => halrt.Module.fromObject(instance, object);

  describe('module descriptions', () => {
    it('the valid description used below loads', () => {
      halrt.Module.fromObject(instance, description()).close();
    });

    it('an unknown built-in kernel is NOT_FOUND naming the kernel field', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ kernel: 'k.nope_f32' }))), 'NOT_FOUND',
        'Module.fromJson: functions.main.body[0].kernel', "unknown built-in kernel 'nope_f32'");
    });

    it('an unknown executable is NOT_FOUND naming the kernel field', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ kernel: 'z.add_f32' }))), 'NOT_FOUND',
        'functions.main.body[0].kernel', "unknown executable 'z'");
    });

    it('a kernel name without an executable is INVALID_ARGUMENT', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ kernel: 'add_f32' }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].kernel', "'add_f32' must be 'executable.entry'");
    });

    it('an unknown value name is NOT_FOUND naming the binding', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ bindings: ['a', 'q', 'c'] }))), 'NOT_FOUND',
        'functions.main.body[0].bindings[1]', "unknown value 'q'");
      assertThrowsHalrt(fromObject(description([{ op: 'trace', key: 'k', values: ['c', 'zz'] }])), 'NOT_FOUND',
        'functions.main.body[0].values[1]', "unknown value 'zz'");
      assertThrowsHalrt(fromObject(description([{ op: 'fill', target: 'nope', value: 1 }])), 'NOT_FOUND',
        'functions.main.body[0].target', "unknown value 'nope'");
    });

    it('a dtype mismatch with the kernel is INVALID_ARGUMENT naming the binding', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ kernel: 'k.add_i32' }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].bindings[0]', "kernel 'add_i32' needs i32 here but 'a' is f32");
    });

    it('a binding too small for the constants is INVALID_ARGUMENT naming the binding', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ constants: [5] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].bindings[0]', "needs 20 bytes here for its constants but 'a' has 16");
    });

    it('the wrong number of bindings or constants is INVALID_ARGUMENT', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ constants: [] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0]', "kernel 'add_f32' takes 3 bindings and 1 constants (got 3 and 0)");
    });

    it('zero and too large workgroup counts are INVALID_ARGUMENT naming the entry', () => {
      assertThrowsHalrt(fromObject(description(dispatch({ workgroups: [0] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].workgroups[0]', 'must be an integer in [1, 2147483647]');
      assertThrowsHalrt(fromObject(description(dispatch({ workgroups: [1, 65536] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].workgroups[1]', 'must be an integer in [1, 65535]');
      assertThrowsHalrt(fromObject(description(dispatch({ workgroups: [2 ** 31] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].workgroups[0]');
      assertThrowsHalrt(fromObject(description(dispatch({ workgroups: [] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].workgroups', 'must have 1 to 3 entries (got 0)');
      assertThrowsHalrt(fromObject(description(dispatch({ workgroupSize: [1025] }))), 'INVALID_ARGUMENT',
        'functions.main.body[0].workgroupSize[0]');
    });

    describe('declared CUDA entries (typed constants)', () => {
      // Module creation types constants by the declaration; no device or
      // PTX is involved until a Context links the module.
      const TYPES = ['buffer', 'u32', 'i32', 'f32', 'u64', 'i64', 'f64', 'buffer'];
      const typed = (constants, fields = {}, entries = { all: TYPES }) => description(
        [{ op: 'dispatch', kernel: 't.all', workgroups: [1], bindings: ['a', 'c'], constants, ...fields }],
        { executables: { t: { cuda: { ptx: { text: '.version 7.0' }, entries } } } });
      const GOOD = [4294967295, -2147483648, 0.5, 9007199254740991, -9007199254740991, 1e300];

      it('in-range constants of every type load, 64-bit ones also as decimal strings', () => {
        halrt.Module.fromObject(instance, typed(GOOD)).close();
        halrt.Module.fromObject(instance, typed([0, 2147483647, { f32: 3 }, '18446744073709551615',
          '-9223372036854775808', -0])).close();
        halrt.Module.fromObject(instance, typed([1, 1, 1, '0', '9223372036854775807', 2 ** 60])).close();
      });

      it('an out-of-range or mistyped constant is INVALID_ARGUMENT naming it and the type', () => {
        const cases = [
          [0, -1, "kernel 'all' takes a u32 here: -1 is not an integer in [0, 4294967295]"],
          [0, 2 ** 32, 'takes a u32 here: 4294967296 is not an integer'],
          [0, 1.5, 'takes a u32 here: 1.5 is not an integer'],
          [1, 2 ** 31, 'takes an i32 here: 2147483648 is not an integer in [-2147483648, 2147483647]'],
          [2, 'x', 'must be a number or {"f32": number | "inf" | "-inf" | "nan"}'],
          [3, -1, 'takes a u64 here: -1 is not an integer in [0, 9007199254740991] (a decimal string takes the whole'],
          [3, 2 ** 53, 'takes a u64 here: 9007199254740992 is not an integer'],
          [3, '18446744073709551616', "takes a u64 here: '18446744073709551616' is not a decimal u64 integer"],
          [3, '-1', "'-1' is not a decimal u64 integer"],
          [3, ' 1', "' 1' is not a decimal u64 integer"],
          [4, '9223372036854775808', "takes an i64 here: '9223372036854775808' is not a decimal i64 integer"],
          [4, '', "'' is not a decimal i64 integer"],
          [4, -(2 ** 53), 'takes an i64 here: -9007199254740992 is not an integer in [-9007199254740991, 9007199254740991]'],
          [4, 1.5, 'takes an i64 here: 1.5 is not an integer'],
          [5, '1', "kernel 'all' takes an f64 here: must be a number"],
          [5, { f32: 1 }, 'takes an f64 here: must be a number'],
        ];
        for (const [index, value, message] of cases) {
          const constants = [...GOOD];
          constants[index] = value;
          assertThrowsHalrt(fromObject(typed(constants)), 'INVALID_ARGUMENT',
            `Module.fromJson: functions.main.body[0].constants[${index}]: `, message);
        }
      });

      it('an integer out of range is named as written, not as the double it rounds to', () => {
        // JSON text can hold integers a JavaScript number cannot.
        const text = (constant) => JSON.stringify(typed(GOOD)).replace('[4294967295,', `[${constant},`);
        const cases = [
          ['9007199254740993', "takes a u32 here: 9007199254740993 is not an integer in [0, 4294967295]"],
          ['-9223372036854775807', 'takes a u32 here: -9223372036854775807 is not an integer'],
        ];
        for (const [constant, message] of cases) {
          assertThrowsHalrt(() => halrt.Module.fromJson(instance, text(constant)), 'INVALID_ARGUMENT',
            'Module.fromJson: functions.main.body[0].constants[0]: ', message);
        }
        const i64 = JSON.stringify(typed(GOOD)).replace(',-9007199254740991,', ',9007199254740993,');
        assertThrowsHalrt(() => halrt.Module.fromJson(instance, i64), 'INVALID_ARGUMENT',
          'functions.main.body[0].constants[4]: ', 'takes an i64 here: 9007199254740993 is not an integer in');
      });

      it('the wrong number of constants or bindings is INVALID_ARGUMENT naming the field', () => {
        assertThrowsHalrt(fromObject(typed(GOOD.slice(0, 5))), 'INVALID_ARGUMENT',
          "functions.main.body[0].constants: kernel 'all' declares 6 scalar parameters, so its dispatches take 6 " +
          'constants (got 5)');
        assertThrowsHalrt(fromObject(typed(undefined)), 'INVALID_ARGUMENT',
          'functions.main.body[0].constants: ', '(got 0)');
        assertThrowsHalrt(fromObject(typed(GOOD, { bindings: ['a'] })), 'INVALID_ARGUMENT',
          "functions.main.body[0].bindings: kernel 'all' declares 2 buffer parameters, so its dispatches take 2 " +
          'bindings (got 1)');
      });

      it('an entry declared without a buffer parameter cannot be dispatched, and the error says why', () => {
        // A dispatch names 1 to 32 bindings, so none fits such an entry.
        const entries = { all: ['u32', 'f64'] };
        assertThrowsHalrt(fromObject(typed([1, 2], { bindings: ['a'] }, entries)), 'INVALID_ARGUMENT',
          "functions.main.body[0].bindings: kernel 'all' declares no buffer parameter, and a dispatch takes 1 to 32 " +
          'bindings: it cannot be dispatched');
        assertThrowsHalrt(fromObject(typed([1, 2], { bindings: [] }, entries)), 'INVALID_ARGUMENT',
          'functions.main.body[0].bindings: must name 1 to 32 values (got 0)');
        // Declaring it is fine.
        halrt.Module.fromObject(instance, typed(GOOD, { kernel: 't.all' }, { all: TYPES, scalars: entries.all })).close();
      });

      it('a dispatch of an entry the executable does not declare is NOT_FOUND naming the kernel field', () => {
        assertThrowsHalrt(fromObject(typed(GOOD, { kernel: 't.other' })), 'NOT_FOUND',
          "functions.main.body[0].kernel: executable 't' declares no entry 'other' (executables.t.cuda.entries)");
      });

      it('an entry declared without parameters takes untyped constants (inferred at Context creation)', () => {
        halrt.Module.fromObject(instance, typed([4, 2.5], {}, { all: {} })).close();
      });

      it('a name expression on an entry of a PTX, cubin or fatbin is INVALID_ARGUMENT saying it is for source', () => {
        for (const kind of ['ptx', 'cubin', 'fatbin']) {
          const value = typed(GOOD, {}, { all: { expression: 'f<int>', params: TYPES } });
          value.executables.t.cuda = { [kind]: 'k', entries: value.executables.t.cuda.entries };
          assertThrowsHalrt(fromObject(value), 'INVALID_ARGUMENT',
            "executables.t.cuda.entries.all.expression: a name expression applies to 'source' only");
        }
      });

      it('entries beside built-in kernels of another kind are INVALID_ARGUMENT', () => {
        const value = typed(GOOD);
        value.executables.t.local = { builtin: true };
        assertThrowsHalrt(fromObject(value), 'INVALID_ARGUMENT',
          "executables.t.cuda: 'entries' cannot be declared for an executable whose other kind is built-in kernels");
      });
    });

    it('malformed JSON is INVALID_ARGUMENT with its position', () => {
      assertThrowsHalrt(() => halrt.Module.fromJson(instance, '{"format": "halrt.module/1", '), 'INVALID_ARGUMENT',
        'Module.fromJson: invalid JSON at line 1 column');
      assertThrowsHalrt(() => halrt.Module.fromJson(instance, ''), 'INVALID_ARGUMENT', 'Module.fromJson', 'JSON');
    });

    it('an unknown field is INVALID_ARGUMENT naming it and where it is', () => {
      assertThrowsHalrt(fromObject(description(undefined, { extra: 1 })), 'INVALID_ARGUMENT',
        "module: unknown field 'extra'");
      assertThrowsHalrt(fromObject(description([{ op: 'barrier', when: 'now' }])), 'INVALID_ARGUMENT',
        "functions.main.body[0]: unknown field 'when'");
      assertThrowsHalrt(fromObject(description(dispatch({ constant: [4] }))), 'INVALID_ARGUMENT',
        "functions.main.body[0]: unknown field 'constant'");
      const value = description();
      value.functions.main.inputs[0].size = 4;
      assertThrowsHalrt(fromObject(value), 'INVALID_ARGUMENT', "functions.main.inputs[0]: unknown field 'size'");
      assertThrowsHalrt(fromObject(description(undefined, { executables: { k: { metal: { builtin: true } } } })),
        'INVALID_ARGUMENT', "executables.k: unknown field 'metal'");
    });

    it('a wrong format string is INVALID_ARGUMENT naming the supported one', () => {
      assertThrowsHalrt(fromObject(description(undefined, { format: 'halrt.module/2' })), 'INVALID_ARGUMENT',
        "format: 'halrt.module/2' is not supported (expected 'halrt.module/1')");
      const missing = description();
      delete missing.format;
      assertThrowsHalrt(fromObject(missing), 'INVALID_ARGUMENT', 'format: must be a string');
    });

    it('an unknown op, dtype or a bad fill value is INVALID_ARGUMENT naming the field', () => {
      assertThrowsHalrt(fromObject(description([{ op: 'nop' }])), 'INVALID_ARGUMENT',
        "functions.main.body[0].op: unknown op 'nop'");
      const badDtype = description([]);
      badDtype.functions.main.inputs[1].dtype = 'f33';
      assertThrowsHalrt(fromObject(badDtype), 'INVALID_ARGUMENT', 'functions.main.inputs[1].dtype', "unknown dtype 'f33'");
      assertThrowsHalrt(fromObject(description([{ op: 'fill', target: 'c', value: 'x' }])), 'INVALID_ARGUMENT',
        'functions.main.body[0].value: must be a number');
    });

    it('a reserved or malformed module name is INVALID_ARGUMENT', () => {
      assertThrowsHalrt(fromObject(description(undefined, { name: 'hal' })), 'INVALID_ARGUMENT',
        "name: 'hal' is reserved for the HAL module");
      assertThrowsHalrt(fromObject(description(undefined, { name: '1m' })), 'INVALID_ARGUMENT', "name: '1m' is not a name");
    });

    it('Module.fromObject refuses a non-object description', () => {
      for (const value of [null, 5, 'text', [1]]) {
        assertThrowsHalrt(() => halrt.Module.fromObject(instance, value), 'INVALID_ARGUMENT',
          'Module.fromObject: object must be a module description object');
      }
    });

    it('Module.load of a missing file is NOT_FOUND naming the path', () => {
      const file = path.join(os.tmpdir(), 'halrt-no-such-dir', 'missing.halrt.json');
      assertThrowsHalrt(() => halrt.Module.load(instance, file), 'NOT_FOUND', `Module.load: cannot read '${file}'`);
      assertThrowsHalrt(() => halrt.Module.load(instance, 5), 'INVALID_ARGUMENT', 'Module.load: path must be a string');
      // The instance forgotten: the path came first.
      assertThrowsHalrt(() => halrt.Module.load('m.halrt.json'), 'INVALID_ARGUMENT',
        'Module.load: the instance is missing: call Module.load(instance, "m.halrt.json")');
    });

    it('Module.load and halrt.load name the file of a module with a JSON typo or a bad field', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-typo-'));
      try {
        const typo = path.join(dir, 'typo.halrt.json');
        fs.writeFileSync(typo, '{"format": "halrt.module/1", "name": "m", "functions": {,}}');
        assertThrowsHalrt(() => halrt.Module.load(instance, typo), 'INVALID_ARGUMENT',
          `Module.load: ${typo}: invalid JSON at line 1 column 57`);
        await assertRejectsHalrt(halrt.load(typo, { device: 'local-sync' }), 'INVALID_ARGUMENT',
          `halrt.load: ${typo}: invalid JSON at line 1 column 57`);
        const field = path.join(dir, 'field.halrt.json');
        fs.writeFileSync(field, JSON.stringify(description([{ op: 'nop' }])));
        assertThrowsHalrt(() => halrt.Module.load(instance, field), 'INVALID_ARGUMENT',
          `Module.load: ${field}: functions.main.body[0].op: unknown op 'nop'`);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('Module.load reads only a regular file of at most 64 MiB, naming the path (and size and cap)', () => {
      const files = unreadableFiles('m.halrt.json', 64 * 2 ** 20 + 1);
      try {
        const got = inChild(`
          const instance = new halrt.Instance();
          const out = args.map((file) => settle(() => halrt.Module.load(instance, file).close()));
          instance.close();
          console.log(JSON.stringify(out));`, [files.zero, files.fifo, files.dir, files.big]);
        assert.deepStrictEqual(got, [
          { code: 'INVALID_ARGUMENT', message: "Module.load: '/dev/zero' is a character device, not a regular file" },
          { code: 'INVALID_ARGUMENT', message: `Module.load: '${files.fifo}' is a FIFO, not a regular file` },
          { code: 'INVALID_ARGUMENT', message: `Module.load: '${files.dir}' is a directory, not a regular file` },
          { code: 'RESOURCE_EXHAUSTED',
            message: `Module.load: '${files.big}' is 67108865 bytes, over the limit of 67108864 bytes for a module file` },
        ]);
      } finally {
        files.cleanup();
      }
    });

    it('modules need an Instance and cannot be constructed directly', () => {
      assertThrowsHalrt(() => halrt.Module.fromJson({}, '{}'), 'INVALID_ARGUMENT', 'Module.fromJson: instance is not an Instance');
      assertThrowsHalrt(() => new halrt.Module(), 'INVALID_ARGUMENT', 'new Module: use Module.load');
      assertThrowsHalrt(() => new halrt.Function(), 'INVALID_ARGUMENT', 'new Function: use context.lookupFunction');
    });
  });

  describe('contexts', () => {
    let hal;
    let module;
    before(() => {
      hal = new halrt.HalModule(instance, device);
      module = halrt.Module.fromObject(instance, description());
    });
    after(() => closeAll(module, hal));

    for (const uri of DEVICE_URIS) {
      it(`an executable without the device's kind fails at Context creation, naming it (${uri})`, () => {
        const target = instance.createDevice(uri);
        const { kind } = target.info;
        const other = kind === 'local' ? 'cuda' : 'local';
        const otherOnly = halrt.Module.fromObject(instance, description(undefined, { executables: { k: { [other]: { builtin: true } } } }));
        const targetHal = new halrt.HalModule(instance, target);
        try {
          assertThrowsHalrt(() => new halrt.Context(instance, [targetHal, otherOnly]), 'NOT_FOUND',
            "new Context: linking module 'm'", `executables.k: no executable for device kind '${kind}'`);
        } finally {
          closeAll(targetHal, target, otherOnly);
        }
      });
    }

    it('a kernel library that is not a regular file of at most 1 GiB fails at Context creation, naming it', () => {
      // dlopen of a FIFO waits for a writer: checked before the loader runs.
      const files = unreadableFiles('k.so', 2 ** 30 + 1);
      try {
        const got = inChild(`
          const instance = new halrt.Instance();
          const device = instance.createDevice('local-sync');
          const hal = new halrt.HalModule(instance, device);
          const out = args.map((library) => settle(() => {
            const module = new halrt.ModuleBuilder('m').executable('k', { local: { library } })
              .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
            try { new halrt.Context(instance, [hal, module]).close(); } finally { module.close(); }
          }));
          for (const o of [hal, device, instance]) o.close();
          console.log(JSON.stringify(out));`, [files.zero, files.fifo, files.dir, files.big]);
        const prefix = "new Context: linking module 'm': executables.k: ";
        assert.deepStrictEqual(got, [
          { code: 'INVALID_ARGUMENT', message: `${prefix}'/dev/zero' is a character device, not a regular file` },
          { code: 'INVALID_ARGUMENT', message: `${prefix}'${files.fifo}' is a FIFO, not a regular file` },
          { code: 'INVALID_ARGUMENT', message: `${prefix}'${files.dir}' is a directory, not a regular file` },
          { code: 'RESOURCE_EXHAUSTED',
            message: `${prefix}'${files.big}' is 1073741825 bytes, over the limit of 1073741824 bytes for a kernel file` },
        ]);
      } finally {
        files.cleanup();
      }
    });

    it('non-module entries are INVALID_ARGUMENT naming the index', () => {
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, {}]), 'INVALID_ARGUMENT',
        'new Context: modules[1] is not a HalModule, HostModule or Module');
      assertThrowsHalrt(() => new halrt.Context(instance, [device]), 'INVALID_ARGUMENT',
        'new Context: modules[0] is not a HalModule, HostModule or Module');
      assertThrowsHalrt(() => new halrt.Context(instance, 'hal'), 'INVALID_ARGUMENT', 'new Context: modules must be an Array');
      assertThrowsHalrt(() => new halrt.Context({}, [hal]), 'INVALID_ARGUMENT', 'new Context: instance is not an Instance');
    });

    it('duplicate module names are INVALID_ARGUMENT', () => {
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, module, module]), 'INVALID_ARGUMENT',
        "new Context: modules 1 and 2 are both named 'm'");
      const again = halrt.Module.fromObject(instance, description());
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, module, again]), 'INVALID_ARGUMENT', "both named 'm'");
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, hal]), 'INVALID_ARGUMENT', "both named 'hal'");
      again.close();
    });

    it('a module from another Instance is INVALID_ARGUMENT naming it', () => {
      const other = new halrt.Instance();
      const foreign = halrt.Module.fromObject(other, description());
      try {
        assertThrowsHalrt(() => new halrt.Context(instance, [hal, foreign]), 'INVALID_ARGUMENT',
          'new Context: modules[1] belongs to another Instance');
        assertThrowsHalrt(() => new halrt.Context(other, [hal, foreign]), 'INVALID_ARGUMENT',
          'new Context: modules[0] belongs to another Instance');
      } finally {
        closeAll(foreign, other);
      }
    });

    it('a program module without a HAL module linked before it is NOT_FOUND', () => {
      assertThrowsHalrt(() => new halrt.Context(instance, [module]), 'NOT_FOUND',
        "module 'm' imports 'hal': no module named 'hal' is linked before this one");
      assertThrowsHalrt(() => new halrt.Context(instance, [module, hal]), 'NOT_FOUND', "module 'm' imports 'hal'");
    });

    it('closed modules are FAILED_PRECONDITION naming the index', () => {
      const closed = halrt.Module.fromObject(instance, description());
      closed.close();
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, closed]), 'FAILED_PRECONDITION',
        'new Context: modules[1] Module is closed');
    });

    it('the constructors need `new`', () => {
      assertThrowsHalrt(() => halrt.Context(instance, [hal]), 'INVALID_ARGUMENT', 'Context: the constructor must be called with `new`');
      assertThrowsHalrt(() => halrt.HalModule(instance, device), 'INVALID_ARGUMENT',
        'HalModule: the constructor must be called with `new`');
    });

    it('lookupFunction of unknown or malformed names fails naming them', () => {
      const context = new halrt.Context(instance, [hal, module]);
      try {
        assertThrowsHalrt(() => context.lookupFunction('x.main'), 'NOT_FOUND',
          "context.lookupFunction: no module 'x' in the context (looking up 'x.main')");
        assertThrowsHalrt(() => context.lookupFunction('m.nope'), 'NOT_FOUND', "module 'm' has no function 'nope'");
        assertThrowsHalrt(() => context.lookupFunction('hal.main'), 'NOT_FOUND', "module 'hal' has no function 'main'");
        assertThrowsHalrt(() => context.lookupFunction('nope'), 'NOT_FOUND',
          "context.lookupFunction: no linked module exports a function 'nope' (functions: m.main)");
        for (const name of ['.main', 'm.']) {
          assertThrowsHalrt(() => context.lookupFunction(name), 'INVALID_ARGUMENT', `function name '${name}' must be 'module.function'`);
        }
        assertThrowsHalrt(() => context.lookupFunction(5), 'INVALID_ARGUMENT', 'context.lookupFunction: name must be a string');
      } finally {
        context.close();
      }
    });
  });

  describe('invoke', () => {
    let p;
    let fn;
    let views;
    before(() => {
      p = makeProgram('local-sync', (b) => b.function('main', (f) => f
        .input('a', 'f32', [4]).input('b', 'f32', [4]).output('c', 'f32', [4])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'b', 'c'], constants: [4] })));
      fn = p.lookup('main');
      views = {
        a: p.device.tensor(Float32Array.from([1, 2, 3, 4]), [4]),
        i32: p.device.tensor(new Int32Array(4), [4]),
        five: p.device.tensor(new Float32Array(5), [5]),
        matrix: p.device.tensor(new Float32Array(4), [2, 2]),
      };
    });
    after(() => {
      closeAll(Object.values(views), fn);
      p.close();
    });

    it('the wrong input count rejects with INVALID_ARGUMENT', async () => {
      await assertRejectsHalrt(fn.invoke([views.a]), 'INVALID_ARGUMENT', 'function.invoke: m.main: takes 2 inputs (got 1)');
      await assertRejectsHalrt(fn.invoke([views.a, views.a, views.a]), 'INVALID_ARGUMENT', 'takes 2 inputs (got 3)');
      await assertRejectsHalrt(fn.invoke([]), 'INVALID_ARGUMENT', 'takes 2 inputs (got 0)');
    });

    it('a wrong dtype or shape rejects with INVALID_ARGUMENT naming the input', async () => {
      await assertRejectsHalrt(fn.invoke([views.a, views.i32]), 'INVALID_ARGUMENT', "m.main: input 1 ('b') must be f32 (got i32)");
      await assertRejectsHalrt(fn.invoke([views.five, views.a]), 'INVALID_ARGUMENT', "input 0 ('a') must have shape [4] (got [5])");
      await assertRejectsHalrt(fn.invoke([views.a, views.matrix]), 'INVALID_ARGUMENT', "input 1 ('b') must have shape [4] (got [2,2])");
    });

    it('inputs that are not BufferViews, or not an Array, reject with INVALID_ARGUMENT', async () => {
      await assertRejectsHalrt(fn.invoke([views.a, 'b']), 'INVALID_ARGUMENT', 'function.invoke: inputs[1] is not a BufferView');
      await assertRejectsHalrt(fn.invoke([views.a, {}]), 'INVALID_ARGUMENT', 'function.invoke: inputs[1] is not a BufferView');
      // Objects of the binding's other classes are not BufferViews either.
      await assertRejectsHalrt(fn.invoke([views.a, p.device]), 'INVALID_ARGUMENT', 'function.invoke: inputs[1] is not a BufferView');
      await assertRejectsHalrt(fn.invoke.call(p.device, [views.a, views.a]), 'INVALID_ARGUMENT', 'function.invoke: `this` is not a Function');
      await assertRejectsHalrt(fn.invoke(views.a), 'INVALID_ARGUMENT', 'function.invoke: inputs must be an Array');
      await assertRejectsHalrt(fn.invoke(), 'INVALID_ARGUMENT', 'function.invoke: inputs must be an Array');
      await assertRejectsHalrt(fn.invoke([views.a, views.a], 5), 'INVALID_ARGUMENT', 'function.invoke: options must be an object');
      await assertRejectsHalrt(fn.invoke([views.a, views.a], { signal: {} }), 'INVALID_ARGUMENT',
        'function.invoke: options.signal must be an AbortSignal');
    });

    it('invoke never throws synchronously: every failure is a rejection', () => {
      const results = [fn.invoke(5), fn.invoke([views.a]), fn.invoke([views.a, views.a], null)];
      for (const result of results) {
        assert.ok(result instanceof Promise);
        result.catch(() => {});
      }
      // A wrong receiver is a HalrtError too, and still a rejection.
      const wrongThis = fn.invoke.call({}, []);
      assert.ok(wrongThis instanceof Promise);
      return assertRejectsHalrt(wrongThis, 'INVALID_ARGUMENT', 'function.invoke: `this` is not a Function');
    });

    it('an input on another device rejects with INVALID_ARGUMENT naming it', async () => {
      const other = p.instance.createDevice('local-task');
      const foreign = other.tensor(new Float32Array(4), [4]);
      try {
        await assertRejectsHalrt(fn.invoke([views.a, foreign]), 'INVALID_ARGUMENT',
          "function.invoke: input 1 ('b') is on another device than the context's HAL module (local-sync)");
      } finally {
        closeAll(foreign, other);
      }
    });

    it('a closed BufferView input rejects with FAILED_PRECONDITION naming it', async () => {
      const closed = p.device.tensor(new Float32Array(4), [4]);
      closed.close();
      await assertRejectsHalrt(fn.invoke([views.a, closed]), 'FAILED_PRECONDITION', 'function.invoke: inputs[1] BufferView is closed');
    });

    it('a closed Context rejects invocations of its functions with FAILED_PRECONDITION', async () => {
      const context = new halrt.Context(p.instance, [p.hal, p.module]);
      const own = context.lookupFunction('m.main');
      const [c] = await own.invoke([views.a, views.a]);
      assert.deepStrictEqual(await c.read(), Float32Array.from([2, 4, 6, 8]));
      c.close();
      context.close();
      await assertRejectsHalrt(own.invoke([views.a, views.a]), 'FAILED_PRECONDITION', 'function.invoke: its context Context is closed');
      own.close();
    });

    it('HalModule option errors are INVALID_ARGUMENT naming the option', () => {
      const make = (options) => () => new halrt.HalModule(p.instance, p.device, options);
      assertThrowsHalrt(make({ debugSink: 5 }), 'INVALID_ARGUMENT', 'new HalModule: options.debugSink must be a function, an object with trace / timing / invocation methods, or a halrt.sinks sink (got 5)');
      assertThrowsHalrt(make({ debugSink: 'f' }), 'INVALID_ARGUMENT', 'options.debugSink must be a function');
      assertThrowsHalrt(make({ debugSink: { halrtSinkKind: 'tape' } }), 'INVALID_ARGUMENT', "options.debugSink has unknown sink kind 'tape'");
      assertThrowsHalrt(make({ debugSink: halrt.sinks.tee(...Array.from({ length: 17 }, () => () => {})) }), 'INVALID_ARGUMENT', 'options.debugSink.sinks[16] is JavaScript sink number 17; at most 16 may be combined');
      assertThrowsHalrt(make({ nonFinite: 'warn' }), 'INVALID_ARGUMENT', "new HalModule: options.nonFinite must be 'ignore' or 'reject' (got 'warn')");
      assertThrowsHalrt(make({ tracePolicy: 'x' }), 'INVALID_ARGUMENT', "new HalModule: options.tracePolicy must be 'wait' or 'drop' (got 'x')");
      assertThrowsHalrt(make({ tracePolicy: 1 }), 'INVALID_ARGUMENT', 'options.tracePolicy must be a string');
      assertThrowsHalrt(make({ traceData: 'lent' }), 'INVALID_ARGUMENT', "new HalModule: options.traceData must be 'owned' or 'borrowed' (got 'lent')");
      assertThrowsHalrt(make({ maxTraceBytes: 0 }), 'INVALID_ARGUMENT', 'new HalModule: options.maxTraceBytes must be an integer in [1, ');
      assertThrowsHalrt(make({ maxTraceBytes: 1.5 }), 'INVALID_ARGUMENT', 'options.maxTraceBytes');
      assertThrowsHalrt(make({ maxTraceBytes: -1 }), 'INVALID_ARGUMENT', 'options.maxTraceBytes');
      // The documented ranges, at their edges (index.d.ts).
      assertThrowsHalrt(make({ maxTraceBytes: 2 ** 53 }), 'INVALID_ARGUMENT', 'new HalModule: options.maxTraceBytes must be an integer in [1, 9007199254740991]');
      assertThrowsHalrt(make({ traceDispatches: { every: 2 ** 32 } }), 'INVALID_ARGUMENT', 'new HalModule: options.traceDispatches.every must be an integer in [1, 4294967295]');
      assertThrowsHalrt(make({ traceDispatches: { every: 0 } }), 'INVALID_ARGUMENT', 'options.traceDispatches.every');
      for (const options of [{ maxTraceBytes: Number.MAX_SAFE_INTEGER }, { traceDispatches: { every: 2 ** 32 - 1 } }]) make(options)().close();
      // A getter or Proxy trap that throws while the options are read: INVALID_ARGUMENT naming what was read, the thrown value its cause.
      const boom = new Error('boom');
      const threw = (options, what) => {
        assertThrowsHalrt(make(options), 'INVALID_ARGUMENT', `new HalModule: reading ${what} threw`);
        try { make(options)(); } catch (error) { assert.strictEqual(error.cause, boom); }
      };
      threw({ get maxTraceBytes() { throw boom; } }, 'options.maxTraceBytes');
      threw(new Proxy({}, { ownKeys() { throw boom; } }), 'the keys of options');
      threw({ traceDispatches: { get every() { throw boom; } } }, 'options.traceDispatches.every');
      threw({ traceDispatches: { functions: Object.defineProperty(['main'], 0, { get() { throw boom; } }) } }, 'options.traceDispatches.functions[0]');
      threw({ flightRecorder: { get traces() { throw boom; } } }, 'options.flightRecorder.traces');
      threw({ debugSink: { get trace() { throw boom; } } }, 'options.debugSink.trace');
      threw({ debugSink: { get halrtSinkKind() { throw boom; } } }, 'options.debugSink.halrtSinkKind');
      assertThrowsHalrt(make({ traceDispatches: 'yes' }), 'INVALID_ARGUMENT', 'new HalModule: options.traceDispatches must be a boolean');
      assertThrowsHalrt(make({ profile: 'yes' }), 'INVALID_ARGUMENT', 'new HalModule: options.profile must be a boolean');
      assertThrowsHalrt(make({ color: true }), 'INVALID_ARGUMENT', "new HalModule: unknown option 'color' in options");
      assertThrowsHalrt(make(5), 'INVALID_ARGUMENT', 'new HalModule: options must be an object');
      assertThrowsHalrt(() => new halrt.HalModule(p.instance, {}), 'INVALID_ARGUMENT', 'new HalModule: device is not a Device');
      assertThrowsHalrt(() => new halrt.HalModule(p.device, p.device), 'INVALID_ARGUMENT', 'new HalModule: instance is not an Instance');
      // undefined and null mean "no sink"; the defaults are accepted spelled out.
      for (const options of [undefined, {}, { debugSink: null }, { debugSink: undefined, maxTraceBytes: 1, tracePolicy: 'drop' }]) {
        const hal = make(options)();
        assert.strictEqual(hal.debugSink, null);
        hal.close();
      }
    });
  });
});

describe('memory a call allocates', () => {
  it('a function whose outputs and locals together exceed the device memory rejects with RESOURCE_EXHAUSTED, nothing allocated', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const memory = device.info.totalMemory;
    assert.ok(memory > 0, 'local devices report the host memory');
    // Each 1 GiB local fits alone; 1023 of them (about 1 TiB) do not. Each
    // is filled (a local no op uses is not allocated).
    const locals = Array.from({ length: 1023 }, (_, i) => ({ name: `l${i}`, dtype: 'u8', shape: [2 ** 30] }));
    const body = locals.map(({ name }) => ({ op: 'fill', target: name, value: 0 }));
    const module = halrt.Module.fromObject(instance, {
      format: 'halrt.module/1',
      name: 'big',
      functions: { main: { inputs: [], outputs: [{ name: 'y', dtype: 'u8', shape: [1] }], locals, body } },
    });
    const hal = new halrt.HalModule(instance, device);
    const context = new halrt.Context(instance, [hal, module]);
    const main = context.lookupFunction('big.main');
    const baseline = await liveBaseline();
    try {
      await assertRejectsHalrt(main.invoke([]), 'RESOURCE_EXHAUSTED',
        `function.invoke: big.main: one call allocates ${1023 * 2 ** 30 + 1} bytes of outputs and locals, more than the ${memory} bytes of local-sync`);
      assert.strictEqual((await settleLiveObjects(baseline)).buffer, baseline.buffer);
    } finally {
      closeAll(main, context, hal, module, device, instance);
    }
  });
});

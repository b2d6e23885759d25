'use strict';
// HostModule: JavaScript functions that programs call ({"op": "call"}) and
// that can be invoked directly (README "Calling JavaScript from a
// program"): results on every device, traces and timings around the call,
// errors with their cause, re-entrancy, lifetimes and teardown.
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const { Worker } = require('worker_threads');
const halrt = require('..');
const { BUILTIN, DEVICE_URIS, assertRejectsHalrt, assertThrowsHalrt, closeAll, liveBaseline, settleLiveObjects } = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));
const f32 = (name, shape) => ({ name, dtype: 'f32', shape });

// app.main(x: f32[2,3]) -> (best: i32[2], y: f32[2,3]): y = x + x, traced,
// then best = host.argmax(y), traced.
function app(instance, callee = 'host.argmax') {
  return new halrt.ModuleBuilder('app').executable('k', BUILTIN)
    .function('main', (f) => f.input('x', 'f32', [2, 3]).output('best', 'i32', [2]).output('y', 'f32', [2, 3])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [6] })
      .trace('before', ['y'])
      .call(callee, ['y'], ['best'])
      .trace('after', ['best']))
    .build(instance);
}

// argmax of each row of a f32[2,3]
const argmax = (impl) => ({
  inputs: [f32('scores', [2, 3])],
  outputs: [{ name: 'best', dtype: 'i32', shape: [2] }],
  impl,
});
function rowArgmax({ data }) {
  const rows = [];
  for (let r = 0; r < 2; ++r) {
    const row = Array.from(data.subarray(3 * r, 3 * r + 3));
    rows.push(row.indexOf(Math.max(...row)));
  }
  return rows;
}

for (const uri of DEVICE_URIS) {
  describe(`HostModule on ${uri}`, () => {
    let instance, device, made;
    beforeEach(() => {
      instance = new halrt.Instance();
      device = instance.createDevice(uri);
      made = [];
    });
    afterEach(() => closeAll(made.reverse(), device, instance));
    const keep = (object) => {
      made.push(object);
      return object;
    };

    it('a program calls a JavaScript function between its ops; traces and timings see the call in program order', async () => {
      const seen = [];
      const hal = keep(new halrt.HalModule(instance, device, {
        profile: true,
        debugSink: {
          trace: (key, tensors) => seen.push(['trace', key, Array.from(tensors[0].data)]),
          timing: (event) => seen.push(['timing', event.function, event.op, event.kernel]),
        },
      }));
      const host = keep(new halrt.HostModule(instance, 'host', {
        argmax: argmax(async (scores) => {
          seen.push(['impl', scores.name, scores.dtype, scores.shape, Array.from(scores.data)]);
          return [rowArgmax(scores)];
        }),
      }));
      const context = keep(new halrt.Context(instance, [hal, host, keep(app(instance))]));
      const main = keep(context.lookupFunction('app.main'));
      const { best } = await main.invoke([[[1, 5, 3], [9, 2, 4]]], { named: true, read: true });
      assert.deepStrictEqual(Array.from(best), [1, 0]);
      assert.deepStrictEqual(seen, [
        ['timing', 'app.main', 0, 'k.add_f32'],
        ['trace', 'before', [2, 10, 6, 18, 4, 8]],
        ['impl', 'scores', 'f32', [2, 3], [2, 10, 6, 18, 4, 8]],
        ['timing', 'app.main', 2, 'host.argmax'],
        ['trace', 'after', [1, 0]],
      ]);
    });

    it('the sink has every trace before a call, however slow it is, before the host function runs', async () => {
      // Enough traces, to a sink slow enough, that the batch is delivered in
      // several time slices; the host call's message waits behind it.
      const seen = [];
      const busy = (ms) => {
        const until = Date.now() + ms;
        while (Date.now() < until);
      };
      const hal = keep(new halrt.HalModule(instance, device, {
        debugSink: (key) => {
          seen.push(key);
          busy(1);
        },
      }));
      const host = keep(new halrt.HostModule(instance, 'host', {
        argmax: argmax((scores) => {
          seen.push('impl');
          return [rowArgmax(scores)];
        }),
      }));
      const keys = Array.from({ length: 8 }, (_, i) => `t${i}`);
      const module = keep(new halrt.ModuleBuilder('slow').function('main', (f) => {
        f.input('x', 'f32', [2, 3]).output('best', 'i32', [2]);
        for (const key of keys) f.trace(key, ['x']);
        return f.call('host.argmax', ['x'], ['best']).trace('after', ['best']);
      }).build(instance));
      const main = keep(keep(new halrt.Context(instance, [hal, host, module])).lookupFunction('slow.main'));
      for (let round = 0; round < 3; ++round) {
        seen.length = 0;
        const [best] = await main.invoke([[[1, 5, 3], [9, 2, 4]]], { read: true });
        assert.deepStrictEqual(Array.from(best), [1, 0]);
        assert.deepStrictEqual(seen, [...keys, 'impl', 'after']);
      }
    });

    it('results: a bare single output, a BufferView, typed arrays of every kind, and direct invocation', async () => {
      const hal = keep(new halrt.HalModule(instance, device));
      const host = keep(new halrt.HostModule(instance, 'host', {
        argmax: argmax((scores) => rowArgmax(scores)),
        kinds: {
          inputs: [{ name: 'h', dtype: 'f16', shape: [2] }, { name: 'n', dtype: 'i64', shape: [] }, { name: 'b', dtype: 'bool', shape: [2] }],
          outputs: [{ name: 'v', dtype: 'f32', shape: [2] }, { name: 'big', dtype: 'u64', shape: [1] }, { name: 'flags', dtype: 'bool', shape: [2] }],
          impl: (h, n, b) => {
            assert.ok(h.data instanceof Uint16Array && n.data instanceof BigInt64Array && b.data instanceof Uint8Array);
            return [device.tensor(halrt.fromF16Bits(h.data), [2]), [n.data[0] * 2n], [!b.data[0], !b.data[1]]];
          },
        },
      }));
      const context = keep(new halrt.Context(instance, [hal, host]));
      const direct = keep(context.lookupFunction('host.argmax'));
      assert.deepStrictEqual(await direct.invoke([[[0, 0, 7], [7, 0, 0]]], { read: true }), [Int32Array.of(2, 0)]);
      const kinds = keep(context.lookupFunction('kinds'));
      const [v, big, flags] = await kinds.invoke([halrt.toF16Bits([1.5, -2]), 21n, [true, false]], { read: true });
      assert.deepStrictEqual([Array.from(v), Array.from(big), Array.from(flags)], [[1.5, -2], [42n], [0, 1]]);
      assert.strictEqual(String(host), 'HostModule(host)');
      assert.deepStrictEqual(host.functions.map((fn) => fn.name), ['argmax', 'kinds']);
      // One output: an Array of one entry is the list only when the entry is
      // one level deeper than the output (or data, or a view); none may be undefined.
      let result;
      const single = (shape) => ({ outputs: [f32('y', shape)], impl: () => result });
      const shapes = keep(new halrt.HostModule(instance, 'shapes', {
        row: single([1, 3]), cube: single([1, 1, 2]), scalar: single([]), empty: single([0]),
        none: { outputs: [], impl: async () => undefined },
      }));
      const linked = keep(new halrt.Context(instance, [keep(new halrt.HalModule(instance, device)), shapes]));
      const cases = [
        ['row', [[1, 2, 3]], [1, 2, 3]], ['row', [[[1, 2, 3]]], [1, 2, 3]], ['row', [Float32Array.of(4, 5, 6)], [4, 5, 6]],
        ['cube', [[[7, 8]]], [7, 8]], ['cube', [[[[7, 8]]]], [7, 8]],
        ['scalar', 5, [5]], ['scalar', [5], [5]], ['empty', [], []], ['empty', [[]], []],
      ];
      for (const [name, value, want] of cases) {
        result = value;
        const fn = keep(linked.lookupFunction(`shapes.${name}`));
        const [y] = await fn.invoke([], { read: true });
        assert.deepStrictEqual(Array.from(y), want, `${name} <- ${JSON.stringify(value)}`);
      }
      assert.deepStrictEqual(await keep(linked.lookupFunction('shapes.none')).invoke([]), []);
    });

    it('a throw or a rejection fails the invocation with ABORTED and the thrown value as cause; later ops do not run, and later calls do', async () => {
      const seen = [];
      const thrown = new Error('kaboom');
      let thrownValue = thrown;
      let mode = 'throw';
      const hal = keep(new halrt.HalModule(instance, device, { debugSink: (key) => seen.push(key) }));
      const host = keep(new halrt.HostModule(instance, 'host', {
        argmax: argmax((scores) => {
          if (mode === 'throw') throw thrownValue;
          if (mode === 'return') return thrownValue;
          if (mode === 'reject') return Promise.reject('a string');
          return [rowArgmax(scores)];
        }),
      }));
      const main = keep(keep(new halrt.Context(instance, [hal, host, keep(app(instance))])).lookupFunction('app.main'));
      await assert.rejects(main.invoke([[[1, 2, 3], [3, 2, 1]]]), (error) => {
        assert.strictEqual(error.code, 'ABORTED');
        assert.strictEqual(error.message, "app.main: functions.main.body[2]: call 'host.argmax': host.argmax threw: kaboom");
        assert.strictEqual(error.cause, thrown);
        return true;
      });
      assert.deepStrictEqual(seen, ['before']);
      mode = 'reject';
      await assert.rejects(main.invoke([[[1, 2, 3], [3, 2, 1]]]), (error) => error.code === 'ABORTED' && error.cause === 'a string' &&
        error.message.endsWith('host.argmax threw: a string'));
      // A result whose `then` getter throws, and a thrown value whose message getter throws.
      const getter = new Error('then');
      const odd = { get message() { throw new Error('no text'); } };
      for (const [how, value, text] of [['return', { get then() { throw getter; } }, 'host.argmax threw: then'], ['throw', odd, 'host.argmax threw: ']]) {
        mode = how;
        thrownValue = value;
        await assert.rejects(main.invoke([[[1, 2, 3], [3, 2, 1]]]), (error) => {
          assert.strictEqual(error.code, 'ABORTED');
          assert.ok(error.message.includes(text), error.message);
          assert.strictEqual(error.cause, how === 'throw' ? odd : getter);
          return true;
        });
      }
      thrownValue = thrown;
      mode = 'ok';
      const [best] = await main.invoke([[[1, 2, 3], [3, 2, 1]]], { read: true });
      assert.deepStrictEqual(Array.from(best), [2, 0]);
    });

    it('a wrong result is INVALID_ARGUMENT naming the callee and the output', async () => {
      let result;
      const hal = keep(new halrt.HalModule(instance, device));
      const other = keep(instance.createDevice('local-sync'));
      const host = keep(new halrt.HostModule(instance, 'host', { argmax: argmax(() => result) }));
      const main = keep(keep(new halrt.Context(instance, [hal, host, keep(app(instance))])).lookupFunction('app.main'));
      const cases = [
        [[1, 2, 3], "host.argmax: output 0 ('best') of host.argmax must have shape [2] (output 'best' has [3])"],
        [[[1, 2], [3, 4]], "output 0 ('best') of host.argmax must have shape [2] (output 'best' has [2,2])"],
        [[[1.5, 2]], "host.argmax: output 'best'[0] is 1.5, not an integer for i32"],
        ['two', "host.argmax: output 'best' must be a TypedArray, an Array"],
        [undefined, 'host.argmax'],
        [[device.tensor([1, 2])], "must be i32[2] (got a BufferView of f32[2])"],
        [[(() => { const view = device.tensor(Int32Array.of(1, 2), [2]); view.close(); return view; })()], "output 0 ('best') of host.argmax is a closed BufferView"],
        [(() => { const loop = []; loop[0] = loop; return [loop]; })(), "output 'best' nests Arrays more than 8 deep"],
      ];
      for (const [value, text] of cases) {
        result = value;
        await assertRejectsHalrt(main.invoke([[[1, 2, 3], [3, 2, 1]]]), 'INVALID_ARGUMENT', "app.main: functions.main.body[2]: call 'host.argmax': ", text);
      }
      if (uri !== other.info.uri) {
        result = [other.tensor(Int32Array.of(1, 1), [2])];
        const [best] = await main.invoke([[[1, 2, 3], [3, 2, 1]]], { read: true });
        assert.deepStrictEqual(Array.from(best), [1, 1], 'a BufferView of another device is read');
      }
    });

    it('impl may invoke functions and close objects; every invocation settles and nothing is left', async () => {
      const before = await liveBaseline();
      const hal = new halrt.HalModule(instance, device);
      let context;
      const host = new halrt.HostModule(instance, 'host', {
        argmax: argmax(async (scores) => {
          // re-entrant: the same context, asynchronously
          const [again] = await context.lookupFunction('host.double').invoke([scores.data.slice(0, 2)], { read: true });
          context.close();
          host.close();
          return [rowArgmax(scores).map((v, i) => v + again[i] * 0)];
        }),
        double: { inputs: [f32('a', [2])], outputs: [f32('b', [2])], impl: (a) => a.data.map((v) => 2 * v) },
      });
      const module = app(instance);
      context = new halrt.Context(instance, [hal, host, module]);
      const main = context.lookupFunction('app.main');
      const [best, y] = await main.invoke([[[1, 5, 3], [9, 2, 4]]]);
      assert.deepStrictEqual(Array.from(await best.read()), [1, 0]);
      closeAll(best, y, main, module, hal);
      const after = await settleLiveObjects({ ...before, instance: before.instance, device: before.device });
      assert.deepStrictEqual(after, before);
    });

    it('one HostModule linked into two Contexts', async () => {
      const hal = keep(new halrt.HalModule(instance, device));
      const host = keep(new halrt.HostModule(instance, 'host', { argmax: argmax((s) => [rowArgmax(s)]) }));
      const a = keep(new halrt.Context(instance, [hal, host, keep(app(instance))]));
      const b = keep(new halrt.Context(instance, [hal, host]));
      const [x] = await keep(a.lookupFunction('app.main')).invoke([[[1, 0, 0], [0, 0, 1]]], { read: true });
      const [z] = await keep(b.lookupFunction('host.argmax')).invoke([[[0, 1, 0], [0, 1, 0]]], { read: true });
      assert.deepStrictEqual([Array.from(x), Array.from(z)], [[0, 2], [1, 1]]);
    });
  });
}

describe('HostModule: spec, linking, lifetime', () => {
  let instance;
  beforeEach(() => {
    instance = new halrt.Instance();
  });
  afterEach(() => instance.close());

  it('bad specs are INVALID_ARGUMENT naming the field, a throwing getter included', () => {
    const ok = argmax(() => [[0, 0]]);
    const cases = [
      [['host', 1], 'new HostModule: functions must be an object of {inputs, outputs, impl} by function name (got 1)'],
      [[7, { f: ok }], 'new HostModule: name must be a string (got 7)'],
      [['hal', { f: ok }], "module name 'hal' is not a name other than 'hal'"],
      [['1x', { f: ok }], "module name '1x' is not a name"],
      [['host', { 'a-b': ok }], "function name 'a-b' is not a name"],
      [['host', { f: { ...ok, impl: 3 } }], 'new HostModule: functions.f.impl must be a function (got 3)'],
      [['host', { f: { ...ok, extra: 1 } }], "new HostModule: functions.f: unknown option 'extra' (known: inputs, outputs, impl)"],
      [['host', { f: { ...ok, inputs: [{ name: 'x', dtype: 'f31', shape: [1] }] } }], 'functions.f.inputs[0].dtype must be one of'],
      [['host', { f: { ...ok, outputs: [{ name: 'y', dtype: 'f32', shape: [-1] }] } }], 'functions.f.outputs[0].shape must be an Array of non-negative integers'],
      [['host', { f: { ...ok, outputs: [{ name: 'y', dtype: 'f32', shape: new Array(9).fill(1) }] } }], 'new HostModule: functions.f.outputs[0] has 9 dimensions'],
      [['host', { g: { ...ok, inputs: [{ name: 'x', dtype: 'f32', shape: [2 ** 31, 2 ** 31, 2 ** 31] }] } }], 'new HostModule: functions.g.inputs[0] '],
      [['host', { f: { ...ok, inputs: 'x' } }], 'functions.f.inputs must be an Array of {name, dtype, shape}'],
      [['host', { get f() { throw new Error('getter'); } }], 'new HostModule: reading functions threw (getter)'],
    ];
    for (const [args, text] of cases) {
      assertThrowsHalrt(() => new halrt.HostModule(instance, ...args), 'INVALID_ARGUMENT', text);
    }
    assertThrowsHalrt(() => new halrt.HostModule({}, 'host', { f: ok }), 'INVALID_ARGUMENT', 'new HostModule: instance');
    assert.strictEqual(halrt.liveObjects().module, 0);
  });

  it('a call is checked against the host function at link time', () => {
    const device = instance.createDevice('local-sync');
    const hal = new halrt.HalModule(instance, device);
    const host = new halrt.HostModule(instance, 'host', { argmax: { ...argmax(() => [[0, 0]]), outputs: [{ name: 'best', dtype: 'i64', shape: [2] }] } });
    const module = app(instance);
    try {
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, host, module]), 'INVALID_ARGUMENT',
        "call 'host.argmax': results[0] 'best' is i32[2], but output 'best' of host.argmax is i64[2]");
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, module, host]), 'NOT_FOUND', "module 'host' is linked after this one");
    } finally {
      closeAll(module, host, hal, device);
    }
  });

  it('a closure over its own Context and HostModule is collected with them', async function () {
    if (!global.gc) this.skip();
    const before = await liveBaseline();
    (() => {
      const device = instance.createDevice('local-sync');
      const hal = new halrt.HalModule(instance, device);
      let context = null;
      const host = new halrt.HostModule(instance, 'host', {
        argmax: argmax(() => [[context ? 0 : 1, host ? 0 : 1]]),
      });
      context = new halrt.Context(instance, [hal, host, app(instance)]);
      return context.lookupFunction('app.main').invoke([[[1, 2, 3], [1, 2, 3]]]);
    })().then((outputs) => outputs.forEach((v) => v.close()));
    const after = await settleLiveObjects(before);
    assert.deepStrictEqual(after, before);
  });

  it('an impl that never settles: an AbortSignal rejects the invocation at once, and once the promise is dropped the call is cancelled and everything released', async function () {
    if (!global.gc) this.skip();
    const before = await liveBaseline();
    const controller = new AbortController();
    const pending = (() => {
      const device = instance.createDevice('local-sync');
      const hal = new halrt.HalModule(instance, device);
      const host = new halrt.HostModule(instance, 'host', { argmax: argmax(() => new Promise(() => {})) });
      const context = new halrt.Context(instance, [hal, host, app(instance)]);
      const result = context.lookupFunction('app.main').invoke([[[1, 2, 3], [1, 2, 3]]], { signal: controller.signal });
      closeAll(context, host, hal, device);
      return result;
    })();
    setTimeout(() => controller.abort(), 50);
    await assertRejectsHalrt(pending, 'CANCELLED', 'app.main: the invocation was aborted');
    const after = await settleLiveObjects(before);
    assert.deepStrictEqual(after, before);
  });

  for (const order of [['context', 'host', 'hal', 'device'], ['device', 'hal', 'host', 'context'], ['host', 'device', 'context', 'hal']]) {
    it(`closing ${order.join(', ')} while a host call waits: the invocation settles, nothing is left`, async function () {
      if (!global.gc) this.skip();
      const before = await liveBaseline();
      let release;
      const gate = new Promise((resolve) => {
        release = resolve;
      });
      let started;
      const inImpl = new Promise((resolve) => {
        started = resolve;
      });
      const objects = {};
      objects.device = instance.createDevice('local-task?workers=2');
      objects.hal = new halrt.HalModule(instance, objects.device);
      objects.host = new halrt.HostModule(instance, 'host', {
        argmax: argmax(async (scores) => {
          started();
          await gate;
          return [rowArgmax(scores)];
        }),
      });
      const module = app(instance);
      objects.context = new halrt.Context(instance, [objects.hal, objects.host, module]);
      const main = objects.context.lookupFunction('app.main');
      const result = main.invoke([[[1, 5, 3], [9, 2, 4]]], { read: true });
      await inImpl;
      for (const name of order) objects[name].close();
      closeAll(main, module);
      release();
      const [best] = await result;
      assert.deepStrictEqual(Array.from(best), [1, 0]);
      const after = await settleLiveObjects(before);
      assert.deepStrictEqual(after, before);
    });
  }

  it('halrt.load(file, {imports}) links HostModules before the loaded module, on their Instance', async () => {
    const fs = require('fs');
    const os = require('os');
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-host-'));
    const file = path.join(folder, 'app.halrt.json');
    fs.writeFileSync(file, JSON.stringify({
      format: 'halrt.module/1', name: 'app', executables: { k: BUILTIN },
      functions: { main: { inputs: [f32('x', [2, 3])], outputs: [{ name: 'best', dtype: 'i32', shape: [2] }], body: [{ op: 'call', callee: 'host.argmax', args: ['x'], results: ['best'] }] } },
    }));
    const host = new halrt.HostModule(instance, 'host', { argmax: argmax((s) => [rowArgmax(s)]) });
    try {
      const m = await halrt.load(file, { device: 'local-sync', imports: [host] });
      assert.deepStrictEqual(Array.from((await m.main([[0, 9, 0], [0, 0, 9]], { read: true }))[0]), [1, 2]);
      assert.strictEqual(m.instance, instance);
      m.close();
      assert.strictEqual(instance.closed, false, 'the imports\' Instance is not load()\'s to close');
      await assert.rejects(halrt.load(file, { imports: [{}] }), /options\.imports must be an Array of HostModules/);
      await assert.rejects(halrt.load(file), (error) => error.code === 'NOT_FOUND' && /no module named 'host' is linked before this one/.test(error.message));
    } finally {
      host.close();
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('a worker that ends while host calls wait behind its slow sink: every invocation ends and nothing is left', async () => {
    for (const uri of ['local-sync', 'local-task?workers=2']) {
      const before = await liveBaseline();
      const script = `
        const halrt = require(${LIB});
        const { parentPort } = require('worker_threads');
        const busy = (ms) => { const until = Date.now() + ms; while (Date.now() < until); };
        const instance = new halrt.Instance();
        const device = instance.createDevice('${uri}');
        let traces = 0;
        const hal = new halrt.HalModule(instance, device, { debugSink: () => { if (++traces === 3) parentPort.postMessage('sinking'); busy(2); } });
        const host = new halrt.HostModule(instance, 'host', { f: { inputs: [{ name: 'x', dtype: 'f32', shape: [4] }], outputs: [{ name: 'y', dtype: 'f32', shape: [4] }], impl: (x) => x.data } });
        const module = new halrt.ModuleBuilder('m').function('main', (f) => {
          f.input('x', 'f32', [4]).output('y', 'f32', [4]);
          for (let i = 0; i < 30; ++i) f.trace('t' + i, ['x']);
          return f.call('host.f', ['x'], ['y']);
        }).build(instance);
        const main = new halrt.Context(instance, [hal, host, module]).lookupFunction('m.main');
        for (let i = 0; i < 8; ++i) main.invoke([[1, 2, 3, 4]]).catch(() => {});`;
      const worker = new Worker(script, { eval: true });
      await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      await worker.terminate();
      assert.deepStrictEqual(await settleLiveObjects(before), before, uri);
    }
  });

  it('a worker that ends while its impl is pending, and process.exit in impl: no crash', async () => {
    const script = `
      const halrt = require(${LIB});
      const { parentPort } = require('worker_threads');
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const hal = new halrt.HalModule(instance, device);
      const host = new halrt.HostModule(instance, 'host', { f: { inputs: [{ name: 'x', dtype: 'f32', shape: [4] }], impl: () => { parentPort.postMessage('in impl'); return new Promise(() => {}); } } });
      const context = new halrt.Context(instance, [hal, host]);
      context.lookupFunction('host.f').invoke([[1, 2, 3, 4]]);`;
    const worker = new Worker(script, { eval: true });
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    const exit = spawnSync(process.execPath, ['-e', `
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const host = new halrt.HostModule(instance, 'host', { f: { inputs: [], outputs: [], impl: () => process.exit(7) } });
      const context = new halrt.Context(instance, [new halrt.HalModule(instance, device), host]);
      context.lookupFunction('host.f').invoke([]);
      setTimeout(() => process.exit(1), 10000);`], { encoding: 'utf8', timeout: 20000 });
    assert.strictEqual(exit.signal, null, exit.stderr);
    assert.strictEqual(exit.status, 7, exit.stderr);
  });
});

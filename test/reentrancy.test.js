'use strict';
// Reading an argument can run user code: an array element getter, a Proxy
// trap, an option getter, toJSON. Each public method is called here with
// arguments whose reading closes every object the method touches. The call
// must succeed with the right result or fail with a HalrtError, never crash
// or use a freed object, and nothing may leak once everything is closed.

const assert = require('assert');
const halrt = require('..');
const {
  assertRejectsHalrt, assertThrowsHalrt, closeAll, liveBaseline, settleLiveObjects,
} = require('./helpers');

/** `values` as an Array whose element `index` closes `objects` when read. */
function closingArray(values, index, ...objects) {
  const array = values.slice();
  Object.defineProperty(array, index, {
    enumerable: true,
    get() {
      for (const object of objects) object.close();
      return values[index];
    },
  });
  return array;
}

/** A Proxy of `target` whose every get trap closes `objects` first. */
function closingProxy(target, ...objects) {
  return new Proxy(target, {
    get(object, key, receiver) {
      for (const closed of objects) closed.close();
      return Reflect.get(object, key, receiver);
    },
  });
}

/** `options` with a getter for `key` that closes `objects`. */
function closingOption(options, key, ...objects) {
  const result = { ...options };
  Object.defineProperty(result, key, {
    enumerable: true,
    get() {
      for (const object of objects) object.close();
      return options[key];
    },
  });
  return result;
}

/** Whether running `fn` ends in a value or a HalrtError (and which). */
async function outcome(fn) {
  try {
    return { value: await fn() };
  } catch (error) {
    assert.ok(error instanceof halrt.HalrtError, `expected a HalrtError, got ${error && error.stack}`);
    return { error };
  }
}

const ADD = {
  format: 'halrt.module/1',
  name: 'm',
  executables: { k: { local: { builtin: true } } },
  functions: {
    add: {
      inputs: [{ name: 'a', dtype: 'f32', shape: [4] }, { name: 'b', dtype: 'f32', shape: [4] }],
      outputs: [{ name: 'y', dtype: 'f32', shape: [4] }],
      body: [
        { op: 'dispatch', kernel: 'k.add_f32', workgroups: [1], bindings: ['a', 'b', 'y'], constants: [4] },
        { op: 'trace', key: 'y', values: ['y'] },
      ],
    },
  },
};

describe('re-entrancy: argument reading that closes objects', () => {
  let baseline;
  before(async () => {
    baseline = await liveBaseline();
  });
  afterEach(async () => {
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
  });

  for (const method of ['empty', 'tensor']) {
    it(`device.${method}: a shape element getter that closes the device and instance`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const shape = closingArray([2, 3], 1, device, instance);
      const view = method === 'empty'
        ? device.empty(shape, 'f32')
        : device.tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), shape);
      // The call kept the device for itself: the view is whole and readable.
      assert.deepStrictEqual(view.shape, [2, 3]);
      const expected = method === 'empty' ? new Float32Array(6) : Float32Array.from([1, 2, 3, 4, 5, 6]);
      assert.deepStrictEqual(await view.read(), expected);
      // And the close took effect.
      assertThrowsHalrt(() => device.empty([1], 'f32'), 'FAILED_PRECONDITION', 'device.empty: Device is closed');
      assertThrowsHalrt(() => instance.createDevice('local-sync'), 'FAILED_PRECONDITION', 'Instance is closed');
      view.close();
    });

    it(`device.${method}: a Proxy shape whose traps close the device`, async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      const shape = closingProxy([4], device);
      const result = await outcome(async () => {
        const view = method === 'empty' ? device.empty(shape, 'i32') : device.tensor(Int32Array.from([1, 2, 3, 4]), shape);
        try {
          return Array.from(await view.read());
        } finally {
          view.close();
        }
      });
      if (result.error === undefined) {
        assert.deepStrictEqual(result.value, method === 'empty' ? [0, 0, 0, 0] : [1, 2, 3, 4]);
      }
      closeAll(device, instance);
    });
  }

  it('device.tensor: a shape getter that detaches the data\'s ArrayBuffer is INVALID_ARGUMENT, nothing read', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const data = Float32Array.from([1, 2, 3, 4]);
    const shape = [4];
    Object.defineProperty(shape, 0, { get() { structuredClone(data.buffer, { transfer: [data.buffer] }); return 4; } });
    assertThrowsHalrt(() => device.tensor(data, shape), 'INVALID_ARGUMENT',
      'device.tensor: data has 0 elements but shape [4] needs 4');
    closeAll(device, instance);
  });

  it('device.copy: a Proxy argument is no BufferView, whatever its traps close', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const source = device.tensor(Float32Array.from([1, 2]), [2]);
    const target = device.empty([2], 'f32');
    await assertRejectsHalrt(device.copy(source, closingProxy(target, source, device)), 'INVALID_ARGUMENT',
      'device.copy: target is not a BufferView');
    // Nothing was closed by a type check, and the copy still works.
    await device.copy(source, target);
    assert.deepStrictEqual(await target.read(), Float32Array.from([1, 2]));
    closeAll(source, target, device, instance);
  });

  describe('function.invoke', () => {
    let instance, device, hal, module, context, fn, a, b, traces;
    beforeEach(() => {
      traces = [];
      instance = new halrt.Instance();
      device = instance.createDevice('local-task?workers=2');
      hal = new halrt.HalModule(instance, device, { debugSink: (key, tensors) => traces.push([key, Array.from(tensors[0].data)]) });
      module = halrt.Module.fromObject(instance, ADD);
      context = new halrt.Context(instance, [hal, module]);
      fn = context.lookupFunction('m.add');
      a = device.tensor(Float32Array.from([1, 2, 3, 4]), [4]);
      b = device.tensor(Float32Array.from([10, 20, 30, 40]), [4]);
    });
    afterEach(() => closeAll(a, b, fn, context, module, hal, device, instance));

    const victims = {
      'an earlier input': () => [a],
      'the function': () => [fn],
      'the context': () => [context],
      'every object it touches': () => [a, fn, context, module, hal, device, instance],
    };
    for (const [what, pick] of Object.entries(victims)) {
      it(`an inputs element getter that closes ${what}: the invocation completes with the right values`, async () => {
        const [y] = await fn.invoke(closingArray([a, b], 1, ...pick()));
        assert.deepStrictEqual(await y.read(), Float32Array.from([11, 22, 33, 44]));
        assert.deepStrictEqual(traces, [['y', [11, 22, 33, 44]]]);
        y.close();
        // Closed for later calls.
        if (pick().includes(fn)) await assertRejectsHalrt(fn.invoke([a, b]), 'FAILED_PRECONDITION', 'Function is closed');
      });
    }

    it('an object closed inside an inputs getter says closed at once, though the call completes on it', async () => {
      const seen = [];
      const inputs = [a, b];
      Object.defineProperty(inputs, 1, {
        enumerable: true,
        get() {
          fn.close();
          seen.push(fn.closed);
          return b;
        },
      });
      const [y] = await fn.invoke(inputs);
      assert.deepStrictEqual(seen, [true], 'closed: close() was called');
      assert.deepStrictEqual(await y.read(), Float32Array.from([11, 22, 33, 44]));
      y.close();
      assert.strictEqual(fn.closed, true);
      await assertRejectsHalrt(fn.invoke([a, b]), 'FAILED_PRECONDITION', 'Function is closed');
    });

    it('a Proxy inputs array whose traps close the inputs and the context: a value or a HalrtError', async () => {
      const result = await outcome(async () => {
        const [y] = await fn.invoke(closingProxy([a, b], a, b, context));
        try {
          return Array.from(await y.read());
        } finally {
          y.close();
        }
      });
      if (result.error === undefined) {
        assert.deepStrictEqual(result.value, [11, 22, 33, 44]);
      } else {
        // A Proxy is not an Array to the binding: refused before any trap ran.
        assert.strictEqual(result.error.code, 'INVALID_ARGUMENT');
        assert.match(result.error.message, /function\.invoke: inputs must be an Array/);
      }
    });

    it('an options.signal getter that closes everything', async () => {
      const options = closingOption({ signal: undefined }, 'signal', a, b, fn, context, device);
      const result = await outcome(() => fn.invoke([a, b], options));
      assert.ok(result.error, 'the inputs were closed before the native call read them');
      assert.strictEqual(result.error.code, 'FAILED_PRECONDITION');
    });
  });

  it('new Context: a modules element getter that closes an earlier module and the instance', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const hal = new halrt.HalModule(instance, device);
    const module = halrt.Module.fromObject(instance, ADD);
    const context = new halrt.Context(instance, closingArray([hal, module], 1, hal, instance));
    const fn = context.lookupFunction('m.add');
    const a = device.tensor(Float32Array.from([1, 1, 1, 1]), [4]);
    const [y] = await fn.invoke([a, a]);
    assert.deepStrictEqual(await y.read(), Float32Array.from([2, 2, 2, 2]));
    closeAll(y, a, fn, context, module, hal, device, instance);
  });

  it('new Context: a Proxy modules array that closes every module', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const hal = new halrt.HalModule(instance, device);
    const module = halrt.Module.fromObject(instance, ADD);
    const result = await outcome(() => new halrt.Context(instance, closingProxy([hal, module], hal, module)));
    if (result.value) result.value.close();
    closeAll(module, hal, device, instance);
  });

  describe('new HalModule', () => {
    const options = {
      debugSink: () => {},
      traceDispatches: true,
      profile: true,
      nonFinite: 'reject',
      maxTraceBytes: 1 << 20,
      tracePolicy: 'wait',
      traceData: 'borrowed',
    };
    /**
     * Makes a HalModule with `makeOptions(device)`, whose reading closes the
     * device, and runs it: the module holds the device it was given, so its
     * work runs there and the results are right.
     */
    async function check(makeOptions) {
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task?workers=2');
      const a = device.tensor(Float32Array.from([1, 2, 3, 4]), [4]);
      const module = halrt.Module.fromObject(instance, ADD);
      const hal = new halrt.HalModule(instance, device, makeOptions(device));
      assert.strictEqual(hal.device, device);
      assertThrowsHalrt(() => device.empty([1], 'f32'), 'FAILED_PRECONDITION', 'Device is closed');
      const context = new halrt.Context(instance, [hal, module]);
      const fn = context.lookupFunction('m.add');
      const [y] = await fn.invoke([a, a]);
      assert.deepStrictEqual(await y.read(), Float32Array.from([2, 4, 6, 8]));
      closeAll(y, a, fn, context, hal, module, instance);
    }

    it('an option getter that closes the instance: the HalModule is made, a Context with it is not', () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      const hal = new halrt.HalModule(instance, device, closingOption(options, 'profile', instance));
      assertThrowsHalrt(() => new halrt.Context(instance, [hal]), 'FAILED_PRECONDITION', 'new Context: instance Instance is closed');
      closeAll(hal, device);
    });

    for (const key of Object.keys(options)) {
      it(`an options.${key} getter that closes the device: the module is whole and runs`, async () => {
        await check((device) => closingOption(options, key, device));
      });
    }

    it('a tee sink list element getter that closes the device', async () => {
      await check((device) => ({ debugSink: { halrtSinkKind: 'tee', sinks: closingArray([() => {}, () => {}], 1, device) } }));
    });

    it('a traceDispatches.functions element getter that closes the device', async () => {
      await check((device) => ({ debugSink: () => {}, traceDispatches: { functions: closingArray(['add', 'x'], 1, device) } }));
    });

    it('an object sink whose method getters close the device', async () => {
      await check((device) => ({
        debugSink: closingOption({ trace() {}, timing() {}, invocation() {} }, 'timing', device),
        profile: true,
      }));
    });

    it('a Proxy options object that closes the device on every trap', async () => {
      await check((device) => closingProxy({ ...options }, device));
    });
  });

  it('Module.fromObject: a toJSON that closes the instance fails with FAILED_PRECONDITION', () => {
    const instance = new halrt.Instance();
    const description = { ...ADD, toJSON() { instance.close(); return ADD; } };
    assertThrowsHalrt(() => halrt.Module.fromObject(instance, description), 'FAILED_PRECONDITION', 'Instance is closed');
  });

  it('string arguments are never coerced, so no toString runs: createDevice, lookupFunction, fromJson', () => {
    const instance = new halrt.Instance();
    const hal = new halrt.HalModule(instance, instance.createDevice('local-sync'));
    const context = new halrt.Context(instance, [hal]);
    let ran = 0;
    const sneaky = { toString() { ran += 1; context.close(); instance.close(); return 'local-sync'; } };
    assertThrowsHalrt(() => instance.createDevice(sneaky), 'INVALID_ARGUMENT', 'instance.createDevice');
    assertThrowsHalrt(() => context.lookupFunction(sneaky), 'INVALID_ARGUMENT', 'context.lookupFunction');
    assertThrowsHalrt(() => halrt.Module.fromJson(instance, sneaky), 'INVALID_ARGUMENT', 'Module.fromJson');
    assert.strictEqual(ran, 0);
    closeAll(context, hal.device, hal, instance);
  });

  it('a getter that closes an object used by an outer call, from inside a nested halrt call', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const inner = [];
    const shape = [2];
    Object.defineProperty(shape, 0, {
      get() {
        // A nested call pins and releases its own objects; the outer call's
        // pin on the device must survive it.
        const view = device.empty([1], 'u8');
        inner.push(view);
        device.close();
        return 2;
      },
    });
    const outer = device.empty(shape, 'u8');
    assert.deepStrictEqual(await outer.read(), new Uint8Array(2));
    assert.deepStrictEqual(await inner[0].read(), new Uint8Array(1));
    closeAll(outer, inner[0], instance);
  });
});

'use strict';
// traceDispatches.keys is a JavaScript RegExp with JavaScript semantics:
// `new Context` tests it against every dispatch key it links, as
// `re.test(key)` with lastIndex 0 on a copy made when the HalModule was.
const assert = require('assert');
const halrt = require('..');
const { BUILTIN, assertThrowsHalrt, closeAll, liveBaseline, settleLiveObjects } = require('./helpers');

/**
 * A module with functions `main` (add then relu), `Upper` (relu) and
 * `other` (add); the dispatch keys are main:0:add_f32, main:1:relu_f32,
 * Upper:0:relu_f32, other:0:add_f32.
 */
function buildModule(instance, name = 'm') {
  return new halrt.ModuleBuilder(name).executable('k', BUILTIN)
    .function('main', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2]).local('t', 'f32', [2])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 't'], constants: [2] })
      .dispatch('k.relu_f32', { workgroups: [1], bindings: ['t', 'y'], constants: [2] }))
    .function('Upper', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [2] }))
    .function('other', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [2] }))
    .build(instance);
}

const ALL_KEYS = ['main:0:add_f32', 'main:1:relu_f32', 'Upper:0:relu_f32', 'other:0:add_f32'];

/** The dispatch keys traced when every function runs once with `keys`. */
async function tracedKeys(keys, extra = {}) {
  const instance = new halrt.Instance();
  const device = instance.createDevice('local-sync');
  const traced = [];
  const hal = new halrt.HalModule(instance, device, {
    debugSink: (key) => traced.push(key), traceDispatches: { keys, ...extra },
  });
  const module = buildModule(instance);
  const context = new halrt.Context(instance, [hal, module]);
  const x = device.tensor(Float32Array.from([1, -2]), [2]);
  const fns = ['main', 'Upper', 'other'].map((name) => context.lookupFunction(`m.${name}`));
  try {
    for (const fn of fns) closeAll(await fn.invoke([x]));
    return traced;
  } finally {
    closeAll(fns, x, context, module, hal, device, instance);
  }
}

/** Runs `fn` with RegExp.prototype.exec replaced by `exec`. */
async function withExec(exec, fn) {
  const original = RegExp.prototype.exec;
  RegExp.prototype.exec = exec; // eslint-disable-line no-extend-native
  try {
    return await fn();
  } finally {
    RegExp.prototype.exec = original; // eslint-disable-line no-extend-native
  }
}

describe('traceDispatches.keys: JavaScript RegExp semantics', () => {
  let baseline;
  before(async () => {
    baseline = await liveBaseline();
  });
  after(async () => {
    await settleLiveObjects(baseline);
  });

  const cases = [
    ['\\d', /main:\d:add/, ['main:0:add_f32']],
    ['\\w and an anchor', /^\w+:1:/, ['main:1:relu_f32']],
    ['a lookahead', /^(?!main)\w+:0:(?=relu)/, ['Upper:0:relu_f32']],
    ['the i flag with \\d', /MAIN:\d:RELU/i, ['main:1:relu_f32']],
    ['unicode property escapes (u)', /^\p{Lu}/u, ['Upper:0:relu_f32']],
    ['the v flag', () => new RegExp('^[\\p{Ll}--[m]]', 'v'), ['other:0:add_f32']],
    ['the s flag', /main.+relu/s, ['main:1:relu_f32']],
    ['the d flag', /other/d, ['other:0:add_f32']],
    ['alternation', /relu|other/, ['main:1:relu_f32', 'Upper:0:relu_f32', 'other:0:add_f32']],
    ['no match', /nothing/, []],
    ['empty', new RegExp(''), ALL_KEYS],
  ];
  for (const [what, keys, expected] of cases) {
    it(`${what}${typeof keys === 'function' ? '' : `: ${keys}`}`, async function () {
      let regexp = keys;
      if (typeof keys === 'function') {
        try {
          regexp = keys();
        } catch {
          this.skip(); // a flag this Node does not know (v before Node 20)
        }
      }
      assert.deepStrictEqual(await tracedKeys(regexp), expected);
    });
  }

  it('the g flag: every key is tested from lastIndex 0, whatever earlier tests matched and whatever lastIndex the RegExp has', async () => {
    const keys = /add|relu/g;
    keys.lastIndex = 9;
    assert.deepStrictEqual(await tracedKeys(keys), ALL_KEYS);
    assert.strictEqual(keys.lastIndex, 9, 'the given RegExp is not used, so not changed');
    // A stateful test would have skipped a key: this is what `g` does when reused.
    const reused = /add|relu/g;
    assert.deepStrictEqual(ALL_KEYS.map((key) => reused.test(key)), [true, false, true, false]);
  });

  it('the y flag anchors at the start of the key', async () => {
    assert.deepStrictEqual(await tracedKeys(/main/y), ['main:0:add_f32', 'main:1:relu_f32']);
    assert.deepStrictEqual(await tracedKeys(/add/y), []);
  });

  it('keys combine with functions and every', async () => {
    assert.deepStrictEqual(await tracedKeys(/add/, { functions: ['other', 'Upper'] }), ['other:0:add_f32']);
    assert.deepStrictEqual(await tracedKeys(/add/, { every: 2 }), [], 'each function ran as invocation 1, 2, 3: main ran first');
  });

  it('the filter is fixed when the HalModule is made: changing the RegExp later changes nothing', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const traced = [];
    const keys = /relu/;
    const hal = new halrt.HalModule(instance, device, { debugSink: (key) => traced.push(key), traceDispatches: { keys } });
    keys.compile('add'); // Annex B: the same object, another pattern
    keys.exec = () => null;
    const module = buildModule(instance);
    const context = new halrt.Context(instance, [hal, module]);
    const fn = context.lookupFunction('m.main');
    const x = device.tensor(Float32Array.from([1, -2]), [2]);
    try {
      closeAll(await fn.invoke([x]));
      assert.deepStrictEqual(traced, ['main:1:relu_f32']);
      assert.strictEqual(hal.traceDispatches.keys, keys, 'the option is kept as given');
    } finally {
      closeAll(x, fn, context, module, hal, device, instance);
    }
  });

  it('each Context asks about its own modules: one HalModule, two modules with different keys', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const traced = [];
    const hal = new halrt.HalModule(instance, device, { debugSink: (key, t, info) => traced.push(`${info.function} ${key}`), traceDispatches: { keys: /^f:0:relu/ } });
    const a = new halrt.ModuleBuilder('a').executable('k', BUILTIN).function('f', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [2] })).build(instance);
    const b = new halrt.ModuleBuilder('b').executable('k', BUILTIN).function('f', (f) => f.input('x', 'f32', [2]).output('y', 'f32', [2])
      .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [2] })).build(instance);
    const both = new halrt.Context(instance, [hal, a, b]);
    const onlyB = new halrt.Context(instance, [hal, b]);
    const x = device.tensor(Float32Array.from([1, -2]), [2]);
    const fns = [both.lookupFunction('a.f'), both.lookupFunction('b.f'), onlyB.lookupFunction('b.f')];
    try {
      for (const fn of fns) closeAll(await fn.invoke([x]));
      assert.deepStrictEqual(traced, ['b.f f:0:relu_f32', 'b.f f:0:relu_f32']);
    } finally {
      closeAll(x, fns, both, onlyB, a, b, hal, device, instance);
    }
  });

  it('keys that are not a RegExp are INVALID_ARGUMENT naming the option', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      for (const keys of ['relu', { source: 'relu', flags: '' }, null, 3]) {
        assertThrowsHalrt(() => new halrt.HalModule(instance, device, { traceDispatches: { keys } }),
          'INVALID_ARGUMENT', 'new HalModule: options.traceDispatches.keys must be a RegExp');
      }
    } finally {
      closeAll(device, instance);
    }
  });

  it('a test that throws makes new Context fail with ABORTED naming the filter and key, the thrown value as cause; nothing leaks', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const hal = new halrt.HalModule(instance, device, { debugSink: () => {}, traceDispatches: { keys: /relu/i } });
    const module = buildModule(instance);
    const thrown = new Error('exec refused');
    try {
      await withExec(() => {
        throw thrown;
      }, () => {
        let error;
        try {
          new halrt.Context(instance, [hal, module]); // eslint-disable-line no-new
        } catch (e) {
          error = e;
        }
        assert.ok(error instanceof halrt.HalrtError, String(error));
        assert.strictEqual(error.code, 'ABORTED');
        assert.strictEqual(error.message,
          "new Context: the HalModule's options.traceDispatches.keys /relu/i threw testing the dispatch key 'main:0:add_f32'");
        assert.strictEqual(error.cause, thrown);
      });
      // A HalModule without keys never runs the RegExp.
      const plain = new halrt.HalModule(instance, device, { traceDispatches: true });
      await withExec(() => {
        throw thrown;
      }, () => new halrt.Context(instance, [plain, module]).close());
      plain.close();
      // The same HalModule links once exec is back.
      new halrt.Context(instance, [hal, module]).close();
    } finally {
      closeAll(module, hal, device, instance);
    }
  });

  it('a test that closes every object: new Context gives a working Context or a HalrtError, never a crash', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const traced = [];
    const hal = new halrt.HalModule(instance, device, { debugSink: (key) => traced.push(key), traceDispatches: { keys: /relu/ } });
    const module = buildModule(instance);
    const x = device.tensor(Float32Array.from([1, -2]), [2]);
    const original = RegExp.prototype.exec;
    let context;
    await withExec(function exec(text) {
      closeAll(module, hal, device, instance);
      return original.call(this, text);
    }, () => {
      try {
        context = new halrt.Context(instance, [hal, module]);
      } catch (error) {
        assert.ok(error instanceof halrt.HalrtError, String(error));
      }
    });
    try {
      if (context) {
        // The Context holds its modules and device: it still runs and traces.
        const fn = context.lookupFunction('m.main');
        const [y] = await fn.invoke([x]);
        assert.deepStrictEqual(await y.read(), Float32Array.from([2, 0]));
        assert.deepStrictEqual(traced, ['main:1:relu_f32']);
        closeAll(y, fn);
      }
    } finally {
      closeAll(x, context);
    }
  });

  it('a test that links another Context with the same modules (nested new Context): both filter right', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const traced = [];
    const hal = new halrt.HalModule(instance, device, { debugSink: (key) => traced.push(key), traceDispatches: { keys: /relu/ } });
    const module = buildModule(instance);
    const original = RegExp.prototype.exec;
    let inner;
    let outer;
    await withExec(function exec(text) {
      if (inner === undefined) {
        inner = null;
        inner = new halrt.Context(instance, [hal, module]);
      }
      return original.call(this, text);
    }, () => {
      outer = new halrt.Context(instance, [hal, module]);
    });
    const x = device.tensor(Float32Array.from([1, -2]), [2]);
    const fns = [inner, outer].map((context) => context.lookupFunction('m.main'));
    try {
      for (const fn of fns) closeAll(await fn.invoke([x]));
      assert.deepStrictEqual(traced, ['main:1:relu_f32', 'main:1:relu_f32']);
    } finally {
      closeAll(x, fns, inner, outer, module, hal, device, instance);
    }
  });
});

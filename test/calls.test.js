'use strict';
// The call op between program modules (docs/module-format.md, "call"):
// results against host references on every device, traces and timings of
// callees, link-time resolution and type errors, aliasing, nesting.
const assert = require('assert');
const halrt = require('..');
const { BUILTIN, DEVICE_URIS, assertThrowsHalrt, closeAll } = require('./helpers');

// lib.scale2(a) -> b = a + a, through a local t that it traces as 'in_lib'.
function lib(instance, name = 'lib') {
  return new halrt.ModuleBuilder(name).executable('k', BUILTIN)
    .function('scale2', (f) => f.input('a', 'f32', [4]).output('b', 'f32', [4]).local('t', 'f32', [4])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'a', 't'], constants: [4] })
      .trace('in_lib', ['t'])
      .copy('t', 'b'))
    // accumulates into its output: a call's outputs start zeroed
    .function('accumulate', (f) => f.input('a', 'f32', [4]).output('b', 'f32', [4])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['b', 'a', 'b'], constants: [4] })
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['b', 'a', 'b'], constants: [4] }))
    .build(instance);
}

for (const uri of DEVICE_URIS) {
  describe(`call op on ${uri}`, () => {
    let instance, device, objects;
    beforeEach(() => {
      instance = new halrt.Instance();
      device = instance.createDevice(uri);
      objects = [];
    });
    afterEach(() => {
      closeAll(objects.reverse(), device, instance);
    });
    const keep = (...made) => {
      objects.push(...made);
      return made[made.length - 1];
    };

    it('runs the callee on the caller\'s values, twice in a row, and traces in program order with the callee named', async () => {
      const seen = [];
      const hal = keep(new halrt.HalModule(instance, device, {
        traceDispatches: true,
        debugSink: (key, tensors, info) => seen.push([key, info.function, info.op, Array.from(tensors[0].data)]),
      }));
      const app = keep(new halrt.ModuleBuilder('app').executable('k', BUILTIN)
        .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]).local('h', 'f32', [4])
          .call('lib.scale2', ['x'], ['h'])
          .trace('between', ['h'])
          .call('lib.scale2', ['h'], ['y']))
        .build(instance));
      const context = keep(new halrt.Context(instance, [hal, keep(lib(instance)), app]));
      const [y] = await context.lookupFunction('app.main').invoke([[1, 2, 3, 4]]);
      assert.deepStrictEqual(Array.from(await y.read()), [4, 8, 12, 16]);
      y.close();
      assert.deepStrictEqual(seen, [
        ['scale2:0:add_f32', 'lib.scale2', 0, [2, 4, 6, 8]],
        ['in_lib', 'lib.scale2', 1, [2, 4, 6, 8]],
        ['between', 'app.main', 1, [2, 4, 6, 8]],
        ['scale2:0:add_f32', 'lib.scale2', 0, [4, 8, 12, 16]],
        ['in_lib', 'lib.scale2', 1, [4, 8, 12, 16]],
      ]);
    });

    it('a result starts zeroed even when the caller wrote it before; a result that is also an arg is written after the callee ran', async () => {
      const hal = keep(new halrt.HalModule(instance, device));
      const app = keep(new halrt.ModuleBuilder('app').executable('k', BUILTIN)
        .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]).output('z', 'f32', [4])
          .fill('y', 7)
          .call('lib.accumulate', ['x'], ['y'])      // y = 0 + x + x
          .copy('x', 'z')
          .call('lib.accumulate', ['z'], ['z'])      // z = 0 + z + z, z read before it is replaced
          .call('lib.scale2', ['x'], ['x']))         // writes the caller's input, as an op would
        .build(instance));
      const context = keep(new halrt.Context(instance, [hal, keep(lib(instance)), app]));
      const x = device.tensor([1, 2, 3, 4]);
      const [y, z] = await context.lookupFunction('app.main').invoke([x]);
      assert.deepStrictEqual(Array.from(await y.read()), [2, 4, 6, 8]);
      assert.deepStrictEqual(Array.from(await z.read()), [2, 4, 6, 8]);
      assert.deepStrictEqual(Array.from(await x.read()), [2, 4, 6, 8]);
      closeAll(x, y, z);
    });

    it('calls nest: a module calls one that calls another; profile timings name the callee\'s ops, and each call spans its own', async () => {
      const timings = [];
      const hal = keep(new halrt.HalModule(instance, device, { profile: true, debugSink: { timing: (event) => timings.push(event) } }));
      const mid = keep(new halrt.ModuleBuilder('mid').executable('k', BUILTIN)
        .function('twice', (f) => f.input('a', 'f32', [4]).output('b', 'f32', [4]).local('t', 'f32', [4])
          .call('lib.scale2', ['a'], ['t'])
          .call('lib.scale2', ['t'], ['b']))
        .build(instance));
      const app = keep(new halrt.ModuleBuilder('app').executable('k', BUILTIN)
        .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
          .call('mid.twice', ['x'], ['y'])
          .dispatch('k.relu_f32', { workgroups: [1], bindings: ['y', 'y'], constants: [4] }))
        .build(instance));
      const context = keep(new halrt.Context(instance, [hal, keep(lib(instance)), mid, app]));
      const [y] = await context.lookupFunction('app.main').invoke([[1, -2, 3, -4]]);
      assert.deepStrictEqual(Array.from(await y.read()), [4, 0, 12, 0]);
      y.close();
      // Each call is an event of its own, from its first dispatch's start
      // to its last one's end, after the dispatches it spans.
      assert.deepStrictEqual(timings.map((e) => [e.function, e.op, e.kernel]), [
        ['lib.scale2', 0, 'k.add_f32'], ['mid.twice', 0, 'lib.scale2'],
        ['lib.scale2', 0, 'k.add_f32'], ['mid.twice', 1, 'lib.scale2'], ['app.main', 0, 'mid.twice'],
        ['app.main', 1, 'k.relu_f32'],
      ]);
      const [first, , second, , outer] = timings;
      assert.strictEqual(outer.startNs, first.startNs);
      assert.strictEqual(outer.startNs + outer.durationNs, second.startNs + second.durationNs);
    });

    it('a callee\'s failure fails the call, later ops do not run, and the context works after', async () => {
      const seen = [];
      const hal = keep(new halrt.HalModule(instance, device, { nonFinite: 'reject', debugSink: (key) => seen.push(key) }));
      const app = keep(new halrt.ModuleBuilder('app').executable('k', BUILTIN)
        .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
          .call('lib.scale2', ['x'], ['y'])
          .trace('after', ['y']))
        .build(instance));
      const context = keep(new halrt.Context(instance, [hal, keep(lib(instance)), app]));
      const main = keep(context.lookupFunction('app.main'));
      await assert.rejects(main.invoke([[1, NaN, 3, 4]]), (error) => error.code === 'ABORTED' && /in_lib/.test(error.message));
      assert.deepStrictEqual(seen, []);
      const [y] = await main.invoke([[1, 1, 1, 1]]);
      assert.deepStrictEqual(Array.from(await y.read()), [2, 2, 2, 2]);
      assert.deepStrictEqual(seen, ['in_lib', 'after']);
      y.close();
    });
  });
}

describe('call op: errors', () => {
  let instance, device, hal, library;
  before(() => {
    instance = new halrt.Instance();
    device = instance.createDevice('local-sync');
    hal = new halrt.HalModule(instance, device);
    library = lib(instance);
  });
  after(() => closeAll(library, hal, device, instance));

  function link(body, order = (m) => [hal, library, m]) {
    const module = new halrt.ModuleBuilder('app').executable('k', BUILTIN).function('main', body).build(instance);
    try {
      new halrt.Context(instance, order(module)).close();
    } finally {
      module.close();
    }
  }
  const xy = (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]);

  it('module creation checks the op\'s fields', () => {
    const build = (op) => () => halrt.Module.fromObject(instance, {
      format: 'halrt.module/1', name: 'app',
      functions: { main: { inputs: [{ name: 'x', dtype: 'f32', shape: [4] }], outputs: [{ name: 'y', dtype: 'f32', shape: [4] }], body: [op] } },
    });
    assertThrowsHalrt(build({ op: 'call', callee: 'libscale2', args: ['x'], results: ['y'] }), 'INVALID_ARGUMENT',
      "functions.main.body[0].callee: 'libscale2' must be 'module.function'");
    assertThrowsHalrt(build({ op: 'call', callee: 'app.main', args: ['x'], results: ['y'] }), 'INVALID_ARGUMENT',
      "functions.main.body[0].callee: 'app.main' is a function of this module; a call goes to a module linked before it");
    assertThrowsHalrt(build({ op: 'call', callee: 'lib.scale2', args: ['q'], results: ['y'] }), 'NOT_FOUND',
      "functions.main.body[0].args[0]: unknown value 'q'");
    assertThrowsHalrt(build({ op: 'call', callee: 'lib.scale2', args: ['x'], results: ['y', 'y'] }), 'INVALID_ARGUMENT',
      "functions.main.body[0].results[1]: 'y' receives two results of the call");
    assertThrowsHalrt(build({ op: 'call', callee: 'lib.scale2', args: 'x', results: ['y'] }), 'INVALID_ARGUMENT', 'functions.main.body[0].args');
    assertThrowsHalrt(build({ op: 'call', callee: 'lib.scale2', args: ['x'], results: ['y'], extra: 1 }), 'INVALID_ARGUMENT', "unknown field 'extra'");
    assertThrowsHalrt(build({ op: 'cal' }), 'INVALID_ARGUMENT', "unknown op 'cal' (expected dispatch, fill, copy, trace, barrier or call)");
  });

  it('linking resolves the callee and checks counts, dtypes and shapes, naming both sides', () => {
    const prefix = "new Context: linking module 'app': functions.main.body[0]: call ";
    assertThrowsHalrt(() => link((f) => xy(f).call('lib.nope', ['x'], ['y'])), 'NOT_FOUND', `${prefix}'lib.nope': module 'lib' has no function 'nope'`);
    assertThrowsHalrt(() => link((f) => xy(f).call('zz.f', ['x'], ['y'])), 'NOT_FOUND', `${prefix}'zz.f': no module named 'zz' is linked before this one`);
    assertThrowsHalrt(() => link((f) => xy(f).call('lib.scale2', ['x'], ['y']), (m) => [hal, m, library]), 'NOT_FOUND',
      `${prefix}'lib.scale2': module 'lib' is linked after this one`);
    assertThrowsHalrt(() => link((f) => xy(f).call('hal.f', ['x'], ['y'])), 'INVALID_ARGUMENT', "module 'hal' is neither a program module nor a host module");
    assertThrowsHalrt(() => link((f) => xy(f).call('lib.scale2', ['x', 'x'], ['y'])), 'INVALID_ARGUMENT',
      `${prefix}'lib.scale2': lib.scale2 takes 1 input and gives 1 output, but the call has 2 args and 1 result`);
    assertThrowsHalrt(() => link((f) => f.input('x', 'f32', [3]).output('y', 'f32', [4]).call('lib.scale2', ['x'], ['y'])), 'INVALID_ARGUMENT',
      `${prefix}'lib.scale2': args[0] 'x' is f32[3], but input 'a' of lib.scale2 is f32[4]`);
    assertThrowsHalrt(() => link((f) => f.input('x', 'f32', [4]).output('y', 'i32', [4]).call('lib.scale2', ['x'], ['y'])), 'INVALID_ARGUMENT',
      `${prefix}'lib.scale2': results[0] 'y' is i32[4], but output 'b' of lib.scale2 is f32[4]`);
  });

  it('a cycle of calls is named', () => {
    const other = new halrt.ModuleBuilder('other').executable('k', BUILTIN)
      .function('g', (f) => xy(f).call('app.main', ['x'], ['y'])).build(instance);
    try {
      assertThrowsHalrt(() => link((f) => xy(f).call('other.g', ['x'], ['y']), (m) => [hal, m, other]), 'INVALID_ARGUMENT',
        "functions.main.body[0]: call 'other.g': a cycle of calls: app.main calls other.g, and other.g calls app.main");
    } finally {
      other.close();
    }
  });

  it('inlining that would make too many values is RESOURCE_EXHAUSTED naming the bound', () => {
    // wide.f has 1 000 locals (each filled: a local no op uses takes no
    // slot); 66 calls of it need more than 65 536 slots.
    const wide = new halrt.ModuleBuilder('wide').executable('k', BUILTIN)
      .function('f', (f) => {
        f.input('a', 'f32', [4]).output('b', 'f32', [4]);
        for (let i = 0; i < 1000; ++i) f.local(`t${i}`, 'f32', [1]).fill(`t${i}`, 0);
        return f.copy('a', 'b');
      }).build(instance);
    const many = new halrt.ModuleBuilder('many').executable('k', BUILTIN)
      .function('g', (f) => {
        xy(f);
        for (let c = 0; c < 66; ++c) f.call('wide.f', ['x'], ['y']);
        return f;
      }).build(instance);
    try {
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, wide, many]).close(), 'RESOURCE_EXHAUSTED',
        "linking module 'many': functions.g.body[65]: call 'wide.f': with its calls inlined the function has more than 65536 values");
    } finally {
      closeAll(many, wide);
    }
  });

});

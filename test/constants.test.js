'use strict';
// Module constants (docs/module-format.md, "Constants"): data from
// TypedArrays, Arrays, raw files at offsets and .npy files; uploaded once
// per context and read by every call, by callees and by traces; read-only;
// every bad source an error naming the constant.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const halrt = require('..');
const { BUILTIN, DEVICE_URIS, assertThrowsHalrt, closeAll } = require('./helpers');

// m.main(x: f32[2,2]) -> y = x @ w + b, traces w.
function affine(w, b, name = 'm') {
  return new halrt.ModuleBuilder(name).executable('k', BUILTIN)
    .constant('w', 'f32', [2, 2], w)
    .constant('b', 'f32', [2, 2], b)
    .function('main', (f) => f.input('x', 'f32', [2, 2]).output('y', 'f32', [2, 2]).local('t', 'f32', [2, 2])
      .dispatch('k.matmul_f32', { workgroups: [1], bindings: ['x', 'w', 't'], constants: [2, 2, 2] })
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['t', 'b', 'y'], constants: [4] })
      .trace('weights', ['w']));
}

// x @ [[1,2],[3,4]] + [[10,20],[30,40]]
function expected(x) {
  const [a, b, c, d] = x;
  return [a + 3 * b + 10, 2 * a + 4 * b + 20, c + 3 * d + 30, 2 * c + 4 * d + 40];
}

for (const uri of DEVICE_URIS) {
  describe(`module constants on ${uri}`, () => {
    let instance, device, objects;
    beforeEach(() => {
      instance = new halrt.Instance();
      device = instance.createDevice(uri);
      objects = [];
    });
    afterEach(() => closeAll(objects.reverse(), device, instance));
    const keep = (made) => {
      objects.push(made);
      return made;
    };

    it('are read by every call, from TypedArrays, nested and flat Arrays, and a copy is taken at creation', async () => {
      const traced = [];
      const hal = keep(new halrt.HalModule(instance, device, { debugSink: (key, tensors) => traced.push(Array.from(tensors[0].data)) }));
      const w = new Float32Array([1, 2, 3, 4]);
      for (const b of [[[10, 20], [30, 40]], [10, 20, 30, 40], new Float32Array([10, 20, 30, 40])]) {
        const module = keep(affine(w, b).build(instance));
        w[0] = 99; // the module copied it
        const context = keep(new halrt.Context(instance, [hal, module]));
        const main = context.lookupFunction('m.main');
        for (const x of [[1, 0, 0, 1], [0.5, -2, 3, 7]]) {
          const [y] = await main.invoke([device.tensor(x, [2, 2])], { read: true });
          assert.deepStrictEqual(Array.from(y), expected(x));
        }
        w[0] = 1;
      }
      assert.strictEqual(traced.length, 6);
      for (const t of traced) assert.deepStrictEqual(t, [1, 2, 3, 4]);
    });

    it('of every module in a context are bound where calls inline them, and each context has its own upload', async () => {
      const hal = keep(new halrt.HalModule(instance, device));
      const lib = keep(affine([1, 2, 3, 4], [10, 20, 30, 40], 'lib').build(instance));
      const app = keep(new halrt.ModuleBuilder('app').executable('k', BUILTIN)
        .constant('s', 'i32', [4], new Int32Array([1, -2, 3, -4]))
        .constant('bias', 'f32', [2, 2], [[0.5, 0.5], [0.5, 0.5]])
        .function('main', (f) => f.input('x', 'f32', [2, 2]).output('y', 'f32', [2, 2]).output('s_out', 'i32', [4]).local('h', 'f32', [2, 2])
          .call('lib.main', ['x'], ['h'])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['h', 'bias', 'y'], constants: [4] })
          .copy('s', 's_out'))
        .build(instance));
      for (let round = 0; round < 2; ++round) {
        const context = keep(new halrt.Context(instance, [hal, lib, app]));
        const [y, s] = await context.lookupFunction('app.main').invoke([device.tensor([1, 2, 3, 4], [2, 2])], { read: true });
        assert.deepStrictEqual(Array.from(y), expected([1, 2, 3, 4]).map((v) => v + 0.5));
        assert.deepStrictEqual(Array.from(s), [1, -2, 3, -4]);
      }
    });

    it('load from raw files at offsets, .npy files and inline JSON arrays, relative to the module file', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-constants-'));
      try {
        const blob = Buffer.alloc(64, 0xff);
        Buffer.from(new Float32Array([1, 2, 3, 4]).buffer).copy(blob, 16);
        fs.mkdirSync(path.join(dir, 'weights'));
        fs.writeFileSync(path.join(dir, 'weights', 'blob.bin'), blob);
        halrt.npy.write(path.join(dir, 'weights', 'b.npy'), new Float32Array([10, 20, 30, 40]), { shape: [2, 2] });
        const description = affine(null, null).toObject();
        description.constants.w = { dtype: 'f32', shape: [2, 2], file: 'weights/blob.bin', offset: 16 };
        description.constants.b = { dtype: 'f32', shape: [2, 2], file: 'weights/b.npy' };
        description.constants.z = { dtype: 'i64', shape: [3], data: [1, -2, 3] };
        const file = path.join(dir, 'm.halrt.json');
        fs.writeFileSync(file, JSON.stringify(description));
        const loaded = await halrt.load(file, { device: uri });
        objects.push(loaded);
        const out = await loaded.functions.main.invoke({ x: [[1, 2], [3, 4]] }, { named: true, read: true });
        assert.deepStrictEqual(Array.from(out.y), expected([1, 2, 3, 4]));
        // fromObject resolves the same files against baseDir.
        const module = keep(halrt.Module.fromObject(instance, description, { baseDir: dir }));
        const context = keep(new halrt.Context(instance, [keep(new halrt.HalModule(instance, device)), module]));
        const [y] = await context.lookupFunction('m.main').invoke([[[0, 1], [1, 0]]], { read: true });
        assert.deepStrictEqual(Array.from(y), expected([0, 1, 1, 0]));
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

describe('module constants: errors', () => {
  let instance, dir;
  before(() => {
    instance = new halrt.Instance();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-constants-'));
    fs.writeFileSync(path.join(dir, 'short.bin'), Buffer.alloc(12));
    halrt.npy.write(path.join(dir, 'f64.npy'), new Float64Array(4), { shape: [2, 2] });
    halrt.npy.write(path.join(dir, 'flat.npy'), new Float32Array(4), { shape: [4] });
  });
  after(() => {
    instance.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  // A module whose constant w (f32[2,2]) is `entry` merged into its type.
  const withW = (entry, extra = {}) => ({
    format: 'halrt.module/1', name: 'm', constants: { w: { dtype: 'f32', shape: [2, 2], ...entry } },
    functions: { f: { inputs: [], outputs: [{ name: 'y', dtype: 'f32', shape: [2, 2] }], body: [], ...extra } },
  });
  const fromObject = (object) => halrt.Module.fromObject(instance, object, { baseDir: dir });

  it('name the constant and what is wrong with its data or file', () => {
    assertThrowsHalrt(() => fromObject(withW({})), 'INVALID_ARGUMENT', "constants.w: give exactly one of 'data' and 'file' (neither given)");
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3, 4], file: 'x' })), 'INVALID_ARGUMENT', '(both given)');
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3, 4], offset: 4 })), 'INVALID_ARGUMENT', "constants.w.offset: applies to a 'file' only");
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3] })), 'INVALID_ARGUMENT', 'constants.w.data must have shape [2,2]');
    assertThrowsHalrt(() => fromObject(withW({ data: new Float64Array(4) })), 'INVALID_ARGUMENT', 'constants.w.data must be f32 in a Float32Array');
    assertThrowsHalrt(() => fromObject(withW({ data: new Float32Array(5) })), 'INVALID_ARGUMENT', 'constants.w.data must have 4 elements');
    assertThrowsHalrt(() => fromObject(withW({ data: [[1, 2], [3, 'x']] })), 'INVALID_ARGUMENT', 'constants.w.data');
    assertThrowsHalrt(() => fromObject(withW({ file: 'short.bin' })), 'INVALID_ARGUMENT',
      "constants.w: 'short.bin' has 12 bytes, but the constant (f32[2,2]) needs 16 from offset 0");
    assertThrowsHalrt(() => fromObject(withW({ file: 'short.bin', offset: -1 })), 'INVALID_ARGUMENT', 'constants.w.offset: must be a non-negative integer');
    assertThrowsHalrt(() => fromObject(withW({ file: 'f64.npy' })), 'INVALID_ARGUMENT', "constants.w: 'f64.npy' holds f64[2,2], but the constant is f32[2,2]");
    assertThrowsHalrt(() => fromObject(withW({ file: 'flat.npy' })), 'INVALID_ARGUMENT', "'flat.npy' holds f32[4], but the constant is f32[2,2]");
    assertThrowsHalrt(() => fromObject(withW({ file: 'flat.npy', offset: 0 })), 'INVALID_ARGUMENT', 'offset applies to raw files only');
    assertThrowsHalrt(() => fromObject(withW({ file: 'missing.bin' })), 'NOT_FOUND', 'constants.w.file', 'missing.bin');
    assertThrowsHalrt(() => fromObject(withW({ file: '.' })), 'INVALID_ARGUMENT', 'is a directory, not a regular file');
    assertThrowsHalrt(() => fromObject(withW({ file: '' })), 'INVALID_ARGUMENT', 'constants.w.file: must be a non-empty path');
    assertThrowsHalrt(() => halrt.Module.fromJson(instance, JSON.stringify(withW({ file: 'short.bin' }))), 'INVALID_ARGUMENT',
      "constants.w.file: relative path 'short.bin' needs a module file");
  });

  it('are declared as the native reader checks, and never written by an op', () => {
    assertThrowsHalrt(() => fromObject(withW({ dtype: 'f33', data: [1] })), 'INVALID_ARGUMENT', 'constants.w.dtype');
    assertThrowsHalrt(() => fromObject(withW({ shape: [-1], data: [1] })), 'INVALID_ARGUMENT', 'constants.w.shape[0]');
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3, 4], extra: 1 })), 'INVALID_ARGUMENT', "constants.w: unknown field 'extra'");
    assertThrowsHalrt(() => fromObject({ ...withW({ data: [1, 2, 3, 4] }), constants: [] }), 'INVALID_ARGUMENT', 'constants: must be an object');
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3, 4] }, { body: [{ op: 'fill', target: 'w', value: 0 }] })), 'INVALID_ARGUMENT',
      "functions.f.body[0].target: 'w' is a module constant, which is read-only: it cannot be the target of a fill");
    assertThrowsHalrt(() => fromObject(withW({ data: [1, 2, 3, 4] }, { outputs: [{ name: 'w', dtype: 'f32', shape: [4] }] })), 'INVALID_ARGUMENT',
      "functions.f.outputs[0]: value 'w' has the name of a module constant");
    // Module.fromJson reads inline data as Module.load does.
    assertThrowsHalrt(() => halrt.Module.fromJson(instance, JSON.stringify(withW({ data: [1, 2, 3] }))),
      'INVALID_ARGUMENT', 'Module.fromJson: constants.w.data must have shape [2,2]');
    halrt.Module.fromJson(instance, JSON.stringify(withW({ data: [1, 2, 3, 4] }))).close();
  });

  it('ModuleBuilder.toObject copies the data, TypedArrays kept', () => {
    const data = new Float32Array([1, 2, 3, 4]);
    const builder = new halrt.ModuleBuilder('m').constant('w', 'f32', [2, 2], data);
    const copy = builder.toObject();
    data[0] = 7;
    assert.deepStrictEqual(Array.from(copy.constants.w.data), [1, 2, 3, 4]);
    assert.ok(copy.constants.w.data instanceof Float32Array);
  });
});

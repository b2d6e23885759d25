'use strict';
// Tiny ONNX models for the onnxruntime-node baselines, encoded by hand as
// protobuf (onnx.proto3: ModelProto, GraphProto, NodeProto, ValueInfoProto,
// TypeProto, TensorShapeProto). Only the fields a one-node float graph
// needs; nothing is downloaded.

const WIRE_VARINT = 0;
const WIRE_BYTES = 2;
const FLOAT = 1; // TensorProto.DataType.FLOAT

function varint(value) {
  const bytes = [];
  let v = BigInt(value);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    bytes.push(byte);
  } while (v !== 0n);
  return Buffer.from(bytes);
}

function key(field, wire) {
  return varint((field << 3) | wire);
}

function intField(field, value) {
  return Buffer.concat([key(field, WIRE_VARINT), varint(value)]);
}

function bytesField(field, payload) {
  const data = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload;
  return Buffer.concat([key(field, WIRE_BYTES), varint(data.length), data]);
}

// ValueInfoProto {name = 1, type = 2}; TypeProto {tensor_type = 1};
// TypeProto.Tensor {elem_type = 1, shape = 2}; TensorShapeProto {dim = 1};
// Dimension {dim_value = 1}.
function floatTensorValue(name, shape) {
  const dims = shape.map((d) => bytesField(1, intField(1, d)));
  const tensorType = Buffer.concat([intField(1, FLOAT), bytesField(2, Buffer.concat(dims))]);
  const type = bytesField(1, tensorType);
  return Buffer.concat([bytesField(1, name), bytesField(2, type)]);
}

// NodeProto {input = 1, output = 2, name = 3, op_type = 4}.
function node(opType, inputs, outputs) {
  return Buffer.concat([
    ...inputs.map((i) => bytesField(1, i)),
    ...outputs.map((o) => bytesField(2, o)),
    bytesField(3, `${opType.toLowerCase()}0`),
    bytesField(4, opType),
  ]);
}

// A ModelProto with one node: inputs [{name, shape}], outputs likewise.
// ModelProto {ir_version = 1, producer_name = 2, graph = 7, opset_import = 8};
// GraphProto {node = 1, name = 2, input = 11, output = 12};
// OperatorSetIdProto {domain = 1, version = 2}.
function oneNodeModel(opType, inputs, outputs) {
  const graph = Buffer.concat([
    bytesField(1, node(opType, inputs.map((i) => i.name), outputs.map((o) => o.name))),
    bytesField(2, `halrt_bench_${opType.toLowerCase()}`),
    ...inputs.map((i) => bytesField(11, floatTensorValue(i.name, i.shape))),
    ...outputs.map((o) => bytesField(12, floatTensorValue(o.name, o.shape))),
  ]);
  const opset = Buffer.concat([bytesField(1, ''), intField(2, 13)]);
  return Buffer.concat([
    intField(1, 8), // IR version 8 (ONNX 1.10+)
    bytesField(2, 'halrt-bench'),
    bytesField(7, graph),
    bytesField(8, opset),
  ]);
}

// c = a + b, all float[n].
function addModel(n) {
  return oneNodeModel(
    'Add',
    [
      { name: 'a', shape: [n] },
      { name: 'b', shape: [n] },
    ],
    [{ name: 'c', shape: [n] }],
  );
}

// c = a · b, a float[m, k], b float[k, n].
function matmulModel(m, k, n) {
  return oneNodeModel(
    'MatMul',
    [
      { name: 'a', shape: [m, k] },
      { name: 'b', shape: [k, n] },
    ],
    [{ name: 'c', shape: [m, n] }],
  );
}

module.exports = { addModel, matmulModel };

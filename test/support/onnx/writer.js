'use strict';
// ONNX models written as protobuf (onnx.proto3), for tests and benchmarks
// that need a graph of their own: the fields the messages below use, and
// no more. lib/onnx/model.js reads what this writes.
//
// model({opset, graph: {nodes, inputs, outputs, initializers}}) -> Buffer
//   nodes: {opType, inputs, outputs, name?, attributes?: {name: {f|i|s|t|floats|ints: value}}}
//   inputs/outputs: {name, dtype?, dims?} (dims entries: numbers or symbol strings)
//   initializers: {name, dtype, dims, data (TypedArray)} or, for data in a
//     file beside the model, external: {location, offset, length}
// withOutputs(bytes, names) -> bytes whose graph also outputs `names` (a
//   second `graph` field, which protobuf merges into the first).

const VARINT = 0;
const FIXED32 = 5;
const LENGTH = 2;
const TYPES = { f32: 1, u8: 2, i8: 3, u16: 4, i16: 5, i32: 6, i64: 7, bool: 9, f16: 10, f64: 11, u32: 12, u64: 13, bf16: 16 };
// AttributeProto: field and type of each kind.
const ATTRIBUTES = { f: [2, 1], i: [3, 2], s: [4, 3], t: [5, 4], floats: [7, 6], ints: [8, 7] };

function varint(value) {
  const bytes = [];
  let v = BigInt.asUintN(64, BigInt(value));
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) byte |= 0x80;
    bytes.push(byte);
  } while (v !== 0n);
  return Buffer.from(bytes);
}

const key = (field, wire) => varint((field << 3) | wire);
const int = (field, value) => Buffer.concat([key(field, VARINT), varint(value)]);
function bytes(field, payload) {
  const data = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : Buffer.from(payload);
  return Buffer.concat([key(field, LENGTH), varint(data.length), data]);
}
function float(field, value) {
  const b = Buffer.alloc(4);
  b.writeFloatLE(value);
  return Buffer.concat([key(field, FIXED32), b]);
}

// TensorProto {dims = 1, data_type = 2, name = 8, raw_data = 9,
// external_data = 13 (StringStringEntryProto {key = 1, value = 2}),
// data_location = 14}. `external`: {location, offset?, length?} instead of
// the data.
function tensor({ name = '', dtype, dims, data, external }) {
  const where = external === undefined
    ? [bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength))]
    : [...Object.entries(external).map(([k, v]) => bytes(13, Buffer.concat([bytes(1, k), bytes(2, String(v))]))), int(14, 1)];
  return Buffer.concat([...dims.map((d) => int(1, d)), int(2, TYPES[dtype]), bytes(8, name), ...where]);
}

// ValueInfoProto {name = 1, type = 2}; TypeProto {tensor_type = 1};
// Tensor {elem_type = 1, shape = 2}; Dimension {dim_value = 1, dim_param = 2}.
function valueInfo({ name, dtype, dims }) {
  if (dtype === undefined) return bytes(1, name);
  const shape = dims === undefined ? [] : [bytes(2, Buffer.concat(dims.map((d) => bytes(1, typeof d === 'number' ? int(1, d) : bytes(2, d)))))];
  return Buffer.concat([bytes(1, name), bytes(2, bytes(1, Buffer.concat([int(1, TYPES[dtype]), ...shape])))]);
}

function attribute(name, spec) {
  const [kind, value] = Object.entries(spec)[0];
  const [field, type] = ATTRIBUTES[kind];
  let payload;
  if (kind === 'f') payload = float(field, value);
  else if (kind === 'i') payload = int(field, value);
  else if (kind === 's') payload = bytes(field, value);
  else if (kind === 't') payload = bytes(field, tensor(value));
  else if (kind === 'floats') payload = Buffer.concat(value.map((v) => float(field, v)));
  else payload = Buffer.concat(value.map((v) => int(field, v)));
  return Buffer.concat([bytes(1, name), payload, int(20, type)]);
}

// NodeProto {input = 1, output = 2, name = 3, op_type = 4, attribute = 5}.
function node({ opType, inputs, outputs, name = '', attributes = {} }) {
  return Buffer.concat([
    ...inputs.map((i) => bytes(1, i)),
    ...outputs.map((o) => bytes(2, o)),
    bytes(3, name),
    bytes(4, opType),
    ...Object.entries(attributes).map(([n, spec]) => bytes(5, attribute(n, spec))),
  ]);
}

// GraphProto {node = 1, name = 2, initializer = 5, input = 11, output = 12}.
function graph({ nodes = [], inputs = [], outputs = [], initializers = [], name = 'g' }) {
  return Buffer.concat([
    ...nodes.map((n) => bytes(1, node(n))),
    bytes(2, name),
    ...initializers.map((t) => bytes(5, tensor(t))),
    ...inputs.map((v) => bytes(11, valueInfo(v))),
    ...outputs.map((v) => bytes(12, valueInfo(v))),
  ]);
}

// ModelProto {ir_version = 1, producer_name = 2, graph = 7, opset_import = 8}.
function model({ opset = 13, graph: g, irVersion = 8 }) {
  return Buffer.concat([
    int(1, irVersion),
    bytes(2, 'halrt-test'),
    bytes(7, graph(g)),
    bytes(8, Buffer.concat([bytes(1, ''), int(2, opset)])),
  ]);
}

function withOutputs(modelBytes, names) {
  return Buffer.concat([Buffer.from(modelBytes), bytes(7, Buffer.concat(names.map((n) => bytes(12, valueInfo({ name: n })))))]);
}

module.exports = { model, withOutputs };

'use strict';
// ONNX models (onnx.proto: ModelProto and the messages it holds) read into
// plain objects: the graph's nodes with their attributes, its inputs and
// outputs with element types and (possibly symbolic) dimensions, and its
// initializers as tensors {name, dtype, dims, data}. Tensor data may be
// inline (raw_data or the typed fields) or external (a file beside the
// model, named relative to its folder). Errors are HalrtErrors naming the
// message path, the node or the tensor.

const path = require('path');
const { HalrtError } = require('../errors');
const { LIMITS, readRegularFile } = require('../files');
const { ARRAY_OF } = require('../host_data');
const { decode } = require('./protobuf');

const StringEntry = { 1: ['key', 'string'], 2: ['value', 'string'] };
const Dimension = { 1: ['value', 'int64'], 2: ['param', 'string'] };
const Shape = { 1: ['dim', Dimension, true] };
const TensorType = { 1: ['elemType', 'int32'], 2: ['shape', Shape] };
const TypeProto = { 1: ['tensor', TensorType], 4: ['sequence', {}], 5: ['map', {}], 8: ['sparse', {}], 9: ['optional', {}] };
const ValueInfo = { 1: ['name', 'string'], 2: ['type', TypeProto] };
const Tensor = {
  1: ['dims', 'int64', true], 2: ['dataType', 'int32'], 4: ['floatData', 'float', true], 5: ['int32Data', 'int32', true],
  6: ['stringData', 'bytes', true], 7: ['int64Data', 'int64', true], 8: ['name', 'string'], 9: ['rawData', 'bytes'],
  10: ['doubleData', 'double', true], 11: ['uint64Data', 'int64', true], 13: ['externalData', StringEntry, true],
  14: ['dataLocation', 'enum'], 3: ['segment', {}],
};
const Attribute = {
  1: ['name', 'string'], 20: ['type', 'enum'], 2: ['f', 'float'], 3: ['i', 'int64'], 4: ['s', 'bytes'], 5: ['t', Tensor],
  7: ['floats', 'float', true], 8: ['ints', 'int64', true], 9: ['strings', 'bytes', true], 10: ['tensors', Tensor, true],
  6: ['g', {}], 11: ['graphs', {}, true], 21: ['refAttrName', 'string'],
};
const Node = {
  1: ['input', 'string', true], 2: ['output', 'string', true], 3: ['name', 'string'], 4: ['opType', 'string'],
  7: ['domain', 'string'], 5: ['attribute', Attribute, true],
};
const Graph = {
  1: ['node', Node, true], 2: ['name', 'string'], 5: ['initializer', Tensor, true], 15: ['sparseInitializer', {}, true],
  11: ['input', ValueInfo, true], 12: ['output', ValueInfo, true], 13: ['valueInfo', ValueInfo, true],
};
const OpsetId = { 1: ['domain', 'string'], 2: ['version', 'int64'] };
const Model = {
  1: ['irVersion', 'int64'], 8: ['opsetImport', OpsetId, true], 2: ['producerName', 'string'], 7: ['graph', Graph],
  25: ['functions', {}, true],
};

// TensorProto.DataType -> halrt dtype (undefined: not supported).
const DTYPES = {
  1: 'f32', 2: 'u8', 3: 'i8', 4: 'u16', 5: 'i16', 6: 'i32', 7: 'i64', 9: 'bool', 10: 'f16', 11: 'f64', 12: 'u32', 13: 'u64', 16: 'bf16',
};
const TYPE_NAMES = {
  0: 'UNDEFINED', 8: 'STRING', 14: 'COMPLEX64', 15: 'COMPLEX128', 17: 'FLOAT8E4M3FN', 18: 'FLOAT8E4M3FNUZ', 19: 'FLOAT8E5M2',
  20: 'FLOAT8E5M2FNUZ', 21: 'UINT4', 22: 'INT4', 23: 'FLOAT4E2M1',
};
function invalid(message) {
  return new HalrtError(`onnx: ${message}`, 'INVALID_ARGUMENT');
}

function dtypeOf(dataType, what) {
  const dtype = DTYPES[dataType];
  if (dtype === undefined) {
    throw invalid(`${what}: element type ${TYPE_NAMES[dataType] ?? dataType} is not supported (halrt takes ${Object.values(DTYPES).join(', ')})`);
  }
  return dtype;
}

// A dimension list as Numbers, each in [0, 2^31 - 1].
function dimsOf(dims, what) {
  return dims.map((d) => {
    if (d < 0n || d > 0x7fffffffn) throw invalid(`${what}: dimension ${d} is out of range`);
    return Number(d);
  });
}

// The bytes of an external tensor: `location` relative to the model's
// folder (absolute paths and '..' refused: a model names files beside it).
function externalBytes(tensor, what, modelDir, files) {
  const entries = Object.fromEntries(tensor.externalData.map((e) => [e.key, e.value]));
  const location = entries.location;
  if (typeof location !== 'string' || location === '') throw invalid(`${what}: external data without a location`);
  if (modelDir === undefined) throw invalid(`${what}: its data is in external file '${location}', and the model was not read from a file`);
  if (path.isAbsolute(location) || location.split(/[\\/]/).includes('..')) {
    throw invalid(`${what}: external data location '${location}' must be a path inside the model's folder`);
  }
  const file = path.join(modelDir, location);
  let bytes = files.get(file);
  if (bytes === undefined) {
    bytes = readRegularFile(file, { caller: `onnx: ${what}`, maxBytes: LIMITS.constantFile, what: 'an external data file' });
    files.set(file, bytes);
  }
  const offset = entries.offset === undefined ? 0 : Number(entries.offset);
  const length = entries.length === undefined ? bytes.length - offset : Number(entries.length);
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > bytes.length) {
    throw invalid(`${what}: external data offset ${entries.offset} length ${entries.length} does not fit '${location}' (${bytes.length} bytes)`);
  }
  return bytes.subarray(offset, offset + length);
}

// A TensorProto as {name, dtype, dims, data}: data is a fresh TypedArray of
// the dtype's array type (f16/bf16 bits as Uint16Array, bool as 0/1).
function readTensor(tensor, what, modelDir, files) {
  const dtype = dtypeOf(tensor.dataType, what);
  const dims = dimsOf(tensor.dims, what);
  const count = dims.reduce((n, d) => n * d, 1);
  const Type = ARRAY_OF[dtype];
  let data;
  let bytes = tensor.rawData;
  if (tensor.dataLocation === 1) bytes = externalBytes(tensor, what, modelDir, files);
  if (bytes !== undefined) {
    if (bytes.length !== count * Type.BYTES_PER_ELEMENT) {
      throw invalid(`${what}: holds ${bytes.length} bytes, but ${dtype}[${dims}] needs ${count * Type.BYTES_PER_ELEMENT}`);
    }
    data = new Type(count);
    new Uint8Array(data.buffer).set(bytes);
  } else {
    // The typed field for the dtype (onnx.proto: which field holds which).
    const field = { f32: 'floatData', f64: 'doubleData', i64: 'int64Data', u64: 'uint64Data', u32: 'uint64Data' }[dtype] ?? 'int32Data';
    const values = tensor[field];
    if (values.length !== count) throw invalid(`${what}: holds ${values.length} elements in ${field}, but ${dtype}[${dims}] has ${count}`);
    data = new Type(count);
    for (let i = 0; i < count; ++i) {
      const v = values[i];
      data[i] = dtype === 'u64' ? BigInt.asUintN(64, v) : dtype === 'u32' ? Number(BigInt.asUintN(32, v)) : v;
    }
  }
  return { name: tensor.name ?? '', dtype, dims, data };
}

// A graph input, output or value_info: {name, dtype, dims}; an output may
// leave its type to inference (dtype and dims undefined).
function readValueInfo(info, what) {
  const tensor = info.type?.tensor;
  if (info.type === undefined && what === 'graph output') return { name: info.name ?? '', dtype: undefined, dims: undefined };
  if (tensor === undefined) throw invalid(`${what} '${info.name}': only tensor types are supported`);
  const dtype = dtypeOf(tensor.elemType, `${what} '${info.name}'`);
  const dims = tensor.shape === undefined ? undefined : tensor.shape.dim.map((d) => {
    if (d.value !== undefined) return dimsOf([d.value], `${what} '${info.name}'`)[0];
    return d.param === undefined || d.param === '' ? null : d.param;
  });
  return { name: info.name ?? '', dtype, dims };
}

function readAttribute(attribute, what, modelDir, files) {
  const name = attribute.name ?? '';
  const at = `${what} attribute '${name}'`;
  if (attribute.refAttrName !== undefined) throw invalid(`${at}: attribute references are not supported`);
  // AttributeProto.AttributeType; old models may leave it 0 and set one field.
  const kinds = { 1: 'f', 2: 'i', 3: 's', 4: 't', 6: 'floats', 7: 'ints', 8: 'strings', 9: 'tensors' };
  let kind = kinds[attribute.type];
  if (kind === undefined && attribute.type !== undefined && attribute.type !== 0) {
    throw invalid(`${at}: attribute type ${attribute.type} (graphs, sparse tensors, types) is not supported`);
  }
  kind ??= ['f', 'i', 's', 't'].find((k) => attribute[k] !== undefined) ??
    ['floats', 'ints', 'strings', 'tensors'].find((k) => attribute[k].length > 0) ?? 'ints';
  let value = attribute[kind];
  if (kind === 's') value = Buffer.from(value ?? []).toString('utf8');
  else if (kind === 'strings') value = value.map((s) => Buffer.from(s).toString('utf8'));
  else if (kind === 't') value = readTensor(value ?? {}, at, modelDir, files);
  else if (kind === 'tensors') value = value.map((t, i) => readTensor(t, `${at}[${i}]`, modelDir, files));
  return [name, { kind, value }];
}

// readModel(bytes, modelDir?) -> {irVersion, opset: {domain: version},
// graph: {name, nodes, initializers, inputs, outputs, valueInfo}}.
function readModel(bytes, modelDir) {
  const model = decode(bytes, Model);
  if (model.graph === undefined) throw invalid('the model has no graph');
  if (model.functions.length > 0) throw invalid('model-local functions are not supported');
  const opset = {};
  for (const entry of model.opsetImport) opset[entry.domain ?? ''] = Number(entry.version ?? 0n);
  const graph = model.graph;
  if (graph.sparseInitializer.length > 0) throw invalid('sparse initializers are not supported');
  const files = new Map();
  const nodes = graph.node.map((node, index) => {
    const what = `node ${index} '${node.name ?? ''}' (${node.opType ?? ''})`;
    return {
      index,
      name: node.name ?? '',
      opType: node.opType ?? '',
      domain: node.domain ?? '',
      inputs: node.input,
      outputs: node.output,
      attributes: new Map(node.attribute.map((a) => readAttribute(a, what, modelDir, files))),
    };
  });
  return {
    irVersion: Number(model.irVersion ?? 0n),
    producer: model.producerName ?? '',
    opset,
    graph: {
      name: graph.name ?? '',
      nodes,
      initializers: graph.initializer.map((t, i) => readTensor(t, `initializer ${i} '${t.name ?? ''}'`, modelDir, files)),
      inputs: graph.input.map((v) => readValueInfo(v, 'graph input')),
      outputs: graph.output.map((v) => readValueInfo(v, 'graph output')),
      valueInfo: graph.valueInfo.filter((v) => v.type?.tensor !== undefined).map((v) => readValueInfo(v, 'value_info')),
    },
  };
}

// The model in file `file`, external data read beside it.
function readModelFile(file) {
  const bytes = readRegularFile(file, { caller: 'onnx', maxBytes: LIMITS.constantFile, what: 'an ONNX model' });
  return readModel(bytes, path.dirname(path.resolve(file)));
}

module.exports = { readModel, readModelFile };

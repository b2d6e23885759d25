'use strict';
// Ops computed at import, on constant inputs (and Shape of any input with
// known dimensions): the integer shape arithmetic ONNX exporters emit
// (Shape, Gather, Slice, Concat, Unsqueeze, Cast, ...) and ops on small
// constant tensors. fold() returns the output tensors, or undefined when
// the op is not folded here (the converter then emits it, if it can).

const { ARRAY_OF } = require('../host_data');

const BIG = new Set(['i64', 'u64']);
const count = (dims) => dims.reduce((n, d) => n * d, 1);

function tensor(dtype, dims, values) {
  const data = new ARRAY_OF[dtype](count(dims));
  for (let i = 0; i < data.length; ++i) data[i] = BIG.has(dtype) ? BigInt(values[i]) : values[i];
  return { dtype, dims, data };
}

// The elements as Numbers (i64 beyond 2^53 rounded: used for indices and
// sizes, which are far smaller, and clamped bounds such as INT64_MAX).
const numbers = (t) => Array.from(t.data, Number);

// dims-strides of a dense row-major tensor.
function strides(dims) {
  const out = new Array(dims.length);
  let s = 1;
  for (let i = dims.length - 1; i >= 0; --i) {
    out[i] = s;
    s *= dims[i];
  }
  return out;
}

// Gathers into `dims` with `source(coords)` giving each element.
function build(dtype, dims, source) {
  const n = count(dims);
  const values = new Array(n);
  const coords = new Array(dims.length).fill(0);
  for (let i = 0; i < n; ++i) {
    values[i] = source(coords);
    for (let d = dims.length - 1; d >= 0; --d) {
      if (++coords[d] < dims[d]) break;
      coords[d] = 0;
    }
  }
  return tensor(dtype, dims, values);
}

function normalizeAxis(axis, rank, attributes) {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw attributes.error(`axis ${axis} is out of range for rank ${rank}`);
  return a;
}

// An int list from an attribute (opsets before the input form) or a
// constant input.
function intList(attributes, name, input) {
  if (input !== undefined) return numbers(input);
  return attributes.ints(name, undefined);
}

const BINARY = {
  Add: (x, y) => x + y,
  Sub: (x, y) => x - y,
  Mul: (x, y) => x * y,
  Div: (x, y, big) => (big ? (y === 0n ? 0n : x / y) : x / y),
};

function elementwise(opType, a, b, attributes) {
  if (a.dtype !== b.dtype) throw attributes.error(`operands are ${a.dtype} and ${b.dtype}`);
  const rank = Math.max(a.dims.length, b.dims.length);
  const pa = [...new Array(rank - a.dims.length).fill(1), ...a.dims];
  const pb = [...new Array(rank - b.dims.length).fill(1), ...b.dims];
  const dims = pa.map((d, i) => (d === 1 ? pb[i] : d));
  if (pa.some((d, i) => d !== pb[i] && d !== 1 && pb[i] !== 1)) throw attributes.error(`shapes [${a.dims}] and [${b.dims}] do not broadcast`);
  const sa = strides(pa);
  const sb = strides(pb);
  const big = BIG.has(a.dtype);
  const f32 = a.dtype === 'f32';
  const op = BINARY[opType];
  return build(a.dtype, dims, (c) => {
    let ia = 0;
    let ib = 0;
    c.forEach((x, d) => {
      ia += (pa[d] === 1 ? 0 : x) * sa[d];
      ib += (pb[d] === 1 ? 0 : x) * sb[d];
    });
    const r = op(a.data[ia], b.data[ib], big);
    // f32: +, -, *, / computed in double then rounded once are exact in f32.
    return f32 ? Math.fround(r) : big ? BigInt.asIntN(64, r) : Math.trunc(r);
  });
}

// The value of f16 or bf16 bits.
function halfValue(bits, dtype) {
  if (dtype === 'bf16') return new Float32Array(new Uint32Array([bits << 16]).buffer)[0];
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  const sign = bits & 0x8000 ? -1 : 1;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (exponent ? 2 ** (exponent - 15) * (1 + fraction / 1024) : 2 ** -14 * (fraction / 1024));
}

// A float converted to an integer as ONNX Runtime's x86 build does:
// truncated, NaN and values out of the conversion's range giving its
// lowest value. Up to 32 bits through int32 (the typed array then wraps
// to the width); 64 bits through int64; u32 and u64 from 2^31 (2^63) on
// less that, with the top bit set back.
function floatToInt(v, dtype) {
  const t = Math.trunc(v);
  const int32 = (x) => (!Number.isNaN(x) && x >= -(2 ** 31) && x < 2 ** 31 ? x : -(2 ** 31));
  const int64 = (x) => (!Number.isNaN(x) && x >= -(2 ** 63) && x < 2 ** 63 ? BigInt(x) : -(2n ** 63n));
  if (dtype === 'u64') return t >= 2 ** 63 ? int64(t - 2 ** 63) ^ -(2n ** 63n) : int64(t);
  if (dtype === 'i64') return int64(t);
  if (dtype === 'u32') return t >= 2 ** 31 ? (int32(t - 2 ** 31) ^ -(2 ** 31)) >>> 0 : int32(t) >>> 0;
  return int32(t);
}

function cast(input, to, attributes) {
  const dtypes = { 1: 'f32', 2: 'u8', 3: 'i8', 4: 'u16', 5: 'i16', 6: 'i32', 7: 'i64', 9: 'bool', 11: 'f64', 12: 'u32', 13: 'u64' };
  const dtype = dtypes[to];
  if (dtype === undefined) throw attributes.unsupported(`Cast to type ${to}`);
  const half = input.dtype === 'f16' || input.dtype === 'bf16';
  const float = half || input.dtype === 'f32' || input.dtype === 'f64';
  const values = Array.from(input.data, (raw) => {
    const v = half ? halfValue(raw, input.dtype) : raw;
    // NaN is not zero, so it is true.
    if (dtype === 'bool') return v !== 0 && v !== 0n ? 1 : 0;
    if (dtype === 'f32' || dtype === 'f64') return Number(v);
    if (typeof v === 'bigint') return BIG.has(dtype) ? v : Number(BigInt.asIntN(64, v));
    if (float) return floatToInt(v, dtype);
    return BIG.has(dtype) ? BigInt(v) : v;
  });
  return tensor(dtype, input.dims, values);
}

const FOLDERS = {
  Constant(node, inputs, attributes) {
    for (const [name, attribute] of node.attributes) {
      const { value } = attribute;
      if (name === 'value') return [value];
      if (name === 'value_float') return [tensor('f32', [], [value])];
      if (name === 'value_floats') return [tensor('f32', [value.length], value)];
      if (name === 'value_int') return [tensor('i64', [], [value])];
      if (name === 'value_ints') return [tensor('i64', [value.length], value)];
      throw attributes.unsupported(`Constant attribute '${name}'`);
    }
    throw attributes.error('has no value');
  },

  Identity: (node, [x]) => [x],

  Shape(node, [x], attributes, opset) {
    const rank = x.dims.length;
    let start = opset >= 15 ? attributes.int('start', 0) : 0;
    let end = opset >= 15 ? attributes.int('end', rank) : rank;
    start = Math.min(Math.max(start < 0 ? start + rank : start, 0), rank);
    end = Math.min(Math.max(end < 0 ? end + rank : end, 0), rank);
    const dims = x.dims.slice(start, Math.max(start, end));
    return [tensor('i64', [dims.length], dims)];
  },

  Cast: (node, [x], attributes) => [cast(x, attributes.int('to', 0), attributes)],

  Gather(node, [data, indices], attributes) {
    const { axis, idx, dims } = gatherIndices(data.dims, indices, attributes);
    const ds = strides(data.dims);
    const is = strides(indices.dims);
    const k = indices.dims.length;
    return [build(data.dtype, dims, (c) => {
      let flat = 0;
      for (let j = 0; j < k; ++j) flat += c[axis + j] * is[j];
      let offset = idx[flat] * ds[axis];
      for (let d = 0; d < axis; ++d) offset += c[d] * ds[d];
      for (let d = axis + 1; d < data.dims.length; ++d) offset += c[d + k - 1] * ds[d];
      return data.data[offset];
    })];
  },

  Unsqueeze(node, [x, axesInput], attributes) {
    const axes = intList(attributes, 'axes', axesInput) ?? [];
    const rank = x.dims.length + axes.length;
    const normal = axes.map((a) => normalizeAxis(a, rank, attributes));
    if (new Set(normal).size !== normal.length) throw attributes.error(`axes [${axes}] name an axis twice`);
    const dims = [];
    let next = 0;
    for (let i = 0; i < rank; ++i) dims.push(normal.includes(i) ? 1 : x.dims[next++]);
    return [{ ...x, dims }];
  },

  Squeeze(node, [x, axesInput], attributes) {
    const axes = intList(attributes, 'axes', axesInput);
    const normal = axes === undefined ? x.dims.map((d, i) => (d === 1 ? i : -1)).filter((i) => i >= 0) : axes.map((a) => normalizeAxis(a, x.dims.length, attributes));
    const wide = normal.find((a) => x.dims[a] !== 1);
    if (wide !== undefined) throw attributes.error(`axis ${wide} of [${x.dims}] is ${x.dims[wide]}, not 1: it cannot be squeezed`);
    return [{ ...x, dims: x.dims.filter((_, i) => !normal.includes(i)) }];
  },

  Reshape(node, [x, shape], attributes) {
    return [{ ...x, dims: reshapeDims(x.dims, numbers(shape), attributes.int('allowzero', 0), attributes) }];
  },

  Concat(node, inputs, attributes) {
    const rank = inputs[0].dims.length;
    const axis = normalizeAxis(attributes.int('axis', 0), rank, attributes);
    for (const t of inputs) {
      if (t === undefined || t.dtype !== inputs[0].dtype || t.dims.length !== rank || t.dims.some((d, i) => i !== axis && d !== inputs[0].dims[i])) {
        throw attributes.error(`inputs [${inputs.map((u) => u && `${u.dtype}[${u.dims}]`).join(', ')}] do not concatenate on axis ${axis}`);
      }
    }
    const dims = [...inputs[0].dims];
    dims[axis] = inputs.reduce((n, t) => n + t.dims[axis], 0);
    const starts = [];
    let at = 0;
    for (const t of inputs) {
      starts.push(at);
      at += t.dims[axis];
    }
    return [build(inputs[0].dtype, dims, (c) => {
      let which = inputs.length - 1;
      while (c[axis] < starts[which]) --which;
      const t = inputs[which];
      const s = strides(t.dims);
      return t.data[c.reduce((o, x, d) => o + (d === axis ? x - starts[which] : x) * s[d], 0)];
    })];
  },

  Slice(node, [x, ...bounds], attributes, opset) {
    const { begin, step, dims } = sliceWindow(x.dims, bounds, attributes, opset);
    const s = strides(x.dims);
    return [build(x.dtype, dims, (c) => x.data[c.reduce((o, v, d) => o + (begin[d] + v * step[d]) * s[d], 0)])];
  },
};

// What Slice takes of `dims`: per dimension the first index, the step and
// the count. `bounds`: the constant starts, ends, axes and steps inputs
// (opset >= 10; the attributes before).
// Gather of `dims` at constant `indices`: the axis, the indices made
// non-negative (errors name any out of range) and the output dims.
function gatherIndices(dims, indices, attributes) {
  if (indices.dtype !== 'i64' && indices.dtype !== 'i32') throw attributes.error(`indices are ${indices.dtype}, not i32 or i64`);
  const axis = normalizeAxis(attributes.int('axis', 0), dims.length, attributes);
  const size = dims[axis];
  const idx = numbers(indices).map((i) => {
    if (i < -size || i >= size) throw attributes.error(`index ${i} is out of range for dimension ${size}`);
    return i < 0 ? i + size : i;
  });
  return { axis, idx, dims: [...dims.slice(0, axis), ...indices.dims, ...dims.slice(axis + 1)] };
}

function sliceWindow(dims, [startsInput, endsInput, axesInput, stepsInput], attributes, opset) {
  const rank = dims.length;
  const starts = opset >= 10 ? numbers(startsInput) : attributes.ints('starts', []);
  const ends = opset >= 10 ? numbers(endsInput) : attributes.ints('ends', []);
  const axes = (opset >= 10 ? axesInput && numbers(axesInput) : attributes.ints('axes', undefined)) ?? starts.map((_, i) => i);
  const steps = (stepsInput && numbers(stepsInput)) ?? starts.map(() => 1);
  if (ends.length !== starts.length || axes.length !== starts.length || steps.length !== starts.length) {
    throw attributes.error('starts, ends, axes and steps differ in length');
  }
  const begin = new Array(rank).fill(0);
  const step = new Array(rank).fill(1);
  const out = [...dims];
  const seen = new Set();
  axes.forEach((axis, i) => {
    const a = normalizeAxis(axis, rank, attributes);
    if (seen.has(a)) throw attributes.error(`axes [${axes}] name axis ${a} twice`);
    seen.add(a);
    const size = dims[a];
    if (steps[i] === 0) throw attributes.error('a step of 0');
    const clamp = (v, low, high) => Math.min(Math.max(v < 0 ? v + size : v, low), high);
    const s = steps[i] > 0 ? clamp(starts[i], 0, size) : clamp(starts[i], -1, size - 1);
    const e = steps[i] > 0 ? clamp(ends[i], 0, size) : clamp(ends[i], -1, size - 1);
    begin[a] = s;
    step[a] = steps[i];
    out[a] = Math.max(0, Math.ceil((e - s) / steps[i]));
  });
  return { begin, step, dims: out };
}

for (const opType of Object.keys(BINARY)) {
  FOLDERS[opType] = (node, [a, b], attributes) => [elementwise(opType, a, b, attributes)];
}

// Reshape's target dims: 0 copies the input's dimension (unless allowzero),
// -1 is inferred.
function reshapeDims(dims, shape, allowzero, attributes) {
  const out = shape.map((d, i) => (d === 0 && !allowzero ? dims[i] : d));
  const known = out.filter((d) => d !== -1).reduce((n, d) => n * d, 1);
  const inferred = out.filter((d) => d === -1).length;
  if (inferred > 1 || out.some((d) => d < -1 || d === undefined)) throw attributes.error(`shape [${shape}] is not a valid Reshape target`);
  if (inferred === 1) {
    if (known === 0 || count(dims) % known !== 0) throw attributes.error(`[${dims}] cannot be reshaped to [${shape}]`);
    out[out.indexOf(-1)] = count(dims) / known;
  }
  if (count(out) !== count(dims)) throw attributes.error(`[${dims}] cannot be reshaped to [${shape}]`);
  return out;
}

// The folded outputs of `node` (inputs: constant tensors, or {dims, dtype}
// without data for Shape's runtime input), or undefined.
function fold(node, inputs, attributes, opset) {
  const folder = FOLDERS[node.opType];
  if (folder === undefined) return undefined;
  if (node.opType !== 'Shape' && inputs.some((t) => t !== undefined && t.data === undefined)) return undefined;
  // Elementwise ops on f32 are left to the kernels when large (the same
  // results: +, -, *, / are exact either way).
  if (BINARY[node.opType] && inputs.some((t) => count(t.dims) > 4096)) return undefined;
  return folder(node, inputs, attributes, opset);
}

// Whether op type `opType` can be computed at import (from constants).
const foldable = (opType) => Object.hasOwn(FOLDERS, opType);

module.exports = { fold, foldable, gatherIndices, reshapeDims, sliceWindow, strides };

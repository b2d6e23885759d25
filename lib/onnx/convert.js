'use strict';
// ONNX graph -> halrt.module/1 description (docs/onnx.md): one function
// `main` whose inputs and outputs keep the graph's names, ops over built-in
// kernels, initializers and Constant nodes as module constants. What can be
// computed at import (shape arithmetic, ops on constants) is folded here;
// anything not supported is an error naming the node, its op type and what
// is missing, never a wrong result.
//
// Symbolic dimensions are bound by options.shapes (input name -> dims).

const { HalrtError } = require('../errors');
const { readModel } = require('./model');
const { fold, foldable, gatherIndices, reshapeDims, sliceWindow, strides: denseStrides } = require('./fold');
const { fuse } = require('./fuse');

const MAX_NAME = 255; // a value name's limit (docs/module-format.md)
const BUILTIN = { local: { builtin: true }, cuda: { builtin: true } };

// How many inputs each op takes: [fewest, most] (optional ones may be '').
const ARITY = {
  Add: [2, 2], Sub: [2, 2], Mul: [2, 2], Div: [2, 2], Pow: [2, 2], Max: [2, 2], Min: [2, 2],
  Relu: [1, 1], Clip: [1, 3], Identity: [1, 1], Flatten: [1, 1], Reshape: [2, 2], Squeeze: [1, 2],
  Unsqueeze: [1, 2], Transpose: [1, 1], Gemm: [2, 3], MatMul: [2, 2], Softmax: [1, 1],
  ReduceMean: [1, 2], ReduceSum: [1, 2], Constant: [0, 0], Shape: [1, 1], Cast: [1, 1], Gather: [2, 2],
  Concat: [1, Infinity], Slice: [1, 5], Expand: [2, 2], Split: [1, 2], Conv: [2, 3], BatchNormalization: [5, 5], MaxPool: [1, 1],
  AveragePool: [1, 1], GlobalAveragePool: [1, 1], ReduceMax: [1, 2], LogSoftmax: [1, 1],
  LayerNormalization: [2, 3], Pad: [1, 4], ConvTranspose: [2, 3], Resize: [1, 4], Equal: [2, 2], Where: [3, 3],
  Not: [1, 1],
};

// Max and Min are binary_f32's NaN-keeping ops (8 and 9), as ONNX Runtime's.
const BINARY_OPS = { Add: 0, Sub: 1, Mul: 2, Div: 3, Pow: 4, Max: 8, Min: 9 };
const EQ = 7; // binary_f32's op: 1 where equal, else 0
const CLIP = 12; // unary_f32's min(max(x, alpha), beta)
// pool2d_f32's max keeping NaN (op 0 skips it), for MaxPool and ReduceMax.
const POOL_MAX = 3;
// unary_f32's ops, and how each ONNX op sets alpha and beta.
const UNARY_OPS = {
  Sigmoid: [0], Tanh: [1], Exp: [2], Log: [3], Sqrt: [4], Neg: [5], Abs: [6], Reciprocal: [7], Erf: [8],
  LeakyRelu: [9, (a) => [a.float('alpha', 0.01), 0]],
  HardSigmoid: [10, (a) => [a.float('alpha', 0.2), a.float('beta', 0.5)]],
  HardSwish: [11],
  Gelu: [13, (a) => {
    if (a.string('approximate', 'none') !== 'none') throw a.unsupported("approximate 'tanh'");
    return [0, 0];
  }],
};

// An f32 dispatch constant; infinities and NaN as the module format spells
// them.
function f32Bits(value) {
  if (Number.isNaN(value)) return { f32: 'nan' };
  if (!Number.isFinite(value)) return { f32: value > 0 ? 'inf' : '-inf' };
  return { f32: value };
}

// The attributes of a node, read with defaults; errors name the node.
class Attributes {
  constructor(node, where) {
    this.node = node;
    this.where = where;
  }

  get(name, kind) {
    const attribute = this.node.attributes.get(name);
    if (attribute === undefined) return undefined;
    if (attribute.kind !== kind) throw this.error(`attribute '${name}' is ${attribute.kind}, expected ${kind}`);
    return attribute.value;
  }

  int(name, fallback) {
    const value = this.get(name, 'i');
    return value === undefined ? fallback : Number(value);
  }

  float(name, fallback) {
    const value = this.get(name, 'f');
    return value === undefined ? fallback : value;
  }

  string(name, fallback) {
    const value = this.get(name, 's');
    return value === undefined ? fallback : value;
  }

  ints(name, fallback) {
    const value = this.get(name, 'ints');
    return value === undefined ? fallback : value.map(Number);
  }

  error(message) {
    return new HalrtError(`onnx: ${this.where}: ${message}`, 'INVALID_ARGUMENT');
  }

  unsupported(what) {
    return new HalrtError(`onnx: ${this.where}: ${what} is not supported`, 'UNIMPLEMENTED');
  }
}

const count = (dims) => dims.reduce((n, d) => n * d, 1);

// The dimensions a run-time value may have: rank 6 at most (the kernels'
// strides), each an integer below 2^31, fewer than 2^32 elements in all.
// Throws naming `subject` otherwise.
function checkDims(dims, subject) {
  if (dims.length > 6) throw new HalrtError(`onnx: ${subject} has rank ${dims.length}; values of rank at most 6 are supported`, 'UNIMPLEMENTED');
  if (!dims.every((d) => Number.isSafeInteger(d) && d >= 0 && d < 2 ** 31)) {
    throw new HalrtError(`onnx: ${subject} would have dimensions [${dims}]: each must be an integer from 0 to 2^31 - 1`, 'INVALID_ARGUMENT');
  }
  if (count(dims) >= 2 ** 32) throw new HalrtError(`onnx: ${subject} [${dims}] has ${count(dims)} elements; values of fewer than 2^32 are supported`, 'UNIMPLEMENTED');
}

// A graph input or output name as a halrt value name must be (names are
// kept exactly, so one that cannot be is refused rather than renamed).
function checkName(name, what) {
  if (name.length === 0 || Buffer.byteLength(name) > MAX_NAME || /[\x00-\x1f\x7f]/.test(name)) {
    throw new HalrtError(`onnx: ${what} ${JSON.stringify(name)} cannot be a halrt value name (1 to ${MAX_NAME} bytes, no control characters)`, 'UNIMPLEMENTED');
  }
}

// NumPy broadcasting of two shapes, or undefined when they do not broadcast.
function broadcast(a, b) {
  const rank = Math.max(a.length, b.length);
  const out = [];
  for (let i = 0; i < rank; ++i) {
    const x = a[a.length - rank + i] ?? 1;
    const y = b[b.length - rank + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) return undefined;
    out.push(x === 1 ? y : x);
  }
  return out;
}

// Element strides of an operand of `dims` read over `out` (6-D, padded
// with leading 1s): 0 where it broadcasts.
function broadcastStrides(dims, out) {
  const strides = new Array(6).fill(0);
  let stride = 1;
  for (let i = 1; i <= dims.length; ++i) {
    const d = dims[dims.length - i];
    strides[6 - i] = d === 1 && out[out.length - i] !== 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

// `list` with leading `fill`s to 6 entries (dims: 1s; strides: 0s).
function pad6(list, fill = 1) {
  return [...new Array(6 - list.length).fill(fill), ...list];
}

// `dims` and each list of `strides` (as long) with neighbouring dims merged
// where every list steps over the outer one as over the inner run (and
// dims of 1 dropped): the same elements in the same order, in longer
// innermost runs.
function coalesce(dims, ...strides) {
  const out = { dims: [], strides: strides.map(() => []) };
  for (let i = 0; i < dims.length; ++i) {
    if (dims[i] === 1) continue;
    const last = out.dims.length - 1;
    if (last >= 0 && strides.every((list, s) => list[i] * dims[i] === out.strides[s][last])) {
      out.dims[last] *= dims[i];
      strides.forEach((list, s) => { out.strides[s][last] = list[i]; });
    } else {
      out.dims.push(dims[i]);
      strides.forEach((list, s) => out.strides[s].push(list[i]));
    }
  }
  return out;
}

class Converter {
  constructor(model, options) {
    this.model = model;
    this.options = options;
    this.values = new Map(); // ONNX name -> {kind: 'const', tensor} | {kind: 'value', name, dtype, dims}
    this.shapes = new Map(); // halrt value name -> dims, of the values ops write
    this.consumers = new Map(); // ONNX value name -> the nodes that read it
    this.folded = new Set(); // indices of nodes folded into the node before them
    this.scalars = new Map(); // value -> its f32 scalar constant
    this.tags = new Map(); // unary_f32 and binary_f32 ops -> what they compute (fuse.js)
    this.used = new Set(); // halrt value and constant names taken
    this.inputs = [];
    this.outputs = [];
    this.locals = [];
    this.body = [];
    this.constants = {};
    this.traced = [];
    this.opset = model.opset[''] ?? model.opset['ai.onnx'] ?? 1;
    for (const name of [...model.graph.inputs, ...model.graph.outputs].map((v) => v.name)) this.used.add(name);
    // Every ONNX value name: the importer's own values never take one, so
    // each ONNX value keeps its name (traces are named by them).
    const { graph } = model;
    this.onnxNames = new Set([...graph.inputs, ...graph.outputs, ...graph.initializers].map((v) => v.name).concat(graph.nodes.flatMap((n) => n.outputs)));
  }

  // A fresh halrt name based on `base` (an ONNX name when it is usable);
  // an `internal` one (the importer's own value) avoids every ONNX name.
  fresh(base, internal = false) {
    const usable = base.length > 0 && base.length <= MAX_NAME && !/[\x00-\x1f\x7f]/.test(base);
    const taken = (name) => this.used.has(name) || ((internal || name !== base) && this.onnxNames.has(name));
    let name = usable ? base : `value_${this.used.size}`;
    for (let i = 1; taken(name); ++i) name = usable ? `${base.slice(0, MAX_NAME - 8)}#${i}` : `value_${this.used.size + i}`;
    this.used.add(name);
    return name;
  }

  // A runtime f32 value for ONNX name `onnx` (a graph output keeps its
  // role). A 'bool' one holds 1 and 0 as f32 (Equal, Not, Cast), and is
  // read only by ops that take conditions (Where, Not, Cast).
  define(onnx, dims, where, dtype = 'f32') {
    const output = this.model.graph.outputs.some((o) => o.name === onnx);
    if (output && dtype !== 'f32') throw new HalrtError(`onnx: ${where}: a ${dtype} graph output is not supported (only f32)`, 'UNIMPLEMENTED');
    checkDims(dims, `${where}: output '${onnx}'`);
    const name = output ? onnx : this.fresh(onnx);
    const entry = { kind: 'value', name, dtype, dims };
    (output ? this.outputs : this.locals).push({ name, dtype: 'f32', shape: dims });
    this.shapes.set(name, dims);
    if (this.values.has(onnx)) throw new HalrtError(`onnx: ${where}: value '${onnx}' is produced twice`, 'INVALID_ARGUMENT');
    this.values.set(onnx, entry);
    return entry;
  }

  temp(base, dims) {
    checkDims(dims, `value '${base}'`);
    const name = this.fresh(base, true);
    this.locals.push({ name, dtype: 'f32', shape: dims });
    this.shapes.set(name, dims);
    return { kind: 'value', name, dtype: 'f32', dims };
  }

  // The halrt name of `entry` as an operand: a runtime value, or a module
  // constant made from a constant tensor on first use.
  operand(entry) {
    if (entry.kind === 'value') return entry.name;
    if (entry.constantName === undefined) {
      const { tensor } = entry;
      if (tensor.dtype !== 'f32') throw new HalrtError(`onnx: constant '${tensor.name}' is ${tensor.dtype}; only f32 constants reach kernels`, 'UNIMPLEMENTED');
      entry.constantName = this.fresh(tensor.name || 'constant', entry.internal === true || !tensor.name);
      this.constants[entry.constantName] = { dtype: 'f32', shape: tensor.dims, data: tensor.data };
    }
    return entry.constantName;
  }

  lookup(name, where) {
    const entry = this.values.get(name);
    if (entry === undefined) throw new HalrtError(`onnx: ${where}: input '${name}' is not produced before it`, 'INVALID_ARGUMENT');
    return entry;
  }

  dims(entry) {
    return entry.kind === 'value' ? entry.dims : entry.tensor.dims;
  }

  // A condition: a 'bool' value (1s and 0s as f32), or a constant tensor
  // of any dtype made a constant of 1s and 0s (not zero: 1).
  condition(entry, where) {
    if (entry.kind === 'value') {
      if (entry.dtype !== 'bool') throw new HalrtError(`onnx: ${where}: a condition must be bool (got ${entry.dtype})`, 'INVALID_ARGUMENT');
      return entry;
    }
    const { tensor } = entry;
    entry.mask ??= { kind: 'const', tensor: { name: tensor.name, dtype: 'f32', dims: tensor.dims, data: Float32Array.from(tensor.data, (v) => (Number(v) !== 0 ? 1 : 0)) } };
    return entry.mask;
  }

  // A runtime input of an op that computes in f32.
  f32(entry, where) {
    const dtype = entry.kind === 'value' ? entry.dtype : entry.tensor.dtype;
    if (dtype !== 'f32') throw new HalrtError(`onnx: ${where}: a ${dtype} operand computed at run time is not supported (only f32)`, 'UNIMPLEMENTED');
    return entry;
  }

  // Enough workgroups to spread a kernel over local-task's workers and a
  // GPU's blocks, few enough that each has work worth its scheduling: one
  // per 64 Ki multiply-adds or elements written, 1 to 64 (bmm_f32: tiles
  // of columns and rows, and batches).
  dispatch(kernel, bindings, constants) {
    const op = this.dispatchOp(kernel, bindings, constants);
    this.body.push(op);
    return op;
  }

  dispatchOp(kernel, bindings, constants) {
    const out = this.shapes.get(bindings[bindings.length - 1]);
    const perElement = kernel === 'matmul_f32' ? constants[1] : kernel === 'conv2d_f32' ? constants[5] * constants[6] * constants[7] : 1;
    // Chains do several steps an element: pieces of 16 Ki elements.
    const grain = kernel === 'chain_f32' ? 16384 : 65536;
    const share = Math.min(64, Math.max(1, Math.ceil((count(out) * perElement) / grain)));
    const clamp = (n) => Math.min(8, Math.max(1, Math.ceil(n)));
    // matmul_f32 splits columns over x and rows over y: pieces of at least
    // 256 columns and 128 rows keep its register tiles full.
    const workgroups = kernel === 'bmm_f32' ? [2, 2, clamp(constants[0])]
      : kernel === 'matmul_f32' ? [clamp(constants[2] / 256), clamp(constants[0] / 128)]
        : [share];
    return { op: 'dispatch', kernel: `k.${kernel}`, workgroups, bindings, constants };
  }

  // An operand as fuse.js sees it: its name, dims, and its value when it
  // is an f32 scalar constant.
  tagOperand(entry) {
    const scalar = entry.kind === 'const' && entry.tensor.dtype === 'f32' && count(entry.tensor.dims) === 1;
    return { name: this.operand(entry), dims: this.dims(entry), scalar: scalar ? Math.fround(Number(entry.tensor.data[0])) : undefined };
  }

  unary(op, x, out, alpha = 0, beta = 0) {
    const dispatch = this.dispatch('unary_f32', [this.operand(x), out.name], [count(out.dims), op, f32Bits(alpha), f32Bits(beta)]);
    this.tags.set(dispatch, { kind: 'unary', op, alpha, beta, x: this.tagOperand(x), out: { name: out.name, dims: out.dims } });
  }

  binary(op, a, b, out) {
    const c = coalesce(pad6(out.dims), broadcastStrides(this.dims(a), out.dims),
      broadcastStrides(this.dims(b), out.dims), denseStrides(pad6(out.dims)));
    const dispatch = this.dispatch('binary_f32', [this.operand(a), this.operand(b), out.name],
      [op, ...pad6(c.dims), ...pad6(c.strides[0], 0), ...pad6(c.strides[1], 0)]);
    const tag = { kind: 'binary', op, a: this.tagOperand(a), b: this.tagOperand(b), out: { name: out.name, dims: out.dims } };
    this.tags.set(dispatch, tag);
    return tag;
  }

  // The chain_f32 dispatch of a fused chain (fuse.js) writing `out`; when
  // `counted`, its chain_health_f32 dispatch, which also writes a new local
  // of NaN/Inf counts per step (u32 [workgroups, 6, 3]).
  chainDispatch(chain, out, counted) {
    const dims = pad6(chain.dims);
    const c = coalesce(dims, denseStrides(dims), chain.y ? broadcastStrides(chain.y.dims, chain.dims) : new Array(6).fill(0));
    const steps = [...chain.steps, ...new Array(6 - chain.steps.length).fill([0, 0, 0, 0])]
      .flatMap(([op, operand, alpha, beta]) => [op | (operand << 8), f32Bits(alpha), f32Bits(beta)]);
    const op = this.dispatchOp('chain_f32', [chain.x.name, (chain.y ?? chain.x).name, out],
      [chain.steps.length, ...pad6(c.dims), ...pad6(c.strides[1], 0), ...steps]);
    if (!counted) return op;
    const counts = { name: this.fresh(`${out}#counts`, true), dtype: 'u32', shape: [op.workgroups.reduce((a, b) => a * b), 6, 3] };
    this.locals.push(counts);
    return { ...op, kernel: 'k.chain_health_f32', bindings: [...op.bindings, counts.name] };
  }

  // Elementwise chains fused (a traced node's output, read by its trace
  // op, is fused away only when its health comes from counts), and the
  // locals and constants no op reads or writes any more dropped (a value
  // reported from counts stays declared; calls do not allocate it).
  fuseChains() {
    this.body = fuse(this.body, this.tags, new Set(this.outputs.map((o) => o.name)),
      (chain, out, counted) => this.chainDispatch(chain, out, counted), this.options.traceMode === 'health');
    const names = { dispatch: (op) => op.bindings, copy: (op) => [op.source, op.target], fill: (op) => [op.target], trace: (op) => [...op.values, ...(op.counts ?? []).map((c) => c.value)] };
    const named = new Set(this.body.flatMap((op) => names[op.op](op)));
    this.locals = this.locals.filter((l) => named.has(l.name));
    for (const name of Object.keys(this.constants)) if (!named.has(name)) delete this.constants[name];
  }

  // out (at dstOffset, dstStrides) = src (at srcOffset, srcStrides) over
  // `dims` (rank <= 6), element by element.
  stridedCopy(src, srcOffset, srcStrides, out, dstOffset, dstStrides, dims) {
    const c = coalesce(dims, srcStrides, dstStrides);
    this.dispatch('strided_copy_f32', [this.operand(src), out.name],
      [srcOffset, dstOffset, ...pad6(c.dims), ...pad6(c.strides[0], 0), ...pad6(c.strides[1], 0)]);
  }

  // A BatchNormalization that alone reads a Conv's output, with constant
  // parameters, folded into the Conv's constant weights and bias (as ONNX
  // Runtime does): [w, b, node] with the Conv writing the normalised
  // output. Not when either node is traced: a trace shows its node's own
  // output.
  foldBatchNormalization(node, w, b) {
    const readers = this.consumers.get(node.outputs[0]) ?? [];
    const bn = readers[0];
    const constant = (e) => e !== undefined && e.kind === 'const' && e.tensor.dtype === 'f32';
    if (readers.length !== 1 || bn.opType !== 'BatchNormalization' || bn.outputs.length !== 1 || this.traces(nodeKey(node)) || this.traces(nodeKey(bn)) ||
      this.model.graph.outputs.some((o) => o.name === node.outputs[0]) || !constant(w) || (b !== undefined && !constant(b))) {
      return [w, b, node];
    }
    const params = bn.inputs.slice(1).map((name) => this.values.get(name));
    const M = w.tensor.dims[0];
    if (params.length !== 4 || !params.every((p) => constant(p) && p.tensor.data.length === M) || bn.inputs[0] !== node.outputs[0]) return [w, b, node];
    const attributes = new Attributes(bn, `node ${bn.index}`);
    if (attributes.int('training_mode', 0)) return [w, b, node];
    const { s, t } = scaleShift(attributes, params);
    const f = Math.fround;
    const per = w.tensor.data.length / M;
    const weights = Float32Array.from(w.tensor.data, (v, i) => f(v * s[Math.floor(i / per)]));
    const bias = Float32Array.from(t, (tm, m) => f(f((b ? b.tensor.data[m] : 0) * s[m]) + tm));
    this.folded.add(bn.index);
    const tensor = (name, dims, data) => ({ kind: 'const', tensor: { name, dtype: 'f32', dims, data } });
    return [tensor(`${w.tensor.name}*bn`, w.tensor.dims, weights), tensor(`${bn.outputs[0]}/bias`, [M], bias), { ...node, outputs: bn.outputs }];
  }

  // `entry` read with its dims permuted (`perm`) into the dense `out`.
  transpose(entry, perm, out) {
    const dense = denseStrides(this.dims(entry));
    this.stridedCopy(entry, 0, perm.map((p) => dense[p]), out, 0, denseStrides(out.dims), out.dims);
  }

  // out [rows, 1] = the largest of each row of x [rows, cols] (fmaxf: NaN
  // skipped; -inf for none), a pool of one window per row.
  rowMax(x, out, rows, cols) {
    this.dispatch('pool2d_f32', [this.operand(x), out.name], [1, rows, 1, cols, 1, 1, 1, cols, 1, 1, 0, 0, POOL_MAX]);
  }

  // out [rows, 1] = the mean of each row of x [rows, cols] (0 for an empty
  // row, as ONNX Runtime's ReduceMean gives).
  rowMean(x, out, rows, cols) {
    const sum = this.temp(`${out.name}/sum`, [rows, 1]);
    this.dispatch('reduce_sum_f32', [this.operand(x), sum.name], [rows, cols]);
    this.binary(BINARY_OPS.Div, sum, this.scalar(Math.max(cols, 1)), out);
    return out;
  }

  // An f32 scalar constant: one module constant per value.
  scalar(value) {
    if (!this.scalars.has(value)) {
      this.scalars.set(value, { kind: 'const', internal: true, tensor: { name: `scalar_${value}`, dtype: 'f32', dims: [], data: new Float32Array([value]) } });
    }
    return this.scalars.get(value);
  }

  convert() {
    const { graph } = this.model;
    this.symbols = check(this.model, this.options.shapes);
    for (const tensor of graph.initializers) this.values.set(tensor.name, { kind: 'const', tensor });
    for (const [list, what] of [[graph.inputs, 'graph input'], [graph.outputs, 'graph output']]) {
      const twice = list.find((v, i) => list.findIndex((u) => u.name === v.name) !== i);
      if (twice !== undefined) throw new HalrtError(`onnx: ${what} '${twice.name}' is listed twice`, 'INVALID_ARGUMENT');
    }
    for (const output of graph.outputs) {
      checkName(output.name, 'graph output');
      if (graph.inputs.some((input) => input.name === output.name) && !graph.initializers.some((t) => t.name === output.name)) {
        throw new HalrtError(`onnx: graph output '${output.name}' is the graph input of that name: a halrt function's inputs and outputs have names of their own`, 'UNIMPLEMENTED');
      }
    }
    for (const input of graph.inputs) {
      if (this.values.has(input.name)) continue; // an initializer's default
      checkName(input.name, 'graph input');
      const dims = this.inputDims(input);
      checkDims(dims, `graph input '${input.name}'`);
      if (input.dtype !== 'f32') throw new HalrtError(`onnx: graph input '${input.name}' is ${input.dtype}; only f32 inputs are supported`, 'UNIMPLEMENTED');
      this.used.add(input.name);
      this.inputs.push({ name: input.name, dtype: 'f32', shape: dims });
      this.values.set(input.name, { kind: 'value', name: input.name, dtype: 'f32', dims });
    }
    for (const node of graph.nodes) {
      for (const input of node.inputs) this.consumers.set(input, [...(this.consumers.get(input) ?? []), node]);
    }
    for (const node of graph.nodes) if (!this.folded.has(node.index)) this.node(node);
    for (const output of graph.outputs) {
      const entry = this.lookup(output.name, `graph output '${output.name}'`);
      if (entry.kind === 'value' && this.outputs.some((o) => o.name === entry.name)) continue;
      // An output that is an input, a constant or a value of another name: a copy.
      const dims = this.dims(entry);
      this.f32(entry, `graph output '${output.name}'`);
      this.outputs.push({ name: output.name, dtype: 'f32', shape: dims });
      this.body.push({ op: 'copy', source: this.operand(entry), target: output.name });
    }
    this.fuseChains();
    const order = new Map(graph.outputs.map((o, i) => [o.name, i]));
    this.outputs.sort((x, y) => order.get(x.name) - order.get(y.name));
    return {
      format: 'halrt.module/1',
      name: this.options.name,
      executables: { k: BUILTIN },
      constants: this.constants,
      functions: { main: { inputs: this.inputs, outputs: this.outputs, locals: this.locals, body: this.body } },
    };
  }

  inputDims(input) {
    const given = this.options.shapes?.[input.name];
    if (input.dims === undefined && given === undefined) {
      throw new HalrtError(`onnx: graph input '${input.name}' has no shape; give it in options.shapes`, 'INVALID_ARGUMENT');
    }
    const declared = input.dims ?? given;
    if (given !== undefined) {
      if (!Array.isArray(given) || given.length !== declared.length || !given.every((d) => Number.isSafeInteger(d) && d >= 0)) {
        throw new HalrtError(`onnx: options.shapes['${input.name}'] must be ${declared.length} non-negative integers (the input is [${declared.map((d) => d ?? '?')}])`, 'INVALID_ARGUMENT');
      }
      declared.forEach((d, i) => {
        if (typeof d === 'number' && d !== given[i]) {
          throw new HalrtError(`onnx: options.shapes['${input.name}'][${i}] is ${given[i]}, but the model fixes that dimension to ${d}`, 'INVALID_ARGUMENT');
        }
      });
      return given;
    }
    // Symbols other inputs' shapes bind.
    const resolved = declared.map((d) => (typeof d === 'string' && this.symbols.has(d) ? this.symbols.get(d) : d));
    const symbolic = resolved.find((d) => typeof d !== 'number');
    if (symbolic === undefined) return resolved;
    throw new HalrtError(`onnx: graph input '${input.name}' has the symbolic dimension '${symbolic ?? '?'}': give its shape in options.shapes (e.g. { ${JSON.stringify(input.name)}: [${resolved.map((d) => (typeof d === 'number' ? d : 1))}] })`, 'INVALID_ARGUMENT');
  }

  // Whether options.traceNodes traces the node of `key` (a RegExp's
  // lastIndex is reset first, so that its g and y flags carry nothing over).
  traces(key) {
    const trace = this.options.traceNodes;
    if (trace instanceof RegExp) {
      trace.lastIndex = 0;
      return trace.test(key);
    }
    return trace === true;
  }

  node(node) {
    const key = nodeKey(node);
    const where = `node ${node.index} '${key}' (${node.opType})`;
    const attributes = new Attributes(node, where);
    const inputs = node.inputs.map((name) => (name === '' ? undefined : this.lookup(name, where)));
    const [fewest, most] = ARITY[node.opType] ?? [1, 1];
    const required = node.opType === 'Slice' && this.opset >= 10 ? 3 : fewest;
    if (inputs.length < required || inputs.length > most || inputs.slice(0, required).includes(undefined) || node.outputs.length === 0) {
      throw attributes.error(`takes ${required === most ? required : `${required} to ${most}`} inputs and an output (got ${inputs.filter((e) => e !== undefined).length} inputs, ${node.outputs.length} outputs)`);
    }
    try {
      this.lower(node, key, inputs, attributes, where);
    } catch (error) {
      if (error instanceof HalrtError) throw error;
      // A model this importer does not anticipate: an error, never a crash.
      throw new HalrtError(`onnx: ${where}: cannot be imported: ${error.message}`, 'INVALID_ARGUMENT', { cause: error });
    }
  }

  lower(node, key, inputs, attributes, where) {
    // Ops on constants only are computed now.
    if (inputs.every((e) => e === undefined || e.kind === 'const') || node.opType === 'Shape') {
      const folded = fold(node, inputs.map((e) => e && (e.kind === 'const' ? e.tensor : { dims: e.dims, dtype: e.dtype })), attributes, this.opset);
      if (folded !== undefined) {
        folded.forEach((tensor, i) => this.values.set(node.outputs[i], { kind: 'const', tensor: { ...tensor, name: node.outputs[i] } }));
        return;
      }
    }
    const handler = HANDLERS[node.opType];
    if (handler === undefined) throw attributes.unsupported(`op type '${node.opType}'`);
    const before = this.body.length;
    handler.call(this, node, inputs, attributes, where);
    if (this.traces(key)) {
      const values = node.outputs.map((o) => this.values.get(o)).filter((e) => e?.kind === 'value').map((e) => e.name);
      if (values.length > 0 && this.body.length > before) {
        this.body.push({ op: 'trace', key, values, ...(this.options.traceMode ? { mode: this.options.traceMode } : {}) });
        this.traced.push({ key, node: node.name, opType: node.opType, index: node.index, outputs: node.outputs });
      }
    }
  }
}

// A node's trace key: its name, or `<op_type>_<index>`.
function nodeKey(node) {
  return node.name || `${node.opType}_${node.index}`;
}

// Output dims of an elementwise op, or an error naming the node.
function broadcastOrFail(a, b, attributes) {
  const out = broadcast(a, b);
  if (out === undefined) throw attributes.error(`shapes [${a}] and [${b}] do not broadcast`);
  return out;
}

const HANDLERS = {
  Identity(node, [x], attributes, where) {
    const out = this.define(node.outputs[0], this.dims(this.f32(x, where)), where);
    this.body.push({ op: 'copy', source: this.operand(x), target: out.name });
  },

  // unary_f32's clip to [+0, +inf]: -0 and NaN kept as ONNX Runtime keeps
  // them (relu_f32 maps both to +0).
  Relu(node, [x], attributes, where) {
    const out = this.define(node.outputs[0], this.dims(this.f32(x, where)), where);
    this.unary(CLIP, x, out, 0, Infinity);
  },

  Clip(node, [x, low, high], attributes, where) {
    let min = attributes.float('min', -Infinity);
    let max = attributes.float('max', Infinity);
    for (const [bound, set] of [[low, (v) => { min = v; }], [high, (v) => { max = v; }]]) {
      if (bound === undefined) continue;
      if (bound.kind !== 'const' || count(bound.tensor.dims) !== 1) throw attributes.unsupported('a min or max computed at run time');
      set(Number(bound.tensor.data[0]));
    }
    this.unary(CLIP, x, this.define(node.outputs[0], this.dims(this.f32(x, where)), where), min, max);
  },

  Flatten(node, [x], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    let axis = attributes.int('axis', 1);
    if (axis < 0) axis += dims.length;
    if (axis < 0 || axis > dims.length) throw attributes.error(`axis ${attributes.int('axis')} is out of range for rank ${dims.length}`);
    const out = this.define(node.outputs[0], [count(dims.slice(0, axis)), count(dims.slice(axis))], where);
    this.body.push({ op: 'copy', source: this.operand(x), target: out.name });
  },

  Reshape(node, [x, shape], attributes, where) {
    if (shape === undefined || shape.kind !== 'const') throw attributes.unsupported('a shape computed at run time');
    const dims = reshapeDims(this.dims(this.f32(x, where)), Array.from(shape.tensor.data, Number), attributes.int('allowzero', 0), attributes);
    reshape.call(this, node, x, dims, where);
  },

  Squeeze(node, [x, axes], attributes, where) {
    if (axes !== undefined && axes.kind !== 'const') throw attributes.unsupported('axes computed at run time');
    const [folded] = fold({ ...node, opType: 'Squeeze' }, [{ dims: this.dims(this.f32(x, where)), data: [] }, axes && axes.tensor], attributes, this.opset);
    reshape.call(this, node, x, folded.dims, where);
  },

  Unsqueeze(node, [x, axes], attributes, where) {
    if (axes !== undefined && axes.kind !== 'const') throw attributes.unsupported('axes computed at run time');
    const [folded] = fold({ ...node, opType: 'Unsqueeze' }, [{ dims: this.dims(this.f32(x, where)), data: [] }, axes && axes.tensor], attributes, this.opset);
    reshape.call(this, node, x, folded.dims, where);
  },

  Transpose(node, [x], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    const perm = attributes.ints('perm', dims.map((_, i) => dims.length - 1 - i));
    if (perm.length !== dims.length || perm.length > 6 || [...perm].sort().some((p, i) => p !== i)) {
      throw attributes.error(`perm [${perm}] is not a permutation of rank ${dims.length} (at most 6)`);
    }
    const out = this.define(node.outputs[0], perm.map((p) => dims[p]), where);
    this.transpose(x, perm, out);
  },

  Conv(node, [x, w, b], attributes, where) {
    [w, b, node] = this.foldBatchNormalization(node, w, b);
    const dims = this.dims(this.f32(x, where));
    const wDims = this.dims(this.f32(w, where));
    const group = attributes.int('group', 1);
    if (wDims.length !== 4) throw attributes.unsupported(`weights of rank ${wDims.length} (2-D convolutions only)`);
    const kernel = attributes.ints('kernel_shape', wDims.slice(2));
    const win = window2d(attributes, dims, kernel, where);
    const [N, C, H, W] = dims;
    const [M, Cg] = wDims;
    if (group < 1 || C !== Cg * group || M % group !== 0 || kernel[0] !== wDims[2] || kernel[1] !== wDims[3]) {
      throw attributes.error(`x [${dims}], W [${wDims}], group ${group} and kernel_shape [${kernel}] do not agree`);
    }
    if (b !== undefined && (this.dims(this.f32(b, where)).length !== 1 || this.dims(b)[0] !== M)) throw attributes.error(`B must be [${M}]`);
    const outDims = [N, M, win.oh, win.ow];
    const pointwise = N === 1 && group === 1 && (b === undefined || b.kind === 'const') && kernel[0] === 1 && kernel[1] === 1 && win.strides.every((v) => v === 1) &&
      win.pt === 0 && win.pl === 0 && win.oh === H && win.ow === W;
    if (pointwise) {
      // A 1x1 convolution of one image is a matrix product: W [M, C] · x [C, H·W].
      const product = b === undefined ? this.define(node.outputs[0], outDims, where) : this.temp(`${node.outputs[0]}/Wx`, outDims);
      this.dispatch('matmul_f32', [this.operand(w), this.operand(x), product.name], [M, C, H * W]);
      if (b === undefined) return;
      const out = this.define(node.outputs[0], outDims, where);
      this.binary(BINARY_OPS.Add, product, channelConstant(b.tensor.name, b.tensor.data), out);
      return;
    }
    if (N === 1 && group === 1 && (b === undefined || b.kind === 'const')) {
      // One image, one group: columns of every window (im2col, a strided
      // copy of the input, padded first when the windows reach past it),
      // then one matrix product W [M, C·KH·KW] · cols.
      const [KH, KW] = kernel;
      const Hp = Math.max(H + win.pt, (win.oh - 1) * win.strides[0] + win.dilations[0] * (KH - 1) + 1);
      const Wp = Math.max(W + win.pl, (win.ow - 1) * win.strides[1] + win.dilations[1] * (KW - 1) + 1);
      let source = x;
      if (Hp !== H || Wp !== W) {
        source = this.temp(`${node.outputs[0]}/padded`, [C, Hp, Wp]);
        this.stridedCopy(x, 0, denseStrides([C, H, W]), source, win.pt * Wp + win.pl, [Hp * Wp, Wp, 1], [C, H, W]);
      }
      const colsDims = [C, KH, KW, win.oh, win.ow];
      const cols = this.temp(`${node.outputs[0]}/cols`, colsDims);
      this.stridedCopy(source, 0, [Hp * Wp, win.dilations[0] * Wp, win.dilations[1], win.strides[0] * Wp, win.strides[1]], cols, 0, denseStrides(colsDims), colsDims);
      const product = b === undefined ? this.define(node.outputs[0], outDims, where) : this.temp(`${node.outputs[0]}/Wcols`, outDims);
      this.dispatch('matmul_f32', [this.operand(w), cols.name, product.name], [M, C * KH * KW, win.oh * win.ow]);
      if (b !== undefined) this.binary(BINARY_OPS.Add, product, channelConstant(b.tensor.name, b.tensor.data), this.define(node.outputs[0], outDims, where));
      return;
    }
    const bias = b ?? { kind: 'const', tensor: { name: `${node.outputs[0]}/zero_bias`, dtype: 'f32', dims: [M], data: new Float32Array(M) } };
    const out = this.define(node.outputs[0], outDims, where);
    this.dispatch('conv2d_f32', [this.operand(x), this.operand(w), this.operand(bias), out.name],
      [N, C, H, W, M, Cg, kernel[0], kernel[1], win.oh, win.ow, win.strides[0], win.strides[1], win.pt, win.pl, win.dilations[0], win.dilations[1]]);
  },

  // The convolution whose gradient a Conv is: x with (stride - 1) zeros
  // between its elements, convolved at stride 1 with the kernel flipped and
  // its channel axes swapped (made at import), padded by
  // dilation·(kernel - 1) - pad at the start; the end follows from the
  // output size.
  ConvTranspose(node, [x, w, b], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    const wDims = this.dims(this.f32(w, where));
    if (dims.length !== 4 || wDims.length !== 4) throw attributes.unsupported(`ConvTranspose of x [${dims}] and W [${wDims}] (2-D only)`);
    if (w.kind !== 'const') throw attributes.unsupported('weights computed at run time');
    const [N, C, H, W] = dims;
    const [C2, Mg, KH, KW] = wDims;
    const group = attributes.int('group', 1);
    const kernel = attributes.ints('kernel_shape', [KH, KW]);
    const strides = attributes.ints('strides', [1, 1]);
    const dilations = attributes.ints('dilations', [1, 1]);
    const outputPadding = attributes.ints('output_padding', [0, 0]);
    if (group < 1 || C2 !== C || C % group !== 0 || kernel[0] !== KH || kernel[1] !== KW || strides.length !== 2 || dilations.length !== 2 ||
      outputPadding.length !== 2 || [...strides, ...dilations].some((v) => v < 1) || outputPadding.some((v, d) => v < 0 || v >= Math.max(strides[d], dilations[d]))) {
      throw attributes.error(`x [${dims}], W [${wDims}], group ${group}, kernel_shape [${kernel}], strides [${strides}], dilations [${dilations}] and output_padding [${outputPadding}] do not agree`);
    }
    const M = Mg * group;
    const Cg = C / group;
    if (b !== undefined && (this.dims(this.f32(b, where)).join() !== String(M))) throw attributes.error(`B must be [${M}]`);
    const spans = [KH, KW].map((k, d) => dilations[d] * (k - 1) + 1);
    const full = [H, W].map((n, d) => strides[d] * (n - 1) + outputPadding[d] + spans[d]);
    const autoPad = attributes.string('auto_pad', 'NOTSET');
    const outputShape = attributes.ints('output_shape', undefined);
    let pads = attributes.ints('pads', [0, 0, 0, 0]);
    if (outputShape !== undefined || autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
      const wanted = outputShape?.slice(-2) ?? [H * strides[0], W * strides[1]];
      const total = full.map((f, d) => f - wanted[d]);
      if (total.some((t) => t < 0)) throw attributes.unsupported(`output_shape [${outputShape}] larger than the full output [${full}]`);
      const upper = autoPad === 'SAME_UPPER';
      pads = [0, 1].map((d) => (upper ? Math.floor(total[d] / 2) : total[d] - Math.floor(total[d] / 2)));
      pads.push(...[0, 1].map((d) => total[d] - pads[d]));
    } else if (autoPad === 'VALID') {
      pads = [0, 0, 0, 0];
    } else if (autoPad !== 'NOTSET') {
      throw attributes.error(`auto_pad '${autoPad}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID`);
    }
    if (pads.length !== 4 || pads.some((p) => p < 0)) throw attributes.error(`pads [${pads}] must be 4 non-negative integers`);
    const start = [0, 1].map((d) => spans[d] - 1 - pads[d]);
    if (start.some((p) => p < 0)) throw attributes.unsupported(`pads [${pads}] beyond dilation·(kernel - 1)`);
    const [OH, OW] = [0, 1].map((d) => full[d] - pads[d] - pads[d + 2]);
    if (OH < 0 || OW < 0) throw attributes.error(`pads [${pads}] leave no output`);
    // W [C, M/group, KH, KW] -> [M, C/group, KH, KW], flipped.
    const data = w.tensor.data;
    const flipped = new Float32Array(M * Cg * KH * KW);
    for (let m = 0; m < M; ++m) {
      const g = Math.floor(m / Mg);
      for (let c = 0; c < Cg; ++c) {
        for (let i = 0; i < KH; ++i) {
          for (let j = 0; j < KW; ++j) {
            flipped[((m * Cg + c) * KH + i) * KW + j] = data[((((g * Cg + c) * Mg + (m % Mg)) * KH + (KH - 1 - i)) * KW) + (KW - 1 - j)];
          }
        }
      }
    }
    const base = node.outputs[0];
    let source = x;
    const [Hu, Wu] = [(H - 1) * strides[0] + 1, (W - 1) * strides[1] + 1];
    if (strides.some((v) => v > 1) && N * C * H * W > 0) {
      source = this.temp(`${base}/spread`, [N, C, Hu, Wu]);
      this.body.push({ op: 'fill', target: source.name, value: 0 });
      this.stridedCopy(x, 0, denseStrides(dims), source, 0, [C * Hu * Wu, Hu * Wu, strides[0] * Wu, strides[1]], dims);
    }
    const weights = { kind: 'const', tensor: { name: `${w.tensor.name}^T`, dtype: 'f32', dims: [M, Cg, KH, KW], data: flipped } };
    const bias = b ?? { kind: 'const', tensor: { name: `${base}/zero_bias`, dtype: 'f32', dims: [M], data: new Float32Array(M) } };
    const out = this.define(base, [N, M, OH, OW], where);
    this.dispatch('conv2d_f32', [this.operand(source), this.operand(weights), this.operand(bias), out.name],
      [N, C, Hu, Wu, M, Cg, KH, KW, OH, OW, 1, 1, start[0], start[1], dilations[0], dilations[1]]);
  },

  // Nearest or (bi)linear over H and W of [N, C, H, W] by resize2d_f32,
  // its row and column tables computed here in f32 as ONNX Runtime
  // computes the coordinates.
  Resize(node, inputs, attributes, where) {
    const [x, roi, scalesInput, sizesInput] = this.opset < 11 ? [inputs[0], undefined, inputs[1], undefined] : inputs;
    const dims = this.dims(this.f32(x, where));
    if (dims.length !== 4) throw attributes.unsupported(`Resize of rank ${dims.length} (only [N, C, H, W])`);
    const mode = attributes.string('mode', 'nearest');
    if (mode !== 'nearest' && mode !== 'linear') throw attributes.unsupported(`mode '${mode}'`);
    const transform = attributes.string('coordinate_transformation_mode', this.opset < 11 ? 'asymmetric' : 'half_pixel');
    if (!Object.hasOwn(COORDINATES, transform)) throw attributes.unsupported(`coordinate_transformation_mode '${transform}'`);
    const nearest = this.opset < 11 ? 'simple' : attributes.string('nearest_mode', 'round_prefer_floor');
    if (!Object.hasOwn(NEAREST, nearest)) throw attributes.unsupported(`nearest_mode '${nearest}'`);
    if (attributes.int('antialias', 0)) throw attributes.unsupported('antialias');
    if (attributes.string('keep_aspect_ratio_policy', 'stretch') !== 'stretch') throw attributes.unsupported(`keep_aspect_ratio_policy '${attributes.string('keep_aspect_ratio_policy')}'`);
    for (const input of [roi, scalesInput, sizesInput]) {
      if (input !== undefined && input.kind !== 'const') throw attributes.unsupported('roi, scales or sizes computed at run time');
    }
    const axes = attributes.ints('axes', [0, 1, 2, 3]).map((a) => (a < 0 ? a + 4 : a));
    const given = (input) => (input === undefined || count(input.tensor.dims) === 0 ? undefined : Array.from(input.tensor.data, Number));
    const scales = given(scalesInput);
    const sizes = given(sizesInput);
    if ((scales === undefined) === (sizes === undefined)) throw attributes.error('needs exactly one of scales and sizes');
    const list = scales ?? sizes;
    if (list.length !== axes.length || axes.some((a) => a < 0 || a > 3)) throw attributes.error(`${scales ? 'scales' : 'sizes'} [${list}] do not fit axes [${axes}] of rank 4`);
    const scale = [1, 1, 1, 1];
    const out = [...dims];
    axes.forEach((a, i) => {
      scale[a] = scales ? Math.fround(scales[i]) : Math.fround(sizes[i] / dims[a]);
      out[a] = scales ? Math.floor(dims[a] * scales[i]) : sizes[i];
    });
    if (out[0] !== dims[0] || out[1] !== dims[1]) throw attributes.unsupported(`resizing N or C ([${dims}] -> [${out}])`);
    if (!scale.every((v) => Number.isFinite(v) && v > 0) || !out.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw attributes.error(`scales or sizes give [${out}] from [${dims}]`);
    }
    const table = (axis) => {
      const [length, resized, f] = [dims[axis], out[axis], scale[axis]];
      const entries = new Float32Array(3 * resized);
      for (let o = 0; o < resized; ++o) {
        const original = COORDINATES[transform](o, f, length, resized);
        let [i0, i1, w] = [0, 0, 0];
        if (mode === 'nearest') {
          i0 = i1 = Math.min(Math.max(NEAREST[nearest](original, f < 1), 0), length - 1);
        } else {
          const clamped = Math.min(Math.max(original, 0), length - 1);
          i0 = Math.min(Math.trunc(clamped), length - 1);
          i1 = Math.min(i0 + 1, length - 1);
          w = i0 === i1 ? 0 : Math.fround(clamped - i0);
        }
        entries.set([i0, i1, w], 3 * o);
      }
      return { kind: 'const', tensor: { name: `${node.outputs[0]}/${axis === 2 ? 'rows' : 'cols'}`, dtype: 'f32', dims: [resized, 3], data: entries } };
    };
    const result = this.define(node.outputs[0], out, where);
    this.dispatch('resize2d_f32', [this.operand(x), this.operand(table(2)), this.operand(table(3)), result.name],
      [dims[0] * dims[1], dims[2], dims[3], out[2], out[3], 3]);
  },

  BatchNormalization(node, [x, scale, bias, mean, variance], attributes, where) {
    if (node.outputs.length > 1 || attributes.int('training_mode', 0)) throw attributes.unsupported('training mode (more than one output)');
    const dims = this.dims(this.f32(x, where));
    const C = dims[1];
    const params = [scale, bias, mean, variance];
    if (params.some((p) => p.kind !== 'const' || p.tensor.dtype !== 'f32' || p.tensor.data.length !== C) || dims.length < 2) {
      throw attributes.unsupported(`scale, B, mean and var other than constants of [${C}]`);
    }
    const { s, t } = scaleShift(attributes, params);
    const shape = [1, C, ...new Array(dims.length - 2).fill(1)];
    const scaled = this.temp(`${node.outputs[0]}/xs`, dims);
    const mul = this.binary(BINARY_OPS.Mul, x, { kind: 'const', tensor: { name: `${node.outputs[0]}/scale`, dtype: 'f32', dims: shape, data: s } }, scaled);
    const out = this.define(node.outputs[0], dims, where);
    const add = this.binary(BINARY_OPS.Add, scaled, { kind: 'const', tensor: { name: `${node.outputs[0]}/shift`, dtype: 'f32', dims: shape, data: t } }, out);
    // Both in one constant as well, so that one chain reads them (fuse.js);
    // dropped when no chain does.
    const data = new Float32Array(2 * C);
    data.set(s);
    data.set(t, C);
    const both = this.operand({ kind: 'const', tensor: { name: `${node.outputs[0]}/scale_shift`, dtype: 'f32', dims: [2 * C], data } });
    mul.b.view = { name: both, offset: 0 };
    add.b.view = { name: both, offset: C };
  },

  MaxPool(node, [x], attributes, where) {
    if (node.outputs.length > 1) throw attributes.unsupported('the Indices output');
    if (attributes.int('storage_order', 0) !== 0) throw attributes.unsupported('storage_order 1');
    if (attributes.ints('dilations', [1, 1]).some((d) => d !== 1)) throw attributes.unsupported('dilations');
    pool.call(this, node, x, attributes, where, POOL_MAX, attributes.ints('kernel_shape', undefined));
  },

  AveragePool(node, [x], attributes, where) {
    if (attributes.int('ceil_mode', 0)) throw attributes.unsupported('ceil_mode 1');
    if (attributes.ints('dilations', [1, 1]).some((d) => d !== 1)) throw attributes.unsupported('dilations');
    pool.call(this, node, x, attributes, where, attributes.int('count_include_pad', 0) ? 2 : 1, attributes.ints('kernel_shape', undefined));
  },

  GlobalAveragePool(node, [x], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    if (dims.length !== 4) throw attributes.unsupported(`an input of rank ${dims.length} ([N, C, H, W] only)`);
    const out = this.define(node.outputs[0], [dims[0], dims[1], 1, 1], where);
    this.dispatch('pool2d_f32', [this.operand(x), out.name], [dims[0], dims[1], dims[2], dims[3], 1, 1, dims[2], dims[3], 1, 1, 0, 0, 1]);
  },

  Slice(node, [x, ...bounds], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    if (dims.length > 6) throw attributes.unsupported(`Slice of rank ${dims.length} (at most 6)`);
    if (bounds.some((b) => b !== undefined && b.kind !== 'const')) throw attributes.unsupported('starts, ends, axes or steps computed at run time');
    const window = sliceWindow(dims, bounds.map((b) => b && b.tensor), attributes, this.opset);
    if (window.step.some((v) => v < 0)) throw attributes.unsupported('negative steps');
    const dense = denseStrides(dims);
    const out = this.define(node.outputs[0], window.dims, where);
    const offset = window.begin.reduce((o, b, d) => o + b * dense[d], 0);
    this.stridedCopy(x, offset, dense.map((s, d) => s * window.step[d]), out, 0, denseStrides(window.dims), window.dims);
  },

  Concat(node, inputs, attributes, where) {
    const first = this.dims(this.f32(inputs[0], where));
    const axis = attributes.int('axis', first.length ? 0 : undefined);
    const a = axis < 0 ? axis + first.length : axis;
    if (!(a >= 0 && a < first.length) || first.length > 6) throw attributes.error(`axis ${axis} is out of range for rank ${first.length} (at most 6)`);
    const all = inputs.map((x) => this.dims(this.f32(x, where)));
    if (all.some((d) => d.length !== first.length || d.some((v, i) => i !== a && v !== first[i]))) {
      throw attributes.error(`inputs [${all.map((d) => `[${d}]`).join(', ')}] do not concatenate on axis ${a}`);
    }
    const outDims = [...first];
    outDims[a] = all.reduce((n, d) => n + d[a], 0);
    const out = this.define(node.outputs[0], outDims, where);
    const dense = denseStrides(outDims);
    let at = 0;
    inputs.forEach((x, i) => {
      this.stridedCopy(x, 0, denseStrides(all[i]), out, at * dense[a], dense, all[i]);
      at += all[i][a];
    });
  },

  Split(node, [x, splitInput], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    let axis = attributes.int('axis', 0);
    if (axis < 0) axis += dims.length;
    if (axis < 0 || axis >= dims.length || dims.length > 6) throw attributes.error(`axis ${attributes.int('axis', 0)} is out of range for rank ${dims.length} (at most 6)`);
    if (splitInput !== undefined && splitInput.kind !== 'const') throw attributes.unsupported('split sizes computed at run time');
    const k = node.outputs.length;
    let sizes = splitInput ? Array.from(splitInput.tensor.data, Number) : attributes.ints('split', undefined);
    if (sizes === undefined) {
      if (dims[axis] % k !== 0) throw attributes.unsupported(`an uneven split of ${dims[axis]} into ${k}`);
      sizes = new Array(k).fill(dims[axis] / k);
    }
    if (sizes.length !== k || sizes.reduce((n, v) => n + v, 0) !== dims[axis] || sizes.some((v) => v < 0)) {
      throw attributes.error(`split [${sizes}] does not cut dimension ${axis} (${dims[axis]}) into ${k} outputs`);
    }
    const dense = denseStrides(dims);
    let at = 0;
    node.outputs.forEach((name, i) => {
      const outDims = [...dims];
      outDims[axis] = sizes[i];
      const out = this.define(name, outDims, where);
      this.stridedCopy(x, at * dense[axis], dense, out, 0, denseStrides(outDims), outDims);
      at += sizes[i];
    });
  },

  Expand(node, [x, shape], attributes, where) {
    if (shape.kind !== 'const') throw attributes.unsupported('a shape computed at run time');
    const dims = this.dims(this.f32(x, where));
    const outDims = broadcastOrFail(dims, Array.from(shape.tensor.data, Number), attributes);
    if (outDims.length > 6) throw attributes.unsupported(`Expand to rank ${outDims.length} (at most 6)`);
    const out = this.define(node.outputs[0], outDims, where);
    this.stridedCopy(x, 0, broadcastStrides(dims, outDims).slice(6 - outDims.length), out, 0, denseStrides(outDims), outDims);
  },

  Gemm(node, [a, b, c], attributes, where) {
    const transA = attributes.int('transA', 0);
    const transB = attributes.int('transB', 0);
    const alpha = attributes.float('alpha', 1);
    const beta = attributes.float('beta', 1);
    let [M, K] = this.dims(this.f32(a, where));
    if (transA) [M, K] = [K, M];
    const bDims = this.dims(this.f32(b, where));
    const [K2, N] = transB ? [bDims[1], bDims[0]] : bDims;
    if (this.dims(a).length !== 2 || bDims.length !== 2 || K !== K2) {
      throw attributes.error(`A [${this.dims(a)}] and B [${bDims}] do not multiply (transA ${transA}, transB ${transB})`);
    }
    const ta = transA ? this.temp(`${node.outputs[0]}/A^T`, [M, K]) : a;
    if (transA) this.transpose(a, [1, 0], ta);
    const tb = transB ? this.temp(`${node.outputs[0]}/B^T`, [K, N]) : b;
    if (transB) this.transpose(b, [1, 0], tb);
    const scaled = alpha !== 1 || (c !== undefined && beta !== 0);
    const product = scaled ? this.temp(`${node.outputs[0]}/AB`, [M, N]) : this.define(node.outputs[0], [M, N], where);
    this.dispatch('matmul_f32', [this.operand(ta), this.operand(tb), product.name], [M, K, N]);
    if (!scaled) return;
    let sum = product;
    if (alpha !== 1) {
      const last = c === undefined || beta === 0;
      sum = last ? this.define(node.outputs[0], [M, N], where) : this.temp(`${node.outputs[0]}/alphaAB`, [M, N]);
      this.binary(BINARY_OPS.Mul, product, this.scalar(alpha), sum);
    }
    if (c === undefined || beta === 0) return;
    // C broadcasts to [M, N] one way only (ONNX's unidirectional rule).
    const cDims = this.dims(c);
    const fits = cDims.length <= 2 && cDims.every((d, i) => d === 1 || d === [M, N][i + 2 - cDims.length]);
    if (!fits) throw attributes.error(`C [${cDims}] does not broadcast to [${M}, ${N}]`);
    let bias = this.f32(c, where);
    if (beta !== 1) {
      bias = this.temp(`${node.outputs[0]}/betaC`, this.dims(c));
      this.binary(BINARY_OPS.Mul, c, this.scalar(beta), bias);
    }
    const out = this.define(node.outputs[0], [M, N], where);
    this.binary(BINARY_OPS.Add, sum, bias, out);
  },

  // NumPy matmul of ranks >= 2: the batch dimensions broadcast when one
  // side's are all 1 or both sides' are equal.
  MatMul(node, [a, b], attributes, where) {
    // A 1-D a is one row ([1, K]), a 1-D b one column ([K, 1]): the same
    // elements; the output then drops that dimension.
    const a1 = this.dims(this.f32(a, where));
    const b1 = this.dims(this.f32(b, where));
    if (a1.length === 0 || b1.length === 0) throw attributes.error(`MatMul of a scalar ([${a1}] · [${b1}])`);
    const aDims = a1.length === 1 ? [1, ...a1] : a1;
    const bDims = b1.length === 1 ? [...b1, 1] : b1;
    const [M, K] = aDims.slice(-2);
    const [K2, N] = bDims.slice(-2);
    if (K !== K2) throw attributes.error(`[${aDims}] and [${bDims}] do not multiply`);
    const aBatch = aDims.slice(0, -2);
    const bBatch = bDims.slice(0, -2);
    const batchDims = broadcastOrFail(aBatch, bBatch, attributes);
    const outDims = [...batchDims, ...(a1.length === 1 ? [] : [M]), ...(b1.length === 1 ? [] : [N])];
    const batch = count(batchDims);
    const stride = (dims, size) => {
      if (count(dims) === 1) return 0;
      if (dims.length === batchDims.length && dims.every((d, i) => d === batchDims[i])) return size;
      throw attributes.unsupported(`MatMul batch dimensions [${aBatch}] and [${bBatch}] broadcast in part`);
    };
    const out = this.define(node.outputs[0], outDims, where);
    if (count(bBatch) === 1) {
      // b is one matrix: the batch of a is more rows of one product.
      this.dispatch('matmul_f32', [this.operand(a), this.operand(b), out.name], [batch * M, K, N]);
      return;
    }
    this.dispatch('bmm_f32', [this.operand(a), this.operand(b), out.name],
      [batch, M, K, N, stride(aBatch, M * K), K, 1, stride(bBatch, K * N), N, 1]);
  },

  Softmax(node, [x], attributes, where) {
    const { dims, rows, cols } = softmaxRows.call(this, node, x, attributes, where);
    const out = this.define(node.outputs[0], dims, where);
    this.dispatch('softmax_rows_f32', [this.operand(x), out.name], [rows, cols]);
  },

  // x - max - log(Σ exp(x - max)) per row, as ONNX Runtime computes it.
  LogSoftmax(node, [x], attributes, where) {
    const { dims, rows, cols } = softmaxRows.call(this, node, x, attributes, where);
    const base = node.outputs[0];
    const x2 = view(x, [rows, cols]);
    const max = this.temp(`${base}/max`, [rows, 1]);
    this.rowMax(x2, max, rows, cols);
    const shifted = this.temp(`${base}/shifted`, [rows, cols]);
    this.binary(BINARY_OPS.Sub, x2, max, shifted);
    const exp = this.temp(`${base}/exp`, [rows, cols]);
    this.unary(UNARY_OPS.Exp[0], shifted, exp);
    const sum = this.temp(`${base}/sum`, [rows, 1]);
    this.dispatch('reduce_sum_f32', [exp.name, sum.name], [rows, cols]);
    const log = this.temp(`${base}/log`, [rows, 1]);
    this.unary(UNARY_OPS.Log[0], sum, log);
    this.binary(BINARY_OPS.Sub, shifted, log, view(this.define(base, dims, where), [rows, cols]));
  },

  // (x - mean) / sqrt(var + epsilon) · scale + bias over the axes from
  // `axis` on, the variance the mean of the squared differences.
  LayerNormalization(node, [x, scale, bias], attributes, where) {
    if (node.outputs.slice(1).some((o) => o !== '')) throw attributes.unsupported('an output Mean or InvStdDev');
    const dims = this.dims(this.f32(x, where));
    let axis = attributes.int('axis', -1);
    if (axis < 0) axis += dims.length;
    if (axis < 0 || axis >= dims.length) throw attributes.error(`axis ${attributes.int('axis', -1)} is out of range for rank ${dims.length}`);
    const rows = count(dims.slice(0, axis));
    const cols = count(dims.slice(axis));
    const tail = dims.slice(axis);
    for (const [what, entry] of [['Scale', scale], ['B', bias]]) {
      if (entry !== undefined && broadcast(this.dims(this.f32(entry, where)), tail)?.join() !== tail.join()) {
        throw attributes.error(`${what} [${this.dims(entry)}] does not broadcast to the normalised dimensions [${tail}]`);
      }
    }
    const base = node.outputs[0];
    const x2 = view(x, [rows, cols]);
    const mean = this.rowMean(x2, this.temp(`${base}/mean`, [rows, 1]), rows, cols);
    const diff = this.temp(`${base}/diff`, [rows, cols]);
    this.binary(BINARY_OPS.Sub, x2, mean, diff);
    const square = this.temp(`${base}/square`, [rows, cols]);
    this.binary(BINARY_OPS.Mul, diff, diff, square);
    const variance = this.rowMean(square, this.temp(`${base}/variance`, [rows, 1]), rows, cols);
    const padded = this.temp(`${base}/variance+epsilon`, [rows, 1]);
    this.binary(BINARY_OPS.Add, variance, this.scalar(Math.fround(attributes.float('epsilon', 1e-5))), padded);
    const deviation = this.temp(`${base}/deviation`, [rows, 1]);
    this.unary(UNARY_OPS.Sqrt[0], padded, deviation);
    const out = this.define(base, dims, where);
    const normalised = this.temp(`${base}/normalised`, dims);
    this.binary(BINARY_OPS.Div, diff, deviation, view(normalised, [rows, cols]));
    if (bias === undefined) {
      this.binary(BINARY_OPS.Mul, normalised, scale, out);
      return;
    }
    const scaled = this.temp(`${base}/scaled`, dims);
    this.binary(BINARY_OPS.Mul, normalised, scale, scaled);
    this.binary(BINARY_OPS.Add, scaled, bias, out);
  },

  ReduceMean(node, inputs, attributes, where) {
    reduce.call(this, node, inputs, attributes, where, 'mean');
  },

  ReduceSum(node, inputs, attributes, where) {
    reduce.call(this, node, inputs, attributes, where, 'sum');
  },

  ReduceMax(node, inputs, attributes, where) {
    reduce.call(this, node, inputs, attributes, where, 'max');
  },

  Equal(node, [a, b], attributes, where) {
    const dims = broadcastOrFail(this.dims(this.f32(a, where)), this.dims(this.f32(b, where)), attributes);
    this.binary(EQ, a, b, this.define(node.outputs[0], dims, where, 'bool'));
  },

  Not(node, [x], attributes, where) {
    const dims = this.dims(this.condition(x, where));
    this.binary(EQ, this.condition(x, where), this.scalar(0), this.define(node.outputs[0], dims, where, 'bool'));
  },

  // To f32 from a condition (its 1s and 0s) or f32, and to bool from f32
  // (not zero: 1, NaN included), at run time; of constants at import.
  Cast(node, [x], attributes, where) {
    const to = attributes.int('to', 0);
    const dtype = x.kind === 'value' ? x.dtype : x.tensor.dtype;
    if (to === 1 && (dtype === 'f32' || dtype === 'bool')) {
      const out = this.define(node.outputs[0], this.dims(x), where);
      this.body.push({ op: 'copy', source: this.operand(dtype === 'bool' ? this.condition(x, where) : x), target: out.name });
      return;
    }
    if (to === 9 && dtype === 'f32') {
      const zero = this.temp(`${node.outputs[0]}/zero`, this.dims(x));
      this.binary(EQ, x, this.scalar(0), zero);
      this.binary(EQ, zero, this.scalar(0), this.define(node.outputs[0], this.dims(x), where, 'bool'));
      return;
    }
    throw attributes.unsupported(`a Cast from ${dtype} to type ${to} at run time`);
  },

  Where(node, [condition, a, b], attributes, where) {
    const c = this.condition(condition, where);
    const dims = [this.dims(c), this.dims(this.f32(a, where)), this.dims(this.f32(b, where))]
      .reduce((x, y) => broadcastOrFail(x, y, attributes));
    if (dims.length > 6) throw attributes.unsupported(`Where of rank ${dims.length} (at most 6)`);
    const out = this.define(node.outputs[0], dims, where);
    const operands = [c, a, b];
    const merged = coalesce(pad6(dims), ...operands.map((e) => broadcastStrides(this.dims(e), dims)), denseStrides(pad6(dims)));
    this.dispatch('where_f32', [...operands.map((e) => this.operand(e)), out.name],
      [...pad6(merged.dims), ...merged.strides.slice(0, 3).flatMap((list) => pad6(list, 0))]);
  },

  // Gather of a value at constant indices: one strided copy when they step
  // evenly (a single index, a range), else one per index (at most 64).
  Gather(node, [x, indices], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    if (indices.kind !== 'const') throw attributes.unsupported('a Gather at indices computed at run time');
    const { axis, idx, dims: outDims } = gatherIndices(dims, indices.tensor, attributes);
    if (outDims.length > 6) throw attributes.unsupported(`Gather giving rank ${outDims.length} (at most 6)`);
    const outer = count(dims.slice(0, axis));
    const size = dims[axis];
    const inner = count(dims.slice(axis + 1));
    const out = this.define(node.outputs[0], outDims, where);
    if (idx.length === 0) return; // an empty output: nothing to copy
    const step = idx.length > 1 ? idx[1] - idx[0] : 0;
    if (step >= 0 && idx.every((v, j) => v === idx[0] + j * step)) {
      this.stridedCopy(x, idx[0] * inner, [size * inner, step * inner, 1], out, 0, [idx.length * inner, inner, 1], [outer, idx.length, inner]);
      return;
    }
    if (idx.length > 64) throw attributes.unsupported(`${idx.length} indices that do not step evenly (at most 64)`);
    idx.forEach((v, j) => this.stridedCopy(x, v * inner, [size * inner, 1], out, j * inner, [idx.length * inner, 1], [outer, inner]));
  },

  // Pad in 'constant' mode with constant, non-negative pads: the value
  // everywhere, then x copied into the middle.
  Pad(node, [x, padsInput, valueInput, axesInput], attributes, where) {
    const dims = this.dims(this.f32(x, where));
    const mode = attributes.string('mode', 'constant');
    if (mode !== 'constant') throw attributes.unsupported(`mode '${mode}'`);
    for (const input of [padsInput, valueInput, axesInput]) {
      if (input !== undefined && input.kind !== 'const') throw attributes.unsupported('a pad, value or axis computed at run time');
    }
    let pads = padsInput === undefined ? attributes.ints('pads', undefined) : Array.from(padsInput.tensor.data, Number);
    const value = valueInput === undefined ? attributes.float('value', 0) : Number(valueInput.tensor.data[0] ?? 0);
    if (pads === undefined) throw attributes.error('has no pads');
    const axes = axesInput === undefined ? dims.map((_, i) => i) : Array.from(axesInput.tensor.data, (a) => (Number(a) < 0 ? Number(a) + dims.length : Number(a)));
    if (pads.length !== 2 * axes.length || axes.some((a) => a < 0 || a >= dims.length)) throw attributes.error(`pads [${pads}] and axes [${axes}] do not fit rank ${dims.length}`);
    const before = new Array(dims.length).fill(0);
    const after = new Array(dims.length).fill(0);
    axes.forEach((a, i) => {
      before[a] = pads[i];
      after[a] = pads[i + axes.length];
    });
    if ([...before, ...after].some((p) => p < 0)) throw attributes.unsupported('a negative pad');
    if (!Number.isFinite(value)) throw attributes.unsupported(`the value ${value}`);
    if (dims.length > 6) throw attributes.unsupported(`Pad of rank ${dims.length} (at most 6)`);
    const outDims = dims.map((d, i) => d + before[i] + after[i]);
    const out = this.define(node.outputs[0], outDims, where);
    this.body.push({ op: 'fill', target: out.name, value: Math.fround(value) });
    const outStrides = denseStrides(outDims);
    this.stridedCopy(x, 0, denseStrides(dims), out, before.reduce((o, p, i) => o + p * outStrides[i], 0), outStrides, dims);
  },
};

// Resize: the input coordinate of output coordinate `o` along an axis of
// `length` resized to `resized` by `scale`, in f32 as ONNX Runtime
// computes it.
const f = Math.fround;
const COORDINATES = {
  half_pixel: (o, scale) => f(f(f(o + 0.5) / scale) - 0.5),
  pytorch_half_pixel: (o, scale, length, resized) => (resized > 1 ? f(f(f(o + 0.5) / scale) - 0.5) : 0),
  asymmetric: (o, scale) => f(o / scale),
  tf_half_pixel_for_nn: (o, scale) => f(f(o + 0.5) / scale),
  align_corners: (o, scale, length, resized) => (resized === 1 ? 0 : f(f(o * (length - 1)) / (resized - 1))),
};
// Resize: the nearest input index of coordinate x ('simple': Resize-10).
const NEAREST = {
  round_prefer_floor: (x) => (x === Math.trunc(x) + 0.5 ? Math.floor(x) : roundHalfAway(x)),
  round_prefer_ceil: (x) => roundHalfAway(x),
  floor: (x) => Math.floor(x),
  ceil: (x) => Math.ceil(x),
  simple: (x, down) => (down ? Math.ceil(x) : Math.trunc(x)),
};
// C's round(): halfway cases away from zero.
function roundHalfAway(x) {
  return Math.sign(x) * Math.round(Math.abs(x));
}

// The rows and columns a (Log)Softmax runs over: opset < 13 sees the
// input as 2-D at `axis`; from 13 the axis must be the last.
function softmaxRows(node, x, attributes, where) {
  const dims = this.dims(this.f32(x, where));
  let axis = attributes.int('axis', this.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += dims.length;
  if (axis < 0 || axis >= Math.max(dims.length, 1)) throw attributes.error(`axis ${attributes.int('axis')} is out of range for rank ${dims.length}`);
  if (this.opset >= 13 && axis !== dims.length - 1) throw attributes.unsupported(`${node.opType} over axis ${axis} of rank ${dims.length} (only the last axis so far)`);
  return { dims, rows: count(dims.slice(0, axis)), cols: count(dims.slice(axis)) };
}

// `entry` seen with other dims of the same elements (a value keeps its
// name; a constant tensor gets a module constant of its own).
function view(entry, dims) {
  return entry.kind === 'value' ? { ...entry, dims } : { kind: 'const', tensor: { ...entry.tensor, dims } };
}

// Padding and output size of a window sweep over `size` (one spatial
// dimension `d` of `rank`): [pad before, output size], as ONNX Runtime
// computes them: the room left by the window divided by the stride with
// the quotient truncated toward zero (a window wider than the padded input
// still gives one output), or with ceil_mode rounded up, less a last
// window that would start past the input and its leading pad.
function sweep(attributes, size, span, stride, d, rank, pads) {
  const autoPad = attributes.string('auto_pad', 'NOTSET');
  if (autoPad === 'SAME_UPPER' || autoPad === 'SAME_LOWER') {
    const out = Math.ceil(size / stride);
    const total = Math.max(0, (out - 1) * stride + span - size);
    return [autoPad === 'SAME_UPPER' ? Math.floor(total / 2) : Math.ceil(total / 2), out];
  }
  if (autoPad !== 'VALID' && autoPad !== 'NOTSET') throw attributes.error(`auto_pad '${autoPad}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID`);
  const [before, after] = autoPad === 'VALID' ? [0, 0] : [pads[d], pads[d + rank]];
  const room = size + before + after - span;
  let out = Math.trunc(room / stride) + 1;
  if (autoPad === 'NOTSET' && attributes.int('ceil_mode', 0)) {
    out = Math.ceil(room / stride) + 1;
    if ((out - 1) * stride >= size + before) --out;
  }
  if (out < 1) {
    throw attributes.error(`a window of ${span} at stride ${stride} does not fit spatial dimension ${d} (${size}, pads ${before} and ${after})`);
  }
  return [before, out];
}

// The spatial attributes of a 2-D Conv or pool over x [N, C, H, W].
function window2d(attributes, dims, kernel, where) {
  if (dims.length !== 4) throw attributes.unsupported(`an input of rank ${dims.length} (2-D windows over [N, C, H, W] only)`);
  const strides = attributes.ints('strides', [1, 1]);
  const dilations = attributes.ints('dilations', [1, 1]);
  const pads = attributes.ints('pads', [0, 0, 0, 0]);
  if (strides.length !== 2 || dilations.length !== 2 || pads.length !== 4 || kernel.length !== 2) {
    throw attributes.error(`kernel_shape, strides, dilations and pads must describe 2 spatial dimensions (${where})`);
  }
  if ([...strides, ...dilations, ...kernel].some((v) => v < 1) || pads.some((v) => v < 0)) {
    throw attributes.error(`strides [${strides}], dilations [${dilations}] and kernel_shape [${kernel}] must be positive, pads [${pads}] non-negative`);
  }
  const spans = kernel.map((k, d) => dilations[d] * (k - 1) + 1);
  const [pt, oh] = sweep(attributes, dims[2], spans[0], strides[0], 0, 2, pads);
  const [pl, ow] = sweep(attributes, dims[3], spans[1], strides[1], 1, 2, pads);
  return { strides, dilations, pt, pl, oh, ow };
}

// BatchNormalization (inference) as y = x·s + t per channel, in f32:
// s = scale / sqrt(var + eps), t = B − mean·s. `params`: its constant
// scale, B, mean and var.
function scaleShift(attributes, params) {
  const f = Math.fround;
  const eps = f(attributes.float('epsilon', 1e-5));
  const [scale, shift, mean, variance] = params.map((p) => p.tensor.data);
  const s = Float32Array.from(scale, (v, c) => f(v / f(Math.sqrt(f(variance[c] + eps)))));
  const t = Float32Array.from(shift, (v, c) => f(v - f(mean[c] * s[c])));
  return { s, t };
}

// A per-channel constant [C] as [1, C, 1, 1] for broadcasting.
function channelConstant(name, data) {
  return { kind: 'const', tensor: { name, dtype: 'f32', dims: [1, data.length, 1, 1], data } };
}

// MaxPool (op 3) and AveragePool (op 1: taps inside the input; op 2: all
// kernel taps) over [N, C, H, W].
function pool(node, x, attributes, where, op, kernel) {
  const dims = this.dims(this.f32(x, where));
  if (kernel === undefined) throw attributes.error('needs kernel_shape');
  const win = window2d(attributes, dims, kernel, where);
  const out = this.define(node.outputs[0], [dims[0], dims[1], win.oh, win.ow], where);
  this.dispatch('pool2d_f32', [this.operand(x), out.name],
    [dims[0], dims[1], dims[2], dims[3], win.oh, win.ow, kernel[0], kernel[1], win.strides[0], win.strides[1], win.pt, win.pl, op]);
}

// A new shape of the same elements: a copy (a value has one shape).
function reshape(node, x, dims, where) {
  const out = this.define(node.outputs[0], dims, where);
  this.body.push({ op: 'copy', source: this.operand(x), target: out.name });
}

// ReduceMean and ReduceSum over trailing axes: the rows kernel, then the
// mean's division.
function reduce(node, [x, axesInput], attributes, where, kind) {
  const dims = this.dims(this.f32(x, where));
  let axes = attributes.ints('axes', undefined);
  if (axesInput !== undefined) {
    if (axesInput.kind !== 'const') throw attributes.unsupported('axes computed at run time');
    axes = Array.from(axesInput.tensor.data, Number);
  }
  if (axes === undefined || axes.length === 0) {
    axes = attributes.int('noop_with_empty_axes', 0) ? [] : dims.map((_, i) => i);
  }
  axes = [...new Set(axes.map((a) => (a < 0 ? a + dims.length : a)))].sort((p, q) => p - q);
  if (axes.some((a) => a < 0 || a >= dims.length)) throw attributes.error(`axes [${attributes.ints('axes', [])}] are out of range for rank ${dims.length}`);
  if (axes.some((a, i) => a !== dims.length - axes.length + i)) throw attributes.unsupported(`reducing axes [${axes}] of rank ${dims.length} (only trailing axes so far)`);
  const keep = attributes.int('keepdims', 1);
  const rows = count(dims.slice(0, dims.length - axes.length));
  const cols = count(dims.slice(dims.length - axes.length));
  const outDims = keep ? dims.map((d, i) => (axes.includes(i) ? 1 : d)) : dims.filter((_, i) => !axes.includes(i));
  const x2 = view(x, [rows, cols]);
  const out = view(this.define(node.outputs[0], outDims, where), [rows, 1]);
  if (kind === 'mean') this.rowMean(x2, out, rows, cols);
  else if (kind === 'max') this.rowMax(x2, out, rows, cols);
  else this.dispatch('reduce_sum_f32', [this.operand(x2), out.name], [rows, cols]);
}

for (const [opType, op] of Object.entries(BINARY_OPS)) {
  HANDLERS[opType] = function binaryHandler(node, [a, b], attributes, where) {
    if (b === undefined) throw attributes.error('needs two inputs');
    const dims = broadcastOrFail(this.dims(this.f32(a, where)), this.dims(this.f32(b, where)), attributes);
    const out = this.define(node.outputs[0], dims, where);
    // x^2 as x*x: exact, and what ONNX Runtime computes.
    if (opType === 'Pow' && b.kind === 'const' && count(b.tensor.dims) === 1 && Number(b.tensor.data[0]) === 2) {
      this.binary(BINARY_OPS.Mul, a, a, out);
      return;
    }
    this.binary(op, a, b, out);
  };
}

for (const [opType, [op, params]] of Object.entries(UNARY_OPS)) {
  HANDLERS[opType] = function unaryHandler(node, [x], attributes, where) {
    const [alpha, beta] = params ? params(attributes) : [0, 0];
    this.unary(op, x, this.define(node.outputs[0], this.dims(this.f32(x, where)), where), alpha, beta);
  };
}

// The symbols `shapes` binds (name -> size), checking that it names inputs
// and binds each symbolic dimension once.
function boundSymbols(graph, shapes = {}) {
  const symbols = new Map();
  for (const [name, dims] of Object.entries(shapes)) {
    const input = graph.inputs.find((i) => i.name === name);
    if (input === undefined) {
      throw new HalrtError(`onnx: options.shapes names '${name}', which is not an input of the model (inputs: ${graph.inputs.map((i) => i.name).join(', ')})`, 'INVALID_ARGUMENT');
    }
    (input.dims ?? []).forEach((d, k) => {
      if (typeof d !== 'string' || d === '' || !Array.isArray(dims) || dims[k] === undefined) return;
      if (symbols.has(d) && symbols.get(d) !== dims[k]) {
        throw new HalrtError(`onnx: options.shapes binds the symbolic dimension '${d}' to ${symbols.get(d)} and, in '${name}', to ${dims[k]}`, 'INVALID_ARGUMENT');
      }
      symbols.set(d, dims[k]);
    });
  }
  return symbols;
}

// What can be checked before the shapes are known: boundSymbols, and every
// node's domain and op type are supported. Returns the symbols `shapes`
// binds (name -> size).
function check(model, shapes = {}) {
  const { graph } = model;
  const symbols = boundSymbols(graph, shapes);
  for (const node of graph.nodes) {
    const attributes = new Attributes(node, `node ${node.index} '${nodeKey(node)}' (${node.opType})`);
    if (node.domain !== '' && node.domain !== 'ai.onnx') throw attributes.unsupported(`domain '${node.domain}'`);
    if (!Object.hasOwn(HANDLERS, node.opType) && !foldable(node.opType)) throw attributes.unsupported(`op type '${node.opType}'`);
  }
  return symbols;
}

// convert(bytes | model, {name, shapes, traceNodes, traceMode}) ->
// {description, traced}
function convert(source, options = {}) {
  const model = source instanceof Uint8Array ? readModel(source, options.baseDir) : source;
  const converter = new Converter(model, { name: 'onnx', ...options });
  const description = converter.convert();
  return { description, traced: converter.traced, model };
}

module.exports = { boundSymbols, check, convert };

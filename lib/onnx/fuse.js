'use strict';
// Chains of elementwise ops made one chain_f32 dispatch each (docs/onnx.md,
// "Speed"; docs/kernels.md): an op whose output only the next op of the
// chain reads is not run on its own. Bits are unchanged: chain_f32 rounds
// each step as its own kernel does. The converter tags its unary_f32 and
// binary_f32 dispatches with what they compute; fuse() rewrites the body.
// With health from counts (traces in 'health' mode), traces do not stop a
// chain: a chain with a traced step is one chain_health_f32 dispatch, and
// each trace of its steps reports the health that dispatch counted, placed
// after it (traces keep their order).

const MAX_STEPS = 6;
const UNARY_BASE = 0;
const T_OP_V = 16; // t op v
const V_OP_T = 32; // v op t
const OPERAND = { x: 0, y: 1, alpha: 2, yAt: 3 };
const MAX_Y_OFFSET = 2 ** 24; // operand 3's offsets are below it

const squeezed = (dims) => dims.filter((d) => d !== 1).join(',');
const padded = (dims) => [...new Array(6 - dims.length).fill(1), ...dims].join(',');

// A chain begun by `info` (the op's tag), or null when no operand of the
// op's own shape can be its x.
function begin(info) {
  if (info.kind === 'unary') {
    if (squeezed(info.x.dims) !== squeezed(info.out.dims)) return null;
    return { x: info.x, y: null, dims: info.out.dims, outs: [info.out.name], steps: [[UNARY_BASE + info.op, 0, info.alpha, info.beta]] };
  }
  const own = (o) => o.scalar === undefined && squeezed(o.dims) === squeezed(info.out.dims);
  const reversed = !own(info.a);
  if (reversed && !own(info.b)) return null;
  const x = reversed ? info.b : info.a;
  const chain = { x, y: null, dims: info.out.dims, outs: [info.out.name], steps: [] };
  const other = reversed ? info.a : info.b;
  if (other.name === x.name && other.scalar === undefined) {
    chain.steps.push([(reversed ? V_OP_T : T_OP_V) + info.op, OPERAND.x, 0, 0]);
    return chain;
  }
  return add(chain, info, other, reversed) ? chain : null;
}

// Adds the step `t op v` (or `v op t` when `reversed`) with `v` the other
// operand; false when v is none of x, the chain's y (or a first y that
// broadcasts to it) or a scalar. An operand with a `view` ({name, offset}:
// its elements at that offset in another constant, which the converter
// also made) is read there, so that two such views of one constant (a
// BatchNormalization's scale and shift) are one y.
function add(chain, info, v, reversed) {
  const code = (reversed ? V_OP_T : T_OP_V) + info.op;
  if (v.scalar !== undefined) {
    chain.steps.push([code, OPERAND.alpha, v.scalar, 0]);
  } else if (v.name === chain.x.name) {
    chain.steps.push([code, OPERAND.x, 0, 0]);
  } else {
    const { name, offset } = v.view?.offset < MAX_Y_OFFSET ? v.view : { name: v.name, offset: 0 };
    if (chain.y === null) chain.y = { name, dims: v.dims };
    else if (chain.y.name !== name || padded(chain.y.dims) !== padded(v.dims)) return false;
    chain.steps.push(offset === 0 ? [code, OPERAND.y, 0, 0] : [code, OPERAND.yAt, offset, 0]);
  }
  return true;
}

// Whether op `info`, which reads the chain's output `t`, extends it (and
// does so, by one step).
function extend(chain, info, t) {
  if (chain.steps.length >= MAX_STEPS || padded(info.out.dims) !== padded(chain.dims)) return false;
  if (info.kind === 'unary') {
    chain.steps.push([UNARY_BASE + info.op, 0, info.alpha, info.beta]);
  } else {
    if (info.a.name === t && info.b.name === t) return false;
    const reversed = info.b.name === t;
    const saved = { y: chain.y, length: chain.steps.length };
    if (!add(chain, info, reversed ? info.a : info.b, reversed)) {
      chain.y = saved.y;
      chain.steps.length = saved.length;
      return false;
    }
  }
  chain.outs.push(info.out.name);
  return true;
}

// The operands of a tagged op that name values or tensors (not scalars).
function reads(info) {
  const operands = info.kind === 'unary' ? [info.x] : [info.a, info.b];
  return operands.filter((o) => o.scalar === undefined).map((o) => o.name);
}

// body with its chains fused. `tags`: op -> {kind: 'unary', op, alpha,
// beta, x, out} | {kind: 'binary', op, a, b, out}, operands {name, dims,
// scalar?}; `kept`: names read outside the body (graph outputs);
// `chainDispatch(chain, out, counted)`: the chain_f32 dispatch of a chain,
// or with `counted` its chain_health_f32 dispatch, whose last binding is
// the counts; `countHealth`: traces are in 'health' mode and may report
// from counts.
function fuse(body, tags, kept, chainDispatch, countHealth = false) {
  const readers = new Map();
  const read = (name) => readers.set(name, (readers.get(name) ?? 0) + 1);
  const traced = new Set();
  for (const op of body) {
    const info = tags.get(op);
    if (info !== undefined) reads(info).forEach(read);
    else if (op.op === 'dispatch') op.bindings.forEach(read);
    else if (op.op === 'copy') read(op.source);
    else if (op.op === 'trace') op.values.forEach(countHealth ? (name) => traced.add(name) : read);
  }
  const out = [];
  const open = new Map(); // a chain's output name -> {chain, at: its index in out}
  for (const op of body) {
    const info = tags.get(op);
    if (info === undefined) {
      out.push(op);
      continue;
    }
    const from = reads(info).find((name) => open.has(name) && readers.get(name) === 1 && !kept.has(name));
    const link = from === undefined ? undefined : open.get(from);
    if (link !== undefined && extend(link.chain, info, from)) {
      open.delete(from);
      out[link.at] = null;
      out.push(op);
      open.set(info.out.name, { ...link, at: out.length - 1 });
      continue;
    }
    out.push(op);
    const chain = begin(info);
    if (chain !== null) open.set(info.out.name, { chain, at: out.length - 1 });
  }
  const counted = new Map(); // a traced step's output -> {dispatch, step}
  for (const [name, { chain, at }] of open) {
    const traces = chain.outs.some((o) => traced.has(o));
    if (chain.steps.length === 1 && !traces) continue;
    out[at] = chainDispatch(chain, name, traces);
    chain.outs.forEach((o, step) => traced.has(o) && counted.set(o, { dispatch: out[at], step }));
  }
  return placeTraces(out.filter((op) => op !== null), counted);
}

// `body` with each trace of counted values reporting from the counts, and
// placed after their dispatch: no earlier than it was, with every trace
// still in its order.
function placeTraces(body, counted) {
  const done = new Set();
  const waiting = [];
  const result = [];
  const flush = () => {
    while (waiting.length > 0 && waiting[0].values.every((v) => !counted.has(v) || done.has(counted.get(v).dispatch))) {
      result.push(waiting.shift());
    }
  };
  for (const op of body) {
    if (op.op !== 'trace') {
      result.push(op);
      done.add(op);
    } else if (!op.values.some((v) => counted.has(v))) {
      waiting.push(op);
    } else if (op.values.every((v) => counted.has(v))) {
      const counts = op.values.map((v) => ({ value: counted.get(v).dispatch.bindings[3], step: counted.get(v).step }));
      waiting.push({ ...op, mode: 'health', counts });
    } else {
      throw new Error(`trace '${op.key}' reports both counted and materialised values`);
    }
    flush();
  }
  return result;
}

module.exports = { fuse };

'use strict';
// Chains of elementwise ops made one chain_f32 dispatch each (docs/onnx.md,
// "Speed"; docs/kernels.md): an op whose output only the next op of the
// chain reads is not run on its own. Bits are unchanged: chain_f32 rounds
// each step as its own kernel does. The converter tags its unary_f32 and
// binary_f32 dispatches with what they compute; fuse() rewrites the body.

const MAX_STEPS = 6;
const UNARY_BASE = 0;
const T_OP_V = 16; // t op v
const V_OP_T = 32; // v op t
const OPERAND = { x: 0, y: 1, alpha: 2 };

const squeezed = (dims) => dims.filter((d) => d !== 1).join(',');
const padded = (dims) => [...new Array(6 - dims.length).fill(1), ...dims].join(',');

// A chain begun by `info` (the op's tag), or null when no operand of the
// op's own shape can be its x.
function begin(info) {
  if (info.kind === 'unary') {
    if (squeezed(info.x.dims) !== squeezed(info.out.dims)) return null;
    return { x: info.x, y: null, dims: info.out.dims, steps: [[UNARY_BASE + info.op, 0, info.alpha, info.beta]] };
  }
  const own = (o) => o.scalar === undefined && squeezed(o.dims) === squeezed(info.out.dims);
  const reversed = !own(info.a);
  if (reversed && !own(info.b)) return null;
  const x = reversed ? info.b : info.a;
  const chain = { x, y: null, dims: info.out.dims, steps: [] };
  const other = reversed ? info.a : info.b;
  if (other.name === x.name && other.scalar === undefined) {
    chain.steps.push([(reversed ? V_OP_T : T_OP_V) + info.op, OPERAND.x, 0, 0]);
    return chain;
  }
  return add(chain, info, other, reversed) ? chain : null;
}

// Adds the step `t op v` (or `v op t` when `reversed`) with `v` the other
// operand; false when v is none of x, the chain's y (or a first y that
// broadcasts to it) or a scalar.
function add(chain, info, v, reversed) {
  const code = (reversed ? V_OP_T : T_OP_V) + info.op;
  if (v.scalar !== undefined) {
    chain.steps.push([code, OPERAND.alpha, v.scalar, 0]);
  } else if (v.name === chain.x.name) {
    chain.steps.push([code, OPERAND.x, 0, 0]);
  } else if (chain.y === null || chain.y.name === v.name) {
    chain.y = v;
    chain.steps.push([code, OPERAND.y, 0, 0]);
  } else {
    return false;
  }
  return true;
}

// Whether op `info`, which reads the chain's output `t`, extends it (and
// does so).
function extend(chain, info, t) {
  if (chain.steps.length >= MAX_STEPS || padded(info.out.dims) !== padded(chain.dims)) return false;
  if (info.kind === 'unary') {
    chain.steps.push([UNARY_BASE + info.op, 0, info.alpha, info.beta]);
    return true;
  }
  if (info.a.name === t && info.b.name === t) return false;
  const reversed = info.b.name === t;
  const saved = { y: chain.y, length: chain.steps.length };
  if (add(chain, info, reversed ? info.a : info.b, reversed)) return true;
  chain.y = saved.y;
  chain.steps.length = saved.length;
  return false;
}

// The operands of a tagged op that name values or tensors (not scalars).
function reads(info) {
  const operands = info.kind === 'unary' ? [info.x] : [info.a, info.b];
  return operands.filter((o) => o.scalar === undefined).map((o) => o.name);
}

// body with its chains fused. `tags`: op -> {kind: 'unary', op, alpha,
// beta, x, out} | {kind: 'binary', op, a, b, out}, operands {name, dims,
// scalar?}; `kept`: names read outside the body (graph outputs);
// `chainDispatch(chain, out)`: the chain_f32 dispatch of a chain.
function fuse(body, tags, kept, chainDispatch) {
  const readers = new Map();
  const read = (name) => readers.set(name, (readers.get(name) ?? 0) + 1);
  for (const op of body) {
    const info = tags.get(op);
    if (info !== undefined) reads(info).forEach(read);
    else if (op.op === 'dispatch') op.bindings.forEach(read);
    else if (op.op === 'copy') read(op.source);
    else if (op.op === 'trace') op.values.forEach(read);
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
  for (const [name, { chain, at }] of open) {
    if (chain.steps.length > 1) out[at] = chainDispatch(chain, name);
  }
  return out.filter((op) => op !== null);
}

module.exports = { fuse };

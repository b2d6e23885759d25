'use strict';
// halrt.compare(module, inputs, options): runs one function on several
// devices with every dispatch traced, and reports where they first disagree
// beyond tolerance (docs/compare.md has the rules).
//
// Runs on the JavaScript thread over the public API: each device in turn
// gets its own Device, HalModule (a sink that keeps every trace), Context
// and Function, all closed before the promise settles, as are the Instance
// and Module it makes. The devices run one after the other, never at once.

const { Instance, HalModule, Module, Context } = require('./binding');
const { HalrtError, invalid: invalidArgument } = require('./errors');
const { readOptions } = require('./args');
const half = require('./half');
const { isHostData, sameShape } = require('./host_data');
const { ModuleBuilder } = require('./module');
require('./invoke'); // fn.invoke of host data, {read}
const { isOnnxFile, moduleFromOnnx } = require('./onnx');

const DEFAULT_DEVICES = Object.freeze(['local-sync', 'local-task']);
const DEFAULTS = { rtol: 1e-5, atol: 1e-8, ulps: 0 };
const OPTIONS = ['function', 'devices', 'rtol', 'atol', 'ulps', 'shapes'];
const FLOATS = new Set(['f16', 'bf16', 'f32', 'f64']);
// The sign bit of each float dtype's bits (f16 and bf16 data are bits).
const SIGN = { f16: 0x8000, bf16: 0x8000, f32: 0x80000000 };

// halrt.compare's errors name it first.
const invalid = (message, code) => invalidArgument(`halrt.compare: ${message}`, code);

// The tolerances of `options`, each checked; `integers` says whether atol
// or rtol was given (integer dtypes are exact otherwise).
function tolerances(options) {
  const result = { ...DEFAULTS, integers: options.atol !== undefined || options.rtol !== undefined };
  for (const name of ['rtol', 'atol', 'ulps']) {
    const value = options[name];
    if (value === undefined) continue;
    const ok = name === 'ulps' ? Number.isSafeInteger(value) && value >= 0 : typeof value === 'number' && value >= 0 && value < Infinity;
    if (!ok) {
      const rule = name === 'ulps' ? 'an integer in [0, 2^53 - 1]' : 'a non-negative finite number';
      throw invalid(`options.${name} must be ${rule} (got ${half.describe(value)})`);
    }
    result[name] = value;
  }
  return result;
}

function checkDevices(devices) {
  // Indexed, so that a hole reads as undefined (every() skips holes) and a
  // sparse Array fails at its first one, with nothing of its length built.
  const uris = () => {
    for (let i = 0; i < devices.length; ++i) if (typeof devices[i] !== 'string') return false;
    return true;
  };
  if (!Array.isArray(devices) || devices.length < 2 || !uris()) {
    throw invalid(`options.devices must be an Array of at least 2 device URIs (got ${half.describe(devices)})`);
  }
  return [...devices];
}

// The Module `target` names: a file path (a module file, or an ONNX model:
// every node traced, docs/onnx.md), a ModuleBuilder or a description object.
function loadModule(instance, target, shapes) {
  if (typeof target === 'string' && isOnnxFile(target)) {
    try {
      return moduleFromOnnx(Module, instance, target, { shapes, traceNodes: true });
    } catch (error) {
      throw invalid(error.message.replace(/^halrt\.load: /, ''), error.code);
    }
  }
  if (shapes !== undefined) throw invalid('options.shapes applies to ONNX models');
  if (typeof target === 'string') return Module.load(instance, target);
  if (target instanceof ModuleBuilder) return target.build(instance);
  // A description is a plain object, as JSON.parse makes one: Module.fromObject
  // would take a URL, a Map or a Date as the text JSON.stringify writes.
  if (target !== null && typeof target === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(target))) {
    return Module.fromObject(instance, target);
  }
  const hint = ArrayBuffer.isView(target) || target instanceof ArrayBuffer ? '; an ONNX model is compared from its file'
    : target instanceof URL ? '; a file URL is given as its path, url.fileURLToPath(module)' : '';
  throw invalid(`module must be a module file path, a ModuleBuilder or a module description object (got ${half.describe(target)}${hint})`);
}

function chooseFunction(module, requested) {
  const names = module.functions.map((f) => f.name);
  const has = `module '${module.name}' has ${names.join(', ') || 'no functions'}`;
  if (requested === undefined) {
    if (names.length === 1) return module.functions[0];
    throw invalid(`options.function is required: ${has}`);
  }
  if (typeof requested !== 'string') throw invalid(`options.function must be a function name (got ${half.describe(requested)}): ${has}`);
  const signature = module.functions.find((f) => f.name === requested);
  if (!signature) throw invalid(`options.function ${half.describe(requested)}: ${has}`, 'NOT_FOUND');
  return signature;
}

// Host data only: a BufferView lives on one device.
function checkInputs(inputs) {
  const plain = inputs !== null && typeof inputs === 'object' && [Object.prototype, null].includes(Object.getPrototypeOf(inputs));
  if (!Array.isArray(inputs) && !plain) throw invalid(`inputs must be an Array or an object of host data (got ${half.describe(inputs)})`);
  // Indexed, so that a sparse Array fails at its first hole, with nothing of
  // its length built.
  const keys = Array.isArray(inputs) ? null : Object.keys(inputs);
  const count = keys ? keys.length : inputs.length;
  for (let i = 0; i < count; ++i) {
    const value = keys ? inputs[keys[i]] : inputs[i];
    if (!isHostData(value)) {
      const where = keys ? `inputs.${keys[i]}` : `inputs[${i}]`;
      const got = keys || i in inputs ? half.describe(value) : 'a hole';
      throw invalid(`${where} must be host data (a TypedArray, an Array, bytes or a number; got ${got})`);
    }
  }
}

// Runs `signature` of `module` on device `uri`: its traces in delivery
// (program) order, the outputs last under the key 'outputs'.
async function traceOn(instance, module, signature, uri, index, inputs, traceDispatches) {
  const owned = [];
  try {
    let device;
    try {
      device = instance.createDevice(uri);
    } catch (error) {
      throw invalid(`options.devices[${index}] '${uri}': ${error.message.replace(/^instance\.createDevice: /, '')}`, error.code);
    }
    owned.push(device);
    const traces = [];
    let outputs;
    try {
      const hal = new HalModule(instance, device, {
        // Trace ops in 'summary' or 'health' mode carry no elements to compare.
        debugSink: (key, tensors, info) => {
          if (info.mode === 'full') traces.push({ key, function: info.function, op: info.op, tensors });
        },
        traceDispatches,
      });
      owned.push(hal);
      const context = new Context(instance, [hal, module]);
      owned.push(context);
      const fn = context.lookupFunction(`${module.name}.${signature.name}`);
      owned.push(fn);
      outputs = await fn.invoke(inputs, { read: true });
    } catch (error) {
      // Linking (a module with no executable for this device) or invoking.
      throw new HalrtError(`halrt.compare: on ${uri}: ${error.message}`, error.code, { cause: error });
    }
    const tensors = signature.outputs.map(({ name, dtype, shape }, i) => ({ name, dtype, shape, data: outputs[i] }));
    traces.push({ key: 'outputs', function: `${module.name}.${signature.name}`, op: null, tensors });
    return traces;
  } finally {
    for (const object of owned.reverse()) object.close();
  }
}

// Element `i` of `data` as a number (f16/bf16 bits decoded; 64-bit integers stay BigInts).
function valueAt(data, dtype, i) {
  if (dtype === 'f16') return half.decode(half.F16, data[i]);
  if (dtype === 'bf16') return half.decode(half.BF16, data[i]);
  return data[i];
}

// The place of bits `b` (sign and magnitude) on the line of ordered
// integers, where neighbouring floats are 1 apart and +0 = -0 = 0.
function ordered(bits, sign) {
  return bits >= sign ? sign - bits : bits;
}

// ULP distance between elements `i` of `a` and `b`, in their dtype's format.
function ulpDistance(a, b, dtype, i) {
  if (dtype === 'f64') {
    const bits = (x) => new BigUint64Array(Float64Array.of(x).buffer)[0];
    const place = (x) => (x >= 2n ** 63n ? 2n ** 63n - x : x);
    const d = place(bits(a[i])) - place(bits(b[i]));
    return Number(d < 0n ? -d : d);
  }
  const bitsOf = dtype === 'f32' ? (data) => new Uint32Array(Float32Array.of(data[i]).buffer)[0] : (data) => data[i];
  return Math.abs(ordered(bitsOf(a), SIGN[dtype]) - ordered(bitsOf(b), SIGN[dtype]));
}

// How element `i` of `a` (a device's) differs from that of `ref` (the
// reference device's): {a, b, abs, rel, ulps, close}.
function distance(a, ref, dtype, i, tol) {
  const x = valueAt(a, dtype, i);
  const y = valueAt(ref, dtype, i);
  if (!FLOATS.has(dtype)) {
    const magnitude = Math.abs(Number(y));
    const bound = tol.atol + tol.rtol * magnitude; // Infinity for a huge rtol: all within
    let d;
    let within;
    if (typeof x === 'bigint') {
      // Exactly, as BigInts: an integer distance is within the bound when
      // it is within its whole part.
      const exact = x > y ? x - y : y - x;
      d = Number(exact);
      within = bound === Infinity || exact <= BigInt(Math.floor(bound));
    } else {
      d = Math.abs(x - y);
      within = d <= bound;
    }
    const rel = d === 0 ? 0 : d / magnitude;
    return { a: x, b: y, abs: d, rel, ulps: null, close: d === 0 || (tol.integers && within) };
  }
  if (Number.isNaN(x) || Number.isNaN(y)) {
    const both = Number.isNaN(x) && Number.isNaN(y);
    return { a: x, b: y, abs: both ? 0 : NaN, rel: both ? 0 : NaN, ulps: both ? 0 : NaN, close: both };
  }
  if (x === y) return { a: x, b: y, abs: 0, rel: 0, ulps: 0, close: true };
  const abs = Math.abs(x - y);
  const ulps = ulpDistance(a, ref, dtype, i);
  // An infinity is close only to itself (equal above).
  const finite = Number.isFinite(x) && Number.isFinite(y);
  const close = finite && (abs <= tol.atol + tol.rtol * Math.abs(y) || ulps <= tol.ulps);
  // Anything else against an infinite reference is infinitely far (not Infinity / Infinity = NaN).
  const rel = Number.isFinite(y) || Number.isNaN(abs) ? abs / Math.abs(y) : Infinity;
  return { a: x, b: y, abs, rel, ulps, close };
}

// [i, j, ...] of flat index `flat` in `shape` (row-major).
function unravel(flat, shape) {
  const index = new Array(shape.length);
  for (let d = shape.length - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat = Math.floor(flat / shape[d]);
  }
  return index;
}

// The kernel of a traceDispatches key 'function:op:kernel', null for a trace op's.
function kernelOf(trace) {
  if (trace.op === null) return null;
  const prefix = `${trace.function.slice(trace.function.indexOf('.') + 1)}:${trace.op}:`;
  return trace.key.startsWith(prefix) ? trace.key.slice(prefix.length) : null;
}

// How trace `t` (of device `other`) differs in kind from `r` (the
// reference's): a sentence naming what differs, or null when they match.
function structuralDifference(r, t, names) {
  const [refName, otherName] = names;
  if (r.key !== t.key) return `key '${r.key}' on ${refName} but '${t.key}' on ${otherName}`;
  if (r.tensors.length !== t.tensors.length) {
    return `${r.tensors.length} tensors on ${refName} but ${t.tensors.length} on ${otherName}`;
  }
  for (let k = 0; k < r.tensors.length; ++k) {
    const [x, y] = [r.tensors[k], t.tensors[k]];
    for (const field of ['name', 'dtype']) {
      if (x[field] !== y[field]) return `tensor ${k}: ${field} ${x[field]} on ${refName} but ${y[field]} on ${otherName}`;
    }
    if (!sameShape(x.shape, y.shape)) return `tensor ${x.name}: shape [${x.shape}] on ${refName} but [${y.shape}] on ${otherName}`;
  }
  return null;
}

function place(trace) {
  return { key: trace.key, function: trace.function, op: trace.op, kernel: kernelOf(trace) };
}

// Compares the traces of device `other` with those of the reference:
// {first, summary} (first: the first divergence, in program order, or null).
function compareTraces(refTraces, traces, names, tol) {
  const summary = new Map();
  let first = null;
  const note = (position, divergence) => {
    if (first === null) first = { position, devices: names, ...divergence };
  };
  const count = Math.min(refTraces.length, traces.length);
  for (let p = 0; p < count; ++p) {
    const [r, t] = [refTraces[p], traces[p]];
    const differs = structuralDifference(r, t, names);
    if (differs) {
      note(p, { what: 'structure', message: differs, ...place(r) });
      continue;
    }
    let entry = summary.get(r.key);
    if (!entry) {
      entry = { key: r.key, device: names[1], elements: 0, mismatches: 0, maxAbs: 0, maxRel: 0, maxUlps: null };
      summary.set(r.key, entry);
    }
    for (let k = 0; k < r.tensors.length; ++k) {
      const { name, dtype, shape, data } = r.tensors[k];
      const theirs = t.tensors[k].data;
      entry.elements += data.length;
      // ULPs over the float tensors of the key; null while it has none.
      if (FLOATS.has(dtype) && entry.maxUlps === null) entry.maxUlps = 0;
      for (let i = 0; i < data.length; ++i) {
        const d = distance(theirs, data, dtype, i, tol);
        // NaN distances (a NaN against a number) make the maximum NaN.
        entry.maxAbs = Number.isNaN(d.abs) || d.abs > entry.maxAbs ? d.abs : entry.maxAbs;
        entry.maxRel = Number.isNaN(d.rel) || d.rel > entry.maxRel ? d.rel : entry.maxRel;
        if (d.ulps !== null && (Number.isNaN(d.ulps) || d.ulps > entry.maxUlps)) entry.maxUlps = d.ulps;
        if (d.close) continue;
        entry.mismatches += 1;
        note(p, {
          what: 'value',
          message: `${name}[${unravel(i, shape).join('][')}] is ${d.b} on ${names[0]} but ${d.a} on ${names[1]}`,
          ...place(r),
          tensor: name,
          dtype,
          index: unravel(i, shape),
          values: [d.b, d.a],
          abs: d.abs,
          rel: d.rel,
          ulps: d.ulps,
        });
      }
    }
  }
  if (refTraces.length !== traces.length) {
    const extra = (refTraces.length > traces.length ? refTraces : traces)[count];
    note(count, {
      what: 'count',
      message: `${refTraces.length} traces on ${names[0]} but ${traces.length} on ${names[1]}`,
      ...place(extra),
    });
  }
  return { first, summary: [...summary.values()] };
}

async function compare(target, inputs, given = {}) {
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw invalid(`options must be an object (got ${half.describe(given)})`);
  }
  const unknown = Object.keys(given).find((name) => !OPTIONS.includes(name));
  if (unknown !== undefined) throw invalid(`unknown option '${unknown}' (expected ${OPTIONS.join(', ')})`);
  const options = readOptions(given, OPTIONS, 'halrt.compare', 'options');
  const devices = checkDevices(options.devices ?? DEFAULT_DEVICES);
  const tol = tolerances(options);
  checkInputs(inputs);
  const instance = new Instance();
  let module;
  try {
    module = loadModule(instance, target, options.shapes);
    const signature = chooseFunction(module, options.function);
    // An ONNX model's nodes are traced by name; its dispatches need not be.
    const traceDispatches = !(typeof target === 'string' && isOnnxFile(target));
    const runs = [];
    for (let d = 0; d < devices.length; ++d) {
      runs.push(await traceOn(instance, module, signature, devices[d], d, inputs, traceDispatches));
    }
    let first = null;
    const summary = [];
    for (let d = 1; d < devices.length; ++d) {
      const result = compareTraces(runs[0], runs[d], [devices[0], devices[d]], tol);
      summary.push(...result.summary);
      if (result.first && (first === null || result.first.position < first.position)) first = result.first;
    }
    if (first) delete first.position;
    return { agree: first === null, devices, function: `${module.name}.${signature.name}`, first, summary };
  } finally {
    if (module) module.close();
    instance.close();
  }
}

// compareTraces is exported for test/compare.test.js's tests of the rules.
module.exports = { compare, compareTraces };

'use strict';
// `halrt devices`, `halrt run` and `halrt diff`: the API from the command line.
//
//   halrt devices
//   halrt --version
//   halrt run mlp.halrt.json --function main --input x=@x.npy --input w=[[1,2],[3,4]]
//       --device auto --trace stdio|npy:DIR|stats --profile trace.json --repeat N --output DIR
//   halrt diff mlp.halrt.json --devices local-sync,cuda --input ... --rtol R --atol A --ulps N
//
// Bad arguments and unreadable files print one line on stderr and exit 2,
// all checked before a device is made: inputs must match the function's
// dtypes and shapes exactly, and convert without loss. A failed run prints
// the error and exits 1, as does a diff whose devices diverge.

const fs = require('fs');
const path = require('path');
const { parseArgs } = require('util');
const halrt = require('./index');
const { LIMITS, kindOf, readRegularFile } = require('./files');
const npy = require('./npy');
const { toF16Bits: f16Bits, toBF16Bits: bf16Bits } = require('./half');
const { format, formatNumber } = require('./format');
const { roundDecimal } = require('./float_round');
const { isOnnxFile, moduleFromOnnx } = require('./onnx');

// A usage problem: one line on stderr, exit code 2.
class UsageError extends Error {}

function positiveInteger(value) {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 1) {
    throw new Error('must be a positive integer');
  }
  return number;
}

function nonNegativeInteger(value) {
  const number = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(number) || number < 0) {
    throw new Error('must be a non-negative integer');
  }
  return number;
}

function nonNegativeNumber(value) {
  const number = Number(value);
  if (value.trim() === '' || !(number >= 0 && number < Infinity)) {
    throw new Error('must be a non-negative finite number');
  }
  return number;
}

// "local-sync,cuda": at least two device URIs.
function deviceList(value) {
  const uris = value.split(',');
  if (uris.length < 2 || uris.some((uri) => uri === '')) {
    throw new Error('must be at least two comma-separated device URIs');
  }
  return uris;
}

// Each driver, its availability (or why not), and its device's properties.
function describeDevices(out) {
  const instance = new halrt.Instance();
  try {
    for (const { name, available, reason, nvrtc } of halrt.drivers()) {
      out.write(`${name}: ${available ? 'available' : `unavailable (${reason})`}\n`);
      if (nvrtc) {
        out.write(`  nvrtc: ${nvrtc.available ? `available (${nvrtc.version})` : `unavailable (${nvrtc.reason})`}\n`);
      }
      if (!available) continue;
      const device = instance.createDevice(name);
      const info = Object.entries(device.info)
        .filter(([, value]) => value !== null && value !== 0)
        .map(([key, value]) => `${key}=${Array.isArray(value) ? value.join('.') : value}`);
      out.write(`  ${info.join(' ')}\n`);
      device.close();
    }
  } finally {
    instance.close();
  }
}

// The integers each integer dtype holds, as BigInts: a value outside is an
// error, never wrapped.
const INTEGER_RANGES = {
  i8: [-(2n ** 7n), 2n ** 7n - 1n],
  u8: [0n, 2n ** 8n - 1n],
  i16: [-(2n ** 15n), 2n ** 15n - 1n],
  u16: [0n, 2n ** 16n - 1n],
  i32: [-(2n ** 31n), 2n ** 31n - 1n],
  u32: [0n, 2n ** 32n - 1n],
  i64: [-(2n ** 63n), 2n ** 63n - 1n],
  u64: [0n, 2n ** 64n - 1n],
};
const HALF_BITS = { f16: f16Bits, bf16: bf16Bits };
const FLOAT_DTYPES = ['f16', 'bf16', 'f32', 'f64'];

// The leaves of JSON text made only of arrays, numbers and booleans, as
// written, in the order JSON.parse visits them.
const JSON_LEAF = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false/g;

// The integer JSON number literal `literal` stands for, as a BigInt, read
// exactly from its digits (`1e18` and `2.50e1` are integers, `1.0000000000000001`
// and `1e-400` are not); undefined when it is not an integer or has more
// digits than any integer dtype holds.
function exactInteger(literal) {
  const [, sign, whole, fraction = '', exponent = '0'] = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  const digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return 0n;
  const significant = digits.replace(/0+$/, '');
  // The value is significant × 10^scale, with no trailing zeros.
  const scale = Number(exponent) - fraction.length + (digits.length - significant.length);
  if (scale < 0 || significant.length + scale > 20) return undefined;
  return BigInt(`${sign}${significant}`) * 10n ** BigInt(scale);
}

// JSON value `value` (its text `literal`) at `where` as an element of `dtype`:
// a number, a BigInt for 64-bit integers, or the bits of an f16/bf16
// rounded to nearest even. Integers are read exactly from the literal's
// digits. Anything that does not convert exactly (1.7 or 300 for a u8, 2^64
// for an i64) throws a UsageError naming `where`.
function jsonElement(value, literal, dtype, where) {
  const bad = (rule) => new UsageError(`${where} = ${literal}: ${dtype} takes ${rule}`);
  if (dtype === 'bool') {
    const number = typeof value === 'number' ? exactInteger(literal) : undefined;
    if (value === true || number === 1n) return 1;
    if (value === false || number === 0n) return 0;
    throw bad('true, false, 0 or 1');
  }
  if (typeof value !== 'number') throw bad('numbers');
  const range = INTEGER_RANGES[dtype];
  if (range === undefined) {
    // Rounded once, from the literal (JSON.parse's double rounds first).
    const exact = roundDecimal(literal, dtype);
    const stored = HALF_BITS[dtype] ? HALF_BITS[dtype](exact) : exact;
    // JSON has no Infinity: one here is an overflow, said once per element.
    const infinite = HALF_BITS[dtype] ? (stored & 0x7fff) === (dtype === 'f16' ? 0x7c00 : 0x7f80) : !Number.isFinite(stored);
    if (infinite) {
      process.stderr.write(`halrt: warning: ${where} = ${literal} is beyond the range of ${dtype} and becomes ${exact < 0 ? '-' : ''}Infinity\n`);
    }
    return stored;
  }
  const rule = `integers from ${range[0]} to ${range[1]}`;
  const integer = exactInteger(literal);
  if (integer === undefined || integer < range[0] || integer > range[1]) throw bad(rule);
  return range[1] > 2n ** 32n ? integer : Number(integer);
}

// The elements of JSON text `text` for input `declared`: nested arrays
// exactly of its shape (a bare number for shape []), each converted by
// jsonElement. `where` strings look like x[1][2].
function jsonInput(declared, text) {
  const { name, dtype, shape } = declared;
  let json;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`'${text}' is neither @FILE.npy nor JSON (${error.message})`);
  }
  const leaves = [];
  const walk = (node, depth, where) => {
    if (depth === shape.length) {
      if (typeof node !== 'number' && typeof node !== 'boolean') {
        throw new UsageError(`${where} is ${JSON.stringify(node)}; expected a number (shape [${shape}])`);
      }
      leaves.push([node, where]);
      return;
    }
    if (!Array.isArray(node) || node.length !== shape[depth]) {
      const got = Array.isArray(node) ? `an array of ${node.length}` : JSON.stringify(node);
      throw new UsageError(`${where} is ${got}; expected an array of ${shape[depth]} (shape [${shape}])`);
    }
    node.forEach((child, i) => walk(child, depth + 1, `${where}[${i}]`));
  };
  walk(json, 0, name);
  const literals = text.match(JSON_LEAF) ?? [];
  const data = new npy.ARRAYS[dtype](leaves.length);
  leaves.forEach(([value, where], i) => {
    data[i] = jsonElement(value, literals[i], dtype, where);
  });
  return data;
}

// The data of .npy file `file` for input `declared`, named `flag` in errors:
// its dtype and shape exactly (bf16 inputs take the u16 raw bits the npy
// sink writes), bool bytes 0 or 1.
function npyInput(declared, file, flag) {
  let parsed;
  try {
    parsed = npy.parse(readRegularFile(file, { caller: flag, maxBytes: LIMITS.npyInput, what: 'an .npy input' }), file);
  } catch (error) {
    throw new UsageError(error.message.startsWith(flag) ? error.message : `${flag}: ${error.message}`);
  }
  const { dtype, shape, data } = parsed;
  if (dtype !== declared.dtype && !(declared.dtype === 'bf16' && dtype === 'u16')) {
    throw new UsageError(`${flag}: ${file}: expected ${declared.dtype}, got ${dtype}`);
  }
  if (shape.length !== declared.shape.length || shape.some((d, i) => d !== declared.shape[i])) {
    throw new UsageError(`${flag}: ${file}: expected shape [${declared.shape}], got [${shape}]`);
  }
  if (dtype === 'bool') {
    const bad = data.findIndex((v) => v > 1);
    if (bad >= 0) throw new UsageError(`${flag}: ${file}: element ${bad} is ${data[bad]}; bool takes 0 or 1`);
  }
  return data;
}

// Each input of `signature` from the --input specs (name=@file.npy or
// name=JSON): [{declared, data}] in signature order. Every name exactly once.
function parseInputs(specs, signature) {
  const given = new Map();
  for (const spec of specs) {
    const equals = spec.indexOf('=');
    if (equals <= 0) throw new UsageError(`--input '${spec}': expected NAME=@FILE.npy or NAME=JSON`);
    const name = spec.slice(0, equals);
    if (!signature.inputs.some((input) => input.name === name)) {
      const names = signature.inputs.map((input) => input.name).join(', ') || 'none';
      throw new UsageError(`--input '${name}': function '${signature.name}' has no input '${name}' (inputs: ${names})`);
    }
    if (given.has(name)) throw new UsageError(`--input '${name}' is given twice`);
    given.set(name, spec.slice(equals + 1));
  }
  const inputs = signature.inputs.filter((declared) => given.has(declared.name)).map((declared) => {
    const value = given.get(declared.name);
    const flag = `--input '${declared.name}'`;
    if (value.startsWith('@')) return { declared, data: npyInput(declared, value.slice(1), flag) };
    try {
      return { declared, data: jsonInput(declared, value) };
    } catch (error) {
      throw new UsageError(`${flag}: ${error.message}`);
    }
  });
  const missing = signature.inputs.filter((declared) => !given.has(declared.name));
  if (missing.length) throw new UsageError(`missing --input for ${missing.map((d) => d.name).join(', ')}`);
  return inputs;
}

// Writes `bytes` to `target`, replacing a regular file there but never
// following a symlink at that name (ELOOP) nor blocking on a FIFO (ENXIO).
function writeOutput(target, bytes) {
  const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
  let fd;
  try {
    fd = fs.openSync(target, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0o644);
    if (!fs.fstatSync(fd).isFile()) throw new Error('not a regular file');
    fs.writeFileSync(fd, bytes);
  } catch (error) {
    throw new UsageError(`--output: cannot write '${target}': ${error.message}`);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

// Makes directory `dir` (parents included) unless it exists, and checks
// that files can be made in it; `flag` names it in errors.
function prepareDirectory(dir, flag, created) {
  try {
    const stats = fs.statSync(dir, { throwIfNoEntry: false });
    if (stats && !stats.isDirectory()) throw new Error(`it is ${kindOf(stats)}, not a directory`);
    if (!stats) {
      // Parents first, one by one: Node's recursive mkdirSync loops forever
      // under /proc.
      const missing = [];
      for (let d = path.resolve(dir); !fs.existsSync(d); d = path.dirname(d)) missing.push(d);
      for (const d of missing.reverse()) {
        fs.mkdirSync(d);
        created.push(d);
      }
    }
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (error) {
    throw new UsageError(`${flag}: cannot write into '${dir}': ${error.message}`);
  }
}

// The files --output DIR will hold, checked before the run: each output
// name a file name of its own in DIR (value names may hold '/' and '..';
// distinct names then give distinct files), DIR a writable directory, and
// each DIR/<name>.npy either absent or a writable regular file (which is
// replaced).
function outputTargets(dir, signature, created) {
  for (const { name } of signature.outputs) {
    const why = name.includes('/') ? "has a '/'" : name === '.' || name === '..' ? `is '${name}'` : null;
    if (why) throw new UsageError(`--output: output '${name}' cannot be written as a file in '${dir}': its name ${why}`);
  }
  prepareDirectory(dir, '--output', created);
  return signature.outputs.map(({ name }) => {
    const target = path.join(dir, `${name}.npy`);
    const stats = fs.lstatSync(target, { throwIfNoEntry: false });
    if (stats && !stats.isFile()) throw new UsageError(`--output: '${target}' exists and is ${kindOf(stats)}, not a regular file`);
    try {
      if (stats) fs.accessSync(target, fs.constants.W_OK);
    } catch (error) {
      throw new UsageError(`--output: cannot write '${target}': ${error.message}`);
    }
    return target;
  });
}

// The --trace npy:DIR folder and the --profile file, checked before a device
// is made (the profile opened without truncating it); what they make on
// disk is added to `created`.
function checkSinkPaths({ trace, profile }, created) {
  if (trace !== undefined && trace.startsWith('npy:') && trace.length > 4) {
    prepareDirectory(trace.slice(4), `--trace '${trace}'`, created);
  } else if (trace !== undefined && trace !== 'stdio' && trace !== 'stats') {
    throw new UsageError(`--trace '${trace}': expected stdio, stats or npy:DIR`);
  }
  if (profile !== undefined) {
    // As for --output files: an existing profile must be a regular file, not
    // a symlink (dangling or not), a FIFO or a device, and nothing blocks.
    // O_EXCL when it was absent: what a stopped run removes, it made.
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
    let fd;
    try {
      const stats = fs.lstatSync(profile, { throwIfNoEntry: false });
      if (stats && !stats.isFile()) throw new Error(`it exists and is ${kindOf(stats)}, not a regular file`);
      fd = fs.openSync(profile, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | (stats ? 0 : O_EXCL), 0o644);
      if (!stats) created.push(profile);
      if (!fs.fstatSync(fd).isFile()) throw new Error('not a regular file');
    } catch (error) {
      throw new UsageError(`--profile '${profile}': cannot open '${profile}': ${error.message}`);
    } finally {
      if (fd !== undefined) fs.closeSync(fd);
    }
  }
}

// The sinks of --trace and --profile (paths checked by checkSinkPaths).
function makeSinks({ trace, profile }) {
  const sinks = [];
  if (trace === 'stdio') {
    sinks.push(halrt.sinks.stdio());
  } else if (trace === 'stats') {
    sinks.push(halrt.sinks.stats((key, stats) => {
      for (const s of stats) {
        // min and max are elements, written as their dtype's; the mean is a double.
        const element = (x) => formatNumber(x, FLOAT_DTYPES.includes(s.dtype) ? s.dtype : 'f64');
        process.stdout.write(
          `${key} ${s.name}: min=${element(s.min)} max=${element(s.max)} mean=${formatNumber(s.mean, 'f64')} ` +
            `nan=${s.nanCount} inf=${s.infCount}\n`,
        );
      }
    }));
  } else if (trace !== undefined) {
    sinks.push(halrt.sinks.npy(trace.slice(4)));
  }
  if (profile !== undefined) {
    try {
      sinks.push(halrt.sinks.chromeTrace(profile));
    } catch (error) {
      throw new UsageError(`--profile '${profile}': ${error.message}`);
    }
  }
  return sinks;
}

// "main: 10 calls, min 0.101 ms, median 0.120 ms, max 0.310 ms"
function timingSummary(name, times) {
  const sorted = [...times].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  const ms = (t) => `${t.toFixed(3)} ms`;
  return `${name}: ${times.length} calls, min ${ms(sorted[0])}, median ${ms(median)}, max ${ms(sorted[sorted.length - 1])}`;
}

function chooseFunction(module, requested) {
  const names = module.functions.map((f) => f.name);
  const name = requested ?? (names.length === 1 ? names[0] : undefined);
  if (name === undefined) throw new UsageError(`--function is required: the module has ${names.join(', ') || 'no functions'}`);
  const signature = module.functions.find((f) => f.name === name);
  if (!signature) throw new UsageError(`--function '${name}': module '${module.name}' has no function '${name}'; it has ${names.join(', ') || 'none'}`);
  return signature;
}

// `probs: 4x3xf32=[[...] ...]`, as the stdio sink prints a traced tensor.
function formatOutput(name, view, data) {
  return `${name}: ${[...view.shape, view.dtype].join('x')}=${format(data, view)}`;
}

// A run stopped by a bad argument (the device URI, checked after the paths)
// removes the folders and files it made: exit 2 leaves nothing behind.
function removeCreated(created) {
  for (const made of created.reverse()) {
    try {
      if (fs.lstatSync(made).isDirectory()) fs.rmdirSync(made);
      else fs.unlinkSync(made);
    } catch {
      // No longer empty, or gone: left as it is.
    }
  }
}

// --shape NAME=1,3,48,192 (repeatable) as {NAME: [1, 3, 48, 192]}, or
// undefined when none is given.
function parseShapes(specs) {
  if (specs === undefined || specs.length === 0) return undefined;
  const shapes = {};
  for (const spec of specs) {
    const equals = spec.lastIndexOf('=');
    const dims = spec.slice(equals + 1).split(',').map((d) => (/^\d+$/.test(d) ? Number(d) : NaN));
    if (equals <= 0 || dims.some((d) => !Number.isSafeInteger(d))) {
      throw new UsageError(`--shape '${spec}': expected NAME=D0,D1,... (non-negative integers)`);
    }
    const name = spec.slice(0, equals);
    if (Object.hasOwn(shapes, name)) throw new UsageError(`--shape '${name}' is given twice`);
    Object.defineProperty(shapes, name, { value: dims, enumerable: true });
  }
  return shapes;
}

// The Module in `file`: a module file, or an ONNX model (every node traced
// when `traceNodes`); a file that does not load is a usage error.
function loadModuleFile(instance, file, options, traceNodes = false) {
  const shapes = parseShapes(options.shape);
  try {
    if (isOnnxFile(file)) return moduleFromOnnx(halrt.Module, instance, file, { shapes, traceNodes });
  } catch (error) {
    // The hint for a symbolic dimension, and options.shapes, as this
    // command takes them.
    const message = error.message.replace(/^halrt\.load: /, '').replace(/give its shape in options\.shapes \(e\.g\. \{ ("(?:[^"\\]|\\.)*"): \[([^\]]*)\] \}\)/,
      (_, name, dims) => `give its shape with --shape ${JSON.parse(name)}=${dims}`)
      .replace(/options\.shapes\['((?:[^'\\]|\\.)*)'\](\[\d+\])?/g, (_, name, index) => `--shape ${name}${index ? ` dimension ${index.slice(1, -1)}` : ''}`)
      .replace(/options\.shapes/g, '--shape');
    throw new UsageError(`${file}: ${message}`);
  }
  if (shapes !== undefined) throw new UsageError(`--shape applies to ONNX models, and ${file} is not one`);
  try {
    return halrt.Module.load(instance, file);
  } catch (error) {
    throw new UsageError(`${file}: ${error.message}`);
  }
}

async function run(file, options, out) {
  const instance = new halrt.Instance();
  const owned = [instance];
  const created = [];
  try {
    const module = loadModuleFile(instance, file, options, options.trace !== undefined);
    owned.push(module);
    const signature = chooseFunction(module, options.function);
    // Every argument and file is checked before a device is made.
    const inputs = parseInputs(options.input, signature);
    const targets = options.output === undefined ? undefined : outputTargets(options.output, signature, created);
    checkSinkPaths(options, created);
    let device;
    try {
      device = instance.createDevice(options.device);
    } catch (error) {
      throw new UsageError(`--device '${options.device}': ${error.message}`);
    }
    owned.push(device);
    created.length = 0;
    const sinks = makeSinks(options);
    owned.push(...sinks.filter((sink) => typeof sink.close === 'function'));
    const hal = new halrt.HalModule(instance, device, {
      debugSink: sinks.length > 1 ? halrt.sinks.tee(...sinks) : sinks[0],
      profile: options.profile !== undefined,
    });
    owned.push(hal);
    const context = new halrt.Context(instance, [hal, module]);
    owned.push(context);
    const fn = context.lookupFunction(`${module.name}.${signature.name}`);
    const views = inputs.map(({ declared, data }) => {
      const view = device.tensor(data, declared.shape, declared.dtype);
      owned.push(view);
      return view;
    });
    // With --repeat N > 1: a progress counter on a terminal, and one line
    // of per-call timings at the end on any stderr.
    const progress = options.repeat > 1 && process.stderr.isTTY;
    const times = [];
    let outputs = [];
    for (let i = 0; i < options.repeat; ++i) {
      for (const output of outputs) output.close();
      const start = performance.now();
      outputs = await fn.invoke(views);
      times.push(performance.now() - start);
      if (progress) process.stderr.write(`\r${signature.name}: ${i + 1}/${options.repeat}`);
    }
    if (progress) process.stderr.write('\n');
    if (options.repeat > 1) process.stderr.write(`${timingSummary(signature.name, times)}\n`);
    owned.push(...outputs);
    for (let i = 0; i < outputs.length; ++i) {
      const name = signature.outputs[i].name;
      const data = await outputs[i].read();
      if (targets) {
        const target = targets[i];
        writeOutput(target, npy.serialize({ dtype: outputs[i].dtype, shape: outputs[i].shape, data }));
        out.write(`wrote ${target}\n`);
      } else {
        out.write(`${formatOutput(name, outputs[i], data)}\n`);
      }
    }
  } finally {
    for (const object of owned.reverse()) object.close();
    removeCreated(created);
  }
}

// The module file's function and inputs, checked before any device is
// made: [signature, host data in input order].
function diffInputs(file, options) {
  const instance = new halrt.Instance();
  try {
    const module = loadModuleFile(instance, file, options);
    try {
      const signature = chooseFunction(module, options.function);
      return [signature, parseInputs(options.input, signature).map(({ data }) => data)];
    } finally {
      module.close();
    }
  } finally {
    instance.close();
  }
}

// A number of a diff's report: distances as f64, or '-' when there is none.
function distanceText(value) {
  return value === null || value === undefined ? '-' : formatNumber(value, 'f64');
}

// The first divergence, then a row per traced key and device.
function diffReport(result) {
  const lines = [`devices: ${result.devices.join(', ')}`, `function: ${result.function}`];
  const first = result.first;
  if (!first) {
    lines.push('devices agree');
  } else {
    const where = [`key ${first.key}`, `op ${first.op ?? '-'}`, `kernel ${first.kernel ?? '-'}`];
    lines.push(`first divergence: ${first.devices[1]} vs ${first.devices[0]} at ${where.join(', ')}`);
    if (first.what === 'value') {
      // In the dtype's own words (a bool is true/false; a byte that is
      // neither, which a kernel may write, as its number).
      const value = (x) => (FLOAT_DTYPES.includes(first.dtype) || (first.dtype === 'bool' && (x === 0 || x === 1))
        ? formatNumber(first.dtype === 'bool' ? x === 1 : x, first.dtype) : String(x));
      lines.push(`  ${first.tensor}[${first.index.join('][')}]: ${first.devices[0]} ${value(first.values[0])}, ` +
        `${first.devices[1]} ${value(first.values[1])}; abs ${distanceText(first.abs)}, rel ${distanceText(first.rel)}, ` +
        `ulps ${distanceText(first.ulps)}`);
    } else {
      lines.push(`  ${first.message}`);
    }
  }
  const header = ['key', 'device', 'elements', 'mismatches', 'max abs', 'max rel', 'max ulps'];
  const rows = result.summary.map((s) => [s.key, s.device, String(s.elements), String(s.mismatches),
    distanceText(s.maxAbs), distanceText(s.maxRel), distanceText(s.maxUlps)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  lines.push('', ...[header, ...rows].map((row) => row.map((cell, i) => cell.padEnd(widths[i])).join('  ').trimEnd()));
  return `${lines.join('\n')}\n`;
}

// Resolves with the exit code: 0 when the devices agree, 1 when they diverge.
async function diff(file, options, out) {
  const [signature, inputs] = diffInputs(file, options);
  const { devices, rtol, atol, ulps } = options;
  let result;
  try {
    result = await halrt.compare(file, inputs, { function: signature.name, devices, rtol, atol, ulps, shapes: parseShapes(options.shape) });
  } catch (error) {
    const device = /^halrt\.compare: options\.devices\[\d+\] /.exec(error.message);
    if (device) throw new UsageError(`--devices ${error.message.slice(device[0].length)}`);
    throw error;
  }
  out.write(diffReport(result));
  return result.agree ? 0 : 1;
}

// The commands, their arguments and options: what the parser accepts and
// what --help prints. An option with a `value` placeholder takes a string
// (checked and converted by `parse` if given); one without is a flag.
const HELP_OPTION = { short: 'h', help: 'display help for command' };
const FUNCTION_OPTION = { short: 'f', value: 'name', help: 'the function to run (default: the only one)' };
const INPUT_OPTION = { short: 'i', value: 'name=value', multiple: true, help: 'an input: NAME=@FILE.npy or NAME=JSON (once per input)' };
const SHAPE_OPTION = { short: 's', value: 'name=dims', multiple: true, help: "an ONNX model input's dimensions: NAME=1,3,48,192 (binds symbolic ones)" };
const PROGRAM_OPTIONS = { version: { help: 'print the version' }, help: HELP_OPTION };
const COMMANDS = {
  devices: {
    help: 'list drivers, their availability and device properties',
    arguments: [],
    options: { help: HELP_OPTION },
  },
  run: {
    help: 'run a function of a module file',
    arguments: [['module', 'a .halrt.json module file or an ONNX model']],
    options: {
      function: FUNCTION_OPTION,
      input: INPUT_OPTION,
      shape: SHAPE_OPTION,
      device: { short: 'd', value: 'uri', default: 'auto', help: 'device URI (default: auto)' },
      trace: { short: 't', value: 'sink', help: 'trace sink: stdio, stats or npy:DIR' },
      profile: { short: 'p', value: 'file', help: 'write a Chrome trace (Perfetto, chrome://tracing)' },
      repeat: { short: 'r', value: 'n', default: 1, parse: positiveInteger, help: 'invoke N times; N > 1 prints per-call timings on stderr (default: 1)' },
      output: { short: 'o', value: 'dir', help: 'write outputs as DIR/<name>.npy instead of printing them' },
      help: HELP_OPTION,
    },
  },
  diff: {
    help: 'run a function on several devices and report where their traces first differ (exit 1 when they do)',
    arguments: [['module', 'a .halrt.json module file or an ONNX model']],
    options: {
      function: FUNCTION_OPTION,
      input: INPUT_OPTION,
      shape: SHAPE_OPTION,
      devices: { short: 'd', value: 'uris', parse: deviceList, help: 'comma-separated device URIs, the first the reference (default: local-sync,local-task)' },
      rtol: { value: 'r', parse: nonNegativeNumber, help: 'relative tolerance (default: 1e-5)' },
      atol: { value: 'a', parse: nonNegativeNumber, help: 'absolute tolerance (default: 1e-8)' },
      ulps: { value: 'n', parse: nonNegativeInteger, help: 'float elements at most N ULPs apart also agree (default: 0)' },
      help: HELP_OPTION,
    },
  },
  help: {
    help: 'display help for command',
    arguments: [['[command]', 'the command to describe']],
    options: {},
  },
};

// "-f, --function <name>"
function flags(name, option) {
  return `${option.short ? `-${option.short}, ` : ''}--${name}${option.value ? ` <${option.value}>` : ''}`;
}

function table(rows) {
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}\n`).join('');
}

function optionRows(options) {
  return Object.entries(options).map(([name, option]) => [flags(name, option), option.help]);
}

// "run [options] <module>"
function usage(name) {
  const { arguments: args, options } = COMMANDS[name];
  const placeholders = args.map(([arg]) => (arg.startsWith('[') ? arg : `<${arg}>`));
  return [name, ...(Object.keys(options).length ? ['[options]'] : []), ...placeholders].join(' ');
}

// The usage of `halrt` (name undefined) or of one command.
function helpText(name) {
  if (name === undefined) {
    const commands = Object.keys(COMMANDS).map((command) => [usage(command), COMMANDS[command].help]);
    return 'Usage: halrt [options] [command]\n\nRun halrt modules and inspect devices\n\n' +
      `Options:\n${table(optionRows(PROGRAM_OPTIONS))}\nCommands:\n${table(commands)}`;
  }
  const { help, arguments: args, options } = COMMANDS[name];
  return `Usage: halrt ${usage(name)}\n\n${help}\n` +
    (args.length ? `\nArguments:\n${table(args.map(([arg, text]) => [arg.replace(/^\[(.*)\]$/, '$1'), text]))}` : '') +
    (Object.keys(options).length ? `\nOptions:\n${table(optionRows(options))}` : '');
}

// Parses `args` (util.parseArgs tokens) against `options` of COMMANDS' form:
// {values, positionals}, the defaults filled in. An unknown option, a
// missing or unexpected value, or a value `parse` rejects is a UsageError.
function parseOptions(args, options) {
  const config = {};
  for (const [name, option] of Object.entries(options)) {
    config[name] = { type: option.value ? 'string' : 'boolean', multiple: Boolean(option.multiple) };
    if (option.short) config[name].short = option.short;
  }
  const { tokens } = parseArgs({ args, options: config, strict: false, allowPositionals: true, tokens: true });
  const values = {};
  const positionals = [];
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value);
    if (token.kind !== 'option') continue;
    if (!Object.hasOwn(options, token.name)) throw new UsageError(`unknown option '${token.rawName}'`);
    const option = options[token.name];
    if (!option.value) {
      if (token.value !== undefined) throw new UsageError(`option '${token.rawName}' takes no value`);
      values[token.name] = true;
      continue;
    }
    if (token.value === undefined) throw new UsageError(`option '${flags(token.name, option)}' argument missing`);
    let value = token.value;
    if (option.parse) {
      try {
        value = option.parse(value);
      } catch (error) {
        throw new UsageError(`option '${flags(token.name, option)}' argument '${token.value}' is invalid: ${error.message}`);
      }
    }
    values[token.name] = option.multiple ? [...(values[token.name] ?? []), value] : value;
  }
  for (const [name, option] of Object.entries(options)) {
    if (values[name] === undefined && (option.default !== undefined || option.multiple)) {
      values[name] = option.default ?? [];
    }
  }
  return { values, positionals };
}

// `name`'s positional arguments: exactly those COMMANDS declares, an
// argument in [brackets] optional.
function checkArguments(name, positionals) {
  const declared = COMMANDS[name].arguments;
  const required = declared.filter(([arg]) => !arg.startsWith('['));
  if (positionals.length < required.length) {
    throw new UsageError(`missing required argument '${required[positionals.length][0]}'`);
  }
  if (positionals.length > declared.length) {
    const expected = `${declared.length} argument${declared.length === 1 ? '' : 's'}`;
    throw new UsageError(`too many arguments for '${name}': expected ${expected}, got ${positionals.length}`);
  }
}

function commandNamed(name) {
  if (!Object.hasOwn(COMMANDS, name)) throw new UsageError(`unknown command '${name}'`);
  return name;
}

// Runs the CLI on `argv` (process.argv shape); resolves with the exit code.
async function main(argv, out = process.stdout, err = process.stderr) {
  try {
    const args = argv.slice(2);
    // Options before the command are the program's (all flags, so the
    // first positional is the command).
    const first = parseArgs({ args, strict: false, allowPositionals: true, tokens: true })
      .tokens.find((token) => token.kind === 'positional');
    const at = first ? first.index : args.length;
    const program = parseOptions(args.slice(0, at), PROGRAM_OPTIONS).values;
    if (program.version) {
      out.write(`${require('../package.json').version}\n`);
      return 0;
    }
    if (program.help) {
      out.write(helpText());
      return 0;
    }
    if (!first) {
      err.write(helpText());
      return 2;
    }
    const name = commandNamed(first.value);
    const { values, positionals } = parseOptions(args.slice(at + 1), COMMANDS[name].options);
    if (values.help) {
      out.write(helpText(name));
      return 0;
    }
    checkArguments(name, positionals);
    if (name === 'help') {
      out.write(helpText(positionals.length ? commandNamed(positionals[0]) : undefined));
    } else if (name === 'devices') {
      describeDevices(out);
    } else if (name === 'diff') {
      return await diff(positionals[0], values, out);
    } else {
      await run(positionals[0], values, out);
    }
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      err.write(`halrt: ${error.message}\n`);
      return 2;
    }
    err.write(`halrt: ${error.code ? `${error.code}: ` : ''}${error.message}\n`);
    return 1;
  }
}

module.exports = { main };

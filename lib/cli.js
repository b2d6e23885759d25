'use strict';
// `halrt devices` and `halrt run`: the API from the command line.
//
//   halrt devices
//   halrt run mlp.halrt.json --function main --input x=@x.npy --input w=[[1,2],[3,4]]
//       --device auto --trace stdio|npy:DIR|stats --profile trace.json --repeat N --output DIR
//
// Bad arguments and unreadable files print one line on stderr and exit 2;
// a failed run prints the error and exits 1.

const fs = require('fs');
const path = require('path');
const { Command, CommanderError, InvalidArgumentError } = require('commander');
const halrt = require('./index');
const { LIMITS, readRegularFile } = require('./files');
const npy = require('./npy');

// A usage problem: one line on stderr, exit code 2.
class UsageError extends Error {}

function collect(value, previous) {
  return previous.concat([value]);
}

function positiveInteger(value) {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 1) {
    throw new InvalidArgumentError('must be a positive integer');
  }
  return number;
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

// What a JSON number may be for each integer dtype: exact, never wrapped.
// 64-bit values are limited to the integers a JSON number holds exactly.
const INTEGER_RANGES = {
  bool: [0, 1],
  i8: [-(2 ** 7), 2 ** 7 - 1],
  u8: [0, 2 ** 8 - 1],
  i16: [-(2 ** 15), 2 ** 15 - 1],
  u16: [0, 2 ** 16 - 1],
  i32: [-(2 ** 31), 2 ** 31 - 1],
  u32: [0, 2 ** 32 - 1],
  i64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  u64: [0, Number.MAX_SAFE_INTEGER],
};

// name=@file.npy or name=<JSON number or nested array>
function parseInput(spec, signature) {
  const equals = spec.indexOf('=');
  if (equals <= 0) throw new UsageError(`--input '${spec}': expected NAME=@FILE.npy or NAME=JSON`);
  const name = spec.slice(0, equals);
  const value = spec.slice(equals + 1);
  const declared = signature.inputs.find((input) => input.name === name);
  if (!declared) {
    const names = signature.inputs.map((input) => input.name).join(', ');
    throw new UsageError(`--input '${name}': function '${signature.name}' has no input '${name}' (inputs: ${names})`);
  }
  if (value.startsWith('@')) {
    const file = value.slice(1);
    let bytes;
    try {
      bytes = readRegularFile(file, { caller: `--input '${name}'`, maxBytes: LIMITS.npyInput, what: 'an .npy input' });
    } catch (error) {
      throw new UsageError(error.message);
    }
    try {
      return { declared, tensor: npy.parse(bytes, file) };
    } catch (error) {
      throw new UsageError(`--input '${name}': ${error.message}`);
    }
  }
  let json;
  try {
    json = JSON.parse(value);
  } catch (error) {
    throw new UsageError(`--input '${name}': '${value}' is neither @FILE.npy nor JSON (${error.message})`);
  }
  const values = [json].flat(Infinity);
  if (values.some((v) => typeof v !== 'number' && typeof v !== 'boolean')) {
    throw new UsageError(`--input '${name}': JSON values must be numbers`);
  }
  const range = INTEGER_RANGES[declared.dtype];
  if (range !== undefined) {
    const bad = values.findIndex((v) => !Number.isInteger(Number(v)) || Number(v) < range[0] || Number(v) > range[1]);
    if (bad >= 0) {
      throw new UsageError(
        `--input '${name}': value ${bad} (${values[bad]}) is not a ${declared.dtype} integer in [${range[0]}, ${range[1]}]`,
      );
    }
  }
  const ArrayType = npy.ARRAYS[declared.dtype];
  const big = ArrayType === BigInt64Array || ArrayType === BigUint64Array;
  const data = ArrayType.from(values, (v) => (big ? BigInt(Number(v)) : Number(v)));
  return { declared, tensor: { dtype: declared.dtype, shape: declared.shape, data } };
}

function checkInput({ declared, tensor }) {
  const count = declared.shape.reduce((a, b) => a * b, 1);
  if (tensor.dtype !== declared.dtype && !(declared.dtype === 'bf16' && tensor.dtype === 'u16')) {
    throw new UsageError(`--input '${declared.name}': expected ${declared.dtype}, got ${tensor.dtype}`);
  }
  if (tensor.data.length !== count) {
    throw new UsageError(
      `--input '${declared.name}': expected shape [${declared.shape}] (${count} elements), got ${tensor.data.length} elements`,
    );
  }
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

function makeSink(spec) {
  if (spec === undefined) return undefined;
  if (spec === 'stdio') return halrt.sinks.stdio();
  if (spec === 'stats') {
    return halrt.sinks.stats((key, stats) => {
      for (const s of stats) {
        process.stdout.write(
          `${key} ${s.name}: min=${s.min} max=${s.max} mean=${s.mean} nan=${s.nanCount} inf=${s.infCount}\n`,
        );
      }
    });
  }
  if (spec.startsWith('npy:') && spec.length > 4) return halrt.sinks.npy(spec.slice(4));
  throw new UsageError(`--trace '${spec}': expected stdio, stats or npy:DIR`);
}

function chooseFunction(module, requested) {
  const names = module.functions.map((f) => f.name);
  const name = requested ?? (names.length === 1 ? names[0] : undefined);
  if (name === undefined) throw new UsageError(`--function is required: the module has ${names.join(', ')}`);
  const signature = module.functions.find((f) => f.name === name);
  if (!signature) throw new UsageError(`--function '${name}': module '${module.name}' has ${names.join(', ') || 'no functions'}`);
  return signature;
}

function formatOutput(name, view, data) {
  const float = data instanceof Float32Array || data instanceof Float64Array;
  const show = (v) => (float ? String(Number(v.toPrecision(6))) : String(v));
  const values = Array.from(data.length > 32 ? data.subarray(0, 32) : data, show);
  const more = data.length > 32 ? ` ... (${data.length} elements)` : '';
  return `${name}: ${view.dtype}[${view.shape.join('x')}] = [${values.join(' ')}${more}]`;
}

async function run(file, options, out) {
  const instance = new halrt.Instance();
  const owned = [instance];
  try {
    let module;
    try {
      module = halrt.Module.load(instance, file);
    } catch (error) {
      throw new UsageError(`${file}: ${error.message}`);
    }
    owned.push(module);
    const signature = chooseFunction(module, options.function);
    const inputs = options.input.map((spec) => parseInput(spec, signature));
    for (const input of inputs) checkInput(input);
    const missing = signature.inputs.filter((d) => !inputs.some((i) => i.declared.name === d.name));
    if (missing.length) throw new UsageError(`missing --input for ${missing.map((d) => d.name).join(', ')}`);
    let device;
    try {
      device = instance.createDevice(options.device);
    } catch (error) {
      throw new UsageError(`--device '${options.device}': ${error.message}`);
    }
    owned.push(device);
    const sinks = [makeSink(options.trace)];
    if (options.profile) sinks.push(halrt.sinks.chromeTrace(options.profile));
    const present = sinks.filter((sink) => sink !== undefined);
    const hal = new halrt.HalModule(instance, device, {
      debugSink: present.length > 1 ? halrt.sinks.tee(...present) : present[0],
      profile: Boolean(options.profile),
    });
    owned.push(hal);
    const context = new halrt.Context(instance, [hal, module]);
    owned.push(context);
    const fn = context.lookupFunction(`${module.name}.${signature.name}`);
    const views = signature.inputs.map((declared) => {
      const { tensor } = inputs.find((i) => i.declared.name === declared.name);
      const view = device.tensor(tensor.data, declared.shape, declared.dtype);
      owned.push(view);
      return view;
    });
    const progress = options.repeat > 1 && process.stderr.isTTY;
    let outputs = [];
    for (let i = 0; i < options.repeat; ++i) {
      for (const output of outputs) output.close();
      outputs = await fn.invoke(views);
      if (progress) process.stderr.write(`\r${signature.name}: ${i + 1}/${options.repeat}`);
    }
    if (progress) process.stderr.write('\n');
    owned.push(...outputs);
    for (let i = 0; i < outputs.length; ++i) {
      const name = signature.outputs[i].name;
      const data = await outputs[i].read();
      if (options.output) {
        fs.mkdirSync(options.output, { recursive: true });
        const target = path.join(options.output, `${name}.npy`);
        writeOutput(target, npy.serialize({ dtype: outputs[i].dtype, shape: outputs[i].shape, data }));
        out.write(`wrote ${target}\n`);
      } else {
        out.write(`${formatOutput(name, outputs[i], data)}\n`);
      }
    }
  } finally {
    for (const object of owned.reverse()) object.close();
  }
}

// Runs the CLI on `argv` (process.argv shape); resolves with the exit code.
async function main(argv, out = process.stdout, err = process.stderr) {
  const program = new Command('halrt')
    .description('Run halrt modules and inspect devices')
    .exitOverride()
    .configureOutput({ writeOut: (text) => out.write(text), writeErr: (text) => err.write(text) });
  program.command('devices').description('list drivers, their availability and device properties')
    .action(() => describeDevices(out));
  program.command('run').description('run a function of a module file')
    .argument('<module>', 'a .halrt.json module file')
    .option('-f, --function <name>', 'the function to run (default: the only one)')
    .option('-i, --input <name=value>', 'an input: NAME=@FILE.npy or NAME=JSON (repeatable)', collect, [])
    .option('-d, --device <uri>', 'device URI', 'auto')
    .option('-t, --trace <sink>', 'trace sink: stdio, stats or npy:DIR')
    .option('-p, --profile <file>', 'write a Chrome trace (Perfetto, chrome://tracing)')
    .option('-r, --repeat <n>', 'invoke N times', positiveInteger, 1)
    .option('-o, --output <dir>', 'write outputs as DIR/<name>.npy instead of printing them')
    .action((file, options) => run(file, options, out));
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : 2;  // commander printed the message
    }
    if (error instanceof UsageError) {
      err.write(`halrt: ${error.message}\n`);
      return 2;
    }
    err.write(`halrt: ${error.code ? `${error.code}: ` : ''}${error.message}\n`);
    return 1;
  }
}

module.exports = { main };

'use strict';
// `halrt devices` and `halrt run`: the API from the command line.
//
//   halrt devices
//   halrt --version
//   halrt run mlp.halrt.json --function main --input x=@x.npy --input w=[[1,2],[3,4]]
//       --device auto --trace stdio|npy:DIR|stats --profile trace.json --repeat N --output DIR
//
// Bad arguments and unreadable files print one line on stderr and exit 2;
// a failed run prints the error and exits 1.

const fs = require('fs');
const path = require('path');
const { parseArgs } = require('util');
const halrt = require('./index');
const { LIMITS, readRegularFile } = require('./files');
const npy = require('./npy');

// A usage problem: one line on stderr, exit code 2.
class UsageError extends Error {}

function positiveInteger(value) {
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 1) {
    throw new Error('must be a positive integer');
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

// The commands, their arguments and options: what the parser accepts and
// what --help prints. An option with a `value` placeholder takes a string
// (checked and converted by `parse` if given); one without is a flag.
const HELP_OPTION = { short: 'h', help: 'display help for command' };
const PROGRAM_OPTIONS = { version: { help: 'print the version' }, help: HELP_OPTION };
const COMMANDS = {
  devices: {
    help: 'list drivers, their availability and device properties',
    arguments: [],
    options: { help: HELP_OPTION },
  },
  run: {
    help: 'run a function of a module file',
    arguments: [['module', 'a .halrt.json module file']],
    options: {
      function: { short: 'f', value: 'name', help: 'the function to run (default: the only one)' },
      input: { short: 'i', value: 'name=value', multiple: true, help: 'an input: NAME=@FILE.npy or NAME=JSON (repeatable)' },
      device: { short: 'd', value: 'uri', default: 'auto', help: 'device URI (default: auto)' },
      trace: { short: 't', value: 'sink', help: 'trace sink: stdio, stats or npy:DIR' },
      profile: { short: 'p', value: 'file', help: 'write a Chrome trace (Perfetto, chrome://tracing)' },
      repeat: { short: 'r', value: 'n', default: 1, parse: positiveInteger, help: 'invoke N times (default: 1)' },
      output: { short: 'o', value: 'dir', help: 'write outputs as DIR/<name>.npy instead of printing them' },
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

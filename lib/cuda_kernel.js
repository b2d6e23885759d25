'use strict';
// halrt.cudaKernel(source, name, {params, device, options}): one CUDA C++
// kernel as a function, as CuPy's RawKernel: `await k({grid, block}, ...args)`.
//
// The source is compiled (NVRTC, the kernel cache) and loaded when the
// kernel is made, so compile errors throw there. Each call runs a program
// of one dispatch: buffer arguments are its inputs (BufferViews on the
// kernel's device, or host data uploaded for the call), scalars its
// constants. A program is made per launch shape, argument dtypes and shapes
// and scalar values, and the last CACHED_PROGRAMS are kept, so a call that
// repeats one links nothing.

const util = require('util');
const { Instance, Device, BufferView, HalModule, Module, Context } = require('./binding');
require('./module'); // Module.fromObject
const { HalrtError, invalid } = require('./errors');
const { describe } = require('./half');
const { checkOptions, isPlainObject } = require('./args');
const { inspector } = require('./objects');

const PARAM_TYPES = ['buffer', 'u32', 'i32', 'f32', 'u64', 'i64', 'f64'];
const CACHED_PROGRAMS = 16;
const MODULE_NAME = 'cudaKernel';
const EXECUTABLE = 'kernel';

/** The module of `spec`'s executable and, when `dispatch` is given, a function `main` of that one dispatch. */
function moduleObject(spec, inputs = [], dispatch = null) {
  const entry = { expression: spec.name, params: spec.params };
  const cuda = { source: { text: spec.source }, entries: { [spec.entry]: entry } };
  if (spec.options.length > 0) cuda.options = spec.options;
  const functions = {};
  if (dispatch) functions.main = { inputs, outputs: [], body: [{ op: 'dispatch', kernel: `${EXECUTABLE}.${spec.entry}`, ...dispatch }] };
  return { format: 'halrt.module/1', name: MODULE_NAME, executables: { [EXECUTABLE]: { cuda } }, functions };
}

/** `error` with `prefix` in front of its message (HalrtErrors keep their code and cause). */
function prefixed(error, prefix, message = error.message) {
  if (!(error instanceof HalrtError)) return error;
  return new HalrtError(`${prefix}${message}`, error.code, { cause: error.cause });
}

/** An error of the call's module, naming the launch field or argument (`scalars[j]`: the argument of constant j) it came from. */
function callError(error, label, scalars) {
  const field = /^Module\.fromJson: functions\.main\.body\[0\]\.(workgroups|workgroupSize|constants)(?:\[(\d+)\])?/;
  const message = String(error?.message).replace(field, (all, name, index) => {
    if (name === 'constants') return `argument ${scalars[index] + 2}`;
    return `launch.${name === 'workgroups' ? 'grid' : 'block'}${index === undefined ? '' : `[${index}]`}`;
  });
  return prefixed(error, `${label}: `, message);
}

function checkSpec(source, name, options) {
  const method = 'halrt.cudaKernel';
  if (typeof source !== 'string') throw invalid(`${method}: source must be a string of CUDA C++ (got ${describe(source)})`);
  if (typeof name !== 'string' || name === '') {
    throw invalid(`${method}: name must be the kernel's name, or a C++ name expression such as 'scale<float>' (got ${describe(name)})`);
  }
  const { params, device = 'cuda', options: flags = [] } = checkOptions(options, `${method}: options`, ['params', 'device', 'options']);
  if (!Array.isArray(params)) {
    throw invalid(`${method}: options.params must be an Array of the kernel's parameter types, e.g. ['buffer', 'f32', 'u32'] (got ${describe(params)})`);
  }
  params.forEach((type, i) => {
    if (!PARAM_TYPES.includes(type)) throw invalid(`${method}: options.params[${i}] must be one of ${PARAM_TYPES.join(', ')} (got ${describe(type)})`);
  });
  if (!params.includes('buffer')) throw invalid(`${method}: options.params must have a 'buffer' (a kernel halrt launches takes at least one)`);
  if (!Array.isArray(flags)) throw invalid(`${method}: options.options must be an Array of NVRTC options (got ${describe(flags)})`);
  if (typeof device !== 'string' && !(device instanceof Device)) {
    throw invalid(`${method}: options.device must be a device URI such as 'cuda://0' or a Device (got ${describe(device)})`);
  }
  // A plain kernel name is the entry's name too; an expression (scale<float>) is dispatched as 'kernel'.
  const entry = /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : 'kernel';
  return { source, name, entry, params: [...params], options: [...flags], device };
}

/** The launch shape {grid, block} as the dispatch's workgroups and workgroupSize, plus read and signal. */
function checkLaunch(launch, label) {
  if (!isPlainObject(launch)) {
    throw invalid(`${label}: the first argument must be the launch {grid, block} (got ${describe(launch)})`);
  }
  const { grid, block = 1, read = false, signal } = checkOptions(launch, `${label}: launch`, ['grid', 'block', 'read', 'signal']);
  const dims = (value, what) => {
    const list = typeof value === 'number' ? [value] : value;
    if (!Array.isArray(list) || list.length < 1 || list.length > 3 || !list.every(Number.isInteger)) {
      throw invalid(`${label}: launch.${what} must be a positive integer or an Array of 1 to 3 of them (got ${describe(value)})`);
    }
    return list;
  };
  if (typeof read !== 'boolean') throw invalid(`${label}: launch.read must be a boolean (got ${describe(read)})`);
  return { workgroups: dims(grid, 'grid'), workgroupSize: dims(block, 'block'), read, signal };
}

/** A scalar argument as its dispatch constant: numbers as they are, BigInts as numbers (32-bit) or decimal text (64-bit). */
function constantOf(type, value, where) {
  if (typeof value === 'bigint') {
    if (type === 'u64' || type === 'i64') return String(value);
    if (type === 'u32' || type === 'i32') return Number(value);
  }
  if (typeof value !== 'number') throw invalid(`${where} is a ${type} parameter: it takes a number${type.endsWith('64') && type !== 'f64' ? ' or a BigInt' : ''} (got ${describe(value)})`);
  return value;
}

class Kernel {
  constructor(spec) {
    this.spec = spec;
    this.label = `kernel '${spec.name}'`;
    this.programs = new Map(); // key -> {module, context, fn}, oldest first
    this.closed = false;
    this.instance = new Instance();
    const made = [this.instance];
    try {
      if (typeof spec.device === 'string') {
        this.device = this.instance.createDevice(spec.device);
        made.push(this.device);
      } else {
        if (spec.device.closed) throw invalid('options.device is closed', 'FAILED_PRECONDITION');
        this.device = spec.device;
      }
      const { kind, uri } = this.device.info;
      if (kind !== 'cuda') throw invalid(`options.device: a CUDA kernel runs on a CUDA device, and ${uri} is a ${kind} device`);
      this.owned = [...made];
      this.hal = new HalModule(this.instance, this.device);
      made.push(this.hal);
      // Compile and load now, so that errors in the source throw here.
      const module = Module.fromObject(this.instance, moduleObject(spec));
      made.push(module);
      new Context(this.instance, [this.hal, module]).close();
      module.close();
    } catch (error) {
      for (const object of made.reverse()) object.close();
      throw prefixed(error, 'halrt.cudaKernel: ');
    }
  }

  /** The program for one call: made, or the cached one moved to the newest place. */
  program(key, inputs, dispatch) {
    let program = this.programs.get(key);
    if (program) {
      this.programs.delete(key);
    } else {
      const module = Module.fromObject(this.instance, moduleObject(this.spec, inputs, dispatch));
      try {
        const context = new Context(this.instance, [this.hal, module]);
        program = { module, context, fn: context.lookupFunction(`${MODULE_NAME}.main`) };
      } catch (error) {
        module.close();
        throw error;
      }
      if (this.programs.size >= CACHED_PROGRAMS) {
        const [oldest, evicted] = this.programs.entries().next().value;
        this.programs.delete(oldest);
        closeProgram(evicted);
      }
    }
    this.programs.set(key, program);
    return program;
  }

  async call(launch, args) {
    const { workgroups, workgroupSize, read, signal } = checkLaunch(launch, this.label);
    // After the launch's getters, which may have closed it.
    if (this.closed) throw new HalrtError(`${this.label}: the kernel is closed`, 'FAILED_PRECONDITION');
    const { params } = this.spec;
    if (args.length !== params.length) {
      throw invalid(`${this.label}: it takes ${params.length} argument${params.length === 1 ? '' : 's'} (${params.join(', ')}) after the launch, but got ${args.length}`);
    }
    const made = [];
    try {
      const views = [], inputs = [], bindings = [], constants = [], scalars = [];
      args.forEach((arg, i) => {
        const where = `${this.label}: argument ${i + 2}`;
        if (params[i] !== 'buffer') {
          constants.push(constantOf(params[i], arg, where));
          scalars.push(i);
          return;
        }
        let view = arg;
        if (typeof arg === 'number' || typeof arg === 'bigint') {
          throw invalid(`${where} is a buffer parameter: it takes a BufferView or host data (a TypedArray or nested Arrays), not ${describe(arg)}`);
        } else if (!(arg instanceof BufferView)) {
          try {
            // A TypedArray (or Buffer) is flat: its own length is its shape.
            view = util.types.isTypedArray(arg) ? this.device.tensor(arg, [arg.length]) : this.device.tensor(arg);
          } catch (error) {
            throw prefixed(error, `${where}: `);
          }
          made.push(view);
        } else if (arg.closed) {
          throw new HalrtError(`${where}: the BufferView is closed`, 'FAILED_PRECONDITION');
        }
        let slot = views.indexOf(view);
        if (slot < 0) {
          slot = views.push(view) - 1;
          inputs.push({ name: `arg${i}`, dtype: view.dtype, shape: [...view.shape] });
        }
        bindings.push(inputs[slot].name);
      });
      const dispatch = { workgroups, workgroupSize, bindings, constants };
      const key = JSON.stringify([inputs, dispatch]);
      let program;
      try {
        program = this.program(key, inputs, dispatch);
      } catch (error) {
        throw callError(error, this.label, scalars);
      }
      await program.fn.invoke(views, signal === undefined ? undefined : { signal });
      const results = bindings.map((binding) => views[inputs.findIndex((input) => input.name === binding)]);
      if (!read) return results;
      return await Promise.all(results.map((view) => view.read()));
    } catch (error) {
      for (const view of made) view.close();
      throw error;
    } finally {
      if (read) for (const view of made) view.close();
    }
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    for (const program of this.programs.values()) closeProgram(program);
    this.programs.clear();
    this.hal.close();
    for (const object of this.owned.reverse()) object.close();
  }
}

function closeProgram({ fn, context, module }) {
  fn.close();
  context.close();
  module.close();
}

/** halrt.cudaKernel: the kernel as a function k(launch, ...args) with close(), closed, device, name, params. */
function cudaKernel(source, name, options) {
  const kernel = new Kernel(checkSpec(source, name, options));
  const k = (launch, ...args) => kernel.call(launch, args);
  Object.defineProperties(k, {
    name: { value: kernel.spec.name },
    params: { value: Object.freeze([...kernel.spec.params]), enumerable: true },
    device: { value: kernel.device, enumerable: true },
    closed: { get: () => kernel.closed, enumerable: true },
    close: { value: () => kernel.close() },
    toString: { value: () => `CudaKernel(${kernel.spec.name}(${kernel.spec.params.join(', ')}) on ${kernel.device.info.uri})` },
    [Symbol.dispose ?? Symbol.for('nodejs.dispose')]: { value: () => kernel.close() },
    [util.inspect.custom]: {
      value: inspector('CudaKernel', () => ({ name: kernel.spec.name, params: kernel.spec.params, device: kernel.device.info.uri, closed: kernel.closed })),
    },
  });
  return k;
}

module.exports = { cudaKernel };

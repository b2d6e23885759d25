'use strict';
// Module loading on top of the native Module.fromJson: from a file, from a
// plain object, or built fluently with ModuleBuilder. All three produce the
// same "halrt.module/1" description (docs/module-format.md), validated
// natively with errors that name the offending field.

const path = require('path');
const util = require('util');
const binding = require('./binding');
const { HalrtError } = require('./errors');
const { LIMITS, readRegularFile } = require('./files');
const { setOwn } = require('./objects');
const { checkOptions, readOptions } = require('./args');
const { constantData, withoutData } = require('./constants');

const FORMAT = 'halrt.module/1';

// Module.load, Module.fromObject and Module.fromJson, on the native class,
// whose own fromJson takes the constants' bytes as a fourth argument.
const { Module } = binding;
const nativeFromJson = Module.fromJson;

// The module of JSON `text` (`description`: the same, parsed, or undefined
// when it is not JSON) with its constants' bytes read.
function create(instance, text, baseDir, description) {
  // A baseDir that is not a string is named by the native reader.
  const usable = baseDir === undefined || typeof baseDir === 'string';
  return nativeFromJson.call(Module, instance, text, baseDir, usable ? constantData(description, baseDir) : undefined);
}

// JSON.parse of `text`, or undefined: malformed text is left to the native
// reader, which names line and column.
function parseOrUndefined(text) {
  try {
    return typeof text === 'string' ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

// Module.fromJson(instance, text, baseDir?): relative paths resolve against
// baseDir (none: they are an error).
Module.fromJson = function fromJson(instance, text, baseDir) {
  return create(instance, text, baseDir, parseOrUndefined(text));
};
// Module.load(instance, file): paths inside resolve against the file's folder.
// Errors in the module name the file.
Module.load = function load(instance, file) {
  if (typeof instance === 'string' && file === undefined) {
    throw new HalrtError(`Module.load: the instance is missing: call Module.load(instance, ${JSON.stringify(instance)})`, 'INVALID_ARGUMENT');
  }
  if (typeof file !== 'string') {
    throw new HalrtError(`Module.load: path must be a string (got ${typeof file})`, 'INVALID_ARGUMENT');
  }
  const bytes = readRegularFile(file, { caller: 'Module.load', maxBytes: LIMITS.moduleFile, what: 'a module file' });
  try {
    const text = bytes.toString('utf8');
    return create(instance, text, path.dirname(path.resolve(file)), parseOrUndefined(text));
  } catch (error) {
    const inner = 'Module.fromJson: ';
    if (!(error instanceof HalrtError) || !error.message.startsWith(inner)) throw error;
    throw new HalrtError(`Module.load: ${file}: ${error.message.slice(inner.length)}`, error.code, { cause: error });
  }
};

// Module.fromObject(instance, object, {baseDir}): relative paths resolve
// against baseDir (default: the current directory).
Module.fromObject = function fromObject(instance, object, options = {}) {
  if (!isPlainObject(object)) {
    throw new HalrtError('Module.fromObject: object must be a module description object', 'INVALID_ARGUMENT');
  }
  if (!isPlainObject(options)) {
    throw new HalrtError('Module.fromObject: options must be an object', 'INVALID_ARGUMENT');
  }
  const { baseDir: given } = readOptions(options, ['baseDir'], 'Module.fromObject', 'options');
  const baseDir = given === undefined ? process.cwd() : typeof given === 'string' ? path.resolve(given) : given;
  return create(instance, serialize(withoutData(object), 'Module.fromObject: object'), baseDir, object);
};

function isPlainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// JSON text of a module description; what JSON cannot hold (a BigInt, a
// cycle) is INVALID_ARGUMENT naming `what`. JSON.stringify writes -0 as 0,
// but an f32 constant's sign matters: -0 is written as the number -0
// (valid JSON), through a placeholder holding a NUL, which no description
// can hold (the reader rejects \u0000).
const NEGATIVE_ZERO = '\u0000-0';
function serialize(object, what) {
  try {
    return JSON.stringify(object, (key, value) => (Object.is(value, -0) ? NEGATIVE_ZERO : value))
      .replaceAll('"\\u0000-0"', '-0');
  } catch (error) {
    throw new HalrtError(`${what} is not JSON-serialisable: ${error.message}`, 'INVALID_ARGUMENT', { cause: error });
  }
}

// Builds the body of one function; every method returns `this`.
class FunctionBuilder {
  constructor(description) {
    this._description = description;
  }

  input(name, dtype, shape) {
    this._description.inputs.push({ name, dtype, shape });
    return this;
  }

  output(name, dtype, shape) {
    this._description.outputs.push({ name, dtype, shape });
    return this;
  }

  local(name, dtype, shape) {
    this._description.locals.push({ name, dtype, shape });
    return this;
  }

  // dispatch('k.matmul_f32', {workgroups, bindings, constants, workgroupSize})
  dispatch(kernel, options = {}) {
    // Any keys: an op description object, `kernel` and all, may be passed whole.
    const { workgroups, bindings, constants, workgroupSize } = checkOptions(options, 'FunctionBuilder.dispatch', null, 'options');
    const op = { op: 'dispatch', kernel, workgroups, bindings };
    if (constants !== undefined) op.constants = constants;
    if (workgroupSize !== undefined) op.workgroupSize = workgroupSize;
    this._description.body.push(op);
    return this;
  }

  fill(target, value) {
    this._description.body.push({ op: 'fill', target, value });
    return this;
  }

  copy(source, target) {
    this._description.body.push({ op: 'copy', source, target });
    return this;
  }

  // trace('probe', ['y'], {mode, counts}): mode 'full', 'summary' or
  // 'health' (default: the HalModule's traceMode); counts [{value, step}]
  // (health from chain_health_f32's counts; docs/module-format.md).
  trace(key, values, options = {}) {
    const { mode, counts } = checkOptions(options, 'FunctionBuilder.trace', ['mode', 'counts'], 'options');
    const op = { op: 'trace', key, values };
    if (mode !== undefined) op.mode = mode;
    if (counts !== undefined) op.counts = counts;
    this._description.body.push(op);
    return this;
  }

  barrier() {
    this._description.body.push({ op: 'barrier' });
    return this;
  }

  // call('lib.f', ['x'], ['y']): function f of module lib, linked before
  // this one in the Context, on these values.
  call(callee, args, results) {
    this._description.body.push({ op: 'call', callee, args, results });
    return this;
  }
}

// new ModuleBuilder('mlp').executable('k', {local: {builtin: true}})
//   .function('main', (f) => f.input(...).output(...).dispatch(...))
//   .build(instance)
class ModuleBuilder {
  constructor(name) {
    this._object = { format: FORMAT, name, executables: {}, functions: {} };
  }

  executable(name, kinds) {
    setOwn(this._object.executables, name, kinds);
    return this;
  }

  // constant('w', 'f32', [4, 8], data): a module constant; `data` is host
  // data (a TypedArray of the dtype, bytes, or Arrays), kept as given.
  constant(name, dtype, shape, data) {
    this._object.constants ??= {};
    setOwn(this._object.constants, name, { dtype, shape, data });
    return this;
  }

  // `define` receives a FunctionBuilder.
  function(name, define) {
    if (typeof define !== 'function') {
      throw new HalrtError(`ModuleBuilder.function: define must be a function (got ${typeof define})`, 'INVALID_ARGUMENT');
    }
    const description = { inputs: [], outputs: [], locals: [], body: [] };
    setOwn(this._object.functions, name, description);
    define(new FunctionBuilder(description));
    return this;
  }

  // The module description, a plain object (deep copy; constants' data
  // copied by structuredClone, which keeps TypedArrays).
  toObject() {
    const copy = JSON.parse(serialize(withoutData(this._object), 'ModuleBuilder.toObject: the module'));
    const { constants } = this._object;
    for (const name of Object.keys(constants ?? {})) {
      if (constants[name].data !== undefined) copy.constants[name].data = structuredClone(constants[name].data);
    }
    return copy;
  }

  build(instance, options) {
    return Module.fromObject(instance, this._object, options);
  }

  toString() {
    return `ModuleBuilder(${this._object.name})`;
  }

  [util.inspect.custom](depth, options, inspect = util.inspect) {
    const { name, executables, functions } = this._object;
    const fields = { name, executables: Object.keys(executables), functions: Object.keys(functions) };
    return `ModuleBuilder ${inspect(fields, options)}`;
  }
}

module.exports = { ModuleBuilder, FunctionBuilder };

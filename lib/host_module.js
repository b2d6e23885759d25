'use strict';
// new halrt.HostModule(instance, name, {fn: {inputs, outputs, impl}}): a
// module whose functions are JavaScript, for programs to call
// ({"op": "call", "callee": "name.fn"}) or to invoke directly.
//
// The native class (src/napi/js_host_module.h) posts each call to this
// env's JS thread and hands it to the runner below with host tensors
// ({name, dtype, shape, data}, as debug sinks get them). The runner calls
// `impl`, converts what it returns (or resolves to) to each output's bytes,
// and finishes the call: the outputs, or a failure (a wrong result is
// INVALID_ARGUMENT naming the output; a throw or rejection ABORTED with the
// thrown value as the invocation's cause).

const binding = require('./binding');
const { HalrtError, invalid, readThrew, thrownText } = require('./errors');
const { describe } = require('./half');
const { declared } = require('./host_data');
const { isPlainObject, checkOptions } = require('./args');
require('./objects'); // close(), closed, printing

const { BufferView } = binding;
const METHOD = 'new HostModule';

/** The spec's functions as {name, inputs, outputs, impl}, checked. */
function readSpec(name, spec) {
  if (typeof name !== 'string') throw invalid(`${METHOD}: name must be a string (got ${describe(name)})`);
  if (!isPlainObject(spec)) {
    throw invalid(`${METHOD}: functions must be an object of {inputs, outputs, impl} by function name (got ${describe(spec)})`);
  }
  return Object.keys(spec).map((fn) => {
    const where = `${METHOD}: functions.${fn}`;
    const { inputs = [], outputs = [], impl } = checkOptions(spec[fn], where, ['inputs', 'outputs', 'impl']);
    if (typeof impl !== 'function') throw invalid(`${where}.impl must be a function (got ${describe(impl)})`);
    const values = (list, what) => {
      if (!Array.isArray(list)) throw invalid(`${where}.${what} must be an Array of {name, dtype, shape} (got ${describe(list)})`);
      return list.map((value, i) => {
        const { name: valueName, dtype, shape } = checkOptions(value, `${where}.${what}[${i}]`, ['name', 'dtype', 'shape']);
        if (typeof valueName !== 'string' || valueName === '') throw invalid(`${where}.${what}[${i}].name must be a non-empty string (got ${describe(valueName)})`);
        if (!binding.dtypes.includes(dtype)) throw invalid(`${where}.${what}[${i}].dtype must be one of ${binding.dtypes.join(', ')} (got ${describe(dtype)})`);
        if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
          throw invalid(`${where}.${what}[${i}].shape must be an Array of non-negative integers (got ${describe(shape)})`);
        }
        return Object.freeze({ name: valueName, dtype, shape: Object.freeze([...shape]) });
      });
    };
    return { name: fn, inputs: Object.freeze(values(inputs, 'inputs')), outputs: Object.freeze(values(outputs, 'outputs')), impl };
  });
}

/**
 * Whether `result`, for a function of one output of rank `rank`, is the
 * list of outputs rather than the output itself (returned bare): an Array
 * of one entry that is a view, typed or bytes data, or nested Arrays one
 * level deeper than the output ([[[1, 2]]] for f32[1,2], [5] for a scalar).
 */
function isOutputList(result, rank) {
  if (!Array.isArray(result) || result.length !== 1) return false;
  const [entry] = result;
  if (!Array.isArray(entry)) return rank === 0 || (entry !== null && typeof entry === 'object');
  // Only whether the nesting goes deeper than `rank` matters: an Array that
  // contains itself stops there too.
  let depth = 0;
  for (let item = result; Array.isArray(item) && depth <= rank; item = item[0]) {
    depth += 1;
    if (item.length === 0) break;
  }
  return depth > rank;
}

/**
 * What `impl` returned, as one TypedArray per output: an Array, or a
 * promise of one when a BufferView has to be read first.
 */
function outputBytes(qualified, outputs, result) {
  if (outputs.length === 0 && result === undefined) return [];
  const values = outputs.length === 1 && !isOutputList(result, outputs[0].shape.length) ? [result] : result;
  if (!Array.isArray(values) || values.length !== outputs.length) {
    throw invalid(`${qualified} must return an Array of ${outputs.length} output${outputs.length === 1 ? '' : 's'} (${outputs.map((o) => o.name).join(', ') || 'none'}), got ${describe(result)}`);
  }
  const convert = ({ name, dtype, shape }, i, value) =>
    declared(qualified, `output ${i} ('${name}') of ${qualified}`, `output '${name}'`, value, dtype, shape);
  const views = values.some((value) => value instanceof BufferView);
  if (!views) return outputs.map((output, i) => convert(output, i, values[i]));
  return Promise.all(outputs.map(async (output, i) => {
    let value = values[i];
    if (value instanceof BufferView) {
      const { dtype, shape } = output;
      if (value.closed) throw invalid(`${qualified}: output ${i} ('${output.name}') of ${qualified} is a closed BufferView`);
      if (value.dtype !== dtype || value.shape.length !== shape.length || value.shape.some((d, j) => d !== shape[j])) {
        throw invalid(`${qualified}: output ${i} ('${output.name}') of ${qualified} must be ${dtype}[${shape}] (got a BufferView of ${value.dtype}[${value.shape}])`);
      }
      value = await value.read();
    }
    return convert(output, i, value);
  }));
}

class HostModule extends binding.HostModule {
  constructor(instance, name, functions) {
    let specs;
    try {
      specs = readSpec(name, functions);
    } catch (error) {
      throw readThrew(METHOD, 'functions', error);
    }
    const qualified = specs.map((spec) => `${name}.${spec.name}`);
    // runner(index, tensors, info, token): one call, ended exactly once.
    const runner = (index, tensors, info, token) => {
      const { impl, outputs } = specs[index];
      const fail = (error, code, message) => binding.finishHostCall(token, null, code, message, error);
      const threw = (error) => fail(error, 'ABORTED', `${qualified[index]} threw: ${thrownText(error)}`);
      // A wrong result names the output; a getter of the result that threw
      // is the impl's throw.
      const invalidResult = (error) => (error instanceof HalrtError ? fail(undefined, 'INVALID_ARGUMENT', error.message) : threw(error));
      const finish = (result) => {
        try {
          const bytes = outputBytes(qualified[index], outputs, result);
          if (Array.isArray(bytes)) {
            binding.finishHostCall(token, bytes);
          } else {
            bytes.then((read) => binding.finishHostCall(token, read)).catch(invalidResult);
          }
        } catch (error) {
          invalidResult(error);
        }
      };
      let result;
      let thenable;
      try {
        result = impl(...tensors);
        thenable = result !== null && typeof result?.then === 'function';
      } catch (error) {
        threw(error);
        return;
      }
      if (thenable) {
        Promise.resolve(result).then(finish, threw);
      } else {
        finish(result);
      }
    };
    super(instance, name, specs.map(({ name: fn, inputs, outputs }) => ({ name: fn, inputs, outputs })), runner);
    // The JS-visible edge to the functions: the native module's napi_ref
    // to the runner is weak.
    Object.defineProperty(this, 'runner', { value: runner });
    Object.defineProperty(this, 'name', { value: name, enumerable: true });
    Object.defineProperty(this, 'instance', { value: instance });
    Object.defineProperty(this, 'functions', {
      value: Object.freeze(specs.map(({ name: fn, inputs, outputs }) => Object.freeze({ name: fn, inputs, outputs }))),
      enumerable: true,
    });
  }
}

module.exports = { HostModule };

'use strict';
// fn.invoke(inputs, {signal, named, read}): the native invoke plus
// - inputs as host data (Arrays, TypedArrays, numbers for scalars), uploaded
//   to the function's device after checking them against the signature, and
//   closed when the invocation settles;
// - inputs as an object of names ({x, w}): unknown or missing names reject;
// - `named: true`: outputs as an object of names instead of an Array;
// - `read: true`: outputs read to host arrays (the views are then closed);
// - AbortSignal support. Device work cannot be interrupted; an abort
//   settles the promise at once with CANCELLED and the outputs, when they
//   arrive, are closed unseen;
// and fn.prepare(inputs), which takes its inputs as invoke() does.

const binding = require('./binding');
const { HalrtError, invalid, readThrew } = require('./errors');
const util = require('util');
const { declared, isHostData } = require('./host_data');
const { deferCloses, isClosed } = require('./objects');
const { describe } = require('./half');

const NO_OPTIONS = Object.freeze({});
// The most inputs the native invoke takes (HRT_JS_MAX_INPUTS).
const MAX_INPUTS = 256;

function cancelled(name, signal) {
  return new HalrtError(`${name}: the invocation was aborted`, 'CANCELLED', { cause: signal.reason });
}

// The promise invoke() returns for the native `result`: `made` (uploaded
// inputs) closed once it settles, outputs read and/or named as asked, the
// AbortSignal honoured. It holds only
// strings of the function: an invocation in flight must not keep the
// Function (and through it the HalModule and its sink) reachable.
function deliver(result, made, delivery, signal) {
  if (made.length > 0) {
    const release = () => {
      for (const view of made) view.close();
    };
    result.then(release, release);
  }
  const shape = delivery !== null && (delivery.read || delivery.names !== null);
  if (signal === undefined && !shape) return result;
  const finish = async (outputs) => {
    if (!shape) return outputs;
    let results = outputs;
    if (delivery.read) {
      try {
        results = await Promise.all(outputs.map((view) => view.read()));
      } finally {
        for (const view of outputs) view.close();
      }
    }
    if (delivery.names === null) return results;
    return Object.fromEntries(delivery.names.map((name, i) => [name, results[i]]));
  };
  if (signal === undefined) return shape ? result.then(finish) : result;
  const name = delivery === null ? 'function' : delivery.name;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(cancelled(name, signal));
    signal.addEventListener('abort', onAbort, { once: true });
    result.then(
      (outputs) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) {
          for (const output of outputs) output.close();
        } else {
          resolve(finish(outputs));
        }
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

const { BufferView, HalModule, HostModule } = binding;
const NativeFunction = binding.Function;
const nativeInvoke = NativeFunction.prototype.invoke;
const nativePrepare = NativeFunction.prototype.prepare;

function deviceOf(fn) {
  return fn.context.modules.find((module) => module instanceof HalModule).device;
}

// What every call of a function needs that never changes (its name, its
// output names, the HostModules of its context), read once: these getters
// make new objects on each read.
const facts = new WeakMap();
function factsOf(fn) {
  let known = facts.get(fn);
  if (known === undefined) {
    const name = fn.name;
    known = {
      name,
      outputNames: fn.outputs.map((s) => s.name),
      // An invocation in flight holds these: their functions may be called.
      hosts: fn.context.modules.filter((module) => module instanceof HostModule),
    };
    facts.set(fn, known);
  }
  return known;
}

function isNamedInputs(inputs) {
  // An Array (a Proxy of one included) is not, and is the common case.
  if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs) || util.types.isProxy(inputs)) return false;
  const prototype = Object.getPrototypeOf(inputs);
  return prototype === Object.prototype || prototype === null;
}

// {values, labels}: the inputs as an Array in signature order (each element
// read once; only own properties name an input) and how messages name each
// (null: inputs[i]); anything but an Array or an object of names goes to the
// native call as it is, which names it. A getter that throws is
// INVALID_ARGUMENT with the thrown value as cause. `verb`: 'invoke' or
// 'prepare', for messages.
function ordered(fn, inputs, verb) {
  try {
    return orderedRead(fn, inputs, verb);
  } catch (error) {
    throw readThrew(`function.${verb}: ${fn.name}`, 'inputs', error);
  }
}

function orderedRead(fn, inputs, verb) {
  if (isNamedInputs(inputs)) {
    const method = `function.${verb}: ${fn.name}`;
    const names = fn.inputs.map((s) => s.name);
    for (const key of Object.keys(inputs)) {
      if (!names.includes(key)) {
        throw invalid(`${method}: inputs has no input named '${key}' (the inputs are ${names.join(', ') || 'none'})`);
      }
    }
    const values = names.map((name) => {
      const value = Object.hasOwn(inputs, name) ? inputs[name] : undefined;
      if (value === undefined) throw invalid(`${method}: input '${name}' is missing (inputs.${name})`);
      return value;
    });
    return { values, labels: names.map((name) => `inputs.${name}`) };
  }
  // More inputs than any function takes go to the native call, which
  // refuses them by their count with nothing of their length built (a
  // huge sparse Array included).
  if (!Array.isArray(inputs) || util.types.isProxy(inputs) || inputs.length > MAX_INPUTS) return { values: inputs };
  return { values: Array.from(inputs), labels: null };
}

// A view of host data `value` for input `index` on `device`.
function upload(fn, device, index, value, label, method) {
  const { name, dtype, shape } = fn.inputs[index];
  return device.tensor(declared(method, `input ${index} ('${name}')`, label, value, dtype, shape), shape, dtype);
}

// A closed function or context: the native call rejects, before the inputs.
function isClosedFunction(fn) {
  return isClosed(fn) || isClosed(fn.context);
}

// Views for every input; the ones made here are pushed to `made`. Without
// host data the inputs go to the native call, which checks them in order
// (named inputs of a closed function are not read).
function toViews(fn, inputs, made, verb) {
  if (isNamedInputs(inputs) && isClosedFunction(fn)) return inputs;
  const ordering = ordered(fn, inputs, verb);
  const { values } = ordering;
  if (ordering.labels === undefined || !values.some(isHostData) || isClosedFunction(fn)) return values;
  const method = `function.${verb}: ${fn.name}`;
  const labels = ordering.labels ?? values.map((_, i) => `inputs[${i}]`);
  if (values.length !== fn.inputs.length) {
    throw invalid(`${method} takes ${fn.inputs.length} inputs (got ${values.length})`);
  }
  const device = deviceOf(fn);
  return values.map((value, i) => {
    const proxy = util.types.isProxy(value); // its traps never run
    if (!proxy && value instanceof BufferView) return value;
    if (!isHostData(value)) {
      throw invalid(`${method}: ${labels[i]} is neither a BufferView nor host data (got ${proxy ? 'a Proxy' : describe(value)})`);
    }
    const view = upload(fn, device, i, value, labels[i], method);
    made.push(view);
    return view;
  });
}

Object.defineProperty(NativeFunction.prototype, 'invoke', {
  value: function invoke(inputs, options = NO_OPTIONS) {
    if (options === null || typeof options !== 'object') {
      return Promise.reject(new HalrtError('function.invoke: options must be an object', 'INVALID_ARGUMENT'));
    }
    let signal;
    let named;
    let read;
    try {
      ({ signal, named = false, read = false } = options);
    } catch (error) {
      return Promise.reject(readThrew('function.invoke', 'options', error));
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      return Promise.reject(new HalrtError('function.invoke: options.signal must be an AbortSignal', 'INVALID_ARGUMENT'));
    }
    if (typeof named !== 'boolean' || typeof read !== 'boolean') {
      const [key, value] = typeof named !== 'boolean' ? ['named', named] : ['read', read];
      return Promise.reject(new HalrtError(`function.invoke: options.${key} must be a boolean (got ${describe(value)})`, 'INVALID_ARGUMENT'));
    }
    if (signal?.aborted) return Promise.reject(cancelled(this.name, signal));
    // The native invoke reports its failures (a wrong receiver included) as
    // rejections; only failing to make the promise itself throws, and that
    // too must be a rejection. So do the checks of host inputs here.
    const made = [];
    let result;
    let delivery = null;
    try {
      const isFunction = this instanceof NativeFunction;
      result = deferCloses(() => nativeInvoke.call(this, isFunction ? toViews(this, inputs, made, 'invoke') : inputs));
      if (isFunction) {
        const { name, outputNames, hosts } = factsOf(this);
        delivery = { name, names: named ? outputNames : null, read };
        if (hosts.length > 0) result.then(() => hosts, () => hosts);
      }
    } catch (error) {
      for (const view of made) view.close();
      return Promise.reject(error);
    }
    return deliver(result, made, delivery, signal);
  },
  writable: true,
  enumerable: false,
  configurable: true,
});

// fn.prepare(inputs): the native prepare on views, host data uploaded and
// named inputs ordered as invoke() does. The PreparedCall holds its own
// references to the inputs' buffers, so the views made here are closed.
Object.defineProperty(NativeFunction.prototype, 'prepare', {
  value: function prepare(inputs) {
    if (!(this instanceof NativeFunction)) return nativePrepare.call(this, inputs);
    const made = [];
    try {
      return deferCloses(() => nativePrepare.call(this, toViews(this, inputs, made, 'prepare')));
    } finally {
      for (const view of made) view.close();
    }
  },
  writable: true,
  enumerable: false,
  configurable: true,
});

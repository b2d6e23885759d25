'use strict';
// What the JavaScript side adds to the native classes: device.tensor() from
// host data (lib/host_data.js), whether an object is closed, `numel`/`size`,
// util.inspect and toString output, and context.lookupFunction() by a bare
// function name.

const util = require('util');
const binding = require('./binding');
const { HalrtError } = require('./errors');
const half = require('./half');
const { prepare, shapeText } = require('./host_data');
const { FlightRecorder } = require('./flight_recorder');

// The names of closed Modules, for the Contexts that still link them.
const closedModuleNames = new WeakMap();

// Closing an object while a method reads its arguments (a getter, a Proxy
// trap) takes effect when the method returns, as in the native binding:
// the JavaScript steps in front of a native call run inside deferCloses().
let deferring = 0;
const deferredCloses = [];

function deferCloses(run) {
  deferring += 1;
  try {
    return run();
  } finally {
    deferring -= 1;
    if (deferring === 0 && deferredCloses.length > 0) {
      for (const object of deferredCloses.splice(0)) object.close();
    }
  }
}

// Whether close() was called on an object of the binding.
const isClosed = binding.isClosed;

// A property that may throw (a closed object): its value, or undefined.
function tryGet(read) {
  try {
    return read();
  } catch {
    return undefined;
  }
}

function deviceUri(device) {
  return tryGet(() => device.info.uri);
}

function signatureText(signatures) {
  // A dimension of -1 is one each invocation binds (an ONNX model's
  // symbolic dimension, lib/onnx/specialize.js): '?'.
  return signatures.map((s) => `${s.name}: ${s.dtype}${shapeText(s.shape.map((d) => (d < 0 ? '?' : d)))}`).join(', ');
}

function functionText(name, inputs, outputs) {
  return `${name}(${signatureText(inputs)}) -> (${signatureText(outputs)})`;
}

function define(prototype, key, value) {
  Object.defineProperty(prototype, key, { value, writable: true, enumerable: false, configurable: true });
}

// object[key] = value as an own enumerable property, whatever `key` is: a
// plain assignment to '__proto__' would set the prototype instead.
function setOwn(object, key, value) {
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
}

// `Name {fields}` with util.inspect's options (colours, depth).
function inspector(className, fields) {
  return function inspect(depth, options, inspectValue = util.inspect) {
    if (depth < 0) return options.stylize(`[${className}]`, 'special');
    return `${className} ${inspectValue(fields(this), { ...options, depth: options.depth === null ? null : options.depth - 1 })}`;
  };
}

const { Instance, Device, BufferView, HalModule, HostModule, Module, Context, PreparedCall } = binding;
const NativeFunction = binding.Function;
const disposeSymbol = Symbol.dispose ?? Symbol.for('nodejs.dispose');

// What every native class gets: close() that a method reading its arguments
// defers, `closed` and [Symbol.dispose]; util.inspect and toString below.
for (const cls of [Instance, Device, BufferView, HalModule, HostModule, Module, Context, NativeFunction, PreparedCall]) {
  const nativeClose = cls.prototype.close;
  define(cls.prototype, 'close', function close() {
    if (deferring > 0 && this instanceof cls) {
      deferredCloses.push(this);
      return;
    }
    // A Context still links a closed Module and prints it by name.
    if (this instanceof Module && !isClosed(this)) closedModuleNames.set(this, tryGet(() => this.name));
    nativeClose.call(this);
  });
  define(cls.prototype, disposeSymbol, function dispose() {
    this.close();
  });
  Object.defineProperty(cls.prototype, 'closed', {
    get() {
      // A close() deferred until the method now reading arguments returns
      // was called all the same.
      return isClosed(this) || (deferring > 0 && deferredCloses.includes(this));
    },
    enumerable: false,
    configurable: true,
  });
}

const nativeTensor = Device.prototype.tensor;
define(Device.prototype, 'tensor', function tensor(data, shape, dtype) {
  return deferCloses(() => {
    const prepared = prepare('device.tensor', 'data', data, shape, dtype);
    const view = prepared.dtype === undefined
      ? nativeTensor.call(this, prepared.data, prepared.shape)
      : nativeTensor.call(this, prepared.data, prepared.shape, prepared.dtype);
    return view;
  });
});

// view.toArray(): the contents as nested Arrays in the view's shape (a
// scalar alone for rank 0): numbers for float and 32-bit-or-narrower integer
// dtypes (f16/bf16 decoded), BigInts for 64-bit integers, booleans for bool.
define(BufferView.prototype, 'toArray', async function toArray() {
  if (!(this instanceof BufferView)) {
    throw new HalrtError('bufferView.toArray: `this` is not a BufferView', 'INVALID_ARGUMENT');
  }
  if (isClosed(this)) throw new HalrtError('bufferView.toArray: BufferView is closed', 'FAILED_PRECONDITION');
  const { shape, dtype } = this;
  const data = await this.read();
  const decode = dtype === 'f16' || dtype === 'bf16' ? (bits) => half.decode(dtype === 'f16' ? half.F16 : half.BF16, bits)
    : dtype === 'bool' ? (value) => value !== 0
      : (value) => value;
  let next = 0;
  const nest = (depth) => (depth === shape.length
    ? decode(data[next++])
    : Array.from({ length: shape[depth] }, () => nest(depth + 1)));
  return nest(0);
});

Object.defineProperty(BufferView.prototype, 'numel', {
  get() {
    return this.shape.reduce((count, dim) => count * dim, 1);
  },
  enumerable: false,
  configurable: true,
});
Object.defineProperty(BufferView.prototype, 'size', Object.getOwnPropertyDescriptor(BufferView.prototype, 'numel'));

// Context.lookupFunction: 'module.function', or a bare function name that
// exactly one linked (open) program or host module exports.
const nativeLookup = Context.prototype.lookupFunction;
define(Context.prototype, 'lookupFunction', function lookupFunction(name) {
  if (typeof name !== 'string' || name.includes('.') || !(this instanceof Context)) {
    return nativeLookup.call(this, name);
  }
  const owners = [];
  const all = [];
  for (const module of tryGet(() => this.modules) ?? []) {
    if (!(module instanceof Module || module instanceof HostModule) || isClosed(module)) continue;
    for (const f of module.functions) all.push(`${module.name}.${f.name}`);
    if (module.functions.some((f) => f.name === name)) owners.push(module.name);
  }
  if (owners.length === 0) {
    throw new HalrtError(`context.lookupFunction: no linked module exports a function '${name}' (functions: ${all.join(', ') || 'none'})`, 'NOT_FOUND');
  }
  if (owners.length > 1) {
    throw new HalrtError(`context.lookupFunction: '${name}' is ambiguous: ${owners.map((m) => `'${m}.${name}'`).join(', ')}; qualify it`, 'INVALID_ARGUMENT');
  }
  return nativeLookup.call(this, `${owners[0]}.${name}`);
});

const views = (view) => ({
  dtype: tryGet(() => view.dtype),
  shape: tryGet(() => view.shape),
  device: binding.viewDevice(view),
  byteLength: tryGet(() => view.byteLength),
  closed: isClosed(view),
});
// A flight recorder's setting, as it was given: { traces } or { bytes }.
// How a Context names a module it links, closed or not.
const linkedName = (m) => (m instanceof HalModule ? 'hal' : tryGet(() => m.name) ?? closedModuleNames.get(m));
const recorderSetting = (recorder) => (recorder.traces !== undefined ? { traces: recorder.traces } : { bytes: recorder.bytes });
const ownName = (o) => {
  if (!Object.hasOwn(o, 'name')) throw new TypeError('not an instance');
  return o.name;
};
const inspections = [
  [Instance, (o) => ({ closed: isClosed(o) }), () => 'Instance'],
  [Device, (o) => ({ uri: deviceUri(o), name: tryGet(() => o.info.name), closed: isClosed(o) }),
    (o) => `Device(${deviceUri(o)})`],
  [BufferView, views, (o) => (isClosed(o)
    ? 'BufferView(closed)'
    : `BufferView(${o.dtype}${shapeText(o.shape)} on ${binding.viewDevice(o)})`)],
  [HalModule, (o) => ({
    device: deviceUri(o.device),
    debugSink: o.debugSink !== null,
    traceDispatches: o.traceDispatches,
    traceMode: o.traceMode,
    profile: o.profile,
    flightRecorder: tryGet(() => o.flightRecorder && recorderSetting(o.flightRecorder)),
    closed: isClosed(o),
  }), (o) => `HalModule(${deviceUri(o.device)})`],
  // Its counts throw once its HalModule is closed: then it says so.
  [FlightRecorder, (o) => ({
    ...recorderSetting(o),
    ...(tryGet(() => ({ heldTraces: o.heldTraces, heldBytes: o.heldBytes, skipped: o.skipped })) ?? { closed: true }),
  }), (o) => `FlightRecorder(${util.inspect(recorderSetting(o), { breakLength: Infinity })})`],
  [Module, (o) => ({
    name: tryGet(() => o.name),
    functions: tryGet(() => o.functions.map((f) => functionText(f.name, f.inputs, f.outputs))),
    closed: isClosed(o),
  }), (o) => `Module(${tryGet(() => o.name) ?? 'closed'})`],
  // Its name and functions are the instance's own (lib/host_module.js): a
  // prototype has none and prints as `[object HostModule]`.
  [HostModule, (o) => ({
    name: ownName(o),
    functions: o.functions.map((f) => functionText(f.name, f.inputs, f.outputs)),
    closed: isClosed(o),
  }), (o) => `HostModule(${ownName(o)})`],
  [Context, (o) => ({
    modules: o.modules.map(linkedName),
    closed: isClosed(o),
  }), (o) => `Context(${o.modules.map(linkedName).join(', ')})`],
  [NativeFunction, (o) => ({
    name: o.name,
    inputs: signatureText(o.inputs),
    outputs: signatureText(o.outputs),
    closed: isClosed(o),
  }), (o) => `Function(${functionText(o.name, o.inputs, o.outputs)})`],
  [PreparedCall, (o) => ({
    function: o.function.name,
    outputs: o.outputs.length,
    closed: isClosed(o),
  }), (o) => `PreparedCall(${o.function.name})`],
];
for (const [cls, fields, text] of inspections) {
  // On something that is not a live wrapper (a prototype, say) the fields
  // cannot be read: it prints as `[object Name]`.
  const inspect = inspector(cls.name, fields);
  define(cls.prototype, util.inspect.custom, function custom(...args) {
    return tryGet(() => inspect.apply(this, args)) ?? `[object ${cls.name}]`;
  });
  define(cls.prototype, 'toString', function toString() {
    return tryGet(() => text(this)) ?? `[object ${cls.name}]`;
  });
}

module.exports = { deferCloses, deviceUri, functionText, inspector, isClosed, setOwn };

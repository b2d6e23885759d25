'use strict';
// halrt.load(file, options): a module file, or an ONNX model (by content;
// docs/onnx.md), made ready to call in one step.
// It creates and owns an Instance, a Device, a HalModule (with the debug
// sink options), the Module and a Context, and exposes each function as a
// method: `await m.main(x, w)` or `await m.main({x, w})`.

const util = require('util');
const { Instance, HalModule, HostModule, Module, Context } = require('./binding');
const { HalrtError } = require('./errors');
const { describe } = require('./half');
require('./module'); // Module.load
const { functionText, inspector, setOwn } = require('./objects');
const { checkOptions, isPlainObject } = require('./args');
const { isOnnxFile, readOnnx, moduleOf } = require('./onnx');
const { SpecializingFunction, needsSpecialising } = require('./onnx/specialize');

// Names a function cannot take as a method: LoadedModule's own, and `then`
// (with it, `await halrt.load()` would call the function, not give the object).
const RESERVED = new Set([
  'then', 'instance', 'device', 'halModule', 'module', 'context', 'functions', 'name', 'closed', 'close',
  'toString', 'constructor', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'valueOf',
  'toLocaleString', '__proto__', '__defineGetter__', '__defineSetter__', '__lookupGetter__', '__lookupSetter__',
]);

const ownsInstance = new WeakMap();
// LoadedModule -> its SpecializingFunction (lib/onnx/specialize.js), for an
// ONNX model whose symbolic dimensions each invocation binds.
const specializing = new WeakMap();

class LoadedModule {
  constructor(parts, functions, ownInstance, specializer = null) {
    Object.assign(this, parts);
    ownsInstance.set(this, ownInstance);
    if (specializer !== null) {
      specializing.set(this, specializer);
      for (const member of ['module', 'context']) {
        Object.defineProperty(this, member, { get: () => specializer.current(member), enumerable: true });
      }
    }
    this.functions = Object.freeze(functions);
    for (const [name, fn] of Object.entries(functions)) {
      if (RESERVED.has(name)) continue;
      Object.defineProperty(this, name, { value: shortCall(fn, name), enumerable: false });
    }
    Object.freeze(this);
  }

  get closed() {
    const self = receiver(this, 'closed');
    return specializing.has(self) ? specializing.get(self).closed : self.context.closed;
  }

  // Closes the functions, context, module (every specialisation), HAL
  // module, device and the instance it made (not the imports' instance).
  // Idempotent.
  close() {
    const self = receiver(this, 'close');
    for (const fn of Object.values(self.functions)) fn.close();
    const own = specializing.has(self) ? [] : [self.context, self.module];
    for (const object of [...own, self.halModule, self.device]) object.close();
    if (ownsInstance.get(self)) self.instance.close();
  }

  toString() {
    const self = receiver(this, 'toString');
    return `LoadedModule(${self.name}: ${Object.keys(self.functions).join(', ')} on ${self.device.info.uri})`;
  }
}

// m.main(x, w, options?) or m.main({x, w}, options?): fn.invoke with those
// inputs and options ({named, read, signal}). What else is given rejects,
// saying what it got and what is expected.
function shortCall(fn, name) {
  const names = fn.inputs.map((s) => s.name);
  const inputCount = names.length;
  const inputs = names.join(', ');
  const usage = `m.${name}(${inputs}${inputCount ? ', ' : ''}options?)${inputCount ? ` or m.${name}({${inputs}}, options?)` : ''}`;
  return (...args) => {
    const refuse = (what) => Promise.reject(new HalrtError(`loadedModule.${name}: ${what}; call it as ${usage}`, 'INVALID_ARGUMENT'));
    const byName = inputCount > 0 && isPlainObject(args[0]);
    const count = byName ? 1 : inputCount;
    for (let i = 0; !byName && i < Math.min(count, args.length); ++i) {
      if (isPlainObject(args[i])) return refuse(`argument ${i + 1} is an object where input '${names[i]}' belongs (options come after every input)`);
    }
    if (args.length > count + 1) {
      return refuse(`it takes ${byName ? 'an object of inputs' : `${inputCount} input${inputCount === 1 ? '' : 's'}`} and options, but got ${args.length} arguments (argument ${count + 2} is ${describe(args[count + 1])})`);
    }
    const options = args.length === count + 1 ? args[count] : undefined;
    if (options !== undefined && !isPlainObject(options)) {
      return refuse(`argument ${count + 1} must be the options object {named, read, signal} (got ${describe(options)})`);
    }
    return fn.invoke(byName ? args[0] : args.slice(0, count), options);
  };
}

// `self`, when it is a LoadedModule; else the HalrtError the native classes
// give a wrong receiver.
function receiver(self, member) {
  if (!(self instanceof LoadedModule)) {
    throw new HalrtError(`loadedModule.${member}: \`this\` is not a LoadedModule`, 'INVALID_ARGUMENT');
  }
  return self;
}

LoadedModule.prototype[util.inspect.custom] = inspector('LoadedModule', (m) => ({
  name: m.name,
  device: m.device.info.uri,
  functions: Object.values(m.functions).map((fn) => functionText(fn.name, fn.inputs, fn.outputs)),
  closed: m.closed,
}));
LoadedModule.prototype[Symbol.dispose ?? Symbol.for('nodejs.dispose')] = function dispose() {
  this.close();
};

async function load(file, options = {}) {
  if (!isPlainObject(options)) {
    throw new HalrtError(`halrt.load: options must be an object (got ${typeof options})`, 'INVALID_ARGUMENT');
  }
  const { device: uri = 'auto', imports = [], shapes, traceNodes, ...halOptions } = checkOptions(options, 'halrt.load', null, 'options');
  const onnx = isOnnxFile(file);
  if (!onnx && (shapes !== undefined || traceNodes !== undefined)) {
    throw new HalrtError(`halrt.load: options.${shapes !== undefined ? 'shapes' : 'traceNodes'} applies to ONNX models, and ${describe(file)} is a module description`, 'INVALID_ARGUMENT');
  }
  if (!Array.isArray(imports) || !imports.every((m) => m instanceof HostModule)) {
    throw new HalrtError(`halrt.load: options.imports must be an Array of HostModules (got ${describe(imports)})`, 'INVALID_ARGUMENT');
  }
  if (imports.some((m) => m.instance !== imports[0].instance)) {
    throw new HalrtError('halrt.load: options.imports must share one Instance', 'INVALID_ARGUMENT');
  }
  const made = [];
  const keep = (object) => {
    made.push(object);
    return object;
  };
  // Each step's errors are reported as halrt.load's: `prefix` replaces the
  // inner method's name (`instance.createDevice: `) at the message's start.
  let prefix = ['', ''];
  const step = (inner, outer, make) => {
    prefix = [inner, outer];
    return keep(make());
  };
  try {
    const instance = imports.length > 0 ? imports[0].instance : step('new Instance: ', '', () => new Instance());
    const device = step('instance.createDevice: ', 'options.device: ', () => instance.createDevice(uri));
    const halModule = step('new HalModule: ', '', () => new HalModule(instance, device, halOptions));
    // The HalModule checked traceMode; traces in 'health' mode may report
    // from chain counts (docs/onnx.md).
    const onnxOptions = { shapes, traceNodes, traceMode: halOptions.traceMode };
    const onnxModel = onnx ? readOnnx(file, onnxOptions) : null;
    prefix = ['onnx: ', '']; // options.shapes checked against the model
    if (onnx && needsSpecialising(onnxModel.model, shapes)) {
      const main = step('onnx: ', '', () => new SpecializingFunction({
        model: onnxModel.model, options: { name: onnxModel.name, ...onnxOptions }, instance, hal: halModule, imports,
      }));
      return new LoadedModule({ name: onnxModel.name, instance, device, halModule }, { main }, imports.length === 0, main);
    }
    const module = onnx
      ? step('Module.fromJson: ', '', () => moduleOf(Module, instance, onnxModel, onnxOptions))
      : step('Module.load: ', '', () => Module.load(instance, file));
    const context = step('new Context: ', '', () => new Context(instance, [halModule, ...imports, module]));
    const functions = {};
    for (const { name } of module.functions) {
      setOwn(functions, name, step('context.lookupFunction: ', '', () => context.lookupFunction(`${module.name}.${name}`)));
    }
    return new LoadedModule({ name: module.name, instance, device, halModule, module, context }, functions, imports.length === 0);
  } catch (error) {
    for (const object of made.reverse()) object.close();
    if (error instanceof HalrtError && error.message.startsWith(prefix[0])) {
      throw new HalrtError(`halrt.load: ${prefix[1]}${error.message.slice(prefix[0].length)}`, error.code, { cause: error.cause });
    }
    throw error;
  }
}

module.exports = { load, LoadedModule };

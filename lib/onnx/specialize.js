'use strict';
// An ONNX model's `main` when halrt.load was not given every symbolic
// dimension (docs/onnx.md, "Symbolic dimensions"): each invoke() reads the
// dimensions off its inputs and runs the specialisation of the model for
// them, made on first use (convert, Module, Context) and kept in a cache of
// SPECIALISATIONS, the least recently used closed beyond it (invocations
// already started on it complete). JS thread only; owned by its
// LoadedModule, which closes it.

const util = require('util');
const { Module, Context, BufferView } = require('../binding');
const { HalrtError } = require('../errors');
const { describe } = require('../half');
const { isPlainObject } = require('../args');
const { functionText, inspector } = require('../objects');
const converter = require('./convert');

const SPECIALISATIONS = 8;
const TYPED = Object.getPrototypeOf(Int8Array);

// The dims of nested Arrays (first elements down), or undefined.
function nestedDims(data) {
  const dims = [];
  for (let level = data; Array.isArray(level); level = level[0]) dims.push(level.length);
  return dims;
}

// The element count of flat host data of f32, or undefined.
function flatCount(data) {
  if (data instanceof TYPED) return data.length;
  if (data instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && data instanceof SharedArrayBuffer)) return data.byteLength / 4;
  return undefined;
}

// What a method called on another object gives, as the native Function's.
function notFunction(method) {
  return new HalrtError(`function.${method}: \`this\` is not a Function`, 'INVALID_ARGUMENT');
}

class SpecializingFunction {
  // model: readModel's; options: {name, traceNodes, shapes (some)}; hal:
  // the HalModule every specialisation links with; imports: HostModules.
  constructor({ model, options, instance, hal, imports }) {
    this.model = model;
    this.options = options;
    this.parts = { instance, hal, imports };
    this.cache = new Map(); // dims key -> {module, context, fn}, oldest first
    this.latest = null;
    this.closedFlag = false;
    const graphInputs = model.graph.inputs.filter((i) => !model.graph.initializers.some((t) => t.name === i.name));
    // Checked now, as a model with fixed shapes is at load.
    const bound = converter.check(model, options.shapes);
    // A dimension without a name is a symbol of its own; one options.shapes
    // binds (in any input) is that size.
    const symbols = (i) => (i.dims ?? []).map((d, k) => (typeof d === 'number' ? d : typeof d === 'string' && d !== '' ? (bound.get(d) ?? d) : `?${i.name}[${k}]`));
    this.declared = graphInputs.map((i) => ({ name: i.name, dims: options.shapes?.[i.name] ?? symbols(i) }));
    const signature = (v) => ({ name: v.name, dtype: 'f32', shape: (v.dims ?? []).map((d) => (typeof d === 'number' ? d : -1)) });
    this.inputs = this.declared.map(signature);
    this.outputs = model.graph.outputs.map(signature);
    this.name = `${options.name}.main`;
  }

  get closed() {
    return this.closedFlag;
  }

  // The context of the latest specialisation.
  get context() {
    return this.current('context');
  }

  current(member) {
    if (this.latest === null) {
      throw new HalrtError(`${this.name}.${member}: no specialisation yet: the model's symbolic dimensions are bound by the first invoke() (or give halrt.load options.shapes)`, 'FAILED_PRECONDITION');
    }
    return this.latest[member];
  }

  // Every symbolic dimension bound from `inputs` (as invoke() takes them),
  // as options.shapes; throws naming the input it cannot read.
  shapesOf(inputs) {
    const byName = isPlainObject(inputs);
    if (!byName && !Array.isArray(inputs)) {
      throw new HalrtError(`${this.name}.invoke: inputs must be an Array or an object of inputs by name (got ${describe(inputs)})`, 'INVALID_ARGUMENT');
    }
    const bound = new Map();
    const shapes = {};
    this.declared.forEach(({ name, dims }, i) => {
      const data = byName ? (Object.hasOwn(inputs, name) ? inputs[name] : undefined) : inputs[i];
      if (data === undefined) {
        throw new HalrtError(`${this.name}.invoke: input '${name}' is missing (inputs: ${this.declared.map((d) => d.name).join(', ')})`, 'INVALID_ARGUMENT');
      }
      let given = data instanceof BufferView ? data.shape : Array.isArray(data) ? nestedDims(data) : undefined;
      if (given === undefined) {
        const known = dims.map((d) => (typeof d === 'number' ? d : bound.get(d)));
        const unknown = known.filter((d) => d === undefined).length;
        const total = flatCount(data);
        const rest = known.reduce((n, d) => n * (d ?? 1), 1);
        if (unknown === 0) {
          given = known; // invoke() checks the data against them
        } else if (unknown !== 1 || total === undefined || rest === 0 || total % rest !== 0) {
          throw new HalrtError(`${this.name}.invoke: cannot tell the symbolic dimensions of input '${name}' [${dims}] from ${describe(data)}: pass a BufferView (device.tensor(data, shape)) or give halrt.load options.shapes`, 'INVALID_ARGUMENT');
        } else {
          given = known.map((d) => d ?? total / rest);
        }
      }
      if (given.length !== dims.length) {
        throw new HalrtError(`${this.name}.invoke: input '${name}' has ${given.length} dimensions, but the model's has ${dims.length} ([${dims}])`, 'INVALID_ARGUMENT');
      }
      dims.forEach((d, k) => {
        if (typeof d === 'number' && given[k] !== d) {
          throw new HalrtError(`${this.name}.invoke: input '${name}' has ${given[k]} for dimension ${k}, which the model fixes to ${d} ([${dims}])`, 'INVALID_ARGUMENT');
        }
        if (typeof d === 'string' && bound.has(d) && bound.get(d) !== given[k]) {
          throw new HalrtError(`${this.name}.invoke: input '${name}' has ${given[k]} for dimension '${d}', which an earlier input binds to ${bound.get(d)}`, 'INVALID_ARGUMENT');
        }
        if (typeof d === 'string') bound.set(d, given[k]);
      });
      shapes[name] = [...given];
    });
    return shapes;
  }

  // The specialisation for `shapes`, made and cached on first use.
  specialisation(shapes) {
    const key = JSON.stringify(shapes);
    let entry = this.cache.get(key);
    if (entry !== undefined) {
      this.cache.delete(key); // most recently used last
    } else {
      const { description } = converter.convert(this.model, { ...this.options, shapes: { ...this.options.shapes, ...shapes } });
      const module = Module.fromObject(this.parts.instance, description);
      try {
        const context = new Context(this.parts.instance, [this.parts.hal, ...this.parts.imports, module]);
        entry = { module, context, fn: context.lookupFunction(`${module.name}.main`) };
      } catch (error) {
        module.close();
        throw error;
      }
      if (this.cache.size >= SPECIALISATIONS) {
        const [oldest, evicted] = this.cache.entries().next().value;
        this.cache.delete(oldest);
        for (const object of [evicted.fn, evicted.context, evicted.module]) object.close();
      }
    }
    this.cache.set(key, entry);
    this.latest = entry;
    return entry;
  }

  invoke(inputs, options) {
    if (!(this instanceof SpecializingFunction)) return Promise.reject(notFunction('invoke'));
    if (this.closedFlag) return Promise.reject(new HalrtError(`${this.name}.invoke: the function is closed`, 'FAILED_PRECONDITION'));
    let entry;
    try {
      const shapes = this.shapesOf(inputs);
      // An input's getter may have closed the module.
      if (this.closedFlag) throw new HalrtError(`${this.name}.invoke: the function is closed`, 'FAILED_PRECONDITION');
      entry = this.specialisation(shapes);
    } catch (error) {
      if (error instanceof HalrtError && error.message.startsWith('onnx: ')) {
        return Promise.reject(new HalrtError(`${this.name}.invoke: ${error.message.slice(6)}`, error.code, { cause: error }));
      }
      return Promise.reject(error);
    }
    return entry.fn.invoke(inputs, options);
  }

  // A prepared call would outlive the specialisation it ran on (the cache
  // closes the one used longest ago): refused, naming what to do instead.
  prepare() {
    if (!(this instanceof SpecializingFunction)) throw notFunction('prepare');
    throw new HalrtError(`${this.name}.prepare: the model's symbolic dimensions are bound per invocation; prepare needs them all: give halrt.load options.shapes`, 'FAILED_PRECONDITION');
  }

  toString() {
    return `Function(${functionText(this.name, this.inputs, this.outputs)})`;
  }

  // Closes every specialisation. Idempotent.
  close() {
    if (!(this instanceof SpecializingFunction)) throw notFunction('close');
    this.closedFlag = true;
    for (const { fn, context, module } of this.cache.values()) {
      for (const object of [fn, context, module]) object.close();
    }
    this.cache.clear();
  }
}

SpecializingFunction.prototype[util.inspect.custom] = inspector('Function', (fn) => ({
  name: fn.name,
  signature: functionText(fn.name, fn.inputs, fn.outputs),
  specialisations: fn.cache.size,
  closed: fn.closed,
}));

// Whether halrt.load must specialise `model` per invocation: an input
// options.shapes leaves out with a symbolic dimension no input it gives
// binds (docs/onnx.md, "Loading").
function needsSpecialising(model, shapes) {
  const symbols = converter.boundSymbols(model.graph, shapes);
  return model.graph.inputs.some((input) => shapes?.[input.name] === undefined &&
    !model.graph.initializers.some((t) => t.name === input.name) &&
    (input.dims ?? []).some((d) => typeof d !== 'number' && !(typeof d === 'string' && symbols.has(d))));
}

module.exports = { SpecializingFunction, needsSpecialising, SPECIALISATIONS };

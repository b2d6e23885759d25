'use strict';
// Public entry point. Validation and behaviour live in the native binding;
// this file loads it, wires HalrtError and the debug-sink decoder in, adds
// [Symbol.dispose] and the JavaScript conveniences (lib/objects.js: host
// data for tensor(), inspection; lib/invoke.js; lib/load.js).

const path = require('path');
const { HalrtError } = require('./errors');
const { installModuleStatics, ModuleBuilder } = require('./module');
const { installInvoke } = require('./invoke');
const { installObjects } = require('./objects');
const { load, LoadedModule } = require('./load');
const half = require('./half');
const sinks = require('./sinks');
const { makeTraceDecoder } = require('./trace_batch');

function loadBinding() {
  // HALRT_ADDON names another build of the addon to load instead (the
  // sanitizer runs, test/sanitize/run.sh, load build/asan/halrt.node).
  const file = process.env.HALRT_ADDON
    ? path.resolve(process.env.HALRT_ADDON)
    : path.join(__dirname, '..', 'build', 'Release', 'halrt.node');
  try {
    return require(file);
  } catch (error) {
    if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(file)) {
      throw new Error(
        `halrt: the native addon is not built (${file} is missing). ` +
          'Run `npm install` (or `npm run build`) in the halrt package directory.',
        { cause: error },
      );
    }
    throw error;
  }
}

const binding = loadBinding();
// Before anything else, so that every error the binding makes is a HalrtError.
binding.setErrorClass(HalrtError);
binding.setTraceDecoder(makeTraceDecoder(binding.dtypes));
// timers' own setImmediate: fake timers that replace the global one must not
// stall delivery.
binding.setScheduler(require('timers').setImmediate);

const { Instance, Device, BufferView, HalModule, Module, Context } = binding;
const NativeFunction = binding.Function;
installModuleStatics(Module);
installObjects(binding);
installInvoke(NativeFunction, { BufferView, HalModule });

const disposeSymbol = Symbol.dispose ?? Symbol.for('nodejs.dispose');
for (const cls of [Instance, Device, BufferView, HalModule, Module, Context, NativeFunction]) {
  Object.defineProperty(cls.prototype, disposeSymbol, {
    value: function dispose() {
      this.close();
    },
    writable: true,
    enumerable: false,
    configurable: true,
  });
}

module.exports = {
  Instance,
  Device,
  BufferView,
  HalModule,
  Module,
  ModuleBuilder,
  Context,
  Function: NativeFunction,
  HalrtError,
  LoadedModule,
  load,
  toF16Bits: half.toF16Bits,
  fromF16Bits: half.fromF16Bits,
  toBF16Bits: half.toBF16Bits,
  fromBF16Bits: half.fromBF16Bits,
  sinks: Object.freeze({
    stdio: sinks.stdio,
    npy: sinks.npy,
    stats: sinks.stats,
    tee: sinks.tee,
    chromeTrace: sinks.chromeTrace,
  }),
  dtypes: binding.dtypes,
  drivers: binding.drivers,
  liveObjects: binding.liveObjects,
};

'use strict';
// Public entry point. Validation and behaviour live in the native binding;
// this file loads it, wires HalrtError and the debug-sink decoder in, adds
// [Symbol.dispose] and the JavaScript conveniences (lib/objects.js: host
// data for tensor(), inspection; lib/invoke.js; lib/load.js; lib/compare.js).

const path = require('path');
const nodeGypBuild = require('node-gyp-build');
const { HalrtError } = require('./errors');
const { installModuleStatics, ModuleBuilder } = require('./module');
const { installInvoke } = require('./invoke');
const { installObjects } = require('./objects');
const { installFlightRecorder } = require('./flight_recorder');
const { load, LoadedModule } = require('./load');
const { compare } = require('./compare');
const half = require('./half');
const { format, formatNumber } = require('./format');
const sinks = require('./sinks');
const { makeTraceDecoder } = require('./trace_batch');

const PACKAGE_ROOT = path.join(__dirname, '..');

// The addon file to load: HALRT_ADDON when set (the sanitizer runs,
// test/sanitize/run.sh, name build/asan/halrt.node), else what node-gyp-build
// finds under the package root: the first .node file in build/Release/ (a
// source build; directory listings are sorted, so halrt.node comes before the
// benchmarks' halrt_bench_ref.node), then the prebuilt binary for this
// platform and architecture in prebuilds/<platform>-<arch>/.
function addonFile() {
  if (process.env.HALRT_ADDON) return path.resolve(process.env.HALRT_ADDON);
  try {
    return nodeGypBuild.resolve(PACKAGE_ROOT);
  } catch (error) {
    throw new HalrtError(
      `halrt: no native addon for ${process.platform}-${process.arch} in ${PACKAGE_ROOT}: ` +
        `neither a source build (build/Release/halrt.node) nor a prebuilt binary (prebuilds/${process.platform}-${process.arch}/). ` +
        'Build it from source with `npm rebuild halrt --build-from-source` (needs a C compiler, make and Python 3), ' +
        'or `npm run build` in a checkout.',
      'NOT_FOUND',
      { cause: error },
    );
  }
}

function loadBinding() {
  const file = addonFile();
  const named = process.env.HALRT_ADDON ? `${file} (named by HALRT_ADDON)` : file;
  try {
    return require(file);
  } catch (error) {
    if (error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(file)) {
      throw new HalrtError(`halrt: the native addon ${named} does not exist`, 'NOT_FOUND', { cause: error });
    }
    throw new HalrtError(`halrt: cannot load the native addon ${named}: ${error && error.message}`,
      'FAILED_PRECONDITION', { cause: error });
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
installFlightRecorder(HalModule);
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
  compare,
  toF16Bits: half.toF16Bits,
  fromF16Bits: half.fromF16Bits,
  toBF16Bits: half.toBF16Bits,
  fromBF16Bits: half.fromBF16Bits,
  format,
  formatNumber,
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

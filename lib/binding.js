'use strict';
// The native addon, loaded once and made ready: every error it makes is a
// HalrtError, debug-sink batches are decoded by lib/trace_batch.js, and its
// time slices wait on timers' own setImmediate (fake timers that replace the
// global one must not stall delivery). Every lib/ file that needs a native
// class takes it from here; nothing here knows the rest of lib/.

const path = require('path');
const nodeGypBuild = require('node-gyp-build');
const { HalrtError } = require('./errors');
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
binding.setScheduler(require('timers').setImmediate);

module.exports = binding;

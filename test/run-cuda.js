#!/usr/bin/env node
'use strict';
// The second pass of the mocha suite: the device-dependent test files on the
// CUDA device, through the driver test double (test/support/fakecuda).
//
//   node test/run-cuda.js [extra mocha arguments, e.g. --grep trace]
//
// Needs the addon (npm run build) and build/ctest/libfakecuda.so
// (make -s -C test/c fakecuda; npm run test:c builds it too), or the
// library HALRT_TEST_FAKECUDA names (test/sanitize/run.sh passes the
// AddressSanitizer build, so that the kernels' own accesses are checked).
// Exits with mocha's status, or 1 when the library is missing.
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const root = path.join(__dirname, '..');
const library = process.env.HALRT_TEST_FAKECUDA || path.join(root, 'build', 'ctest', 'libfakecuda.so');
const FILES = ['tensor', 'context', 'debug-sink', 'sink-lifetime', 'sinks', 'trace-summary', 'cuda', 'cuda-memory', 'nvrtc', 'cuda-kernel', 'calls', 'constants', 'onnx', 'host-module', 'array-limit', 'compare', 'docs', 'flight-recorder'];

if (!fs.existsSync(library)) {
  process.stderr.write(`test/run-cuda.js: ${library} is missing; build it with \`make -s -C test/c fakecuda\`\n`);
  process.exit(1);
}

// --no-config: .mocharc.json's spec would add every test file to the ones
// named here; its options are repeated instead.
const result = spawnSync(process.execPath, [
  '--expose-gc',
  require.resolve('mocha/bin/mocha.js'),
  '--no-config',
  '--timeout', '20000',
  ...process.argv.slice(2),
  ...FILES.map((name) => path.join('test', `${name}.test.js`)),
], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, HALRT_TEST_DEVICES: 'cuda', HALRT_CUDA_LIBRARY: library },
});
if (result.error) {
  process.stderr.write(`test/run-cuda.js: cannot run mocha: ${result.error.message}\n`);
  process.exit(1);
}
process.exit(result.status ?? 1);

'use strict';
// onnxruntime-node, the peer baseline. It is large (~290 MB), so it is not a
// dependency of halrt: bench/package.json names it and the first benchmark
// run installs it into bench/node_modules. ONNXRUNTIME_NODE_INSTALL=skip
// stops its install script from fetching CUDA binaries from a host other
// than the npm registry; the CPU binaries ship inside the npm package.

const path = require('path');
const { spawnSync } = require('child_process');

const PACKAGE = path.join(__dirname, 'node_modules', 'onnxruntime-node');

function tryRequire() {
  try {
    return { ort: require(PACKAGE) };
  } catch (error) {
    return { error };
  }
}

function install(log) {
  log('installing onnxruntime-node into bench/node_modules (first use; about 290 MB)...');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['install', '--prefix', __dirname, '--no-audit', '--no-fund'], {
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 600000,
  });
  if (result.error) return `npm install failed: ${result.error.message}`;
  if (result.status !== 0) {
    const lines = `${result.stderr}`.trim().split('\n').filter((l) => /ERR!/.test(l));
    return `npm install exited with ${result.status}${lines.length ? `: ${lines.slice(0, 3).join(' ')}` : ''}`;
  }
  return null;
}

let cached = null;

// {ort} or {unavailable: reason}. `allowInstall` false never runs npm.
function loadOrt({ allowInstall = true, log = () => {} } = {}) {
  if (cached) return cached;
  let attempt = tryRequire();
  if (attempt.ort) return (cached = { ort: attempt.ort });
  if (attempt.error.code !== 'MODULE_NOT_FOUND') {
    return (cached = { unavailable: `cannot load onnxruntime-node: ${attempt.error.message.split('\n')[0]}` });
  }
  if (!allowInstall) return (cached = { unavailable: 'not installed, --no-install given' });
  const failure = install(log);
  if (failure) return (cached = { unavailable: failure });
  attempt = tryRequire();
  if (attempt.ort) return (cached = { ort: attempt.ort });
  return (cached = { unavailable: `cannot load onnxruntime-node: ${attempt.error.message.split('\n')[0]}` });
}

// Session options for the CPU baselines: `threads` intra-op threads, no
// spinning (an idle ORT worker spinning on one of two cores would slow the
// halrt side of the comparison that runs next).
function sessionOptions(threads) {
  return {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  };
}

module.exports = { loadOrt, sessionOptions };

'use strict';
// bench/run.js's options: --help prints the usage, bad options say what is
// wrong with the usage and exit 2, before any benchmark runs.

const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');

const ROOT = path.join(__dirname, '..');
const USAGE = 'usage: node bench/run.js [--quick] [--only trace,invoke,dispatch,alloc,models,cuda] [--no-install] [--json FILE]';

function bench(...args) {
  return spawnSync(process.execPath, ['bench/run.js', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60000 });
}

describe('bench/run.js options', () => {
  it('--help prints the usage and exits 0', () => {
    const result = bench('--help');
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout, `${USAGE}\n`);
  });

  it('an unknown option or group is named, with the usage, exit status 2', () => {
    for (const [args, message] of [
      [['--bogus'], "bench/run.js: Unknown option '--bogus'"],
      [['--only', 'trace,nope'], "bench/run.js: --only: unknown group 'nope' (trace, invoke, dispatch, alloc, models, cuda)"],
    ]) {
      const result = bench(...args);
      assert.strictEqual(result.status, 2, result.stderr);
      assert.strictEqual(result.stdout, '');
      assert.ok(result.stderr.startsWith(`${message}`), result.stderr);
      assert.ok(result.stderr.endsWith(`${USAGE}\n`), result.stderr);
    }
  });
});

'use strict';
// The CUDA rows of the benchmarks that measure against the driver alone
// (bench/cuda.js, BENCHMARKS.md row 6) and their raw side,
// test/gpu/launch_loop.c: run end to end on the driver test double
// (build/ctest/libfakecuda.so, marked as test-double figures with no
// verdict), without a launch_loop build, and without a usable driver. Only
// quantities are checked: the double's timings say nothing.

const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');

const ROOT = path.join(__dirname, '..');
const FAKE = path.join(ROOT, 'build', 'ctest', 'libfakecuda.so');
const LAUNCH = 'CUDA launch overhead vs raw cuLaunchKernel loop (cuda)';
const D2H = "CUDA trace D2H vs pinned memcpy, 16 MiB f32, traceData 'borrowed' (cuda)";
const haveFake = fs.existsSync(FAKE);

/** Runs `command` with `args` and the extra environment `env`. */
function run(command, args, env = {}) {
  return spawnSync(command, args, { cwd: ROOT, encoding: 'utf8', timeout: 300000, env: { ...process.env, ...env } });
}

/** bench/run.js --quick --only cuda with `env`: its rows (--json). */
function benchRows(dir, env) {
  const json = path.join(dir, `rows-${Math.random().toString(36).slice(2)}.json`);
  const result = run(process.execPath, ['bench/run.js', '--quick', '--no-install', '--only', 'cuda', '--json', json], env);
  assert.strictEqual(result.status, 0, `bench/run.js exited ${result.status}: ${result.stdout}\n${result.stderr}`);
  return { rows: JSON.parse(fs.readFileSync(json, 'utf8')), stdout: result.stdout };
}

describe(`bench: the CUDA rows against the driver alone${haveFake ? '' : ` (skipped: ${FAKE} is missing; make -C test/c fakecuda)`}`, function () {
  this.timeout(300000);
  let dir;
  let launchLoop;

  before(function () {
    if (!haveFake) this.skip();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-bench-cuda-'));
    launchLoop = path.join(dir, 'launch_loop');
    const cc = run('cc', ['-std=c11', '-O2', '-D_GNU_SOURCE', '-Isrc', 'test/gpu/launch_loop.c', '-ldl', '-o', launchLoop]);
    assert.strictEqual(cc.status, 0, `cc: ${cc.stderr}`);
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('launch_loop --d2h copies the device bytes into pinned memory and says how fast', () => {
    const result = run(launchLoop, ['--d2h', String(3 << 20), '3', '2'], { HALRT_CUDA_LIBRARY: FAKE });
    assert.strictEqual(result.status, 0, result.stderr);
    const figures = JSON.parse(result.stdout);
    assert.deepStrictEqual(
      { bytes: figures.bytes, copies: figures.copies, rounds: figures.rounds, check: figures.check },
      { bytes: 3 << 20, copies: 3, rounds: 2, check: 'ok' },
    );
    assert.ok(figures.roundUs > 0 && figures.bytesPerSecond > 0, result.stdout);
  });

  it('launch_loop rejects bad --d2h arguments with exit status 2, naming the argument', () => {
    for (const [args, message] of [
      [['--d2h'], /usage: .*--d2h BYTES/s],
      [['--d2h', '0'], /BYTES must be in \[1, 2\^34\], not '0'/],
      [['--d2h', '12x'], /BYTES must be .*not '12x'/],
      [['--d2h', '-5'], /BYTES must be .*not '-5'/],
      [['--d2h', '64', '0'], /COPIES must be in \[1, 10000\]/],
      [['--d2h', '64', '1', '0'], /ROUNDS must be in \[1, 10000\]/],
      [['--d2h', '64', '1', '1', '1'], /usage/],
    ]) {
      const result = run(launchLoop, args, { HALRT_CUDA_LIBRARY: FAKE });
      assert.strictEqual(result.status, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(' '));
    }
  });

  it('on the test double both rows run end to end, marked as test-double figures with no verdict', () => {
    const { rows, stdout } = benchRows(dir, { HALRT_CUDA_LIBRARY: FAKE, HRT_GPU_LAUNCH_LOOP: launchLoop });
    for (const r of rows) {
      assert.strictEqual(r.group, 'cuda', r.name);
      assert.strictEqual(r.testDouble, true, r.name);
      assert.strictEqual(r.met, null, r.name);
      assert.match(r.note, /^\[cuda TEST DOUBLE .*libfakecuda\.so\): the figures say nothing about a GPU\]/, r.name);
    }
    const launch = rows.find((r) => r.name === LAUNCH);
    const d2h = rows.find((r) => r.name === D2H);
    assert.deepStrictEqual(launch.target, { op: '<=', value: 1.3 });
    assert.deepStrictEqual(d2h.target, { op: '>=', value: 0.8 });
    // On the double a dispatch costs next to nothing, so halrt's marginal
    // figure (a difference of two medians) is noise and may be below zero.
    assert.match(launch.halrt, /^-?[\d.]+(e-?\d+)? µs\/dispatch$/);
    assert.match(launch.baseline, /^-?[\d.]+(e-?\d+)? µs\/launch raw$/);
    assert.match(d2h.halrt, /^\d+ MB\/s$/);
    assert.match(d2h.baseline, /^\d+ MB\/s pinned D2H$/);
    assert.ok(d2h.ratio > 0, `ratio ${d2h.ratio}`);
    // The launch ratio is halrt's marginal over the raw one (both printed to 3 figures).
    const [halrtUs, rawUs] = [launch.halrt, launch.baseline].map((text) => parseFloat(text));
    if (rawUs !== 0) assert.ok(Math.abs(launch.ratio - halrtUs / rawUs) <= 0.02 * Math.abs(halrtUs / rawUs) + 1e-3, `ratio ${launch.ratio}, ${halrtUs} / ${rawUs}`);
    // The table's result column says so too, for every cuda row.
    const resultCells = stdout.split('\n').filter((line) => /\(cuda\) /.test(line)).map((line) => line.split('|').pop().trim());
    assert.strictEqual(resultCells.length, rows.length, stdout);
    assert.ok(resultCells.every((cell) => cell === 'test double'), resultCells.join(', '));
  });

  it('without a launch_loop build both rows say so and how to build it, measuring halrt only', () => {
    const missing = path.join(dir, 'no-such-launch-loop');
    const { rows } = benchRows(dir, { HALRT_CUDA_LIBRARY: FAKE, HRT_GPU_LAUNCH_LOOP: missing });
    for (const name of [LAUNCH, D2H]) {
      const r = rows.find((row) => row.name === name);
      assert.strictEqual(r.baseline, `not measured: ${missing} is not built; build it with \`bash test/gpu/prepare.sh\` (or cc, as test/gpu/run.sh does)`);
      assert.strictEqual(r.ratio, null, name); // NaN in JSON
      assert.match(r.halrt, /^-?[\d.]+(e-?\d+)? (µs\/dispatch|MB\/s)$/, name);
    }
  });

  it('without a usable CUDA driver both rows read "unmeasured (no GPU)" beside their targets', () => {
    const { rows } = benchRows(dir, { HALRT_CUDA_LIBRARY: path.join(dir, 'no-such-libcuda.so') });
    const launch = rows.find((r) => r.name === LAUNCH);
    const d2h = rows.find((r) => r.name === D2H);
    for (const r of [launch, d2h]) {
      assert.strictEqual(r.halrt, 'unmeasured (no GPU)');
      assert.strictEqual(r.met, null);
      assert.strictEqual(r.testDouble, undefined);
    }
    assert.deepStrictEqual([launch.target, d2h.target], [{ op: '<=', value: 1.3 }, { op: '>=', value: 0.8 }]);
  });
});

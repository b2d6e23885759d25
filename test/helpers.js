'use strict';
// Shared test utilities (not a spec file: mocha runs test/*.test.js).

const assert = require('assert');
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const halrt = require('..');

/**
 * Whether the addon runs under a sanitizer (test/sanitize/run.sh preloads
 * its runtime): RSS then says nothing, as ASan's quarantine keeps freed
 * memory and TSan keeps shadow memory and history.
 */
const UNDER_SANITIZER = /lib[at]san/.test(process.env.LD_PRELOAD ?? '');

/** The TypedArray class read() returns for each dtype. */
const ARRAY_TYPES = {
  f16: Uint16Array,
  bf16: Uint16Array,
  f32: Float32Array,
  f64: Float64Array,
  i8: Int8Array,
  u8: Uint8Array,
  i16: Int16Array,
  u16: Uint16Array,
  i32: Int32Array,
  u32: Uint32Array,
  i64: BigInt64Array,
  u64: BigUint64Array,
  bool: Uint8Array,
};

/** Distinct, edge-heavy sample values per dtype (cycled to fill `count`). */
const SAMPLES = {
  // 1.0, -2.0, +inf, smallest subnormal, NaN, 65504 (max), -0
  f16: [0x3c00, 0xc000, 0x7c00, 0x0001, 0x7e00, 0x7bff, 0x8000],
  // 1.0, -1.0, +inf, 3.140625, NaN, -0
  bf16: [0x3f80, 0xbf80, 0x7f80, 0x4049, 0x7fc0, 0x8000],
  f32: [1.5, -2.25, 3.4028234663852886e38, 1e-45, NaN, -0, Infinity],
  f64: [Math.PI, -Number.MAX_VALUE, Number.MIN_VALUE, NaN, -Infinity, 1 / 3],
  i8: [-128, 127, 0, -1, 42],
  u8: [0, 255, 1, 128, 77],
  i16: [-32768, 32767, 0, -1, 1234],
  u16: [0, 65535, 1, 32768, 4321],
  i32: [-2147483648, 2147483647, 0, -1, 123456789],
  u32: [0, 4294967295, 1, 2147483648, 987654321],
  i64: [-(2n ** 63n), 2n ** 63n - 1n, 0n, -1n, 1234567890123456789n],
  u64: [0n, 2n ** 64n - 1n, 1n, 2n ** 63n, 9876543210987654321n],
  bool: [1, 0, 0, 1, 1],
};

/** A TypedArray of `count` sample values of `dtype`, offset by `seed`. */
function sampleData(dtype, count, seed = 0) {
  const Type = ARRAY_TYPES[dtype];
  const samples = SAMPLES[dtype];
  const data = new Type(count);
  for (let i = 0; i < count; ++i) data[i] = samples[(i + seed) % samples.length];
  return data;
}

/** Element count of a shape ([] is a scalar: 1). */
function elementCount(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * Asserts that `fn` throws (or, for a promise / async function, rejects
 * with) a HalrtError with `code` whose message includes every `parts` string.
 */
function checkHalrtError(error, code, parts) {
  assert.ok(error instanceof halrt.HalrtError, `expected a HalrtError, got ${error && error.stack}`);
  assert.strictEqual(error.code, code, `code of: ${error.message}`);
  for (const part of parts) {
    assert.ok(error.message.includes(part), `message ${JSON.stringify(error.message)} lacks ${JSON.stringify(part)}`);
  }
  return true;
}

function assertThrowsHalrt(fn, code, ...parts) {
  assert.throws(fn, (error) => checkHalrtError(error, code, parts));
}

async function assertRejectsHalrt(promiseOrFn, code, ...parts) {
  await assert.rejects(promiseOrFn, (error) => checkHalrtError(error, code, parts));
}

/** The CUDA driver test double and the test kernel library (test/c/Makefile builds both). */
const FAKE_CUDA = path.join(__dirname, '..', 'build', 'ctest', 'libfakecuda.so');
const TEST_KERNELS = path.join(__dirname, '..', 'build', 'ctest', 'kernels_good.so');

/**
 * A module with a divergence planted at op 1 for halrt.compare and halrt
 * diff: t = (a + b) + b, the second add by `p.add_f32`: the built-in on
 * CUDA, the test library's on local devices (one ULP up at its last
 * element, [1][2]).
 */
function plantedModule() {
  const f32 = (name) => ({ name, dtype: 'f32', shape: [2, 3] });
  return {
    format: 'halrt.module/1',
    name: 'planted',
    executables: {
      k: { local: { builtin: true }, cuda: { builtin: true } },
      p: { local: { library: TEST_KERNELS }, cuda: { builtin: true } },
    },
    functions: {
      main: {
        inputs: [f32('a'), f32('b')],
        outputs: [f32('out')],
        locals: [f32('s'), f32('t')],
        body: [
          { op: 'dispatch', kernel: 'k.add_f32', workgroups: [2], bindings: ['a', 'b', 's'], constants: [6] },
          { op: 'dispatch', kernel: 'p.add_f32', workgroups: [2], bindings: ['s', 'b', 't'], constants: [6] },
          { op: 'trace', key: 'sum', values: ['t'] },
          { op: 'dispatch', kernel: 'k.mul_f32', workgroups: [2], bindings: ['t', 'a', 'out'], constants: [6] },
        ],
      },
    },
  };
}

/** Builds FAKE_CUDA and TEST_KERNELS (make does nothing when they are up to date). */
function buildNativeFixtures() {
  const made = spawnSync('make', ['-s', '-C', path.join(__dirname, 'c'), FAKE_CUDA, TEST_KERNELS], { encoding: 'utf8' });
  assert.strictEqual(made.status, 0, `make: ${made.stderr}`);
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs GC and lets finalizers run until no count of liveObjects() is above
 * `baseline`, for at most 30 s (devices and buffers are freed by their own
 * threads after their last work, slowly under a sanitizer on a loaded
 * machine). Returns the counts with any below the baseline raised to it:
 * objects of earlier tests that went meanwhile (a CUDA device its
 * completion thread frees after a while, garbage of a sink) are not the
 * caller's, so comparing the result with the baseline finds what the caller
 * left alive.
 */
async function settleLiveObjects(baseline) {
  const atLeastBaseline = (counts) =>
    Object.fromEntries(Object.entries(counts).map(([k, n]) => [k, k in baseline ? Math.max(n, baseline[k]) : n]));
  let live = halrt.liveObjects();
  const deadline = Date.now() + 30000;
  do {
    if (global.gc) global.gc();
    await tick();
    await new Promise((resolve) => setTimeout(resolve, 5));
    live = atLeastBaseline(halrt.liveObjects());
  } while (JSON.stringify(live) !== JSON.stringify(baseline) && Date.now() < deadline);
  return live;
}

/**
 * liveObjects() once earlier tests' garbage is gone: runs GC until the
 * counts stay the same for `stable` rounds in a row (at most `rounds`).
 */
async function liveBaseline(stable = 3, rounds = 40) {
  let live = halrt.liveObjects();
  let same = 0;
  for (let i = 0; i < rounds && same < stable; ++i) {
    if (global.gc) global.gc();
    await tick();
    await new Promise((resolve) => setTimeout(resolve, 2));
    const next = halrt.liveObjects();
    same = JSON.stringify(next) === JSON.stringify(live) ? same + 1 : 0;
    live = next;
  }
  return live;
}

/** The devices every device-dependent test runs on when HALRT_TEST_DEVICES is unset. */
const DEFAULT_DEVICE_URIS = ['local-sync', 'local-task?workers=2'];

/**
 * The device URIs the device-dependent tests run on: HALRT_TEST_DEVICES
 * (comma-separated, e.g. `cuda` or `cuda,local-sync`) when set, otherwise
 * the CPU devices. Tests that are inherently CPU-specific name CPU URIs
 * themselves instead.
 */
function deviceUrisFromEnv(value = process.env.HALRT_TEST_DEVICES) {
  if (value === undefined || value.trim() === '') return DEFAULT_DEVICE_URIS;
  const uris = value.split(',').map((uri) => uri.trim()).filter((uri) => uri.length > 0);
  if (uris.length === 0) throw new Error(`HALRT_TEST_DEVICES=${JSON.stringify(value)} names no device`);
  return uris;
}

const DEVICE_URIS = Object.freeze(deviceUrisFromEnv());

/**
 * The built-in kernels on every device kind: the executable description
 * tests give their 'k' executable so that one module links on CPU and CUDA.
 */
const BUILTIN = Object.freeze({ local: Object.freeze({ builtin: true }), cuda: Object.freeze({ builtin: true }) });

/** Whether the cuda driver can make devices here, and if not why (halrt.drivers()). */
function cudaDriver() {
  const cuda = halrt.drivers().find((driver) => driver.name === 'cuda');
  if (!cuda) return { available: false, reason: 'this build of halrt has no cuda driver' };
  return { available: cuda.available, reason: cuda.reason };
}

/** Resolves once `predicate()` is true; rejects after `timeout` ms. */
async function waitFor(predicate, timeout = 5000, what = 'condition') {
  const deadline = Date.now() + timeout;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Blocks the JS thread for `ms` milliseconds (a slow debug sink). */
function busyWait(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  while (process.hrtime.bigint() < end);
}

/** Closes every object that has a close() method, ignoring nullish entries. */
function closeAll(...objects) {
  for (const object of objects.flat()) if (object && typeof object.close === 'function') object.close();
}

// sleep_ms(unused, ms): one thread spins on the GPU's nanosecond timer for
// `ms` milliseconds (a dispatch needs a binding; it is not touched). The
// test double runs its own sleep_ms for the same time.
const SLEEP_PTX = `.version 7.0
.target sm_70
.address_size 64

.visible .entry sleep_ms(.param .u64 unused, .param .u32 ms)
{
  .reg .pred %p;
  .reg .b32 %r<2>;
  .reg .b64 %rd<6>;
  ld.param.u32 %r1, [ms];
  cvt.u64.u32 %rd1, %r1;
  mul.lo.u64 %rd2, %rd1, 1000000;
  mov.u64 %rd3, %globaltimer;
WAIT:
  mov.u64 %rd4, %globaltimer;
  sub.u64 %rd5, %rd4, %rd3;
  setp.lt.u64 %p, %rd5, %rd2;
  @%p bra WAIT;
  ret;
}
`;

/**
 * A HalModule + program Module + Context on a fresh device, for tests.
 * `define(builder)` adds executables and functions to ModuleBuilder(`name`);
 * an executable 'k' with the built-in kernels (CPU and CUDA) is always there.
 * close() closes everything it made.
 */
function makeProgram(uri, define, { name = 'm', hal: halOptions, instance: given } = {}) {
  const instance = given ?? new halrt.Instance();
  const device = instance.createDevice(uri);
  const builder = new halrt.ModuleBuilder(name).executable('k', BUILTIN);
  define(builder);
  const hal = new halrt.HalModule(instance, device, halOptions);
  const module = builder.build(instance);
  const context = new halrt.Context(instance, [hal, module]);
  return {
    instance,
    device,
    hal,
    module,
    context,
    lookup: (fn) => context.lookupFunction(`${name}.${fn}`),
    close() {
      closeAll(context, module, hal, device);
      if (!given) instance.close();
    },
  };
}

// JavaScript references for the built-in kernels (docs/kernels.md), f32
// arithmetic emulated with Math.fround.
const reference = {
  matmul(a, b, M, K, N) {
    const c = new Float32Array(M * N);
    for (let i = 0; i < M; ++i) {
      for (let j = 0; j < N; ++j) {
        let acc = 0;
        for (let k = 0; k < K; ++k) acc = Math.fround(acc + Math.fround(a[i * K + k] * b[k * N + j]));
        c[i * N + j] = acc;
      }
    }
    return c;
  },
  elementwise(a, b, op, Type) {
    const out = new Type(a.length);
    for (let i = 0; i < a.length; ++i) out[i] = op(a[i], b[i]);
    return out;
  },
  relu(x) {
    return Float32Array.from(x, (v) => (v > 0 ? v : 0));
  },
  softmaxRows(x, rows, cols) {
    const out = new Float32Array(rows * cols);
    for (let r = 0; r < rows; ++r) {
      const row = x.subarray(r * cols, (r + 1) * cols);
      const max = Math.max(...row);
      let sum = 0;
      for (const v of row) sum += Math.exp(v - max);
      for (let j = 0; j < cols; ++j) out[r * cols + j] = Math.exp(row[j] - max) / sum;
    }
    return out;
  },
  reduceSum(x, rows, cols) {
    const out = new Float32Array(rows);
    for (let r = 0; r < rows; ++r) {
      let sum = 0;
      for (let j = 0; j < cols; ++j) sum += x[r * cols + j];
      out[r] = sum;
    }
    return out;
  },
};

/** Asserts |actual[i] - expected[i]| <= atol + rtol * |expected[i]| for all i. */
function assertClose(actual, expected, { rtol = 1e-5, atol = 1e-6, what = 'values' } = {}) {
  assert.strictEqual(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; ++i) {
    const diff = Math.abs(actual[i] - expected[i]);
    assert.ok(diff <= atol + rtol * Math.abs(expected[i]),
      `${what}[${i}]: got ${actual[i]}, expected ${expected[i]}`);
  }
}

/** Deterministic pseudo-random floats in [-range, range), exact in f32. */
function randomFloats(count, seed, range = 4) {
  const out = new Float32Array(count);
  let state = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    out[i] = (Math.round((state / 4294967296) * 1024) / 1024 - 0.5) * 2 * range;
  }
  return out;
}

/**
 * Runs `script` in a child Node with `halrt`, `args` (given as JSON) and
 * `settle(fn)` ('ok', or {code, message} of what fn threw) in scope; returns
 * what it printed, parsed as JSON. For reads that hang or exhaust memory
 * should the rule refusing them regress: the child is killed, not mocha.
 */
function inChild(script, args) {
  const source = `const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
    const args = JSON.parse(process.argv[1]);
    const settle = (fn) => { try { fn(); return 'ok'; } catch (error) { return { code: error.code, message: error.message }; } };
    ${script}`;
  const result = spawnSync(process.execPath, ['-e', source, JSON.stringify(args)], { encoding: 'utf8', timeout: 20000 });
  assert.strictEqual(result.signal, null, `the child was killed (${result.signal}): ${result.stderr}`);
  assert.strictEqual(result.status, 0, result.stderr);
  return JSON.parse(result.stdout);
}

/**
 * Files that lib/files.js and src/base/file.h refuse: {zero: '/dev/zero',
 * dir, fifo, big}, `dir` a new folder holding a FIFO and a sparse file of
 * `bigBytes` bytes, both named after `name`; `cleanup()` removes the folder.
 */
function unreadableFiles(name, bigBytes) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-files-'));
  const fifo = path.join(dir, `fifo-${name}`);
  const mkfifo = spawnSync('mkfifo', [fifo]);
  assert.strictEqual(mkfifo.status, 0, String(mkfifo.stderr));
  const big = path.join(dir, `big-${name}`);
  fs.writeFileSync(big, '');
  fs.truncateSync(big, bigBytes);
  return {
    dir, fifo, big, zero: '/dev/zero',
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * The name the native npy sink gives tensor `index` of a trace of `key` in
 * invocation `sequence`, computed here from its documented rule
 * (src/modules/sinks/npy_sink.h): "<sequence>_<prefix>-<FNV-1a of the key>_<index>.npy".
 */
function npyFileName(sequence, key, index) {
  const bytes = Buffer.from(key, 'utf8');
  let hash = 2166136261;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 16777619) >>> 0;
  const prefix = [...bytes.subarray(0, 64)].map((b) => (/[A-Za-z0-9_.-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : '_')).join('');
  return `${sequence}_${prefix}-${hash.toString(16).padStart(8, '0')}_${index}.npy`;
}

/** The lines of the npy sink's index.jsonl in `dir`, parsed. */
function readNpyIndex(dir) {
  return fs.readFileSync(path.join(dir, 'index.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line));
}

module.exports = {
  FAKE_CUDA,
  SLEEP_PTX,
  TEST_KERNELS,
  plantedModule,
  buildNativeFixtures,
  UNDER_SANITIZER,
  ARRAY_TYPES,
  BUILTIN,
  DEFAULT_DEVICE_URIS,
  DEVICE_URIS,
  cudaDriver,
  deviceUrisFromEnv,
  sampleData,
  elementCount,
  assertThrowsHalrt,
  assertRejectsHalrt,
  assertClose,
  settleLiveObjects,
  liveBaseline,
  tick,
  waitFor,
  busyWait,
  closeAll,
  makeProgram,
  randomFloats,
  npyFileName,
  readNpyIndex,
  reference,
  inChild,
  unreadableFiles,
};

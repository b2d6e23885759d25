'use strict';
// Shared machinery of the property suites (test/property.test.js and the
// child script test/support/property-reentrancy.js): the fixed seed, run
// counts, the outcome checks (a HalrtError with a documented code, never
// anything else) and deterministic test data.
//
//   HALRT_PROPERTY_SEED  the fast-check seed (an integer; default below)
//   HALRT_PROPERTY_RUNS  multiplies every property's numRuns (default 1)
//   HALRT_PROPERTY_LOG=1 writes each generated case to stderr before it runs,
//                        so that the last line names the case of a crash

const assert = require('assert');
const util = require('util');
const fc = require('fast-check');
const halrt = require('../..');

const DEFAULT_SEED = 20240611;

function integerFromEnv(name, fallback, parse = Number) {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return fallback;
  const value = parse(text);
  if (!Number.isFinite(value)) throw new Error(`${name}=${JSON.stringify(text)} is not a number`);
  return value;
}

const SEED = integerFromEnv('HALRT_PROPERTY_SEED', DEFAULT_SEED, (text) => Number.parseInt(text, 10)) | 0;
const RUNS = integerFromEnv('HALRT_PROPERTY_RUNS', 1);
const LOG = process.env.HALRT_PROPERTY_LOG === '1';

/** numRuns scaled by HALRT_PROPERTY_RUNS. */
function runs(numRuns) {
  return Math.max(1, Math.round(numRuns * RUNS));
}

const SUITE = 'npx mocha --no-config -n expose-gc test/property.test.js';

/** How to rerun: prefixed to every failure. */
function rerunHint(command = SUITE) {
  return `HALRT_PROPERTY_SEED=${SEED} HALRT_PROPERTY_RUNS=${RUNS} (rerun: HALRT_PROPERTY_SEED=${SEED} ` +
    `HALRT_PROPERTY_RUNS=${RUNS} ${command})`;
}

/**
 * fc.assert with the suite's seed and a scaled numRuns; the failure message
 * starts with the seed (fast-check adds the counterexample and, verbose,
 * the failures met while shrinking). `examples` (tuples of the property's
 * arguments) run first, whatever the seed.
 */
async function checkProperty(property, numRuns, { command, examples = [] } = {}) {
  try {
    await fc.assert(property, { seed: SEED, numRuns: runs(numRuns), verbose: 1, examples });
  } catch (error) {
    error.message = `${rerunHint(command)}\n${error.message}`;
    throw error;
  }
}

/** Writes the case to stderr first when HALRT_PROPERTY_LOG=1. */
function logCase(name, value) {
  if (LOG) process.stderr.write(`[property ${name}] ${fc.stringify(value)}\n`);
}

/** The documented status code names (index.d.ts StatusCode). */
const CODES = Object.freeze([
  'CANCELLED', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'FAILED_PRECONDITION',
  'RESOURCE_EXHAUSTED', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE',
  'DATA_LOSS', 'DEVICE_LOST',
]);

function describeError(error) {
  if (error instanceof Error) return `${error.constructor.name}${error.code ? ` [${error.code}]` : ''}: ${error.message}`;
  return `a thrown ${typeof error}: ${util.inspect(error)}`;
}

/**
 * Asserts `error` is a HalrtError with a documented code, and where given:
 * a code among `codes`, a message starting with one of `methods` + ':', and
 * containing every string of `parts`.
 */
function assertHalrtError(error, { codes, methods, parts = [] } = {}) {
  if (!(error instanceof halrt.HalrtError)) {
    const stack = error && typeof error.stack === 'string' ? `\n${error.stack.split('\n').slice(1, 5).join('\n')}` : '';
    assert.fail(`expected a HalrtError, got ${describeError(error)}${stack}`);
  }
  assert.ok(CODES.includes(error.code), `undocumented code ${JSON.stringify(error.code)}: ${error.message}`);
  if (codes) {
    assert.ok(codes.includes(error.code), `expected code ${codes.join('|')}, got ${error.code}: ${error.message}`);
  }
  assert.strictEqual(typeof error.message, 'string');
  if (methods) {
    assert.ok(methods.some((method) => error.message.startsWith(`${method}:`) || error.message.startsWith(`${method} `)),
      `message should start with ${methods.join(' or ')}: ${JSON.stringify(error.message)}`);
  }
  for (const part of parts) {
    assert.ok(error.message.includes(part), `message ${JSON.stringify(error.message)} lacks ${JSON.stringify(part)}`);
  }
}

/** Runs `fn`: {ok: true, value} or {ok: false, error} for a synchronous throw. */
function attempt(fn) {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Asserts `value` is a native Promise (a promise-returning method never
 * throws) and settles it: {ok: true, value} or {ok: false, error}.
 */
async function settle(value, what) {
  assert.ok(value instanceof Promise, `${what} must return a Promise, got ${util.inspect(value)}`);
  try {
    return { ok: true, value: await value };
  } catch (error) {
    return { ok: false, error };
  }
}

/** liveObjects() equals `baseline` now, or after GC and a few ticks. */
async function assertNoLeak(baseline, what = 'live objects after closing everything') {
  let live = halrt.liveObjects();
  if (JSON.stringify(live) === JSON.stringify(baseline)) return;
  for (let i = 0; i < 40; ++i) {
    if (global.gc) global.gc();
    await new Promise((resolve) => setTimeout(resolve, 5));
    live = halrt.liveObjects();
    if (JSON.stringify(live) === JSON.stringify(baseline)) return;
  }
  assert.deepStrictEqual(live, baseline, what);
}

/** Closes everything in `objects` that has a close(); close() must never throw. */
function closeEverything(objects) {
  for (const object of objects.splice(0).reverse()) {
    if (object && typeof object.close === 'function') object.close();
  }
}

/** Fills `bytes` deterministically from `seed`: random bits, 0/1 bytes or zeros. */
function fillBytes(bytes, seed, mode = 'bits') {
  let state = ((seed * 2654435761) >>> 0) || 1;
  for (let i = 0; i < bytes.length; ++i) {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    bytes[i] = mode === 'bits' ? state & 0xff : mode === 'bool' ? state & 1 : 0;
  }
}

/** The bytes of a TypedArray (a Buffer over the same memory). */
function bytesOf(array) {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

const ELEMENT_SIZE = Object.freeze({
  f16: 2, bf16: 2, f32: 4, f64: 8, i8: 1, u8: 1, i16: 2, u16: 2, i32: 4, u32: 4, i64: 8, u64: 8, bool: 1,
});

module.exports = {
  SEED,
  RUNS,
  LOG,
  CODES,
  ELEMENT_SIZE,
  runs,
  rerunHint,
  checkProperty,
  logCase,
  describeError,
  assertHalrtError,
  attempt,
  settle,
  assertNoLeak,
  closeEverything,
  fillBytes,
  bytesOf,
};

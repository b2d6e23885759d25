'use strict';
// Shared pieces of the benchmarks: timing, statistics, formatting, the
// reference addon, and module helpers. Every benchmark measures halrt and its
// baseline alternately in the same process (round robin), so that a noisy
// neighbour slows both sides of a ratio alike.

const path = require('path');
const halrt = require('..');

const ROOT = path.join(__dirname, '..');

function now() {
  return Number(process.hrtime.bigint()) / 1e9;
}

function sorted(values) {
  return Float64Array.from(values).sort();
}

// Nearest-rank percentile, p in [0, 100].
function percentile(values, p) {
  const s = sorted(values);
  if (s.length === 0) return NaN;
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[rank];
}

function median(values) {
  return percentile(values, 50);
}

// Calls `call` (async) `count` times in all, one after another: the seconds
// each call took.
async function latencies(call, count) {
  const times = new Float64Array(count);
  for (let i = 0; i < count; ++i) {
    const start = now();
    await call();
    times[i] = now() - start;
  }
  return times;
}

// Calls `call` (async) `count` times in all with at most `depth` calls in
// flight: the seconds until the last one settled.
async function inFlight(call, count, depth) {
  const start = now();
  let issued = 0;
  async function lane() {
    while (issued < count) {
      ++issued;
      await call();
    }
  }
  await Promise.all(Array.from({ length: Math.min(depth, count) }, lane));
  return now() - start;
}

// Runs each entry of `sides` (name -> async () => value) once per round, in
// turn, for `rounds` rounds, and returns name -> [values].
async function roundRobin(rounds, sides) {
  const results = {};
  for (const name of Object.keys(sides)) results[name] = [];
  for (let r = 0; r < rounds; ++r) {
    for (const [name, run] of Object.entries(sides)) {
      results[name].push(await run());
    }
  }
  return results;
}

function loadReference() {
  const file = path.join(ROOT, 'build', 'Release', 'halrt_bench_ref.node');
  try {
    return require(file);
  } catch (error) {
    throw new Error(`the reference addon is not built (${file}); run \`npm run build\``, { cause: error });
  }
}

// Formats a number with three significant digits and an SI prefix.
function si(value, unit) {
  if (!Number.isFinite(value)) return `${value} ${unit}`;
  const prefixes = [
    [1e9, 'G'],
    [1e6, 'M'],
    [1e3, 'k'],
    [1, ''],
    [1e-3, 'm'],
    [1e-6, 'µ'],
    [1e-9, 'n'],
  ];
  for (const [scale, prefix] of prefixes) {
    // 0.9995: a value that rounds up to 1000 of a prefix takes the next one.
    if (Math.abs(value) >= scale * 0.9995 || scale === 1e-9) {
      return `${(value / scale).toPrecision(3)} ${prefix}${unit}`;
    }
  }
  return `${value} ${unit}`;
}

function seconds(value) {
  return si(value, 's');
}

// MB/s with MB = 10^6 bytes.
function mbps(bytesPerSecond) {
  return `${(bytesPerSecond / 1e6).toFixed(0)} MB/s`;
}

// A module with the built-in kernels for every device kind.
function builtinModule(instance, name, functions) {
  return halrt.Module.fromObject(instance, {
    format: 'halrt.module/1',
    name,
    executables: { k: { local: { builtin: true }, cuda: { builtin: true } } },
    functions,
  });
}

function value(name, shape, dtype = 'f32') {
  return { name, dtype, shape };
}

function fillPattern(length, seed = 1) {
  const data = new Float32Array(length);
  for (let i = 0; i < length; ++i) data[i] = ((i * 37 + seed) % 17) - 8;
  return data;
}

// A row of the results table. `ratio` is computed so that `target` reads
// "ratio >= x" (higher is better) or "ratio <= x" (lower is better). `unit`
// (default '×') is what the ratio and the target are printed with, for a
// row whose target is an absolute figure.
function row({ group, name, halrt: halrtText, baseline, ratio, target, note, unit }) {
  let met = null;
  if (target && Number.isFinite(ratio)) {
    met = target.op === '>=' ? ratio >= target.value : ratio <= target.value;
  }
  return { group, name, halrt: halrtText, baseline, ratio, target, met, note, ...(unit ? { unit } : {}) };
}

// A row that could not be measured: `why` goes in the halrt column.
function unmeasured({ group, name, why, target, note, baseline = '-' }) {
  return { group, name, halrt: why, baseline, ratio: NaN, target, met: null, note };
}

module.exports = {
  halrt,
  ROOT,
  now,
  percentile,
  median,
  latencies,
  inFlight,
  roundRobin,
  loadReference,
  si,
  seconds,
  mbps,
  builtinModule,
  value,
  fillPattern,
  row,
  unmeasured,
};

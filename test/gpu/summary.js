#!/usr/bin/env node
'use strict';
// The end of test/gpu/run.sh: one table of every step and check (printed)
// and the figures as JSON for BENCHMARKS.md and docs/cuda.md.
//
//   node test/gpu/summary.js WORK OUT
//
// Reads WORK/steps.tsv (one line per step: name, result, seconds, figure;
// written by run.sh), WORK/checks.json (test/gpu/checks.js --json),
// WORK/bench.json (bench/run.js --json) and, from OUT, test_cuda.log,
// mocha.log and environment.txt; any of them may be missing (a step that
// did not run). Writes OUT/figures.json and prints the table.

const fs = require('fs');
const path = require('path');

const [work, out] = process.argv.slice(2);
if (!work || !out) {
  console.error('usage: node test/gpu/summary.js WORK OUT');
  process.exit(2);
}

const read = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null);
const readJson = (file) => {
  const text = read(file);
  return text === null ? null : JSON.parse(text);
};

const steps = (read(path.join(work, 'steps.tsv')) ?? '')
  .split('\n')
  .filter((line) => line.length > 0)
  .map((line) => {
    const [name, result, seconds, figure] = line.split('\t');
    return { name, result, seconds: Number(seconds), figure: figure ?? '' };
  });
const checks = readJson(path.join(work, 'checks.json'));
const bench = readJson(path.join(work, 'bench.json'));

// test_cuda: "N passed, M failed" and report_throughput's "  label  value" lines.
function testCudaFigures() {
  const log = read(path.join(out, 'test_cuda.log'));
  if (log === null) return null;
  const counts = log.match(/(\d+) passed, (\d+) failed/);
  const throughput = {};
  for (const match of log.matchAll(/^ {2}(add_f32 \(GB\/s\)|matmul_f32 [^ ]+ \(GFLOP\/s\))\s+([\d.]+)$/gm)) {
    throughput[match[1]] = Number(match[2]);
  }
  return { passed: counts ? Number(counts[1]) : null, failed: counts ? Number(counts[2]) : null, throughput };
}

function mochaFigures() {
  const log = read(path.join(out, 'mocha.log'));
  if (log === null) return null;
  const count = (word) => {
    const match = log.match(new RegExp(`(\\d+) ${word}`));
    return match ? Number(match[1]) : 0;
  };
  return { passing: count('passing'), failing: count('failing'), pending: count('pending') };
}

const testCuda = testCudaFigures();
const mocha = mochaFigures();
const benchRows = bench ? bench.map(({ name, halrt, baseline, ratio, testDouble, note }) => ({ name, halrt, baseline, ratio, testDouble, note })) : null;

// The key figures of each step, shown in the table beside what run.sh noted.
const keyFigures = {
  'C tests (test_cuda)': () => testCuda && [
    testCuda.passed !== null ? `${testCuda.passed} passed, ${testCuda.failed} failed` : '',
    ...Object.entries(testCuda.throughput).map(([label, value]) => `${label} ${value}`),
  ],
  'mocha (HALRT_TEST_DEVICES=cuda)': () => mocha && [`${mocha.passing} passing, ${mocha.failing} failing, ${mocha.pending} pending`],
  'bench (--quick --only cuda)': () => benchRows && benchRows
    .filter((r) => /invoke latency|add_f32|matmul_f32 512³ vs naive|^CUDA /.test(r.name))
    .map((r) => `${r.name.replace(/ \(cuda\)$/, '').replace(' vs naive C', '')}: ${r.halrt}` +
      (/^CUDA /.test(r.name) ? ` vs ${r.baseline}${r.ratio === null ? '' : ` (${Number(r.ratio.toPrecision(3))}×)`}` : '') +
      (r.testDouble ? ' [test double]' : '')),
  'checks (test/gpu/checks.js)': () => checks && [
    ['PASS', 'FAIL', 'SKIP'].map((result) => `${checks.rows.filter((r) => r.result === result).length} ${result}`).join(', '),
  ],
};

const table = [];
for (const step of steps) {
  const figures = keyFigures[step.name]?.() ?? [];
  table.push([step.name, step.result, step.seconds.toFixed(1), [step.figure, ...figures].filter(Boolean).join('; ')]);
  if (step.name.startsWith('checks') && checks) {
    for (const row of checks.rows) table.push([`  ${row.title}`, row.result, row.seconds.toFixed(1), row.summary]);
  }
}
const failed = steps.some((s) => s.result === 'FAIL') || (checks && checks.rows.some((r) => r.result === 'FAIL'));
const total = steps.reduce((sum, s) => sum + s.seconds, 0);
table.push(['total', failed ? 'FAIL' : 'PASS', total.toFixed(1), failed ? 'GPU CHECK FAILED' : 'GPU CHECK PASSED']);

const header = ['step / check', 'result', 'seconds', 'key figures'];
const width = [0, 1, 2].map((c) => Math.max(header[c].length, ...table.map((row) => [...row[c]].length)));
const line = (row) =>
  row.map((cell, c) => (c === 3 ? cell : c === 2 ? cell.padStart(width[c]) : cell + ' '.repeat(width[c] - [...cell].length))).join(' | ');
console.log([line(header), width.map((w) => '-'.repeat(w)).concat(['-----------']).join('-|-'), ...table.map(line)].join('\n'));

const environment = read(path.join(out, 'environment.txt'));
fs.writeFileSync(
  path.join(out, 'figures.json'),
  `${JSON.stringify({
    date: new Date().toISOString(),
    dryRun: process.env.HRT_GPU_DRY_RUN === '1',
    environment: environment ? environment.trim().split('\n') : null,
    result: failed ? 'FAIL' : 'PASS',
    steps,
    testCuda,
    mocha,
    bench: benchRows,
    checks: checks ? checks.rows : null,
  }, null, 2)}\n`,
);

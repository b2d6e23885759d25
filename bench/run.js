#!/usr/bin/env node
'use strict';
// halrt benchmarks: one table of halrt against baselines measured side by
// side in this process. See BENCHMARKS.md.
//
//   npm run bench                 full run (about 1–2 minutes on 2 cores)
//   npm run bench -- --quick      short smoke run (about 20 s)
//   node bench/run.js --only trace,invoke --no-install
//
// Options: --quick; --only GROUPS (comma-separated: trace, invoke, dispatch,
// alloc, models, cuda); --no-install (never npm-install onnxruntime-node; its rows are then
// "unavailable"); --json FILE (also write the rows as JSON).
// Exit status: 0 when every benchmark ran (missed targets included), 1 when
// one failed to run, 2 for bad options (--help prints the usage).

const os = require('os');
const fs = require('fs');
const { parseArgs } = require('util');
const { halrt, loadReference, unmeasured } = require('./common');
const { loadOrt } = require('./ort');
const trace = require('./trace');
const { invokeOverhead, hostCall } = require('./invoke');
const { allocatingCall } = require('./alloc');
const dispatch = require('./dispatch');
const cuda = require('./cuda');
const { modelRows } = require('./models');

const GROUPS = ['trace', 'invoke', 'dispatch', 'alloc', 'models', 'cuda'];

const USAGE = `usage: node bench/run.js [--quick] [--only ${GROUPS.join(',')}] [--no-install] [--json FILE]`;

// The options, or null after printing the usage (--help) or why they are
// wrong (exit status 2).
function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        quick: { type: 'boolean', default: false },
        only: { type: 'string' },
        'no-install': { type: 'boolean', default: false },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    process.stderr.write(`bench/run.js: ${error.message}\n${USAGE}\n`);
    process.exitCode = 2;
    return null;
  }
  if (values.help) {
    console.log(USAGE);
    return null;
  }
  const only = values.only ? values.only.split(',').map((s) => s.trim()) : GROUPS;
  for (const group of only) {
    if (!GROUPS.includes(group)) {
      process.stderr.write(`bench/run.js: --only: unknown group '${group}' (${GROUPS.join(', ')})\n${USAGE}\n`);
      process.exitCode = 2;
      return null;
    }
  }
  return { quick: values.quick, only, allowInstall: !values['no-install'], json: values.json };
}

function log(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

function ratioText(r) {
  if (!r.target && !Number.isFinite(r.ratio)) return '-';
  if (!Number.isFinite(r.ratio)) return '-';
  return `${r.ratio.toFixed(r.ratio >= 10 ? 1 : 2)}${r.unit ?? '×'}`;
}

function targetText(r) {
  if (!r.target) return 'report';
  return `${r.target.op === '>=' ? '≥' : '≤'} ${r.target.value}${r.unit ?? '×'}`;
}

function resultText(r) {
  if (r.error) return 'ERROR';
  if (r.testDouble) return 'test double';
  if (!r.target) return '-';
  if (r.met === null) return 'n/a';
  return r.met ? 'met' : 'MISSED';
}

function printTable(rows) {
  const header = ['#', 'benchmark', 'halrt', 'baseline', 'ratio', 'target', 'result'];
  const cells = rows.map((r, i) => [
    String(i + 1),
    r.name,
    r.halrt,
    r.baseline,
    ratioText(r),
    targetText(r),
    resultText(r),
  ]);
  const width = header.map((h, c) => Math.max(h.length, ...cells.map((row) => [...row[c]].length)));
  const line = (row) => row.map((cell, c) => cell + ' '.repeat(width[c] - [...cell].length)).join(' | ');
  const out = [line(header), width.map((w) => '-'.repeat(w)).join('-|-'), ...cells.map(line)];
  console.log(out.join('\n'));
  console.log('\nWhat each row measures (ratio: halrt relative to the baseline, oriented as the target reads):');
  rows.forEach((r, i) => console.log(`${i + 1}. ${r.note}`));
}

function cpuName() {
  const cpus = os.cpus();
  return cpus.length ? cpus[0].model.trim() : 'unknown CPU';
}

function cudaDriver() {
  return halrt.drivers().find((d) => d.name === 'cuda');
}

// The CUDA rows: rows 1–4 measured with the same code when a GPU is usable
// (report only: the baselines are CPU ones), then launch overhead and trace
// D2H against the driver alone (bench/cuda.js); otherwise "unmeasured (no
// GPU)". On the driver test double every row runs but is marked as such,
// with no verdict.
async function cudaRows(context) {
  const driver = cudaDriver();
  const names = [
    'trace delivery, 16×f32 (cuda)',
    'trace delivery, 4 MiB f32 (cuda)',
    "trace delivery, 4 MiB f32, traceData 'borrowed' (cuda)",
    'invoke latency p50 (cuda)',
    'add_f32 64 MiB (cuda)',
    'matmul_f32 512³ (cuda)',
  ];
  const driverRows = [
    ['CUDA launch overhead vs raw cuLaunchKernel loop (cuda)', { op: '<=', value: 1.3 }],
    ["CUDA trace D2H vs pinned memcpy, 16 MiB f32, traceData 'borrowed' (cuda)", { op: '>=', value: 0.8 }],
  ];
  if (!driver || !driver.available) {
    const why = driver ? driver.reason.split(': ').slice(0, 2).join(': ') : 'no cuda driver in this build';
    return [...names.map((name) => [name, null]), ...driverRows].map(([name, target]) =>
      unmeasured({ group: 'cuda', name, why: 'unmeasured (no GPU)', target, note: `${name}: not run (${why})` }),
    );
  }
  const device = context.instance.createDevice('cuda');
  const cudaContext = { ...context, device, uri: 'cuda', uris: ['cuda'] };
  const rows = [];
  for (const run of [trace.traceSmall, trace.traceLarge, invokeOverhead, dispatch.addLarge, dispatch.matmul]) {
    rows.push(...(await guarded(run.name, () => run(cudaContext))));
  }
  // CPU baselines: the figures are reported, not held to the CPU targets.
  const marked = rows.map((r) => ({ ...r, group: 'cuda', target: null, met: null, note: `[cuda, report only] ${r.note}` }));
  for (const run of [cuda.launchOverheadRow, cuda.traceD2hRow]) {
    marked.push(...(await guarded(run.name, () => run(cudaContext))));
  }
  if (!cuda.TEST_DOUBLE) return marked;
  return marked.map((r) => ({
    ...r,
    met: null,
    testDouble: true,
    note: `[cuda TEST DOUBLE (${process.env.HALRT_CUDA_LIBRARY}): the figures say nothing about a GPU] ${r.note}`,
  }));
}

const failures = [];

async function guarded(name, run) {
  try {
    return await run();
  } catch (error) {
    failures.push(name);
    log(`${name} failed: ${error.stack || error}`);
    return [
      {
        group: 'error',
        name,
        halrt: `failed (${String(error.message || error).split('\n')[0]})`,
        baseline: '-',
        ratio: NaN,
        target: null,
        met: null,
        error: true,
        note: `${name}: did not run to completion (see the log above)`,
      },
    ];
  }
}

async function main() {
  const opts = options();
  if (opts === null) return;
  const started = Date.now();
  const ref = loadReference();
  const instance = new halrt.Instance();
  const needsOrt = ['invoke', 'dispatch', 'models'].some((group) => opts.only.includes(group));
  const ort = needsOrt ? loadOrt({ allowInstall: opts.allowInstall, log }) : { unavailable: 'not needed' };
  if (ort.unavailable && needsOrt) log(`onnxruntime-node unavailable: ${ort.unavailable}`);
  const device = instance.createDevice('local-task');
  const context = { quick: opts.quick, ref, instance, device, ort, uri: 'local-task', uris: ['local-sync', 'local-task'] };

  console.log(
    `halrt benchmarks${opts.quick ? ' (--quick: fewer repetitions, figures are rough)' : ''}\n` +
      `date ${new Date().toISOString()}; ${cpuName()}, ${os.cpus().length} logical CPUs, ` +
      `${(os.totalmem() / 2 ** 30).toFixed(0)} GiB; node ${process.version}; ` +
      `local-task ${device.info.workerCount} workers; ` +
      `onnxruntime-node ${ort.ort ? ort.ort.env.versions.common : `unavailable (${ort.unavailable})`}\n`,
  );

  const plan = [];
  if (opts.only.includes('trace')) {
    plan.push(['trace small', () => trace.traceSmall(context)], ['trace large', () => trace.traceLarge(context)]);
  }
  if (opts.only.includes('invoke')) {
    plan.push(['invoke overhead', () => invokeOverhead(context)], ['host call', () => hostCall(context)]);
  }
  if (opts.only.includes('dispatch')) {
    plan.push(['add_f32', () => dispatch.addLarge(context)], ['matmul_f32', () => dispatch.matmul(context)],
      ['program call', () => dispatch.programCall(context)]);
  }
  if (opts.only.includes('trace')) {
    plan.push(['trace overhead', () => trace.traceOverhead(context)], ['trace loop lag', () => trace.traceLoopLag(context)]);
  }
  if (opts.only.includes('alloc')) plan.push(['allocating call', () => allocatingCall(context)]);
  if (opts.only.includes('models')) plan.push(['ONNX models', () => modelRows(context)]);
  if (opts.only.includes('cuda')) plan.push(['cuda', () => cudaRows(context)]);

  const rows = [];
  for (const [name, run] of plan) {
    const t0 = Date.now();
    rows.push(...(await guarded(name, run)));
    log(`${name}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  printTable(rows);
  console.log(`\ntotal ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (opts.json) fs.writeFileSync(opts.json, `${JSON.stringify(rows, null, 2)}\n`);
  if (failures.length) {
    console.log(`\n${failures.length} benchmark(s) failed to run: ${failures.join(', ')}`);
    process.exitCode = 1;
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

'use strict';
// The CUDA rows measured against the driver alone (BENCHMARKS.md row 6):
// launch overhead against a raw cuLaunchKernel loop, and traced bytes
// reaching the sink against a raw pinned cuMemcpyDtoHAsync. Both raw sides
// are test/gpu/launch_loop.c (built into build/gpu/launch_loop by
// test/gpu/prepare.sh or test/gpu/run.sh; HRT_GPU_LAUNCH_LOOP names another
// build), run as a child process after halrt's rounds.
//
// measureLaunch is also test/gpu/checks.js's launch check, which keeps its
// own verdicts. On the driver test double (HALRT_CUDA_LIBRARY naming
// libfakecuda, TEST_DOUBLE) everything runs, but the figures say nothing
// about a GPU: bench/run.js marks them as test-double figures, with no
// verdict.

const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { halrt, ROOT, median, fillPattern, mbps, row } = require('./common');
const { burstContext, invokeMany } = require('./trace');

const PTX = path.join(ROOT, 'test', 'gpu', 'kernels.ptx');
const LAUNCH_LOOP = process.env.HRT_GPU_LAUNCH_LOOP || path.join(ROOT, 'build', 'gpu', 'launch_loop');
const TEST_DOUBLE = /libfakecuda/.test(process.env.HALRT_CUDA_LIBRARY ?? '');
const BUILD_HINT = 'build it with `bash test/gpu/prepare.sh` (or cc, as test/gpu/run.sh does)';

const nowNs = () => Number(process.hrtime.bigint());
const round3 = (value) => Number(value.toPrecision(3));

/**
 * Runs launch_loop with `args`: { result } (its JSON line), or { missing }
 * or { failure } with a one-line reason.
 */
function runLaunchLoop(args) {
  if (!fs.existsSync(LAUNCH_LOOP)) return { missing: `${LAUNCH_LOOP} is not built` };
  const raw = spawnSync(LAUNCH_LOOP, args, { encoding: 'utf8', timeout: 60000 });
  if (raw.status !== 0) {
    return { failure: `launch_loop failed (${raw.signal ?? `exit ${raw.status}`}): ${(raw.stderr ?? '').trim()}` };
  }
  return { result: JSON.parse(raw.stdout) };
}

/**
 * halrt's marginal cost per dispatch on `device` (cuda) against
 * launch_loop's marginal cost per cuLaunchKernel, both for write_index_u32
 * (one block of 32 threads): a function of `count` dispatches and one of 1
 * dispatch, invoked alternately, medians of `rounds` rounds after 2 warm-up
 * rounds; marginal = (many - one) / (count - 1).
 *
 * Returns { correct (halrt's output held 0..31), figures, halrtText, loop
 * (launch_loop's JSON, or null), missing, failure (launch_loop's reason, or
 * null) }; figures.ratio is halrt's marginal over the raw one.
 */
async function measureLaunch(instance, device, { count, rounds }) {
  const hal = new halrt.HalModule(instance, device);
  const dispatch = { workgroups: [1], workgroupSize: [32], bindings: ['out'], constants: [32] };
  const builder = new halrt.ModuleBuilder('l').executable('t', { cuda: { ptx: PTX, entries: { write_index_u32: {} } } });
  for (const [name, dispatches] of [['one', 1], ['many', count]]) {
    builder.function(name, (f) => {
      f.output('out', 'u32', [32]);
      for (let i = 0; i < dispatches; ++i) f.dispatch('t.write_index_u32', dispatch);
    });
  }
  const module = builder.build(instance);
  const context = new halrt.Context(instance, [hal, module]);
  const times = { one: [], many: [] };
  let correct = true;
  try {
    const fns = { one: context.lookupFunction('l.one'), many: context.lookupFunction('l.many') };
    try {
      for (let r = 0; r < rounds + 2; ++r) {
        for (const name of ['many', 'one']) {
          const start = nowNs();
          const [out] = await fns[name].invoke([]);
          const elapsed = nowNs() - start;
          if (r === 0) {
            const words = await out.read();
            correct = correct && words.every((w, i) => w === i);
          }
          out.close();
          if (r >= 2) times[name].push(elapsed);
        }
      }
    } finally {
      fns.one.close();
      fns.many.close();
    }
  } finally {
    context.close();
    module.close();
    hal.close();
  }
  const one = median(times.one);
  const many = median(times.many);
  const figures = {
    dispatches: count,
    rounds,
    halrtInvokeOneUs: round3(one / 1e3),
    halrtInvokeManyUs: round3(many / 1e3),
    halrtUsPerDispatch: round3(many / count / 1e3),
    halrtMarginalUs: round3((many - one) / (count - 1) / 1e3),
  };
  const halrtText = `halrt ${figures.halrtMarginalUs} µs/dispatch (${count} in one invoke; ${figures.halrtInvokeOneUs} µs for 1)`;
  const raw = runLaunchLoop([PTX, String(count), String(rounds)]);
  const loop = raw.result ?? null;
  if (loop) {
    Object.assign(figures, {
      rawUsPerLaunch: round3(loop.usPerLaunch),
      rawMarginalUs: round3(loop.marginalUs),
      rawSingleLaunchSyncUs: round3(loop.singleUs),
      ratio: round3((many - one) / (count - 1) / 1e3 / loop.marginalUs),
    });
  }
  return { correct, figures, halrtText, loop, missing: raw.missing ?? null, failure: raw.failure ?? null };
}

/** The launch-overhead row (target ≤ 1.3×). */
async function launchOverheadRow({ quick, instance, device }) {
  const rounds = quick ? 5 : 20;
  const count = TEST_DOUBLE ? 200 : 1000;
  const m = await measureLaunch(instance, device, { count, rounds });
  if (!m.correct) throw new Error('write_index_u32 through halrt wrote wrong words');
  if (m.failure) throw new Error(m.failure);
  if (m.loop && m.loop.check !== 'ok') throw new Error(`launch_loop: ${m.loop.check}`);
  const { figures } = m;
  return [
    row({
      group: 'cuda',
      name: 'CUDA launch overhead vs raw cuLaunchKernel loop (cuda)',
      halrt: `${figures.halrtMarginalUs} µs/dispatch`,
      baseline: m.loop ? `${figures.rawMarginalUs} µs/launch raw` : `not measured: ${m.missing}; ${BUILD_HINT}`,
      ratio: m.loop ? figures.ratio : NaN,
      target: { op: '<=', value: 1.3 },
      note:
        `marginal cost of one more dispatch: a function of ${count} dispatches of write_index_u32 (one block of 32 ` +
        `threads, test/gpu/kernels.ptx) and one of 1, invoked alternately, (many − one) / ${count - 1}, medians of ` +
        `${rounds} rounds (${figures.halrtInvokeOneUs} µs per invoke of 1, ${figures.halrtInvokeManyUs} µs of ` +
        `${count}); baseline: the same kernel launched with cuLaunchKernel in a plain loop on one stream ` +
        `(test/gpu/launch_loop.c, a child process after halrt's rounds), the same marginal figure` +
        (m.loop ? ` (${figures.rawUsPerLaunch} µs/launch over the loop, ${figures.rawSingleLaunchSyncUs} µs for 1 launch and a sync)` : ''),
    }),
  ];
}

/** The trace D2H row (target ≥ 0.8×). */
async function traceD2hRow({ quick, instance, device }) {
  const elements = 1 << 22; // 16 MiB of f32
  const bytes = elements * 4;
  const tracesPerCall = 4;
  const calls = quick || TEST_DOUBLE ? 4 : 16; // the double's figures mean nothing: kept short
  const rounds = quick ? 3 : 7;
  const items = tracesPerCall * calls;
  let received = 0;
  const sink = (key, tensors) => {
    if (tensors[0].data.length === elements) ++received;
  };
  const { context, fn } = burstContext(instance, device, [elements], tracesPerCall, sink, { traceData: 'borrowed' });
  const x = device.tensor(fillPattern(elements), [elements]);
  let h;
  try {
    await invokeMany(fn, [x], 1, 1); // warm-up
    const rates = [];
    for (let r = 0; r < rounds; ++r) {
      received = 0;
      const elapsed = await invokeMany(fn, [x], calls, 2);
      if (received !== items) throw new Error(`trace D2H: ${received} of ${items} traces arrived`);
      rates.push((items * bytes) / elapsed);
    }
    h = median(rates);
  } finally {
    fn.close();
    context.close();
    x.close();
  }
  const raw = runLaunchLoop(['--d2h', String(bytes), String(tracesPerCall * 2), String(rounds)]);
  if (raw.failure) throw new Error(raw.failure);
  if (raw.result && raw.result.check !== 'ok') throw new Error(`launch_loop --d2h: ${raw.result.check}`);
  const b = raw.result ? raw.result.bytesPerSecond : NaN;
  return [
    row({
      group: 'cuda',
      name: "CUDA trace D2H vs pinned memcpy, 16 MiB f32, traceData 'borrowed' (cuda)",
      halrt: mbps(h),
      baseline: raw.result ? `${mbps(b)} pinned D2H` : `not measured: ${raw.missing}; ${BUILD_HINT}`,
      ratio: h / b,
      target: { op: '>=', value: 0.8 },
      note:
        `traced bytes/s reaching the JS sink from a cuda device, HalModule traceData 'borrowed': ${calls} invocations ` +
        `(2 in flight) of a function with ${tracesPerCall} trace ops of one f32[${elements}] (16 MiB) input, medians ` +
        `of ${rounds} rounds; baseline: cuMemcpyDtoHAsync of the same 16 MiB from device memory into pinned host ` +
        `memory (cuMemAllocHost), ${tracesPerCall * 2} per round on one stream then cuStreamSynchronize, median of ` +
        `${rounds} rounds (test/gpu/launch_loop.c --d2h, a child process after halrt's rounds)`,
    }),
  ];
}

module.exports = { TEST_DOUBLE, LAUNCH_LOOP, PTX, measureLaunch, launchOverheadRow, traceD2hRow };

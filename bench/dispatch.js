'use strict';
// CPU dispatch: the built-in add_f32 and matmul_f32 kernels on local-task
// against plain C loops (reference addon, same compiler flags as halrt) and
// onnxruntime-node's MatMul.

const { halrt, median, latencies, roundRobin, builtinModule, value, fillPattern, seconds, row } = require('./common');
const { matmulModel } = require('./onnx');
const { sessionOptions } = require('./ort');

const GROUP = 'dispatch';

// A function whose inputs are all its bindings (the kernel writes the last
// input), so a call allocates nothing and times the dispatch itself plus
// the fixed invocation overhead.
function inPlaceFunction(instance, device, name, shapes, dispatch) {
  const hal = new halrt.HalModule(instance, device, {});
  const names = shapes.map((_, i) => String.fromCharCode(97 + i));
  const module = builtinModule(instance, 'd', {
    [name]: {
      inputs: shapes.map((shape, i) => value(names[i], shape)),
      outputs: [],
      body: [{ op: 'dispatch', ...dispatch, bindings: names }],
    },
  });
  const fn = new halrt.Context(instance, [hal, module]).lookupFunction(`d.${name}`);
  const inputs = shapes.map((shape, i) => {
    const count = shape.reduce((a, b) => a * b, 1);
    return device.tensor(i === shapes.length - 1 ? new Float32Array(count) : fillPattern(count, i + 1), shape);
  });
  return { fn, inputs };
}

// Median seconds of `reps` sequential invocations.
async function timeInvoke({ fn, inputs }, reps) {
  return median(await latencies(() => fn.invoke(inputs), reps));
}

// 4a. add_f32 over 64 MiB tensors.
async function addLarge({ quick, ref, instance, uri }) {
  const n = 16 << 20; // 64 MiB of f32 per tensor
  const reps = quick ? 2 : 5;
  const rounds = quick ? 2 : 7;
  const device = instance.createDevice(uri);
  const workgroups = 256;
  const add = inPlaceFunction(instance, device, 'add', [[n], [n], [n]], {
    kernel: 'k.add_f32',
    workgroups: [workgroups],
    constants: [n],
  });
  await timeInvoke(add, 1);
  const results = await roundRobin(rounds, {
    halrt: () => timeInvoke(add, reps),
    loop: async () => median(ref.addTimes(n, reps)),
    memcpy: async () => median(ref.memcpyTimes(n * 4, reps, 0)),
  });
  const h = median(results.halrt);
  const c = median(results.loop);
  const m = median(results.memcpy);
  const gbs = (t) => `${((3 * n * 4) / t / 1e9).toFixed(1)} GB/s`;
  const workers = device.info.workerCount;
  device.close();
  return [
    row({
      group: GROUP,
      name: `add_f32 64 MiB (${uri})`,
      halrt: `${seconds(h)} ${gbs(h)}`,
      baseline: `${seconds(c)} ${gbs(c)} C loop`,
      ratio: c / h,
      target: { op: '>=', value: 0.7 },
      note:
        `time of one \`await fn.invoke\` of add_f32 over f32[${n}] (${workgroups} workgroups, ${workers} ` +
        `workers, output bound to an input so nothing is allocated per call; GB/s counts 3×64 MiB moved), ` +
        `median of ${rounds}×${reps}; baseline: single-threaded C loop c[i] = a[i] + b[i] timed natively, ` +
        `same -O3 flags; ratio = C time / halrt time (memcpy of 64 MiB, warm: ${seconds(m)}, ` +
        `${((2 * n * 4) / m / 1e9).toFixed(1)} GB/s counting read + write)`,
    }),
  ];
}

// 4b. matmul_f32 512×512×512.
async function matmul({ quick, ref, instance, ort, uri }) {
  const size = 512;
  const flops = 2 * size ** 3;
  const reps = quick ? 3 : 10;
  const rounds = quick ? 2 : 9;
  const device = instance.createDevice(uri);
  const tiles = 8;
  const mm = inPlaceFunction(
    instance,
    device,
    'matmul',
    [
      [size, size],
      [size, size],
      [size, size],
    ],
    { kernel: 'k.matmul_f32', workgroups: [tiles, tiles], constants: [size, size, size] },
  );
  await timeInvoke(mm, 1);
  const sides = {
    halrt: () => timeInvoke(mm, reps),
    naive: async () => median(ref.matmulTimes(size, quick ? 1 : 2)),
  };
  if (ort.ort) {
    const session = await ort.ort.InferenceSession.create(matmulModel(size, size, size), sessionOptions(2));
    const feeds = {
      a: new ort.ort.Tensor('float32', fillPattern(size * size, 1), [size, size]),
      b: new ort.ort.Tensor('float32', fillPattern(size * size, 2), [size, size]),
    };
    // The same model on one intra-op thread: a figure that contention on
    // a shared machine distorts less than the two-thread one.
    const single = await ort.ort.InferenceSession.create(matmulModel(size, size, size), sessionOptions(1));
    await session.run(feeds);
    await single.run(feeds);
    const timeRuns = async (s) => median(await latencies(() => s.run(feeds), reps));
    sides.ort = () => timeRuns(session);
    sides.ort1 = () => timeRuns(single);
  }
  const results = await roundRobin(rounds, sides);
  const h = median(results.halrt);
  const naive = median(results.naive);
  const gflops = (t) => `${(flops / t / 1e9).toFixed(1)} GFLOP/s`;
  const workers = device.info.workerCount;
  device.close();
  const common =
    `GFLOP/s of one \`await fn.invoke\` of matmul_f32 ${size}×${size}×${size} (${tiles}×${tiles} ` +
    `workgroups, ${workers} workers, output bound to an input), median of ${rounds}×${reps}`;
  const rows = [];
  if (ort.ort) {
    const o = median(results.ort);
    rows.push(
      row({
        group: GROUP,
        name: `matmul_f32 512³ vs ORT (${uri})`,
        halrt: gflops(h),
        baseline: `${gflops(o)} ORT`,
        ratio: o / h,
        target: { op: '>=', value: 0.3 },
        note:
          `${common}; baseline: onnxruntime-node MatMul (CPU EP, 2 intra-op threads) \`await session.run\` ` +
          `(the same on 1 intra-op thread: ${gflops(median(results.ort1))})`,
      }),
    );
  } else {
    rows.push({
      group: GROUP,
      name: `matmul_f32 512³ vs ORT (${uri})`,
      halrt: gflops(h),
      baseline: `unavailable (${ort.unavailable})`,
      ratio: NaN,
      target: { op: '>=', value: 0.3 },
      met: null,
      note: `${common}; baseline: onnxruntime-node MatMul`,
    });
  }
  rows.push(
    row({
      group: GROUP,
      name: `matmul_f32 512³ vs naive C (${uri})`,
      halrt: gflops(h),
      baseline: `${gflops(naive)} naive C`,
      ratio: naive / h,
      target: null,
      note: `${common}; baseline: naive i-j-k C loop, single thread, same -O3 flags, timed natively`,
    }),
  );
  return rows;
}

// 4c. A program calling a function of another program module, against the
// same ops written in the caller.
async function programCall({ quick, instance, uri }) {
  const n = 1024;
  const ops = 8;
  const reps = quick ? 200 : 1000;
  const rounds = quick ? 3 : 7;
  const device = instance.createDevice(uri);
  const body = Array.from({ length: ops }, () => ({ op: 'dispatch', kernel: 'k.add_f32', workgroups: [1], bindings: ['a', 'b', 'b'], constants: [n] }));
  const io = { inputs: [value('a', [n]), value('b', [n])], outputs: [] };
  const hal = new halrt.HalModule(instance, device, {});
  const lib = builtinModule(instance, 'lib', { f: { ...io, body } });
  const caller = builtinModule(instance, 'app', {
    called: { ...io, body: [{ op: 'call', callee: 'lib.f', args: ['a', 'b'], results: [] }] },
    inlined: { ...io, body },
  });
  const context = new halrt.Context(instance, [hal, lib, caller]);
  const inputs = [device.tensor(fillPattern(n), [n]), device.tensor(new Float32Array(n), [n])];
  const called = context.lookupFunction('app.called');
  const inlined = context.lookupFunction('app.inlined');
  const time = async (fn) => median(await latencies(() => fn.invoke(inputs), reps));
  await time(called);
  await time(inlined);
  const results = await roundRobin(rounds, { called: () => time(called), inlined: () => time(inlined) });
  const c = median(results.called);
  const i = median(results.inlined);
  for (const object of [...inputs, called, inlined, context, caller, lib, hal, device]) object.close();
  return [
    row({
      group: GROUP,
      name: `program call vs the ops inlined (${uri})`,
      halrt: seconds(c),
      baseline: `${seconds(i)} inlined`,
      ratio: c / i,
      target: { op: '<=', value: 1.1 },
      note:
        `time of one \`await fn.invoke\` of a function whose body is one call op to lib.f (${ops} add_f32 over ` +
        `f32[${n}] on its inputs, nothing allocated), median of ${rounds}×${reps}; baseline: the same ${ops} ` +
        'dispatches written in the calling function; ratio = call time / inlined time',
    }),
  ];
}

module.exports = { addLarge, matmul, programCall };

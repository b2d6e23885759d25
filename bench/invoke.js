'use strict';
// Invocation overhead: `await fn.invoke()` of a one-dispatch function on tiny
// tensors, against the bare asynchronous round trip of the reference addon
// (latency) and onnxruntime-node running the same Add through session.run
// (throughput; its latency is printed beside); and the JS thread's work per
// call with 64 in flight, for fn.invoke() and for runs of a PreparedCall.

const {
  halrt,
  percentile,
  latencies,
  inFlight,
  roundRobin,
  builtinModule,
  value,
  fillPattern,
  seconds,
  si,
  row,
  unmeasured,
} = require('./common');
const { addModel } = require('./onnx');
const { sessionOptions } = require('./ort');

const GROUP = 'invoke';
const N = 16; // elements per tensor
const DEPTH = 64; // invocations in flight for the throughput figure

// {rate, cpu}: calls per second with `depth` calls in flight, `count` calls
// in all, and the CPU time of the JS thread itself per call over that run
// (CLOCK_THREAD_CPUTIME_ID read through the reference addon before and
// after: the JS thread's own work, not the other threads').
async function throughput(ref, call, count, depth) {
  const cpu0 = ref.threadCpuTime();
  const elapsed = await inFlight(call, count, depth);
  const cpu = (ref.threadCpuTime() - cpu0) / count;
  return { rate: count / elapsed, cpu };
}

function halrtAdd(instance, device) {
  const hal = new halrt.HalModule(instance, device, {});
  const module = builtinModule(instance, 'm', {
    add: {
      inputs: [value('a', [N]), value('b', [N])],
      outputs: [value('c', [N])],
      body: [{ op: 'dispatch', kernel: 'k.add_f32', workgroups: [1], bindings: ['a', 'b', 'c'], constants: [N] }],
    },
  });
  const fn = new halrt.Context(instance, [hal, module]).lookupFunction('m.add');
  const inputs = [device.tensor(fillPattern(N, 1), [N]), device.tensor(fillPattern(N, 2), [N])];
  const call = fn.prepare(inputs);
  return {
    invoke: async () => {
      const [c] = await fn.invoke(inputs);
      c.close();
    },
    // Each run writes its result into call.outputs[0].
    run: () => call.run(),
  };
}

async function ortAdd(ort) {
  const session = await ort.ort.InferenceSession.create(addModel(N), sessionOptions(1));
  const feeds = {
    a: new ort.ort.Tensor('float32', fillPattern(N, 1), [N]),
    b: new ort.ort.Tensor('float32', fillPattern(N, 2), [N]),
  };
  const expected = fillPattern(N, 1)[3] + fillPattern(N, 2)[3];
  const check = await session.run(feeds);
  if (check.c.data[3] !== expected) throw new Error('ORT Add model gave a wrong result');
  return async () => {
    await session.run(feeds);
  };
}

// One latency row and one throughput row per device.
async function invokeOverhead({ quick, ref, instance, ort, uris }) {
  const calls = quick ? 300 : 10000;
  const rounds = quick ? 3 : 10;
  const flightCalls = quick ? 1000 : 20000;
  const ortCall = ort.ort ? await ortAdd(ort) : null;
  // The bare asynchronous round trip (JS -> native thread -> threadsafe
  // function -> promise), the floor under any off-thread invoke; measured in
  // the same rounds.
  const rows = [];
  ref.pingOpen();
  // An open ping keeps the process alive: always close it.
  try {
    const ping = () => ref.ping();
    await latencies(ping, 200);
    for (const uri of uris) {
      const device = instance.createDevice(uri);
      const { invoke: halrtCall, run: halrtRun } = halrtAdd(instance, device);
      await latencies(halrtCall, 200); // warm-up
      await latencies(halrtRun, 200);
      if (ortCall) await latencies(ortCall, 200);
      const sides = {
        halrt: () => latencies(halrtCall, calls / rounds),
        halrtFlight: () => throughput(ref, halrtCall, flightCalls / rounds, DEPTH),
        runFlight: () => throughput(ref, halrtRun, flightCalls / rounds, DEPTH),
        ping: () => latencies(ping, calls / rounds),
        pingFlight: () => throughput(ref, ping, flightCalls / rounds, DEPTH),
      };
      if (ortCall) {
        sides.ort = () => latencies(ortCall, calls / rounds);
        sides.ortFlight = () => throughput(ref, ortCall, flightCalls / rounds, DEPTH);
      }
      const results = await roundRobin(rounds, sides);
      const all = (name) => Float64Array.from(results[name].flatMap((t) => Array.from(t)));
      const rate = (name) => percentile(results[name].map((r) => r.rate), 50);
      const cpu = (name) => percentile(results[name].map((r) => r.cpu), 50);
      const h50 = percentile(all('halrt'), 50);
      const h99 = percentile(all('halrt'), 99);
      const ping50 = percentile(all('ping'), 50);
      const ping99 = percentile(all('ping'), 99);
      const ortLatency = ortCall
        ? `ORT \`await session.run\` of a hand-encoded one-node Add model (CPU EP, 1 intra-op thread, same ` +
          `shapes, same rounds) took ${seconds(percentile(all('ort'), 50))} p50 (p99 ` +
          `${seconds(percentile(all('ort'), 99))})`
        : `ORT ${ort.unavailable}`;
      const cpuText = (name) => `${seconds(cpu(name))}`;
      rows.push(
        row({
          group: GROUP,
          name: `invoke latency p50 (${uri})`,
          halrt: `${seconds(h50)} (p99 ${seconds(h99)})`,
          baseline: `${seconds(ping50)} (p99 ${seconds(ping99)}) round trip`,
          ratio: h50 / ping50,
          target: { op: '<=', value: 1.2 },
          note:
            `latency of one \`await fn.invoke([a, b])\` (add_f32 on f32[${N}], output closed), ${calls} sequential ` +
            `calls in ${rounds} rounds; baseline: the bare asynchronous round trip of the reference addon ` +
            `(\`await ref.ping()\`: JS -> native thread (mutex + condition variable) -> threadsafe function -> ` +
            `promise resolved), the floor under any off-thread invoke, alternating with it round by round; ` +
            `${ortLatency}`,
        }),
      );
      const flightNote =
        `calls/s with ${DEPTH} invocations in flight (${flightCalls} calls, median of ${rounds} rounds); ` +
        `baseline: ORT session.run with ${DEPTH} in flight (onnxruntime-node runs each on the JS thread ` +
        `from setImmediate)${ortCall ? '' : ` (ORT ${ort.unavailable})`}; bare round trip of the reference ` +
        `addon with ${DEPTH} in flight: ${si(rate('pingFlight'), 'call/s')}. JS-thread CPU time per call ` +
        `(CLOCK_THREAD_CPUTIME_ID of the JS thread before and after each run, median): halrt ` +
        `${cpuText('halrtFlight')}, ${ortCall ? `ORT ${cpuText('ortFlight')}` : 'ORT unmeasured'}, bare round ` +
        `trip ${cpuText('pingFlight')}`;
      const cpuNote =
        `CPU time of the JS thread per call (CLOCK_THREAD_CPUTIME_ID before and after each run, median of ` +
        `${rounds} rounds) with ${DEPTH} calls in flight; baseline: the same for the bare asynchronous round ` +
        `trip of the reference addon with ${DEPTH} in flight`;
      rows.push(
        row({
          group: GROUP,
          name: `JS-thread CPU per run of a PreparedCall, ${DEPTH} in flight (${uri})`,
          halrt: `${cpuText('runFlight')}/call`,
          baseline: `${cpuText('pingFlight')}/call round trip`,
          ratio: cpu('runFlight') / cpu('pingFlight'),
          target: { op: '<=', value: 2 },
          note:
            `${cpuNote}. \`call.run()\` of \`fn.prepare([a, b])\` (the same add_f32): inputs checked once, ` +
            `each run writing its result into call.outputs[0], no object made per run but the promise ` +
            `(issue 25's target for repeated calls: at most twice the round trip's JS-thread work)`,
        }),
        row({
          group: GROUP,
          name: `JS-thread CPU per fn.invoke(), ${DEPTH} in flight (${uri})`,
          halrt: `${cpuText('halrtFlight')}/call`,
          baseline: `${cpuText('pingFlight')}/call round trip`,
          ratio: cpu('halrtFlight') / cpu('pingFlight'),
          note:
            `${cpuNote}. \`const [c] = await fn.invoke([a, b]); c.close()\`, the runs of the throughput row ` +
            `below: each call checks its inputs and makes a new output BufferView and Array (no target: the ` +
            `N-API calls those take alone exceed twice the round trip; BENCHMARKS.md, issue 25)`,
        }),
      );
      const flightName = `invoke throughput, ${DEPTH} in flight (${uri})`;
      const hFlight = `${si(rate('halrtFlight'), 'call/s')} (JS ${cpuText('halrtFlight')}/call)`;
      if (ortCall) {
        rows.push(
          row({
            group: GROUP,
            name: flightName,
            halrt: hFlight,
            baseline: `${si(rate('ortFlight'), 'call/s')} (JS ${cpuText('ortFlight')}/call) ORT`,
            ratio: rate('halrtFlight') / rate('ortFlight'),
            target: { op: '>=', value: 2 },
            note: flightNote,
          }),
        );
      } else {
        rows.push(
          unmeasured({
            group: GROUP,
            name: flightName,
            why: hFlight,
            baseline: `unavailable (${ort.unavailable})`,
            target: { op: '>=', value: 2 },
            note: flightNote,
          }),
        );
      }
      device.close();
    }
  } finally {
    ref.pingClose();
  }
  return rows;
}

// An empty host call inside a program: what calling JavaScript adds to an
// invocation (a program whose body is one call of a HostModule function
// without inputs or outputs, minus the same invocation of an empty
// program), against the bare asynchronous round trip.
async function hostCall({ quick, ref, instance, uri }) {
  const calls = quick ? 300 : 5000;
  const rounds = quick ? 3 : 10;
  const device = instance.createDevice(uri);
  const hal = new halrt.HalModule(instance, device, {});
  const host = new halrt.HostModule(instance, 'host', { nop: { inputs: [], outputs: [], impl: () => [] } });
  const module = halrt.Module.fromObject(instance, {
    format: 'halrt.module/1',
    name: 'app',
    functions: {
      called: { inputs: [], outputs: [], body: [{ op: 'call', callee: 'host.nop', args: [], results: [] }] },
      empty: { inputs: [], outputs: [], body: [] },
    },
  });
  const context = new halrt.Context(instance, [hal, host, module]);
  const called = context.lookupFunction('app.called');
  const empty = context.lookupFunction('app.empty');
  ref.pingOpen();
  try {
    const sides = {
      called: () => latencies(() => called.invoke([]), calls / rounds),
      empty: () => latencies(() => empty.invoke([]), calls / rounds),
      ping: () => latencies(() => ref.ping(), calls / rounds),
    };
    for (const side of Object.values(sides)) await side();
    const results = await roundRobin(rounds, sides);
    const p50 = (name) => percentile(Float64Array.from(results[name].flatMap((t) => Array.from(t))), 50);
    const added = p50('called') - p50('empty');
    const ping = p50('ping');
    return [
      row({
        group: GROUP,
        name: `empty host call in a program (${uri})`,
        halrt: `${seconds(added)} added`,
        baseline: `${seconds(ping)} round trip`,
        ratio: added / ping,
        target: { op: '<=', value: 1.5 },
        note:
          `p50 of \`await fn.invoke([])\` of a function whose body is one call op to a HostModule function ` +
          `without inputs or outputs (${seconds(p50('called'))}) minus that of an empty function ` +
          `(${seconds(p50('empty'))}), ${calls} calls each in ${rounds} rounds; baseline: the bare asynchronous ` +
          'round trip of the reference addon (JS -> native thread -> threadsafe function -> promise), ' +
          'alternating with them round by round; ratio = added time / round trip',
      }),
    ];
  } finally {
    ref.pingClose();
    for (const object of [called, empty, context, module, host, hal, device]) object.close();
  }
}

module.exports = { invokeOverhead, hostCall };

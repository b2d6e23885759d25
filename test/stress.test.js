'use strict';
// Bounded stress: worker teardown where only workers load halrt, process exit
// with traces in flight, many traced invocations without growth, and slow
// sinks under both backpressure policies. Each test is bounded in count and
// time. The worker teardowns end 20 workers each, so a crash that follows
// one worker end in five is missed with chance 0.8^20 ≈ 1%; ending the whole
// process is one event per child, 12 children (0.8^12 ≈ 7%).
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { UNDER_SANITIZER, busyWait, closeAll, liveBaseline, settleLiveObjects } = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));
const MLP_PATH = path.join(__dirname, '..', 'examples', 'mlp.halrt.json');
// examples/mlp.halrt.json: 4 dispatches (traceDispatches) and 3 trace ops.
const TRACES_PER_CALL = 7;

/**
 * mlp (examples/mlp.halrt.json) on a fresh `uri` device with HalModule
 * `options` (traceDispatches on) and inputs x, w1, w2 of 0.5, 0.25, 0.125,
 * for which every row of probs is [1/3, 1/3, 1/3]. close() closes it all.
 * Children and workers get it as source (`${setUpMlp}`), so it uses nothing
 * but its arguments.
 */
function setUpMlp(halrt, mlpPath, uri, options) {
  const instance = new halrt.Instance();
  const device = instance.createDevice(uri);
  const hal = new halrt.HalModule(instance, device, { traceDispatches: true, ...options });
  const module = halrt.Module.load(instance, mlpPath);
  const context = new halrt.Context(instance, [hal, module]);
  const main = context.lookupFunction('mlp.main');
  const inputs = [
    device.tensor(new Float32Array(32).fill(0.5), [4, 8]),
    device.tensor(new Float32Array(128).fill(0.25), [8, 16]),
    device.tensor(new Float32Array(48).fill(0.125), [16, 3]),
  ];
  const close = () => {
    for (const object of [main, ...inputs, context, module, hal, device, instance]) object.close();
  };
  return { device, main, inputs, close };
}

// The start of a child's or a worker's source: halrt loaded, setUp(uri,
// options) is setUpMlp.
const MLP_SETUP = `
  const halrt = require(${LIB});
  ${setUpMlp}
  const setUp = (uri, options) => setUpMlp(halrt, ${JSON.stringify(MLP_PATH)}, uri, options);
`;

function runChild(source, timeout = 30000) {
  return spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout });
}

function assertExitedZero(result, what) {
  assert.strictEqual(result.error, undefined, `${what}: ${result.error}\n${result.stderr}`);
  assert.strictEqual(result.signal, null, `${what}: killed by ${result.signal}\n${result.stderr}`);
  assert.strictEqual(result.status, 0, `${what}: exit status ${result.status}\n${result.stderr}`);
}

// A worker (workerData: {mode, index}) that sets up mlp on local-task, posts
// 'busy' once its first trace has arrived and, unless `mode` is 'clean',
// keeps invocations in flight until it is ended: 'exit' and 'exit-in-sink'
// call process.exit(3) (from the event loop or from inside the sink), the
// others wait for the main thread. `index` varies the moment.
const WORKER = `
  const { parentPort, workerData: { mode, index } } = require('worker_threads');
  ${MLP_SETUP}
  let traces = 0;
  const s = setUp('local-task?workers=2', {
    debugSink: (key, tensors) => {
      traces += 1;
      if (traces === 1) parentPort.postMessage('busy');
      if (mode === 'exit-in-sink' && traces === 3 + (index % 5) * 4) process.exit(3);
    },
  });
  if (mode === 'clean') {
    (async () => {
      let sum = 0;
      for (let round = 0; round < 3; ++round) {
        const results = await Promise.all(Array.from({ length: 8 }, () => s.main.invoke(s.inputs)));
        for (const [probs] of results) {
          sum += (await probs.read()).reduce((a, b) => a + b, 0);
          probs.close();
        }
      }
      s.close();
      parentPort.postMessage({ traces, sum: Math.round(sum * 1e4) / 1e4 });
    })();
  } else {
    const pump = () => {
      for (let i = 0; i < 8; ++i) s.main.invoke(s.inputs).then(([probs]) => probs.close(), () => {});
      setImmediate(pump);
    };
    pump();
    if (mode === 'exit') {
      // Vary the moment relative to traces and completions.
      if (index % 3 === 0) process.exit(3);
      else if (index % 3 === 1) setImmediate(() => process.exit(3));
      else setTimeout(() => process.exit(3), index % 7);
    }
  }
`;

// The child: its main thread never requires halrt. It runs `workers`
// workers one at a time, so that each worker's end is the end of the last
// environment that loaded the addon; 'terminate' ends each with
// worker.terminate(). It prints each worker's exit code and messages as
// JSON, with the number of halrt threads still running once the device
// threads have had 10 s to drain what the workers left. 'main-exit' instead starts all of them at once and calls
// process.exit(0) once all are busy. `run` varies the moments.
function childSource(mode, workers, run) {
  return `
    const { Worker } = require('worker_threads');
    const source = ${JSON.stringify(WORKER)};
    const results = [];
    function runOne(index) {
      return new Promise((resolve, reject) => {
        const worker = new Worker(source, { eval: true, workerData: { mode: ${JSON.stringify(mode)}, index } });
        const messages = [];
        worker.on('message', (message) => {
          messages.push(message);
          if (message !== 'busy' || messages.length > 1) return;
          if (${JSON.stringify(mode)} === 'terminate') {
            const delay = (index + ${run}) % 3;
            if (delay === 0) worker.terminate();
            else if (delay === 1) setImmediate(() => worker.terminate());
            else setTimeout(() => worker.terminate(), 2);
          }
          if (${JSON.stringify(mode)} === 'main-exit') busy();
        });
        worker.on('error', reject);
        worker.on('exit', (code) => resolve({ code, messages: messages.filter((m) => m !== 'busy') }));
      });
    }
    let busyCount = 0;
    function busy() {
      busyCount += 1;
      if (busyCount === ${workers}) setTimeout(() => process.exit(0), ${run % 3});
    }
    (async () => {
      if (${JSON.stringify(mode)} === 'main-exit') {
        for (let i = 0; i < ${workers}; ++i) runOne(i);
        return;
      }
      for (let i = 0; i < ${workers}; ++i) results.push(await runOne(i));
      // Quiesced: device threads finish the work the workers left and exit.
      const fs = require('fs');
      const halrtThreads = () => fs.readdirSync('/proc/self/task').filter((task) => {
        try { return fs.readFileSync('/proc/self/task/' + task + '/comm', 'utf8').startsWith('halrt'); } catch { return false; }
      }).length;
      for (let i = 0; i < 200 && halrtThreads() > 0; ++i) await new Promise((resolve) => setTimeout(resolve, 50));
      console.log(JSON.stringify({ results, threadsLeft: halrtThreads() }));
    })().catch((error) => { console.error(error); process.exitCode = 1; });
  `;
}

describe('stress: workers are the only threads that load halrt', function () {
  this.timeout(120000);

  // Runs `runs` children and checks each exited 0 and, unless the child
  // ended itself, that every worker ended with `code`.
  function check(mode, { runs, workers, code, each = () => {} }) {
    for (let run = 0; run < runs; ++run) {
      const result = runChild(childSource(mode, workers, run), 60000);
      assertExitedZero(result, `${mode}, child run ${run}`);
      if (mode === 'main-exit') continue;
      const { results, threadsLeft } = JSON.parse(result.stdout);
      assert.strictEqual(threadsLeft, 0, `${mode}: halrt threads still running 10 s after the last worker ended`);
      assert.strictEqual(results.length, workers);
      for (const r of results) {
        assert.strictEqual(r.code, code, `${mode}: a worker exited ${r.code}`);
        each(r);
      }
    }
  }

  it('worker.terminate() with traced invocations in flight: every child exits 0', () => {
    check('terminate', { runs: 2, workers: 10, code: 1 });
  });

  it('process.exit() inside a worker with traced invocations in flight: every child exits 0', () => {
    check('exit', { runs: 2, workers: 10, code: 3 });
  });

  it("process.exit() inside a worker's debug sink: every child exits 0", () => {
    check('exit-in-sink', { runs: 2, workers: 10, code: 3 });
  });

  it('process.exit(0) on the main thread while workers trace: every child exits 0', () => {
    check('main-exit', { runs: 12, workers: 2 });
  });

  it('workers that await every invocation, close everything and end on their own exit 0', () => {
    check('clean', {
      runs: 2,
      workers: 10,
      code: 0,
      each: (r) => {
        // 3 rounds of 8 invocations; each of the 4 rows of probs sums to 1.
        assert.deepStrictEqual(r.messages, [{ traces: 24 * TRACES_PER_CALL, sum: 96 }]);
      },
    });
  });
});

describe('stress: process.exit() with traces in flight', function () {
  this.timeout(120000);

  // Where the child calls process.exit(0), with 32 traced invocations
  // started: at once, in a sink call, from a timer, or when one settles.
  const EXITS = [
    'process.exit(0);',
    'onTrace = (n) => { if (n === 2 + run) process.exit(0); };',
    'setTimeout(() => process.exit(0), run % 4);',
    'started[run % started.length].then(() => process.exit(0));',
  ];

  it('children exit 0 whenever they call process.exit(0), 8 times on each CPU device', () => {
    for (const uri of ['local-task?workers=2', 'local-sync']) {
      for (let run = 0; run < 8; ++run) {
        const result = runChild(`
          ${MLP_SETUP}
          const run = ${run};
          let traces = 0;
          let onTrace = () => {};
          const s = setUp(${JSON.stringify(uri)}, { debugSink: () => onTrace(++traces) });
          const started = Array.from({ length: 32 }, () => s.main.invoke(s.inputs));
          ${EXITS[run % EXITS.length]}
        `);
        assertExitedZero(result, `${uri}, exit ${run % EXITS.length}, run ${run}`);
      }
    }
  });
});

describe('stress: many traced invocations', function () {
  this.timeout(120000);

  it('10 000 traced invocations keep liveObjects() and RSS flat', async () => {
    const MiB = 1 << 20;
    let traces = 0;
    let wrongProbs = 0;
    const s = setUpMlp(halrt, MLP_PATH, 'local-task?workers=2', {
      debugSink: (key, tensors) => {
        traces += 1;
        if (key === 'probs') for (const p of tensors[0].data) wrongProbs += Math.abs(p - 1 / 3) > 1e-6;
      },
    });
    const batch = async (invocations) => {
      for (let done = 0; done < invocations; done += 100) {
        const results = await Promise.all(Array.from({ length: 100 }, () => s.main.invoke(s.inputs)));
        for (const [probs] of results) probs.close();
      }
    };
    try {
      await batch(1000); // warm-up: caches, pools and V8 reach their working size
      const live = await liveBaseline();
      // Resident memory outside V8's heap (whose own growth is not a leak).
      const native = () => { const { rss, heapTotal } = process.memoryUsage(); return rss - heapTotal; };
      const before = native();
      await batch(9000);
      assert.deepStrictEqual(await settleLiveObjects(live), live);
      const growth = (native() - before) / MiB;
      // 9000 invocations that each made 7 traces and an output: unbounded
      // growth of even a few hundred bytes per trace would show.
      if (!UNDER_SANITIZER) assert.ok(growth < 16, `RSS outside the V8 heap grew ${growth.toFixed(1)} MiB over 9000 invocations`);
      assert.strictEqual(traces, 10000 * TRACES_PER_CALL);
      assert.strictEqual(wrongProbs, 0);
    } finally {
      s.close();
    }
  });
});

describe('stress: a slow sink under backpressure', function () {
  this.timeout(120000);
  const INVOCATIONS = 100;

  // Runs INVOCATIONS traced invocations at once with room for about two
  // traces (probs is 48 bytes, h and hidden 256) and a sink that takes 0.5 ms.
  async function slowSinkRun(uri, policy) {
    const received = [];
    const s = setUpMlp(halrt, MLP_PATH, uri, {
      maxTraceBytes: 512,
      tracePolicy: policy,
      debugSink: (key, tensors, info) => {
        busyWait(0.5);
        received.push({ key, info });
      },
    });
    try {
      const results = await Promise.all(Array.from({ length: INVOCATIONS }, () => s.main.invoke(s.inputs)));
      closeAll(results);
      const burst = received.length;
      // Once idle, the next trace is admitted and reports every drop so far.
      closeAll(await s.main.invoke(s.inputs));
      return { burst, received };
    } finally {
      s.close();
    }
  }

  for (const uri of ['local-task?workers=2', 'local-sync']) {
    it(`'wait' delivers every trace, in program order, none dropped (${uri})`, async () => {
      const { burst, received } = await slowSinkRun(uri, 'wait');
      assert.strictEqual(burst, INVOCATIONS * TRACES_PER_CALL);
      const keys = received.slice(0, TRACES_PER_CALL).map((r) => r.key);
      assert.deepStrictEqual(keys, [
        'main:0:matmul_f32', 'main:1:relu_f32', 'layer1', 'main:3:matmul_f32', 'logits', 'main:5:softmax_rows_f32', 'probs',
      ]);
      for (let sequence = 0; sequence < INVOCATIONS; ++sequence) {
        const mine = received.filter((r) => r.info.sequence === received[0].info.sequence + sequence);
        assert.deepStrictEqual(mine.map((r) => r.key), keys, `invocation ${sequence}`);
      }
      assert.ok(received.every((r) => r.info.dropped === 0));
    });

    it(`'drop' delivers or counts every trace: delivered + info.dropped == traced (${uri})`, async () => {
      const { burst, received } = await slowSinkRun(uri, 'drop');
      const dropped = received[burst].info.dropped;
      assert.ok(dropped > 0, `nothing was dropped (${burst} delivered)`);
      assert.strictEqual(burst + dropped, INVOCATIONS * TRACES_PER_CALL);
      for (let i = 1; i < received.length; ++i) assert.ok(received[i].info.dropped >= received[i - 1].info.dropped);
    });
  }
});

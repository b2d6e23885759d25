'use strict';
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const { Worker } = require('worker_threads');
const halrt = require('..');
const { liveBaseline, settleLiveObjects } = require('./helpers');

const LIB = JSON.stringify(path.join(__dirname, '..'));

function runWorker(source) {
  const worker = new Worker(source, { eval: true });
  const messages = [];
  return new Promise((resolve, reject) => {
    worker.on('message', (message) => messages.push(message));
    worker.on('error', reject);
    worker.on('exit', (code) => resolve({ code, messages }));
  });
}

function runChild(source, timeout = 15000) {
  return spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout });
}

describe('worker_threads', () => {
  it('creates devices and tensors and reads inside a worker', async () => {
    const { code, messages } = await runWorker(`
      const { parentPort } = require('worker_threads');
      const halrt = require(${LIB});
      (async () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice('local-task?workers=2');
        const a = device.tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]);
        const b = device.empty([2, 3], 'f32');
        await device.copy(a, b);
        const big = device.tensor(new BigInt64Array([-5n, 7n]), [2]);
        const values = await b.read();
        const bigValues = await big.read();
        parentPort.postMessage({ values, bigValues, info: device.info, shape: a.shape,
          isError: (() => { try { device.empty([-1], 'f32'); } catch (e) { return e instanceof halrt.HalrtError && e.code; } })() });
        for (const o of [a, b, big, device, instance]) o.close();
      })().catch((error) => parentPort.postMessage({ error: String(error && error.stack) }));
    `);
    assert.strictEqual(code, 0);
    assert.strictEqual(messages.length, 1);
    const [result] = messages;
    assert.strictEqual(result.error, undefined, result.error);
    assert.deepStrictEqual(result.values, Float32Array.from([1, 2, 3, 4, 5, 6]));
    assert.deepStrictEqual(result.bigValues, new BigInt64Array([-5n, 7n]));
    assert.strictEqual(result.info.workerCount, 2);
    assert.deepStrictEqual(result.shape, [2, 3]);
    assert.strictEqual(result.isError, 'INVALID_ARGUMENT');
  });

  it('a worker that leaves objects unclosed and exits leaves liveObjects unchanged', async () => {
    const before = await liveBaseline();
    const { code, messages } = await runWorker(`
      const { parentPort } = require('worker_threads');
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task');
      const views = [];
      for (let i = 0; i < 20; ++i) views.push(device.tensor(new Int32Array([i, i + 1]), [2]));
      Promise.all(views.map((v) => v.read())).then((results) => {
        parentPort.postMessage(results.map((r) => r[1]));
      });
    `);
    assert.strictEqual(code, 0);
    assert.deepStrictEqual(messages[0], Array.from({ length: 20 }, (_, i) => i + 1));
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  it('terminating workers with reads in flight, 20 times, neither crashes nor leaks', async function () {
    this.timeout(60000);
    const before = await liveBaseline();
    for (let round = 0; round < 20; ++round) {
      const worker = new Worker(`
        const { parentPort } = require('worker_threads');
        const halrt = require(${LIB});
        const instance = new halrt.Instance();
        const device = instance.createDevice(${round % 2 ? "'local-sync'" : "'local-task?workers=2'"});
        const views = [];
        for (let i = 0; i < 16; ++i) views.push(device.empty([1 << 16], 'f32'));
        let reads = 0;
        const pump = () => {
          for (const view of views) view.read().then(() => { reads += 1; });
          device.copy(views[0], views[1]);
          setImmediate(pump);
        };
        pump();
        parentPort.postMessage('busy');
      `, { eval: true });
      await new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      // Vary the moment of termination relative to the completions.
      if (round % 3 === 1) await new Promise((resolve) => setImmediate(resolve));
      if (round % 3 === 2) await new Promise((resolve) => setTimeout(resolve, 5));
      const exitCode = await worker.terminate();
      assert.strictEqual(exitCode, 1);
    }
    // The main thread still works.
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task');
    const view = device.tensor(new Uint32Array([7, 8, 9]), [3]);
    assert.deepStrictEqual(await view.read(), new Uint32Array([7, 8, 9]));
    view.close();
    device.close();
    instance.close();
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  it('several workers use the addon at the same time', async () => {
    const runs = [];
    for (let w = 0; w < 4; ++w) {
      runs.push(runWorker(`
        const { parentPort } = require('worker_threads');
        const halrt = require(${LIB});
        (async () => {
          const instance = new halrt.Instance();
          const device = instance.createDevice('local-task?workers=2');
          let sum = 0;
          for (let i = 0; i < 50; ++i) {
            const view = device.tensor(new Int32Array([${w}, i]), [2]);
            const r = await view.read();
            sum += r[0] + r[1];
            view.close();
          }
          device.close();
          instance.close();
          parentPort.postMessage(sum);
        })();
      `));
    }
    const results = await Promise.all(runs);
    results.forEach(({ code, messages }, w) => {
      assert.strictEqual(code, 0);
      assert.deepStrictEqual(messages, [w * 50 + (49 * 50) / 2]);
    });
  });
});

describe('process lifetime', function () {
  this.timeout(30000);

  it('process.exit(0) with reads in flight exits 0', () => {
    const result = runChild(`
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task');
      const views = [];
      for (let i = 0; i < 32; ++i) views.push(device.empty([1 << 16], 'f64'));
      for (let round = 0; round < 4; ++round) for (const v of views) v.read();
      process.exit(0);
    `);
    assert.strictEqual(result.error, undefined, String(result.error));
    assert.strictEqual(result.signal, null, result.stderr);
    assert.strictEqual(result.status, 0, result.stderr);
  });

  it('exits on its own with an idle Instance and Device left unclosed', () => {
    const result = runChild(`
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task');
      const sync = instance.createDevice('local-sync');
      globalThis.keep = [instance, device, sync, device.empty([4], 'f32')];
    `);
    assert.strictEqual(result.error, undefined, 'the process did not exit on its own');
    assert.strictEqual(result.status, 0, result.stderr);
  });

  it('exits on its own after its reads have completed', () => {
    const result = runChild(`
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-task');
      const view = device.tensor(new Int8Array([1, 2, 3]), [3]);
      view.read().then((r) => console.log('read', Array.from(r).join(',')));
    `);
    assert.strictEqual(result.error, undefined, 'the process did not exit on its own');
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout.trim(), 'read 1,2,3');
  });

  it('a pending read keeps the process alive until it resolves', () => {
    const result = runChild(`
      const halrt = require(${LIB});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      const views = [];
      for (let i = 0; i < 16; ++i) views.push(device.tensor(new Float64Array(1 << 16).fill(i), [1 << 16]));
      let done = 0;
      for (const view of views) view.read().then((r) => { done += r[0] === views.indexOf(view) ? 1 : 0; });
      process.on('exit', () => console.log('done', done));
    `);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout.trim(), 'done 16');
  });
});

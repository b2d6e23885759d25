'use strict';
const assert = require('assert');
const halrt = require('..');
const {
  sampleData, assertThrowsHalrt, assertRejectsHalrt, liveBaseline, settleLiveObjects, tick,
} = require('./helpers');

const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose');

describe('close and use after close', () => {
  it('a closed Instance refuses createDevice; its devices keep working', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    instance.close();
    instance.close();
    assertThrowsHalrt(() => instance.createDevice('local-sync'), 'FAILED_PRECONDITION',
      'instance.createDevice: Instance is closed');
    const view = device.tensor(new Int16Array([1, 2]), [2]);
    assert.deepStrictEqual(await view.read(), new Int16Array([1, 2]));
    view.close();
    device.close();
  });

  it('a closed Device refuses tensor, empty and copy', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task');
    const a = device.empty([2], 'f32');
    const b = device.empty([2], 'f32');
    device.close();
    device.close();
    try {
      assertThrowsHalrt(() => device.tensor(new Float32Array(1), [1]), 'FAILED_PRECONDITION',
        'device.tensor: Device is closed');
      assertThrowsHalrt(() => device.empty([1], 'f32'), 'FAILED_PRECONDITION', 'device.empty: Device is closed');
      await assertRejectsHalrt(device.copy(a, b), 'FAILED_PRECONDITION', 'device.copy: Device is closed');
      assert.strictEqual(device.info.driver, 'local-task', 'info stays readable');
    } finally {
      a.close();
      b.close();
      instance.close();
    }
  });

  it('a closed BufferView refuses read, its properties and use in copy', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const view = device.empty([2], 'u8');
    const other = device.empty([2], 'u8');
    view.close();
    view.close();
    try {
      await assertRejectsHalrt(view.read(), 'FAILED_PRECONDITION', 'bufferView.read: BufferView is closed');
      for (const property of ['shape', 'dtype', 'byteLength', 'rank']) {
        assertThrowsHalrt(() => view[property], 'FAILED_PRECONDITION', `bufferView.${property}: BufferView is closed`);
      }
      await assertRejectsHalrt(device.copy(view, other), 'FAILED_PRECONDITION',
        'device.copy: source BufferView is closed');
      await assertRejectsHalrt(device.copy(other, view), 'FAILED_PRECONDITION',
        'device.copy: target BufferView is closed');
    } finally {
      other.close();
      device.close();
      instance.close();
    }
  });

  it('[Symbol.dispose] closes each class', async () => {
    const before = await liveBaseline(); // earlier tests' garbage gone
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const view = device.empty([1], 'f32');
    for (const object of [view, device, instance]) {
      assert.strictEqual(typeof object[dispose], 'function');
      object[dispose]();
      object[dispose]();
    }
    assertThrowsHalrt(() => view.dtype, 'FAILED_PRECONDITION', 'BufferView is closed');
    assertThrowsHalrt(() => device.empty([1], 'f32'), 'FAILED_PRECONDITION', 'Device is closed');
    assertThrowsHalrt(() => instance.createDevice(), 'FAILED_PRECONDITION', 'Instance is closed');
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  it('views stay readable after their device is closed (buffers keep the runtime device alive)', async () => {
    const before = await liveBaseline(); // earlier tests' garbage gone
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task');
    const view = device.tensor(new Float64Array([1.25, 2.5]), [2]);
    device.close();
    instance.close();
    assert.strictEqual(halrt.liveObjects().device, before.device + 1, 'the view holds the device');
    assert.deepStrictEqual(await view.read(), new Float64Array([1.25, 2.5]));
    view.close();
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  it('closing a view while its read is in flight still resolves the read', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task');
    const data = sampleData('i32', 1 << 16);
    const view = device.tensor(data, [data.length]);
    const pending = view.read();
    view.close();
    device.close();
    instance.close();
    assert.deepStrictEqual(await pending, data);
  });
});

describe('asynchronous reads', () => {
  let instance;
  let device;
  before(() => {
    instance = new halrt.Instance();
    device = instance.createDevice('local-task?workers=2');
  });
  after(() => {
    device.close();
    instance.close();
  });

  it('many concurrent reads all resolve with the right data', async () => {
    const views = [];
    const expected = [];
    for (let i = 0; i < 200; ++i) {
      const data = sampleData(i % 2 ? 'f64' : 'u16', 1 + (i % 17), i);
      expected.push(data);
      views.push(device.tensor(data, [data.length]));
    }
    const order = [];
    const results = await Promise.all(views.map((view, i) => view.read().then((r) => {
      order.push(i);
      return r;
    })));
    results.forEach((result, i) => assert.deepStrictEqual(result, expected[i]));
    assert.strictEqual(order.length, 200);
    for (const view of views) view.close();
  });

  it('the event loop keeps turning while reads are pending', async () => {
    const views = [];
    // 64 MiB to read: longer than the JS thread takes to reach the loop's
    // check phase, even when it is scheduled out for a while.
    for (let i = 0; i < 32; ++i) views.push(device.empty([1 << 18], 'f64'));
    let turns = 0;
    let running = true;
    const spin = () => {
      if (!running) return;
      turns += 1;
      setImmediate(spin);
    };
    setImmediate(spin);
    const started = Date.now();
    const pending = views.map((view) => view.read());
    const issueTime = Date.now() - started;
    const results = await Promise.all(pending);
    running = false;
    for (const result of results) assert.strictEqual(result.length, 1 << 18);
    assert.ok(turns > 0, 'setImmediate callbacks ran while reads were pending');
    assert.ok(issueTime < 2000, `issuing reads took ${issueTime} ms`);
    for (const view of views) view.close();
  });

  it('read() returns a pending promise, not a settled value', async () => {
    const view = device.tensor(new Uint8Array([1, 2, 3]), [3]);
    let settled = false;
    const promise = view.read().then((value) => {
      settled = true;
      return value;
    });
    await Promise.resolve();
    assert.strictEqual(settled, false, 'not settled within the same microtask turn');
    assert.deepStrictEqual(await promise, new Uint8Array([1, 2, 3]));
    view.close();
  });
});

describe('garbage collection', function () {
  before(function () {
    if (typeof global.gc !== 'function') this.skip();
  });

  it('collects unclosed instances, devices and views back to the baseline', async () => {
    await tick();
    const baseline = await liveBaseline();
    (() => {
      for (let i = 0; i < 10; ++i) {
        const instance = new halrt.Instance();
        const device = instance.createDevice(i % 2 ? 'local-task?workers=2' : 'local-sync');
        for (let j = 0; j < 10; ++j) device.tensor(sampleData('f32', 8, j), [2, 4]);
        device.empty([3], 'bool');
      }
    })();
    assert.ok(halrt.liveObjects().bufferView > baseline.bufferView);
    const live = await settleLiveObjects(baseline);
    assert.deepStrictEqual(live, baseline);
  });

  it('collects views whose reads were awaited but which were never closed', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-task');
    const baseline = await liveBaseline();
    await (async () => {
      const reads = [];
      for (let i = 0; i < 50; ++i) reads.push(device.tensor(sampleData('i64', 4, i), [4]).read());
      await Promise.all(reads);
    })();
    assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
    device.close();
    instance.close();
  });
});

'use strict';
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { assertThrowsHalrt, assertRejectsHalrt } = require('./helpers');

describe('Instance.createDevice', () => {
  let instance;
  beforeEach(() => {
    instance = new halrt.Instance();
  });
  afterEach(() => {
    instance.close();
  });

  function withDevice(uri, fn) {
    const device = uri === undefined ? instance.createDevice() : instance.createDevice(uri);
    try {
      return fn(device);
    } finally {
      device.close();
    }
  }

  function checkInfoShape(info) {
    assert.ok(Object.isFrozen(info));
    assert.deepStrictEqual(Object.keys(info), [
      'driver', 'kind', 'name', 'uri', 'ordinal', 'workerCount', 'totalMemory',
      'computeCapability', 'multiprocessorCount', 'driverVersion',
    ]);
    for (const key of ['driver', 'kind', 'name', 'uri']) assert.strictEqual(typeof info[key], 'string');
    for (const key of ['ordinal', 'workerCount', 'totalMemory', 'multiprocessorCount', 'driverVersion']) {
      assert.ok(Number.isInteger(info[key]) && info[key] >= 0, `${key} = ${info[key]}`);
    }
  }

  it("creates a local-sync device whose info describes it", () => {
    withDevice('local-sync', (device) => {
      const { info } = device;
      checkInfoShape(info);
      assert.strictEqual(info.driver, 'local-sync');
      assert.strictEqual(info.kind, 'local');
      assert.strictEqual(info.uri, 'local-sync');
      assert.ok(info.name.length > 0);
      assert.strictEqual(info.computeCapability, null);
      assert.strictEqual(info.multiprocessorCount, 0);
      assert.strictEqual(info.driverVersion, 0);
      assert.strictEqual(device.info, info, 'info is the same object every time');
    });
  });

  it('creates a local-task device with at least one worker', () => {
    withDevice('local-task', (device) => {
      checkInfoShape(device.info);
      assert.strictEqual(device.info.driver, 'local-task');
      assert.strictEqual(device.info.kind, 'local');
      assert.ok(device.info.workerCount >= 1);
      assert.ok(device.info.workerCount <= Math.max(os.availableParallelism?.() ?? os.cpus().length, 1) + 64);
    });
  });

  it("honours 'local-task?workers=3'", () => {
    withDevice('local-task?workers=3', (device) => {
      assert.strictEqual(device.info.driver, 'local-task');
      assert.strictEqual(device.info.workerCount, 3);
      assert.match(device.info.uri, /^local-task\?workers=3$/);
    });
  });

  it("'auto' (and the default) fall back to local-task without CUDA", () => {
    const cuda = halrt.drivers().find((d) => d.name === 'cuda');
    const expected = cuda && cuda.available ? 'cuda' : 'local-task';
    withDevice('auto', (device) => assert.strictEqual(device.info.driver, expected));
    withDevice(undefined, (device) => assert.strictEqual(device.info.driver, expected));
  });

  it('creates independent devices from one instance', () => {
    const a = instance.createDevice('local-sync');
    const b = instance.createDevice('local-sync');
    try {
      assert.notStrictEqual(a, b);
    } finally {
      a.close();
      b.close();
    }
  });

  it('rejects an unknown driver with NOT_FOUND naming it and the known drivers', () => {
    assertThrowsHalrt(() => instance.createDevice('foo'), 'NOT_FOUND',
      'instance.createDevice: ', "'foo'", 'local-sync', 'local-task');
  });

  it('rejects workers=0 with INVALID_ARGUMENT', () => {
    assertThrowsHalrt(() => instance.createDevice('local-task?workers=0'), 'INVALID_ARGUMENT',
      'instance.createDevice: ', 'workers');
  });

  it('rejects an unknown URI parameter with INVALID_ARGUMENT naming it', () => {
    assertThrowsHalrt(() => instance.createDevice('local-task?bogus=1'), 'INVALID_ARGUMENT',
      'instance.createDevice: ', 'bogus');
  });

  it('rejects a parameter given twice, and workers that is not plain digits', () => {
    assertThrowsHalrt(() => instance.createDevice('local-task?workers=4&workers=2'), 'INVALID_ARGUMENT',
      "instance.createDevice: driver 'local-task' parameter 'workers' is given twice");
    for (const text of ['+3', ' 3', '-1', '3 ']) {
      assertThrowsHalrt(() => instance.createDevice(`local-task?workers=${text}`), 'INVALID_ARGUMENT', `workers='${text}' must be an integer in [1, `);
    }
    const device = instance.createDevice('local-task?workers=03');
    assert.strictEqual(device.info.uri, 'local-task?workers=3');
    device.close();
  });

  it('rejects a malformed ordinal with INVALID_ARGUMENT quoting the URI', () => {
    assertThrowsHalrt(() => instance.createDevice('local-sync://x'), 'INVALID_ARGUMENT',
      'instance.createDevice: ', 'local-sync://x');
  });

  it('rejects a non-string URI', () => {
    assertThrowsHalrt(() => instance.createDevice(42), 'INVALID_ARGUMENT',
      'instance.createDevice: uri must be a string (got 42)');
    assertThrowsHalrt(() => instance.createDevice(null), 'INVALID_ARGUMENT',
      'instance.createDevice: uri must be a string (got null)');
  });

  it('rejects an empty URI', () => {
    assert.throws(() => instance.createDevice(''), (error) => {
      assert.ok(error instanceof halrt.HalrtError);
      assert.ok(['INVALID_ARGUMENT', 'NOT_FOUND'].includes(error.code), error.code);
      assert.match(error.message, /^instance\.createDevice: /);
      return true;
    });
  });

  it('HALRT_CUDA_LIBRARY naming a FIFO or a folder: cuda is unavailable at once, saying what it is (dlopen would wait on a FIFO)', function () {
    this.timeout(30000);
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-cudalib-'));
    try {
      const fifo = path.join(folder, 'libcuda.so.1');
      if (spawnSync('mkfifo', [fifo]).status !== 0) this.skip();
      const probe = (library) => {
        const result = spawnSync(process.execPath, ['-e', `
          const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
          const cuda = halrt.drivers().find((d) => d.name === 'cuda');
          let code = null;
          try { new halrt.Instance().createDevice('cuda'); } catch (error) { code = error.code; }
          process.stdout.write(JSON.stringify({ available: cuda.available, reason: cuda.reason, code }));`],
        { encoding: 'utf8', timeout: 10000, env: { ...process.env, HALRT_CUDA_LIBRARY: library } });
        assert.strictEqual(result.status, 0, result.stderr || 'the probe did not end (dlopen of a FIFO?)');
        return JSON.parse(result.stdout);
      };
      const report = probe(fifo);
      assert.strictEqual(report.available, false);
      assert.strictEqual(report.code, 'UNAVAILABLE');
      assert.match(report.reason, /CUDA is not usable: cannot load .*libcuda\.so\.1: '.*libcuda\.so\.1' is a FIFO, not a regular file/);
      assert.match(probe(folder).reason, /is a directory, not a regular file/);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});

describe('construction rules', () => {
  it('Device and BufferView cannot be constructed directly', () => {
    assertThrowsHalrt(() => new halrt.Device(), 'INVALID_ARGUMENT', 'new Device', 'instance.createDevice');
    assertThrowsHalrt(() => new halrt.Device({}), 'INVALID_ARGUMENT', 'new Device');
    assertThrowsHalrt(() => new halrt.BufferView(), 'INVALID_ARGUMENT', 'new BufferView', 'device.tensor');
    assertThrowsHalrt(() => new halrt.BufferView(Symbol('token')), 'INVALID_ARGUMENT', 'new BufferView');
  });

  it('Instance must be called with new', () => {
    assertThrowsHalrt(() => halrt.Instance(), 'INVALID_ARGUMENT', 'Instance: the constructor must be called with `new`');
  });

  it('methods and accessors called on the wrong receiver throw a HalrtError naming the method', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    try {
      assertThrowsHalrt(() => halrt.Device.prototype.tensor.call({}, new Float32Array(1), [1]), 'INVALID_ARGUMENT',
        'device.tensor: `this` is not a Device');
      assertThrowsHalrt(() => halrt.Instance.prototype.createDevice.call(device, 'local-sync'), 'INVALID_ARGUMENT',
        'instance.createDevice: `this` is not an Instance');
      assertThrowsHalrt(() => halrt.Device.prototype.close.call(instance), 'INVALID_ARGUMENT',
        'device.close: `this` is not a Device');
      assertThrowsHalrt(() => Object.create(halrt.Device.prototype).empty([1], 'f32'), 'INVALID_ARGUMENT',
        'device.empty: `this` is not a Device');
      const shapeGetter = Object.getOwnPropertyDescriptor(halrt.BufferView.prototype, 'shape').get;
      assertThrowsHalrt(() => shapeGetter.call(device), 'INVALID_ARGUMENT',
        'bufferView.shape: `this` is not a BufferView');
    } finally {
      device.close();
      instance.close();
    }
  });

  it('promise-returning methods on the wrong receiver reject with a HalrtError, never throw', async () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const view = device.tensor(new Float32Array(2), [2]);
    try {
      const { read } = view;
      const calls = [
        [() => read(), 'bufferView.read: `this` is not a BufferView'],
        [() => halrt.BufferView.prototype.read.call({}), 'bufferView.read: `this` is not a BufferView'],
        [() => halrt.BufferView.prototype.read.call(device), 'bufferView.read: `this` is not a BufferView'],
        [() => halrt.Device.prototype.copy.call(view, view, view), 'device.copy: `this` is not a Device'],
        [() => halrt.Function.prototype.invoke.call(view, []), 'function.invoke: `this` is not a Function'],
      ];
      for (const [call, message] of calls) {
        let result;
        assert.doesNotThrow(() => { result = call(); });
        assert.ok(result instanceof Promise);
        await assertRejectsHalrt(result, 'INVALID_ARGUMENT', message);
      }
    } finally {
      view.close();
      device.close();
      instance.close();
    }
  });

});

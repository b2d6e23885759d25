'use strict';
const assert = require('assert');
const halrt = require('..');
const { liveBaseline, settleLiveObjects } = require('./helpers');

describe('halrt module', () => {
  it('drivers() lists local-sync and local-task as available, in auto order', () => {
    const drivers = halrt.drivers();
    assert.ok(Array.isArray(drivers));
    for (const entry of drivers) {
      // The cuda entry also reports NVRTC (test/nvrtc.test.js).
      const keys = entry.name === 'cuda' ? ['available', 'name', 'nvrtc', 'reason'] : ['available', 'name', 'reason'];
      assert.deepStrictEqual(Object.keys(entry).sort(), keys);
      assert.strictEqual(typeof entry.name, 'string');
      assert.strictEqual(typeof entry.available, 'boolean');
      if (entry.available) assert.strictEqual(entry.reason, null);
      else assert.ok(typeof entry.reason === 'string' && entry.reason.length > 0);
    }
    const names = drivers.map((entry) => entry.name);
    for (const name of ['local-sync', 'local-task']) {
      const entry = drivers.find((d) => d.name === name);
      assert.deepStrictEqual(entry, { name, available: true, reason: null });
    }
    assert.strictEqual(new Set(names).size, names.length, 'driver names are unique');
  });

  it('drivers() returns a fresh array each call', () => {
    const a = halrt.drivers();
    const b = halrt.drivers();
    assert.notStrictEqual(a, b);
    assert.deepStrictEqual(a, b);
  });

  it('dtypes is a frozen array of the 13 dtype names', () => {
    assert.deepStrictEqual(Array.from(halrt.dtypes), [
      'f16', 'bf16', 'f32', 'f64', 'i8', 'u8', 'i16', 'u16', 'i32', 'u32', 'i64', 'u64', 'bool',
    ]);
    assert.ok(Object.isFrozen(halrt.dtypes));
    assert.throws(() => {
      'use strict';
      halrt.dtypes.push('f8');
    }, TypeError);
  });

  it('liveObjects() counts every runtime object kind', () => {
    const live = halrt.liveObjects();
    const keys = Object.keys(live);
    for (const kind of ['instance', 'device', 'buffer', 'bufferView', 'executable', 'commandBuffer', 'semaphore',
      'submission', 'module', 'context', 'invocation', 'blockPool']) {
      assert.ok(keys.includes(kind), `liveObjects() has ${kind}`);
    }
    for (const value of Object.values(live)) assert.ok(Number.isInteger(value) && value >= 0);
  });

  it('liveObjects() follows creation and close', async () => {
    const before = await liveBaseline(); // earlier tests' garbage gone
    const instance = new halrt.Instance();
    const device = instance.createDevice('local-sync');
    const view = device.tensor(new Float32Array(4), [4]);
    const during = halrt.liveObjects();
    assert.strictEqual(during.instance, before.instance + 1);
    assert.strictEqual(during.device, before.device + 1);
    assert.strictEqual(during.bufferView, before.bufferView + 1);
    assert.strictEqual(during.buffer, before.buffer + 1);
    view.close();
    device.close();
    instance.close();
    assert.deepStrictEqual(await settleLiveObjects(before), before);
  });

  describe('HalrtError', () => {
    it('is an Error with name HalrtError and a code', () => {
      const error = new halrt.HalrtError('boom', 'INTERNAL');
      assert.ok(error instanceof Error);
      assert.ok(error instanceof halrt.HalrtError);
      assert.strictEqual(error.name, 'HalrtError');
      assert.strictEqual(error.code, 'INTERNAL');
      assert.strictEqual(error.message, 'boom');
      assert.match(error.stack, /^HalrtError: boom/);
    });

    it('keeps a cause', () => {
      const cause = new Error('inner');
      const error = new halrt.HalrtError('outer', 'ABORTED', { cause });
      assert.strictEqual(error.cause, cause);
    });

    it('is what the binding throws', () => {
      const instance = new halrt.Instance();
      try {
        assert.throws(() => instance.createDevice('no-such-driver'), (error) => {
          assert.ok(error instanceof halrt.HalrtError);
          assert.ok(error instanceof Error);
          assert.strictEqual(error.name, 'HalrtError');
          assert.strictEqual(error.code, 'NOT_FOUND');
          assert.match(error.stack, /^HalrtError: instance\.createDevice: /);
          return true;
        });
      } finally {
        instance.close();
      }
    });
  });
});

'use strict';
// Over Node's real ArrayBuffer limit, buffer.constants.MAX_LENGTH (2^32
// bytes on 64-bit hosts up to Node 21), with 4 GiB tensors on local-sync.
// Heavy: about 8 GiB of memory and tens of seconds to minutes where first
// touching memory is slow, so it runs only with HALRT_TEST_HEAVY=1
// (test/array-limit.test.js covers the same behaviour cheaply, under a lowered
// limit). Before the fix, Node freed the refused data and halrt freed it again.
const assert = require('assert');
const { constants } = require('buffer');
const halrt = require('..');
const { assertRejectsHalrt, closeAll, makeProgram } = require('./helpers');

const MAX = constants.MAX_LENGTH;
const run = process.env.HALRT_TEST_HEAVY === '1' && MAX === 2 ** 32;
const tooLarge = (bytes) => `${bytes} bytes do not fit in one JavaScript ArrayBuffer (at most ${MAX} bytes here)`;

// Module dims stop at 2^31 - 1: four rows of a quarter of the bytes each.
const OVER = [4, MAX / 4 + 4];
const OVER_BYTES = MAX + 16;

(run ? describe : describe.skip)('data over 4 GiB for real (local-sync; HALRT_TEST_HEAVY=1, Node < 22)', function heavy() {
  this.timeout(15 * 60 * 1000);
  let p;
  let x;
  const seen = [];

  before(() => {
    p = makeProgram('local-sync', (b) => b.function('main', (f) => f.input('x', 'u8', OVER).trace('big', ['x'])), {
      hal: { debugSink: (key) => seen.push(key) },
    });
    x = p.device.empty(OVER, 'u8');
  });
  after(() => {
    closeAll(x);
    if (p) p.close();
  });

  it('read() of MAX_LENGTH + 16 bytes rejects at once with RESOURCE_EXHAUSTED naming both sizes', async () => {
    const start = process.hrtime.bigint();
    await assertRejectsHalrt(x.read(), 'RESOURCE_EXHAUSTED', `bufferView.read: ${tooLarge(OVER_BYTES)}`);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    assert.ok(ms < 1000, `rejected after ${ms} ms: nothing should have been copied`);
  });

  for (const traceData of ['owned', 'borrowed']) {
    it(`a trace of it fails the invocation with RESOURCE_EXHAUSTED naming key, size and limit (traceData '${traceData}')`, async () => {
      const hal = new halrt.HalModule(p.instance, p.device, { traceData, debugSink: (key) => seen.push(key) });
      const context = new halrt.Context(p.instance, [hal, p.module]);
      const fn = context.lookupFunction('m.main');
      try {
        const error = await fn.invoke([x]).then(() => null, (e) => e);
        assert.ok(error instanceof halrt.HalrtError, `expected a HalrtError, got ${error && error.stack}`);
        assert.strictEqual(error.code, 'RESOURCE_EXHAUSTED', error.message);
        assert.ok(error.message.includes(`trace 'big': tensor 'x': ${tooLarge(OVER_BYTES)}`), error.message);
        assert.deepStrictEqual(seen, []);
      } finally {
        closeAll(fn, context, hal);
      }
    });
  }

  it('read() of exactly MAX_LENGTH bytes resolves with a Uint8Array of that length', async () => {
    const at = p.device.empty([4, MAX / 4], 'u8');
    try {
      let data = await at.read();
      assert.ok(data instanceof Uint8Array);
      assert.strictEqual(data.length, MAX);
      assert.strictEqual(data[MAX - 1], 0);
      data = null;
    } finally {
      at.close();
      if (global.gc) global.gc();
    }
  });
});

'use strict';
// Data larger than JavaScript can hold in one ArrayBuffer (Node's
// buffer.constants.MAX_LENGTH: 4 GiB up to Node 21). bufferView.read()
// rejects before it copies anything, and a trace that would deliver such
// data fails its invocation; both with RESOURCE_EXHAUSTED naming the size
// and the limit. Here the limit is lowered with HALRT_MAX_ARRAY_BYTES so that
// the boundary costs a MiB; test/heavy-4gib.test.js crosses the real one.
const assert = require('assert');
const halrt = require('..');
const {
  DEVICE_URIS, assertRejectsHalrt, closeAll, liveBaseline, makeProgram, settleLiveObjects,
} = require('./helpers');

const LIMIT = 1 << 20;
const tooLarge = (bytes) => `${bytes} bytes do not fit in one JavaScript ArrayBuffer (at most ${LIMIT} bytes here)`;

/** `count` bytes 0, 1, ..., 250, 0, 1, ... */
const pattern = (count) => Uint8Array.from({ length: count }, (_, i) => i % 251);

for (const uri of DEVICE_URIS) {
  describe(`data over the ArrayBuffer limit (${uri}, HALRT_MAX_ARRAY_BYTES=${LIMIT})`, () => {
    before(() => {
      process.env.HALRT_MAX_ARRAY_BYTES = String(LIMIT);
    });
    after(() => {
      delete process.env.HALRT_MAX_ARRAY_BYTES;
    });

    it('read() of a view at the limit resolves with its contents; one byte or one f32 more rejects naming both sizes', async () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const at = device.tensor(pattern(LIMIT), [LIMIT]);
      const overU8 = device.empty([LIMIT + 1], 'u8');
      const overF32 = device.empty([LIMIT / 4 + 1], 'f32');
      try {
        assert.deepStrictEqual(await at.read(), pattern(LIMIT));
        await assertRejectsHalrt(overU8.read(), 'RESOURCE_EXHAUSTED', `bufferView.read: ${tooLarge(LIMIT + 1)}`);
        await assertRejectsHalrt(overF32.read(), 'RESOURCE_EXHAUSTED', `bufferView.read: ${tooLarge(LIMIT + 4)}`);
        // The device still works.
        assert.deepStrictEqual(await at.read(), pattern(LIMIT));
      } finally {
        closeAll(at, overU8, overF32, device, instance);
      }
    });

    for (const traceData of ['owned', 'borrowed']) {
      it(`a traced tensor over the limit fails its invocation with RESOURCE_EXHAUSTED naming key, tensor, size and limit; the sink never sees it (traceData '${traceData}')`, async () => {
        const baseline = await liveBaseline();
        const seen = [];
        const p = makeProgram(uri, (b) => b
          .function('over', (f) => f.input('s', 'u8', [16]).input('x', 'u8', [LIMIT + 16])
            .trace('before', ['s']).trace('big', ['s', 'x']).trace('after', ['s']))
          .function('at', (f) => f.input('x', 'u8', [LIMIT]).trace('edge', ['x'])), {
          hal: {
            traceData,
            debugSink: (key, tensors) => seen.push({ key, data: tensors.map((t) => t.data.slice()) }),
          },
        });
        const over = p.lookup('over');
        const at = p.lookup('at');
        const s = p.device.tensor(pattern(16), [16]);
        const x = p.device.empty([LIMIT + 16], 'u8');
        const edge = p.device.tensor(pattern(LIMIT), [LIMIT]);
        try {
          const error = await over.invoke([s, x]).then(() => null, (e) => e);
          assert.ok(error instanceof halrt.HalrtError, `expected a HalrtError, got ${error && error.stack}`);
          assert.strictEqual(error.code, 'RESOURCE_EXHAUSTED');
          assert.ok(error.message.includes(`trace 'big': tensor 'x': ${tooLarge(LIMIT + 16)}`), error.message);
          assert.strictEqual(error.cause, undefined, 'no callback threw');
          assert.deepStrictEqual(seen.map((c) => c.key), ['before']);
          // Data at the limit still travels, and the sink goes on working.
          await at.invoke([edge]);
          assert.deepStrictEqual(seen.map((c) => c.key), ['before', 'edge']);
          assert.deepStrictEqual(seen[1].data, [pattern(LIMIT)]);
        } finally {
          closeAll(s, x, edge, over, at);
          p.close();
        }
        assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      });
    }

    it('with a flight recorder the same trace fails its invocation when it is taken, and is not kept', async () => {
      const seen = [];
      const p = makeProgram(uri, (b) => b
        .function('over', (f) => f.input('s', 'u8', [16]).input('x', 'u8', [LIMIT + 16])
          .trace('before', ['s']).trace('big', ['s', 'x']).trace('after', ['s'])), {
        hal: { flightRecorder: { traces: 8 }, debugSink: (key) => seen.push(key) },
      });
      const over = p.lookup('over');
      const s = p.device.tensor(pattern(16), [16]);
      const x = p.device.empty([LIMIT + 16], 'u8');
      try {
        await assertRejectsHalrt(over.invoke([s, x]), 'RESOURCE_EXHAUSTED', `trace 'big': tensor 'x': ${tooLarge(LIMIT + 16)}`);
        // The failure delivered what the recorder kept: the trace before.
        assert.deepStrictEqual(seen, ['before']);
        assert.strictEqual(await p.hal.flightRecorder.dump(), 0);
      } finally {
        closeAll(s, x, over);
        p.close();
      }
    });
  });
}

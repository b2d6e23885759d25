'use strict';
// The local devices' buffer cache (src/hal/local/local_allocator.h): memory
// is reused across calls without ever showing an earlier user's data, and
// what the cache holds is counted in liveObjects() and given back when the
// device goes idle or is destroyed. Judged by counts, never by time.

const assert = require('assert');
const halrt = require('..');
const { assertThrowsHalrt, closeAll, liveBaseline, makeProgram, settleLiveObjects, waitFor } = require('./helpers');

const CPU_URIS = ['local-sync', 'local-task?workers=2'];
const N = 1 << 16; // f32 elements: 256 KiB per value, above the cached minimum
const BYTES = N * 4;

// A module whose `dirty` writes 7s into its output and local, and whose
// `fresh` returns its output and a copy of its local, neither written.
function define(b) {
  b.function('dirty', (f) => f
    .output('y', 'f32', [N]).local('t', 'f32', [N])
    .fill('t', 7).fill('y', 7));
  b.function('fresh', (f) => f
    .output('y', 'f32', [N]).output('z', 'f32', [N]).local('t', 'f32', [N])
    .copy('t', 'z'));
}

function allZero(array) {
  return array.every((v) => v === 0);
}

describe('local device buffer cache', function () {
  this.timeout(60000);

  // Every test starts from an empty cache: garbage of earlier tests is
  // collected, and devices left open by them trim once idle, so that the
  // counts below move only with this test's device.
  beforeEach(async () => {
    await liveBaseline();
    await waitFor(() => halrt.liveObjects().cachedBlock === 0, 20000, 'other devices to trim');
  });

  afterEach(() => {
    delete process.env.HALRT_LOCAL_CACHE_BYTES;
  });

  it('liveObjects() has cachedBlock and cachedBytes', () => {
    const live = halrt.liveObjects();
    assert.ok(Number.isInteger(live.cachedBlock) && live.cachedBlock >= 0);
    assert.ok(Number.isInteger(live.cachedBytes) && live.cachedBytes >= 0);
  });

  for (const uri of CPU_URIS) {
    describe(uri, () => {
      it('reused outputs and locals of a call are zero-filled, never stale', async () => {
        const p = makeProgram(uri, define);
        try {
          const dirty = p.lookup('dirty');
          const fresh = p.lookup('fresh');
          for (let round = 0; round < 3; ++round) {
            const [y] = await dirty.invoke([]);
            const written = await y.read();
            assert.strictEqual(written[N - 1], 7);
            y.close();
            // The output and the local of `dirty` are cached now.
            const cached = halrt.liveObjects().cachedBlock;
            assert.ok(cached >= 2, `cached ${cached} blocks`);
            const [y2, z2] = await fresh.invoke([]);
            // `fresh` took its blocks from the cache (three values, at most
            // one of them new) ...
            assert.ok(halrt.liveObjects().cachedBlock <= cached - 1, 'blocks were reused');
            // ... and still sees zeros in its output and its local.
            assert.ok(allZero(await y2.read()), 'output y is zero');
            assert.ok(allZero(await z2.read()), 'local t (copied to z) is zero');
            closeAll(y2, z2);
          }
        } finally {
          p.close();
        }
      });

      it('a value whose first op writes all of it is not zero-filled first, and no call sees stale data either way', async () => {
        const half = N / 2;
        const p = makeProgram(uri, (b) => {
          define(b);
          b.function('mixed', (f) => f
            .input('x', 'f32', [N])
            .output('whole', 'f32', [N]).output('part', 'f32', [N]).output('z', 'f32', [N])
            .local('t', 'f32', [N])
            // Written whole by its first op: allocated without the fill.
            .dispatch('k.add_f32', { workgroups: [4], bindings: ['x', 'x', 'whole'], constants: [N] })
            // Half written: the other half must read as zero.
            .dispatch('k.add_f32', { workgroups: [4], bindings: ['x', 'x', 'part'], constants: [half] })
            // Read by its first op (in place): it must start as zero.
            .dispatch('k.add_f32', { workgroups: [4], bindings: ['t', 'x', 't'], constants: [N] })
            .copy('t', 'z'));
        });
        try {
          const dirty = p.lookup('dirty');
          const mixed = p.lookup('mixed');
          const x = p.device.tensor(Float32Array.from({ length: N }, (_, i) => i % 251), [N]);
          for (let round = 0; round < 3; ++round) {
            closeAll(await dirty.invoke([]));
            const cached = halrt.liveObjects().cachedBlock;
            const [whole, part, z] = await mixed.invoke([x]);
            assert.ok(halrt.liveObjects().cachedBlock < cached, 'blocks were reused');
            const [w, q, t] = [await whole.read(), await part.read(), await z.read()];
            for (let i = 0; i < N; ++i) {
              const v = i % 251;
              if (w[i] !== 2 * v || q[i] !== (i < half ? 2 * v : 0) || t[i] !== v) {
                assert.fail(`round ${round}, element ${i}: whole ${w[i]}, part ${q[i]}, z ${t[i]} (x ${v})`);
              }
            }
            closeAll(whole, part, z);
          }
          x.close();
        } finally {
          p.close();
        }
      });

      it('device.empty() on a reused block is zero-filled', async () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice(uri);
        try {
          const full = device.tensor(new Float32Array(N).fill(3), [N]);
          assert.strictEqual((await full.read())[N - 1], 3);
          full.close();
          await waitFor(() => halrt.liveObjects().cachedBlock > 0, 5000, 'the block to be cached');
          const cached = halrt.liveObjects().cachedBlock;
          const empty = device.empty([N], 'f32');
          assert.strictEqual(halrt.liveObjects().cachedBlock, cached - 1, 'the block was reused');
          assert.ok(allZero(await empty.read()));
          empty.close();
        } finally {
          closeAll(device, instance);
        }
      });

      it('counts cached bytes and gives them back when the device goes idle', async () => {
        const baseline = await liveBaseline();
        const p = makeProgram(uri, define);
        try {
          const [y] = await p.lookup('dirty').invoke([]);
          y.close();
          const live = halrt.liveObjects();
          // 256 KiB is a class of its own: two blocks of exactly that size.
          assert.strictEqual(live.cachedBlock, baseline.cachedBlock + 2);
          assert.strictEqual(live.cachedBytes, baseline.cachedBytes + 2 * BYTES);
          // Idle (the device stays open): the queue thread trims the cache.
          await waitFor(() => halrt.liveObjects().cachedBlock === baseline.cachedBlock, 30000, 'the idle trim');
          assert.strictEqual(halrt.liveObjects().cachedBytes, baseline.cachedBytes);
        } finally {
          p.close();
        }
        assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      });

      it('a closed device frees its cache with its last buffer', async () => {
        const baseline = await liveBaseline();
        const p = makeProgram(uri, define);
        const [y] = await p.lookup('dirty').invoke([]);
        assert.strictEqual(halrt.liveObjects().cachedBlock, baseline.cachedBlock + 1, 'the local is cached');
        p.close();
        // The output keeps the device alive; releasing it destroys both.
        y.close();
        assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
      });
    });
  }

  it('HALRT_LOCAL_CACHE_BYTES=0 turns the cache off', async () => {
    process.env.HALRT_LOCAL_CACHE_BYTES = '0';
    const baseline = await liveBaseline();
    const p = makeProgram('local-task?workers=2', define);
    try {
      const [y] = await p.lookup('dirty').invoke([]);
      y.close();
      assert.strictEqual(halrt.liveObjects().cachedBlock, baseline.cachedBlock);
      const [y2, z2] = await p.lookup('fresh').invoke([]);
      assert.ok(allZero(await y2.read()) && allZero(await z2.read()));
      closeAll(y2, z2);
    } finally {
      p.close();
    }
  });

  it('a malformed HALRT_LOCAL_CACHE_BYTES fails createDevice naming it', () => {
    const instance = new halrt.Instance();
    try {
      for (const value of ['lots', '-1', '1e6', '99999999999999999999999']) {
        process.env.HALRT_LOCAL_CACHE_BYTES = value;
        for (const uri of CPU_URIS) {
          assertThrowsHalrt(() => instance.createDevice(uri), 'INVALID_ARGUMENT', 'HALRT_LOCAL_CACHE_BYTES', `'${value}'`);
        }
      }
    } finally {
      instance.close();
    }
  });
});

'use strict';
// The JavaScript debug sink: what it receives, in which order, how errors
// thrown by it surface, backpressure, and concurrency (many invocations, many
// producers, closing objects while work is in flight).
const assert = require('assert');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const {
  DEVICE_URIS, UNDER_SANITIZER, assertClose, assertThrowsHalrt, busyWait, closeAll, liveBaseline, makeProgram, randomFloats, reference, settleLiveObjects,
} = require('./helpers');

/** A sink that records (key, tensors, info) and can be swapped out. */
function recorder() {
  const calls = [];
  const sink = (key, tensors, info) => {
    calls.push({ key, tensors, info });
  };
  return { calls, sink };
}

const TRACE_TENSOR_KEYS = ['data', 'dtype', 'name', 'shape'];
const TRACE_INFO_KEYS = ['dropped', 'function', 'mode', 'op', 'recorded', 'sequence', 'timeNs'];

for (const uri of DEVICE_URIS) {
  describe(`debug sink (${uri})`, () => {
    for (const [M, K, N] of [[1, 1, 1], [4, 8, 16], [9, 7, 5]]) {
      it(`traced f32 tensors equal what JavaScript computes for the same inputs (${M}x${K}x${N})`, async () => {
        const { calls, sink } = recorder();
        const p = makeProgram(uri, (b) => b.function('main', (f) => f
          .input('x', 'f32', [M, K]).input('w', 'f32', [K, N]).input('bias', 'f32', [M, N])
          .output('probs', 'f32', [M, N]).output('sums', 'f32', [M])
          .local('t', 'f32', [M, N]).local('r', 'f32', [M, N]).local('s', 'f32', [M, N])
          .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'w', 't'], constants: [M, K, N] })
          .trace('matmul', ['t'])
          .dispatch('k.relu_f32', { workgroups: [3], bindings: ['t', 'r'], constants: [M * N] })
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['r', 'bias', 's'], constants: [M * N] })
          .trace('relu+add', ['r', 's'])
          .dispatch('k.softmax_rows_f32', { workgroups: [2], bindings: ['s', 'probs'], constants: [M, N] })
          .dispatch('k.reduce_sum_f32', { workgroups: [1], bindings: ['probs', 'sums'], constants: [M, N] })
          .trace('outputs', ['probs', 'sums', 'x'])), { hal: { debugSink: sink } });
        const fn = p.lookup('main');
        const x = randomFloats(M * K, M + 10);
        const w = randomFloats(K * N, N + 20);
        const bias = randomFloats(M * N, K + 30);
        const inputs = [p.device.tensor(x, [M, K]), p.device.tensor(w, [K, N]), p.device.tensor(bias, [M, N])];
        try {
          const outputs = await fn.invoke(inputs);
          assert.deepStrictEqual(calls.map((c) => c.key), ['matmul', 'relu+add', 'outputs']);
          for (const { tensors, info } of calls) {
            assert.deepStrictEqual(Object.keys(info).sort(), TRACE_INFO_KEYS);
            assert.strictEqual(info.function, 'm.main');
            assert.strictEqual(info.dropped, 0);
            assert.strictEqual(info.recorded, false);
            for (const tensor of tensors) assert.deepStrictEqual(Object.keys(tensor).sort(), TRACE_TENSOR_KEYS);
          }
          assert.deepStrictEqual(calls.map((c) => c.info.op), [1, 4, 7]);
          const [[t], [r, s], [probs, sums, xTrace]] = calls.map((c) => c.tensors);
          assert.deepStrictEqual([t.name, t.dtype, t.shape], ['t', 'f32', [M, N]]);
          assert.ok(t.data instanceof Float32Array);
          assertClose(t.data, reference.matmul(x, w, M, K, N), { what: 't' });
          assert.deepStrictEqual(r.data, reference.relu(t.data));
          assert.deepStrictEqual(s.data, reference.elementwise(r.data, bias, (a, b) => a + b, Float32Array));
          assertClose(probs.data, reference.softmaxRows(s.data, M, N), { rtol: 1e-5, atol: 1e-7, what: 'softmax' });
          assertClose(sums.data, reference.reduceSum(probs.data, M, N), { rtol: 1e-5, atol: 1e-6, what: 'sums' });
          assert.deepStrictEqual([sums.name, sums.shape], ['sums', [M]]);
          assert.deepStrictEqual(xTrace.data, x, 'an input is traced as given');
          // The traced outputs are the values the invocation returned.
          assert.deepStrictEqual(await outputs[0].read(), probs.data);
          assert.deepStrictEqual(await outputs[1].read(), sums.data);
          closeAll(outputs);
        } finally {
          closeAll(inputs, fn);
          p.close();
        }
      });
    }

    it('traced i32 tensors equal JavaScript add and max (wrapping)', async () => {
      const { calls, sink } = recorder();
      const n = 6;
      const p = makeProgram(uri, (b) => b.function('ints', (f) => f
        .input('a', 'i32', [2, 3]).input('b', 'i32', [2, 3]).output('m', 'i32', [2, 3]).local('s', 'i32', [2, 3])
        .dispatch('k.add_i32', { workgroups: [2], bindings: ['a', 'b', 's'], constants: [n] })
        .dispatch('k.max_i32', { workgroups: [5], bindings: ['s', 'b', 'm'], constants: [n] })
        .trace('ints', ['s', 'm'])), { hal: { debugSink: sink } });
      const fn = p.lookup('ints');
      const a = Int32Array.from([2147483647, -5, 0, 7, -2147483648, 100]);
      const b = Int32Array.from([1, 3, -1, -7, -1, -200]);
      const inputs = [p.device.tensor(a, [2, 3]), p.device.tensor(b, [2, 3])];
      try {
        const [m] = await fn.invoke(inputs);
        assert.strictEqual(calls.length, 1);
        const [s, mTrace] = calls[0].tensors;
        const sum = reference.elementwise(a, b, (x, y) => x + y, Int32Array);
        assert.deepStrictEqual(s, { name: 's', dtype: 'i32', shape: [2, 3], data: sum });
        assert.deepStrictEqual(mTrace, { name: 'm', dtype: 'i32', shape: [2, 3], data: reference.elementwise(sum, b, Math.max, Int32Array) });
        assert.deepStrictEqual(await m.read(), mTrace.data);
        m.close();
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('fills traced as f64, i8, u16, bool, f16, bf16, i64 and u64 arrive in their TypedArrays', async () => {
      const { calls, sink } = recorder();
      const values = [
        ['f64', [3], -1 / 3, new Float64Array(3).fill(-1 / 3)],
        ['i8', [2, 2], -7, new Int8Array(4).fill(-7)],
        ['u16', [1, 5], 65535, new Uint16Array(5).fill(65535)],
        ['bool', [4], true, new Uint8Array(4).fill(1)],
        ['f16', [2], 65504, new Uint16Array(2).fill(0x7bff)],
        ['f16', [2, 1, 1], 1e6, new Uint16Array(2).fill(0x7c00)],
        ['bf16', [3], 1, new Uint16Array(3).fill(0x3f80)],
        ['i64', [2], -3, new BigInt64Array(2).fill(-3n)],
        ['u64', [], 12345, new BigUint64Array([12345n])],
      ];
      const p = makeProgram(uri, (b) => b.function('fills', (f) => {
        f.output('done', 'u8', [1]).fill('done', 1);
        values.forEach(([dtype, shape, value], i) => f.local(`v${i}`, dtype, shape).fill(`v${i}`, value));
        f.trace('all', values.map((_, i) => `v${i}`));
      }), { hal: { debugSink: sink } });
      const fn = p.lookup('fills');
      try {
        const [done] = await fn.invoke([]);
        done.close();
        assert.strictEqual(calls.length, 1);
        assert.deepStrictEqual(calls[0].tensors, values.map(([dtype, shape, , data], i) => ({ name: `v${i}`, dtype, shape, data })));
      } finally {
        fn.close();
        p.close();
      }
    });

    it('each trace delivers fresh copies: changing one does not change the next or the outputs', async () => {
      const { calls, sink } = recorder();
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .output('y', 'f32', [4]).fill('y', 2).trace('first', ['y']).trace('second', ['y'])),
      { hal: { debugSink: (key, tensors, info) => {
        tensors[0].data.fill(-1);
        sink(key, tensors, info);
      } } });
      const fn = p.lookup('f');
      try {
        const [y] = await fn.invoke([]);
        assert.notStrictEqual(calls[0].tensors[0].data.buffer, calls[1].tensors[0].data.buffer);
        assert.deepStrictEqual(await y.read(), new Float32Array(4).fill(2));
        y.close();
      } finally {
        fn.close();
        p.close();
      }
    });

    it('traceData \'borrowed\' lends large data for the callback only: detached after it; small data is kept, and a transfer copies', async () => {
      const N = 32768; // 128 KiB of f32: lent; the f32[4] is always a copy
      const seen = [];
      const moved = [];
      const p = makeProgram(uri, (b) => b.function('main', (f) => f
        .input('x', 'f32', [N]).input('s', 'f32', [4]).output('y', 'f32', [N])
        .dispatch('k.relu_f32', { workgroups: [2], bindings: ['x', 'y'], constants: [N] })
        .trace('inputs', ['x', 's']).trace('relu', ['y'])), {
        hal: {
          traceData: 'borrowed',
          debugSink: (key, tensors) => {
            seen.push({ key, tensors, copies: tensors.map((t) => t.data.slice()) });
            // A lent buffer is not transferable (Node marks the external
            // buffers of addons so): a transfer copies it.
            if (key === 'relu' && moved.length === 0) {
              moved.push(structuredClone(tensors[0].data, { transfer: [tensors[0].data.buffer] }));
              assert.strictEqual(
                  tensors[0].data.length, N, 'still lent after the transfer');
            }
          },
        },
      });
      const fn = p.lookup('main');
      const x = Float32Array.from({ length: N }, (_, i) => (i % 7) - 3 + i / N);
      const small = Float32Array.from([1, 2, 3, 4]);
      const relu = x.map((v) => Math.max(v, 0));
      try {
        for (let round = 0; round < 4; ++round) {
          const [y] = await fn.invoke([p.device.tensor(x, [N]), p.device.tensor(small, [4])]);
          y.close();
        }
        assert.deepStrictEqual(seen.map((c) => c.key), ['inputs', 'relu', 'inputs', 'relu', 'inputs', 'relu', 'inputs', 'relu']);
        for (const { key, tensors, copies } of seen) {
          assert.deepStrictEqual(copies[0], key === 'inputs' ? x : relu, `${key}: what the callback saw`);
          assert.strictEqual(tensors[0].data.length, 0, `${key}: lent data is detached after the callback`);
          assert.strictEqual(tensors[0].data.buffer.byteLength, 0);
          if (key === 'inputs') assert.deepStrictEqual(tensors[1].data, small, 'small data stays a copy');
        }
        assert.deepStrictEqual(moved[0], relu, 'the copy a transfer made');
      } finally {
        fn.close();
        p.close();
      }
    });

    it('traceData \'borrowed\' shows each invocation the values it traced while later ones overwrite them in place', async () => {
                // Borrowed data may be lent where it lies, without a copy: a
                // later writer of the bytes copies them first while the sink
                // has not begun reading them, and waits while it reads. Four
                // invocations in flight bump the same input in place under a
                // sink that takes 3 ms a trace.
                const N = 1 << 16;  // 256 KiB: large data
                const seen = [];
      const p = makeProgram(uri, (b) => b.function('main', (f) => f
        .input('x', 'f32', [N]).input('one', 'f32', [N])
        .trace('before', ['x'])
        .dispatch('k.add_f32', { workgroups: [4], bindings: ['x', 'one', 'x'], constants: [N] })
        .trace('after', ['x'])), {
        hal: {
          traceData: 'borrowed',
          debugSink: (key, tensors, info) => {
                    const {data} = tensors[0];
                    seen.push({
                      key,
                      sequence: info.sequence,
                      first: data[0],
                      last: data[N - 1],
                      sum: data.reduce((a, v) => a + v, 0)
                    });
                    busyWait(3);
          },
        },
      });
                  const fn = p.lookup('main');
                  const x = p.device.tensor(new Float32Array(N).fill(10), [N]);
                  const one = p.device.tensor(new Float32Array(N).fill(1), [N]);
                  try {
                    await Promise.all(
                        [0, 1, 2, 3].map(() => fn.invoke([x, one])));
                    assert.strictEqual(seen.length, 8);
                    for (const {key, sequence, first, last, sum} of seen) {
                      const expected =
                          10 + (sequence - 1) + (key === 'after' ? 1 : 0);
                      assert.deepStrictEqual(
                          {first, last, sum},
                          {first: expected, last: expected, sum: expected * N},
                          `${key} of invocation ${sequence}`);
                    }
                    assert.deepStrictEqual(
                        await x.read(), new Float32Array(N).fill(14));
                  } finally {
                    closeAll(x, one);
                    fn.close();
                    p.close();
                  }
    });

    it('traceData \'borrowed\' lends a record\'s data only when its callbacks come: a writer of it runs before then', async () => {
                  // One invocation traces y 12 times, then x, to a sink that
                  // takes 3 ms a trace, so that the batch is delivered in
                  // slices with other work between them; a second one, made
                  // from the first callback, writes x. Its dispatch must not
                  // wait for x's record: x is copied aside.
                  const N = 1 << 16;
                  let firstAt = 0n;
                  let xAt = 0n;
                  let writerAt = 0n;
                  let xSeen;
                  let bump;
                  let stop = false;
      const p = makeProgram(uri, (b) => b
        .function('first', (f) => {
                    f.input('x', 'f32', [N]).input('y', 'f32', [N]);
                    for (let i = 0; i < 12; ++i) f.trace(`y${i}`, ['y']);
                    return f.trace('x', ['x']);
        })
        .function('bump', (f) => f.input('x', 'f32', [N]).input('one', 'f32', [N])
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'one', 'x'], constants: [N] })), {
        hal: {
          traceData: 'borrowed',
          profile: true,
          debugSink: {
            trace(key, tensors) {
                      const now = process.hrtime.bigint();
                      if (firstAt === 0n) {
                        firstAt = now;
                        bump = writer.invoke([x, one]);
                      }
                      if (key === 'x') {
                        xAt = now;
                        xSeen = tensors[0].data.slice(0, 4);
                      }
                      busyWait(3);
            },
            timing(event) {
                      if (event.function === 'm.bump')
                        writerAt = BigInt(Math.round(event.startNs));
            },
          },
        },
      });
                    const first = p.lookup('first');
                    const writer = p.lookup('bump');
                    const x = p.device.tensor(new Float32Array(N).fill(1), [N]);
                    const y = p.device.tensor(new Float32Array(N).fill(2), [N]);
                    const one =
                        p.device.tensor(new Float32Array(N).fill(1), [N]);
                    const spin = () => {
                      if (stop) return;
                      busyWait(10);
                      setImmediate(spin);
                    };
                    try {
                      const done = first.invoke([x, y]);
                      setImmediate(spin);
                      await done;
                      await bump;
                      stop = true;
                      assert.deepStrictEqual(
                          xSeen, new Float32Array(4).fill(1), 'x as traced');
                      assert.ok(
                          writerAt > 0n && writerAt < xAt,
                          `the writer ran ${
                              Number(writerAt - firstAt) /
                              1e6} ms after the first callback, x's record came at ${
                              Number(xAt - firstAt) / 1e6} ms`);
                      assert.deepStrictEqual(
                          (await x.read()).slice(0, 4),
                          new Float32Array(4).fill(2));
                    } finally {
                      stop = true;
                      closeAll(x, y, one, first, writer);
                      p.close();
                    }
    });

    for (const traceData of ['owned', 'borrowed']) {
      it(`large traces are exact however many workgroups wrote them (traceData '${traceData}')`, async () => {
                  // A local-task device splits the copy of a dispatch's output
                  // by the workers that ran its workgroups (2 to 64 of them) or
                  // by chunks: every split must copy every byte once. 300007
                  // f32: not a whole number of cache lines, nor of chunks.
                  const N = 300007;
                  const counts = [1, 2, 3, 7, 64, 65];
                  const seen = new Map();
        const p = makeProgram(uri, (b) => b.function('main', (f) => {
                    f.input('a', 'f32', [N]).input('b', 'f32', [N]);
                    for (const [i, w] of counts.entries()) {
                      f.local(`c${i}`, 'f32', [N])
                          .dispatch('k.add_f32', {
                            workgroups: [w],
                            bindings:
                                [i === 0 ? 'a' : `c${i - 1}`, 'b', `c${i}`],
                            constants: [N]
                          })
                          .trace(`w${w}`, [`c${i}`]);
                    }
                    return f.trace('a', ['a']);
        }), {
          hal: {
            traceData,
            debugSink: (key, tensors) => seen.set(key, tensors[0].data.slice()),
          },
        });
                    const fn = p.lookup('main');
                    const a = Float32Array.from(
                        {length: N}, (_, i) => ((i * 37) % 101) - 50 + i / N);
                    const b = Float32Array.from(
                        {length: N}, (_, i) => ((i * 13) % 29) / 8);
                    try {
                      await fn.invoke([a, b]);
                      let expected = a;
                      for (const w of counts) {
                        expected =
                            expected.map((v, i) => Math.fround(v + b[i]));
                        assert.deepStrictEqual(
                            seen.get(`w${w}`), expected,
                            `the output of ${w} workgroups`);
                      }
                      assert.deepStrictEqual(
                          seen.get('a'), a,
                          'an input, traced after the dispatches');
                    } finally {
                      fn.close();
                      p.close();
                    }
      });

      it(`a later dispatch that writes a traced value in place never changes what the trace shows (traceData '${traceData}')`, async () => {
        // 4 MiB traces, a sink that takes 5 ms per call and room for one
        // trace at a time: the device has long moved on when a trace is
        // copied, so only the wait of the later writer keeps its values.
        const N = 1 << 20;
        const seen = [];
        const p = makeProgram(uri, (b) => b.function('main', (f) => f
          .input('x', 'f32', [N]).local('y', 'f32', [N]).output('z', 'f32', [N])
          .dispatch('k.relu_f32', { workgroups: [4], bindings: ['x', 'y'], constants: [N] })
          .trace('before', ['y'])
          .dispatch('k.add_f32', { workgroups: [4], bindings: ['x', 'y', 'y'], constants: [N] })
          .trace('after', ['y'])
          .dispatch('k.relu_f32', { workgroups: [4], bindings: ['y', 'z'], constants: [N] })), {
          hal: {
            traceData,
            maxTraceBytes: 1,
            debugSink: (key, tensors, info) => {
              const { data } = tensors[0];
              seen.push({ key, sequence: info.sequence, head: data.slice(0, 8), tail: data.slice(N - 8) });
              busyWait(5);
            },
          },
        });
        const fn = p.lookup('main');
        const x = Float32Array.from({ length: N }, (_, i) => (i % 7) - 3 + i / N);
        const relu = x.map((v) => Math.max(v, 0));
        const sum = x.map((v, i) => Math.fround(v + relu[i]));
        try {
          const outputs = await Promise.all([0, 1, 2].map(() => fn.invoke([x])));
          for (const [z] of outputs) {
            const out = await z.read();
            assert.deepStrictEqual(out.slice(0, 8), sum.slice(0, 8).map((v) => Math.max(v, 0)));
            z.close();
          }
          assert.deepStrictEqual(seen.map((t) => t.key), ['before', 'after', 'before', 'after', 'before', 'after']);
          for (const { key, head, tail } of seen) {
            const expected = key === 'before' ? relu : sum;
            assert.deepStrictEqual(head, expected.slice(0, 8), `${key}: first elements`);
            assert.deepStrictEqual(tail, expected.slice(N - 8), `${key}: last elements`);
          }
        } finally {
          fn.close();
          p.close();
        }
      });
    }

    it("traceData 'borrowed' detaches each trace's large data when its callback returns, before the next trace of the same batch", async () => {
      const N = 32768; // 128 KiB of f32 per trace: lent
      const keys = ['t0', 't1', 't2', 't3'];
      const seen = []; // per callback: its key, its array, what it saw
      let moved;
      const p = makeProgram(uri, (b) => b.function('main', (f) => {
        f.input('x', 'f32', [N]).output('y', 'f32', [N])
          .dispatch('k.relu_f32', { workgroups: [2], bindings: ['x', 'y'], constants: [N] });
        for (const key of keys) f.trace(key, ['x']);
        return f;
      }), {
        hal: {
          traceData: 'borrowed',
          debugSink: (key, tensors) => {
            const data = tensors[0].data;
            seen.push({
              key,
              data,
              previousLength: seen.length ? seen[seen.length - 1].data.byteLength : null,
              ownLength: data.length,
              ownSum: data.reduce((a, v) => a + v, 0),
            });
            if (key === 't1') throw new Error('t1 fails');
            if (key === 't2') moved = structuredClone(data, { transfer: [data.buffer] });
          },
        },
      });
      const fn = p.lookup('main');
      const x = Float32Array.from({ length: N }, (_, i) => (i % 5) - 2);
      const sum = x.reduce((a, v) => a + v, 0);
      const input = p.device.tensor(x, [N]);
      try {
        // Holding the JS thread while the device traces puts the four
        // traces in one batch.
        const pending = fn.invoke([input]);
        busyWait(100);
        await assert.rejects(pending, (error) => error.code === 'ABORTED' && error.cause.message === 't1 fails');
        assert.deepStrictEqual(seen.map((c) => c.key), keys);
        for (const c of seen) {
          assert.strictEqual(c.ownLength, N, `${c.key}: intact during its callback`);
          assert.strictEqual(c.ownSum, sum, `${c.key}: the traced values`);
          assert.strictEqual(c.data.byteLength, 0, `${c.key}: detached afterwards`);
        }
        // Detached before the next callback ran, also after a throw (t1) and
        // a transfer (t2), which leaves the moved copy intact.
        assert.deepStrictEqual(seen.map((c) => c.previousLength), [null, 0, 0, 0]);
        assert.deepStrictEqual(moved, x);
      } finally {
        closeAll(input, fn);
        p.close();
      }
    });

    it('traceDispatches traces what each dispatch writes under "function:op:kernel" keys, in program order', async () => {
      const { calls, sink } = recorder();
      const p = makeProgram(uri, (b) => b.function('main', (f) => f
        .input('x', 'f32', [2, 2]).input('w', 'f32', [2, 2]).output('y', 'f32', [2, 2]).local('t', 'f32', [2, 2])
        .dispatch('k.matmul_f32', { workgroups: [1, 1, 1], bindings: ['x', 'w', 't'], constants: [2, 2, 2] })
        .trace('explicit', ['t'])
        .fill('y', 0)
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['t', 'y'], constants: [4] })), { hal: { debugSink: sink, traceDispatches: true } });
      assert.strictEqual(p.hal.traceDispatches, true);
      const fn = p.lookup('main');
      const x = Float32Array.from([1, -2, 3, 4]);
      const w = Float32Array.from([1, 1, -1, 2]);
      const inputs = [p.device.tensor(x, [2, 2]), p.device.tensor(w, [2, 2])];
      try {
        const [y] = await fn.invoke(inputs);
        const t = Float32Array.from([3, -3, -1, 11]);
        assert.deepStrictEqual(calls.map((c) => [c.key, c.info.op, c.tensors]), [
          ['main:0:matmul_f32', 0, [{ name: 't', dtype: 'f32', shape: [2, 2], data: t }]],
          ['explicit', 1, [{ name: 't', dtype: 'f32', shape: [2, 2], data: t }]],
          ['main:3:relu_f32', 3, [{ name: 'y', dtype: 'f32', shape: [2, 2], data: Float32Array.from([3, 0, 0, 11]) }]],
        ]);
        assert.deepStrictEqual(await y.read(), Float32Array.from([3, 0, 0, 11]));
        y.close();
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('traceDispatches filters pick dispatches by key pattern, function name and every Nth invocation', async () => {
      const keys = [];
      const p = makeProgram(uri, (b) => b
        .function('main', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4]).local('t', 'f32', [4])
          .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 't'], constants: [4] })
          .dispatch('k.add_f32', { workgroups: [1], bindings: ['t', 't', 'y'], constants: [4] }))
        .function('other', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
          .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [4] })),
      { hal: { debugSink: (key, tensors, info) => keys.push(`${info.sequence} ${key}`), traceDispatches: { keys: /RELU|add/i, functions: ['main'], every: 2 } } });
      const x = p.device.tensor(Float32Array.from([1, -2, 3, -4]), [4]);
      try {
        const main = p.lookup('main');
        const other = p.lookup('other');
        const sequences = [];
        for (let i = 0; i < 3; ++i) {
          const before = keys.length;
          closeAll(await main.invoke([x]));
          sequences.push(keys.slice(before).map((k) => Number(k.split(' ')[0])));
        }
        closeAll(await other.invoke([x]));
        // Invocations with an even sequence trace both dispatches of main;
        // the others and every dispatch of `other` trace nothing. Three
        // consecutive invocations include both kinds.
        const traced = keys.map((k) => k.split(' ')[1]);
        assert.ok(traced.every((k) => k === 'main:0:relu_f32' || k === 'main:1:add_f32'), traced.join());
        for (const seq of sequences.flat()) assert.strictEqual(seq % 2, 0);
        assert.ok(sequences.some((s) => s.length === 2) && sequences.some((s) => s.length === 0));
        assert.strictEqual(keys.length, 2 * sequences.filter((s) => s.length > 0).length);
        assert.deepStrictEqual(p.hal.traceDispatches.functions, ['main']);
      } finally {
        x.close();
        p.close();
      }
    });

    it('a HalModule with traceDispatches and no sink runs functions normally', async () => {
      const p = makeProgram(uri, (b) => b.function('f', (f) => f.input('x', 'f32', [3]).output('y', 'f32', [3])
        .dispatch('k.relu_f32', { workgroups: [1], bindings: ['x', 'y'], constants: [3] }).trace('y', ['y'])),
      { hal: { traceDispatches: true } });
      const fn = p.lookup('f');
      const x = p.device.tensor(Float32Array.from([-1, 0.5, 2]), [3]);
      try {
        const [y] = await fn.invoke([x]);
        assert.deepStrictEqual(await y.read(), Float32Array.from([0, 0.5, 2]));
        y.close();
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });

    it('50 concurrent invocations: traces arrive in program order, sequence identifies the invocation, all before its promise settles', async () => {
      const COUNT = 50;
      const bySequence = new Map();
      const p = makeProgram(uri, (b) => b.function('main', (f) => f
        .input('x', 'f32', [8]).output('y', 'f32', [8]).local('t', 'f32', [8])
        .trace('in', ['x'])
        .dispatch('k.relu_f32', { workgroups: [2], bindings: ['x', 't'], constants: [8] })
        .trace('mid', ['t'])
        .dispatch('k.add_f32', { workgroups: [4], bindings: ['t', 't', 'y'], constants: [8] })
        .barrier()
        .trace('out', ['y'])
        .trace('end', ['x', 'y'])), {
        hal: {
          traceDispatches: true,
          debugSink: (key, tensors, info) => {
            if (!bySequence.has(info.sequence)) bySequence.set(info.sequence, { keys: [], ops: [], ids: new Set() });
            const entry = bySequence.get(info.sequence);
            entry.keys.push(key);
            entry.ops.push(info.op);
            // Input x of invocation i is filled with i - 25 (see below).
            const x = key === 'in' || key === 'end' ? tensors[0].data : null;
            if (x) entry.ids.add(x[7] + 25);
            assert.strictEqual(info.function, 'm.main');
          },
        },
      });
      const fn = p.lookup('main');
      const expectedKeys = ['in', 'main:1:relu_f32', 'mid', 'main:3:add_f32', 'out', 'end'];
      const inputs = [];
      try {
        const seenAtSettle = new Array(COUNT);
        const idToSequence = new Map();
        const pending = [];
        for (let i = 0; i < COUNT; ++i) {
          const x = p.device.tensor(new Float32Array(8).fill(i - 25), [8]);
          inputs.push(x);
          pending.push(fn.invoke([x]).then(async (outputs) => {
            // Runs as the promise settles: every trace must be in already.
            const sequence = [...bySequence.entries()].find(([, entry]) => entry.ids.has(i))?.[0];
            seenAtSettle[i] = sequence === undefined ? 0 : bySequence.get(sequence).keys.length;
            idToSequence.set(i, sequence);
            const y = await outputs[0].read();
            assert.deepStrictEqual(y, new Float32Array(8).fill(2 * Math.max(i - 25, 0)));
            closeAll(outputs);
          }));
        }
        await Promise.all(pending);
        assert.deepStrictEqual(seenAtSettle, new Array(COUNT).fill(expectedKeys.length),
          'traces seen for each invocation when its promise settled');
        assert.strictEqual(bySequence.size, COUNT);
        for (const [sequence, entry] of bySequence) {
          assert.deepStrictEqual(entry.keys, expectedKeys, `keys of sequence ${sequence}`);
          assert.deepStrictEqual(entry.ops, [0, 1, 2, 3, 5, 6], `ops of sequence ${sequence}`);
          assert.strictEqual(entry.ids.size, 1, `sequence ${sequence} carries one invocation's data`);
        }
        // Sequences number the invocations in the order they were started.
        const sequences = [...idToSequence.keys()].sort((a, b) => a - b).map((i) => idToSequence.get(i));
        for (let i = 1; i < COUNT; ++i) assert.strictEqual(sequences[i], sequences[0] + i);
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('a sink that throws rejects exactly the invocation that traced, with ABORTED and the thrown error as cause', async () => {
      const thrown = new TypeError('sink failed');
      let sinkCalls = 0;
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'i32', [1]).output('y', 'i32', [1]).copy('x', 'y').trace('a', ['y']).trace('b', ['y'])), {
        hal: {
          debugSink: (key, tensors) => {
            sinkCalls += 1;
            if (tensors[0].data[0] === 13 && key === 'a') throw thrown;
          },
        },
      });
      const fn = p.lookup('f');
      const inputs = [];
      try {
        const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => {
          const x = p.device.tensor(Int32Array.of(i), [1]);
          inputs.push(x);
          return fn.invoke([x]);
        }));
        assert.strictEqual(sinkCalls, 40, 'the sink still saw every trace, including the one after the throw');
        results.forEach((result, i) => {
          if (i !== 13) {
            assert.strictEqual(result.status, 'fulfilled', `invocation ${i}`);
            closeAll(result.value);
            return;
          }
          assert.strictEqual(result.status, 'rejected');
          const error = result.reason;
          assert.ok(error instanceof halrt.HalrtError);
          assert.strictEqual(error.code, 'ABORTED');
          assert.match(error.message, /^m\.f: the debug sink threw while handling a trace of this invocation \(sequence \d+\)$/);
          assert.strictEqual(error.cause, thrown);
          assert.ok(!Object.keys(error).includes('cause'), 'cause is not enumerable, as with new Error(m, {cause})');
        });
        // The next invocation works.
        const [y] = await fn.invoke([inputs[0]]);
        assert.deepStrictEqual(await y.read(), Int32Array.of(0));
        y.close();
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('a sink that throws a non-Error value (string, number, undefined, null) still rejects, with that value as cause', async () => {
      let toThrow = null;
      const p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'u8', [1]).fill('y', 5).trace('y', ['y'])), {
        hal: {
          debugSink: () => {
            if (toThrow) throw toThrow.value;
          },
        },
      });
      const fn = p.lookup('f');
      try {
        for (const value of ['text', 42, undefined, null, Symbol('s'), { plain: true }]) {
          toThrow = { value };
          await assert.rejects(fn.invoke([]), (error) => {
            assert.ok(error instanceof halrt.HalrtError, String(error));
            assert.strictEqual(error.code, 'ABORTED');
            assert.ok('cause' in error);
            assert.strictEqual(error.cause, value);
            return true;
          }, `throwing ${String(value)}`);
          toThrow = null;
          const [y] = await fn.invoke([]);
          assert.deepStrictEqual(await y.read(), Uint8Array.of(5));
          y.close();
        }
      } finally {
        fn.close();
        p.close();
      }
    });

    it('a sink may start another invocation from inside its callback', async () => {
      const keys = [];
      let fn = null;
      let nested = null;
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'i32', [1]).output('y', 'i32', [1]).copy('x', 'y').trace('y', ['y'])), {
        hal: {
          debugSink: (key, tensors) => {
            keys.push(tensors[0].data[0]);
            if (nested === null) nested = fn.invoke([x2]);
          },
        },
      });
      fn = p.lookup('f');
      const x1 = p.device.tensor(Int32Array.of(1), [1]);
      const x2 = p.device.tensor(Int32Array.of(2), [1]);
      try {
        const [y1] = await fn.invoke([x1]);
        assert.ok(nested instanceof Promise);
        const [y2] = await nested;
        assert.deepStrictEqual([await y1.read(), await y2.read()], [Int32Array.of(1), Int32Array.of(2)]);
        assert.deepStrictEqual(keys, [1, 2]);
        closeAll(y1, y2);
      } finally {
        closeAll(x1, x2, fn);
        p.close();
      }
    });

    it('two contexts sharing one HalModule trace into its one sink, each numbering its own invocations', async () => {
      const seen = [];
      const instance = new halrt.Instance();
      const device = instance.createDevice(uri);
      const hal = new halrt.HalModule(instance, device, { debugSink: (key, tensors, info) => seen.push([info.function, info.sequence, tensors[0].data[0]]) });
      const modules = ['a', 'b'].map((name, i) => new halrt.ModuleBuilder(name)
        .function('f', (f) => f.output('y', 'i32', [1]).fill('y', i + 1).trace('y', ['y'])).build(instance));
      const contexts = modules.map((module) => new halrt.Context(instance, [hal, module]));
      const fns = contexts.map((context, i) => context.lookupFunction(`${'ab'[i]}.f`));
      try {
        const results = await Promise.all([0, 1, 2, 3].map((i) => fns[i % 2].invoke([])));
        closeAll(results);
        assert.strictEqual(seen.length, 4);
        for (const name of ['a.f', 'b.f']) {
          assert.deepStrictEqual(seen.filter((s) => s[0] === name).map((s) => s[1]).sort(), [1, 2], `sequences of ${name}`);
        }
        for (const [name, , value] of seen) assert.strictEqual(value, name === 'a.f' ? 1 : 2);
      } finally {
        closeAll(fns, contexts, modules, hal, device, instance);
      }
    });
  });
}

describe('debug sink backpressure', function () {
  this.timeout(30000);
  const LENGTH = 4096; // 16 KiB per traced tensor
  const TRACES = 4;
  const INVOCATIONS = 12;

  function backpressureProgram(uri, policy, sink) {
    return makeProgram(uri, (b) => b.function('f', (f) => {
      f.input('x', 'f32', [LENGTH]).output('y', 'u8', [1]).fill('y', 1);
      for (let i = 0; i < TRACES; ++i) f.trace(`t${i}`, ['x']);
    }), { hal: { debugSink: sink, maxTraceBytes: LENGTH * 4, tracePolicy: policy } });
  }

  for (const uri of DEVICE_URIS) {
    it(`'wait' with room for one trace and a slow sink loses nothing (${uri})`, async () => {
      const received = [];
      const p = backpressureProgram(uri, 'wait', (key, tensors, info) => {
        busyWait(2);
        received.push({ key, id: tensors[0].data[0], last: tensors[0].data[LENGTH - 1], info });
      });
      const fn = p.lookup('f');
      const inputs = Array.from({ length: INVOCATIONS }, (_, i) => p.device.tensor(new Float32Array(LENGTH).fill(i), [LENGTH]));
      try {
        const results = await Promise.all(inputs.map((x) => fn.invoke([x])));
        closeAll(results);
        assert.strictEqual(received.length, INVOCATIONS * TRACES);
        for (let i = 0; i < INVOCATIONS; ++i) {
          const mine = received.filter((r) => r.id === i);
          assert.deepStrictEqual(mine.map((r) => r.key), ['t0', 't1', 't2', 't3']);
          for (const r of mine) assert.strictEqual(r.last, i);
        }
        for (const r of received) assert.strictEqual(r.info.dropped, 0);
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it(`'wait' with traces held back: a trace that needs their room gets it (${uri})`, async () => {
      // 'b' comes within 1 ms of 'a' and is held (README, "The debug
      // sink"); 'c' needs the room 'b' takes, so 'b' must reach JavaScript
      // for 'c' to go on.
      const received = [];
      const p = makeProgram(uri, (b) => b.function('f', (f) => {
        f.input('x', 'f32', [LENGTH]).input('big', 'f32', [2 * LENGTH]).output('y', 'f32', [1 << 18])
          .trace('a', ['x']).fill('y', 1).trace('b', ['x']).trace('c', ['big']);
      }), { hal: { debugSink: (key) => received.push(key), maxTraceBytes: LENGTH * 10, tracePolicy: 'wait' } });
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(LENGTH), [LENGTH]);
      const big = p.device.tensor(new Float32Array(2 * LENGTH), [2 * LENGTH]);
      try {
        for (let i = 0; i < 20; ++i) {
          received.length = 0;
          const [y] = await fn.invoke([x, big]);
          y.close();
          assert.deepStrictEqual(received, ['a', 'b', 'c']);
        }
      } finally {
        closeAll([x, big], fn);
        p.close();
      }
    });

    it(`'drop' with room for one trace and a slow sink drops traces and counts them in info.dropped (${uri})`, async () => {
      const received = [];
      const p = backpressureProgram(uri, 'drop', (key, tensors, info) => {
        busyWait(3);
        received.push({ key, id: tensors[0].data[0], info });
      });
      const fn = p.lookup('f');
      const inputs = Array.from({ length: INVOCATIONS }, (_, i) => p.device.tensor(new Float32Array(LENGTH).fill(i), [LENGTH]));
      try {
        const results = await Promise.all(inputs.map((x) => fn.invoke([x])));
        closeAll(results);
        const total = INVOCATIONS * TRACES;
        assert.ok(received.length >= 1 && received.length < total, `${received.length} of ${total} traces delivered`);
        // Within each invocation, what arrives is still in program order.
        for (let i = 0; i < INVOCATIONS; ++i) {
          const keys = received.filter((r) => r.id === i).map((r) => r.key);
          assert.deepStrictEqual(keys, [...keys].sort());
        }
        const dropped = received.map((r) => r.info.dropped);
        for (let i = 1; i < dropped.length; ++i) assert.ok(dropped[i] >= dropped[i - 1], `dropped never decreases: ${dropped}`);
        // Once idle, the next trace gets through and reports every drop so far.
        const before = received.length;
        const [y] = await fn.invoke([inputs[0]]);
        y.close();
        assert.ok(received.length > before, 'the first trace of an idle sink is admitted');
        const reported = received[before].info.dropped;
        assert.ok(reported > 0, 'some traces were dropped');
        assert.strictEqual(before + reported, total, 'every trace was either delivered or counted as dropped');
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it(`'drop': hal.droppedTraces counts every drop so far, those after the last trace delivered too (${uri})`, async () => {
      let traces = 0;
      const seen = [];
      const p = backpressureProgram(uri, 'drop', (key, tensors, info) => {
        traces += 1;
        seen.push(info.dropped);
        busyWait(3);
      });
      const fn = p.lookup('f');
      const inputs = Array.from({ length: INVOCATIONS }, (_, i) => p.device.tensor(new Float32Array(LENGTH).fill(i), [LENGTH]));
      try {
        assert.strictEqual(p.hal.droppedTraces, 0);
        closeAll(await Promise.all(inputs.map((x) => fn.invoke([x]))));
        // Every invocation has ended: what was not delivered is counted,
        // with no later trace to report it.
        const total = INVOCATIONS * TRACES;
        const dropped = p.hal.droppedTraces;
        assert.strictEqual(traces + dropped, total, `${traces} delivered, ${dropped} dropped of ${total}`);
        assert.ok(dropped > 0 && dropped >= seen[seen.length - 1], `dropped ${dropped}, last reported ${seen[seen.length - 1]}`);
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
      assertThrowsHalrt(() => p.hal.droppedTraces, 'FAILED_PRECONDITION', 'closed');
      const getter = Object.getOwnPropertyDescriptor(halrt.HalModule.prototype, 'droppedTraces').get;
      for (const receiver of [{}, p.device, null]) {
        assertThrowsHalrt(() => getter.call(receiver), 'INVALID_ARGUMENT', 'halModule.droppedTraces: `this` is not a HalModule');
      }
    });

    it(`'drop' with profile on: timings are counted apart, delivered + dropped = made for traces and for timings (${uri})`, async () => {
      const DISPATCHES = 20;
      let traces = 0;
      let timings = 0;
      const reported = [];
      const sink = {
        trace(key, tensors, info) {
          traces += 1;
          reported.push(info.dropped);
          busyWait(3);
        },
        timing() {
          timings += 1;
        },
      };
      const p = makeProgram(uri, (b) => b.function('f', (f) => {
        f.input('x', 'f32', [LENGTH]).output('y', 'f32', [LENGTH]).trace('t', ['x']);
        for (let i = 0; i < DISPATCHES; ++i) f.dispatch('k.mul_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [LENGTH] });
      }), { hal: { debugSink: sink, profile: true, maxTraceBytes: LENGTH * 4, tracePolicy: 'drop' } });
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(LENGTH).fill(1), [LENGTH]);
      const invocations = 40;
      try {
        closeAll(await Promise.all(Array.from({ length: invocations }, () => fn.invoke([x]))));
        const droppedTraces = p.hal.droppedTraces;
        const droppedTimings = p.hal.droppedTimings;
        assert.strictEqual(traces + droppedTraces, invocations, `traces: ${traces} delivered, ${droppedTraces} dropped of ${invocations}`);
        assert.strictEqual(timings + droppedTimings, invocations * DISPATCHES,
          `timings: ${timings} delivered, ${droppedTimings} dropped of ${invocations * DISPATCHES}`);
        for (const dropped of reported) assert.ok(dropped <= droppedTraces && dropped < invocations, `info.dropped ${dropped} counts traces only`);
      } finally {
        closeAll(x, fn);
        p.close();
      }
      assertThrowsHalrt(() => p.hal.droppedTimings, 'FAILED_PRECONDITION', 'closed');
      const getter = Object.getOwnPropertyDescriptor(halrt.HalModule.prototype, 'droppedTimings').get;
      assertThrowsHalrt(() => getter.call({}), 'INVALID_ARGUMENT', 'halModule.droppedTimings: `this` is not a HalModule');
    });

    it(`'wait' drops nothing: hal.droppedTraces stays 0 (${uri})`, async () => {
      const p = backpressureProgram(uri, 'wait', () => busyWait(1));
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(LENGTH), [LENGTH]);
      try {
        closeAll(await Promise.all(Array.from({ length: 4 }, () => fn.invoke([x]))));
        assert.strictEqual(p.hal.droppedTraces, 0);
        assert.strictEqual(p.hal.droppedTimings, 0);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });
  }

  // CPU only: maxTraceBytes bounds what waits for JavaScript. A CUDA device
  // also stages every traced range of each submission in pinned memory when
  // it issues it (docs/cuda.md), so 48 invocations started at once hold
  // their 8 MiB of traces each, whatever the sink's bound.
  it('memory stays bounded while far more trace bytes than maxTraceBytes go through a slow sink (local-task)', async function () {
    // RSS says nothing under AddressSanitizer, whose quarantine keeps freed memory.
    if (typeof global.gc !== 'function' || /asan/.test(process.env.LD_PRELOAD ?? '')) this.skip();
    const MiB = 1 << 20;
    const length = MiB / 4; // 1 MiB per trace
    const perInvocation = 8;
    const invocations = 48; // 384 MiB of traces per policy
    const total = (invocations * perInvocation * length * 4) / MiB;
    for (const policy of ['drop', 'wait']) {
      let delivered = 0;
      let peakRss = 0;
      const p = makeProgram('local-task?workers=2', (b) => b.function('f', (f) => {
        f.input('x', 'f32', [length]).output('y', 'u8', [1]).fill('y', 1);
        for (let i = 0; i < perInvocation; ++i) f.trace(`t${i}`, ['x']);
      }), {
        hal: {
          maxTraceBytes: 2 * MiB,
          tracePolicy: policy,
          debugSink: (key, tensors) => {
            assert.strictEqual(tensors[0].data.length, length);
            delivered += 1;
            // Delivered arrays are garbage at once; collect them now and then
            // so that what is measured is what is queued natively.
            if (delivered % 16 === 0) global.gc();
            peakRss = Math.max(peakRss, process.memoryUsage().rss);
            busyWait(1);
          },
        },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(length).fill(1), [length]);
      try {
        global.gc();
        const start = process.memoryUsage().rss;
        peakRss = start;
        const results = await Promise.all(Array.from({ length: invocations }, () => fn.invoke([x])));
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
        closeAll(results);
        const growth = (peakRss - start) / MiB;
        if (policy === 'wait') assert.strictEqual(delivered, invocations * perInvocation, 'wait delivers everything');
        else assert.ok(delivered < invocations * perInvocation, 'drop dropped some');
        // Unbounded queueing would hold most of the 384 MiB at once.
        if (!UNDER_SANITIZER) assert.ok(growth < total / 4, `${policy}: rss grew ${growth.toFixed(1)} MiB while ${total} MiB of traces were made`);
      } finally {
        closeAll(x, fn);
        p.close();
      }
    }
  });
});

describe('debug sink concurrency', function () {
  this.timeout(30000);

  it('many producers: contexts on several devices trace concurrently into their own sinks', async () => {
    // The devices under test and two CPU devices, all producing at once.
    const uris = [...DEVICE_URIS, 'local-sync', 'local-task?workers=1'];
    const PER = 20;
    const instance = new halrt.Instance();
    const programs = uris.map((uri, d) => {
      const received = [];
      const program = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'i32', [16]).output('y', 'i32', [16]).local('t', 'i32', [16])
        .dispatch('k.add_i32', { workgroups: [4], bindings: ['x', 'x', 't'], constants: [16] })
        .trace('t', ['t'])
        .dispatch('k.max_i32', { workgroups: [2], bindings: ['t', 'x', 'y'], constants: [16] })
        .trace('y', ['y'])), {
        name: `p${d}`,
        instance,
        hal: { debugSink: (key, tensors, info) => received.push([info.sequence, key, tensors[0].data[0], info.function]) },
      });
      return { program, received, fn: program.lookup('f') };
    });
    const inputs = [];
    try {
      const pending = [];
      for (let i = 0; i < PER; ++i) {
        programs.forEach(({ program, fn }, d) => {
          const x = program.device.tensor(new Int32Array(16).fill(d * 1000 + i), [16]);
          inputs.push(x);
          pending.push(fn.invoke([x]).then(async ([y]) => {
            assert.strictEqual((await y.read())[15], 2 * (d * 1000 + i));
            y.close();
          }));
        });
      }
      await Promise.all(pending);
      programs.forEach(({ received }, d) => {
        assert.strictEqual(received.length, 2 * PER, `sink ${d}`);
        for (const [, , value, name] of received) {
          assert.strictEqual(name, `p${d}.f`, 'a sink only sees its own context');
          assert.strictEqual(Math.floor(value / 2000), d);
        }
        const bySequence = new Map();
        for (const [sequence, key, value] of received) {
          if (!bySequence.has(sequence)) bySequence.set(sequence, []);
          bySequence.get(sequence).push([key, value]);
        }
        assert.strictEqual(bySequence.size, PER);
        for (const [, list] of bySequence) {
          assert.deepStrictEqual(list.map(([key]) => key), ['t', 'y']);
          assert.strictEqual(list[0][1], list[1][1]);
        }
      });
    } finally {
      closeAll(inputs);
      for (const { program, fn } of programs) {
        fn.close();
        program.close();
      }
      instance.close();
    }
  });

  for (const uri of DEVICE_URIS) {
    it(`closing every object while invocations are in flight still settles them, with their traces (${uri})`, async () => {
      const baseline = await liveBaseline();
      const traces = [];
      const p = makeProgram(uri, (b) => b.function('f', (f) => f
        .input('x', 'f32', [128, 128]).output('y', 'f32', [128, 128])
        .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'x', 'y'], constants: [128, 128, 128] })
        .trace('y', ['y'])), { hal: { debugSink: (key, tensors) => traces.push(tensors[0].data[0]) } });
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(128 * 128).fill(1), [128, 128]);
      const pending = Array.from({ length: 10 }, () => fn.invoke([x]));
      // Everything the invocations need is closed right after they start.
      closeAll(x, fn);
      p.close();
      const results = await Promise.all(pending);
      for (const [y] of results) {
        assert.strictEqual((await y.read())[0], 128);
        y.close();
      }
      assert.deepStrictEqual(traces, new Array(10).fill(128));
      assert.deepStrictEqual(await settleLiveObjects(baseline), baseline);
    });
  }

  for (const uri of DEVICE_URIS) {
    it(`a queue of traces whose sink is closed mid-flight is still delivered in full (${uri})`, async () => {
      let count = 0;
      const p = makeProgram(uri, (b) => b.function('f', (f) => {
        f.input('x', 'f32', [256]).output('y', 'u8', [1]).fill('y', 1);
        for (let i = 0; i < 16; ++i) f.trace(`t${i}`, ['x']);
      }), { hal: { debugSink: () => { count += 1; } } });
      const fn = p.lookup('f');
      const x = p.device.tensor(new Float32Array(256), [256]);
      const pending = Array.from({ length: 20 }, () => fn.invoke([x]));
      closeAll(x, fn);
      p.close();
      closeAll(...(await Promise.all(pending)));
      assert.strictEqual(count, 20 * 16);
    });

    it(`the sink may close its own HalModule and Context while their invocations are in flight (${uri})`, async () => {
      let p = null;
      let calls = 0;
      p = makeProgram(uri, (b) => b.function('f', (f) => f.output('y', 'i32', [1]).fill('y', 4).trace('a', ['y']).trace('b', ['y'])), {
        hal: {
          debugSink: () => {
            calls += 1;
            p.close();
          },
        },
      });
      const fn = p.lookup('f');
      const results = await Promise.all([fn.invoke([]), fn.invoke([])]);
      for (const [y] of results) {
        assert.deepStrictEqual(await y.read(), Int32Array.of(4));
        y.close();
      }
      assert.strictEqual(calls, 4);
      fn.close();
    });
  }
});

describe('debug sink and the event loop', function () {
  this.timeout(60000);
  const TRACES = 16;
  const INVOCATIONS = 32; // 512 traces of 2 ms: at least 1 s of sink time per burst

  // A context whose f(x) traces x TRACES times under 'wait' into `sink`.
  function burstProgram(uri, length, sink, traceData = 'owned') {
    return makeProgram(uri, (b) => b.function('f', (f) => {
      f.input('x', 'f32', [length]).output('y', 'u8', [1]).fill('y', 1);
      for (let i = 0; i < TRACES; ++i) f.trace(`t${String(i).padStart(2, '0')}`, ['x']);
    }), { hal: { debugSink: sink, tracePolicy: 'wait', traceData } });
  }

  // Awaits `settling` while a 1 ms interval ticks: its value, the longest
  // the loop went without running the timer (ms; until `settling` settled
  // included) and the ticks.
  async function timerGaps(settling) {
    let last = performance.now();
    let longest = 0;
    let ticks = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
      ticks += 1;
    }, 1);
    let value;
    try {
      value = await settling;
    } finally {
      clearInterval(timer);
    }
    return { value, longest: Math.max(longest, performance.now() - last), ticks };
  }

  // Invokes f on INVOCATIONS inputs at once (input i filled with i), awaits
  // `watch(all of them)`, and checks that each invocation's traces arrived
  // in program order, all before it settled; `received` holds {id, key} per
  // trace delivered. Returns what `watch` returned.
  async function burst(p, length, received, settled, watch = async (settling) => ({ value: await settling })) {
    const fn = p.lookup('f');
    const inputs = Array.from({ length: INVOCATIONS }, (_, i) => p.device.tensor(new Float32Array(length).fill(i), [length]));
    try {
      const watched = await watch(Promise.all(inputs.map((x, i) => fn.invoke([x]).then((outputs) => {
        settled[i] = received.length;
        return outputs;
      }))));
      closeAll(watched.value.flat());
      assert.strictEqual(received.length, INVOCATIONS * TRACES);
      const keys = Array.from({ length: TRACES }, (_, t) => `t${String(t).padStart(2, '0')}`);
      for (let i = 0; i < INVOCATIONS; ++i) {
        const mine = received.map((r, at) => ({ ...r, at })).filter((r) => r.id === i);
        assert.deepStrictEqual(mine.map((r) => r.key), keys, `invocation ${i}: program order`);
        assert.ok(mine[TRACES - 1].at < settled[i], `invocation ${i}: every trace before it settled`);
      }
      return watched;
    } finally {
      closeAll(inputs, fn);
    }
  }

  // 16 f32 (inline in the batch) and 64 Ki f32 (external blocks: given
  // away, or lent and taken back after each callback).
  const CASES = [[16, 'owned'], [1 << 16, 'owned'], [1 << 16, 'borrowed']];
  for (const uri of DEVICE_URIS) {
    for (const [length, traceData] of CASES) {
      it(`a burst of traces to a sink that takes 2 ms per call under 'wait' leaves a 1 ms timer running (${uri}, ${length * 4} B, ${traceData})`, async () => {
        const received = [];
        const settled = [];
        const p = burstProgram(uri, length, (key, tensors) => {
          const data = tensors[0].data;
          received.push({ id: data[0], key });
          busyWait(2);
          // Lent data is taken back after the callback, not in the middle of a slice.
          assert.strictEqual(data[length - 1], data[0]);
        }, traceData);
        try {
          const { longest, ticks } = await burst(p, length, received, settled, timerGaps);
          // Delivered in one go, the burst holds the loop for all of its at
          // least 1024 ms; in slices of a few ms the timer runs between them
          // (gaps of 2-5 ms; hundreds of ms when a GC of the traces' memory
          // under a sanitizer, or a loaded machine, stops the thread).
          assert.ok(longest < 600, `the loop went ${longest.toFixed(1)} ms without running the timer (${ticks} ticks)`);
        } finally {
          p.close();
        }
      });
    }
  }

  it('64 HalModules share one time slice: a turn of the event loop runs a few 0.5 ms callbacks, not one per sink', async () => {
    const SINKS = 64;
    const instance = new halrt.Instance();
    let turn = 0;
    let done = false;
    const perTurn = new Map(); // turn -> sink callbacks run in it
    const delivered = new Array(SINKS).fill(0);
    const programs = Array.from({ length: SINKS }, (_, s) => makeProgram('local-sync', (b) => b.function('f', (f) => {
      f.input('x', 'f32', [16]).output('y', 'u8', [1]).fill('y', 1);
      for (let i = 0; i < 4; ++i) f.trace(`t${i}`, ['x']);
    }), { instance, hal: { debugSink: () => {
      perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1);
      delivered[s] += 1;
      busyWait(0.5);
    } } }));
    const inputs = programs.map((p) => p.device.tensor(new Float32Array(16), [16]));
    try {
      const pending = [];
      for (let round = 0; round < 4; ++round) programs.forEach((p, i) => pending.push(p.lookup('f').invoke([inputs[i]])));
      const tick = () => {
        turn += 1;
        if (!done) setImmediate(tick);
      };
      setImmediate(tick);
      const results = await Promise.all(pending);
      done = true;
      closeAll(results.flat());
      assert.deepStrictEqual(delivered, new Array(SINKS).fill(16));
      // The budget is 2 ms for all the env's sinks: four 0.5 ms callbacks
      // and one more that starts within it (more on a slow machine only if
      // a callback took less than 0.5 ms, which busyWait rules out). One
      // per sink per turn would be 64.
      const most = Math.max(...perTurn.values());
      assert.ok(most <= 8, `${most} sink callbacks ran in one turn of the event loop (turns: ${perTurn.size})`);
    } finally {
      closeAll(inputs);
      for (const p of programs) p.close();
      instance.close();
    }
  });

  it('a fast sink receives a burst of 16000 small traces in slices, in program order, each invocation\'s before it settles', async () => {
    const PER = 500;
    const COUNT = 32;
    const received = [];
    const settled = [];
    let turns = 0; // setImmediate callbacks run so far
    const seen = []; // turns when each trace arrived
    const p = makeProgram('local-task?workers=2', (b) => b.function('f', (f) => {
      f.input('x', 'f32', [4]).output('y', 'u8', [1]).fill('y', 1);
      for (let i = 0; i < PER; ++i) f.trace(`t${i}`, ['x']);
    }), { hal: { debugSink: (key, tensors) => {
      received.push(tensors[0].data[0] * PER + Number(key.slice(1)));
      seen.push(turns);
    } } });
    const fn = p.lookup('f');
    const inputs = Array.from({ length: COUNT }, (_, i) => p.device.tensor(new Float32Array(4).fill(i), [4]));
    let spinning = true;
    const spin = () => {
      turns += 1;
      if (spinning) setImmediate(spin);
    };
    try {
      const pending = inputs.map((x, i) => fn.invoke([x]).then((outputs) => {
        settled[i] = received.length;
        closeAll(outputs);
      }));
      setImmediate(spin);
      await Promise.all(pending);
      spinning = false;
      assert.strictEqual(received.length, COUNT * PER);
      for (let i = 0; i < COUNT; ++i) {
        const mine = received.filter((r) => Math.floor(r / PER) === i);
        assert.deepStrictEqual(mine, Array.from({ length: PER }, (_, t) => i * PER + t), `invocation ${i}: program order`);
        assert.ok(received.lastIndexOf(mine[PER - 1]) < settled[i], `invocation ${i}: every trace before it settled`);
      }
      // Immediates ran between traces: the burst was delivered in slices.
      assert.ok(seen[seen.length - 1] > seen[0], `turns seen: ${seen[0]}..${seen[seen.length - 1]}`);
    } finally {
      spinning = false;
      closeAll(inputs, fn);
      p.close();
    }
  });

  it('closing the HalModule, Context and device in the middle of a sliced burst still delivers it all, in order, before each invocation settles', async () => {
    const received = [];
    const settled = [];
    const p = burstProgram('local-task?workers=2', 16, (key, tensors) => {
      received.push({ id: tensors[0].data[0], key });
      busyWait(1);
    });
    try {
      // The HAL module goes with the last invocation; its sink's channel
      // finishes while slices of the burst are still queued.
      await burst(p, 16, received, settled, async (settling) => {
        p.close();
        return { value: await settling };
      });
    } finally {
      p.close();
    }
  });

  it('two sinks bursting at once both make progress: the one made second is not starved by the first', async () => {
    const instance = new halrt.Instance();
    const events = [];
    const slow = (name) => (key, tensors) => {
      events.push(name);
      busyWait(1);
    };
    // `first` gets 32 x 16 traces, `second` 2 x 16, all started at once.
    const programs = [['first', 32], ['second', 2]].map(([name, count]) => {
      const p = makeProgram('local-task?workers=2', (b) => b.function('f', (f) => {
        f.input('x', 'f32', [16]).output('y', 'u8', [1]).fill('y', 1);
        for (let i = 0; i < TRACES; ++i) f.trace(`t${i}`, ['x']);
      }), { hal: { debugSink: slow(name), tracePolicy: 'wait' }, instance });
      return { p, count, name };
    });
    try {
      const pending = programs.map(({ p, count }) => {
        const fn = p.lookup('f');
        const x = p.device.tensor(new Float32Array(16), [16]);
        return Promise.all(Array.from({ length: count }, () => fn.invoke([x]))).then((results) => {
          closeAll(results.flat(), x, fn);
        });
      });
      await Promise.all(pending);
      const lastOfSecond = events.lastIndexOf('second');
      const lastOfFirst = events.lastIndexOf('first');
      assert.strictEqual(events.length, 34 * TRACES);
      assert.ok(lastOfSecond < lastOfFirst, `the second sink's last trace came at ${lastOfSecond} of ${events.length}, after the first's burst`);
    } finally {
      for (const { p } of programs) p.close();
      instance.close();
    }
  });

  it('invocations settling at once whose reactions take 2 ms each leave a 1 ms timer running (their time counts against the turn)', async () => {
    const COUNT = 600; // at least 1200 ms of reactions
    const p = makeProgram('local-task?workers=2', (b) => b.function('f', (f) => {
      f.input('x', 'f32', [4]).output('y', 'u8', [1]).fill('y', 1);
    }));
    const fn = p.lookup('f');
    const x = p.device.tensor(new Float32Array(4), [4]);
    try {
      const order = [];
      const { longest, ticks } = await timerGaps(Promise.all(Array.from({ length: COUNT }, (_, i) => fn.invoke([x]).then((outputs) => {
        order.push(i);
        busyWait(2);
        closeAll(outputs);
      }))));
      assert.deepStrictEqual(order, Array.from({ length: COUNT }, (_, i) => i), 'settled in order');
      assert.ok(longest < 600, `the loop went ${longest.toFixed(1)} ms without running the timer (${ticks} ticks)`);
    } finally {
      closeAll(x, fn);
      p.close();
    }
  });

  // Starts COUNT invocations of a one-output function (or, with `read`,
  // COUNT reads of its input), holds the JS thread until they have all
  // completed (their completions wait in the channel), and returns, for each
  // reaction i > 0, whether it ran before the microtask that reaction i - 1
  // queued: true when the two settled in the same JS-thread call
  // (completion batching).
  async function settledTogether(hal, read = false) {
    const COUNT = 64;
    const p = makeProgram('local-sync', (b) => b.function('f', (f) => {
      f.input('x', 'f32', [4]).output('y', 'u8', [1]).fill('y', 1);
    }), { hal });
    const fn = p.lookup('f');
    const x = p.device.tensor(new Float32Array(4), [4]);
    try {
      const events = [];
      const settling = Array.from({ length: COUNT }, (_, i) => (read ? x.read() : fn.invoke([x])).then((outputs) => {
        events.push(`r${i}`);
        queueMicrotask(() => events.push(`m${i}`));
        if (!read) closeAll(outputs);
      }));
      busyWait(UNDER_SANITIZER ? 1000 : 200); // 64 tiny invocations complete well within this
      await Promise.all(settling);
      const reactions = events.filter((e) => e.startsWith('r'));
      assert.deepStrictEqual(reactions, Array.from({ length: COUNT }, (_, i) => `r${i}`), 'settled in order');
      return Array.from({ length: COUNT - 1 }, (_, i) => events.indexOf(`r${i + 1}`) < events.indexOf(`m${i}`));
    } finally {
      closeAll(x, fn);
      p.close();
    }
  }

  it('invocations completed together settle in one JS-thread call, in order, their reactions after the batch', async () => {
    const together = await settledTogether({});
    const count = together.filter(Boolean).length;
    assert.ok(count >= 16, `only ${count} of 63 invocations settled in the same call as the one before`);
  });

  it('device reads completed together settle in one JS-thread call, in order', async () => {
    const together = await settledTogether({}, true);
    const count = together.filter(Boolean).length;
    assert.ok(count >= 16, `only ${count} of 63 reads settled in the same call as the one before`);
  });

  it('invocations with a debug sink are not batched: each settles after the reactions to the one before', async () => {
    const together = await settledTogether({ debugSink: () => {} });
    assert.strictEqual(together.filter(Boolean).length, 0);
  });

  it('a global setImmediate replaced before halrt loads (fake timers) does not stall a sliced burst', () => {
    const result = spawnSync(process.execPath, ['-e', `
      globalThis.setImmediate = () => {};
      const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
      const instance = new halrt.Instance();
      const device = instance.createDevice('local-sync');
      let traces = 0;
      const hal = new halrt.HalModule(instance, device, {
        debugSink: () => { traces += 1; const end = process.hrtime.bigint() + 1000000n; while (process.hrtime.bigint() < end); },
      });
      const module = new halrt.ModuleBuilder('t').executable('k', { local: { builtin: true } })
        .function('f', (f) => {
          f.input('x', 'f32', [4]).output('y', 'u8', [1]).fill('y', 1);
          for (let i = 0; i < 16; ++i) f.trace('t' + i, ['x']);
        })
        .build(instance);
      const fn = new halrt.Context(instance, [hal, module]).lookupFunction('t.f');
      const x = device.tensor(new Float32Array(4), [4]);
      Promise.all(Array.from({ length: 16 }, () => fn.invoke([x]))).then(() => console.log(traces));
    `], { encoding: 'utf8', timeout: 15000 });
    assert.strictEqual(result.error, undefined, `the burst stalled: ${result.error}`);
    assert.strictEqual(result.status, 0, result.stderr);
    assert.strictEqual(result.stdout.trim(), '256');
  });

  it('a sink that awaits and sets timers between traces sees them run during the burst, in order, before invocations settle', async () => {
    const received = [];
    const resumed = [];
    const timed = [];
    const settled = [];
    // For each trace: how many of the sink's awaits and timers had run
    // when it arrived.
    const seen = [];
    const p = burstProgram('local-task?workers=2', 16, async (key, tensors) => {
      const entry = { id: tensors[0].data[0], key };
      received.push(entry);
      seen.push([resumed.length, timed.length]);
      setTimeout(() => timed.push(entry), 0);
      busyWait(1);
      await new Promise((resolve) => setImmediate(resolve));
      resumed.push(entry);
    });
    try {
      await burst(p, 16, received, settled);
      await new Promise((resolve) => setTimeout(resolve, 20));
      // The sink's own continuations and timers ran while traces were still
      // arriving, not only once the burst was over.
      assert.ok(seen.some(([r]) => r > 0), 'no await resumed before the last trace arrived');
      assert.ok(seen.some(([, t]) => t > 0), 'no timer ran before the last trace arrived');
      assert.deepStrictEqual(resumed, received);
      assert.deepStrictEqual(timed, received);
    } finally {
      p.close();
    }
  });
});

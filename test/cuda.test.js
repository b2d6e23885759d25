'use strict';
// The CUDA device through the CUDA Driver API (docs/cuda.md): device info,
// the built-in kernels against the CPU device, traces and profile timings,
// PTX executables (test/gpu/kernels.ptx), JIT errors, and device loss.
//
// Runs where halrt.drivers() reports cuda as available: on a GPU, or with
// HALRT_CUDA_LIBRARY naming the driver test double
// (build/ctest/libfakecuda.so; see test/run-cuda.js). Elsewhere every test
// is skipped, and the suite's title says why.
const assert = require('assert');
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const {
  BUILTIN, assertClose, assertThrowsHalrt, closeAll, cudaDriver, inChild, makeProgram, randomFloats, reference,
  unreadableFiles,
} = require('./helpers');

const cuda = cudaDriver();
const FAKE = /libfakecuda/.test(process.env.HALRT_CUDA_LIBRARY ?? '');
const PTX = path.join(__dirname, 'gpu', 'kernels.ptx');
// The test kernels' parameters, declared: scale_offset_f64 takes an int64
// and a double by value (and a pointer after them), which the inferred rule
// cannot pass, so kernels.ptx loads only with its entries declared.
const ENTRIES = {
  vector_add_f32: ['buffer', 'buffer', 'buffer', 'u32'],
  write_index_u32: ['buffer', 'u32'],
  scale_offset_f64: ['buffer', 'i64', 'f64', 'buffer'],
  fault_illegal_address: ['buffer', 'u32'],
};
const KERNELS = { ptx: PTX, entries: ENTRIES };
// PTX whose kernels the inferred rule takes: write_index_u32 with a 64-bit
// count, which inference takes for a pointer. Each body only returns (the
// fake runs its own implementation of the name).
const INFERRED_PTX = `.version 7.0
.target sm_75
.address_size 64
.visible .entry write_index_u32(.param .u64 out, .param .u64 n)
{
  ret;
}
`;
const LIB = JSON.stringify(path.join(__dirname, '..'));
const title = cuda.available
  ? `CUDA device (${FAKE ? 'driver test double' : 'CUDA driver'})`
  : `CUDA device (skipped: ${cuda.reason})`;

/** Runs `define`'s function on cuda and on local-sync with the same inputs; resolves with both outputs. */
async function onBoth(define, fn, inputs, halOptions = {}) {
  const results = [];
  for (const uri of ['cuda', 'local-sync']) {
    const p = makeProgram(uri, define, { hal: halOptions });
    const f = p.lookup(fn);
    const views = inputs.map(([data, shape, dtype]) => p.device.tensor(data, shape, dtype));
    try {
      const outputs = await f.invoke(views);
      results.push(await Promise.all(outputs.map((output) => output.read())));
      closeAll(outputs);
    } finally {
      closeAll(views, f);
      p.close();
    }
  }
  return results;
}

describe(title, function () {
  this.timeout(30000);
  before(function () {
    if (!cuda.available) this.skip();
  });

  describe('devices', () => {
    it("device.info describes the GPU with the documented types ('cuda', 'cuda://0' and 'auto' make the same device)", () => {
      const instance = new halrt.Instance();
      const devices = ['cuda', 'cuda://0', 'auto'].map((uri) => instance.createDevice(uri));
      try {
        const info = devices[0].info;
        assert.deepStrictEqual(Object.keys(info).sort(), [
          'computeCapability', 'driver', 'driverVersion', 'kind', 'multiprocessorCount', 'name', 'ordinal',
          'totalMemory', 'uri', 'workerCount',
        ]);
        assert.strictEqual(info.driver, 'cuda');
        assert.strictEqual(info.kind, 'cuda');
        assert.strictEqual(info.uri, 'cuda://0');
        assert.strictEqual(info.ordinal, 0);
        assert.strictEqual(typeof info.name, 'string');
        assert.ok(info.name.length > 0);
        assert.ok(Number.isSafeInteger(info.totalMemory) && info.totalMemory > 0, `totalMemory ${info.totalMemory}`);
        assert.ok(Array.isArray(info.computeCapability) && info.computeCapability.length === 2);
        for (const part of info.computeCapability) assert.ok(Number.isInteger(part) && part >= 0);
        assert.ok(info.computeCapability[0] >= 3, `compute capability ${info.computeCapability}`);
        assert.ok(Number.isInteger(info.multiprocessorCount) && info.multiprocessorCount > 0);
        // CUDA 11.0 is the oldest driver the built-in PTX is written for.
        assert.ok(Number.isInteger(info.driverVersion) && info.driverVersion >= 11000, `driverVersion ${info.driverVersion}`);
        if (FAKE) {
          assert.deepStrictEqual({ ...info }, {
            driver: 'cuda', kind: 'cuda', name: 'fakecuda device 0', uri: 'cuda://0', ordinal: 0, workerCount: 0,
            totalMemory: 1 << 30, computeCapability: [9, 0], multiprocessorCount: 4, driverVersion: 13000,
          });
        }
        for (const other of devices.slice(1)) assert.deepStrictEqual(other.info, info);
      } finally {
        closeAll(devices, instance);
      }
    });

    it('halrt.drivers() lists cuda first and available; a bad ordinal or parameter is INVALID_ARGUMENT naming it', () => {
      const drivers = halrt.drivers();
      const { nvrtc, ...cudaEntry } = drivers[0];
      assert.deepStrictEqual(cudaEntry, { name: 'cuda', available: true, reason: null });
      assert.strictEqual(typeof nvrtc?.available, 'boolean', 'the NVRTC report (test/nvrtc.test.js)');
      const instance = new halrt.Instance();
      try {
        assertThrowsHalrt(() => instance.createDevice('cuda://1024'), 'INVALID_ARGUMENT', "device URI 'cuda://1024'");
        assertThrowsHalrt(() => instance.createDevice('cuda://x'), 'INVALID_ARGUMENT', "malformed device URI 'cuda://x'");
        assertThrowsHalrt(() => instance.createDevice('cuda:0'), 'INVALID_ARGUMENT', "malformed device URI 'cuda:0': did you mean 'cuda://0'?");
        assertThrowsHalrt(() => instance.createDevice('cuda?workers=2'), 'INVALID_ARGUMENT', "driver 'cuda' has no parameter 'workers'");
      } finally {
        instance.close();
      }
    });
  });

  describe('built-in kernels agree with the CPU device', () => {
    it('f32 and i32 element-wise kernels, axpy and relu give the same bits as local-sync', async () => {
      const n = 1000;
      const a = randomFloats(n, 1, 8);
      const b = randomFloats(n, 2, 8);
      b[3] = 0; // a division by zero on both devices
      const ia = Int32Array.from(a, (v, i) => Math.round(v * 1e6) ^ (i << 20));
      const ib = Int32Array.from(b, (v, i) => (Math.round(v * 1e3) | 1) + i);
      const define = (builder) => builder.function('ew', (f) => {
        f.input('a', 'f32', [n]).input('b', 'f32', [n]).input('ia', 'i32', [n]).input('ib', 'i32', [n]);
        for (const op of ['add', 'sub', 'mul', 'div', 'max']) {
          f.output(`${op}_f`, 'f32', [n]).dispatch(`k.${op}_f32`, { workgroups: [7], bindings: ['a', 'b', `${op}_f`], constants: [n] });
        }
        for (const op of ['add', 'sub', 'mul', 'div', 'max']) {
          f.output(`${op}_i`, 'i32', [n]).dispatch(`k.${op}_i32`, { workgroups: [3], bindings: ['ia', 'ib', `${op}_i`], constants: [n] });
        }
        f.output('axpy', 'f32', [n]).dispatch('k.axpy_f32', { workgroups: [5], bindings: ['a', 'b', 'axpy'], constants: [n, { f32: -0.75 }] });
        f.output('relu', 'f32', [n]).dispatch('k.relu_f32', { workgroups: [2], bindings: ['a', 'relu'], constants: [n] });
      });
      const [onCuda, onCpu] = await onBoth(define, 'ew', [[a, [n]], [b, [n]], [ia, [n]], [ib, [n]]]);
      assert.strictEqual(onCuda.length, 12);
      onCuda.forEach((values, i) => assert.deepStrictEqual(values, onCpu[i], `output ${i}`));
      // And both are right.
      assert.deepStrictEqual(onCuda[0], reference.elementwise(a, b, (x, y) => x + y, Float32Array));
      assert.ok(Object.is(onCuda[3][3], Math.fround(a[3] / 0)), `a[3] / 0 is ${onCuda[3][3]}`);
      assert.deepStrictEqual(onCuda[7], reference.elementwise(ia, ib, Math.imul, Int32Array));
      assert.deepStrictEqual(onCuda[11], reference.relu(a));
    });

    for (const [M, K, N, workgroups] of [[1, 1, 1, [1, 1, 1]], [17, 9, 33, [4, 3, 1]], [64, 130, 40, [1, 1, 1]]]) {
      it(`matmul_f32 ${M}x${K}x${N} matches local-sync to rounding, whatever the grid`, async () => {
        const a = randomFloats(M * K, M + 3);
        const b = randomFloats(K * N, N + 5);
        const define = (builder) => builder.function('mm', (f) => f
          .input('a', 'f32', [M, K]).input('b', 'f32', [K, N]).output('c', 'f32', [M, N])
          .dispatch('k.matmul_f32', { workgroups, bindings: ['a', 'b', 'c'], constants: [M, K, N] }));
        const [[onCuda], [onCpu]] = await onBoth(define, 'mm', [[a, [M, K]], [b, [K, N]]]);
        // A GPU fuses multiply-adds and may sum in another order: equal to rounding.
        assertClose(onCuda, onCpu, { rtol: 1e-5, atol: 1e-4, what: 'c' });
        assertClose(onCuda, reference.matmul(a, b, M, K, N), { rtol: 1e-5, atol: 1e-4, what: 'c vs JavaScript' });
      });
    }

    for (const [rows, cols] of [[1, 1], [7, 13], [33, 300]]) {
      it(`softmax_rows_f32 and reduce_sum_f32 on ${rows}x${cols} match local-sync to rounding`, async () => {
        const x = randomFloats(rows * cols, rows * cols, 20);
        const define = (builder) => builder.function('rows', (f) => f
          .input('x', 'f32', [rows, cols]).output('s', 'f32', [rows, cols]).output('r', 'f32', [rows])
          .dispatch('k.softmax_rows_f32', { workgroups: [3], bindings: ['x', 's'], constants: [rows, cols] })
          .dispatch('k.reduce_sum_f32', { workgroups: [2], bindings: ['x', 'r'], constants: [rows, cols] }));
        const [[s, r], [sCpu, rCpu]] = await onBoth(define, 'rows', [[x, [rows, cols]]]);
        assertClose(s, sCpu, { rtol: 1e-5, atol: 1e-7, what: 'softmax' });
        assertClose(r, rCpu, { rtol: 1e-5, atol: 1e-4, what: 'reduce' });
        assertClose(s, reference.softmaxRows(x, rows, cols), { rtol: 1e-5, atol: 1e-7, what: 'softmax vs JavaScript' });
        assertClose(r, reference.reduceSum(x, rows, cols), { rtol: 1e-5, atol: 1e-4, what: 'reduce vs JavaScript' });
      });
    }

    it('fill of every dtype and copy between dtypes store the same bytes as local-sync', async () => {
      const define = (builder) => builder.function('fills', (f) => {
        const fills = [['f64', -1 / 3], ['i8', -7], ['u16', 65535], ['bool', true], ['f16', 65504], ['bf16', -2.5],
          ['i64', -9007199254740991], ['u64', 12345], ['f32', 0.1], ['u8', 255], ['i32', -5]];
        f.input('src', 'u32', [3]).output('copied', 'f32', [3]);
        fills.forEach(([dtype, value], i) => f.output(`v${i}`, dtype, [5]).fill(`v${i}`, value));
        f.copy('src', 'copied');
      });
      const src = Uint32Array.from([0x3f800000, 0xc0000000, 0x7f800000]);
      const [onCuda, onCpu] = await onBoth(define, 'fills', [[src, [3]]]);
      assert.deepStrictEqual(onCuda, onCpu);
      assert.deepStrictEqual(onCuda[0], Float32Array.from([1, -2, Infinity]));
    });
  });

  describe('traces and profiles', () => {
    it('traces on cuda carry the values local-sync traces, in program order, before invoke() resolves', async () => {
      const M = 5;
      const K = 6;
      const N = 7;
      const define = (builder) => builder.function('main', (f) => f
        .input('x', 'f32', [M, K]).input('w', 'f32', [K, N]).output('y', 'f32', [M, N]).local('t', 'f32', [M, N])
        .local('n', 'i32', [2])
        .fill('n', -4)
        .trace('start', ['x', 'n'])
        .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'w', 't'], constants: [M, K, N] })
        .trace('matmul', ['t'])
        .dispatch('k.relu_f32', { workgroups: [3], bindings: ['t', 'y'], constants: [M * N] })
        .trace('relu', ['y', 't']));
      const x = randomFloats(M * K, 11);
      const w = randomFloats(K * N, 12);
      const traces = { cuda: [], 'local-sync': [] };
      for (const uri of Object.keys(traces)) {
        const p = makeProgram(uri, define, {
          hal: {
            traceDispatches: true,
            debugSink: (key, tensors, info) => traces[uri].push({ key, op: info.op, function: info.function, tensors }),
          },
        });
        const fn = p.lookup('main');
        const inputs = [p.device.tensor(x, [M, K]), p.device.tensor(w, [K, N])];
        try {
          const [y] = await fn.invoke(inputs);
          assert.strictEqual(traces[uri].length, 5, `${uri}: every trace arrived before invoke() resolved`);
          assert.deepStrictEqual(await y.read(), traces[uri][4].tensors[0].data);
          y.close();
        } finally {
          closeAll(inputs, fn);
          p.close();
        }
      }
      const onCuda = traces.cuda;
      assert.deepStrictEqual(onCuda.map((t) => [t.key, t.op, t.function]), [
        ['start', 1, 'm.main'], ['main:2:matmul_f32', 2, 'm.main'], ['matmul', 3, 'm.main'],
        ['main:4:relu_f32', 4, 'm.main'], ['relu', 5, 'm.main'],
      ]);
      assert.deepStrictEqual(onCuda[0].tensors, [
        { name: 'x', dtype: 'f32', shape: [M, K], data: x },
        { name: 'n', dtype: 'i32', shape: [2], data: Int32Array.of(-4, -4) },
      ]);
      onCuda.forEach((trace, i) => {
        const cpu = traces['local-sync'][i];
        assert.deepStrictEqual(trace.tensors.map((t) => [t.name, t.dtype, t.shape]), cpu.tensors.map((t) => [t.name, t.dtype, t.shape]));
        trace.tensors.forEach((tensor, j) => assertClose(tensor.data, cpu.tensors[j].data, { rtol: 1e-6, atol: 1e-5, what: `${trace.key}[${j}]` }));
      });
      assertClose(onCuda[2].tensors[0].data, reference.matmul(x, w, M, K, N), { rtol: 1e-6, atol: 1e-5, what: 'matmul trace' });
      assert.deepStrictEqual(onCuda[4].tensors[0].data, reference.relu(onCuda[2].tensors[0].data));
    });

    it('profile: true reports one timing per dispatch, with its kernel and op, in order on the device timeline', async () => {
      const events = [];
      const p = makeProgram('cuda', (builder) => builder.function('f', (f) => f
        .input('x', 'f32', [64, 64]).output('y', 'f32', [64, 64]).local('t', 'f32', [64, 64])
        .dispatch('k.matmul_f32', { workgroups: [2, 2, 1], bindings: ['x', 'x', 't'], constants: [64, 64, 64] })
        .trace('t', ['t'])
        .dispatch('k.relu_f32', { workgroups: [4], bindings: ['t', 'y'], constants: [64 * 64] })
        .dispatch('k.add_f32', { workgroups: [4], bindings: ['y', 'y', 'y'], constants: [64 * 64] })), {
        hal: {
          profile: true,
          debugSink: {
            trace: (key, tensors, info) => events.push({ type: 'trace', key, info }),
            timing: (event) => events.push({ type: 'timing', event }),
          },
        },
      });
      const fn = p.lookup('f');
      const x = p.device.tensor(randomFloats(64 * 64, 3), [64, 64]);
      try {
        const before = Number(process.hrtime.bigint());
        const [y] = await fn.invoke([x]);
        const after = Number(process.hrtime.bigint());
        y.close();
        const timings = events.filter((e) => e.type === 'timing').map((e) => e.event);
        assert.deepStrictEqual(timings.map((t) => [t.function, t.op, t.kernel, t.device]), [
          ['m.f', 0, 'k.matmul_f32', 'cuda://0'], ['m.f', 2, 'k.relu_f32', 'cuda://0'], ['m.f', 3, 'k.add_f32', 'cuda://0'],
        ]);
        const trace = events.find((e) => e.type === 'trace');
        for (const t of timings) {
          assert.strictEqual(t.sequence, trace.info.sequence);
          assert.ok(Number.isSafeInteger(t.startNs) && Number.isSafeInteger(t.durationNs), JSON.stringify(t));
          assert.ok(t.durationNs >= 0);
          assert.ok(t.startNs >= before && t.startNs + t.durationNs <= after, `${JSON.stringify(t)} within [${before}, ${after}]`);
        }
        for (let i = 1; i < timings.length; ++i) {
          assert.ok(timings[i].startNs >= timings[i - 1].startNs + timings[i - 1].durationNs, 'dispatches on one stream do not overlap');
        }
      } finally {
        closeAll(x, fn);
        p.close();
      }
    });
  });

  describe('PTX executables (test/gpu/kernels.ptx)', () => {
    function ptxProgram(define, halOptions) {
      const instance = new halrt.Instance();
      const device = instance.createDevice('cuda');
      const builder = new halrt.ModuleBuilder('g').executable('t', { cuda: KERNELS });
      define(builder);
      const hal = new halrt.HalModule(instance, device, halOptions);
      const module = builder.build(instance);
      const context = new halrt.Context(instance, [hal, module]);
      return {
        device,
        lookup: (name) => context.lookupFunction(`g.${name}`),
        close: () => closeAll(context, module, hal, device, instance),
      };
    }

    it('vector_add_f32 adds one element per thread: a grid that covers n adds all, a smaller one leaves the tail', async () => {
      const n = 1000;
      const p = ptxProgram((b) => b.function('add', (f) => f
        .input('a', 'f32', [n]).input('b', 'f32', [n]).output('full', 'f32', [n]).output('part', 'f32', [n])
        .dispatch('t.vector_add_f32', { workgroups: [16], workgroupSize: [64], bindings: ['a', 'b', 'full'], constants: [n] })
        .dispatch('t.vector_add_f32', { workgroups: [3], workgroupSize: [32], bindings: ['a', 'b', 'part'], constants: [n] })));
      const a = randomFloats(n, 31);
      const b = randomFloats(n, 32);
      const fn = p.lookup('add');
      const inputs = [p.device.tensor(a, [n]), p.device.tensor(b, [n])];
      try {
        const [full, part] = await fn.invoke(inputs);
        const sum = reference.elementwise(a, b, (x, y) => x + y, Float32Array);
        assert.deepStrictEqual(await full.read(), sum);
        const expected = new Float32Array(n);
        expected.set(sum.subarray(0, 96));
        assert.deepStrictEqual(await part.read(), expected, '3 blocks of 32 threads cover 96 elements');
        closeAll(full, part);
      } finally {
        closeAll(inputs, fn);
        p.close();
      }
    });

    it('write_index_u32 writes out[i] = i over a 3-D grid of 3-D blocks', async () => {
      const n = 777;
      const p = ptxProgram((b) => b.function('iota', (f) => f
        .output('out', 'u32', [n])
        .dispatch('t.write_index_u32', { workgroups: [2, 3, 1], workgroupSize: [4, 2, 2], bindings: ['out'], constants: [n] })));
      const fn = p.lookup('iota');
      try {
        const [out] = await fn.invoke([]);
        assert.deepStrictEqual(await out.read(), Uint32Array.from({ length: n }, (_, i) => i));
        out.close();
      } finally {
        fn.close();
        p.close();
      }
    });

    it('a dispatch whose bindings or constants do not fit an inferred entry, or a kernel the PTX lacks, fails at Context creation, naming it', () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('cuda');
      const hal = new halrt.HalModule(instance, device);
      const make = (dispatch, cuda) => new halrt.ModuleBuilder('g').executable('t', { cuda })
        .function('f', (f) => f.input('a', 'f32', [4]).output('y', 'f32', [4]).dispatch(dispatch.kernel, dispatch)).build(instance);
      const modules = [
        // Declared without parameters: inferred from the PTX.
        make({ kernel: 't.vector_add_f32', workgroups: [1], bindings: ['a', 'y'], constants: [4] },
          { ptx: PTX, entries: { vector_add_f32: {} } }),
        make({ kernel: 't.no_such_entry', workgroups: [1], bindings: ['a', 'y'], constants: [4] },
          { ptx: { text: INFERRED_PTX } }),
      ];
      try {
        assertThrowsHalrt(() => new halrt.Context(instance, [hal, modules[0]]), 'INVALID_ARGUMENT',
          "new Context: linking module 'g'", 'functions.f.body[0]', 'vector_add_f32');
        assertThrowsHalrt(() => new halrt.Context(instance, [hal, modules[1]]), 'NOT_FOUND',
          "new Context: linking module 'g'", 'functions.f.body[0]', 'no_such_entry');
      } finally {
        closeAll(modules, hal, device, instance);
      }
    });

    describe('typed kernel signatures (declared entries)', () => {
      const N = 1000;
      const A = -1.5;
      const X = Float64Array.from({ length: N }, (_, i) => 0.25 * i - 7);

      it('scale_offset_f64 runs with an i64 and an f64 constant and a pointer after them', async () => {
        const p = ptxProgram((b) => b.function('scale', (f) => f
          .input('x', 'f64', [N]).output('y', 'f64', [N]).output('big', 'f64', [N]).output('negative', 'f64', [N])
          .dispatch('t.scale_offset_f64', { workgroups: [3], workgroupSize: [128], bindings: ['x', 'y'], constants: [N, A] })
          // The count as a decimal string, and a grid smaller than n.
          .dispatch('t.scale_offset_f64', { workgroups: [1], workgroupSize: [32], bindings: ['x', 'big'], constants: [String(N), 2] })
          // -5e9 has a high word: n <= 0 writes nothing. Were only the low word
          // passed, n would be 3589934592 and the kernel would fault.
          .dispatch('t.scale_offset_f64', { workgroups: [1], bindings: ['x', 'negative'], constants: [-5e9, A] })));
        const fn = p.lookup('scale');
        const input = p.device.tensor(X, [N], 'f64');
        try {
          const [y, big, negative] = await fn.invoke([input]);
          assert.deepStrictEqual(await y.read(), X.map((x, i) => A * x + i));
          assert.deepStrictEqual(await big.read(), X.map((x, i) => 2 * x + i));
          assert.deepStrictEqual(await negative.read(), new Float64Array(N));
          closeAll(y, big, negative);
        } finally {
          closeAll(input, fn);
          p.close();
        }
      });

      it('a declaration that does not match the PTX fails at Context creation, naming the entry, the parameter and both types', () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice('cuda');
        const hal = new halrt.HalModule(instance, device);
        const OTHER_PTX = `.version 7.0
.target sm_75
.address_size 64
.visible .entry write_index_u32(.param .u64 out, .param .s32 n)
{
  ret;
}
.visible .entry vector_add_f32(.param .u64 out, .param .align 4 .b8 s[12])
{
  ret;
}
`;
        const cases = [
          [{ ptx: PTX, entries: { scale_offset_f64: ['buffer', 'i64', 'u32', 'buffer'] } },
            "PTX entry 'scale_offset_f64' (line 125): parameter 2 is declared 'u32' but is .f64 in the PTX"],
          [{ ptx: PTX, entries: { write_index_u32: ['buffer'] } },
            "PTX entry 'write_index_u32' (line 58): the module declares 1 parameters but the PTX has 2"],
          [{ ptx: { text: OTHER_PTX }, entries: { write_index_u32: ['buffer', 'buffer'] } },
            "PTX entry 'write_index_u32' (line 4): parameter 1 is declared 'buffer' but is .s32 in the PTX"],
          [{ ptx: { text: OTHER_PTX }, entries: { vector_add_f32: ['buffer', 'u32'] } },
            "PTX entry 'vector_add_f32' (line 8): parameter 1 is declared 'u32' but is .b8 [...] (an array or struct " +
            'passed by value) in the PTX'],
          [{ ptx: PTX }, "PTX entry 'scale_offset_f64' (line 125): parameter 2 has type .f64; halrt passes bindings as " +
            '64-bit device pointers (.u64/.b64), then constants as 32-bit values (.u32/.b32/.s32/.f32), unless the ' +
            "module declares the entry's parameters"],
        ];
        const modules = cases.map(([cuda]) => new halrt.ModuleBuilder('g').executable('t', { cuda })
          .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance));
        const missing = new halrt.ModuleBuilder('g').executable('t', { cuda: { ptx: PTX, entries: { nope: [] } } })
          .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
        try {
          cases.forEach(([, message], i) => {
            assertThrowsHalrt(() => new halrt.Context(instance, [hal, modules[i]]), 'INVALID_ARGUMENT',
              `new Context: linking module 'g': executables.t: ${message}`);
          });
          assertThrowsHalrt(() => new halrt.Context(instance, [hal, missing]), 'NOT_FOUND',
            "new Context: linking module 'g': executables.t: the PTX has no entry 'nope' (declared in the module's entries)");
        } finally {
          closeAll(modules, missing, hal, device, instance);
        }
      });

      it('PTX with an .entry prototype (nvcc writes one for a kernel used before its definition) loads and runs', async () => {
        // kernels.ptx with the prototype nvcc -ptx writes for a kernel whose
        // address another takes before the kernel is defined: it is not a
        // second entry.
        const prototype = `.address_size 64
.visible .entry write_index_u32
(
\t.param .u64 write_index_u32_param_0,
\t.param .u32 write_index_u32_param_1
)
;
`;
        const text = fs.readFileSync(PTX, 'utf8').replace('.address_size 64\n', prototype);
        assert.notStrictEqual(text.indexOf(prototype), -1);
        const n = 40;
        for (const entries of [ENTRIES, { write_index_u32: {} }]) {
          const instance = new halrt.Instance();
          const device = instance.createDevice('cuda');
          const hal = new halrt.HalModule(instance, device);
          const module = new halrt.ModuleBuilder('g').executable('t', { cuda: { ptx: { text }, entries } })
            .function('f', (f) => f.output('y', 'u32', [n])
              .dispatch('t.write_index_u32', { workgroups: [1], workgroupSize: [64], bindings: ['y'], constants: [n] }))
            .build(instance);
          let context;
          let fn;
          try {
            context = new halrt.Context(instance, [hal, module]);
            fn = context.lookupFunction('g.f');
            const [y] = await fn.invoke([]);
            assert.deepStrictEqual(await y.read(), Uint32Array.from({ length: n }, (_, i) => i));
            y.close();
          } finally {
            closeAll(fn, context, module, hal, device, instance);
          }
        }
      });

      it('without a declaration a 64-bit integer parameter is inferred as a buffer; declared, it takes a constant', () => {
        const instance = new halrt.Instance();
        const device = instance.createDevice('cuda');
        const hal = new halrt.HalModule(instance, device);
        const make = (cuda, dispatch) => new halrt.ModuleBuilder('g').executable('t', { cuda })
          .function('f', (f) => f.output('y', 'u32', [4]).dispatch('t.write_index_u32', { workgroups: [1], ...dispatch }))
          .build(instance);
        const inferred = make({ ptx: { text: INFERRED_PTX } }, { bindings: ['y'], constants: [4] });
        const declared = make({ ptx: { text: INFERRED_PTX }, entries: { write_index_u32: ['buffer', 'u64'] } },
          { bindings: ['y'], constants: [4] });
        try {
          assertThrowsHalrt(() => new halrt.Context(instance, [hal, inferred]), 'INVALID_ARGUMENT',
            "new Context: linking module 'g'", "kernel 'write_index_u32'", 'takes 2 bindings and 0 constants (got 1 and 1)');
          new halrt.Context(instance, [hal, declared]).close();
        } finally {
          closeAll(inferred, declared, hal, device, instance);
        }
      });
    });

    it('a PTX, cubin or fatbin path that is not a regular file of at most 1 GiB fails at Context creation, naming it', () => {
      const files = unreadableFiles('k.ptx', 2 ** 30 + 1);
      try {
        const cases = ['ptx', 'cubin', 'fatbin'].flatMap((kind) =>
          [files.zero, files.fifo, files.dir, files.big].map((file) => ({ kind, file })));
        const got = inChild(`
          const instance = new halrt.Instance();
          const device = instance.createDevice('cuda');
          const hal = new halrt.HalModule(instance, device);
          const out = args.map(({ kind, file }) => settle(() => {
            const module = new halrt.ModuleBuilder('m').executable('t', { cuda: { [kind]: file } })
              .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
            try { new halrt.Context(instance, [hal, module]).close(); } finally { module.close(); }
          }));
          for (const o of [hal, device, instance]) o.close();
          console.log(JSON.stringify(out));`, cases);
        const prefix = "new Context: linking module 'm': executables.t: ";
        const expected = [
          { code: 'INVALID_ARGUMENT', message: `${prefix}'/dev/zero' is a character device, not a regular file` },
          { code: 'INVALID_ARGUMENT', message: `${prefix}'${files.fifo}' is a FIFO, not a regular file` },
          { code: 'INVALID_ARGUMENT', message: `${prefix}'${files.dir}' is a directory, not a regular file` },
          { code: 'RESOURCE_EXHAUSTED',
            message: `${prefix}'${files.big}' is 1073741825 bytes, over the limit of 1073741824 bytes for a kernel file` },
        ];
        assert.deepStrictEqual(got, [...expected, ...expected, ...expected]);
      } finally {
        files.cleanup();
      }
    });

    it('PTX that does not compile is INVALID_ARGUMENT at Context creation, carrying the JIT log', () => {
      const instance = new halrt.Instance();
      const device = instance.createDevice('cuda');
      const hal = new halrt.HalModule(instance, device);
      const module = new halrt.ModuleBuilder('bad').executable('t', { cuda: { ptx: { text: 'garbage' } } })
        .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
      try {
        assertThrowsHalrt(() => new halrt.Context(instance, [hal, module]), 'INVALID_ARGUMENT',
          "new Context: linking module 'bad'", 'executables.t', 'cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX',
          '; JIT log: ');
        if (FAKE) {
          assertThrowsHalrt(() => new halrt.Context(instance, [hal, module]), 'INVALID_ARGUMENT',
            'JIT log: ptxas application ptx input, line 1; fatal   : Missing .version directive at start of file');
        }
        // The device is unharmed.
        const view = device.tensor(Int32Array.of(7), [1]);
        view.close();
      } finally {
        closeAll(module, hal, device, instance);
      }
    });
  });

  describe('device loss', () => {
    // In a child process: a fault loses the GPU's primary context, which
    // every cuda device of the process shares, so it must not touch the
    // devices of other tests (nor a real GPU's later tests).
    const SCRIPT = `
      const halrt = require(${LIB});
      const kernels = ${JSON.stringify(KERNELS)};
      const report = {};
      const settle = (promise) => promise.then(
        (value) => ({ ok: true, value }),
        (error) => ({ ok: false, code: error.code, message: error.message }));
      const attempt = async (name, run) => {
        try {
          report[name] = await settle(Promise.resolve(run()));
        } catch (error) {  // run() threw
          report[name] = { ok: false, code: error.code, message: error.message };
        }
      };
      (async () => {
        const instance = new halrt.Instance();
        const gpu = instance.createDevice('cuda');
        const cpu = instance.createDevice('local-sync');
        const traces = [];
        const module = new halrt.ModuleBuilder('d')
          .executable('t', { cuda: kernels })
          .executable('k', { local: { builtin: true }, cuda: { builtin: true } })
          .function('fault', (f) => f.output('y', 'u32', [4])
            .dispatch('t.fault_illegal_address', { workgroups: [1], workgroupSize: [4], bindings: ['y'], constants: [7] })
            .trace('after_fault', ['y']))
          .function('ok', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
            .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }).trace('ok', ['y']))
          .build(instance);
        const cpuModule = new halrt.ModuleBuilder('c').executable('k', { local: { builtin: true } })
          .function('ok', (f) => f.input('x', 'f32', [4]).output('y', 'f32', [4])
            .dispatch('k.add_f32', { workgroups: [1], bindings: ['x', 'x', 'y'], constants: [4] }).trace('ok', ['y']))
          .build(instance);
        const sink = (key) => traces.push(key);
        const gpuHal = new halrt.HalModule(instance, gpu, { debugSink: sink });
        const cpuHal = new halrt.HalModule(instance, cpu, { debugSink: sink });
        const gpuContext = new halrt.Context(instance, [gpuHal, module]);
        const cpuContext = new halrt.Context(instance, [cpuHal, cpuModule]);
        const fault = gpuContext.lookupFunction('d.fault');
        const ok = gpuContext.lookupFunction('d.ok');
        const cpuOk = cpuContext.lookupFunction('c.ok');
        const x = gpu.tensor(Float32Array.from([1, 2, 3, 4]), [4]);
        const cpuX = cpu.tensor(Float32Array.from([1, 2, 3, 4]), [4]);
        await attempt('before', async () => Array.from(await (await ok.invoke([x]))[0].read()));
        // The fault, with more work queued behind it.
        const pending = [fault.invoke([]), ok.invoke([x]), ok.invoke([x])].map(settle);
        [report.fault, report.queuedBehind, report.queuedBehind2] = await Promise.all(pending);
        await attempt('invokeAfter', () => ok.invoke([x]));
        await attempt('empty', () => gpu.empty([4], 'f32') && 'allocated');
        await attempt('tensor', () => gpu.tensor(new Float32Array(4), [4]) && 'allocated');
        await attempt('read', () => x.read());
        await attempt('copy', () => gpu.copy(x, x));
        const linkHal = new halrt.HalModule(instance, gpu);
        await attempt('link', () => new halrt.Context(instance, [linkHal, module]) && 'linked');
        await attempt('sameGpuNewDevice', () => instance.createDevice('cuda').info.uri);
        await attempt('cpu', async () => Array.from(await (await cpuOk.invoke([cpuX]))[0].read()));
        report.traces = traces.slice();
        // Release every object of the lost device, then ask for a new one.
        for (const object of [fault, ok, x, gpuContext, gpuHal, linkHal, gpu]) object.close();
        // Until only the CPU device is left (unclosed views go with GC; a
        // CUDA device is freed by its own thread), for 10 s at most.
        for (let i = 0; i < 2000 && halrt.liveObjects().device > 1; ++i) {
          global.gc();
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        await attempt('fresh', async () => {
          const fresh = instance.createDevice('cuda');
          const hal = new halrt.HalModule(instance, fresh);
          const context = new halrt.Context(instance, [hal, module]);
          const view = fresh.tensor(Float32Array.from([0.5, 1, 1.5, 2]), [4]);
          const [y] = await context.lookupFunction('d.ok').invoke([view]);
          return Array.from(await y.read());
        });
        process.stdout.write(JSON.stringify(report));
      })().catch((error) => {
        process.stdout.write(JSON.stringify({ crashed: String(error && error.stack) }));
      });
    `;

    let report;
    before(function () {
      if (!cuda.available) this.skip();
      const child = spawnSync(process.execPath, ['--expose-gc', '-e', SCRIPT], { encoding: 'utf8', timeout: 60000 });
      assert.strictEqual(child.error, undefined, String(child.error));
      assert.strictEqual(child.signal, null, `the child was killed by ${child.signal}: ${child.stderr}`);
      assert.strictEqual(child.status, 0, child.stderr);
      report = JSON.parse(child.stdout);
      assert.strictEqual(report.crashed, undefined, report.crashed);
    });

    const lost = (entry, ...parts) => {
      assert.strictEqual(entry.ok, false, `expected DEVICE_LOST, got ${JSON.stringify(entry)}`);
      assert.strictEqual(entry.code, 'DEVICE_LOST', entry.message);
      for (const part of parts) assert.ok(entry.message.includes(part), `${JSON.stringify(entry.message)} lacks ${JSON.stringify(part)}`);
    };

    it('a faulting kernel rejects its invocation with DEVICE_LOST naming the device and the CUDA error; the process survives', () => {
      assert.deepStrictEqual(report.before, { ok: true, value: [2, 4, 6, 8] });
      lost(report.fault, 'd.fault', 'CUDA device cuda://0 is lost', 'CUDA_ERROR_ILLEGAL_ADDRESS');
    });

    it('invocations queued behind the fault reject with DEVICE_LOST too, and the trace after the fault never arrives', () => {
      lost(report.queuedBehind, 'CUDA device cuda://0 is lost', 'CUDA_ERROR_ILLEGAL_ADDRESS');
      lost(report.queuedBehind2, 'CUDA device cuda://0 is lost');
      assert.ok(!report.traces.includes('after_fault'), `traces: ${report.traces}`);
    });

    it('later invocations, allocations, reads, copies and executable loads on the lost device fail with DEVICE_LOST', () => {
      lost(report.invokeAfter, 'function.invoke', 'CUDA device cuda://0 is lost', 'CUDA_ERROR_ILLEGAL_ADDRESS');
      lost(report.empty, 'device.empty', 'is lost');
      lost(report.tensor, 'device.tensor', 'is lost');
      lost(report.read, 'bufferView.read', 'is lost');
      lost(report.copy, 'device.copy', 'is lost');
      lost(report.link, "linking module 'd'", 'is lost');
      // A new device shares the lost primary context while the old one lives.
      lost(report.sameGpuNewDevice, 'instance.createDevice');
    });

    it('a CPU device in the same process keeps working, its sink included', () => {
      assert.deepStrictEqual(report.cpu, { ok: true, value: [2, 4, 6, 8] });
      assert.deepStrictEqual(report.traces, ['ok', 'ok']);
    });

    it('once every object of the lost device is released, a new cuda device works (the test double recovers; a GPU may not)', function () {
      // cuda.h: after a sticky error the process must be relaunched, so a
      // real driver may refuse the new device (docs/cuda.md); if it works,
      // it computes right.
      if (!FAKE && !report.fresh.ok) {
        lost(report.fresh);
        this.skip();
      }
      assert.deepStrictEqual(report.fresh, { ok: true, value: [1, 2, 3, 4] });
    });
  });
});

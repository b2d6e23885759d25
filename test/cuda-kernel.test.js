'use strict';
// halrt.nvrtc.compile (a compile check without a GPU) and halrt.cudaKernel
// (a CUDA C++ kernel as a function; README "A CUDA kernel in two lines").
//
// Compiling needs NVRTC only: those tests run in every pass where NVRTC
// loads. The kernels run on the CUDA device, which is the driver test double
// under test/run-cuda.js (it runs kernels by name: the sources below define
// names it implements) and a real GPU under test/gpu/run.sh.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const {
  assertRejectsHalrt, assertThrowsHalrt, cudaDriver, liveBaseline, settleLiveObjects, waitFor,
} = require('./helpers');

const nvrtc = halrt.drivers().find((driver) => driver.name === 'cuda')?.nvrtc;
const cuda = cudaDriver();

const VECTOR_ADD = `extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
`;
const SCALE_OFFSET = `extern "C" __global__ void scale_offset_f64(const double* x, long long n, double a, double* y) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = a * x[i] + (double)i;
}
`;
const TEMPLATE = `template <typename T>
__global__ void write_index_u32(T* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = (T)i;
}
`;
const ADD_PARAMS = ['buffer', 'buffer', 'buffer', 'u32'];

describe('halrt.nvrtc.compile', function () {
  before(function () {
    if (!nvrtc?.available) this.skip();
  });

  it('compiles to PTX for the architecture named, with an empty log', () => {
    const result = halrt.nvrtc.compile(VECTOR_ADD, { arch: 'sm_80' });
    assert.deepStrictEqual(Object.keys(result).sort(), ['arch', 'log', 'ptx', 'version']);
    assert.match(result.ptx, /\.target sm_80/);
    assert.match(result.ptx, /\.entry vector_add_f32/);
    assert.strictEqual(result.log, '');
    assert.strictEqual(result.arch, 'sm_80');
    assert.strictEqual(result.version, nvrtc.version);
    assert.match(halrt.nvrtc.compile(VECTOR_ADD, { arch: 'compute_80' }).ptx, /\.target sm_80/);
  });

  it('without options.arch: sm_ of the newest architecture NVRTC lists', () => {
    const { arch, ptx } = halrt.nvrtc.compile(VECTOR_ADD);
    assert.match(arch, /^sm_\d+$/);
    assert.match(ptx, new RegExp(`\\.target ${arch}\\b`));
  });

  it('a compile error is INVALID_ARGUMENT with the log in the message and whole as error.log', () => {
    const source = `__global__ void f(int* p) { *p = undefined_name; }\n${'// padding\n'.repeat(100)}${Array.from({ length: 20 }, (_, i) => `__global__ void g${i}() { also_undefined; }\n`).join('')}`;
    let error;
    assert.throws(() => halrt.nvrtc.compile(source, { arch: 'sm_80', name: 'mine.cu' }), (e) => (error = e) instanceof halrt.HalrtError);
    assert.strictEqual(error.code, 'INVALID_ARGUMENT');
    assert.match(error.message, /^halrt\.nvrtc\.compile: compiling mine\.cu with NVRTC [\d.]+: nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION; log:\nmine\.cu\(1\): error: identifier "undefined_name" is undefined/);
    assert.match(error.message, /\[log cut: the first \d+ of \d+ bytes\]$/);
    assert.match(error.log, /identifier "also_undefined" is undefined/);
    assert.match(error.log, /mine\.cu\(121\): error: identifier "also_undefined" is undefined/);
    assert.match(error.log, /21 errors detected in the compilation of "mine\.cu"/);
  });

  it('warnings come back in the log of a successful compile', () => {
    const { log, ptx } = halrt.nvrtc.compile('__global__ void f(int* p) { int unused = 2; *p = 1; }', { arch: 'sm_90' });
    assert.match(log, /kernel\.cu\(1\): warning .*"unused" was declared but never referenced/);
    assert.match(ptx, /\.entry/);
  });

  it('options go to NVRTC in order; -arch among them is refused, naming options.arch', () => {
    const source = '__global__ void f(int* p) { *p = N; }';
    assert.match(halrt.nvrtc.compile(source, { options: ['-DN=7'] }).ptx, /7/);
    assertThrowsHalrt(() => halrt.nvrtc.compile(source), 'INVALID_ARGUMENT', 'identifier "N" is undefined');
    assertThrowsHalrt(() => halrt.nvrtc.compile(source, { options: ['-DN=1', '-arch=sm_80'] }), 'INVALID_ARGUMENT',
      "halrt.nvrtc.compile: options.options[1] '-arch=sm_80': name the architecture as options.arch");
    assertThrowsHalrt(() => halrt.nvrtc.compile(source, { options: ['--gpu-architecture', 'sm_80'] }), 'INVALID_ARGUMENT', 'options.options[0]');
    assertThrowsHalrt(() => halrt.nvrtc.compile(source, { options: ['--no-such-option'] }), 'INVALID_ARGUMENT', 'NVRTC_ERROR_INVALID_OPTION');
  });

  it('quoted includes resolve only in -I folders for a relative name, never in the current directory', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'halrt-compile-'));
    try {
      fs.writeFileSync(path.join(folder, 'value.cuh'), '#define VALUE 41\n');
      const source = '#include "value.cuh"\n__global__ void f(int* p) { *p = VALUE + 1; }\n';
      const result = spawnSync(process.execPath, ['-e', `
        const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
        try { halrt.nvrtc.compile(${JSON.stringify(source)}); console.log('compiled'); } catch (e) { console.log(e.code); }`], { cwd: folder, encoding: 'utf8' });
      assert.strictEqual(result.stdout.trim(), 'INVALID_ARGUMENT', result.stderr);
      assert.match(halrt.nvrtc.compile(source, { options: [`-I${folder}`] }).ptx, /42/);
      assert.match(halrt.nvrtc.compile(source, { name: path.join(folder, 'k.cu') }).ptx, /42/);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('bad arguments name themselves', () => {
    const bad = [
      [[42], 'source must be a string of CUDA C++ (got 42)'],
      [['a\0b'], 'source has a NUL byte at offset 1'],
      [[VECTOR_ADD, 'sm_80'], "options must be an object (got 'sm_80')"],
      [[VECTOR_ADD, { target: 'sm_80' }], "unknown option 'target' (known: arch, options, name)"],
      [[VECTOR_ADD, { arch: 80 }], "options.arch must be a string such as 'sm_80'"],
      [[VECTOR_ADD, { arch: 'sm80' }], "options.arch: 'sm80' is not an architecture: give sm_XY or compute_XY"],
      [[VECTOR_ADD, { arch: 'sm_80x' }], "'sm_80x' is not an architecture"],
      [[VECTOR_ADD, { arch: 'sm_12' }], "options.arch: NVRTC", "cannot compile for 'sm_12'; it compiles for sm_"],
      [[VECTOR_ADD, { name: '' }], 'options.name must be a non-empty string'],
      [[VECTOR_ADD, { options: '-DN=1' }], 'options.options must be an Array of strings'],
      [[VECTOR_ADD, { options: [''] }], 'options.options[0] must be a non-empty string'],
      [[VECTOR_ADD, { options: new Array(257).fill('-DX') }], 'options.options has 257 entries, over the limit of 256'],
    ];
    for (const [args, ...parts] of bad) {
      assertThrowsHalrt(() => halrt.nvrtc.compile(...args), 'INVALID_ARGUMENT', 'halrt.nvrtc.compile: ', ...parts);
    }
  });
});

describe('halrt.nvrtc.compile without NVRTC', () => {
  it('is UNAVAILABLE naming the library tried', () => {
    const result = spawnSync(process.execPath, ['-e', `
      const halrt = require(${JSON.stringify(path.join(__dirname, '..'))});
      try { halrt.nvrtc.compile('__global__ void f() {}'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`],
    { encoding: 'utf8', env: { ...process.env, HALRT_NVRTC_LIBRARY: '/nonexistent/libnvrtc.so' } });
    const { code, message } = JSON.parse(result.stdout);
    assert.strictEqual(code, 'UNAVAILABLE');
    assert.match(message, /^halrt\.nvrtc\.compile: NVRTC is not usable \(tried HALRT_NVRTC_LIBRARY=\/nonexistent\/libnvrtc\.so\)/);
  });
});

describe('halrt.cudaKernel: arguments and devices', () => {
  it('bad arguments throw naming themselves, before any device is made', () => {
    const before = halrt.liveObjects().device;
    const bad = [
      [[1, 'k', { params: ['buffer'] }], 'source must be a string of CUDA C++'],
      [[VECTOR_ADD, '', { params: ['buffer'] }], "name must be the kernel's name, or a C++ name expression"],
      [[VECTOR_ADD, 'vector_add_f32'], "options.params must be an Array of the kernel's parameter types"],
      [[VECTOR_ADD, 'vector_add_f32', { params: ['buffer', 'float'] }], "options.params[1] must be one of buffer, u32, i32, f32, u64, i64, f64 (got 'float')"],
      [[VECTOR_ADD, 'vector_add_f32', { params: ['u32'] }], "options.params must have a 'buffer'"],
      [[VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, grid: 1 }], "unknown option 'grid' (known: params, device, options)"],
      [[VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, device: 0 }], "options.device must be a device URI such as 'cuda://0' or a Device (got 0)"],
      [[VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, options: '-O3' }], 'options.options must be an Array of NVRTC options'],
    ];
    for (const [args, ...parts] of bad) {
      assertThrowsHalrt(() => halrt.cudaKernel(...args), 'INVALID_ARGUMENT', 'halrt.cudaKernel: ', ...parts);
    }
    assert.strictEqual(halrt.liveObjects().device, before);
  });

  it('a CPU device is refused: the kernel is CUDA C++', async () => {
    const before = halrt.liveObjects().device;
    assertThrowsHalrt(() => halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, device: 'local-sync' }),
      'INVALID_ARGUMENT', 'halrt.cudaKernel: options.device: a CUDA kernel runs on a CUDA device, and local-sync is a local device');
    await waitFor(() => halrt.liveObjects().device <= before, 30000, 'the device made to be released');
  });

  it('without a usable CUDA driver: UNAVAILABLE with the reason', function () {
    if (cuda.available) this.skip();
    assertThrowsHalrt(() => halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS }), 'UNAVAILABLE', 'halrt.cudaKernel: ');
  });
});

describe('halrt.cudaKernel on the CUDA device', function () {
  this.timeout(60000);
  let k = null;
  before(function () {
    if (!cuda.available || !nvrtc?.available) this.skip();
  });
  beforeEach(() => {
    k = halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS });
  });
  afterEach(() => {
    k?.close();
  });

  it('runs on host data and resolves with one BufferView per buffer argument', async () => {
    const [a, b, out] = await k({ grid: 1, block: 4 }, [1, 2, 3, 4], new Float32Array([10, 20, 30, 40]), new Float32Array(4), 4);
    assert.ok([a, b, out].every((view) => view instanceof halrt.BufferView));
    assert.deepStrictEqual(Array.from(await out.read()), [11, 22, 33, 44]);
    assert.deepStrictEqual(Array.from(await a.read()), [1, 2, 3, 4]);
    for (const view of [a, b, out]) view.close();
  });

  it('writes into a BufferView argument in place and gives the same object back; read: true gives host arrays', async () => {
    const out = k.device.empty([8], 'f32');
    const x = k.device.tensor(new Float32Array(8).fill(1), [8]);
    const results = await k({ grid: [2], block: [4] }, x, x, out, 8);
    assert.strictEqual(results[2], out);
    assert.strictEqual(results[0], x);
    assert.deepStrictEqual(Array.from(await out.read()), new Array(8).fill(2));
    const read = await k({ grid: 2, block: 4, read: true }, [1, 2, 3, 4, 5, 6, 7, 8], x, out, 5);
    assert.deepStrictEqual(Array.from(read[2]), [2, 3, 4, 5, 6, 2, 2, 2]);
    assert.ok(read[2] instanceof Float32Array);
    assert.strictEqual(out.closed, false);
    x.close();
    out.close();
  });

  it('64-bit scalars take BigInts and numbers; f64 takes any number', async () => {
    const scale = halrt.cudaKernel(SCALE_OFFSET, 'scale_offset_f64', { params: ['buffer', 'i64', 'f64', 'buffer'] });
    try {
      const x = Float64Array.from({ length: 6 }, (_, i) => i / 2);
      const [, y] = await scale({ grid: 1, block: 32, read: true }, x, 6n, 2.5, new Float64Array(6));
      assert.deepStrictEqual(Array.from(y), Array.from(x, (v, i) => 2.5 * v + i));
      const [, z] = await scale({ grid: 1, block: 32, read: true }, x, 3, -1, new Float64Array(6));
      assert.deepStrictEqual(Array.from(z), [0, 0.5, 1, 0, 0, 0]);
      await assertRejectsHalrt(scale({ grid: 1 }, x, 2n ** 63n, 1, new Float64Array(6)), 'INVALID_ARGUMENT',
        "kernel 'scale_offset_f64': argument 3: kernel 'scale_offset_f64' takes an i64 here");
      await assertRejectsHalrt(scale({ grid: 1 }, x, 1, 1n, new Float64Array(6)), 'INVALID_ARGUMENT',
        "kernel 'scale_offset_f64': argument 4 is a f64 parameter: it takes a number (got a BigInt)");
    } finally {
      scale.close();
    }
  });

  it('a C++ name expression names a template instance', async () => {
    const iota = halrt.cudaKernel(TEMPLATE, 'write_index_u32<unsigned int>', { params: ['buffer', 'u32'] });
    try {
      const [out] = await iota({ grid: 2, block: 8, read: true }, new Uint32Array(37), 37);
      assert.deepStrictEqual(Array.from(out), Array.from({ length: 37 }, (_, i) => i));
      assert.strictEqual(String(iota), `CudaKernel(write_index_u32<unsigned int>(buffer, u32) on ${iota.device.info.uri})`);
    } finally {
      iota.close();
    }
  });

  it('compile errors throw when the kernel is made, with NVRTC\'s log; nothing is left open', () => {
    const before = halrt.liveObjects();
    assertThrowsHalrt(() => halrt.cudaKernel('extern "C" __global__ void f(float* x) { x[0] = oops; }', 'f', { params: ['buffer'] }),
      'INVALID_ARGUMENT', 'halrt.cudaKernel: ', 'compiling kernel.cu with NVRTC', 'identifier "oops" is undefined');
    assertThrowsHalrt(() => halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ['buffer', 'buffer', 'buffer', 'f64'] }),
      'INVALID_ARGUMENT', 'halrt.cudaKernel: ');
    const after = halrt.liveObjects();
    for (const kind of ['instance', 'module', 'context', 'executable']) assert.strictEqual(after[kind], before[kind], kind);
  });

  it('wrong calls reject naming the argument or launch field', async () => {
    // BufferViews are counted process-wide: an earlier test's may still
    // await collection, so the count is compared with a settled baseline.
    const baseline = await liveBaseline();
    const cases = [
      [[4, [1], [1], [1], 1], 'the first argument must be the launch {grid, block} (got 4)'],
      [[{ grid: 1, blocks: 2 }, [1], [1], [1], 1], "launch: unknown option 'blocks' (known: grid, block, read, signal)"],
      [[{ block: 2 }, [1], [1], [1], 1], 'launch.grid must be a positive integer or an Array of 1 to 3 of them (got undefined)'],
      [[{ grid: [1, 1, 1, 1] }, [1], [1], [1], 1], 'launch.grid must be'],
      [[{ grid: 0 }, [1], [1], [1], 1], 'launch.grid[0]: must be an integer in [1, 2147483647]'],
      [[{ grid: 1, block: 2048 }, [1], [1], [1], 1], 'launch.block'],
      [[{ grid: 1, read: 1 }, [1], [1], [1], 1], 'launch.read must be a boolean'],
      [[{ grid: 1 }, [1], [1]], 'it takes 4 arguments (buffer, buffer, buffer, u32) after the launch, but got 2'],
      [[{ grid: 1 }, 1, [1], [1], 1], 'argument 2 is a buffer parameter: it takes a BufferView or host data'],
      [[{ grid: 1 }, [1], 'x', [1], 1], 'argument 3: device.tensor:'],
      [[{ grid: 1 }, [1], [1], [1], -1], "argument 5: kernel 'vector_add_f32' takes a u32 here: -1 is not an integer"],
      [[{ grid: 1 }, [1], [1], [1], 'four'], "argument 5 is a u32 parameter: it takes a number (got 'four')"],
    ];
    for (const [args, ...parts] of cases) {
      await assertRejectsHalrt(k(...args), 'INVALID_ARGUMENT', "kernel 'vector_add_f32': ", ...parts);
    }
    const closed = k.device.tensor([1], [1]);
    closed.close();
    await assertRejectsHalrt(k({ grid: 1 }, closed, [1], [1], 1), 'FAILED_PRECONDITION', 'argument 2: the BufferView is closed');
    assert.strictEqual((await settleLiveObjects(baseline)).bufferView, baseline.bufferView);
  });

  it('a BufferView of another device rejects, naming the argument', async () => {
    const instance = new halrt.Instance();
    const other = instance.createDevice('local-sync');
    const view = other.tensor([1, 2], [2]);
    try {
      await assertRejectsHalrt(k({ grid: 1 }, view, [1, 2], [0, 0], 2), 'INVALID_ARGUMENT', 'arg0');
    } finally {
      view.close();
      other.close();
      instance.close();
    }
  });

  it('keeps the last 16 programs; close() releases them and the device it made, not a Device it was given', async () => {
    for (let n = 1; n <= 20; ++n) {
      await k({ grid: 1, block: 32, read: true }, new Float32Array(32), new Float32Array(32), new Float32Array(32), n);
    }
    assert.strictEqual(halrt.liveObjects().context, 16);
    const device = k.device;
    k.close();
    assert.strictEqual(k.closed, true);
    assert.strictEqual(device.closed, true);
    assert.strictEqual(halrt.liveObjects().context, 0);
    await assertRejectsHalrt(k({ grid: 1 }, [1], [1], [1], 1), 'FAILED_PRECONDITION', "kernel 'vector_add_f32': the kernel is closed");
    k.close();

    const instance = new halrt.Instance();
    const given = instance.createDevice(device.info.uri);
    const mine = halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, device: given });
    const [x, , out] = await mine({ grid: 1, block: 2 }, given.tensor([1, 2], [2]), [3, 4], [0, 0], 2);
    assert.deepStrictEqual(Array.from(await out.read()), [4, 6]);
    x.close();
    out.close();
    mine.close();
    assert.strictEqual(given.closed, false);
    given.close();
    instance.close();
    assertThrowsHalrt(() => halrt.cudaKernel(VECTOR_ADD, 'vector_add_f32', { params: ADD_PARAMS, device: given }), 'FAILED_PRECONDITION', 'options.device is closed');
  });

  it('closing the kernel with calls in flight: they settle, and nothing is left', async () => {
    const before = halrt.liveObjects();
    const calls = [];
    for (let i = 0; i < 8; ++i) calls.push(k({ grid: 1, block: 4, read: true }, [i, 0, 0, 0], [1, 1, 1, 1], new Float32Array(4), 4));
    k.close();
    const results = await Promise.allSettled(calls);
    results.forEach((result, i) => {
      assert.strictEqual(result.status, 'fulfilled', result.reason?.message);
      assert.deepStrictEqual(Array.from(result.value[2]), [i + 1, 1, 1, 1]);
    });
    global.gc?.();
    // At most: devices of earlier tests may be collected meanwhile too.
    await waitFor(() => halrt.liveObjects().device <= before.device - 1 && halrt.liveObjects().bufferView <= before.bufferView,
      30000, 'the device to be released');
  });

  it('an aborted signal rejects with CANCELLED', async () => {
    const controller = new AbortController();
    controller.abort();
    await assertRejectsHalrt(k({ grid: 1, signal: controller.signal }, [1], [1], [0], 1), 'CANCELLED');
  });

  it('prints what it is', () => {
    assert.strictEqual(String(k), `CudaKernel(vector_add_f32(buffer, buffer, buffer, u32) on ${k.device.info.uri})`);
    assert.strictEqual(require('util').inspect(k, { breakLength: Infinity }),
      `CudaKernel { name: 'vector_add_f32', params: [ 'buffer', 'buffer', 'buffer', 'u32' ], device: '${k.device.info.uri}', closed: false }`);
    assert.strictEqual(k.name, 'vector_add_f32');
    assert.deepStrictEqual(k.params, ADD_PARAMS);
  });
});

'use strict';
// CUDA C source executables compiled at run time by NVRTC (docs/cuda.md,
// "CUDA C source (NVRTC)"), the kernel cache, and the drivers() report.
//
// Compiling needs NVRTC only (no GPU): the kernels are compiled for real
// here and run on the CUDA device, which is the driver test double under
// test/run-cuda.js (it runs kernels by name: the sources below define the
// names it implements). Without NVRTC, or without a CUDA device, those
// tests are skipped and the suite's title says why.
const assert = require('assert');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { assertThrowsHalrt, closeAll, cudaDriver } = require('./helpers');

const cuda = cudaDriver();
const nvrtc = halrt.drivers().find((driver) => driver.name === 'cuda')?.nvrtc;
const LIB = JSON.stringify(path.join(__dirname, '..'));

const KERNELS = `// out[i] = a[i] + b[i] for the threads the grid covers.
extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
#if WITH_INDEX
extern "C" __global__ void write_index_u32(unsigned* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = i;
}
#endif
`;

const TEMPLATE = `template <typename T>
__global__ void write_index_u32(T* out, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = (T)i;
}
`;

/** A fresh folder for one test's cache or files. */
function tempFolder(tag) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `halrt-nvrtc-${tag}-`));
}

/** The files of a kernel cache folder, with their inode and size. */
function entries(folder) {
  return fs.readdirSync(folder).sort().map((name) => {
    const stat = fs.statSync(path.join(folder, name));
    return { name, ino: stat.ino, size: stat.size };
  });
}

/** Runs `script` (with `halrt` and `run` in scope) in a child process with `env` added (killed after `timeout` ms); returns its JSON output. */
function child(script, env, timeout = 60000, cwd = undefined) {
  const source = `const halrt = require(${LIB});
    const run = ${runIota.toString()};
    const closeAll = ${closeEach.toString()};
    (async () => { ${script} })().then((value) => process.stdout.write(JSON.stringify(value)),
      (error) => process.stdout.write(JSON.stringify({ code: error.code, message: error.message })));`;
  const result = spawnSync(process.execPath, ['-e', source], {
    encoding: 'utf8', timeout, env: { ...process.env, ...env }, cwd,
  });
  assert.strictEqual(result.status, 0, result.stderr);
  return JSON.parse(result.stdout);
}

function closeEach(...objects) {
  for (const object of objects.flat()) object?.close();
}

/** Builds `cuda` (an executable description) into a module whose function 'iota' dispatches `kernel` over n = 37 u32 and resolves with the output. */
async function runIota(cudaSpec, kernel = 'write_index_u32') {
  const instance = new halrt.Instance();
  const objects = [instance];
  try {
    const device = instance.createDevice('cuda');
    objects.unshift(device);
    const hal = new halrt.HalModule(instance, device);
    objects.unshift(hal);
    const module = new halrt.ModuleBuilder('g').executable('t', { cuda: cudaSpec })
      .function('iota', (f) => f.output('out', 'u32', [37])
        .dispatch(`t.${kernel}`, { workgroups: [2], workgroupSize: [8], bindings: ['out'], constants: [37] }))
      .build(instance);
    objects.unshift(module);
    const context = new halrt.Context(instance, [hal, module]);
    objects.unshift(context);
    const fn = context.lookupFunction('g.iota');
    objects.unshift(fn);
    const [out] = await fn.invoke([]);
    const values = Array.from(await out.read());
    out.close();
    return values;
  } finally {
    closeAll(objects);
  }
}

const IOTA = Array.from({ length: 37 }, (_, i) => i);

describe('drivers() reports NVRTC', () => {
  it('the cuda entry has nvrtc: {available, version, reason}', () => {
    assert.ok(nvrtc, 'the cuda driver entry has an nvrtc member');
    assert.deepStrictEqual(Object.keys(nvrtc).sort(), ['available', 'reason', 'version']);
    if (nvrtc.available) {
      assert.match(nvrtc.version, /^\d+\.\d+$/);
      assert.strictEqual(nvrtc.reason, null);
    } else {
      assert.strictEqual(nvrtc.version, null);
      assert.match(nvrtc.reason, /^NVRTC is not usable/);
    }
    for (const driver of halrt.drivers().filter((d) => d.name !== 'cuda')) {
      assert.strictEqual(driver.nvrtc, undefined, `${driver.name} has no compiler`);
    }
  });

  it('HALRT_NVRTC_LIBRARY=/nonexistent: unavailable, naming the path and the loader\'s reason', () => {
    const report = child(`return halrt.drivers().find((d) => d.name === 'cuda').nvrtc;`,
      { HALRT_NVRTC_LIBRARY: '/nonexistent/libnvrtc.so' });
    assert.strictEqual(report.available, false);
    assert.strictEqual(report.version, null);
    assert.match(report.reason, /HALRT_NVRTC_LIBRARY=\/nonexistent\/libnvrtc\.so/);
    assert.match(report.reason, /cannot open shared object file/);
  });

  it('HALRT_NVRTC_LIBRARY naming a FIFO or a folder: unavailable at once, saying what it is (dlopen would wait on a FIFO)', function () {
    this.timeout(30000);
    const folder = tempFolder('lib');
    try {
      const fifo = path.join(folder, 'libnvrtc.so');
      const made = spawnSync('mkfifo', [fifo]);
      if (made.status !== 0) this.skip();
      const started = Date.now();
      const report = child(`return halrt.drivers().find((d) => d.name === 'cuda').nvrtc;`,
        { HALRT_NVRTC_LIBRARY: fifo }, 10000);
      assert.ok(Date.now() - started < 10000);
      assert.strictEqual(report.available, false);
      assert.match(report.reason, /NVRTC is not usable \(tried HALRT_NVRTC_LIBRARY=.*libnvrtc\.so\): cannot load .*libnvrtc\.so: '.*libnvrtc\.so' is a FIFO, not a regular file/);
      const dir = child(`return halrt.drivers().find((d) => d.name === 'cuda').nvrtc;`,
        { HALRT_NVRTC_LIBRARY: folder });
      assert.match(dir.reason, /is a directory, not a regular file/);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('HALRT_NVRTC_LIBRARY naming a library that is not NVRTC: unavailable, naming the missing entry point', () => {
    const addon = path.join(__dirname, '..', 'build', 'Release', 'halrt.node');
    const report = child(`return halrt.drivers().find((d) => d.name === 'cuda').nvrtc;`,
      { HALRT_NVRTC_LIBRARY: addon });
    assert.strictEqual(report.available, false);
    assert.match(report.reason, /lacks nvrtcVersion \(not NVRTC/);
  });

  it('`halrt devices` prints the NVRTC line under cuda', () => {
    const result = spawnSync(process.execPath, [path.join(__dirname, '..', 'bin', 'halrt.js'), 'devices'], {
      encoding: 'utf8', env: { ...process.env, HALRT_NVRTC_LIBRARY: '/nonexistent/libnvrtc.so' },
    });
    assert.strictEqual(result.status, 0, result.stderr);
    assert.match(result.stdout, /\n {2}nvrtc: unavailable \(NVRTC is not usable \(tried HALRT_NVRTC_LIBRARY=\/nonexistent\/libnvrtc\.so\)/);
  });
});

const skipReason = !cuda.available ? cuda.reason : !nvrtc?.available ? nvrtc?.reason : null;
describe(`CUDA source executables${skipReason ? ` (skipped: ${skipReason})` : ''}`, function () {
  this.timeout(60000);
  let cache;
  let savedCacheDir;
  before(function () {
    if (skipReason) this.skip();
    savedCacheDir = process.env.HALRT_CACHE_DIR;
    cache = tempFolder('cache');
    process.env.HALRT_CACHE_DIR = cache;
  });
  after(() => {
    if (savedCacheDir === undefined) delete process.env.HALRT_CACHE_DIR;
    else process.env.HALRT_CACHE_DIR = savedCacheDir;
    if (cache) fs.rmSync(cache, { recursive: true, force: true });
  });

  it('a source file next to the module file compiles and runs (vector_add_f32)', async () => {
    const folder = tempFolder('file');
    try {
      fs.writeFileSync(path.join(folder, 'kernels.cu'), KERNELS);
      fs.writeFileSync(path.join(folder, 'add.halrt.json'), JSON.stringify({
        format: 'halrt.module/1',
        name: 'add',
        executables: { t: { cuda: { source: 'kernels.cu' } } },
        functions: { main: {
          inputs: [{ name: 'a', dtype: 'f32', shape: [5] }, { name: 'b', dtype: 'f32', shape: [5] }],
          outputs: [{ name: 'y', dtype: 'f32', shape: [5] }],
          body: [{ op: 'dispatch', kernel: 't.vector_add_f32', workgroups: [1], workgroupSize: [32],
            bindings: ['a', 'b', 'y'], constants: [5] }],
        } },
      }));
      const instance = new halrt.Instance();
      const device = instance.createDevice('cuda');
      const hal = new halrt.HalModule(instance, device);
      const module = halrt.Module.load(instance, path.join(folder, 'add.halrt.json'));
      const context = new halrt.Context(instance, [hal, module]);
      const fn = context.lookupFunction('add.main');
      const a = device.tensor(Float32Array.of(1, 2, 3, 4, 5), [5]);
      const b = device.tensor(Float32Array.of(10, 20, 30, 40, 50), [5]);
      try {
        const [y] = await fn.invoke([a, b]);
        assert.deepStrictEqual(Array.from(await y.read()), [11, 22, 33, 44, 55]);
        y.close();
      } finally {
        closeAll(a, b, fn, context, module, hal, device, instance);
      }
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('options reach the compiler: -DWITH_INDEX=1 adds a kernel the source leaves out without it', async () => {
    assert.deepStrictEqual(await runIota({ source: { text: KERNELS }, options: ['-DWITH_INDEX=1'] }), IOTA);
    await assert.rejects(runIota({ source: { text: KERNELS } }), (error) =>
      error.code === 'NOT_FOUND' && /write_index_u32/.test(error.message));
  });

  it('an option that expects a value ("-I", "--include-path") last in options does not take the target\'s place', async () => {
    for (const option of ['-I', '--include-path']) {
      assert.deepStrictEqual(await runIota({ source: { text: KERNELS }, options: ['-DWITH_INDEX=1', option] }), IOTA);
    }
  });

  it('a NUL byte in a source file is INVALID_ARGUMENT naming its offset (NVRTC would ignore the rest)', async () => {
    const folder = tempFolder('nul');
    try {
      const file = path.join(folder, 'nul.cu');
      fs.writeFileSync(file, `${KERNELS}\0#error unseen\n`);
      await assert.rejects(runIota({ source: file, options: ['-DWITH_INDEX=1'] }),
        (error) => error.code === 'INVALID_ARGUMENT' &&
          error.message.includes(`CUDA source ${file} has a NUL byte at offset ${Buffer.byteLength(KERNELS)}`));
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('an extern "C++" template kernel is reached through its name expression, under the declared name', async () => {
    const spec = { source: { text: TEMPLATE }, entries: { iota: { expression: 'write_index_u32<unsigned int>' } } };
    assert.deepStrictEqual(await runIota(spec, 'iota'), IOTA);
    // Only declared entries exist; the mangled symbol is not an entry name.
    await assert.rejects(runIota(spec, '_Z15write_index_u32IjEvPT_j'), (error) =>
      error.code === 'NOT_FOUND' && /_Z15write_index_u32IjEvPT_j/.test(error.message));
  });

  it('typed entries apply to compiled source: an int64 and a double run, a mismatch names the parameter', async () => {
    // NVRTC has no standard headers: long long is the int64_t of kernels.cu.
    const source = `extern "C" __global__ void scale_offset_f64(const double* x, long long n, double a, double* y) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + (double)i;
}
`;
    const build = (instance, entries) => new halrt.ModuleBuilder('s')
      .executable('t', { cuda: { source: { text: source }, entries } })
      .function('main', (f) => f.input('x', 'f64', [5]).output('y', 'f64', [5])
        .dispatch('t.scale_offset_f64', { workgroups: [1], workgroupSize: [32], bindings: ['x', 'y'], constants: [5, 0.5] }))
      .build(instance);
    const instance = new halrt.Instance();
    const device = instance.createDevice('cuda');
    const hal = new halrt.HalModule(instance, device);
    const module = build(instance, { scale_offset_f64: ['buffer', 'i64', 'f64', 'buffer'] });
    const context = new halrt.Context(instance, [hal, module]);
    const fn = context.lookupFunction('s.main');
    const x = device.tensor(Float64Array.of(2, 4, 6, 8, 10), [5]);
    const wrong = build(instance, { scale_offset_f64: ['buffer', 'i64', 'f32', 'buffer'] });
    try {
      const [y] = await fn.invoke([x]);
      assert.deepStrictEqual(Array.from(await y.read()), [1, 3, 5, 7, 9]);
      y.close();
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, wrong]), 'INVALID_ARGUMENT',
        "kernel 'scale_offset_f64'", "parameter 2 is declared 'f32'");
    } finally {
      closeAll(x, fn, context, module, wrong, hal, device, instance);
    }
  });

  it('a lowered kernel the module cannot find is NOT_FOUND naming the declared entry and the symbol', async function () {
    // Only the test double lacks kernels it has no implementation for.
    if (!/libfakecuda/.test(process.env.HALRT_CUDA_LIBRARY ?? '')) this.skip();
    await assert.rejects(runIota({ source: { text: TEMPLATE }, entries: { iota: { expression: 'write_index_u32<float>' } } }, 'iota'),
      (error) => error.code === 'NOT_FOUND' && /entry 'iota': kernel '_Z15write_index_u32IfEvPT_j'/.test(error.message));
  });

  it('a name expression that names nothing is INVALID_ARGUMENT with the compile log', async () => {
    await assert.rejects(runIota({ source: { text: TEMPLATE }, entries: { iota: { expression: 'no_such<int>' } } }, 'iota'),
      (error) => error.code === 'INVALID_ARGUMENT' && /executables\.t/.test(error.message) &&
        /identifier "no_such" is undefined/.test(error.message));
  });

  it('a compile error is INVALID_ARGUMENT at Context creation with the full log (file, line, message)', () => {
    const instance = new halrt.Instance();
    const device = instance.createDevice('cuda');
    const hal = new halrt.HalModule(instance, device);
    const broken = '// line 1\nextern "C" __global__ void write_index_u32(unsigned* out, unsigned n) {\n  out[0] = n + undefined_name;\n}\n';
    const module = new halrt.ModuleBuilder('bad').executable('t', { cuda: { source: { text: broken } } })
      .function('f', (f) => f.output('y', 'u8', [1]).fill('y', 1)).build(instance);
    try {
      assertThrowsHalrt(() => new halrt.Context(instance, [hal, module]), 'INVALID_ARGUMENT',
        "linking module 'bad'", 'executables.t', `compiling t.cu with NVRTC ${nvrtc.version}`,
        'NVRTC_ERROR_COMPILATION', 't.cu(3): error: identifier "undefined_name" is undefined',
        '1 error detected in the compilation of "t.cu"');
    } finally {
      closeAll(module, hal, device, instance);
    }
  });

  it('--gpu-architecture / -arch in options is INVALID_ARGUMENT naming the option', async () => {
    await assert.rejects(runIota({ source: { text: KERNELS }, options: ['-DWITH_INDEX=1', '-arch=sm_80'] }),
      (error) => error.code === 'INVALID_ARGUMENT' && /options\[1\] '-arch=sm_80'/.test(error.message));
  });

  it('the first load writes a cache entry; a second process uses it without rewriting it', () => {
    const folder = tempFolder('hit');
    try {
      const script = `return run({ source: { text: ${JSON.stringify(TEMPLATE)} },
        entries: { iota: { expression: 'write_index_u32<unsigned int>' } } }, 'iota');`;
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: folder }), IOTA);
      const first = entries(folder);
      assert.strictEqual(first.length, 1);
      assert.match(first[0].name, /^[0-9a-f]{16}\.kernel$/);
      assert.strictEqual(fs.statSync(folder).mode & 0o777, 0o700);
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: folder }), IOTA);
      assert.deepStrictEqual(entries(folder), first, 'a hit leaves the entry as it was (a compile replaces it)');
      // Another option is another key: a second entry.
      const other = `return run({ source: { text: ${JSON.stringify(KERNELS)} }, options: ['-DWITH_INDEX=1'] });`;
      assert.deepStrictEqual(child(other, { HALRT_CACHE_DIR: folder }), IOTA);
      assert.strictEqual(entries(folder).length, 2);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  it('a corrupt cache entry is a miss: the source is compiled again and the entry rewritten', () => {
    const folder = tempFolder('corrupt');
    try {
      const script = `return run({ source: { text: ${JSON.stringify(TEMPLATE)} },
        entries: { iota: { expression: 'write_index_u32<unsigned int>' } } }, 'iota');`;
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: folder }), IOTA);
      const [entry] = entries(folder);
      const file = path.join(folder, entry.name);
      const bytes = fs.readFileSync(file);
      bytes[bytes.length - 100] ^= 0xff;
      fs.writeFileSync(file, bytes);
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: folder }), IOTA);
      const [rewritten] = entries(folder);
      assert.strictEqual(rewritten.name, entry.name);
      assert.notStrictEqual(rewritten.ino, entry.ino, 'the entry was replaced');
      assert.strictEqual(rewritten.size, entry.size);
      bytes[bytes.length - 100] ^= 0xff;
      assert.ok(fs.readFileSync(file).equals(bytes), 'the rewritten entry is the original one');
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });

  // write_index_u32 including "helper.cuh", which must define HELPER_OK; a
  // helper.cuh that says #error is the wrong one (or a stale one).
  const INCLUDING = '#include "helper.cuh"\n#ifndef HELPER_OK\n#error helper.cuh is not the one next to the source\n#endif\n' +
    'extern "C" __global__ void write_index_u32(unsigned* out, unsigned n) {\n' +
    '  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = i;\n}\n';
  const WRONG = '#error the current folder was searched\n';

  it('#include "x" resolves next to the source file, never in the current folder', () => {
    const folder = tempFolder('inc');
    const elsewhere = tempFolder('cwd');
    try {
      fs.mkdirSync(path.join(folder, 'sub'));
      fs.writeFileSync(path.join(folder, 'k.cu'), INCLUDING.replace('"helper.cuh"', '"sub/helper.cuh"'));
      // A header's own quoted includes resolve next to it, as with nvcc.
      fs.writeFileSync(path.join(folder, 'sub', 'helper.cuh'), '#include "inner.cuh"\n');
      fs.writeFileSync(path.join(folder, 'sub', 'inner.cuh'), '#define HELPER_OK 1\n');
      fs.mkdirSync(path.join(elsewhere, 'sub'));
      fs.writeFileSync(path.join(elsewhere, 'sub', 'helper.cuh'), WRONG);
      fs.writeFileSync(path.join(elsewhere, 'inner.cuh'), WRONG);
      const script = `return run({ source: ${JSON.stringify(path.join(folder, 'k.cu'))} });`;
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: path.join(folder, 'cache') }, 60000, elsewhere), IOTA);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('an inline source finds no header in the current folder unless options say -I.', () => {
    const elsewhere = tempFolder('cwd');
    try {
      fs.writeFileSync(path.join(elsewhere, 'helper.cuh'), '#define HELPER_OK 1\n');
      const env = { HALRT_CACHE_DIR: path.join(elsewhere, 'cache') };
      const refused = child(`return run({ source: { text: ${JSON.stringify(INCLUDING)} } });`, env, 60000, elsewhere);
      assert.strictEqual(refused.code, 'INVALID_ARGUMENT');
      assert.match(refused.message, /t\.cu\(1\): catastrophic error: could not open source file "helper\.cuh"/);
      assert.deepStrictEqual(child(`return run({ source: { text: ${JSON.stringify(INCLUDING)} }, options: ['-I.'] });`, env, 60000, elsewhere), IOTA);
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('the kernel cache key covers every header read: an edited header is compiled again, never served stale', () => {
    const folder = tempFolder('stale');
    const include = tempFolder('incdir');
    try {
      fs.writeFileSync(path.join(folder, 'k.cu'), INCLUDING.replace('"helper.cuh"', '<lib.cuh>\n#include "helper.cuh"'));
      fs.writeFileSync(path.join(folder, 'helper.cuh'), '#define HELPER_OK 1\n');
      fs.writeFileSync(path.join(include, 'lib.cuh'), '// a library header\n');
      const env = { HALRT_CACHE_DIR: path.join(folder, 'cache') };
      const script = `return run({ source: ${JSON.stringify(path.join(folder, 'k.cu'))}, options: ['-I', ${JSON.stringify(include)}] });`;
      assert.deepStrictEqual(child(script, env), IOTA);
      assert.strictEqual(entries(env.HALRT_CACHE_DIR).length, 1);
      assert.deepStrictEqual(child(script, env), IOTA, 'a hit');
      assert.strictEqual(entries(env.HALRT_CACHE_DIR).length, 1);
      // Edited headers (next to the source, and in a -I folder) are new keys.
      for (const header of [path.join(folder, 'helper.cuh'), path.join(include, 'lib.cuh')]) {
        const text = fs.readFileSync(header, 'utf8');
        fs.writeFileSync(header, '#error edited\n');
        const edited = child(script, env);
        assert.strictEqual(edited.code, 'INVALID_ARGUMENT', `${header} edited: compiled again`);
        assert.match(edited.message, /#error directive: edited|error: edited|edited/);
        fs.writeFileSync(header, text);
        assert.deepStrictEqual(child(script, env), IOTA);
      }
      assert.strictEqual(entries(env.HALRT_CACHE_DIR).length, 1, 'restored headers hit the first entry');
      // An include the scan cannot follow (a macro) is never cached.
      const macro = '#define HEADER "helper.cuh"\n#include HEADER\n' + INCLUDING.replace('#include "helper.cuh"\n', '');
      fs.writeFileSync(path.join(folder, 'm.cu'), macro);
      assert.deepStrictEqual(child(`return run({ source: ${JSON.stringify(path.join(folder, 'm.cu'))} });`, env), IOTA);
      assert.strictEqual(entries(env.HALRT_CACHE_DIR).length, 1, 'no entry for a source whose includes cannot be followed');
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
      fs.rmSync(include, { recursive: true, force: true });
    }
  });

  it('a cache folder that cannot be created does not stop the compile', () => {
    const script = `return run({ source: { text: ${JSON.stringify(KERNELS)} }, options: ['-DWITH_INDEX=1'] });`;
    assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: '/dev/null/halrt-cache' }), IOTA);
  });

  it('HALRT_NVRTC_LIBRARY=/nonexistent: a source executable is UNAVAILABLE naming it, even with a cache entry', () => {
    const folder = tempFolder('nolib');
    try {
      const script = `return run({ source: { text: ${JSON.stringify(KERNELS)} }, options: ['-DWITH_INDEX=1'] });`;
      assert.deepStrictEqual(child(script, { HALRT_CACHE_DIR: folder }), IOTA);
      const report = child(script, { HALRT_CACHE_DIR: folder, HALRT_NVRTC_LIBRARY: '/nonexistent/libnvrtc.so' });
      assert.strictEqual(report.code, 'UNAVAILABLE');
      assert.match(report.message, /executables\.t: NVRTC is not usable \(tried HALRT_NVRTC_LIBRARY=\/nonexistent\/libnvrtc\.so\)/);
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  });
});

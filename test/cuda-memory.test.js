'use strict';
// The CUDA device's memory never makes the JavaScript thread wait for the
// GPU (docs/cuda.md, "Memory and commands"): while a kernel keeps the GPU
// busy for seconds, closing or collecting tensors, making tensors from data
// or empty ones, closing a context (its kernels are unloaded), and the
// synchronous part of invoke() all return at once,
// and every result is right once the GPU is done. Run with the driver's
// memory pool and, on the driver test double, with the caching allocator
// that stands in where the driver has no pools (FAKECUDA_NO_MEMORY_POOLS=1).
//
// Runs where halrt.drivers() reports cuda as available (a GPU, or the test
// double through test/run-cuda.js); skipped elsewhere with the reason.
const assert = require('assert');
const { spawnSync } = require('child_process');
const halrt = require('..');
const { BUILTIN, SLEEP_PTX, closeAll, cudaDriver } = require('./helpers');

const cuda = cudaDriver();
const FAKE = /libfakecuda/.test(process.env.HALRT_CUDA_LIBRARY ?? '');
const title = cuda.available
  ? `CUDA memory never blocks the JS thread (${FAKE ? 'driver test double' : 'CUDA driver'})`
  : `CUDA memory never blocks the JS thread (skipped: ${cuda.reason})`;

const BUSY_MS = 3000;
// Each call must return well within this (a bound loose enough for a
// sanitizer build on a loaded machine); on the old code they waited for the
// whole BUSY_MS.
const BOUND_MS = 500;
const N = 4096;

function program() {
  const instance = new halrt.Instance();
  const device = instance.createDevice('cuda');
  const builder = new halrt.ModuleBuilder('m')
    .executable('k', BUILTIN)
    .executable('s', { cuda: { ptx: { text: SLEEP_PTX } } })
    .function('slow', (f) => f
      .input('a', 'f32', [N]).output('out', 'f32', [N])
      .dispatch('s.sleep_ms', { workgroups: [1], workgroupSize: [1], bindings: ['out'], constants: [BUSY_MS] })
      .dispatch('k.add_f32', { workgroups: [4], bindings: ['a', 'a', 'out'], constants: [N] }))
    .function('double', (f) => f
      .input('a', 'f32', [N]).output('out', 'f32', [N])
      .dispatch('k.add_f32', { workgroups: [4], bindings: ['a', 'a', 'out'], constants: [N] }));
  const hal = new halrt.HalModule(instance, device);
  const module = builder.build(instance);
  const context = new halrt.Context(instance, [hal, module]);
  // Loads (cuModuleLoadDataEx), then fails the declared check: its module
  // is unloaded again.
  const mismatched = new halrt.ModuleBuilder('bad')
    .executable('s', { cuda: { ptx: { text: SLEEP_PTX }, entries: { sleep_ms: ['buffer', 'f64'] } } })
    .build(instance);
  return {
    device,
    lookup: (name) => context.lookupFunction(`m.${name}`),
    // Another context of the same module: its own executables.
    context: () => new halrt.Context(instance, [hal, module]),
    failingContext: () => assert.throws(() => new halrt.Context(instance, [hal, mismatched]),
      (error) => error.code === 'INVALID_ARGUMENT' && /parameter 1 is declared 'f64'/.test(error.message)),
    close: () => closeAll(context, module, mismatched, hal, device, instance),
  };
}

/** Runs `fn` and returns [its result, the milliseconds it took]. */
function timed(fn) {
  const start = process.hrtime.bigint();
  const result = fn();
  return [result, Number(process.hrtime.bigint() - start) / 1e6];
}

/** Two full collections, letting finalizers run; resolves with the milliseconds taken. */
async function collect() {
  const start = process.hrtime.bigint();
  for (let i = 0; i < 2; ++i) {
    global.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const values = (seed) => Float32Array.from({ length: N }, (_, i) => seed * 1000 + i);
const doubled = (array) => array.map((v) => v + v);

async function checkNoStall() {
  const p = program();
  const slow = p.lookup('slow');
  const double = p.lookup('double');
  const keep = [];
  try {
    // Warm up: the first launch of each kernel and the first upload.
    const a = p.device.tensor(values(1), [N], 'f32');
    keep.push(a);
    const [warm] = await double.invoke([a]);
    assert.deepStrictEqual(await warm.read(), doubled(values(1)));
    // What a collection takes here anyway, GPU or not (the least of two).
    const collectMs = Math.min(await collect(), await collect());
    const toClose = p.device.tensor(values(2), [N], 'f32');
    const other = p.context();
    let toCollect = p.device.tensor(values(3), [N], 'f32');
    // The GPU is busy from here for BUSY_MS.
    let settled = false;
    const started = Date.now();
    const [busy, invokeMs] = timed(() => slow.invoke([a]));
    busy.then(() => { settled = true; }, () => { settled = true; });
    const times = { 'invoke() while the GPU is busy': invokeMs };
    [, times['close() of a tensor whose upload and memory are on the stream']] = timed(() => warm.close());
    [, times['close() of a tensor']] = timed(() => toClose.close());
    [, times['close() of another Context (its executables are released)']] = timed(() => other.close());
    [, times['new Context whose executable fails its check after loading']] = timed(() => p.failingContext());
    const uploads = [];
    for (let i = 0; i < 8; ++i) {
      // Each upload's staging must outlive its copy: distinct data each.
      const [tensor, ms] = timed(() => p.device.tensor(values(10 + i), [N], 'f32'));
      uploads.push(tensor);
      times[`device.tensor(data) #${i}`] = ms;
    }
    keep.push(...uploads);
    const [empty, emptyMs] = timed(() => p.device.empty([N], 'f32'));
    keep.push(empty);
    times['device.empty()'] = emptyMs;
    const [second, secondMs] = timed(() => double.invoke([uploads[0]]));
    times['invoke() queued behind the busy one'] = secondMs;
    toCollect = null;
    // Beyond what a collection takes anyway.
    times['gc() of a dropped tensor, and its finalizer'] = (await collect()) - collectMs;
    for (const [what, ms] of Object.entries(times)) {
      assert.ok(ms < BOUND_MS, `${what} took ${ms.toFixed(1)} ms on the JS thread while the GPU was busy (bound ${BOUND_MS} ms)`);
    }
    // All of that happened while the GPU was still busy.
    assert.strictEqual(settled, false, `the busy invocation ended after ${Date.now() - started} ms: the check proves nothing`);
    // Then every result is right.
    const [out] = await busy;
    keep.push(out);
    assert.ok(Date.now() - started >= BUSY_MS - 5, 'the busy invocation took its time');
    assert.deepStrictEqual(await out.read(), doubled(values(1)));
    for (let i = 0; i < uploads.length; ++i) {
      assert.deepStrictEqual(await uploads[i].read(), values(10 + i), `upload #${i}`);
    }
    assert.deepStrictEqual(await empty.read(), new Float32Array(N));
    const [secondOut] = await second;
    keep.push(secondOut);
    assert.deepStrictEqual(await secondOut.read(), doubled(values(10)));
    assert.strictEqual(toCollect, null);
  } finally {
    closeAll(keep, slow, double);
    p.close();
  }
}

// Two devices on one GPU share its context, and cuMemFree, cuMemFreeHost
// and cuModuleUnload wait for all of its work: a device whose last
// reference drops while another device keeps the GPU busy finishes on its
// own thread, and close() returns at once.
async function checkCloseBesideBusyDevice() {
  const p = program();
  const slow = p.lookup('slow');
  const instance = new halrt.Instance();
  let other = instance.createDevice('cuda');
  const keep = [];
  try {
    const a = p.device.tensor(values(1), [N], 'f32');
    keep.push(a);
    // The other device has staging, cached memory and a module to unload.
    const otherHal = new halrt.HalModule(instance, other);
    const otherModule = new halrt.ModuleBuilder('o')
      .executable('k', BUILTIN)
      .function('double', (f) => f
        .input('a', 'f32', [N]).output('out', 'f32', [N])
        .dispatch('k.add_f32', { workgroups: [4], bindings: ['a', 'a', 'out'], constants: [N] }))
      .build(instance);
    const otherContext = new halrt.Context(instance, [otherHal, otherModule]);
    const double = otherContext.lookupFunction('o.double');
    const input = other.tensor(values(2), [N], 'f32');
    const [out] = await double.invoke([input]);
    assert.deepStrictEqual(await out.read(), doubled(values(2)));
    closeAll(out, double, otherContext, otherModule, otherHal);
    // The GPU is busy from here for BUSY_MS; the other device's upload is
    // still on its stream when its last reference drops.
    let settled = false;
    const busy = slow.invoke([a]);
    busy.then(() => { settled = true; }, () => { settled = true; });
    const late = other.tensor(values(3), [N], 'f32');
    const devices = halrt.liveObjects().device;
    const started = Date.now();
    const [, closeMs] = timed(() => closeAll(late, input, other));
    other = null;
    assert.ok(closeMs < BOUND_MS, `closing the last reference to a device took ${closeMs.toFixed(1)} ms while another device kept the GPU busy (bound ${BOUND_MS} ms)`);
    assert.strictEqual(settled, false, `the busy invocation ended after ${Date.now() - started} ms: the check proves nothing`);
    const [result] = await busy;
    keep.push(result);
    assert.deepStrictEqual(await result.read(), doubled(values(1)));
    // The closed device's thread frees it once the GPU lets it.
    while (halrt.liveObjects().device !== devices - 1 && Date.now() - started < 10000) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.strictEqual(halrt.liveObjects().device, devices - 1, 'the closed device is freed');
  } finally {
    closeAll(keep, slow);
    if (other) other.close();
    instance.close();
    p.close();
  }
}

// Runs check `name` of this file in a new process (with this environment):
// there the closed device is the only one being freed, so its count says
// when it is, whatever earlier tests' devices are still finishing here.
function inFreshProcess(name) {
  const script = `require(${JSON.stringify(__filename)}).${name}().then(() => process.stdout.write('done'))`;
  const result = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60000 });
  assert.strictEqual(result.signal, null, `killed (${result.signal}): ${result.stderr}`);
  assert.strictEqual(result.status, 0, result.stderr);
  assert.strictEqual(result.stdout, 'done');
}

module.exports = { checkCloseBesideBusyDevice };

// Loaded by inFreshProcess outside mocha: the checks alone.
if (typeof describe === 'function') describe(title, function () {
  this.timeout(30000);
  before(function () {
    if (!cuda.available) this.skip();
  });

  it("with the driver's memory pool: close, GC, tensor(data), empty() and invoke() return at once while a kernel runs", async () => {
    await checkNoStall();
  });

  it('closing a device while another device on the GPU is busy returns at once', () => {
    inFreshProcess('checkCloseBesideBusyDevice');
  });

  it('with the caching allocator (a driver without pools): the same', async function () {
    if (!FAKE) this.skip(); // a real driver cannot be told to hide its pools
    process.env.FAKECUDA_NO_MEMORY_POOLS = '1';
    try {
      await checkNoStall();
      inFreshProcess('checkCloseBesideBusyDevice');
    } finally {
      delete process.env.FAKECUDA_NO_MEMORY_POOLS;
    }
  });
});

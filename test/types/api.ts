// Compile-only checks of index.d.ts: every export used as documented, and
// misuse rejected (each `@ts-expect-error` must be an error).
import * as halrt from 'halrt';
import {
  BufferView,
  ChromeTrace,
  Context,
  DebugSink,
  Device,
  DeviceInfo,
  DriverInfo,
  DType,
  ExecutableKinds,
  FlightRecorder,
  FunctionBuilder,
  FunctionSignature,
  HalModule,
  HalModuleOptions,
  HalrtError,
  Instance,
  InvocationEvent,
  InvokeOptions,
  LiveObjects,
  Module,
  ModuleBuilder,
  ModuleDescription,
  NativeSink,
  NpySink,
  ObjectSink,
  Op,
  Sink,
  Sinks,
  StatsCallback,
  StatsSink,
  StatusCode,
  StdioSink,
  TeeSink,
  TensorSignature,
  TensorStats,
  TimingEvent,
  TraceInfo,
  TraceTensor,
  TensorSummary,
  HealthSummary,
  TraceMode,
  TypedArrayOf,
  ValueDescription,
  ConstantDescription,
} from 'halrt';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(_value?: T): void {}

const list: DriverInfo[] = halrt.drivers();
const first: DriverInfo | undefined = list[0];
if (first) {
  const name: string = first.name;
  const available: boolean = first.available;
  const reason: string | null = first.reason;
  void [name, available, reason];
  if (first.nvrtc) {
    const compiler: { available: boolean; version: string | null; reason: string | null } = first.nvrtc;
    void compiler;
  }
}
const sourceKinds: ExecutableKinds = {
  cuda: {
    source: { text: 'extern "C" __global__ void k(float* x) {}' },
    options: ['-DN=4'],
    entries: { k: ['buffer'], t: { expression: 't<int>' } },
  },
};
void sourceKinds;
// @ts-expect-error options are strings
const badOptions: ExecutableKinds = { cuda: { source: 'k.cu', options: [4] } };
void badOptions;

const dtypes: readonly DType[] = halrt.dtypes;
// @ts-expect-error dtypes is read-only
halrt.dtypes.push('f32');

const live: LiveObjects = halrt.liveObjects();
const counts: number[] = [
  live.instance,
  live.device,
  live.buffer,
  live.bufferView,
  live.executable,
  live.commandBuffer,
  live.semaphore,
  live.submission,
  live.module,
  live.context,
  live.invocation,
];

async function main(): Promise<void> {
  const instance = new Instance();
  const device: Device = instance.createDevice('local-task?workers=2');
  const auto: Device = instance.createDevice();
  const info: DeviceInfo = device.info;
  const driver: string = info.driver;
  const kind: 'local' | 'cuda' = info.kind;
  const capability: readonly [number, number] | null = info.computeCapability;
  const numbers: number[] = [
    info.ordinal,
    info.workerCount,
    info.totalMemory,
    info.multiprocessorCount,
    info.driverVersion,
  ];
  const strings: string[] = [info.name, info.uri];
  void [driver, kind, capability, numbers, strings];
  // @ts-expect-error info is read-only
  device.info = info;

  // Inferred dtypes.
  const a = device.tensor(Float32Array.from([1, 2, 3, 4]), [2, 2]);
  assertType<Equal<typeof a, BufferView<'f32'>>>();
  const b = device.tensor(new BigInt64Array([1n, 2n]), [2]);
  assertType<Equal<typeof b, BufferView<'i64'>>>();
  const c = device.tensor(new Uint8ClampedArray(3), [3]);
  assertType<Equal<typeof c, BufferView<'u8'>>>();
  const d = device.tensor(Buffer.from([1, 2]), [2]);
  assertType<Equal<typeof d, BufferView<'u8'>>>();

  // Explicit dtypes.
  const half = device.tensor(new Uint16Array([0x3c00]), [], 'f16');
  assertType<Equal<typeof half, BufferView<'f16'>>>();
  const flags = device.tensor(new Uint8Array([0, 1]), [2], 'bool');
  const big = device.tensor(new BigUint64Array([3n]), [1], 'u64');
  const clamped = device.tensor(new Uint8ClampedArray(2), [2], 'u8');
  // Host data: nested Arrays (shape inferred), conversions, bytes.
  const nested: BufferView<'f32'> = device.tensor([[1, 2], [3, 4]]);
  const flags2: BufferView<'bool'> = device.tensor([true, false]);
  const bigs: BufferView<'i64'> = device.tensor([1n, 2n], [2]);
  const halves: BufferView<'f16'> = device.tensor([0.5, 1.5], null, 'f16');
  const converted: BufferView<'i32'> = device.tensor(new Float64Array(2), [2], 'i32');
  const bytes: BufferView<'f32'> = device.tensor(new ArrayBuffer(8), [2], 'f32');
  const nestedRead: Float32Array = await nested.read();
  void [flags2, bigs, halves, converted, bytes, nestedRead];
  const h16: Uint16Array = halrt.toF16Bits([1, 2]);
  const h1: number = halrt.toBF16Bits(1);
  const back: Float32Array = halrt.fromF16Bits(h16);
  const b1: number = halrt.fromBF16Bits(0x3f80);
  void [h1, back, b1];
  // format: the data of a view with the view itself as options.
  const text: string = halrt.format(await a.read(), a);
  const halfText: string = halrt.format(await half.read(), { dtype: 'f16', shape: [], maxElements: 4 });
  // @ts-expect-error the data must be the dtype's array
  halrt.format(new Float32Array(1), { dtype: 'i32', shape: [1] });
  const numberTexts: string[] = [halrt.formatNumber(0.5, 'f16'), halrt.formatNumber(2n ** 63n, 'u64'), halrt.formatNumber(true, 'bool')];
  // @ts-expect-error a float dtype takes numbers only
  halrt.formatNumber(1n, 'f32');
  void [text, halfText, numberTexts];
  const zeros = device.empty([2, 3], 'i32');
  assertType<Equal<typeof zeros, BufferView<'i32'>>>();

  const f32: Float32Array = await a.read();
  const i64: BigInt64Array = await b.read();
  const bits: Uint16Array = await half.read();
  const bools: Uint8Array = await flags.read();
  const u64: BigUint64Array = await big.read();
  const i32: Int32Array = await zeros.read();
  assertType<Equal<TypedArrayOf<'bf16'>, Uint16Array>>();
  void [f32, i64, bits, bools, u64, i32];

  const shape: number[] = a.shape;
  const dtype: 'f32' = a.dtype;
  const byteLength: number = a.byteLength;
  const rank: number = a.rank;
  void [shape, dtype, byteLength, rank];

  const any: BufferView = a;
  const anyData: TypedArrayOf<DType> = await any.read();
  void anyData;
  const copied: Promise<void> = device.copy(a, device.empty([4], 'f32'));
  await copied;

  {
    using scoped = instance.createDevice('local-sync');
    using view = scoped.tensor(new Int8Array(2), [2]);
    void view;
  }

  try {
    instance.createDevice('nope');
  } catch (error) {
    if (error instanceof HalrtError) {
      const code: StatusCode | (string & {}) = error.code;
      const name: 'HalrtError' = error.name;
      const message: string = error.message;
      void [code, name, message];
    }
  }
  const made = new HalrtError('boom', 'INTERNAL', { cause: new Error('inner') });
  const asError: Error = made;
  void asError;

  // @ts-expect-error unknown dtype literal
  device.empty([2], 'f33');
  // @ts-expect-error data is a TypedArray, Arrays of numbers, BigInts or booleans, or bytes
  device.tensor(['1', '2'], [2]);
  // @ts-expect-error a nested Array's elements are numbers, BigInts or booleans
  device.tensor([[{}]]);
  // @ts-expect-error a TypedArray needs a shape
  device.tensor(new Float32Array(2));
  // @ts-expect-error shape must be an array of numbers
  device.tensor(new Float32Array(2), 2);
  // @ts-expect-error shape elements are numbers
  device.empty(['2'], 'f32');
  // @ts-expect-error the URI is a string
  instance.createDevice(1);
  // @ts-expect-error Device is not constructible
  new Device();
  // @ts-expect-error BufferView is not constructible
  new BufferView();
  // @ts-expect-error copy takes BufferViews
  await device.copy(a, {});
  // @ts-expect-error a read() of an f32 view is a Float32Array
  const wrong: Int32Array = await a.read();
  void wrong;
  // @ts-expect-error shape is read-only
  a.shape = [1];

  for (const view of [a, b, c, d, half, flags, big, clamped, zeros]) view.close();
  device.close();
  auto.close();
  instance[Symbol.dispose]();
}

// Modules, contexts, functions and the debug sink.
async function programs(): Promise<void> {
  const instance = new Instance();
  const device = instance.createDevice('local-sync');

  const sink: DebugSink = (key, tensors, info) => {
    const k: string = key;
    const sequence: number = info.sequence;
    const fn: string = info.function;
    const op: number = info.op;
    const dropped: number = info.dropped;
    const timeNs: number = info.timeNs;
    void timeNs;
    const mode: 'full' | 'summary' | 'health' = info.mode;
    void mode;
    for (const tensor of tensors) {
      const name: string = tensor.name;
      const shape: number[] = tensor.shape;
      const dtype: DType = tensor.dtype;
      // @ts-expect-error a summary trace's tensors have no data
      const unchecked: Float32Array | BigInt64Array = tensor.data;
      void unchecked;
      if (tensor.summary !== undefined) {
        const summary: TensorSummary = tensor.summary;
        const counts: number[] = [summary.count, summary.nanCount, summary.posInfCount, summary.negInfCount];
        // @ts-expect-error min is only in 'summary' mode
        const notNarrowedMin: number = summary.min;
        if (summary.mode === 'summary') {
          const figures: number[] = [summary.zeroCount, summary.min, summary.max, summary.mean, summary.l2];
          void figures;
        } else {
          const health: HealthSummary = summary;
          void health;
        }
        void [counts, notNarrowedMin];
        continue;
      }
      if (tensor.dtype === 'f32') {
        const data: Float32Array = tensor.data;
        void data;
      } else if (tensor.dtype === 'i64') {
        const data: BigInt64Array = tensor.data;
        void data;
      } else if (tensor.dtype === 'bool') {
        const data: Uint8Array = tensor.data;
        void data;
      }
      // @ts-expect-error data is not known to be a Float32Array before narrowing
      const notNarrowed: Float32Array = tensor.data;
      void [name, shape, dtype, notNarrowed];
    }
    void [k, sequence, fn, op, dropped];
  };
  const options: HalModuleOptions = {
    debugSink: sink, traceDispatches: true, maxTraceBytes: 1 << 20, tracePolicy: 'drop', traceMode: 'health',
  };
  // @ts-expect-error traceMode is 'full', 'summary' or 'health'
  new HalModule(instance, device, { traceMode: 'stats' });
  const hal = new HalModule(instance, device, options);
  const plain = new HalModule(instance, device);
  const withNull = new HalModule(instance, device, { debugSink: null, tracePolicy: 'wait', traceData: 'borrowed' });
  const halName: 'hal' = hal.name;
  const halDevice: Device = hal.device;
  const halSink: Sink | null = hal.debugSink;
  const traced: boolean | halrt.TraceDispatchesFilter = hal.traceDispatches;
  const profiled: boolean = hal.profile;
  const traceMode: TraceMode = hal.traceMode;
  void [halName, halDevice, halSink, traced, profiled, traceMode];
  // @ts-expect-error debugSink is any Sink, not only a function
  const notOnlyFunction: DebugSink | null = hal.debugSink;
  void notOnlyFunction;
  // A sink may be written inline; its parameters are inferred.
  const inline = new HalModule(instance, device, {
    debugSink: (key, tensors, info) => {
      const first: TraceTensor | undefined = tensors[0];
      const info2: TraceInfo = info;
      // A traced tensor formats with itself as options.
      const firstText: string | undefined = first && first.data && halrt.format(first.data, first);
      void [key.length, first, info2, firstText];
    },
  });

  const kinds: ExecutableKinds = { local: { builtin: true }, cuda: { ptx: { text: '.version 7.0' } } };
  const builder = new ModuleBuilder('mlp')
    .executable('k', kinds)
    .executable('lib', { local: { library: 'k.so' }, cuda: { fatbin: 'k.fatbin' } })
    .constant('bias', 'f32', [16], new Float32Array(16))
    .constant('table', 'i32', [2, 2], [[1, 2], [3, 4]])
    .executable('typed', {
      cuda: { ptx: 'k.ptx', entries: { scale: ['buffer', 'i64', 'f64', 'buffer'], add: { params: ['buffer', 'u32'] }, any: {} } },
    })
    .function('main', (f: FunctionBuilder) =>
      f
        .input('x', 'f32', [4, 8])
        .input('w', 'f32', [8, 16])
        .output('y', 'f32', [4, 16])
        .local('t', 'f32', [4, 16])
        .local('flag', 'bool', [1])
        .dispatch('k.matmul_f32', { workgroups: [1, 1, 1], bindings: ['x', 'w', 't'], constants: [4, 8, 16] })
        .dispatch('k.axpy_f32', { workgroups: [2], bindings: ['t', 't', 'y'], constants: [64, { f32: 0.5 }], workgroupSize: [64] })
        .dispatch('typed.scale', { workgroups: [4], bindings: ['x', 'y'], constants: ['-9223372036854775808', 0.5] })
        .fill('flag', true)
        .fill('t', 0.25)
        .copy('t', 'y')
        .barrier()
        .trace('after', ['y', 't'])
        .trace('health', ['y'], { mode: 'health' }),
    );
  const description: ModuleDescription = builder.toObject();
  const format: 'halrt.module/1' = description.format;
  const weights: ConstantDescription = { dtype: 'f32', shape: [8, 16], file: 'w.bin', offset: 64 };
  const fromOnnx: ModuleDescription = halrt.onnx.convert('model.onnx', { shapes: { x: [1, 3, 48, 192] }, traceNodes: /Conv/ });
  void fromOnnx;
  description.constants = { ...description.constants, weights };
  // @ts-expect-error a constant needs its dtype
  const untyped: ConstantDescription = { shape: [1], data: [1] };
  void untyped;
  const firstOp: Op | undefined = description.functions['main']?.body[0];
  if (firstOp && firstOp.op === 'dispatch') {
    const kernel: `${string}.${string}` = firstOp.kernel;
    void kernel;
  }
  void format;
  const built: Module = builder.build(instance);
  const relative: Module = builder.build(instance, { baseDir: '/tmp' });
  const loaded: Module = Module.load(instance, 'mlp.halrt.json');
  const fromObject: Module = Module.fromObject(instance, {
    format: 'halrt.module/1',
    name: 'small',
    functions: {
      main: {
        inputs: [],
        outputs: [{ name: 'y', dtype: 'i32', shape: [2] }],
        body: [
          { op: 'fill', target: 'y', value: 3 },
          { op: 'trace', key: 'y', values: ['y'] },
          { op: 'trace', key: 'ys', values: ['y'], mode: 'summary' },
        ],
      },
    },
  });
  const fromJson: Module = Module.fromJson(instance, JSON.stringify(description), '/tmp');
  const noBase: Module = Module.fromJson(instance, '{}');
  const moduleName: string = built.name;
  const signatures: FunctionSignature[] = built.functions;
  const value: ValueDescription = { name: 'x', dtype: 'u8', shape: [1] };
  void [moduleName, signatures, value];

  const context = new Context(instance, [hal, built]);
  const linked: readonly (HalModule | halrt.HostModule | Module)[] = context.modules;
  const main: halrt.Function = context.lookupFunction('mlp.main');
  const fnName: string = main.name;
  const owner: Context = main.context;
  const inputs: TensorSignature[] = main.inputs;
  const outputs: TensorSignature[] = main.outputs;
  void [linked, fnName, owner, inputs, outputs];
  const x = device.tensor(new Float32Array(32), [4, 8]);
  const w = device.tensor(new Float32Array(128), [8, 16]);
  const result: BufferView[] = await main.invoke([x, w]);
  const fromHost: BufferView[] = await main.invoke([new Float32Array(32), [[1, 2], [3, 4]]]);
  const byName: BufferView[] = await main.invoke({ x, w: new Float32Array(128) });
  const namedOut: { [name: string]: BufferView } = await main.invoke({ x, w }, { named: true });
  const hostOut: halrt.HostArray[] = await main.invoke([x, w], { read: true });
  const namedHost: { [name: string]: halrt.HostArray } = await main.invoke([x, w], { named: true, read: true });
  void [fromHost, byName, namedOut, hostOut, namedHost];
  // An output's dtype is known at run time: read(dtype) asserts and types it.
  const out: BufferView = result[0]!;
  const anyRead = await out.read();
  assertType<Equal<typeof anyRead, halrt.HostArray>>();
  const first = (await out.read('f32'))[0];
  assertType<Equal<typeof first, number>>();
  const wide = await out.read('i64');
  assertType<Equal<typeof wide, BigInt64Array>>();
  const same: Float32Array = await x.read('f32');
  void same;
  // @ts-expect-error a view of known dtype cannot be read as another
  await x.read('i32');
  // @ts-expect-error read's dtype is a dtype name
  await out.read('float');
  const bare: halrt.Function = context.lookupFunction('main');
  const closedFlags: boolean[] = [bare.closed, context.closed, x.closed, device.closed, instance.closed];
  const count: number = x.numel + x.size;
  void [closedFlags, count];
  const oneLiner = await halrt.load('mlp.halrt.json', { device: 'local-sync', debugSink: (key) => void key, profile: true });
  const loadedOut: BufferView[] = await oneLiner.main(new Float32Array(32), [[1]]);
  const loadedNamed: BufferView[] = await oneLiner.main({ x, w });
  const loadedName: string = oneLiner.name;
  const loadedFn: halrt.Function | undefined = oneLiner.functions['main'];
  const nested: halrt.NestedArray<number> = await x.toArray();
  const wideView = device.tensor([[1n, 2n]]);
  const wideNested: halrt.NestedArray<bigint> = await wideView.toArray();
  // @ts-expect-error an i64 view's elements are BigInts
  const wrongNested: halrt.NestedArray<number> = await wideView.toArray();
  void [nested, wideNested, wrongNested];
  halrt.npy.write('x.npy', [[1, 2], [3, 4]], { dtype: 'f32' });
  const fromNpy: halrt.NpyArray = halrt.npy.read('x.npy');
  const npyShape: number[] = halrt.npy.read(new Uint8Array(0)).shape;
  // @ts-expect-error npy.write's dtype is a dtype name
  halrt.npy.write('x.npy', [1], { dtype: 'float' });
  void [fromNpy, npyShape];
  const loadedRead: { [name: string]: halrt.HostArray } = await oneLiner.main({ x, w }, { named: true, read: true });
  const loadedArrays: halrt.HostArray[] = await oneLiner.main({ x, w }, { read: true });
  const loadedWithOptions = await oneLiner.main(new Float32Array(32), [[1]], { read: true });
  void [loadedOut, loadedNamed, loadedName, loadedFn, loadedRead, loadedArrays, loadedWithOptions];
  oneLiner.close();
  // @ts-expect-error load's device is a URI string
  await halrt.load('mlp.halrt.json', { device: 1 });
  const compared: halrt.CompareResult = await halrt.compare('mlp.halrt.json', [new Float32Array(4)], { devices: ['local-sync', 'cuda'], ulps: 2 });
  const firstKernel: string | null | undefined = compared.first?.kernel;
  const maxUlps: number | null | undefined = compared.summary[0]?.maxUlps;
  void [compared.agree, firstKernel, maxUlps];
  // @ts-expect-error compare's devices are URI strings
  await halrt.compare('mlp.halrt.json', [], { devices: 'cuda' });
  const controller = new AbortController();
  const invokeOptions: InvokeOptions = { signal: controller.signal };
  const aborted: Promise<BufferView[]> = main.invoke([x, w], invokeOptions);
  controller.abort();
  await aborted.catch((error: unknown) => error instanceof HalrtError && error.code === 'CANCELLED');
  for (const view of result) view.close();
  {
    using scopedContext = new Context(instance, [plain, fromObject]);
    using scopedFunction = scopedContext.lookupFunction('small.main');
    void scopedFunction;
  }

  // @ts-expect-error debugSink must be a function
  new HalModule(instance, device, { debugSink: 5 });
  // @ts-expect-error tracePolicy is 'wait' or 'drop'
  new HalModule(instance, device, { tracePolicy: 'x' });
  // @ts-expect-error traceData is 'owned' or 'borrowed'
  new HalModule(instance, device, { traceData: 'lent' });
  // @ts-expect-error unknown option
  new HalModule(instance, device, { profiling: true });
  // @ts-expect-error maxTraceBytes is a number
  new HalModule(instance, device, { maxTraceBytes: '1MiB' });
  // @ts-expect-error the device comes second
  new HalModule(device, instance);
  // @ts-expect-error a sink's tensors are TraceTensor[]
  new HalModule(instance, device, { debugSink: (key: string, tensors: string[]) => void [key, tensors] });
  // @ts-expect-error name is read-only
  hal.name = 'hal';
  // @ts-expect-error Module is not constructible
  new Module();
  // @ts-expect-error Function is not constructible
  new halrt.Function();
  // @ts-expect-error HalrtFunction is the d.ts name only; halrt exports it as Function
  void halrt.HalrtFunction;
  // @ts-expect-error FunctionBuilder is a type, not a runtime export
  void halrt.FunctionBuilder;
  // @ts-expect-error the format string is fixed
  Module.fromObject(instance, { format: 'halrt.module/2', name: 'm', functions: {} });
  // @ts-expect-error ops are a closed set
  Module.fromObject(instance, { format: 'halrt.module/1', name: 'm', functions: { f: { inputs: [], outputs: [], body: [{ op: 'nop' }] } } });
  // @ts-expect-error Module.load takes a path string
  Module.load(instance, 5);
  builder.function('other', (f) => {
    // @ts-expect-error kernels are named 'executable.entry'
    f.dispatch('matmul_f32', { workgroups: [1], bindings: ['x'] });
    // @ts-expect-error at most 3 workgroup counts
    f.dispatch('k.relu_f32', { workgroups: [1, 1, 1, 1], bindings: ['x', 'y'] });
    // @ts-expect-error unknown dtype
    f.input('x', 'f8', [1]);
    // @ts-expect-error trace values are a list of names
    f.trace('key', 'x');
    // @ts-expect-error a trace's mode is 'full', 'summary' or 'health'
    f.trace('key', ['x'], { mode: 'stats' });
  });
  // @ts-expect-error executables take 'local' and/or 'cuda'
  builder.executable('k2', { metal: { builtin: true } });
  // @ts-expect-error a local executable is builtin or a library
  builder.executable('k3', { local: { ptx: 'k.ptx' } });
  // @ts-expect-error declared parameter types are buffer, u32, i32, f32, u64, i64, f64
  builder.executable('k4', { cuda: { ptx: 'k.ptx', entries: { e: ['f16'] } } });
  // @ts-expect-error modules are HalModule or Module objects
  new Context(instance, [hal, {}]);
  // @ts-expect-error modules are read-only
  context.modules.push(hal);
  // @ts-expect-error lookupFunction takes a string
  context.lookupFunction(1);
  // @ts-expect-error inputs are BufferViews or host data
  await main.invoke(['x']);
  // @ts-expect-error named inputs are BufferViews or host data
  await main.invoke({ x: 'x' });
  // @ts-expect-error named outputs are an object, not an Array
  const notArray: BufferView[] = await main.invoke([x, w], { named: true });
  void notArray;
  // @ts-expect-error read is a boolean
  await main.invoke([x, w], { read: 1 });
  // @ts-expect-error signal must be an AbortSignal
  await main.invoke([x, w], { signal: true });
  // @ts-expect-error invoke resolves with BufferView[]
  const notViews: Float32Array[] = await main.invoke([x, w]);
  void notViews;

  for (const object of [main, context, built, relative, loaded, fromObject, fromJson, noBase, hal, plain, withNull, inline]) {
    object.close();
  }
  x.close();
  w.close();
  device.close();
  instance.close();
}

// The debugging toolkit: halrt.sinks, object sinks, profile and nonFinite.
async function debugging(): Promise<void> {
  const instance = new Instance();
  const device = instance.createDevice('local-sync');
  const api: Sinks = halrt.sinks;

  const stdio: StdioSink = halrt.sinks.stdio();
  const shortStdio = halrt.sinks.stdio({ maxElements: 8 });
  const kind: 'stdio' = shortStdio.halrtSinkKind;
  const maxElements: number = shortStdio.maxElements;
  const files: NpySink = halrt.sinks.npy('/tmp/traces');
  const directory: string = files.directory;
  const callback: StatsCallback = (key, stats, info) => {
    for (const figures of stats) {
      const all: TensorStats = figures;
      const numbers: number[] = [all.count, all.min, all.max, all.mean, all.nanCount, all.infCount];
      const named: [string, DType, number[]] = [all.name, all.dtype, all.shape];
      void [numbers, named];
    }
    void [key.length, info.timeNs];
  };
  const stats: StatsSink = halrt.sinks.stats(callback);
  const chrome: ChromeTrace = halrt.sinks.chromeTrace('/tmp/trace.json');
  const chromePath: string = chrome.path;
  void [kind, maxElements, directory, chromePath, api];

  const timings: TimingEvent[] = [];
  const invocations: InvocationEvent[] = [];
  const object: ObjectSink = {
    timing(event) {
      const fields: [number, string, number, string, string, number, number] = [
        event.sequence, event.function, event.op, event.kernel, event.device, event.startNs, event.durationNs,
      ];
      void fields;
      timings.push(event);
    },
    invocation(event) {
      const ok: boolean = event.ok;
      const times: number[] = [event.sequence, event.startNs, event.durationNs];
      void [ok, times, event.function];
      invocations.push(event);
    },
  };
  const traceOnly: ObjectSink = { trace: (key, tensors, info) => void [key, tensors.length, info.op] };
  const asSink: ObjectSink = chrome;

  // tee: one sink comes back as itself, more make a TeeSink.
  const same = halrt.sinks.tee(stdio);
  assertType<Equal<typeof same, StdioSink>>();
  const combined: TeeSink = halrt.sinks.tee(stdio, files, stats, chrome, object, (key: string) => void key);
  const members: readonly Sink[] = combined.sinks;
  const native: NativeSink = halrt.sinks.tee(files, halrt.sinks.tee(stdio, stats));
  void [members, native, traceOnly, asSink];

  const hal = new HalModule(instance, device, {
    debugSink: combined, profile: true, nonFinite: 'reject', traceDispatches: true,
  });
  const withObject = new HalModule(instance, device, { debugSink: object, nonFinite: 'ignore' });
  const withChrome = new HalModule(instance, device, { debugSink: chrome, profile: false });
  const withStats = new HalModule(instance, device, { debugSink: stats });

  // @ts-expect-error nonFinite is 'ignore' or 'reject'
  new HalModule(instance, device, { nonFinite: 'warn' });

  // The flight recorder.
  const recording = new HalModule(instance, device, {
    debugSink: (key: string, tensors: TraceTensor[], info: TraceInfo) => {
      const recorded: boolean = info.recorded;
      void [key, tensors, recorded];
    },
    flightRecorder: { traces: 16 },
  });
  const droppedSoFar: number = recording.droppedTraces;
  const droppedTimingsSoFar: number = recording.droppedTimings;
  void droppedSoFar, droppedTimingsSoFar;
  // @ts-expect-error droppedTraces is read-only
  recording.droppedTraces = 0;
  const recorder: FlightRecorder | null = recording.flightRecorder;
  if (recorder !== null) {
    const held: number = recorder.heldTraces + recorder.heldBytes + recorder.skipped;
    const setting: number | undefined = recorder.traces ?? recorder.bytes;
    const dumped: Promise<number> = recorder.dump();
    void [held, setting, dumped];
  }
  new HalModule(instance, device, { debugSink: stats, flightRecorder: { bytes: 1 << 20 } });
  const liveRecorded: number = halrt.liveObjects().recordedTrace + halrt.liveObjects().recordedBytes;
  void liveRecorded;
  // @ts-expect-error flightRecorder takes traces or bytes
  new HalModule(instance, device, { debugSink: stats, flightRecorder: { count: 3 } });
  // @ts-expect-error profile is a boolean
  new HalModule(instance, device, { profile: 1 });
  // @ts-expect-error an object sink needs at least one of trace, timing and invocation
  new HalModule(instance, device, { debugSink: {} });
  // @ts-expect-error an Array is not a sink (use halrt.sinks.tee)
  new HalModule(instance, device, { debugSink: [stdio, files] });
  // @ts-expect-error timing receives a TimingEvent
  const badTiming: ObjectSink = { timing: (event: string) => void event };
  void badTiming;
  // @ts-expect-error the stats callback receives TensorStats[]
  halrt.sinks.stats((key: string, stats: TraceTensor[]) => void [key, stats]);
  // @ts-expect-error npy takes a directory path
  halrt.sinks.npy();
  // @ts-expect-error maxElements is a number
  halrt.sinks.stdio({ maxElements: '8' });
  // @ts-expect-error tee takes at least one sink
  halrt.sinks.tee();
  // @ts-expect-error tee takes sinks
  halrt.sinks.tee(stdio, 5);
  // @ts-expect-error a native sink description is read-only
  stdio.maxElements = 4;
  // @ts-expect-error halrt.sinks is read-only
  halrt.sinks.stdio = halrt.sinks.stdio;
  // @ts-expect-error the ChromeTrace class is not exported
  void halrt.ChromeTrace;
  // @ts-expect-error a TensorStats count is a number
  const badCount: string = ({} as TensorStats).count;
  void badCount;

  chrome.close();
  for (const module of [hal, withObject, withChrome, withStats]) module.close();
  device.close();
  instance.close();
}

void [dtypes, counts, main, programs, debugging];

// traceDispatches filters.
{
  const instance = new halrt.Instance();
  const device = instance.createDevice('local-sync');
  const filtered = new halrt.HalModule(instance, device, {
    traceDispatches: { keys: /relu/i, functions: ['main'], every: 2 },
  });
  const covered: boolean | halrt.TraceDispatchesFilter = filtered.traceDispatches;
  void covered;
  // @ts-expect-error keys is a RegExp, not a string
  new halrt.HalModule(instance, device, { traceDispatches: { keys: 'relu' } });
  // @ts-expect-error functions is a list of names
  new halrt.HalModule(instance, device, { traceDispatches: { functions: 'main' } });
}

// halrt.cudaKernel and halrt.nvrtc.compile
async function cudaKernelTypes(): Promise<void> {
  const k: halrt.CudaKernel = halrt.cudaKernel('extern "C" __global__ void f(float* x, unsigned n) {}', 'f', { params: ['buffer', 'u32'] });
  const views: halrt.BufferView[] = await k({ grid: 1, block: [32] }, new Float32Array(4), 4);
  const arrays: halrt.HostArray[] = await k({ grid: [1, 1], read: true }, [1, 2], 2n);
  const device: halrt.Device = k.device;
  const params: readonly halrt.CudaParamType[] = k.params;
  k.close();
  void views; void arrays; void device; void params;
  const { ptx, log, arch, version }: halrt.NvrtcCompileResult = halrt.nvrtc.compile('__global__ void f() {}', { arch: 'sm_80', options: ['-DN=1'] });
  void ptx; void log; void arch; void version;
  // @ts-expect-error: params are required
  halrt.cudaKernel('', 'f', {});
}
void cudaKernelTypes;

// HostModule, the call op, load's imports
async function hostModuleTypes(instance: Instance): Promise<void> {
  const host = new halrt.HostModule(instance, 'host', {
    topk: {
      inputs: [{ name: 'scores', dtype: 'f32', shape: [4, 10] }],
      outputs: [{ name: 'best', dtype: 'i32', shape: [4, 2] }],
      impl: async (scores) => {
        const n: number = scores.shape.length;
        return [[[n, 1], [0, 2], [9, 8], [5, 5]]];
      },
    },
    log: { inputs: [{ name: 'x', dtype: 'f32', shape: [] }], impl: (x) => { void x.data; } },
  });
  const name: string = host.name;
  const first: string = host.functions[0].name;
  const op: halrt.CallOp = { op: 'call', callee: 'host.topk', args: ['scores'], results: ['best'] };
  const builder = new halrt.ModuleBuilder('app').function('main', (f) => f.input('s', 'f32', [4, 10]).output('b', 'i32', [4, 2]).call('host.topk', ['s'], ['b']));
  const m = await halrt.load('m.halrt.json', { imports: [host] });
  m.close();
  host.close();
  void [name, first, op, builder];
  // @ts-expect-error: impl is required
  new halrt.HostModule(instance, 'h', { f: { inputs: [] } });
}
void hostModuleTypes;

// A prepared call: run() resolves with undefined, outputs are BufferViews.
async function preparedCall(fn: halrt.Function, x: halrt.BufferView): Promise<void> {
  using call = fn.prepare([x, new Float32Array(4)]);
  const done: undefined = await call.run();
  const { run } = call;
  await run();
  const outputs: readonly halrt.BufferView[] = call.outputs;
  const f: halrt.Function = call.function;
  // @ts-expect-error run takes no arguments
  await call.run(x);
  // @ts-expect-error the outputs are read-only
  call.outputs = [];
  void done, outputs, f;
}
void preparedCall;

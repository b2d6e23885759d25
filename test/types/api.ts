// Compile-only checks of index.d.ts: every export used as documented, and
// misuse rejected (each `@ts-expect-error` must be an error).
import * as halrt from 'halrt';
import {
  BufferView,
  Device,
  DeviceInfo,
  DriverInfo,
  DType,
  HalrtError,
  Instance,
  LiveObjects,
  StatusCode,
  TypedArrayOf,
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
}

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
  // @ts-expect-error data must be the dtype's TypedArray
  device.tensor(new Float32Array(2), [2], 'i32');
  // @ts-expect-error f16 takes raw bits in a Uint16Array
  device.tensor(new Float32Array(2), [2], 'f16');
  // @ts-expect-error data must be a TypedArray
  device.tensor([1, 2], [2]);
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

void [dtypes, counts, main];

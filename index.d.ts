// Type definitions for halrt. Written by hand; keep in step with lib/ and
// src/napi/.

/// <reference lib="es2020" />

// What halrt's types need of newer libraries, declared here so that a
// project with only TypeScript installed (no @types/node, any target)
// compiles against them; these merge with the same declarations of
// lib.esnext.disposable and @types/node.
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
  interface Disposable {
    [Symbol.dispose](): void;
  }
}

/**
 * The type of options.signal, structural so that no DOM or Node typings are
 * needed: any AbortSignal has it. At run time the value must be an
 * AbortSignal (anything else rejects with INVALID_ARGUMENT).
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** Element types of tensors (buffer views). */
export type DType =
  | 'f16'
  | 'bf16'
  | 'f32'
  | 'f64'
  | 'i8'
  | 'u8'
  | 'i16'
  | 'u16'
  | 'i32'
  | 'u32'
  | 'i64'
  | 'u64'
  | 'bool';

/**
 * The TypedArray that carries each dtype's elements. f16 and bf16 are raw bit
 * patterns in a Uint16Array; bool is a Uint8Array of 0 and 1.
 */
export interface DTypeArrayMap {
  f16: Uint16Array;
  bf16: Uint16Array;
  f32: Float32Array;
  f64: Float64Array;
  i8: Int8Array;
  u8: Uint8Array;
  i16: Int16Array;
  u16: Uint16Array;
  i32: Int32Array;
  u32: Uint32Array;
  i64: BigInt64Array;
  u64: BigUint64Array;
  bool: Uint8Array;
}

/** The TypedArray type of dtype `D`. */
export type TypedArrayOf<D extends DType> = DTypeArrayMap[D];
/** One element of dtype D as view.toArray() gives it. */
export type ElementOf<D extends DType> = D extends 'i64' | 'u64' ? bigint : D extends 'bool' ? boolean : number;

/** Every TypedArray that device.tensor() accepts as data. */
export type TensorData = DTypeArrayMap[DType] | Uint8ClampedArray;

/** Numbers, BigInts or booleans, nested in Arrays up to 8 deep (a scalar alone is rank 0). */
export type NestedArray<T> = T | readonly NestedArray<T>[];

/**
 * Everything device.tensor() takes as data with an explicit dtype: a
 * TypedArray (converted to the dtype where exact), nested Arrays of numbers,
 * BigInts or booleans, or Buffer/ArrayBuffer/SharedArrayBuffer bytes
 * (reinterpreted).
 */
export type HostData = TensorData | NestedArray<number | bigint | boolean> | ArrayBuffer | SharedArrayBuffer;

/** An input of function.invoke(): a BufferView, or host data uploaded for it. */
export type InvokeInput = BufferView | HostData;

/** The dtype device.tensor() infers from a TypedArray when none is given. */
export type DTypeOf<A extends TensorData> = A extends Float32Array
  ? 'f32'
  : A extends Float64Array
    ? 'f64'
    : A extends Int8Array
      ? 'i8'
      : A extends Uint8ClampedArray
        ? 'u8'
        : A extends Int16Array
          ? 'i16'
          : A extends Uint16Array
            ? 'u16'
            : A extends Int32Array
              ? 'i32'
              : A extends Uint32Array
                ? 'u32'
                : A extends BigInt64Array
                  ? 'i64'
                  : A extends BigUint64Array
                    ? 'u64'
                    : A extends Uint8Array
                      ? 'u8'
                      : DType;

/** Status code names carried by HalrtError.code. */
export type StatusCode =
  | 'CANCELLED'
  | 'INVALID_ARGUMENT'
  | 'DEADLINE_EXCEEDED'
  | 'NOT_FOUND'
  | 'FAILED_PRECONDITION'
  | 'RESOURCE_EXHAUSTED'
  | 'ABORTED'
  | 'OUT_OF_RANGE'
  | 'UNIMPLEMENTED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  | 'DATA_LOSS'
  | 'DEVICE_LOST';

/** Every error halrt throws or rejects with. */
export class HalrtError extends Error {
  constructor(message: string, code?: StatusCode | (string & {}), options?: { cause?: unknown });
  readonly name: 'HalrtError';
  /** The status code name, e.g. 'INVALID_ARGUMENT'. */
  code: StatusCode | (string & {});
}

export interface DriverInfo {
  /** 'local-sync', 'local-task', 'cuda', ... */
  readonly name: string;
  /** Whether the driver can create devices on this machine. */
  readonly available: boolean;
  /** Why it cannot (null when available). */
  readonly reason: string | null;
  /**
   * The cuda entry only: whether NVRTC (which compiles CUDA source
   * executables) can be loaded, whatever `available` says (it needs no GPU).
   */
  readonly nvrtc?: CompilerInfo;
}

/** A run-time compiler of source kernels (drivers()). */
export interface CompilerInfo {
  readonly available: boolean;
  /** 'major.minor', e.g. '13.0' (null when unavailable). */
  readonly version: string | null;
  /** Why it cannot be used (null when available). */
  readonly reason: string | null;
}

export interface DeviceInfo {
  /** The driver that made the device: 'local-sync', 'local-task', 'cuda'. */
  readonly driver: string;
  /** 'local' or 'cuda': selects module executables. */
  readonly kind: 'local' | 'cuda';
  /** Human readable name. */
  readonly name: string;
  /** Canonical URI that recreates this device. */
  readonly uri: string;
  readonly ordinal: number;
  /** CPU threads that run workgroups. */
  readonly workerCount: number;
  /** Bytes of memory the device can allocate: the GPU's, or for local devices the host's physical memory; 0 when unknown. */
  readonly totalMemory: number;
  /** [major, minor] on CUDA devices; null otherwise. */
  readonly computeCapability: readonly [number, number] | null;
  /** CUDA only; 0 otherwise. */
  readonly multiprocessorCount: number;
  /** CUDA only; 0 otherwise. */
  readonly driverVersion: number;
}

/** Process-wide counts of live runtime objects, by kind. */
export interface LiveObjects {
  instance: number;
  device: number;
  buffer: number;
  bufferView: number;
  executable: number;
  commandBuffer: number;
  semaphore: number;
  submission: number;
  module: number;
  context: number;
  invocation: number;
  /** Host block pools, alive until released and all their blocks are back. */
  blockPool: number;
  /**
   * Blocks that CPU devices keep cached for reuse by later buffers (freed
   * when a device has been idle for half a second, or is freed).
   */
  cachedBlock: number;
  /** The bytes those cached blocks hold (their size-class capacities). */
  cachedBytes: number;
  /** Traces that flight recorders hold (HalModuleOptions.flightRecorder). */
  recordedTrace: number;
  /** The memory those traces' copies take (what flightRecorder.bytes bounds). */
  recordedBytes: number;
}

/** The root object: creates devices. */
export class Instance implements Disposable {
  constructor();
  /**
   * Creates a device from a URI: 'local-sync', 'local-task',
   * 'local-task?workers=4', 'cuda', 'cuda://1', or 'auto' (the default:
   * CUDA when usable, otherwise local-task).
   */
  createDevice(uri?: string): Device;
  /** Whether close() was called. */
  readonly closed: boolean;
  /** Releases the instance. Idempotent. Devices already created stay usable. */
  close(): void;
  [Symbol.dispose](): void;
}

/** A device: where tensors live. Made by Instance.createDevice(). */
export class Device implements Disposable {
  /** Not callable: use instance.createDevice(). */
  private constructor();
  readonly info: DeviceInfo;
  /**
   * A tensor holding a copy of `data`, dtype inferred from the array type (a
   * Buffer is u8).
   */
  tensor<A extends TensorData>(data: A, shape: readonly number[]): BufferView<DTypeOf<A>>;
  /**
   * A tensor of nested Arrays: the shape is inferred when `shape` is omitted
   * or null (ragged Arrays throw INVALID_ARGUMENT naming the first bad row),
   * f32 for numbers, bool for booleans, i64 for BigInts.
   */
  tensor(data: NestedArray<number>, shape?: readonly number[] | null): BufferView<'f32'>;
  tensor(data: NestedArray<boolean>, shape?: readonly number[] | null): BufferView<'bool'>;
  tensor(data: NestedArray<bigint>, shape?: readonly number[] | null): BufferView<'i64'>;
  /**
   * A tensor of `dtype` from host data. A TypedArray of another dtype, and
   * numbers, are converted where exact: to f16/bf16 by rounding to nearest
   * even, to f32 by rounding (a Float64Array too), BigInts to any float
   * dtype rounded once from the exact integer; to integer dtypes only
   * integers in range (and for i64/u64 only numbers up to 2^53 - 1: larger
   * ones need a BigInt); to bool only 0, 1, true and false. Anything else
   * throws INVALID_ARGUMENT naming the element (`data[1][2]`). A Uint16Array
   * for f16/bf16 is raw bits. Buffer/ArrayBuffer/SharedArrayBuffer bytes are
   * reinterpreted as `dtype` (little-endian); `shape` is needed except for
   * Arrays. A given shape must be a nested Array's own (nothing is
   * reshaped); a flat Array or a scalar takes any shape of its element count.
   */
  tensor<D extends DType>(data: HostData, shape: readonly number[] | null | undefined, dtype: D): BufferView<D>;
  /** A zero-filled tensor. */
  empty<D extends DType>(shape: readonly number[], dtype: D): BufferView<D>;
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * Copies `source` into `target` on the device. Both belong to this device
   * and have the same byteLength.
   */
  copy(source: BufferView, target: BufferView): Promise<void>;
  /** Releases the device. Idempotent. Its tensors stay readable. */
  close(): void;
  [Symbol.dispose](): void;
}

/** A typed, shaped tensor on a device. Made by device.tensor() / empty(). */
export class BufferView<D extends DType = DType> implements Disposable {
  /** Not callable: use device.tensor() or device.empty(). */
  private constructor();
  /** A fresh array of dimensions ([] for a scalar). */
  readonly shape: number[];
  readonly dtype: D;
  readonly byteLength: number;
  readonly rank: number;
  /** The number of elements (the product of the shape; 1 for a scalar). */
  readonly numel: number;
  /** The same as numel. */
  readonly size: number;
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * A copy of the contents, after all work submitted before it. Rejects with
   * RESOURCE_EXHAUSTED, before copying, when the view has more bytes than
   * one ArrayBuffer may (buffer.constants.MAX_LENGTH: 4 GiB up to Node 21).
   */
  read(): Promise<TypedArrayOf<D>>;
  /**
   * read() asserting the view's dtype: rejects with INVALID_ARGUMENT when
   * the view's dtype is not `dtype`. Types the array of a view whose dtype
   * is known only at run time (a function's outputs):
   * `(await y.read('f32'))[0]` is a number.
   */
  read<E extends D>(dtype: E): Promise<TypedArrayOf<E>>;
  /**
   * The contents as nested Arrays in the view's shape (the value alone for
   * a scalar): numbers for float and narrower integer dtypes (f16/bf16 as
   * their values, not bits), BigInts for i64/u64, booleans for bool. Rejects
   * as read() does; FAILED_PRECONDITION once closed.
   */
  toArray(): Promise<NestedArray<ElementOf<D>>>;
  /** Releases the view. Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

/** The 13 dtype names. */
export const dtypes: readonly DType[];

/** The compiled-in drivers in `auto` preference order, probed now. */
export function drivers(): DriverInfo[];

/** Live runtime objects, process-wide (every thread). */
export function liveObjects(): LiveObjects;

//===----------------------------------------------------------------------===//
// Modules, contexts, functions and the debug sink
//===----------------------------------------------------------------------===//

/** One traced tensor of dtype `D` in a 'full' trace: a host copy taken when the trace ran. */
export interface TraceTensorOf<D extends DType> {
  /** The traced value's name in the function ('x', 'y', ...). */
  name: string;
  dtype: D;
  /** Dimensions ([] for a scalar). */
  shape: number[];
  /** The elements, in dtype's TypedArray (see DTypeArrayMap). */
  data: TypedArrayOf<D>;
  summary?: undefined;
}

/** How a trace reports its tensors (HalModuleOptions.traceMode, a trace op's `mode`). */
export type TraceMode = 'full' | 'summary' | 'health';

/**
 * A 'health' trace's summary of one tensor, computed on its device: exact
 * element counts.
 */
export interface HealthSummary {
  mode: 'health';
  /** Elements. */
  count: number;
  nanCount: number;
  posInfCount: number;
  negInfCount: number;
}

/**
 * A 'summary' trace's summary of one tensor, computed on its device: the
 * counts, and figures over its finite elements (NaN and ±Infinity are
 * counted, never folded in), each element converted to a double first
 * (64-bit integers beyond 2^53 rounded), sums accumulated in doubles.
 */
export interface ValueSummary {
  mode: 'summary';
  count: number;
  nanCount: number;
  posInfCount: number;
  negInfCount: number;
  /** Elements equal to zero (+0 and -0; false for bool). */
  zeroCount: number;
  /** The smallest and largest finite elements (exact); NaN when there is none. */
  min: number;
  max: number;
  /** Sum over the finite elements / their count; NaN when there is none. */
  mean: number;
  /** sqrt(sum of squares of the finite elements). */
  l2: number;
}

/** A tensor's summary in a 'summary' or 'health' trace; narrow on `mode`. */
export type TensorSummary = HealthSummary | ValueSummary;

/** One traced tensor in a 'summary' or 'health' trace: its summary instead of its data. */
export interface TraceSummaryTensor {
  name: string;
  dtype: DType;
  shape: number[];
  summary: TensorSummary;
  data?: undefined;
}

/**
 * A traced tensor: its data in a 'full' trace (narrow on `dtype` to get the
 * matching `data` type), its summary in a 'summary' or 'health' trace
 * (`summary` set; see TraceInfo.mode).
 */
export type TraceTensor = { [D in DType]: TraceTensorOf<D> }[DType] | TraceSummaryTensor;

/** What the debug sink is told about a trace besides its key and tensors. */
export interface TraceInfo {
  /**
   * Number of the invocation that traced, in its Context: the Context's
   * first invoke() that started is 1, the next 2, and so on over all of its
   * functions (an invoke() rejected before it starts, e.g. for a wrong
   * input, takes no number). Each Context counts on its own, so Contexts
   * sharing a HalModule (and its sink) reuse numbers: `function` and
   * `sequence` name an invocation within one Context.
   */
  sequence: number;
  /** The function that traced: 'module.function'. */
  function: string;
  /** Index of the op in the function body (for dispatch traces: the dispatch). */
  op: number;
  /**
   * Traces this sink has dropped so far (tracePolicy 'drop'); never
   * decreases; always 0 under 'wait'.
   */
  dropped: number;
  /**
   * When the trace was taken, in nanoseconds on the CLOCK_MONOTONIC timeline
   * of process.hrtime.bigint() (as a Number).
   */
  timeNs: number;
  /** What the tensors carry: 'full' (data) or 'summary' / 'health' (summaries). */
  mode: TraceMode;
  /**
   * true for a trace a flight recorder kept and delivers now, because an
   * invocation failed or flightRecorder.dump() was called (then `sequence`,
   * `function`, `op` and `timeNs` are those of the trace when it was
   * taken); false otherwise.
   */
  recorded: boolean;
}

/**
 * A debug sink: called on the JavaScript thread for every trace, in program
 * order within an invocation and before that invocation's promise settles.
 * `key` is the trace op's key, or 'function:op:kernel' for traceDispatches.
 * A sink that throws rejects the invocation that traced (code ABORTED, the
 * thrown value as `cause`); its return value is ignored.
 */
export type DebugSink = (key: string, tensors: TraceTensor[], info: TraceInfo) => void;

/** How long one dispatch took (HalModule option `profile`). Times in ns, as TraceInfo.timeNs. */
export interface TimingEvent {
  /** The invocation's number in its Context (as TraceInfo.sequence). */
  sequence: number;
  /** 'module.function'. */
  function: string;
  /** Index of the dispatch (or call) op in the function body. */
  op: number;
  /**
   * 'executable.entry', e.g. 'k.matmul_f32'; for a call op, the callee
   * 'module.function' (a HostModule's function: its time on the host; a
   * program module's: from its first dispatch's start to its last's end).
   */
  kernel: string;
  /** The device's URI, e.g. 'local-sync' or 'cuda://0'. */
  device: string;
  startNs: number;
  durationNs: number;
}

/** An invocation that has completed, reported just before its promise settles. */
export interface InvocationEvent {
  /** The invocation's number in its Context (as TraceInfo.sequence). */
  sequence: number;
  /** 'module.function'. */
  function: string;
  /** When invoke() was called, in ns (as TraceInfo.timeNs). */
  startNs: number;
  durationNs: number;
  /** false when the promise rejects (the device failed or a trace callback threw). */
  ok: boolean;
}

/**
 * Summary figures of one traced tensor, computed natively (halrt.sinks.stats):
 * from its data in a 'full' trace, from its device-side summary in a
 * 'summary' or 'health' trace.
 */
export interface TensorStats {
  name: string;
  dtype: DType;
  shape: number[];
  /** Elements, NaN and Inf included. */
  count: number;
  /** Over the finite elements; NaN when there are none (and in 'health' traces). */
  min: number;
  max: number;
  mean: number;
  nanCount: number;
  infCount: number;
}

/** halrt.sinks.stats's callback: like a DebugSink, with figures instead of tensors. */
export type StatsCallback = (key: string, stats: TensorStats[], info: TraceInfo) => void;

/** The methods an object sink may have. */
export interface ObjectSinkMethods {
  /** Every trace, as a DebugSink receives it (called with the object as `this`). */
  trace?: DebugSink | undefined;
  /** Every dispatch's timing, when the HalModule has `profile: true`. */
  timing?: ((event: TimingEvent) => void) | undefined;
  /** Every invocation of the HalModule's contexts, just before its promise settles. */
  invocation?: ((event: InvocationEvent) => void) | undefined;
}

/**
 * An object debug sink: at least one of trace, timing and invocation. A
 * throw from any of them rejects the invocation concerned (code ABORTED).
 */
export type ObjectSink = ObjectSinkMethods &
  (
    | { trace: DebugSink }
    | { timing: (event: TimingEvent) => void }
    | { invocation: (event: InvocationEvent) => void }
  );

/** halrt.sinks.stdio(): prints traces on stdout natively. */
export interface StdioSink {
  readonly halrtSinkKind: 'stdio';
  readonly maxElements: number;
}
/** halrt.sinks.npy(): writes traced tensors as .npy files natively. */
export interface NpySink {
  readonly halrtSinkKind: 'npy';
  readonly directory: string;
}
/** halrt.sinks.stats(): figures computed natively, handed to a callback. */
export interface StatsSink {
  readonly halrtSinkKind: 'stats';
  readonly callback: StatsCallback;
}
/** halrt.sinks.tee() of two or more sinks. */
export interface TeeSink {
  readonly halrtSinkKind: 'tee';
  readonly sinks: readonly Sink[];
}
/** A description of a built-in sink, made by halrt.sinks (frozen). */
export type NativeSink = StdioSink | NpySink | StatsSink | TeeSink;

/** Everything HalModule's `debugSink` option takes. */
export type Sink = DebugSink | ObjectSink | NativeSink;

/**
 * The object sink halrt.sinks.chromeTrace() returns: writes a Trace Event
 * Format file (Perfetto, chrome://tracing) that is valid JSON after every
 * event. The class itself is not exported.
 */
export interface ChromeTrace {
  /** The file written. */
  readonly path: string;
  trace(key: string, tensors: TraceTensor[], info: TraceInfo): void;
  timing(event: TimingEvent): void;
  invocation(event: InvocationEvent): void;
  /** Stops writing and closes the file (which stays valid JSON). Idempotent. */
  close(): void;
}

export interface StdioSinkOptions {
  /**
   * Tensors with more elements are summarised as halrt.format does (the
   * first and last 3 entries of each dimension longer than 6). An integer in
   * [2, 2^30]; default 16.
   */
  maxElements?: number | undefined;
}

/** Ready-made debug sinks. */
export interface Sinks {
  /**
   * Lines on stdout, written natively: `=== key (function op N, invocation S) ===`
   * then `name: 2x3xf32=[[1 2 3] [4 5 6]]` per tensor (a scalar:
   * `name: f32=2.5`), the tensor as halrt.format writes it; in a 'summary'
   * trace `name: 2x3xf32 summary: count=6 nan=0 +inf=0 -inf=0 zero=1
   * min=-1.5 max=3 mean=0.25 l2=3.5`, in a 'health' trace
   * `name: 2x3xf32 health: count=6 nan=0 +inf=0 -inf=0`.
   */
  readonly stdio: (options?: StdioSinkOptions) => StdioSink;
  /**
   * One .npy file (format 1.0) per traced tensor in `directory` (created if
   * missing), named `<sequence>_<key prefix>-<key hash>_<index>.npy` (the
   * invocation's number in its Context as TraceInfo.sequence; the
   * key's first 64 bytes, each byte outside [A-Za-z0-9_.-] replaced by '_',
   * then the 32-bit FNV-1a hash of the whole key in 8 hex digits); a name taken
   * gets `.1`, `.2`, ... before `.npy`, so no file is ever overwritten.
   * `index.jsonl` in the folder gets one JSON line per file: {file, key,
   * sequence, function, op, tensor, name, dtype, shape}. bf16 as '<u2' bits.
   * 'summary' and 'health' traces write nothing (there is no tensor to write).
   */
  readonly npy: (directory: string) => NpySink;
  /**
   * min, max, mean, NaN and Inf counts of each traced tensor, computed
   * natively (taken from the device's summary in 'summary' and 'health'
   * traces).
   */
  readonly stats: (callback: StatsCallback) => StatsSink;
  /** Every sink given sees every event; a single sink is returned as is. */
  readonly tee: {
    <S extends Sink>(sink: S): S;
    (first: Sink, second: Sink, ...rest: Sink[]): TeeSink;
  };
  /**
   * A Chrome trace file; use with `profile: true` for dispatch timings.
   * Tensors of 'summary' and 'health' traces also become counter events
   * named 'key/name' (their finite summary figures), which plot over time.
   */
  readonly chromeTrace: (path: string) => ChromeTrace;
}

export const sinks: Sinks;

/** Which dispatches traceDispatches covers; every filter given must hold. */
export interface TraceDispatchesFilter {
  /**
   * Keys ("function:op:kernel") to trace, with JavaScript semantics and any
   * flags: each Context, when made, tests every dispatch key of the modules
   * it links as `re.test(key)` with `lastIndex` 0 (so 'g' changes nothing
   * and 'y' anchors at the key's start), on a copy of the RegExp taken when
   * the HalModule is made (changing the RegExp later has no effect). A test
   * that throws (a replaced RegExp.prototype.exec) makes `new Context` throw
   * ABORTED, the thrown value as `cause`.
   */
  keys?: RegExp | undefined;
  /** Names of the functions (without the module) whose dispatches to trace. */
  functions?: readonly string[] | undefined;
  /**
   * Trace only invocations whose sequence (TraceInfo.sequence: their number
   * in their Context) is a multiple of this, an integer in [1, 2^32 − 1]
   * (default 1): the N-th, 2N-th, ... invocation of each Context.
   */
  every?: number | undefined;
}

export interface HalModuleOptions {
  /**
   * Receives traces (and, for object sinks, timings and invocations): a
   * function, an object sink, or a halrt.sinks sink. Default: none (traces
   * are dropped natively).
   */
  debugSink?: Sink | null | undefined;
  /**
   * Also trace what dispatches write, keyed "function:op:kernel": true for
   * every dispatch, or a filter. Default false.
   */
  traceDispatches?: boolean | TraceDispatchesFilter | undefined;
  /**
   * What traceDispatches traces, and trace ops without a `mode` of their
   * own, deliver: 'full' (the default: host copies of the tensors),
   * 'summary' or 'health' (a TensorSummary per tensor, computed natively
   * by the device; only the summary reaches the sink).
   */
  traceMode?: TraceMode | undefined;
  /** Report every dispatch's timing to the sink's `timing` method. Default false. */
  profile?: boolean | undefined;
  /**
   * 'reject': an invocation rejects (code ABORTED, naming the trace key, the
   * tensor and the first bad index, or in a 'summary' or 'health' trace its
   * NaN and ±Inf counts) at the first traced tensor holding NaN or Inf,
   * which the sink never sees. Default 'ignore'.
   */
  nonFinite?: 'ignore' | 'reject' | undefined;
  /**
   * Bound on the bytes of traces taken but not yet delivered to JavaScript
   * (held back or on their way, README "The debug sink"):
   * an integer in [1, Number.MAX_SAFE_INTEGER] (taken as at most
   * buffer.constants.MAX_LENGTH, as a batch of traces reaches JavaScript in
   * one ArrayBuffer); outside it, INVALID_ARGUMENT. Default 64 MiB.
   * Also bounds the memory of large traces (64 KiB and more) the sink keeps
   * warm for reuse while the HalModule lives.
   */
  maxTraceBytes?: number | undefined;
  /**
   * When the bound is reached: 'wait' (the default: the device waits for
   * JavaScript, nothing is lost) or 'drop' (the trace is dropped and counted
   * in info.dropped). A flight recorder's traces (info.recorded) are never
   * dropped: they wait for room under either policy.
   */
  tracePolicy?: 'wait' | 'drop' | undefined;
  /**
   * Who owns `tensor.data` of a trace: 'owned' (the default: the callback
   * may keep it as long as it likes) or 'borrowed' (valid only until the
   * callback returns: arrays of 64 KiB and more are then detached, to length
   * 0; keep a copy with `data.slice()`). Borrowed data makes large traces
   * several times cheaper: on the CPU devices the array is the device
   * buffer's own memory (a later command that writes those bytes copies
   * them aside first, or waits for the callback to return, so the values
   * are always those traced). Read borrowed arrays, never write into them:
   * a write changes the device's data. Never hand one to anything that
   * reads it after the callback returns (an asynchronous native API such as
   * zlib or fs with a callback): the memory is the device's again, and Node
   * may abort or crash. A borrowed array's buffer is not transferable: in
   * the transfer list of postMessage or structuredClone it is copied
   * instead (Node 20); something that detaches it anyway and keeps its
   * memory (a byte stream's enqueue) sees the device's later writes, and
   * that memory is never freed.
   */
  traceData?: 'owned' | 'borrowed' | undefined;
  /**
   * Keep the last traces natively instead of delivering them: {traces: N}
   * (1 to 2^20) or {bytes: B} (1 to 2^53 - 1: the bytes of the copies,
   * see FlightRecorder.heldBytes), exactly one. The sink gets them, with
   * info.recorded true, when an invocation fails and on
   * hal.flightRecorder.dump(). Needs a debugSink that takes traces (a
   * function, an object with a trace method, or a halrt.sinks sink);
   * INVALID_ARGUMENT otherwise. Default: none.
   */
  flightRecorder?: { traces: number } | { bytes: number } | null | undefined;
}

/**
 * A HalModule's flight recorder (HalModuleOptions.flightRecorder): a ring of
 * copies of the last traces, held natively. Nothing reaches the sink in
 * normal operation but dispatch timings. When an invocation fails (a
 * nonFinite rejection, a kernel error, a lost device, any failure after it
 * started) the held traces are delivered to the sink, oldest first, marked
 * info.recorded, before the invocation rejects; a trace that nonFinite
 * rejects is the last of them. A delivery empties the ring.
 */
export interface FlightRecorder {
  /** The setting: how many traces it keeps, or undefined. */
  readonly traces: number | undefined;
  /** The setting: how many bytes of copies it keeps, or undefined. */
  readonly bytes: number | undefined;
  /** How many traces it holds now. Throws FAILED_PRECONDITION once the HalModule is closed. */
  readonly heldTraces: number;
  /**
   * The bytes of memory the copies it holds take: each trace's data, its
   * key, function and tensor names, shapes and some bookkeeping (up to a
   * quarter more for a copy that reuses an older one's memory); never more
   * than `bytes`.
   */
  readonly heldBytes: number;
  /** Traces whose copy alone was larger than `bytes`, so never kept. */
  readonly skipped: number;
  /**
   * Delivers the held traces to the sink (info.recorded true), after what is
   * already submitted to the device has run, and resolves with how many once
   * the sink's callbacks have run. Rejects with ABORTED (the thrown value as
   * cause) when a callback throws, and FAILED_PRECONDITION once the
   * HalModule is closed.
   */
  dump(): Promise<number>;
}

/** The module named 'hal': runs programs on `device`, owns the debug sink. */
export class HalModule implements Disposable {
  constructor(instance: Instance, device: Device, options?: HalModuleOptions);
  /** Always 'hal'. */
  readonly name: 'hal';
  readonly device: Device;
  /** options.debugSink as given, or null. */
  readonly debugSink: Sink | null;
  /** options.traceDispatches as given (false when not given). */
  readonly traceDispatches: boolean | TraceDispatchesFilter;
  /** options.traceMode ('full' when not given). */
  readonly traceMode: TraceMode;
  readonly profile: boolean;
  /**
   * The flight recorder, or null when options.flightRecorder was not given.
   * The same object every time; read first after close(), it throws
   * FAILED_PRECONDITION.
   */
  readonly flightRecorder: FlightRecorder | null;
  /**
   * Traces its debug sink has dropped so far under tracePolicy 'drop' (the
   * count info.dropped reports with each trace), those after the last trace
   * delivered included; 0 under 'wait' and for sinks with no JavaScript
   * part. Read after close(), it throws FAILED_PRECONDITION.
   */
  readonly droppedTraces: number;
  /**
   * Dispatch timings (options.profile) its debug sink has dropped so far
   * under tracePolicy 'drop': they share maxTraceBytes with traces but are
   * counted here, never in droppedTraces or info.dropped. 0 under 'wait'.
   * Read after close(), it throws FAILED_PRECONDITION.
   */
  readonly droppedTimings: number;
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * Releases this object's module reference. Idempotent. Contexts already
   * linked with it keep their own reference and keep working (lookupFunction,
   * invoke, traces to its debug sink); a new Context refuses it with
   * FAILED_PRECONDITION.
   */
  close(): void;
  [Symbol.dispose](): void;
}

/** A tensor in a function signature. */
export interface TensorSignature {
  name: string;
  dtype: DType;
  shape: number[];
}

/** One value of a HostModule function: {name, dtype, shape}. */
export interface HostValueSpec {
  name: string;
  dtype: DType;
  shape: readonly number[];
}

/**
 * What a HostModule function's impl returns, or resolves to: an Array with
 * one entry per declared output (a single output may be returned bare: an
 * Array of one entry is the list when that entry is a BufferView, typed
 * data or bytes, or nested Arrays as deep as the output's rank; a function
 * without outputs may return undefined), each anything device.tensor()
 * takes for that output's dtype and shape, or a BufferView of that dtype
 * and shape.
 */
export type HostResult = unknown;

/** An input of a HostModule function: a host copy, as a 'full' trace gives it. */
export type HostTensor = { [D in DType]: TraceTensorOf<D> }[DType];

/** One function of a HostModule. */
export interface HostFunctionSpec {
  inputs?: readonly HostValueSpec[];
  outputs?: readonly HostValueSpec[];
  /**
   * Runs on the JS thread with one host tensor per input ({name, dtype,
   * shape, data}: copies the callee owns; f16/bf16 as bits). A throw or
   * rejection (or a getter of the result that throws) fails the invocation
   * with ABORTED, the thrown value as cause; a wrong result with
   * INVALID_ARGUMENT naming the output.
   */
  impl: (...inputs: HostTensor[]) => HostResult | Promise<HostResult>;
}

/**
 * A module whose functions are JavaScript: programs linked after it in a
 * Context call them ({"op": "call", "callee": "name.fn"}), and they can be
 * invoked like any function (context.lookupFunction('name.fn')). It may be
 * linked into several Contexts of its Instance.
 */
export class HostModule implements Disposable {
  constructor(instance: Instance, name: string, functions: { readonly [name: string]: HostFunctionSpec });
  readonly name: string;
  readonly instance: Instance;
  /** The functions' signatures, frozen. */
  readonly functions: readonly { name: string; inputs: readonly HostValueSpec[]; outputs: readonly HostValueSpec[] }[];
  /** Whether close() was called. */
  readonly closed: boolean;
  /** Drops this object's reference; Contexts that link the module keep it. Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

/** A function a module exports. */
export interface FunctionSignature {
  name: string;
  inputs: TensorSignature[];
  outputs: TensorSignature[];
}

/** A workgroup grid: 1 to 3 positive counts (missing ones are 1). */
export type Grid =
  | readonly [number]
  | readonly [number, number]
  | readonly [number, number, number];

/**
 * A dispatch constant: an integer, or an f32 (a non-integer number or {f32});
 * for a declared CUDA entry, typed by its parameter (a u64/i64 one also as a
 * decimal string, over the whole 64-bit range).
 */
export type DispatchConstant = number | { f32: number } | string;

/** A kernel name: 'executable.entry'. */
export type KernelName = `${string}.${string}`;

/** How CPU devices get an executable. */
export type LocalExecutable = { builtin: true } | { library: string };
/** A declared CUDA kernel parameter (docs/module-format.md, "Declared CUDA entries"). */
export type CudaParamType = 'buffer' | 'u32' | 'i32' | 'f32' | 'u64' | 'i64' | 'f64';
/** One declared entry: its parameter types in kernel order, or {params} (absent: inferred). */
export type CudaEntry = readonly CudaParamType[] | { params?: readonly CudaParamType[] | undefined };
/** The entries a CUDA executable exposes (every kernel of the image when absent). */
export type CudaEntries = { [entry: string]: CudaEntry };
/** How CUDA devices get an executable (paths relative to the module file). */
export type CudaExecutable =
  | { builtin: true }
  | { ptx: string | { text: string }; entries?: CudaEntries | undefined }
  | { cubin: string; entries?: CudaEntries | undefined }
  | { fatbin: string; entries?: CudaEntries | undefined }
  | CudaSourceExecutable;

/**
 * CUDA C++ source compiled by NVRTC when a Context is created (docs/cuda.md,
 * "CUDA C source (NVRTC)"): a file path or inline text, compiler options
 * (not --gpu-architecture/-arch: halrt targets the device), and the entries
 * to expose (default: every kernel, by its symbol). An entry with an
 * `expression` is the C++ kernel that name expression lowers to (for
 * templates and other extern "C++" kernels).
 */
export interface CudaSourceExecutable {
  source: string | { text: string };
  options?: readonly string[] | undefined;
  entries?:
    | {
        [entry: string]:
          | CudaEntry
          | { expression?: string | undefined; params?: readonly CudaParamType[] | undefined };
      }
    | undefined;
}

/** An executable, given per device kind (at least one). */
export interface ExecutableKinds {
  local?: LocalExecutable | undefined;
  cuda?: CudaExecutable | undefined;
}

/** An input, output or local of a function. */
export interface ValueDescription {
  name: string;
  dtype: DType;
  shape: readonly number[];
}

/**
 * A module constant (docs/module-format.md, "Constants"): read-only data of
 * the module, copied when the module is made, uploaded once per Context.
 * Exactly one of `data` and `file`.
 */
export interface ConstantDescription {
  dtype: DType;
  shape: readonly number[];
  /** The elements: Arrays nested as the shape (or flat), a TypedArray of the dtype, or bytes. */
  data?: HostData | undefined;
  /** An .npy file of this dtype and shape, or raw little-endian bytes (at most 4 GiB), relative to the module file or baseDir. */
  file?: string | undefined;
  /** Raw files only: the byte where the constant starts. Default 0. */
  offset?: number | undefined;
}

export interface DispatchOp {
  op: 'dispatch';
  kernel: KernelName;
  workgroups: Grid;
  /** Value names, in the kernel's binding order. */
  bindings: readonly string[];
  constants?: readonly DispatchConstant[] | undefined;
  workgroupSize?: Grid | undefined;
}
export interface FillOp {
  op: 'fill';
  target: string;
  /** Stored as target's dtype; a boolean only for bool targets. */
  value: number | boolean;
}
export interface CopyOp {
  op: 'copy';
  source: string;
  target: string;
}
/**
 * Where a health trace reads a value's NaN/±Inf counts instead of the value:
 * `value` is a u32 [W, 6, 3] local that a chain_health_f32 dispatch wrote,
 * `step` (0 to 5) the chain step whose result the value is
 * (docs/module-format.md, "trace").
 */
export interface TraceCounts {
  value: string;
  step: number;
}
export interface TraceOp {
  op: 'trace';
  key: string;
  values: readonly string[];
  /** Default: the HalModule's traceMode. Must be 'health' with `counts`. */
  mode?: TraceMode | undefined;
  /**
   * One entry per value: its health is read from these counts, and the
   * value itself is not read (a local no other op uses is not allocated).
   */
  counts?: readonly TraceCounts[] | undefined;
}
export interface BarrierOp {
  op: 'barrier';
}
/**
 * Calls function `callee` ('module.function') of a program module linked
 * before this one in the Context, with `args` as its inputs; its outputs
 * land in `results` (docs/module-format.md, "call").
 */
export interface CallOp {
  op: 'call';
  callee: `${string}.${string}`;
  args: readonly string[];
  results: readonly string[];
}
/** One op of a function body. */
export type Op = DispatchOp | FillOp | CopyOp | TraceOp | BarrierOp | CallOp;

export interface FunctionDescription {
  inputs: readonly ValueDescription[];
  outputs: readonly ValueDescription[];
  locals?: readonly ValueDescription[] | undefined;
  body: readonly Op[];
}

/**
 * A module description (the contents of a *.halrt.json file). Properties
 * that are undefined count as absent (the description goes through JSON).
 */
export interface ModuleDescription {
  format: 'halrt.module/1';
  name: string;
  executables?: { [name: string]: ExecutableKinds } | undefined;
  /** Named like values by every function; at most 4096. */
  constants?: { [name: string]: ConstantDescription } | undefined;
  functions: { [name: string]: FunctionDescription };
}

export interface ModuleOptions {
  /** Folder relative executable and constant paths resolve against. Default: the current directory. */
  baseDir?: string | undefined;
}

/** A program module: functions described by data, linked into contexts. */
export class Module implements Disposable {
  /** Not callable: use Module.load, Module.fromObject, Module.fromJson or a ModuleBuilder. */
  private constructor();
  /**
   * Loads a *.halrt.json file; paths in it resolve against its folder. Only
   * a regular file of at most 64 MiB is read: a device, FIFO or directory
   * throws INVALID_ARGUMENT, a larger file RESOURCE_EXHAUSTED (naming its
   * size and the cap), a missing one NOT_FOUND; each names the path. Kernel
   * files the module names are held to 1 GiB when a Context links it;
   * constants' files are read now, each at most 4 GiB.
   */
  static load(instance: Instance, file: string): Module;
  static fromObject(instance: Instance, object: ModuleDescription, options?: ModuleOptions): Module;
  /** `baseDir`: where relative paths resolve (none: they are an error). Constants' data and files are read as Module.load reads them. */
  static fromJson(instance: Instance, text: string, baseDir?: string): Module;
  readonly name: string;
  /** A fresh array of the exported functions' signatures. */
  readonly functions: FunctionSignature[];
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * Releases this object's module reference. Idempotent. Afterwards `name`
   * and `functions` throw FAILED_PRECONDITION and a new Context refuses it;
   * contexts already linked with it keep their own reference and keep
   * working (lookupFunction, invoke).
   */
  close(): void;
  [Symbol.dispose](): void;
}

export interface DispatchOptions {
  workgroups: Grid;
  bindings: readonly string[];
  constants?: readonly DispatchConstant[] | undefined;
  workgroupSize?: Grid | undefined;
}

/** Builds one function; every method appends and returns the builder. */
export interface FunctionBuilder {
  input(name: string, dtype: DType, shape: readonly number[]): this;
  output(name: string, dtype: DType, shape: readonly number[]): this;
  local(name: string, dtype: DType, shape: readonly number[]): this;
  dispatch(kernel: KernelName, options: DispatchOptions): this;
  fill(target: string, value: number | boolean): this;
  copy(source: string, target: string): this;
  trace(key: string, values: readonly string[], options?: { mode?: TraceMode | undefined; counts?: readonly TraceCounts[] | undefined }): this;
  barrier(): this;
  /** A call op: `callee` ('module.function') on `args`, its outputs into `results`. */
  call(callee: `${string}.${string}`, args: readonly string[], results: readonly string[]): this;
}

/** Builds a ModuleDescription fluently. */
export class ModuleBuilder {
  constructor(name: string);
  executable(name: string, kinds: ExecutableKinds): this;
  /** A module constant; `data` is kept as given until the module is built (which copies it). */
  constant(name: string, dtype: DType, shape: readonly number[], data: HostData): this;
  /** `define` is called at once with the function's builder. */
  function(name: string, define: (builder: FunctionBuilder) => void): this;
  /** A deep copy of the description built so far (constants' data copied with structuredClone). */
  toObject(): ModuleDescription;
  /** Module.fromObject(instance, this.toObject(), options). */
  build(instance: Instance, options?: ModuleOptions): Module;
}

/** Modules linked together: a HalModule first, then program modules. */
export class Context implements Disposable {
  constructor(instance: Instance, modules: readonly (HalModule | HostModule | Module)[]);
  /** The modules given, frozen. */
  readonly modules: readonly (HalModule | HostModule | Module)[];
  /**
   * A function by its qualified name, 'module.function', or by its bare
   * name when exactly one linked (open) program module exports it (two:
   * INVALID_ARGUMENT naming both; none: NOT_FOUND listing the functions).
   */
  lookupFunction(name: string): HalrtFunction;
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * Closes the context. Idempotent. Afterwards lookupFunction throws, and
   * invoke() of any of its functions, including those looked up before,
   * rejects with FAILED_PRECONDITION; those functions' properties stay
   * readable, and each holds the native context until it is closed or
   * collected. Invocations already started are not affected: they complete
   * with their outputs and traces.
   */
  close(): void;
  [Symbol.dispose](): void;
}

export interface InvokeOptions {
  /**
   * Aborting settles the promise at once with CANCELLED; the device work
   * still runs and its outputs are closed unseen.
   */
  signal?: AbortSignalLike | undefined;
}

/** What function.invoke() resolves with, besides InvokeOptions. */
export interface InvokeOutputOptions {
  /** Resolve with an object of outputs by name (`{y}`) instead of an Array. */
  named?: boolean | undefined;
  /**
   * Resolve with the outputs read to host arrays (what view.read() gives);
   * the output views are closed.
   */
  read?: boolean | undefined;
}

/** Inputs by name: every input of the function, nothing else. */
export interface NamedInputs {
  readonly [name: string]: InvokeInput;
}

/** Any dtype's host array, as read() gives it. */
export type HostArray = DTypeArrayMap[DType];

/** A function of a Context (exported as `Function`). */
declare class HalrtFunction implements Disposable {
  /** Not callable: use context.lookupFunction(). */
  private constructor();
  /** 'module.function'. */
  readonly name: string;
  readonly context: Context;
  readonly inputs: TensorSignature[];
  readonly outputs: TensorSignature[];
  /**
   * Runs the function on the context's device. Inputs are BufferViews or
   * host data (TypedArrays of the input's dtype, nested Arrays converted to
   * it, Buffer/ArrayBuffer bytes), in order or by name; host data must have
   * the input's shape and is uploaded to the function's device and freed
   * when the call settles. Every failure (bad inputs, unknown or missing
   * names, closed objects, a throwing debug sink, an abort) is a rejection
   * with a HalrtError; nothing throws.
   */
  invoke(
    inputs: readonly InvokeInput[] | NamedInputs,
    options: InvokeOptions & { named: true; read: true },
  ): Promise<{ [name: string]: HostArray }>;
  invoke(
    inputs: readonly InvokeInput[] | NamedInputs,
    options: InvokeOptions & { named: true; read?: false | undefined },
  ): Promise<{ [name: string]: BufferView }>;
  invoke(
    inputs: readonly InvokeInput[] | NamedInputs,
    options: InvokeOptions & { named?: false | undefined; read: true },
  ): Promise<HostArray[]>;
  invoke(
    inputs: readonly InvokeInput[] | NamedInputs,
    options?: InvokeOptions & { named?: false | undefined; read?: false | undefined },
  ): Promise<BufferView[]>;
  /** Output options not known when compiling: any of the four results. */
  invoke(
    inputs: readonly InvokeInput[] | NamedInputs,
    options: InvokeOptions & InvokeOutputOptions,
  ): Promise<BufferView[] | HostArray[] | { [name: string]: BufferView | HostArray }>;
  /**
   * A call of this function on `inputs` (as invoke() takes them), to run
   * again and again: the inputs' count, dtypes and shapes are checked and
   * host data uploaded once, and the call holds its own reference to each
   * input's buffer. Throws what invoke() would reject with
   * (INVALID_ARGUMENT naming the input, FAILED_PRECONDITION for a closed
   * function or context); an input on another device is reported by run().
   */
  prepare(inputs: readonly InvokeInput[] | NamedInputs): PreparedCall;
  /** Whether close() was called. */
  readonly closed: boolean;
  /** Releases this object's references. Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}
export { HalrtFunction as Function };

/** A prepared call: function.prepare(inputs). */
export class PreparedCall implements Disposable {
  /** Not callable: use function.prepare(inputs). */
  private constructor();
  /** The function it calls. */
  readonly function: HalrtFunction;
  /**
   * Frozen: the call's own output views, in the function's output
   * signature, zero-filled until the first run. Each run writes its results
   * into their buffers (zeroing first an output the function does not write
   * whole); read them after the run settles. A run that rejects leaves
   * them unspecified.
   */
  readonly outputs: readonly BufferView[];
  /**
   * Runs the function on the prepared inputs, reading what their buffers
   * hold when it runs; resolves with undefined once the results are in
   * `outputs`. An invocation like any other (numbered, traced); runs may
   * overlap and run in the order started (up to a host call: after one,
   * each run goes on when its impl settles). Bound to the call, which it
   * keeps alive (`const { run } = call` runs on after `call` is dropped). Rejects with
   * INVALID_ARGUMENT when given arguments, FAILED_PRECONDITION once the
   * call, its function, its context or one of its outputs is closed.
   */
  run(): Promise<undefined>;
  /** Whether close() was called. */
  readonly closed: boolean;
  /**
   * Closes the call and its outputs. Idempotent. Runs already started
   * complete; their results go nowhere.
   */
  close(): void;
  [Symbol.dispose](): void;
}

/** halrt.load options: the device URI, and every HalModule option. */
export interface LoadOptions extends HalModuleOptions {
  /** The device URI (Instance.createDevice). Default: 'auto'. */
  device?: string | undefined;
  /**
   * HostModules linked between the HAL module and the loaded module, in
   * order, so that its call ops reach them. They must share one Instance,
   * which load() then uses instead of making its own (and does not close).
   */
  imports?: readonly HostModule[] | undefined;
  /**
   * ONNX models only: input name -> dimensions, binding symbolic ones; those
   * left out are bound by each invocation's inputs, one specialisation per
   * shape, the 8 most recently used kept (docs/onnx.md).
   */
  shapes?: { readonly [input: string]: readonly number[] } | undefined;
  /** ONNX models only: trace every node's outputs (true) or those of the nodes whose key matches, keyed by the node's name. */
  traceNodes?: boolean | RegExp | undefined;
}

/** halrt.onnx.convert's options (docs/onnx.md). */
export interface OnnxOptions {
  /** The module's name. Default: the file's name made a name ('hello_deepa'), or 'onnx' for bytes. */
  name?: string | undefined;
  /** Input name -> dimensions: required for every symbolic dimension (a symbol one input's shape binds is bound in every input that has it). */
  shapes?: { readonly [input: string]: readonly number[] } | undefined;
  /** A trace op after each node (or each whose key matches), keyed by the node's name, or `<op_type>_<index>`. */
  traceNodes?: boolean | RegExp | undefined;
  /**
   * The traces' mode, written on each trace op (default: none, so the
   * HalModule's traceMode applies). With 'health', elementwise chains are
   * fused across traced nodes and report their health from
   * chain_health_f32's counts (docs/onnx.md, "Speed").
   */
  traceMode?: TraceMode | undefined;
  /** Where external data files are, for a model given as bytes. */
  baseDir?: string | undefined;
}

/** ONNX models as halrt modules (docs/onnx.md). */
export const onnx: {
  /**
   * The halrt.module/1 description of a model (a file path or its bytes):
   * function `main` with the graph's inputs and outputs by their ONNX
   * names, weights as constants (TypedArrays). An op, attribute, dtype or
   * dimension it does not support throws, naming the node.
   */
  convert(model: string | Uint8Array | ArrayBuffer, options?: OnnxOptions): ModuleDescription;
};

/**
 * A module file made ready by halrt.load(): it owns an Instance, a Device, a
 * HalModule, the Module and a Context, and has each function as a method
 * (`m.main(x, w)` or `m.main({x, w})`: fn.invoke with those inputs), except
 * a function named like one of its own members or `then` (reach it by
 * `functions`).
 */
export class LoadedModule implements Disposable {
  /** Not callable: use halrt.load(). */
  private constructor();
  /** The module's name. */
  readonly name: string;
  readonly instance: Instance;
  readonly device: Device;
  readonly halModule: HalModule;
  /**
   * The Module and Context. For an ONNX model whose symbolic dimensions
   * each invocation binds: those of the specialisation used last; read
   * before the first invocation, they throw FAILED_PRECONDITION.
   */
  readonly module: Module;
  readonly context: Context;
  /**
   * The module's functions by (bare) name. For an ONNX model whose
   * symbolic dimensions each invocation binds, `main` is an object with
   * the same members that runs each invocation on the specialisation for
   * its inputs' dimensions (its inputs and outputs show them as -1); its
   * prepare() throws FAILED_PRECONDITION (give halrt.load options.shapes).
   */
  readonly functions: { readonly [name: string]: HalrtFunction };
  /** Whether close() was called (the context is closed). */
  readonly closed: boolean;
  /** Closes the functions, context, module, HAL module, device and the Instance it made (not that of options.imports). Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

/**
 * A LoadedModule's method for one function: `m.main(x, w, options?)` or
 * `m.main({x, w}, options?)`, which is fn.invoke with those inputs and
 * options. Anything else after the inputs rejects with INVALID_ARGUMENT.
 */
export interface LoadedFunction {
  (inputs: NamedInputs, options: InvokeOptions & { named: true; read: true }): Promise<{ [name: string]: HostArray }>;
  (inputs: NamedInputs, options: InvokeOptions & { named: true; read?: false | undefined }): Promise<{ [name: string]: BufferView }>;
  (inputs: NamedInputs, options: InvokeOptions & { named?: false | undefined; read: true }): Promise<HostArray[]>;
  (inputs: NamedInputs, options?: InvokeOptions & { named?: false | undefined; read?: false | undefined }): Promise<BufferView[]>;
  (...inputs: InvokeInput[]): Promise<BufferView[]>;
  /** Positional inputs then options: the result as fn.invoke gives it for them. */
  (...args: [...InvokeInput[], InvokeOptions & InvokeOutputOptions]): Promise<BufferView[] | HostArray[] | { [name: string]: BufferView | HostArray }>;
}

/** The methods a LoadedModule has, one per function. */
export interface LoadedFunctions {
  readonly [name: string]: LoadedFunction;
}

/**
 * Loads a module file (Module.load), or an ONNX model (recognised by its
 * content; halrt.onnx.convert with `shapes`, `traceNodes` and the
 * HalModule's `traceMode`), and links it
 * on a new device (`options.device`, default 'auto') with a HalModule given
 * the other options. Rejects with the first failure, having closed what it
 * made.
 */
export function load(file: string, options?: LoadOptions): Promise<LoadedModule & LoadedFunctions>;

/** A tensor read from a .npy file: data is the dtype's array (f16 as bits). */
export interface NpyArray {
  dtype: DType;
  shape: number[];
  data: HostArray;
}

/**
 * NumPy .npy files, as the CLI's `--input x=@x.npy` and the npy sink use
 * them. bf16 has no NumPy type: it is written as '<u2' raw bits and reads
 * back as u16.
 */
export const npy: {
  /**
   * A .npy file (a path: a regular file of at most 4 GiB) or its bytes,
   * format 1.0, 2.0 or 3.0. Errors name the file and what is wrong
   * (INVALID_ARGUMENT; NOT_FOUND for a file that cannot be read).
   */
  read(source: string | Uint8Array | ArrayBuffer | SharedArrayBuffer): NpyArray;
  /**
   * Writes `data` (what device.tensor() takes) as a version 1.0 .npy file:
   * dtype defaults to the data's (f32 for numbers), shape to the nesting (a
   * TypedArray's: its length). INVALID_ARGUMENT for bad data, dtype or
   * shape; UNAVAILABLE when the file cannot be written.
   */
  write(file: string, data: HostData, options?: { dtype?: DType; shape?: readonly number[] }): void;
};

/** The launch of a CudaKernel call. */
export interface CudaLaunch {
  /** Blocks in the grid: a count, or [x, y?, z?]. */
  grid: number | readonly number[];
  /** Threads per block: a count, or [x, y?, z?]; default 1. */
  block?: number | readonly number[];
  /** Resolve with the buffer arguments read to host arrays (the views it uploaded are closed). */
  read?: boolean;
  /** Rejects the call with CANCELLED when aborted (the kernel itself still runs). */
  signal?: AbortSignalLike;
}

/** One argument of a CudaKernel call: a buffer (a BufferView on the kernel's device, or host data uploaded for the call) or a scalar. */
export type CudaArgument = BufferView | HostData | number | bigint;

/**
 * A CUDA C++ kernel as a function (halrt.cudaKernel): `k({grid, block}, ...args)`
 * runs it once with one argument per declared parameter and resolves with
 * the buffer arguments, in order, as BufferViews (the ones given, written in
 * place, and new views of host data, which the caller owns), or read to
 * host arrays with `read: true`.
 */
export interface CudaKernel extends Disposable {
  (launch: CudaLaunch & { read: true }, ...args: CudaArgument[]): Promise<HostArray[]>;
  (launch: CudaLaunch, ...args: CudaArgument[]): Promise<BufferView[]>;
  /** The kernel's name, as given. */
  readonly name: string;
  readonly params: readonly CudaParamType[];
  /** The CUDA device it runs on. */
  readonly device: Device;
  readonly closed: boolean;
  /** Releases its programs, and the Instance and Device it made (not a Device it was given). Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

export interface CudaKernelOptions {
  /** The kernel's parameter types, in order; at least one 'buffer'. */
  params: readonly CudaParamType[];
  /** A CUDA device URI (default 'cuda'), or a Device to run on (not closed with the kernel). */
  device?: string | Device;
  /** NVRTC options ('-DN=4', '-I/path', ...; not -arch: the device decides). */
  options?: readonly string[];
}

/**
 * Compiles `source` with NVRTC (through the kernel cache) and loads kernel
 * `name` (an extern "C" kernel's name, or a C++ name expression such as
 * 'scale<float>') on a CUDA device. Throws INVALID_ARGUMENT with NVRTC's log
 * for a compile error, UNAVAILABLE without CUDA or NVRTC.
 */
export function cudaKernel(source: string, name: string, options: CudaKernelOptions): CudaKernel;

export interface NvrtcCompileOptions {
  /** 'sm_XY' or 'compute_XY' (NVRTC must list XY); default: sm_ of the newest NVRTC lists. */
  arch?: string;
  /** NVRTC options, in order; not -arch or --gpu-architecture. */
  options?: readonly string[];
  /** What logs call the source (default 'kernel.cu'); an absolute path makes quoted includes resolve next to it. */
  name?: string;
}

export interface NvrtcCompileResult {
  ptx: string;
  /** NVRTC's whole log: warnings, or '' */
  log: string;
  /** The architecture compiled for. */
  arch: string;
  /** NVRTC's version, 'major.minor'. */
  version: string;
}

/** A compile error: INVALID_ARGUMENT, with NVRTC's whole log (the message shows its first 640 bytes). */
export interface NvrtcCompileError extends HalrtError {
  log: string;
}

export const nvrtc: {
  /**
   * Compiles CUDA C++ to PTX on the calling thread; needs NVRTC, not a GPU.
   * Throws an NvrtcCompileError for a compile error, UNAVAILABLE without NVRTC.
   */
  compile(source: string, options?: NvrtcCompileOptions): NvrtcCompileResult;
};

/** halrt.compare options (docs/compare.md has the rules). */
export interface CompareOptions {
  /** The function's bare name ('main'). Default: the module's only function. */
  function?: string | undefined;
  /** Device URIs, at least 2; the first is the reference. Default ['local-sync', 'local-task']. */
  devices?: readonly string[] | undefined;
  /** Relative tolerance, >= 0 and finite. Default 1e-5. */
  rtol?: number | undefined;
  /** Absolute tolerance, >= 0 and finite. Default 1e-8. */
  atol?: number | undefined;
  /** Float elements at most this many ULPs apart (in their dtype) also agree: an integer >= 0. Default 0. */
  ulps?: number | undefined;
  /** An ONNX model's input dimensions (as halrt.load's `shapes`). */
  shapes?: { readonly [input: string]: readonly number[] } | undefined;
}

/** Where two devices first disagree (CompareResult.first). */
export interface Divergence {
  /** [the reference device, the device that differs from it]. */
  devices: [string, string];
  /**
   * 'value': an element beyond tolerance; 'structure': the traces at this
   * point differ in key, tensor count, name, dtype or shape; 'count': one
   * device traced more than the other.
   */
  what: 'value' | 'structure' | 'count';
  /** What differs, in words ("t[1][2] is 7 on cuda but 7.000000476837158 on local-sync"). */
  message: string;
  /** The trace key ('main:1:add_f32', a trace op's key, or 'outputs'). */
  key: string;
  /** 'module.function'. */
  function: string;
  /** The op index in the function body; null for the outputs. */
  op: number | null;
  /** The dispatch's kernel (from its traceDispatches key); null for a trace op or the outputs. */
  kernel: string | null;
  /** With what 'value': the tensor's name, dtype and the element's index in every dimension. */
  tensor?: string;
  dtype?: DType;
  index?: number[];
  /** With what 'value': [reference element, other element] (f16/bf16 as numbers; 64-bit integers as BigInts). */
  values?: [number | bigint, number | bigint];
  /** With what 'value': |a - b|, |a - b| / |b| (b the reference's) and the ULP distance (null for integer dtypes). */
  abs?: number;
  rel?: number;
  ulps?: number | null;
}

/** How one key compared between the reference and one other device. */
export interface KeySummary {
  key: string;
  /** The device compared with the reference. */
  device: string;
  /** Elements compared, over all tensors of the key. */
  elements: number;
  /** Elements beyond tolerance. */
  mismatches: number;
  /** The largest distances (NaN when a NaN met a number; maxUlps over the float tensors, null for a key that has none). */
  maxAbs: number;
  maxRel: number;
  maxUlps: number | null;
}

/** What halrt.compare resolves with. */
export interface CompareResult {
  /** Whether no divergence was found. */
  agree: boolean;
  devices: string[];
  /** 'module.function'. */
  function: string;
  /** The first divergence in program order (earliest trace; ties go to the earlier device), or null. */
  first: Divergence | null;
  /** Per other device, per key in program order (keys of traces that differ in structure are left out). */
  summary: KeySummary[];
}

/**
 * Runs a function on each of `options.devices` in turn, every dispatch
 * traced (traceDispatches) besides the module's own trace ops and the
 * outputs last, and compares each device's traces with the first device's
 * in program order. `module`: a module file path, an ONNX model's path
 * (every node traced by name instead of every dispatch), a ModuleBuilder or
 * a module description object; `inputs`: host data as invoke() takes it (no
 * BufferViews). Everything it makes is closed before it settles; failures
 * reject with a HalrtError naming the argument.
 */
export function compare(
  module: string | ModuleBuilder | ModuleDescription,
  inputs: readonly HostData[] | { readonly [name: string]: HostData },
  options?: CompareOptions,
): Promise<CompareResult>;

/**
 * f16 (IEEE binary16) bits of numbers, rounded to nearest even (beyond the
 * largest finite half: ±Infinity; NaN: 0x7e00). A number gives a number.
 */
export function toF16Bits(values: number): number;
export function toF16Bits(values: ArrayLike<number>): Uint16Array;
/** The numbers of f16 bits (every f16 value is exact in a Float32Array). */
export function fromF16Bits(bits: number): number;
export function fromF16Bits(bits: Uint16Array | readonly number[]): Float32Array;
/** bf16 bits (the upper half of an f32) of numbers, rounded to nearest even. */
export function toBF16Bits(values: number): number;
export function toBF16Bits(values: ArrayLike<number>): Uint16Array;
/** The numbers of bf16 bits. */
export function fromBF16Bits(bits: number): number;
export function fromBF16Bits(bits: Uint16Array | readonly number[]): Float32Array;

/** What halrt.format needs to know of the data: a BufferView or a TraceTensor has both. */
export interface FormatOptions<D extends DType = DType> {
  dtype: D;
  shape: readonly number[];
  /**
   * A tensor of more elements (an empty one: of more innermost `[]`) is
   * summarised: each dimension longer than 6 shows its first and last 3
   * entries with `...` between. An integer in [2, 2^30]; default 16, as
   * halrt.sinks.stdio().
   */
  maxElements?: number | undefined;
}

/**
 * The text of a tensor, exactly as the stdio sink prints it after `=`:
 * nested brackets with spaces (`[[1 2 3] [4 5 6]]`; a scalar is its number
 * alone), summarised beyond `maxElements` elements (`[1 2 3 ... 98 99 100]`).
 * Numbers as formatNumber writes them. `data` is the dtype's array (what
 * read() returns: f16 and bf16 as bits) with as many elements as the shape;
 * anything else is INVALID_ARGUMENT naming the option.
 *
 * @example halrt.format(await y.read(), y)   // '[[0.1 0.2] [-0 1e-7]]'
 */
export function format<D extends DType>(data: TypedArrayOf<D>, options: FormatOptions<D>): string;

/**
 * The text of one value of `dtype`. Floats: the fewest significant digits
 * (1 to 17), rounded half away from zero, that read back (as a double, then
 * rounded to the dtype) as the value, laid out as Number#toString does
 * (`0.1`, `100`, `0.000001`, `1e-7`, `1.5e+21`); `NaN`, `Infinity`,
 * `-Infinity`, `-0`. An f32 0.1 is `0.1`, an f16 256.25 is `256.3`. Integers
 * exactly, bool as `true`/`false`. A float must be exact in the dtype (or
 * NaN), an integer (a number or BigInt, not a boolean) in its range: else
 * INVALID_ARGUMENT.
 */
export function formatNumber(value: number, dtype: DType): string;
export function formatNumber(value: bigint, dtype: Exclude<DType, 'f16' | 'bf16' | 'f32' | 'f64'>): string;
export function formatNumber(value: boolean, dtype: 'bool'): string;

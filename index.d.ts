// Type definitions for halrt. Written by hand; keep in step with lib/ and
// src/napi/.

/// <reference types="node" />

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

/** Every TypedArray that device.tensor() accepts as data. */
export type TensorData = DTypeArrayMap[DType] | Uint8ClampedArray;

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
  /** Bytes; 0 when unknown. */
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
  /** Releases the instance. Idempotent. Devices already created stay usable. */
  close(): void;
  [Symbol.dispose](): void;
}

/** A device: where tensors live. Made by Instance.createDevice(). */
export class Device implements Disposable {
  /** Not callable: use instance.createDevice(). */
  private constructor();
  readonly info: DeviceInfo;
  /** A tensor holding a copy of `data`, dtype inferred from the array type. */
  tensor<A extends TensorData>(data: A, shape: readonly number[]): BufferView<DTypeOf<A>>;
  /** A tensor holding a copy of `data`, which must be dtype's TypedArray. */
  tensor<D extends DType>(
    data: D extends 'u8' ? Uint8Array | Uint8ClampedArray : TypedArrayOf<D>,
    shape: readonly number[],
    dtype: D,
  ): BufferView<D>;
  /** A zero-filled tensor. */
  empty<D extends DType>(shape: readonly number[], dtype: D): BufferView<D>;
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
  /** A copy of the contents, after all work submitted before it. */
  read(): Promise<TypedArrayOf<D>>;
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

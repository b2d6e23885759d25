'use strict';
// Host data to the TypedArray device.tensor() copies: nested Arrays (shape
// inferred), TypedArrays converted to another dtype, Buffer/ArrayBuffer
// bytes. Conversions are exact or well defined (to a float dtype: rounding
// to nearest, ties to even); anything else is INVALID_ARGUMENT naming the
// element. The native tensor() then validates shape and dtype as always.

const { HalrtError, invalid } = require('./errors');
const util = require('util');
const half = require('./half');
const { roundBigInt } = require('./float_round');

// The TypedArray that carries each dtype (f16/bf16: bits; bool: 0/1).
// No prototype: a dtype such as 'constructor' or '__proto__' is unknown.
const ARRAY_OF = {
  __proto__: null,
  f16: Uint16Array, bf16: Uint16Array, f32: Float32Array, f64: Float64Array,
  i8: Int8Array, u8: Uint8Array, i16: Int16Array, u16: Uint16Array,
  i32: Int32Array, u32: Uint32Array, i64: BigInt64Array, u64: BigUint64Array, bool: Uint8Array,
};
const INTEGER_RANGE = {
  __proto__: null,
  i8: [-128, 127], u8: [0, 255], i16: [-32768, 32767], u16: [0, 65535],
  i32: [-(2 ** 31), 2 ** 31 - 1], u32: [0, 2 ** 32 - 1],
};
// The most dimensions a tensor has (HRT_HAL_MAX_RANK).
const MAX_RANK = 8;
const BIGINT_RANGE = { __proto__: null, i64: [-(2n ** 63n), 2n ** 63n - 1n], u64: [0n, 2n ** 64n - 1n] };

function isTypedArray(value) {
  return ArrayBuffer.isView(value) && !(value instanceof DataView);
}

// Raw bytes: a Buffer, an ArrayBuffer or a SharedArrayBuffer.
function isBytes(value) {
  return Buffer.isBuffer(value) || util.types.isAnyArrayBuffer(value);
}

// Is `value` host data prepare() takes (not a Proxy: the binding refuses those unread)?
function isHostData(value) {
  if (util.types.isProxy(value)) return false;
  const type = typeof value;
  if (type === 'number' || type === 'bigint' || type === 'boolean') return true;
  return type === 'object' && value !== null &&
    (isTypedArray(value) || Array.isArray(value) || util.types.isAnyArrayBuffer(value));
}

// The name of a TypedArray's own type ('Float32Array'; a Buffer's is
// 'Uint8Array'), undefined for anything else: read from the array itself,
// which no `constructor` property or subclass changes.
const toStringTag = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array).prototype, Symbol.toStringTag).get;
const typedArrayName = (array) => toStringTag.call(array);

// Does the native tensor() take `array` for `dtype` as it is?
function carries(dtype, array) {
  const name = typedArrayName(array);
  return name !== undefined && (name === ARRAY_OF[dtype]?.name || dtype === 'u8' && name === 'Uint8ClampedArray');
}

function sameShape(a, b) {
  return a.length === b.length && a.every((dim, i) => dim === b[i]);
}

function shapeText(shape) {
  return `[${shape.join(',')}]`;
}

// `data[i][j]` of the flat index in a tensor of `shape` (a scalar: `data`).
function elementPath(name, shape, index) {
  if (shape.length === 0) return name;
  if (shape.length === 1) return `${name}[${index}]`;
  const parts = [];
  for (let d = shape.length - 1; d >= 0; --d) {
    parts.unshift(index % shape[d]);
    index = Math.floor(index / shape[d]);
  }
  return `${name}${parts.map((p) => `[${p}]`).join('')}`;
}

const isElement = (value) => ['number', 'bigint', 'boolean'].includes(typeof value);

// The shape of a nested Array and its first element, after checking that
// every row has the shape's length and every element is a number, BigInt or
// boolean; the first ragged row, stray element or hole (a sparse Array's
// empty slot) is named by its path. Nothing of the data's length is built,
// so a huge sparse Array fails at its first hole.
function flatten(method, name, data) {
  const shape = [];
  let level = data;
  for (; Array.isArray(level); level = level[0]) {
    // A tensor has at most MAX_RANK dimensions; this also ends an Array
    // that contains itself.
    if (shape.length === MAX_RANK) {
      throw invalid(`${method}: ${name} nests Arrays more than ${MAX_RANK} deep (a tensor has at most ${MAX_RANK} dimensions)`);
    }
    shape.push(level.length);
    if (level.length === 0) break;
  }
  const walk = (array, depth, path) => {
    if (array.length !== shape[depth]) {
      throw invalid(`${method}: ${path} has ${array.length} element${array.length === 1 ? '' : 's'} but ${path === name ? 'it' : 'its siblings have'} ${shape[depth]} (ragged ${name})`);
    }
    for (let i = 0; i < array.length; ++i) {
      const item = array[i];
      if (depth + 1 < shape.length) {
        if (!Array.isArray(item)) {
          const got = i in array ? half.describe(item) : 'a hole';
          throw invalid(`${method}: ${path}[${i}] must be an Array of ${shape[depth + 1]} elements (got ${got}) (ragged ${name})`);
        }
        walk(item, depth + 1, `${path}[${i}]`);
      } else if (!isElement(item)) {
        if (Array.isArray(item)) throw invalid(`${method}: ${path}[${i}] is an Array where its siblings are elements (ragged ${name})`);
        const got = i in array ? half.describe(item) : 'a hole (an empty slot of a sparse Array)';
        throw invalid(`${method}: ${path}[${i}] must be a number, BigInt or boolean (got ${got})`);
      } else {
        leaves.push(item);
      }
    }
  };
  const leaves = [];
  walk(data, 0, name);
  return { shape, first: leaves[0], leaves };
}

// The dtype of plain elements when none is given, from the first.
function defaultDtype(first) {
  if (typeof first === 'boolean') return 'bool';
  if (typeof first === 'bigint') return 'i64';
  return 'f32';
}

// A new `dtype` array of `count` elements; RESOURCE_EXHAUSTED naming `name`
// when the host cannot hold it.
function allocate(method, name, dtype, count) {
  const Type = ARRAY_OF[dtype];
  try {
    return new Type(count);
  } catch (error) {
    throw new HalrtError(`${method}: ${name} as ${dtype} needs ${count * Type.BYTES_PER_ELEMENT} bytes of host memory, more than can be had`,
      'RESOURCE_EXHAUSTED', { cause: error });
  }
}

// Element `value` (a number, BigInt or boolean) converted to `dtype`'s
// array; `at()` names it in errors.
function element(method, at, value, dtype) {
  if (typeof value === 'boolean') value = value ? 1 : 0;
  switch (dtype) {
    case 'f16':
    case 'bf16':
      return half.encode(dtype === 'f16' ? half.F16 : half.BF16, typeof value === 'bigint' ? roundBigInt(value, dtype) : value);
    case 'f32':
    case 'f64':
      return typeof value === 'bigint' ? roundBigInt(value, dtype) : value;
    case 'i64':
    case 'u64': {
      if (typeof value === 'number' && !Number.isSafeInteger(value)) {
        throw invalid(`${method}: ${at()} is ${value}, not ${Number.isInteger(value) ? 'exact as a number (beyond 2^53; use a BigInt)' : 'an integer'} for ${dtype}`);
      }
      const big = BigInt(value);
      const [lo, hi] = BIGINT_RANGE[dtype];
      if (big < lo || big > hi) throw invalid(`${method}: ${at()} is ${big}, outside the range of ${dtype}`);
      return big;
    }
    case 'bool':
      if (value !== 0 && value !== 1 && value !== 0n && value !== 1n) {
        throw invalid(`${method}: ${at()} is ${value}; bool data must be true, false, 0 or 1`);
      }
      return Number(value);
    default: {
      const [lo, hi] = INTEGER_RANGE[dtype];
      if (typeof value === 'number' && !Number.isInteger(value)) {
        throw invalid(`${method}: ${at()} is ${value}, not an integer for ${dtype}`);
      }
      const number = Number(value);
      if (number < lo || number > hi) throw invalid(`${method}: ${at()} is ${value}, outside the range of ${dtype}`);
      return number;
    }
  }
}

// A TypedArray's or a scalar's `values` converted into `dtype`'s array.
function convert(method, name, values, dtype, shape) {
  const out = allocate(method, name, dtype, values.length);
  for (let i = 0; i < values.length; ++i) {
    out[i] = element(method, () => elementPath(name, shape, i), values[i], dtype);
  }
  return out;
}

// The elements of a nested Array, as flatten read and checked them
// (`leaves`, row-major: each element read once), converted into `dtype`'s
// array.
function convertNested(method, name, leaves, dtype, shape) {
  const out = allocate(method, name, dtype, leaves.length);
  leaves.forEach((item, index) => {
    out[index] = element(method, () => elementPath(name, shape, index), item, dtype);
  });
  return out;
}

// Buffer / ArrayBuffer bytes reinterpreted as `dtype` (little-endian host).
function fromBytes(method, name, bytes, dtype) {
  if (dtype === undefined) {
    throw invalid(`${method}: ${name} is ${half.describe(bytes)} of raw bytes; give a dtype to reinterpret them`);
  }
  const Type = ARRAY_OF[dtype];
  let view = bytes;
  if (!Buffer.isBuffer(bytes)) {
    try {
      view = new Uint8Array(bytes);
    } catch {
      throw invalid(`${method}: ${name} is a detached ArrayBuffer (its memory was transferred away)`);
    }
  }
  if (view.byteLength % Type.BYTES_PER_ELEMENT !== 0) {
    throw invalid(`${method}: ${name} has ${view.byteLength} bytes, not a multiple of ${Type.BYTES_PER_ELEMENT} (the size of ${dtype})`);
  }
  const copy = new Uint8Array(view.byteLength);
  copy.set(view);
  return new Type(copy.buffer);
}

// {data, shape, dtype} ready for the native tensor(). A nested Array's
// shape is inferred when `shape` is undefined or null (a number, BigInt or
// boolean is a scalar); a given shape must be the nesting's, except that a
// flat Array or a scalar takes any shape of its element count (checked
// natively). TypedArrays and bytes need a shape.
function prepare(method, name, data, shape, dtype) {
  if (util.types.isProxy(data)) return refuse(method, name, 'a Proxy'); // its traps never run
  const known = typeof dtype === 'string' && ARRAY_OF[dtype] !== undefined;
  if (Buffer.isBuffer(data) && (!known || carries(dtype, data))) {
    return { data, shape, dtype }; // its bytes as u8 (the native call names a bad dtype)
  }
  // An unknown dtype is left to the native call, which names the valid ones.
  if (util.types.isAnyArrayBuffer(data) && dtype !== undefined && !known) return { data: new Uint8Array(0), shape, dtype };
  if (isBytes(data)) {
    return { data: fromBytes(method, name, data, dtype), shape, dtype };
  }
  if (isTypedArray(data)) {
    if (!known || carries(dtype, data)) return { data, shape, dtype };
    return { data: convert(method, name, data, dtype, [data.length]), shape, dtype };
  }
  if (isHostData(data)) {
    const { shape: inferred, first, leaves } = Array.isArray(data) ? flatten(method, name, data) : { shape: [], first: data };
    const target = dtype === undefined ? defaultDtype(first) : dtype;
    const outShape = shape === undefined || shape === null ? inferred : shape;
    // A shape of more than MAX_RANK dimensions is left to the native call
    // (which names it without walking a long or sparse Array).
    const numbers = Array.isArray(outShape) && outShape.length <= MAX_RANK && outShape.every((d) => typeof d === 'number');
    if (inferred.length > 1 && numbers && !sameShape(inferred, outShape)) {
      throw invalid(`${method}: ${name} is nested with shape ${shapeText(inferred)} but shape is ${shapeText(outShape)} (nested Arrays are not reshaped; give a flat Array to reshape)`);
    }
    // An unknown dtype is left to the native call, which names the valid ones.
    if (typeof target !== 'string' || ARRAY_OF[target] === undefined) return { data: new Uint8Array(0), shape: outShape, dtype: target };
    const converted = Array.isArray(data)
      ? convertNested(method, name, leaves, target, inferred)
      : convert(method, name, [data], target, inferred);
    return { data: converted, shape: outShape, dtype: target };
  }
  return refuse(method, name, half.describe(data));
}

// Host data `value` (called `label`) as the TypedArray of a tensor of
// `dtype` and `shape` (`what` names it): a TypedArray of the dtype's array
// type, Buffer/ArrayBuffer bytes of it, or (nested) Arrays and scalars
// converted to it, with exactly the shape's elements.
function declared(method, what, label, value, dtype, shape) {
  const count = shape.reduce((n, d) => n * d, 1);
  let data = value;
  if (isBytes(value)) {
    data = prepare(method, label, value, shape, dtype).data;
  } else if (isTypedArray(value) && !carries(dtype, value)) {
    throw invalid(`${method}: ${what} must be ${dtype} in a ${ARRAY_OF[dtype].name} (${label} is ${half.describe(value)})`);
  }
  if (isTypedArray(data)) {
    if (data.length !== count) {
      throw invalid(`${method}: ${what} must have ${count} elements for shape ${shapeText(shape)} (${label} has ${data.length})`);
    }
    return data;
  }
  const prepared = prepare(method, label, value, undefined, dtype);
  if (!sameShape(prepared.shape, shape)) {
    throw invalid(`${method}: ${what} must have shape ${shapeText(shape)} (${label} has ${shapeText(prepared.shape)})`);
  }
  return prepared.data;
}

function refuse(method, name, got) {
  throw invalid(`${method}: ${name} must be a TypedArray, an Array, a number, BigInt or boolean, or bytes (a Buffer, ArrayBuffer or SharedArrayBuffer) (got ${got})`);
}

module.exports = { ARRAY_OF, MAX_RANK, carries, declared, prepare, shapeText, sameShape, isBytes, isTypedArray, isHostData, typedArrayName };

'use strict';
// NumPy .npy files (format 1.0, 2.0 and 3.0 on read; 1.0 on write) to and
// from {dtype, shape, data} tensors. The descrs match the native npy sink
// (src/modules/npy_sink.c): bf16 has no NumPy type and is written as '<u2'
// raw bits, so it reads back as u16.

const { HalrtError } = require('./errors');

const DESCRS = {
  f16: '<f2', bf16: '<u2', f32: '<f4', f64: '<f8', i8: '|i1', u8: '|u1', i16: '<i2',
  u16: '<u2', i32: '<i4', u32: '<u4', i64: '<i8', u64: '<u8', bool: '|b1',
};
const DTYPE_OF_DESCR = {
  '<f2': 'f16', '<f4': 'f32', '<f8': 'f64', '|i1': 'i8', '<i1': 'i8', '|u1': 'u8', '<u1': 'u8',
  '<i2': 'i16', '<u2': 'u16', '<i4': 'i32', '<u4': 'u32', '<i8': 'i64', '<u8': 'u64', '|b1': 'bool',
};
const ARRAYS = {
  f16: Uint16Array, bf16: Uint16Array, f32: Float32Array, f64: Float64Array, i8: Int8Array,
  u8: Uint8Array, i16: Int16Array, u16: Uint16Array, i32: Int32Array, u32: Uint32Array,
  i64: BigInt64Array, u64: BigUint64Array, bool: Uint8Array,
};
const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);

function fail(what, message) {
  throw new HalrtError(`${what}: ${message}`, 'INVALID_ARGUMENT');
}

// Parses the header dict NumPy writes: {'descr': ..., 'fortran_order': ..., 'shape': (...), }
function parseHeader(text, what) {
  const descr = /'descr':\s*'([^']+)'/.exec(text);
  const order = /'fortran_order':\s*(True|False)/.exec(text);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(text);
  if (!descr || !order || !shape) fail(what, 'malformed .npy header');
  if (order[1] === 'True') fail(what, 'Fortran-ordered arrays are not supported');
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map(Number);
  if (dims.some((d) => !Number.isSafeInteger(d) || d < 0)) fail(what, `bad shape (${shape[1]})`);
  const dtype = DTYPE_OF_DESCR[descr[1]];
  if (!dtype) fail(what, `unsupported dtype '${descr[1]}' (little-endian numeric and bool only)`);
  return { dtype, shape: dims };
}

// parse(bytes, what) -> {dtype, shape, data}; `what` names the source in errors.
function parse(bytes, what = '.npy data') {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
  if (buffer.length < 10 || !buffer.subarray(0, 6).equals(MAGIC)) fail(what, 'not a .npy file');
  const major = buffer[6];
  const wide = major >= 2;
  if (major < 1 || major > 3) fail(what, `unsupported .npy version ${major}`);
  const headerLength = wide ? buffer.readUInt32LE(8) : buffer.readUInt16LE(8);
  const start = (wide ? 12 : 10) + headerLength;
  if (start > buffer.length) fail(what, 'truncated header');
  const header = buffer.subarray(wide ? 12 : 10, start).toString(major === 3 ? 'utf8' : 'latin1');
  const { dtype, shape } = parseHeader(header, what);
  const ArrayType = ARRAYS[dtype];
  const count = shape.reduce((a, b) => a * b, 1);
  const byteLength = count * ArrayType.BYTES_PER_ELEMENT;
  if (buffer.length - start !== byteLength) {
    fail(what, `holds ${buffer.length - start} data bytes but shape [${shape}] of ${dtype} needs ${byteLength}`);
  }
  const data = new ArrayType(count);
  Buffer.from(data.buffer).set(buffer.subarray(start, start + byteLength));
  return { dtype, shape, data };
}

// serialize({dtype, shape, data}) -> Buffer holding a version 1.0 .npy file.
function serialize({ dtype, shape, data }) {
  const descr = DESCRS[dtype];
  if (!descr) fail('npy', `unknown dtype '${dtype}'`);
  const tuple = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${tuple}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat(Math.ceil(total / 64) * 64 - total) + '\n';
  const preamble = Buffer.alloc(10);
  MAGIC.copy(preamble);
  preamble[6] = 1;
  preamble[7] = 0;
  preamble.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([preamble, Buffer.from(header, 'latin1'), body]);
}

module.exports = { parse, serialize, DESCRS, ARRAYS };

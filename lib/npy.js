'use strict';
// NumPy .npy files (format 1.0, 2.0 and 3.0 on read; 1.0 on write) to and
// from {dtype, shape, data} tensors. The descrs match the native npy sink
// (src/modules/sinks/npy_sink.c): bf16 has no NumPy type and is written as '<u2'
// raw bits, so it reads back as u16.

const fs = require('fs');
const util = require('util');
const { HalrtError } = require('./errors');
const { readOptions } = require('./args');
const { LIMITS, readRegularFile } = require('./files');
const { describe } = require('./half');
const { MAX_RANK, isTypedArray, prepare, typedArrayName } = require('./host_data');

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

// The header is a Python dict literal that NumPy reads with ast.literal_eval
// and then checks (numpy/lib/format.py, _read_array_header): exactly the keys
// descr, fortran_order and shape; shape a tuple of ints; fortran_order a
// bool. This reader accepts the part of that language a header can sensibly
// hold, and rejects everything NumPy rejects:
// - strings in '' or "" without backslashes or line breaks;
// - True, False, None; decimal ints as Python writes them ("0", "12",
//   "1_000"; no leading zeros); floats only so that a bad shape is named;
// - tuples, lists and dicts of those, with optional trailing commas;
// - space, tab, form feed and line breaks between tokens; spaces and tabs
//   before the dict, nothing but whitespace after it.
// A key given twice keeps its last value, as in a Python dict literal.
// Stricter than NumPy (rejected here, accepted there): comments, escapes,
// string prefixes, hex/octal/binary ints, unary plus, parentheses around the
// dict and Python 2 "2L" ints. NumPy also refuses headers longer than 10000
// characters unless the file is trusted; so does this reader. Python refuses
// more than 200 nested brackets; this reader more than 32.
const MAX_HEADER_CHARACTERS = 10000;
const MAX_DEPTH = 32;
const WHITESPACE = ' \t\f\r\n';
const DECIMAL_INT = /-?(?:[1-9](?:_?[0-9])*|0(?:_?0)*)(?![\w.])/y;
const FLOAT = /-?(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)(?![\w.])/y;

class HeaderParser {
  constructor(text, what) {
    this.text = text;
    this.what = what;
    this.at = 0;
    this.depth = 0;
  }

  malformed(expected) {
    const near = JSON.stringify(this.text.slice(this.at, this.at + 16));
    fail(this.what, `malformed .npy header: expected ${expected} at character ${this.at} (${near})`);
  }

  skipWhitespace() {
    while (this.at < this.text.length && WHITESPACE.includes(this.text[this.at])) this.at += 1;
  }

  // A value as {kind, value, raw}: raw is its source text, for messages.
  value() {
    this.skipWhitespace();
    const start = this.at;
    const c = this.text[this.at];
    let node;
    if (c === "'" || c === '"') {
      node = { kind: 'string', value: this.string() };
    } else if (c === '(' || c === '[' || c === '{') {
      if (++this.depth > MAX_DEPTH) fail(this.what, `.npy header nests brackets more than ${MAX_DEPTH} deep`);
      node = c === '{' ? { kind: 'dict', value: this.dict() } : this.sequence(c);
      this.depth -= 1;
    } else {
      node = this.word();
    }
    return { ...node, raw: node.raw ?? this.text.slice(start, this.at) };
  }

  string() {
    const quote = this.text[this.at];
    const end = this.text.indexOf(quote, this.at + 1);
    const body = end < 0 ? '' : this.text.slice(this.at + 1, end);
    if (end < 0 || /[\\\x00-\x1f\x7f]/.test(body)) this.malformed('a string without escapes or control characters');
    this.at = end + 1;
    return body;
  }

  // (a, b), (a,), () are tuples; (a) is a; [..] is always a list.
  sequence(open) {
    const close = open === '(' ? ')' : ']';
    const start = this.at;
    const items = [];
    let trailingComma = false;
    this.at += 1;
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.at] === close) break;
      items.push(this.value());
      this.skipWhitespace();
      trailingComma = this.text[this.at] === ',';
      if (trailingComma) this.at += 1;
      else if (this.text[this.at] !== close) this.malformed(`',' or '${close}'`);
    }
    this.at += 1;
    if (open === '(' && items.length === 1 && !trailingComma) {
      return { ...items[0], raw: this.text.slice(start, this.at) };
    }
    return { kind: open === '(' ? 'tuple' : 'list', value: items };
  }

  // A Map of string keys; a repeated key keeps its last value.
  dict() {
    const entries = new Map();
    this.at += 1;
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.at] === '}') break;
      const key = this.value();
      if (key.kind !== 'string') fail(this.what, `.npy header key ${key.raw} is not one of 'descr', 'fortran_order', 'shape'`);
      this.skipWhitespace();
      if (this.text[this.at] !== ':') this.malformed("':'");
      this.at += 1;
      entries.set(key.value, this.value());
      this.skipWhitespace();
      if (this.text[this.at] === ',') this.at += 1;
      else if (this.text[this.at] !== '}') this.malformed("',' or '}'");
    }
    this.at += 1;
    return entries;
  }

  word() {
    for (const [name, value] of [['True', true], ['False', false], ['None', null]]) {
      if (this.text.startsWith(name, this.at) && !/[\w.]/.test(this.text[this.at + name.length] ?? '')) {
        this.at += name.length;
        return { kind: value === null ? 'none' : 'bool', value };
      }
    }
    for (const [pattern, kind] of [[DECIMAL_INT, 'int'], [FLOAT, 'float']]) {
      pattern.lastIndex = this.at;
      const match = pattern.exec(this.text);
      if (match) {
        this.at = pattern.lastIndex;
        return { kind, value: kind === 'int' ? BigInt(match[0].replaceAll('_', '')) : Number(match[0]) };
      }
    }
    return this.malformed('a string, number, True, False, None, tuple, list or dict');
  }

  // The whole header: one dict, then only whitespace.
  header() {
    while (this.text[this.at] === ' ' || this.text[this.at] === '\t') this.at += 1;
    if (this.text[this.at] !== '{') this.malformed("'{'");
    const entries = this.dict();
    this.skipWhitespace();
    if (this.at < this.text.length) this.malformed('the end of the header');
    return entries;
  }
}

// {dtype, shape} from the header text, checked as NumPy checks it.
function parseHeader(text, what) {
  const entries = new HeaderParser(text, what).header();
  const keys = [...entries.keys()].sort();
  if (keys.join() !== 'descr,fortran_order,shape') {
    fail(what, `.npy header has keys [${keys.join(', ')}]; it must have exactly descr, fortran_order and shape`);
  }
  const descr = entries.get('descr');
  const order = entries.get('fortran_order');
  const shape = entries.get('shape');
  if (order.kind !== 'bool') fail(what, `.npy header field 'fortran_order' must be True or False, not ${order.raw}`);
  const dims = shape.kind === 'tuple' && shape.value.every((d) => d.kind === 'int' && d.value >= 0n && d.value <= BigInt(Number.MAX_SAFE_INTEGER))
    ? shape.value.map((d) => Number(d.value)) : null;
  if (!dims) fail(what, `bad shape ${shape.raw}: .npy header field 'shape' must be a tuple of non-negative integers`);
  if (order.value) fail(what, 'Fortran-ordered arrays are not supported');
  const dtype = descr.kind === 'string' ? DTYPE_OF_DESCR[descr.value] : undefined;
  if (!dtype) fail(what, `unsupported dtype ${descr.raw} in .npy header field 'descr' (little-endian numeric and bool only)`);
  return { dtype, shape: dims };
}

const PREAMBLES = { 1: { length: 10, encoding: 'latin1' }, 2: { length: 12, encoding: 'latin1' }, 3: { length: 12, encoding: 'utf-8' } };

// The header text: latin1 in versions 1.0 and 2.0, UTF-8 in 3.0 (invalid
// UTF-8 and a byte order mark are errors, as in Python).
function decodeHeader(bytes, encoding, what) {
  // Every character takes at least one byte and at most four.
  if (bytes.length > 4 * MAX_HEADER_CHARACTERS) fail(what, `.npy header of ${bytes.length} bytes is longer than NumPy's limit of ${MAX_HEADER_CHARACTERS} characters`);
  let text = bytes.toString('latin1');
  if (encoding === 'utf-8') {
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch (error) {
      fail(what, `.npy version 3.0 header is not valid UTF-8 (${error.message})`);
    }
  }
  const characters = [...text].length;
  if (characters > MAX_HEADER_CHARACTERS) fail(what, `.npy header of ${characters} characters is longer than NumPy's limit of ${MAX_HEADER_CHARACTERS}`);
  return text;
}

// parse(bytes, what) -> {dtype, shape, data}; `what` names the source in errors.
function parse(bytes, what = '.npy data') {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
  if (buffer.length < 8 || !buffer.subarray(0, 6).equals(MAGIC)) fail(what, 'not a .npy file');
  const [major, minor] = [buffer[6], buffer[7]];
  const preamble = minor === 0 ? PREAMBLES[major] : undefined;
  if (!preamble) fail(what, `unsupported .npy version ${major}.${minor} (NumPy reads 1.0, 2.0 and 3.0)`);
  if (buffer.length < preamble.length) fail(what, `truncated header: ${buffer.length} bytes, the preamble needs ${preamble.length}`);
  const headerLength = major === 1 ? buffer.readUInt16LE(8) : buffer.readUInt32LE(8);
  const start = preamble.length + headerLength;
  if (start > buffer.length) fail(what, `truncated header: ${buffer.length} bytes, the header ends at byte ${start}`);
  const header = decodeHeader(buffer.subarray(preamble.length, start), preamble.encoding, what);
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

// halrt.npy.read(source): a .npy file (a path) or its bytes as
// {dtype, shape, data}; data is the dtype's array (bf16 and f16 as bits).
function read(source) {
  const caller = 'halrt.npy.read';
  if (typeof source === 'string') {
    const bytes = readRegularFile(source, { caller, maxBytes: LIMITS.npyInput, what: 'an .npy file' });
    return parse(bytes, `${caller}: ${source}`);
  }
  if (Buffer.isBuffer(source) || source instanceof Uint8Array || util.types.isAnyArrayBuffer(source)) {
    return parse(Buffer.from(source.buffer ?? source, source.byteOffset ?? 0, source.byteLength), caller);
  }
  throw new HalrtError(`${caller}: source must be a file path, a Buffer, a Uint8Array or an ArrayBuffer (got ${describe(source)})`, 'INVALID_ARGUMENT');
}

// halrt.npy.write(file, data, {dtype, shape}): `data` as device.tensor()
// takes it (a TypedArray, nested Arrays, a number) written as a version 1.0
// .npy file; dtype defaults to the data's (f32 for numbers), shape to the
// nesting (a TypedArray's: its length).
function write(file, data, options = {}) {
  const caller = 'halrt.npy.write';
  if (typeof file !== 'string' || file === '') {
    throw new HalrtError(`${caller}: file must be a path (got ${describe(file)})`, 'INVALID_ARGUMENT');
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new HalrtError(`${caller}: options must be an object {dtype, shape} (got ${describe(options)})`, 'INVALID_ARGUMENT');
  }
  const { dtype, shape } = readOptions(options, ['dtype', 'shape'], caller, 'options');
  if (dtype !== undefined && DESCRS[dtype] === undefined) {
    throw new HalrtError(`${caller}: options.dtype: unknown dtype ${describe(dtype)} (expected one of ${Object.keys(DESCRS).join(', ')})`, 'INVALID_ARGUMENT');
  }
  const prepared = prepare(caller, 'data', data, shape ?? undefined, dtype ?? dtypeOfArray(data));
  const outShape = prepared.shape ?? [prepared.data.length];
  if (!Array.isArray(outShape) || outShape.length > MAX_RANK || !outShape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new HalrtError(`${caller}: options.shape must be an Array of at most ${MAX_RANK} non-negative integers (got ${describe(outShape)})`, 'INVALID_ARGUMENT');
  }
  const count = outShape.reduce((n, d) => n * d, 1);
  if (count !== prepared.data.length) {
    throw new HalrtError(`${caller}: data has ${prepared.data.length} elements but shape [${outShape}] needs ${count}`, 'INVALID_ARGUMENT');
  }
  try {
    fs.writeFileSync(file, serialize({ dtype: prepared.dtype, shape: outShape, data: prepared.data }));
  } catch (error) {
    throw new HalrtError(`${caller}: cannot write '${file}': ${error.message}`, 'UNAVAILABLE', { cause: error });
  }
}

// The dtype a TypedArray carries (a Uint16Array is u16, not f16 bits);
// undefined for anything else, which prepare() infers (f32 for numbers).
const DTYPE_OF_ARRAY = {
  Float32Array: 'f32', Float64Array: 'f64', Int8Array: 'i8', Uint8Array: 'u8', Uint8ClampedArray: 'u8',
  Int16Array: 'i16', Uint16Array: 'u16', Int32Array: 'i32', Uint32Array: 'u32', BigInt64Array: 'i64', BigUint64Array: 'u64',
};
function dtypeOfArray(data) {
  return isTypedArray(data) ? DTYPE_OF_ARRAY[typedArrayName(data)] : undefined;
}

module.exports = { parse, serialize, read, write, DESCRS, ARRAYS };

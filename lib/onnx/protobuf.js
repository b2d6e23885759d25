'use strict';
// A protobuf wire-format reader driven by a schema: enough for ONNX's
// messages (lib/onnx/model.js), and no more. Written here instead of taking
// a protobuf library so that halrt keeps no runtime dependency, and so that
// every malformed input is a HalrtError naming the message path and byte
// offset (fuzzed by test/onnx-protobuf.test.js); nothing it reads is trusted.
//
// A schema maps field numbers to [name, type, repeated]; type is 'int64'
// (BigInt), 'int32' / 'enum' (Number), 'float', 'double', 'string',
// 'bytes' (a Uint8Array view of the input) or a nested schema. Repeated
// scalars are read packed or not. Unknown fields are skipped; groups (wire
// types 3, 4) are refused.

const { HalrtError } = require('../errors');

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const FIXED32 = 5;
const MAX_DEPTH = 32;

const decoder = new TextDecoder('utf-8', { fatal: true });

function fail(where, at, message) {
  throw new HalrtError(`onnx: ${where}: ${message} (byte ${at})`, 'INVALID_ARGUMENT');
}

// A cursor over bytes[pos, end).
class Cursor {
  constructor(bytes, pos, end, where) {
    this.bytes = bytes;
    this.pos = pos;
    this.end = end;
    this.where = where;
  }

  // A varint as a BigInt (at most 10 bytes, 64 bits).
  varint() {
    const { bytes } = this;
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; ++i) {
      if (this.pos >= this.end) fail(this.where, this.pos, 'truncated varint');
      const byte = bytes[this.pos++];
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return BigInt.asUintN(64, result);
      shift += 7n;
    }
    return fail(this.where, this.pos, 'varint longer than 10 bytes');
  }

  // A small varint (tags, lengths) as a Number; lengths must fit the input.
  smallVarint() {
    const value = this.varint();
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) fail(this.where, this.pos, `value ${value} too large`);
    return Number(value);
  }

  take(length) {
    if (length > this.end - this.pos) fail(this.where, this.pos, `field of ${length} bytes runs past the end (${this.end - this.pos} left)`);
    const start = this.pos;
    this.pos += length;
    return start;
  }

  skip(wire) {
    if (wire === VARINT) this.varint();
    else if (wire === FIXED64) this.take(8);
    else if (wire === FIXED32) this.take(4);
    else if (wire === LENGTH) this.take(this.smallVarint());
    else fail(this.where, this.pos, `wire type ${wire} is not supported`);
  }
}

const SCALAR_WIRE = { int64: VARINT, int32: VARINT, enum: VARINT, float: FIXED32, double: FIXED64 };

function readScalar(cursor, type) {
  const view = new DataView(cursor.bytes.buffer, cursor.bytes.byteOffset);
  switch (type) {
    case 'int64':
      return BigInt.asIntN(64, cursor.varint());
    case 'int32':
    case 'enum':
      return Number(BigInt.asIntN(32, cursor.varint()));
    case 'float':
      return view.getFloat32(cursor.take(4), true);
    default: // double
      return view.getFloat64(cursor.take(8), true);
  }
}

// Decodes bytes[start, end) as a message of `schema`. Repeated fields are
// Arrays (empty when absent); others hold the last value seen (a message
// seen again merged into the first), or are absent.
function decode(bytes, schema, where = 'model', start = 0, end = bytes.length, depth = 0) {
  if (depth > MAX_DEPTH) fail(where, start, `messages nested more than ${MAX_DEPTH} deep`);
  const cursor = new Cursor(bytes, start, end, where);
  const out = {};
  for (const number of Object.keys(schema)) {
    const [name, , repeated] = schema[number];
    if (repeated) out[name] = [];
  }
  while (cursor.pos < cursor.end) {
    const tagAt = cursor.pos;
    const tag = cursor.varint();
    const number = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (number === 0) fail(where, tagAt, 'field number 0');
    const field = Object.prototype.hasOwnProperty.call(schema, number) ? schema[number] : undefined;
    if (field === undefined) {
      cursor.skip(wire);
      continue;
    }
    const [name, type, repeated] = field;
    const at = `${where}.${name}`;
    let values;
    if (typeof type === 'object') {
      if (wire !== LENGTH) fail(at, tagAt, `wire type ${wire}, expected a message`);
      const length = cursor.smallVarint();
      const begin = cursor.take(length);
      const index = repeated ? `[${out[name].length}]` : '';
      values = [decode(bytes, type, `${at}${index}`, begin, begin + length, depth + 1)];
    } else if (type === 'string' || type === 'bytes') {
      if (wire !== LENGTH) fail(at, tagAt, `wire type ${wire}, expected bytes`);
      const length = cursor.smallVarint();
      const begin = cursor.take(length);
      const view = bytes.subarray(begin, begin + length);
      if (type === 'bytes') {
        values = [view];
      } else {
        try {
          values = [decoder.decode(view)];
        } catch {
          fail(at, begin, 'not UTF-8');
        }
      }
    } else if (wire === LENGTH && repeated) { // packed
      const length = cursor.smallVarint();
      const begin = cursor.take(length);
      const inner = new Cursor(bytes, begin, begin + length, at);
      values = [];
      while (inner.pos < inner.end) values.push(readScalar(inner, type));
    } else {
      if (wire !== SCALAR_WIRE[type]) fail(at, tagAt, `wire type ${wire}, expected ${SCALAR_WIRE[type]}`);
      values = [readScalar(cursor, type)];
    }
    if (repeated) {
      for (const value of values) out[name].push(value);
    } else if (typeof type === 'object' && out[name] !== undefined) {
      merge(out[name], values[0], type);
    } else {
      out[name] = values[values.length - 1];
    }
  }
  return out;
}

// A message field seen again merges into the first, as protobuf defines:
// repeated fields are appended, message fields merged, others replaced.
function merge(into, from, schema) {
  for (const [name, type, repeated] of Object.values(schema)) {
    if (repeated) {
      into[name].push(...from[name]);
    } else if (from[name] === undefined) {
      continue;
    } else if (typeof type === 'object' && into[name] !== undefined) {
      merge(into[name], from[name], type);
    } else {
      into[name] = from[name];
    }
  }
}

module.exports = { decode };

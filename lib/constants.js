'use strict';
// The bytes of a module description's constants (docs/module-format.md,
// "Constants"): each from its `data` (host data) or its `file` (.npy, or raw
// little-endian bytes at `offset`), in declaration order, for the native
// Module.fromJson, which copies them into the module. A declaration the
// native reader refuses (not an object, an unknown dtype, a bad shape) gets
// no bytes here: its error comes from there, naming the field.

const path = require('path');
const { invalid } = require('./errors');
const { LIMITS, readRegularFile } = require('./files');
const npy = require('./npy');
const { ARRAY_OF, MAX_RANK, declared, shapeText } = require('./host_data');
const { describe } = require('./half');
const { setOwn } = require('./objects');

const CALLER = 'Module.fromJson';
const NPY_MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);

function isPlainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// A dtype and shape the native reader takes.
function validType(dtype, shape) {
  return typeof dtype === 'string' && ARRAY_OF[dtype] !== undefined && Array.isArray(shape) &&
    shape.length <= MAX_RANK && shape.every((d) => Number.isSafeInteger(d) && d >= 0 && d <= 0x7fffffff);
}

function asBytes(array) {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

// `data`: host data of exactly the constant's shape; a flat Array of its
// element count is taken for any shape.
function fromData(at, data, dtype, shape) {
  const count = shape.reduce((n, d) => n * d, 1);
  const flat = Array.isArray(data) && shape.length !== 1 && data.length === count && !data.some(Array.isArray);
  return asBytes(declared(CALLER, `${at}.data`, `${at}.data`, data, dtype, flat ? [count] : shape));
}

// `file`: read once per description (`files` caches by resolved path).
function fromFile(at, entry, dtype, shape, baseDir, files) {
  const { file, offset } = entry;
  if (typeof file !== 'string' || file === '') {
    throw invalid(`${CALLER}: ${at}.file: must be a non-empty path (got ${describe(file)})`);
  }
  if (!path.isAbsolute(file) && baseDir === undefined) {
    throw invalid(`${CALLER}: ${at}.file: relative path '${file}' needs a module file (load the module from a path, give baseDir, or give an absolute path)`);
  }
  const resolved = path.resolve(baseDir ?? '/', file);
  let bytes = files.get(resolved);
  if (bytes === undefined) {
    bytes = readRegularFile(resolved, { caller: `${CALLER}: ${at}.file`, maxBytes: LIMITS.constantFile, what: 'a constant file' });
    files.set(resolved, bytes);
  }
  const itemSize = ARRAY_OF[dtype].BYTES_PER_ELEMENT;
  const needed = shape.reduce((n, d) => n * d, 1) * itemSize;
  if (bytes.length >= 6 && bytes.subarray(0, 6).equals(NPY_MAGIC)) {
    if (offset !== undefined) {
      throw invalid(`${CALLER}: ${at}.offset: '${file}' is an .npy file; offset applies to raw files only`);
    }
    const parsed = npy.parse(bytes, `${CALLER}: ${at}.file: ${file}`);
    const sameDtype = parsed.dtype === dtype || (dtype === 'bf16' && parsed.dtype === 'u16');
    if (!sameDtype || shapeText(parsed.shape) !== shapeText(shape)) {
      throw invalid(`${CALLER}: ${at}: '${file}' holds ${parsed.dtype}${shapeText(parsed.shape)}, but the constant is ${dtype}${shapeText(shape)}`);
    }
    return asBytes(parsed.data);
  }
  const start = offset === undefined ? 0 : offset;
  if (!Number.isSafeInteger(start) || start < 0) {
    throw invalid(`${CALLER}: ${at}.offset: must be a non-negative integer (got ${describe(offset)})`);
  }
  if (start + needed > bytes.length) {
    throw invalid(`${CALLER}: ${at}: '${file}' has ${bytes.length} bytes, but the constant (${dtype}${shapeText(shape)}) needs ${needed} from offset ${start}`);
  }
  return bytes.subarray(start, start + needed);
}

// [Uint8Array] for the constants of `description` in declaration order;
// undefined when it has no constants object.
function constantData(description, baseDir) {
  const constants = isPlainObject(description) ? description.constants : undefined;
  if (!isPlainObject(constants)) return undefined;
  const files = new Map();
  return Object.keys(constants).map((name) => {
    const entry = constants[name];
    if (!isPlainObject(entry) || !validType(entry.dtype, entry.shape)) return new Uint8Array(0);
    const at = `constants.${name}`;
    if ((entry.data === undefined) === (entry.file === undefined)) {
      throw invalid(`${CALLER}: ${at}: give exactly one of 'data' and 'file' (${entry.data === undefined ? 'neither' : 'both'} given)`);
    }
    if (entry.data !== undefined) {
      if (entry.offset !== undefined) throw invalid(`${CALLER}: ${at}.offset: applies to a 'file' only`);
      return fromData(at, entry.data, entry.dtype, entry.shape);
    }
    return fromFile(at, entry, entry.dtype, entry.shape, baseDir, files);
  });
}

// `description` with its constants' `data` left out (their bytes go to the
// native reader separately): what JSON.stringify is given.
function withoutData(description) {
  const constants = isPlainObject(description) ? description.constants : undefined;
  if (!isPlainObject(constants)) return description;
  const stripped = {};
  for (const name of Object.keys(constants)) {
    let entry = constants[name];
    if (isPlainObject(entry) && entry.data !== undefined) {
      entry = { ...entry };
      delete entry.data;
    }
    setOwn(stripped, name, entry);
  }
  return { ...description, constants: stripped };
}

module.exports = { constantData, withoutData };

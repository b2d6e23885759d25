'use strict';
// halrt.onnx: ONNX models as halrt modules (docs/onnx.md). convert() gives
// the halrt.module/1 description a model becomes; load.js uses isOnnxFile()
// and moduleFromOnnx() for halrt.load(file).

const fs = require('fs');
const path = require('path');
const { HalrtError } = require('../errors');
const { LIMITS, readRegularFile } = require('../files');
const { describe } = require('../half');
const { checkOptions: readOptions, isPlainObject } = require('../args');
const { readModel } = require('./model');
const { TRACE_MODES } = require('../trace_batch');
const converter = require('./convert');

// A module name from a file name: 'ch_ppocr_mobile_v2.0_cls_infer.onnx' ->
// 'ch_ppocr_mobile_v2_0_cls_infer'.
function nameFor(file) {
  let name = path.basename(file).replace(/\.onnx$/i, '').replace(/[^A-Za-z0-9_]/g, '_');
  if (name === '' || /^[0-9]/.test(name)) name = `m_${name}`;
  return name === 'hal' ? 'hal_model' : name;
}

// The options convert() and halrt.load take for a model, checked.
function checkOptions(caller, { name, shapes, traceNodes, traceMode, baseDir }) {
  if (baseDir !== undefined && typeof baseDir !== 'string') {
    throw new HalrtError(`${caller}: options.baseDir must be a folder path (got ${describe(baseDir)})`, 'INVALID_ARGUMENT');
  }
  if (name !== undefined && (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name === 'hal')) {
    throw new HalrtError(`${caller}: options.name must be a module name (letters, digits, '_'; not 'hal') (got ${describe(name)})`, 'INVALID_ARGUMENT');
  }
  if (shapes !== undefined && (!isPlainObject(shapes) || !Object.values(shapes).every(Array.isArray))) {
    throw new HalrtError(`${caller}: options.shapes must be an object of input name -> dimensions (got ${describe(shapes)})`, 'INVALID_ARGUMENT');
  }
  if (traceNodes !== undefined && typeof traceNodes !== 'boolean' && !(traceNodes instanceof RegExp)) {
    throw new HalrtError(`${caller}: options.traceNodes must be true, false or a RegExp (got ${describe(traceNodes)})`, 'INVALID_ARGUMENT');
  }
  if (traceMode !== undefined && !TRACE_MODES.includes(traceMode)) {
    throw new HalrtError(`${caller}: options.traceMode must be one of ${TRACE_MODES.join(', ')} (got ${describe(traceMode)})`, 'INVALID_ARGUMENT');
  }
}

// A model's bytes and the folder its external data is in.
function source(caller, model, baseDir) {
  if (typeof model === 'string') {
    const bytes = readRegularFile(model, { caller, maxBytes: LIMITS.constantFile, what: 'an ONNX model' });
    return { bytes, baseDir: path.dirname(path.resolve(model)), name: nameFor(model) };
  }
  if (model instanceof Uint8Array || model instanceof ArrayBuffer) {
    return { bytes: model instanceof ArrayBuffer ? new Uint8Array(model) : model, baseDir, name: 'onnx' };
  }
  throw new HalrtError(`${caller}: model must be a file path, a Buffer, a Uint8Array or an ArrayBuffer (got ${describe(model)})`, 'INVALID_ARGUMENT');
}

function withCaller(caller, fn) {
  try {
    return fn();
  } catch (error) {
    if (error instanceof HalrtError && error.message.startsWith('onnx: ')) {
      throw new HalrtError(`${caller}: ${error.message.slice(6)}`, error.code, { cause: error.cause });
    }
    throw error;
  }
}

// halrt.onnx.convert(model, {name, shapes, traceNodes, traceMode, baseDir})
// -> the module description (constants' data as TypedArrays).
function convert(model, given = {}) {
  const caller = 'halrt.onnx.convert';
  if (!isPlainObject(given)) throw new HalrtError(`${caller}: options must be an object (got ${describe(given)})`, 'INVALID_ARGUMENT');
  const options = { ...readOptions(given, caller, null, 'options') }; // each getter read once: what is checked is what is used
  checkOptions(caller, options);
  const { bytes, baseDir, name } = source(caller, model, options.baseDir);
  return withCaller(caller, () => converter.convert(readModel(bytes, baseDir), { name, ...options }).description);
}

// Whether `file` holds an ONNX model rather than a module description
// (JSON starts with '{' after any whitespace; a ModelProto never does). Read
// in chunks up to the first non-blank byte, however much whitespace comes
// first; a non-empty file of only whitespace is not JSON either.
function isOnnxFile(file) {
  let fd;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
    if (!fs.fstatSync(fd).isFile()) return false;
    const chunk = Buffer.alloc(4096);
    for (let position = 0; ;) {
      const length = fs.readSync(fd, chunk, 0, chunk.length, position);
      if (length === 0) return position > 0;
      const first = chunk.subarray(0, length).toString('latin1').trimStart()[0];
      if (first !== undefined) return first !== '{';
      position += length;
    }
  } catch {
    return false; // Module.load names what is wrong with the path
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

// ONNX file `file` read for halrt.load: {model, name, baseDir}, with
// `options` ({shapes, traceNodes, traceMode}) checked.
function readOnnx(file, options) {
  const caller = 'halrt.load';
  checkOptions(caller, options);
  const { bytes, baseDir, name } = source(caller, file);
  return { model: withCaller(caller, () => readModel(bytes, baseDir)), name, baseDir };
}

// The Module of a model readOnnx() read, in `instance`.
function moduleOf(Module, instance, { model, name, baseDir }, options) {
  const description = withCaller('halrt.load', () => converter.convert(model, { name, ...options }).description);
  return Module.fromObject(instance, description, { baseDir });
}

// The Module of ONNX file `file` in `instance`.
function moduleFromOnnx(Module, instance, file, options) {
  return moduleOf(Module, instance, readOnnx(file, options), options);
}

module.exports = { convert, isOnnxFile, readOnnx, moduleOf, moduleFromOnnx };

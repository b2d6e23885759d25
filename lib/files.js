'use strict';
// Reading a whole file that a user named: a module file (Module.load), an
// input of the CLI (--input x=@FILE.npy). Only a regular file is read, and
// only up to a stated size: a character device such as /dev/zero never ends,
// a FIFO blocks whoever opens it until a writer comes, and a directory has no
// bytes, so reading one "whole" hangs or exhausts memory (fs.readFileSync on
// /dev/zero grows its buffer until the process aborts). src/base/file.h
// applies the same rule to the kernel files the runtime reads itself.

const fs = require('fs');
const { HalrtError } = require('./errors');

const MiB = 2 ** 20;

// The caps (docs/module-format.md, README "Command line").
const LIMITS = Object.freeze({
  // A module description is small JSON; the largest real ones are kilobytes.
  moduleFile: 64 * MiB,
  // An .npy input becomes one TypedArray, and 4 GiB is the largest Buffer
  // Node 18 and 20 can allocate (buffer.constants.MAX_LENGTH).
  npyInput: 4096 * MiB,
  // A module constant's file (weights): one Buffer, so the same cap.
  constantFile: 4096 * MiB,
});

// The largest read asked of the system at once (Node refuses reads of 2 GiB
// or more); the loop reads the rest.
const CHUNK = 1024 * MiB;

// What the file of `stats` (from stat or lstat) is, for messages.
function kindOf(stats) {
  if (stats.isFile()) return 'a regular file';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isDirectory()) return 'a directory';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  return 'a special file';
}

// The rule itself, on what stat or fstat reported for `file`.
function check(file, stats, { caller, maxBytes, what }) {
  if (!stats.isFile()) {
    throw new HalrtError(`${caller}: '${file}' is ${kindOf(stats)}, not a regular file`, 'INVALID_ARGUMENT');
  }
  if (stats.size > maxBytes) {
    throw new HalrtError(
      `${caller}: '${file}' is ${stats.size} bytes, over the limit of ${maxBytes} bytes for ${what}`,
      'RESOURCE_EXHAUSTED');
  }
}

// A HalrtError as is; a system error as NOT_FOUND naming the path.
function asHalrtError(error, file, caller) {
  if (error instanceof HalrtError) return error;
  return new HalrtError(`${caller}: cannot read '${file}': ${error.message}`, 'NOT_FOUND', { cause: error });
}

// Reads all of regular file `file` into a Buffer. `rule`: {caller, maxBytes,
// what}: `caller` starts every message ('Module.load'), `maxBytes` is a
// LIMITS entry and `what` names the file's role in the size message. Throws
// a HalrtError naming the path: NOT_FOUND when it cannot be stat'ed, opened
// or read, INVALID_ARGUMENT when it is not a regular file, RESOURCE_EXHAUSTED
// when it is larger than maxBytes, DATA_LOSS when it shrinks while read.
//
// The path is checked before it is opened, so a device or FIFO is never
// opened; the open is non-blocking in case the path became a FIFO meanwhile,
// and the check is repeated on the descriptor, whose size is then read
// exactly: a file swapped after the first check cannot slip past.
function readRegularFile(file, rule) {
  let fd;
  try {
    check(file, fs.statSync(file), rule);
    const { O_RDONLY, O_NONBLOCK = 0, O_NOCTTY = 0 } = fs.constants;
    fd = fs.openSync(file, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  } catch (error) {
    throw asHalrtError(error, file, rule.caller);
  }
  try {
    const stats = fs.fstatSync(fd);
    check(file, stats, rule);
    const bytes = Buffer.allocUnsafe(stats.size);
    for (let offset = 0; offset < bytes.length;) {
      const count = fs.readSync(fd, bytes, offset, Math.min(bytes.length - offset, CHUNK), offset);
      if (count === 0) {
        throw new HalrtError(`${rule.caller}: '${file}' ended after ${offset} of ${bytes.length} bytes (it shrank while being read)`,
          'DATA_LOSS');
      }
      offset += count;
    }
    return bytes;
  } catch (error) {
    throw asHalrtError(error, file, rule.caller);
  } finally {
    fs.closeSync(fd);
  }
}

module.exports = { LIMITS, kindOf, readRegularFile };

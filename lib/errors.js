'use strict';

/**
 * The error every halrt function throws or rejects with. `code` is the
 * runtime status code name ('INVALID_ARGUMENT', 'NOT_FOUND', ...); the message
 * names the method and the argument that was wrong.
 */
class HalrtError extends Error {
  /**
   * @param {string} message
   * @param {string} [code]
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, code = 'UNKNOWN', options = undefined) {
    super(message, options);
    this.code = code;
  }
}

Object.defineProperty(HalrtError.prototype, 'name', {
  value: 'HalrtError',
  writable: true,
  enumerable: false,
  configurable: true,
});

/** A HalrtError for a bad argument: INVALID_ARGUMENT unless `code` says otherwise. */
function invalid(message, code = 'INVALID_ARGUMENT') {
  return new HalrtError(message, code);
}

// What a caller's own code threw while `method` read `what` (a getter, a
// Proxy trap): INVALID_ARGUMENT naming it, the thrown value as `cause`. A
// HalrtError (a check of what was read) passes through.
function readThrew(method, what, error) {
  if (error instanceof HalrtError) return error;
  return new HalrtError(`${method}: reading ${what} threw (${thrownText(error)})`, 'INVALID_ARGUMENT', { cause: error });
}

/** A thrown value's text for a message: an Error's message, else String(). */
function thrownText(error) {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return 'a value with no text';
  }
}

module.exports = { HalrtError, invalid, readThrew, thrownText };

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

module.exports = { HalrtError, invalid };

'use strict';
// Checks shared by the JavaScript entry points: options objects.

const { invalid } = require('./errors');
const { describe } = require('./half');

/** Whether `value` is a plain object ({...}), as options and named inputs are. */
function isPlainObject(value) {
  return value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype;
}

/**
 * `options` (undefined: {}) after checking that it is a plain object whose
 * keys are all in `known` (null: any keys); otherwise INVALID_ARGUMENT
 * naming `where` (and `what`, the argument, when the object itself is wrong).
 */
function checkOptions(options, where, known = null, what = null) {
  if (options === undefined) return {};
  if (!isPlainObject(options)) throw invalid(`${where}${what ? `: ${what}` : ''} must be an object (got ${describe(options)})`);
  for (const key of known ? Object.keys(options) : []) {
    if (!known.includes(key)) throw invalid(`${where}: unknown option '${key}' (known: ${known.join(', ')})`);
  }
  return options;
}

module.exports = { isPlainObject, checkOptions };

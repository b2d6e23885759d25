'use strict';
// Checks shared by the JavaScript entry points: options objects.

const { invalid, readThrew } = require('./errors');
const { describe } = require('./half');

/** Whether `value` is a plain object ({...}), as options and named inputs are. */
function isPlainObject(value) {
  return value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype;
}

/**
 * A copy of `options` (undefined: {}), each own key read once
 * (readOptions), after checking that it is a plain object whose keys are
 * all in `known` (null: any keys); otherwise INVALID_ARGUMENT naming
 * `where` (and `what`, the argument, when the object itself is wrong).
 */
function checkOptions(options, where, known = null, what = null) {
  if (options === undefined) return {};
  if (!isPlainObject(options)) throw invalid(`${where}${what ? `: ${what}` : ''} must be an object (got ${describe(options)})`);
  let keys;
  try {
    keys = Object.keys(options);
  } catch (error) {
    throw readThrew(where, `the keys of ${what ?? 'options'}`, error);
  }
  for (const key of known ? keys : []) {
    if (!known.includes(key)) throw invalid(`${where}: unknown option '${key}' (known: ${known.join(', ')})`);
  }
  return readOptions(options, keys, where, what);
}

/**
 * `keys` of `options` (inherited ones too, as destructuring reads them),
 * each read once into a new object; a getter or Proxy trap that throws is
 * INVALID_ARGUMENT naming the key (`what`.key), the thrown value as cause.
 */
function readOptions(options, keys, where, what = null) {
  const copy = Object.create(null);
  for (const key of keys) {
    try {
      copy[key] = options[key];
    } catch (error) {
      throw readThrew(where, what ? `${what}.${key}` : key, error);
    }
  }
  return copy;
}

module.exports = { isPlainObject, checkOptions, readOptions };

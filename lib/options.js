'use strict';
const { CODES, codedError } = require('./errors');
const { RETRY_AFTER, MAX_RETRY_AFTER_SEC } = require('./schema/retry-after');
const { optionNames, rangeOf } = require('./schema');

// Option checks shared by every constructor. Two message styles exist and each caller keeps its own:
// the gatekeeper, ledger and route rules name the type received (`typeName`: "got string"), the
// concurrency gate and adaptive limit show the value received (`describe`: "got \"x\"").

/** 'null', 'array' or the `typeof` of a value. */
function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/** A value as shown in a message: strings quoted, objects as 'an object'. */
function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  return typeof value === 'object' ? 'an object' : String(value);
}

/** A plain object: not null, not an array. */
function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The first own key of `obj` not in the Set `known`, or undefined. */
function unknownKey(obj, known) {
  for (const k of Object.keys(obj)) if (!known.has(k)) return k;
  return undefined;
}

/** Throws `<at> has an unknown option "k" (known: ...)` for the first key of `obj` not in `known`. */
function onlyKnown(obj, known, at) {
  const k = unknownKey(obj, known);
  if (k !== undefined) throw codedError(TypeError, CODES.UNKNOWN_OPTION, `${at} has an unknown option "${k}" (known: ${[...known].join(', ')})`);
}

// typeName style: "<at> must be a number, got string".

/** Any number (the range is checked elsewhere). */
function number(v, at) {
  if (typeof v !== 'number') throw new TypeError(`${at} must be a number, got ${typeName(v)}`);
  return v;
}

function boolean(v, at) {
  if (typeof v !== 'boolean') throw new TypeError(`${at} must be a boolean, got ${typeName(v)}`);
  return v;
}

/** null for undefined, else a function. */
function optionalFn(v, at) {
  if (v === undefined) return null;
  if (typeof v !== 'function') throw new TypeError(`${at} must be a function, got ${typeName(v)}`);
  return v;
}

/** A finite number in range, one message for the whole range ("must be an integer >= 1 and <= 32"). */
function finite(v, at, { min = 0, max = Infinity, integer = false, exclusiveMin = false } = {}) {
  number(v, at);
  const ok = Number.isFinite(v) && (exclusiveMin ? v > min : v >= min) && v <= max && (!integer || Number.isInteger(v));
  if (!ok) {
    const range = `${exclusiveMin ? '>' : '>='} ${min}${max === Infinity ? '' : ` and <= ${max}`}`;
    throw new RangeError(`${at} must be a${integer ? 'n integer' : ' finite number'} ${range}, got ${v}`);
  }
  return v;
}

// describe style: "<name> must be a number, got \"x\"".

/** A finite number in range, one message per violated condition, values shown with `describe`. */
function checkNumber(name, value, { min = 0, minExclusive = false, max = Infinity, integer = false } = {}) {
  if (typeof value !== 'number' || Number.isNaN(value)) throw new TypeError(`${name} must be a number, got ${describe(value)}`);
  if (!Number.isFinite(value)) throw new RangeError(`${name} must be finite, got ${value}`);
  if (integer && !Number.isInteger(value)) throw new RangeError(`${name} must be an integer, got ${value}`);
  if (minExclusive ? value <= min : value < min) throw new RangeError(`${name} must be ${minExclusive ? '>' : '>='} ${min}, got ${value}`);
  if (value > max) throw new RangeError(`${name} must be <= ${max}, got ${value}`);
  return value;
}

function checkBoolean(name, value) {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${describe(value)}`);
  return value;
}

/** undefined or a function. */
function checkFunction(name, value) {
  if (value !== undefined && typeof value !== 'function') throw new TypeError(`${name} must be a function, got ${describe(value)}`);
  return value;
}

const RETRY_AFTER_FIELDS = optionNames(RETRY_AFTER);

/** `retryAfter: { minSec?, maxSec? }` (whole seconds, 0..86400; default 1..3), as every guard takes it. */
function retryAfterOptions(r, at) {
  const { minSec: MIN, maxSec: MAX } = RETRY_AFTER;
  if (r === undefined) return { minSec: MIN.default, maxSec: MAX.default };
  if (!isObject(r)) throw new TypeError(`${at} must be an object { minSec, maxSec }, got ${typeName(r)}`);
  onlyKnown(r, RETRY_AFTER_FIELDS, at);
  const minSec = finite(r.minSec === undefined ? MIN.default : r.minSec, `${at}.minSec`, rangeOf(MIN));
  const maxSecGiven = r.maxSec === undefined ? Math.max(minSec, MAX.default) : r.maxSec;
  const maxSec = finite(maxSecGiven, `${at}.maxSec`, { ...rangeOf(MAX), min: Math.max(MAX.min || 0, minSec) });
  return { minSec, maxSec };
}

/**
 * One option by its schema entry (lib/schema): `false` where the entry allows it, a boolean, one of
 * its values, or a number in its range; other types are the caller's to check.
 */
function schemaOption(e, v, at) {
  if (e.orFalse === true && v === false) return v;
  if (e.values !== undefined) {
    if (!e.values.includes(v)) {
      const shown = e.values.map((x) => (typeof x === 'string' ? `'${x}'` : String(x)));
      throw new RangeError(`${at} must be ${shown.slice(0, -1).join(', ')} or ${shown[shown.length - 1]}, got ${JSON.stringify(v)}`);
    }
    return v;
  }
  if (e.type === 'boolean') return boolean(v, at);
  if (e.type === 'number' || e.type === 'integer') return finite(v, at, rangeOf(e));
  return v;
}

/**
 * Option `name` of `options` by schema `s`: its declared default when not given, else schemaOption's
 * check. `at`: where the options are ("dashboard: options").
 */
function optionOrDefault(s, options, name, at) {
  const v = options[name];
  return v === undefined ? s[name].default : schemaOption(s[name], v, `${at}.${name}`);
}

module.exports = {
  retryAfterOptions, schemaOption, optionOrDefault,
  MAX_RETRY_AFTER_SEC,
  typeName, describe, isObject, unknownKey, onlyKnown, number, boolean, optionalFn, finite, checkNumber, checkBoolean, checkFunction,
};

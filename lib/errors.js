'use strict';
// Every error tiergate throws carries a stable `code` (docs/errors.md lists them): callers branch on
// the code, never on the message.
const CODES = Object.freeze({
  /** An option of a constructor (or factory) has a wrong type or value; the message names it. */
  INVALID_OPTION: 'ERR_TIERGATE_INVALID_OPTION',
  /** An options object holds a key that is not an option; the message lists the known ones. */
  UNKNOWN_OPTION: 'ERR_TIERGATE_UNKNOWN_OPTION',
  /** A call (not a constructor) got a wrong argument: tryConsume's cost, a tier id, a key. */
  INVALID_ARGUMENT: 'ERR_TIERGATE_INVALID_ARGUMENT',
  /** bans.ban: the ban table is at bans.maxBans and every ban in it is permanent. */
  BAN_TABLE_FULL: 'ERR_TIERGATE_BAN_TABLE_FULL',
  /** cluster.bans: the change holds in this process, but the queue of changes waiting for Redis is full. */
  BAN_NOT_SHARED: 'ERR_TIERGATE_BAN_NOT_SHARED',
  /** No native binary loads for this platform. */
  NATIVE_UNAVAILABLE: 'ERR_TIERGATE_NATIVE_UNAVAILABLE',
  /** A feature needs a package that is not installed (better-sqlite3, pg); the message names it. */
  MISSING_DEPENDENCY: 'ERR_TIERGATE_MISSING_DEPENDENCY',
  /** The decision service was asked to start its admin API without an admin token. */
  ADMIN_TOKEN_REQUIRED: 'ERR_TIERGATE_ADMIN_TOKEN_REQUIRED',
  /** limits.override: the overrides in force are at their cap (10,000): clear some first. */
  OVERRIDES_FULL: 'ERR_TIERGATE_OVERRIDES_FULL',
  /** The decision service client got no usable answer (network error, timeout, 5xx) and fails closed. */
  SERVICE_UNAVAILABLE: 'ERR_TIERGATE_SERVICE_UNAVAILABLE',
});

/** `new Ctor(message)` with `code`. */
function codedError(Ctor, code, message) {
  const err = new Ctor(message);
  err.code = code;
  return err;
}

/**
 * Gives a TypeError or RangeError that has no code yet (a check's own, or one from the native side)
 * the `code`; returns it for `throw`. Anything else passes through unchanged.
 */
function withCode(err, code) {
  const checkError = err instanceof TypeError || err instanceof RangeError;
  if (checkError && !(typeof err.code === 'string' && err.code.startsWith('ERR_TIERGATE_'))) err.code = code;
  return err;
}

/** Runs `build()`, giving its option errors the INVALID_OPTION code: one boundary per constructor. */
function buildingOptions(build) {
  try {
    return build();
  } catch (err) {
    throw withCode(err, CODES.INVALID_OPTION);
  }
}

module.exports = { CODES, codedError, withCode, buildingOptions };

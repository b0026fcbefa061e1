'use strict';
// The gatekeeper's per-key identity: 'ip', { header } or a function of the request.
const { typeName, isObject, onlyKnown } = require('../options');

/** Header values longer than this are not used as keys (a client could otherwise mint huge keys). */
const MAX_KEY_LEN = 256;
const KEY_FIELDS = new Set(['header']);

/**
 * The per-key identity option: 'ip' (default), { header: name } (falling back to the IP when the
 * header is missing, empty or too long), or a function (req) => string | undefined (the same fallback).
 * Returns a compiled { kind, header, fn }.
 */
function compileKey(key, at) {
  if (key === undefined || key === 'ip') return { kind: 'ip', header: null, fn: null };
  if (typeof key === 'function') return { kind: 'fn', header: null, fn: key };
  if (isObject(key)) {
    onlyKnown(key, KEY_FIELDS, at);
    if (typeof key.header !== 'string' || key.header === '') throw new TypeError(`${at}.header must be a header name, got ${typeName(key.header)}`);
    return { kind: 'header', header: key.header.toLowerCase(), fn: null };
  }
  throw new TypeError(`${at} must be 'ip', { header: name } or a function (req) => string | undefined, got ${typeName(key)}`);
}

/** A usable key string, or undefined: a non-empty string of at most MAX_KEY_LEN characters. */
function usableKey(v) {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_KEY_LEN ? v : undefined;
}


module.exports = { compileKey, usableKey, MAX_KEY_LEN };

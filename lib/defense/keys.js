'use strict';
// What a named limit counts by (`by`): the client's address, an address prefix (a crawler spread over
// one /24), a header's value, or a function of the request. Address keys are made natively from the
// one address string (`true` tells `defend` to derive it with the limit's prefixes), so an address is
// read once per request whatever the number of limits. A header or function that gives no usable key
// falls back to the client's address, as the gatekeeper's `key` does.
const { typeName, isObject, onlyKnown, finite } = require('../options');
const { usableKey } = require('../gatekeeper/key');

const BY_FIELDS = new Set(['prefix', 'header']);
const PREFIX_FIELDS = new Set(['v4', 'v6']);

/**
 * `by`: 'ip' (default: the gatekeeper's ipv4Prefix/ipv6Prefix), { prefix: { v4?, v6? } },
 * { header: name } or (req) => string | number | undefined. Returns { kind, header, fn, v4, v6 }.
 */
function compileBy(by, at, ipPrefixes) {
  const ip = { kind: 'ip', header: null, fn: null, v4: ipPrefixes.v4, v6: ipPrefixes.v6 };
  if (by === undefined || by === 'ip') return ip;
  if (typeof by === 'function') return { ...ip, kind: 'fn', fn: by };
  if (!isObject(by)) throw new TypeError(`${at} must be 'ip', { prefix: { v4, v6 } }, { header: name } or a function (req) => string | undefined, got ${typeName(by)}`);
  onlyKnown(by, BY_FIELDS, at);
  if ((by.prefix === undefined) === (by.header === undefined)) throw new TypeError(`${at} must give exactly one of prefix, header`);
  if (by.header !== undefined) {
    if (typeof by.header !== 'string' || by.header === '') throw new TypeError(`${at}.header must be a header name, got ${typeName(by.header)}`);
    return { ...ip, kind: 'header', header: by.header.toLowerCase() };
  }
  const p = by.prefix;
  if (!isObject(p)) throw new TypeError(`${at}.prefix must be an object { v4?, v6? } (prefix lengths), got ${typeName(p)}`);
  onlyKnown(p, PREFIX_FIELDS, `${at}.prefix`);
  if (p.v4 === undefined && p.v6 === undefined) throw new TypeError(`${at}.prefix must give v4, v6 or both`);
  return {
    ...ip,
    v4: p.v4 === undefined ? ipPrefixes.v4 : finite(p.v4, `${at}.prefix.v4`, { max: 32, integer: true }),
    v6: p.v6 === undefined ? ipPrefixes.v6 : finite(p.v6, `${at}.prefix.v6`, { max: 128, integer: true }),
  };
}

/** Marks a function's result that is neither a usable key nor undefined/null (for a warning). */
const UNUSABLE = Symbol('tiergate.unusableKey');

/**
 * The `defend` argument for one limit's key: `true` (the client address, masked natively) or the
 * string; UNUSABLE when a function returned something that is not a key (the caller warns once and
 * counts by the address).
 */
function keyArg(by, req) {
  if (by.kind === 'ip') return true;
  if (by.kind === 'header') {
    const v = usableKey(req.headers[by.header]);
    return v === undefined ? true : v;
  }
  let v = by.fn(req);
  if (typeof v === 'number' && Number.isFinite(v)) v = String(v);
  const k = usableKey(v);
  if (k !== undefined) return k;
  return v === undefined || v === null ? true : UNUSABLE;
}

module.exports = { compileBy, keyArg, UNUSABLE };

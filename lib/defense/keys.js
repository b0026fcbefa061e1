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
  if (!isObject(by)) {
    throw new TypeError(`${at} must be 'ip', { prefix: { v4, v6 } }, { header: name } or a function (req) => string | undefined, got ${typeName(by)}`);
  }
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
/** On a request whose `by` function returned a promise: Map by -> the key argument it settled to. */
const SETTLED_BY = Symbol('tiergate.defense.settledBy');
/** The promise the last keyArg that answered UNUSABLE got from its function (takePending). */
let pending = null;

/** A `by` function's value as `defend` takes it: the string, true (the client address) or UNUSABLE. */
function keyOf(v) {
  if (typeof v === 'number' && Number.isFinite(v)) v = String(v);
  const k = usableKey(v);
  if (k !== undefined) return k;
  return v === undefined || v === null ? true : UNUSABLE;
}

/**
 * The `defend` argument for one limit's key: `true` (the client address, masked natively) or the
 * string; UNUSABLE when a function returned something that is not a key (the caller warns once and
 * counts by the address), or a promise (takePending() gives it; settleBy() records what it settles to,
 * and keyArg answers that from then on for this request).
 */
function keyArg(by, req) {
  if (by.kind === 'ip') return true;
  if (by.kind === 'header') {
    const v = usableKey(req.headers[by.header]);
    return v === undefined ? true : v;
  }
  const settled = req[SETTLED_BY];
  if (settled !== undefined && settled.has(by)) return settled.get(by);
  const v = by.fn(req);
  const k = keyOf(v);
  if (k === UNUSABLE) pending = typeof v.then === 'function' ? v : null;
  return k;
}

/** The promise behind the last UNUSABLE keyArg, or null (a value that is no key); cleared. */
function takePending() {
  const p = pending;
  pending = null;
  return p;
}

/** Records that `by` settled to `v` for `req` (undefined after a rejection: the client address). */
function settleBy(req, by, v) {
  let m = req[SETTLED_BY];
  if (m === undefined) {
    m = new Map();
    req[SETTLED_BY] = m;
  }
  m.set(by, keyOf(v));
}

/**
 * Settles `list` (limit, promise, limit, promise, ...) for `req`: each limit's `by` answers what its
 * promise settled to from then on; a rejection is warned (`warn(name, err)`) and counts by the address.
 */
function settleAll(req, list, warn) {
  const waits = [];
  for (let i = 0; i < list.length; i += 2) {
    const l = list[i];
    waits.push(Promise.resolve(list[i + 1]).then((v) => settleBy(req, l.by, v), (err) => {
      warn(`${l.option}.by (its promise)`, err);
      settleBy(req, l.by, undefined);
    }));
  }
  return Promise.all(waits);
}

module.exports = { compileBy, keyArg, takePending, settleAll, UNUSABLE };

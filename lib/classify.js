'use strict';
// Request classification for the gatekeeper: route rules, the per-key identity and the client IP.
// Everything here is shallow and bounded: header values are read once, never split beyond a small
// cap, and never parsed with anything slower than indexOf.

/** Header values longer than this are not used as keys (a client could otherwise mint huge keys). */
const MAX_KEY_LEN = 256;
/** At most this many X-Forwarded-For entries are looked at; at most this many characters read. */
const MAX_FORWARDED_HOPS = 32;
const MAX_FORWARDED_LEN = 2048;

const { typeName: baseTypeName, isObject, onlyKnown } = require('./validate');
const { routedPath } = require('./adapters/routing');

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);

const ROUTE_FIELDS = new Set(['method', 'path', 'tier']);
const KEY_FIELDS = new Set(['header']);

/** As validate's typeName, and 'RegExp' for a RegExp (a route path may be one). */
function typeName(v) {
  return v instanceof RegExp ? 'RegExp' : baseTypeName(v);
}

/**
 * Compiles route rules `{ method?, path, tier }` (first match wins) against tier ids.
 * `path`: a string prefix matched on whole segments ('/checkout' matches '/checkout', '/checkout/x'
 * and '/checkout?x', not '/checkouts'; a prefix ending in '/' matches anything below it), as the
 * framework's router compares (case-insensitively but on Fastify), or a RegExp tested against the
 * path the framework routes (use the i flag to match as Express routes). `method`: a method name or an array of them.
 */
function compileRoutes(routes, tierIds, at) {
  if (routes === undefined) return null;
  if (!Array.isArray(routes)) throw new TypeError(`${at} must be an array of { method?, path, tier }, got ${typeName(routes)}`);
  const out = routes.map((r, i) => {
    const here = `${at}[${i}]`;
    if (!isObject(r)) throw new TypeError(`${here} must be an object { method?, path, tier }, got ${typeName(r)}`);
    onlyKnown(r, ROUTE_FIELDS, here);
    let methods = null;
    if (r.method !== undefined) {
      const list = Array.isArray(r.method) ? r.method : [r.method];
      if (list.length === 0) throw new RangeError(`${here}.method must name at least one method`);
      methods = list.map((m, j) => {
        if (typeof m !== 'string') throw new TypeError(`${here}.method must be a string or an array of strings, got ${typeName(m)}`);
        const up = m.toUpperCase();
        if (!METHODS.has(up)) throw new RangeError(`${here}.method "${m}" is not an HTTP method (${[...METHODS].join(', ')})`);
        return up;
      });
    }
    let prefix = null;
    let path = null;
    let regex = null;
    if (typeof r.path === 'string') {
      if (!r.path.startsWith('/')) throw new RangeError(`${here}.path must start with "/", got ${JSON.stringify(r.path)}`);
      prefix = r.path.toLowerCase();
      path = r.path;
    } else if (r.path instanceof RegExp) {
      // A global or sticky RegExp keeps state between tests; use a stateless copy.
      regex = r.path.global || r.path.sticky ? new RegExp(r.path.source, r.path.flags.replace(/[gy]/g, '')) : r.path;
    } else {
      throw new TypeError(`${here}.path must be a string prefix or a RegExp, got ${typeName(r.path)}`);
    }
    if (typeof r.tier !== 'string') throw new TypeError(`${here}.tier must be a tier name, got ${typeName(r.tier)}`);
    const tier = tierIds.get(r.tier);
    if (tier === undefined) throw new RangeError(`${here}.tier "${r.tier}" is not one of the tiers (${[...tierIds.keys()].join(', ')})`);
    return { methods, prefix, path, regex, tier };
  });
  return out.length ? out : null;
}

// Rules see the path the framework will route (lib/adapters/routing.js: authority, backslashes,
// escapes, dot segments, as that framework treats them). String prefixes are compared
// ASCII-case-insensitively unless the framework routes case-sensitively (Fastify's default).

/** Does path begin with the prefix on a segment boundary? `folded`: compare ASCII case-insensitively. */
function prefixMatches(path, prefix, folded) {
  const n = prefix.length;
  if (path.length < n) return false;
  for (let i = 0; i < n; i++) {
    let c = path.charCodeAt(i);
    if (folded && c >= 65 && c <= 90) c += 32; // A-Z -> a-z
    if (c !== prefix.charCodeAt(i)) return false;
  }
  return path.length === n || prefix.charCodeAt(n - 1) === 47 || path.charCodeAt(n) === 47 /* / */;
}

/** The tier id of the first rule matching the path `dialect` routes `url` to, or -1. */
function matchRoute(rules, method, url, dialect) {
  const path = routedPath(url, dialect);
  if (path === null) return -1;
  const folded = !dialect.caseSensitive;
  for (let i = 0; i < rules.length; i++) {
    const r = rules[i];
    if (r.methods !== null && !r.methods.includes(method)) continue;
    if (r.regex !== null) {
      if (r.regex.test(path)) return r.tier;
    } else if (prefixMatches(path, folded ? r.prefix : r.path, folded)) {
      return r.tier;
    }
  }
  return -1;
}

/**
 * The trust-proxy setting: false (the socket's peer is the client), true (the left-most
 * X-Forwarded-For entry: every proxy in front is trusted), or a number n of trusted proxy hops (the
 * client is the n-th address counting from the socket's peer; Express's meaning of a number).
 */
function checkTrustProxy(v, at) {
  if (v === undefined || v === false) return 0;
  if (v === true) return Infinity;
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0 || v > MAX_FORWARDED_HOPS) throw new RangeError(`${at} must be true, false or an integer 0..${MAX_FORWARDED_HOPS} (trusted proxy hops), got ${v}`);
    return v;
  }
  throw new TypeError(`${at} must be true, false or a number of trusted proxy hops, got ${typeName(v)}`);
}

// Node keeps the first `server.maxHeadersCount` headers and drops the rest; left unset, its parser
// keeps 2,000 raw entries, i.e. 1,000 headers (measured on node 20).
const NODE_DEFAULT_HEADER_ENTRIES = 2000;

/**
 * Did node drop headers? A header a gateway appended after a client's padding (its X-User-Tier, its
 * X-Forwarded-For) is then silently lost, so such a request's headers are not trusted: no tier from a
 * header, no address from a forwarded one. rawHeaders keeps growing past the cut, so it tells.
 */
function headersTruncated(req) {
  const raw = req.rawHeaders;
  if (raw === undefined) return false;
  const server = req.socket ? req.socket.server : undefined;
  const max = server && Number.isInteger(server.maxHeadersCount) && server.maxHeadersCount > 0 ? 2 * server.maxHeadersCount : NODE_DEFAULT_HEADER_ENTRIES;
  return raw.length > max;
}

/**
 * The client address as a string (normalised later in Rust). Never undefined: a peer that cannot be
 * read (the client closed its socket while earlier middleware ran, and node forgets the address) is
 * the empty string, which shares the one invalid-IP key: no key at all would skip every per-key quota.
 */
function clientIp(req, hops, truncated = false) {
  const socket = req.socket;
  const address = socket ? socket.remoteAddress : undefined;
  const peer = typeof address === 'string' ? address : '';
  if (hops === 0) return peer;
  if (truncated) return ''; // the trusted proxy's X-Forwarded-For may be among the lost headers
  let xff = req.headers['x-forwarded-for'];
  if (typeof xff !== 'string' || xff.length === 0) return peer;
  if (xff.length > MAX_FORWARDED_LEN) xff = xff.slice(xff.length - MAX_FORWARDED_LEN);
  if (hops === Infinity) {
    // Left-most entry: everything in front of us is trusted to have appended honestly.
    const comma = xff.indexOf(',');
    return (comma < 0 ? xff : xff.slice(0, comma)).trim();
  }
  // Walk from the right: the peer is hop 0, the last XFF entry hop 1, and so on.
  let end = xff.length;
  let addr = peer;
  for (let hop = 1; hop <= hops && end > 0; hop++) {
    const comma = xff.lastIndexOf(',', end - 1);
    addr = xff.slice(comma + 1, end).trim();
    end = comma < 0 ? 0 : comma;
  }
  return addr;
}

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

module.exports = { compileRoutes, matchRoute, checkTrustProxy, clientIp, headersTruncated, compileKey, usableKey, MAX_KEY_LEN };

'use strict';
// The path a framework routes a request target to, so that route rules classify what the framework
// will serve: a rule the router disagrees with is a tier an attacker can pick (a critical rule matched
// by a request served elsewhere) or escape (a background route reached under another spelling).
//
// Measured against the routers themselves (__test__/gatekeeper/adversarial.test.js):
// - every framework: an absolute-form target's authority ends at the first '/', '?' or '#'
//   (`GET http://x?/payments/1` is served as '/'); the path ends at '?' or '#';
// - Express 4/5 (parseurl, then url.parse for absolute-form): '\' before the query is '/' in an
//   absolute-form target only; no percent-decoding; matching is case-insensitive by default;
// - Fastify (find-my-way): percent-escapes are decoded as decodeURI does ('%72eports' is 'reports';
//   '%2F', '%3F', '%23' and '%25' stay as they are); case-sensitive unless `caseSensitive: false`;
//   duplicate slashes collapse with `ignoreDuplicateSlashes`;
// - Koa 2/3: ctx.path is parseurl's, as Express's; @koa/router matches it case-insensitively by
//   default, without percent-decoding: Express's dialect;
// - node:http, where the application's own routing is unknown: the most a router might normalise —
//   '\' is '/', every ASCII escape but '%25' decoded (as decodeURIComponent would), dot segments
//   removed (as WHATWG URL does, %2e included). A rule then catches every spelling a router could
//   serve; route on the same path (or with Express or Fastify) where a rule must not over-match.

/** Paths longer than this are matched on their first MAX_PATH_LEN characters only. */
const MAX_PATH_LEN = 2048;

const DIALECTS = Object.freeze({
  express: Object.freeze({ backslash: 'absolute', decode: null, dotSegments: false, collapseSlashes: false, caseSensitive: false }),
  fastify: Object.freeze({ backslash: 'never', decode: 'uri', dotSegments: false, collapseSlashes: false, caseSensitive: true }),
  koa: Object.freeze({ backslash: 'absolute', decode: null, dotSegments: false, collapseSlashes: false, caseSensitive: false }),
  http: Object.freeze({ backslash: 'always', decode: 'component', dotSegments: true, collapseSlashes: false, caseSensitive: false }),
});

/** Fastify's dialect for one instance: its router options change what it serves. */
function fastifyDialect(config) {
  const c = config || {};
  const r = c.routerOptions || {}; // Fastify 5 also takes them there
  const caseSensitive = c.caseSensitive !== false && r.caseSensitive !== false;
  const collapseSlashes = c.ignoreDuplicateSlashes === true || r.ignoreDuplicateSlashes === true;
  if (caseSensitive && !collapseSlashes) return DIALECTS.fastify;
  return Object.freeze({ ...DIALECTS.fastify, caseSensitive, collapseSlashes });
}

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
// What stays escaped: for decodeURI the reserved characters (they delimit) and '%'; for
// decodeURIComponent only '%' (decoding it would let '%2570' become a second round's '%70').
const KEEP_ESCAPED = Object.freeze({
  uri: new Set([';', '/', '?', ':', '@', '&', '=', '+', '$', ',', '#', '%']),
  component: new Set(['%']),
});

function hexValue(c) {
  if (c >= 48 && c <= 57) return c - 48;
  c |= 32;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/** Decodes ASCII %XX escapes but those in `keep`; others (and malformed ones) stay as written. */
function decodeEscapes(path, keep) {
  let i = path.indexOf('%');
  if (i < 0) return path;
  let out = '';
  let from = 0;
  for (; i >= 0 && i + 2 < path.length; i = path.indexOf('%', i + 1)) {
    const hi = hexValue(path.charCodeAt(i + 1));
    const lo = hexValue(path.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    const code = hi * 16 + lo;
    if (code >= 0x80 || code < 0x20) continue; // non-ASCII and control bytes: never part of a rule's prefix
    const ch = String.fromCharCode(code);
    if (keep.has(ch)) continue;
    out += path.slice(from, i) + ch;
    from = i + 3;
    i += 2;
  }
  return from === 0 ? path : out + path.slice(from);
}

/** RFC 3986 section 5.2.4: '.' and '..' segments removed. */
function removeDotSegments(path) {
  if (path.indexOf('/.') < 0) return path;
  const out = [];
  const segments = path.split('/');
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s === '.' || s === '..') {
      if (s === '..' && out.length > 0) out.pop();
      if (last) out.push('');
    } else {
      out.push(s);
    }
  }
  return `/${out.join('/')}`;
}

/**
 * The path `dialect` routes `target` to, without query or fragment, or null for a target with no path
 * ('*', or junk that no rule can match). Bounded: at most MAX_PATH_LEN characters are looked at.
 */
function routedPath(target, dialect) {
  if (typeof target !== 'string' || target.length === 0) return null;
  let url = target.length > MAX_PATH_LEN ? target.slice(0, MAX_PATH_LEN) : target;
  let start = 0;
  if (url.charCodeAt(0) !== 47 /* / */) {
    const m = SCHEME.exec(url);
    if (m === null) return null;
    if (dialect.backslash === 'absolute') url = backslashesToSlashes(url);
    start = m[0].length;
    while (start < url.length) {
      const c = url.charCodeAt(start);
      if (c === 47 || c === 63 /* ? */ || c === 35 /* # */) break;
      start++;
    }
    if (start === url.length || url.charCodeAt(start) !== 47) return '/'; // no path: the authority ended at '?' or '#'
  }
  let end = start;
  while (end < url.length) {
    const c = url.charCodeAt(end);
    if (c === 63 || c === 35) break;
    end++;
  }
  let path = start === 0 && end === url.length ? url : url.slice(start, end);
  if (dialect.backslash === 'always') path = backslashesToSlashes(path);
  if (dialect.decode !== null) path = decodeEscapes(path, KEEP_ESCAPED[dialect.decode]);
  if (dialect.dotSegments) path = removeDotSegments(path);
  if (dialect.collapseSlashes && path.indexOf('//') >= 0) path = path.replace(/\/{2,}/g, '/');
  return path;
}

function backslashesToSlashes(s) {
  if (s.indexOf('\\') < 0) return s;
  const q = s.search(/[?#]/);
  return q < 0 ? s.replace(/\\/g, '/') : s.slice(0, q).replace(/\\/g, '/') + s.slice(q);
}

module.exports = { routedPath, DIALECTS, fastifyDialect, MAX_PATH_LEN };

'use strict';
// Route rules `{ method?, path, tier }`, shared by every guard: compiled once, matched against the
// path the framework in front will route (./routing.js). Bounded: one scan of the target.
const { typeName: baseTypeName, isObject, onlyKnown } = require('../options');
const { routedPath } = require('./routing');
const { buildingOptions } = require('../errors');

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);
const ROUTE_FIELDS = new Set(['method', 'path', 'tier']);
const SCOPE_FIELDS = new Set(['method', 'path']);

/** As options' typeName, and 'RegExp' for a RegExp (a route path may be one). */
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
  const out = routes.map((r, i) => compileRule(r, `${at}[${i}]`, tierIds));
  return out.length ? out : null;
}

/**
 * Compiles rules that only say where something applies (a named limit's `routes`): each a path (a
 * string prefix or a RegExp, as above) or `{ method?, path }`. Matched with `matchRoute(...) >= 0`.
 */
function compileScope(routes, at) {
  if (!Array.isArray(routes) || routes.length === 0) {
    throw new TypeError(`${at} must be a non-empty array of paths or { method?, path }, got ${typeName(routes)}`);
  }
  return routes.map((r, i) => compileRule(typeof r === 'string' || r instanceof RegExp ? { path: r } : r, `${at}[${i}]`, null));
}

/** One rule; `tierIds` null: a scope rule (no tier: it matches as tier 0). */
function compileRule(r, here, tierIds) {
  const shape = tierIds === null ? '{ method?, path }' : '{ method?, path, tier }';
  if (!isObject(r)) throw new TypeError(`${here} must be an object ${shape}, got ${typeName(r)}`);
  onlyKnown(r, tierIds === null ? SCOPE_FIELDS : ROUTE_FIELDS, here);
  let methods = null;
  if (r.method !== undefined) methods = compileMethods(r.method, `${here}.method`);
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
  if (tierIds === null) return { methods, prefix, path, regex, tier: 0 };
  if (typeof r.tier !== 'string') throw new TypeError(`${here}.tier must be a tier name, got ${typeName(r.tier)}`);
  const tier = tierIds.get(r.tier);
  if (tier === undefined) throw new RangeError(`${here}.tier "${r.tier}" is not one of the tiers (${[...tierIds.keys()].join(', ')})`);
  return { methods, prefix, path, regex, tier };
}

/** A method name or an array of them, upper-cased; each an HTTP method. */
function compileMethods(method, at) {
  const list = Array.isArray(method) ? method : [method];
  if (list.length === 0) throw new RangeError(`${at} must name at least one method`);
  return list.map((m) => {
    if (typeof m !== 'string') throw new TypeError(`${at} must be a string or an array of strings, got ${typeName(m)}`);
    const up = m.toUpperCase();
    if (!METHODS.has(up)) throw new RangeError(`${at} "${m}" is not an HTTP method (${[...METHODS].join(', ')})`);
    return up;
  });
}

// Rules see the path the framework will route (lib/http/routing.js: authority, backslashes,
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
  return matchPath(rules, method, path, !dialect.caseSensitive);
}

/** As matchRoute, on a path already routed (`routedPath`); `folded`: the framework ignores case. */
function matchPath(rules, method, path, folded) {
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

const ROUTE_CONFIG_FIELDS = new Set(['tier']);

/** A route's own settings (Fastify's route config): `{ tier }` -> the tier id. Errors carry their code. */
function compileRouteConfig(value, tierIds, at) {
  return buildingOptions(() => {
    if (!isObject(value)) throw new TypeError(`${at} must be false or { tier }, got ${typeName(value)}`);
    onlyKnown(value, ROUTE_CONFIG_FIELDS, at);
    const tier = tierIds.get(value.tier);
    if (tier === undefined) throw new RangeError(`${at}.tier must be one of the tiers (${[...tierIds.keys()].join(', ')}), got ${JSON.stringify(value.tier)}`);
    return tier;
  });
}

module.exports = { compileRoutes, compileScope, compileMethods, compileRouteConfig, matchRoute, matchPath };

'use strict';
// The abuse-defense options of gatekeeper(): `limits`, `allow`, `deny`, `bans`, `challenge`, `skip`,
// `fairShare`.
// Shapes and types are checked here; the numbers of limits and ban rules are checked natively
// (src/core/limit/spec.rs, src/core/defense/rules.rs: NaN, negatives, Infinity, fractions), with
// messages that name the option the same way (`limits[0].windowMs`). Defaults come from the native
// side (`defenseConstants().banDefaults`, `fairShareDefaults`), declared once.
const native = require('../native');
const { typeName, isObject, onlyKnown, finite, optionalFn, boolean } = require('../options');
const { compileScope, compileMethods } = require('../http/route-rules');
const { compileBy } = require('./keys');
const { compileOutcome } = require('./outcome');
const { secretBuffer } = require('../gatekeeper/tier-header');
const { limitNumbers } = require('../schema/limit');
const { optionNames, rangeOf } = require('../schema');
const { NAMED_LIMIT: L } = require('../schema/defense');

const {
  banDefaults: BAN_DEFAULTS, fairShareDefaults: FAIR_DEFAULTS, algorithms: ALGORITHMS, strikeKinds: STRIKE_KINDS, maxLimits: MAX_LIMITS,
} = native.defenseConstants();

/** The gatekeeper options this file reads. */
const DEFENSE_OPTIONS = ['limits', 'allow', 'deny', 'bans', 'challenge', 'skip', 'onBan', 'exemptSkipsShedding', 'fairShare'];

const LIMIT_FIELDS = optionNames(L);
/** The native limit a `limit: (req) => n` is built on: every request sets its key's own limit first. */
const FN_LIMIT_BASE = 1;
/** What a cluster-wide limit takes from the gatekeeper: where it applies and what it counts; its numbers are the cluster's. */
const NUMBER_FIELDS = ['algorithm', 'limit', 'windowMs', 'burst', 'maxDelayMs', 'maxKeys', 'maxQueued'];
const BAN_FIELDS = new Set(['rules', 'escalation', 'maxBans', 'maxTracked', 'probeStatuses']);
const RULE_FIELDS = new Set(['name', 'on', 'threshold', 'windowMs', 'banMs']);
const ESCALATION_FIELDS = new Set(['factor', 'maxBanMs', 'memoryMs', 'permanentAfter', 'jitter']);
const FAIR_FIELDS = new Set(['reserve', 'windowMs', 'maxShare', 'subnet', 'slots', 'lagMs']);
const CHALLENGE_FIELDS = new Set(['secret', 'afterStrikes', 'ttlSec', 'header', 'cookie', 'respond']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const COOKIE_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The statuses a response is counted as a probe for, unless `bans.probeStatuses` says otherwise. */
const DEFAULT_PROBE_STATUSES = Object.freeze([400, 404, 405]);

function stringList(v, at) {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw new TypeError(`${at} must be an array of IP addresses or CIDR prefixes, got ${typeName(v)}`);
  v.forEach((s, i) => {
    if (typeof s !== 'string') throw new TypeError(`${at}[${i}] must be a string (an IP address or CIDR prefix), got ${typeName(s)}`);
  });
  return v.slice();
}

/**
 * Where a limit applies — its routes, methods and tiers (ids; null: every one) — and its cost (a
 * number, or a function of the request), for local and cluster limits alike.
 */
function scopeOf(l, at, tierIds) {
  let tiers = null;
  if (l.tiers !== undefined) {
    const list = Array.isArray(l.tiers) ? l.tiers : [l.tiers];
    if (list.length === 0) throw new RangeError(`${at}.tiers must name at least one tier`);
    tiers = list.map((t) => {
      const id = tierIds.get(t);
      if (id === undefined) throw new RangeError(`${at}.tiers: ${JSON.stringify(t)} is not one of the tiers (${[...tierIds.keys()].join(', ')})`);
      return id;
    });
  }
  let cost = L.cost.default;
  let costFn = null;
  if (typeof l.cost === 'function') costFn = l.cost;
  else if (l.cost !== undefined) cost = finite(l.cost, `${at}.cost`, rangeOf(L.cost));
  return {
    // The option's name in warnings at request time ("limits[2]").
    option: at.replace(/^gatekeeper: options\./, ''),
    routes: l.routes === undefined ? null : compileScope(l.routes, `${at}.routes`),
    methods: l.methods === undefined ? null : compileMethods(l.methods, `${at}.methods`),
    tiers,
    cost,
    costFn,
  };
}

/**
 * A limit funded from cluster mode's leases (`cluster: true`): the gatekeeper's `options.cluster` holds
 * a limit of the same name with its algorithm and numbers (token bucket, fixed or sliding window), so
 * they are declared once; this says where it applies and what it counts. Counted by the client
 * address (the gatekeeper's prefixes), a header or a function; not by a custom prefix.
 */
function compileClusterLimit(l, at, tierIds, ipPrefixes) {
  for (const k of [...NUMBER_FIELDS, 'skipSuccessfulRequests', 'skipFailedRequests', 'requestWasSuccessful']) {
    if (l[k] !== undefined) {
      throw new TypeError(`${at}.${k}: a cluster limit takes its algorithm and numbers from options.cluster's limit "${l.name}"; leave ${k} out`);
    }
  }
  const by = compileBy(l.by, `${at}.by`, ipPrefixes);
  if (by.kind === 'ip' && l.by !== undefined && l.by !== 'ip') {
    throw new TypeError(`${at}.by: a cluster limit counts by 'ip' (the gatekeeper's prefixes), a header or a function, not by a prefix of its own`);
  }
  const scope = scopeOf(l, at, tierIds);
  if (scope.costFn === null && scope.cost === 0) throw new RangeError(`${at}.cost must be at least 1 for a cluster limit`);
  return { cluster: true, at, name: l.name, by, ...scope };
}

function compileLimit(l, i, tierIds, ipPrefixes) {
  const at = `gatekeeper: options.limits[${i}]`;
  if (!isObject(l)) throw new TypeError(`${at} must be an object { name, limit, windowMs, ... }, got ${typeName(l)}`);
  onlyKnown(l, LIMIT_FIELDS, at);
  if (typeof l.name !== 'string' || l.name === '') throw new TypeError(`${at}.name must be a non-empty string, got ${typeName(l.name)}`);
  // The name is a structured-field string in RateLimit headers: printable ASCII without quotes.
  if (!/^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(l.name)) {
    throw new RangeError(`${at}.name must be 1-64 printable ASCII characters without " or \\, got ${JSON.stringify(l.name)}`);
  }
  if (l.cluster !== undefined && l.cluster !== false) {
    if (l.cluster !== true) throw new TypeError(`${at}.cluster must be a boolean, got ${typeName(l.cluster)}`);
    return compileClusterLimit(l, at, tierIds, ipPrefixes);
  }
  const algorithm = l.algorithm === undefined ? L.algorithm.default : l.algorithm;
  const limitFn = typeof l.limit === 'function' ? l.limit : null;
  if (limitFn !== null) {
    if (algorithm === 'sliding-window') {
      throw new TypeError(`${at}.limit: a function limit is not available with 'sliding-window' (its memory is sized by the limit); use 'sliding-counter'`);
    }
    if (l.burst !== undefined) throw new TypeError(`${at}.burst: a function limit sets the burst too (it is the limit); leave burst out`);
    limitNumbers({ ...l, limit: 1 }, at, algorithm, ALGORITHMS); // the rest of the one check; the function's values are checked per request
  } else {
    if (typeof l.limit !== 'number') throw new TypeError(`${at}.limit must be a number or a function (req) => number, got ${typeName(l.limit)}`);
    limitNumbers(l, at, algorithm, ALGORITHMS); // the one check of limit, windowMs and burst (lib/schema/limit.js)
  }
  for (const k of ['maxDelayMs', 'maxKeys']) {
    if (l[k] !== undefined && typeof l[k] !== 'number') throw new TypeError(`${at}.${k} must be a number, got ${typeName(l[k])}`);
  }
  const by = compileBy(l.by, `${at}.by`, ipPrefixes);
  const scope = scopeOf(l, at, tierIds);
  const shaper = algorithm === 'gcra' && l.maxDelayMs !== undefined && l.maxDelayMs > 0;
  const maxQueued = l.maxQueued === undefined ? L.maxQueued.default : finite(l.maxQueued, `${at}.maxQueued`, rangeOf(L.maxQueued));
  if (l.maxQueued !== undefined && !shaper) throw new TypeError(`${at}.maxQueued applies to a shaper only (algorithm 'gcra' with maxDelayMs > 0)`);
  return {
    native: {
      name: l.name,
      algorithm,
      limit: limitFn === null ? l.limit : FN_LIMIT_BASE,
      windowMs: l.windowMs,
      burst: l.burst,
      maxDelayMs: l.maxDelayMs,
      maxKeys: l.maxKeys,
      ipv4Prefix: by.v4,
      ipv6Prefix: by.v6,
    },
    name: l.name,
    by,
    ...scope,
    shaper,
    maxQueued,
    limitFn,
    ...compileOutcome(l, at),
  };
}

function compileRules(rules, at) {
  if (rules === undefined) return BAN_DEFAULTS.rules.map((r) => ({ ...r }));
  if (rules === false) return [];
  if (!Array.isArray(rules)) throw new TypeError(`${at} must be an array of { name, on, threshold, windowMs, banMs } or false, got ${typeName(rules)}`);
  return rules.map((r, i) => {
    const here = `${at}[${i}]`;
    if (!isObject(r)) throw new TypeError(`${here} must be an object { name, on, threshold, windowMs, banMs }, got ${typeName(r)}`);
    onlyKnown(r, RULE_FIELDS, here);
    if (typeof r.name !== 'string' || r.name === '') throw new TypeError(`${here}.name must be a non-empty string, got ${typeName(r.name)}`);
    if (!STRIKE_KINDS.includes(r.on)) {
      throw new RangeError(`${here}.on must be one of ${STRIKE_KINDS.map((k) => `'${k}'`).join(', ')}, got ${JSON.stringify(r.on)}`);
    }
    for (const k of ['threshold', 'windowMs', 'banMs']) {
      if (typeof r[k] !== 'number') throw new TypeError(`${here}.${k} must be a number, got ${typeName(r[k])}`);
    }
    return { name: r.name, on: r.on, threshold: r.threshold, windowMs: r.windowMs, banMs: r.banMs };
  });
}

function compileBans(b) {
  const at = 'gatekeeper: options.bans';
  if (b === undefined) b = {};
  if (!isObject(b)) throw new TypeError(`${at} must be an object, got ${typeName(b)}`);
  onlyKnown(b, BAN_FIELDS, at);
  const e = b.escalation === undefined ? {} : b.escalation;
  if (!isObject(e)) throw new TypeError(`${at}.escalation must be an object, got ${typeName(e)}`);
  onlyKnown(e, ESCALATION_FIELDS, `${at}.escalation`);
  const esc = { ...BAN_DEFAULTS.escalation, ...Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) };
  for (const k of ['factor', 'maxBanMs', 'memoryMs', 'jitter']) {
    if (typeof esc[k] !== 'number') throw new TypeError(`${at}.escalation.${k} must be a number, got ${typeName(esc[k])}`);
  }
  if (esc.permanentAfter !== false && typeof esc.permanentAfter !== 'number') {
    throw new TypeError(`${at}.escalation.permanentAfter must be a number or false, got ${typeName(esc.permanentAfter)}`);
  }
  const maxBans = b.maxBans === undefined ? BAN_DEFAULTS.maxBans : b.maxBans;
  const maxTracked = b.maxTracked === undefined ? BAN_DEFAULTS.maxTracked : b.maxTracked;
  if (typeof maxBans !== 'number') throw new TypeError(`${at}.maxBans must be a number, got ${typeName(maxBans)}`);
  if (typeof maxTracked !== 'number') throw new TypeError(`${at}.maxTracked must be a number, got ${typeName(maxTracked)}`);
  let probeStatuses = DEFAULT_PROBE_STATUSES;
  if (b.probeStatuses !== undefined) {
    if (!Array.isArray(b.probeStatuses)) throw new TypeError(`${at}.probeStatuses must be an array of HTTP statuses, got ${typeName(b.probeStatuses)}`);
    probeStatuses = b.probeStatuses.map((s, i) => finite(s, `${at}.probeStatuses[${i}]`, { min: 100, max: 599, integer: true }));
  }
  const rules = compileRules(b.rules, `${at}.rules`);
  return {
    native: {
      rules,
      factor: esc.factor,
      maxBanMs: esc.maxBanMs,
      memoryMs: esc.memoryMs,
      permanentAfter: esc.permanentAfter === false ? undefined : esc.permanentAfter,
      jitter: esc.jitter,
      maxBans,
      maxTracked,
    },
    // Only a probe rule makes watching response statuses worth its cost.
    probeStatuses: rules.some((r) => r.on === 'probe') ? new Set(probeStatuses) : null,
  };
}

function compileChallenge(c) {
  const at = 'gatekeeper: options.challenge';
  if (c === undefined) return null;
  if (!isObject(c)) throw new TypeError(`${at} must be an object { secret, afterStrikes?, ttlSec?, header?, cookie?, respond? }, got ${typeName(c)}`);
  onlyKnown(c, CHALLENGE_FIELDS, at);
  if (c.secret === undefined) throw new TypeError(`${at}.secret is required (a string or Buffer of at least 16 bytes, or an array of them: the first mints)`);
  const list = Array.isArray(c.secret) ? c.secret : [c.secret];
  if (list.length === 0) throw new RangeError(`${at}.secret must hold at least one secret`);
  const secrets = list.map((s, i) => secretBuffer(s, Array.isArray(c.secret) ? `${at}.secret[${i}]` : `${at}.secret`));
  const header = c.header === undefined ? 'x-tiergate-pass' : c.header;
  if (header !== false && (typeof header !== 'string' || !HEADER_NAME.test(header))) {
    throw new TypeError(`${at}.header must be a header name or false, got ${typeName(header)}`);
  }
  const cookie = c.cookie === undefined ? 'tiergate_pass' : c.cookie;
  if (cookie !== false && (typeof cookie !== 'string' || !COOKIE_NAME.test(cookie))) {
    throw new TypeError(`${at}.cookie must be a cookie name or false, got ${typeName(cookie)}`);
  }
  if (header === false && cookie === false) throw new TypeError(`${at}: a pass needs a header or a cookie to arrive in`);
  return {
    secrets,
    afterStrikes: c.afterStrikes === undefined ? 2 : finite(c.afterStrikes, `${at}.afterStrikes`, { min: 1, max: 1000, integer: true }),
    ttlSec: c.ttlSec === undefined ? 3600 : finite(c.ttlSec, `${at}.ttlSec`, { min: 1, max: 30 * 86400, integer: true }),
    header: header === false ? null : header.toLowerCase(),
    cookie: cookie === false ? null : cookie,
    respond: optionalFn(c.respond, `${at}.respond`),
  };
}

/**
 * `fairShare`: true or { reserve?, windowMs?, maxShare?, subnet?, slots?, lagMs? } (the fair-share backstop,
 * src/core/defense/fair.rs), or null when absent or false. Types here; numbers natively.
 */
function compileFairShare(f) {
  const at = 'gatekeeper: options.fairShare';
  if (f === undefined || f === false) return null;
  if (f === true) f = {};
  if (!isObject(f)) {
    throw new TypeError(`${at} must be true, false or an object { reserve?, windowMs?, maxShare?, subnet?, slots?, lagMs? }, got ${typeName(f)}`);
  }
  onlyKnown(f, FAIR_FIELDS, at);
  const o = {};
  for (const k of ['reserve', 'windowMs', 'maxShare', 'slots', 'lagMs']) {
    const v = f[k] === undefined ? FAIR_DEFAULTS[k] : f[k];
    if (typeof v !== 'number') throw new TypeError(`${at}.${k} must be a number, got ${typeName(v)}`);
    o[k] = v;
  }
  const subnet = f.subnet === undefined ? FAIR_DEFAULTS.subnet : f.subnet;
  if (subnet !== false) {
    if (!isObject(subnet)) throw new TypeError(`${at}.subnet must be { v4, v6 } (prefix lengths) or false, got ${typeName(subnet)}`);
    onlyKnown(subnet, new Set(['v4', 'v6']), `${at}.subnet`);
    o.subnetV4 = finite(subnet.v4, `${at}.subnet.v4`, { max: 32, integer: true });
    o.subnetV6 = finite(subnet.v6, `${at}.subnet.v6`, { max: 128, integer: true });
  }
  return o;
}

/**
 * The defense part of gatekeeper options, or null when none of them is given. `tierIds`: name ->
 * id; `ipPrefixes`: the gatekeeper's { v4, v6 } (what `by: 'ip'` and the ban key mask to).
 */
function compileDefense(options, tierIds, ipPrefixes) {
  // `fairShare: false` asks for nothing.
  if (!DEFENSE_OPTIONS.some((k) => options[k] !== undefined && !(k === 'fairShare' && options[k] === false))) return null;
  const limitsOpt = options.limits === undefined ? [] : options.limits;
  if (!Array.isArray(limitsOpt)) throw new TypeError(`gatekeeper: options.limits must be an array of limits, got ${typeName(limitsOpt)}`);
  if (limitsOpt.length > MAX_LIMITS) throw new RangeError(`gatekeeper: options.limits must list at most ${MAX_LIMITS} limits, got ${limitsOpt.length}`);
  const all = limitsOpt.map((l, i) => compileLimit(l, i, tierIds, ipPrefixes));
  const first = new Map();
  for (const [i, l] of all.entries()) {
    if (first.has(l.name)) {
      throw new RangeError(`gatekeeper: options.limits[${i}].name ${JSON.stringify(l.name)} is a duplicate of limits[${first.get(l.name)}].name`);
    }
    first.set(l.name, i);
  }
  // Local limits are decided natively; cluster limits after the gate admits, from leases.
  const limits = all.filter((l) => l.cluster !== true);
  const clusterLimits = all.filter((l) => l.cluster === true);
  const challenge = compileChallenge(options.challenge);
  const bans = compileBans(options.bans);
  if (challenge !== null && !bans.native.rules.some((r) => r.threshold > challenge.afterStrikes)) {
    throw new RangeError(
      `gatekeeper: options.challenge.afterStrikes (${challenge.afterStrikes}) must be below some ban rule's threshold, ` +
        'or no client is ever challenged before it is banned',
    );
  }
  return {
    limits,
    clusterLimits,
    allow: stringList(options.allow, 'gatekeeper: options.allow'),
    deny: stringList(options.deny, 'gatekeeper: options.deny'),
    bans,
    challenge,
    skip: optionalFn(options.skip, 'gatekeeper: options.skip'),
    onBan: optionalFn(options.onBan, 'gatekeeper: options.onBan'),
    exemptSkipsShedding: options.exemptSkipsShedding === undefined ? false : boolean(options.exemptSkipsShedding, 'gatekeeper: options.exemptSkipsShedding'),
    fairShare: compileFairShare(options.fairShare),
    ipPrefixes,
  };
}

module.exports = { compileDefense, DEFENSE_OPTIONS, DEFAULT_PROBE_STATUSES, BAN_DEFAULTS, FAIR_DEFAULTS };

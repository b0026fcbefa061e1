'use strict';
// The gatekeeper's options: checked and normalized once, at construction (`normalize`), into the
// shape the gatekeeper reads per request. Names, defaults and ranges: lib/schema/gatekeeper.js.
const native = require('../native');
const { Ledger } = require('../ledger');
const { MAX_TICKS_PER_WINDOW } = require('../lag'); // also registers this thread's heap source for the native sampler
const { compileRoutes } = require('../http/route-rules');
const { checkTrustProxy } = require('../http/client');
const { compileKey } = require('./key');
const { TIER_NAME, TIER_NAME_RULE, checkTierName, tierHeaderOption, tierSecretOption } = require('./tier-header');
const { compileDefense, DEFENSE_OPTIONS } = require('../defense/options');
const { concurrencyOptions } = require('./slots');
const { typeName, isObject, onlyKnown, optionalFn, finite, retryAfterOptions, schemaOption, optionOrDefault } = require('../options');
const { optionNames, rangeOf } = require('../schema');
const { GATEKEEPER, SHED, SHADOW, SHED_DEFAULTS } = require('../schema/gatekeeper');
const { Cluster } = require('../cluster');

const { sel: SEL } = native.gateConstants();
const MAX_TIERS = SEL.MAX_TIERS;

// The default tiers' budgets: no practical cap (a billion requests per second and tier), so that
// `gatekeeper()` refuses nothing on a healthy loop; under overload their refill scales shed them
// tier by tier (a scale of 0 refuses at once), and the turn budget trims what the loop cannot run.
const UNBOUNDED = Object.freeze({ limit: 1e9, windowMs: 1000 });
const DEFAULT_TIERS = Object.freeze([
  Object.freeze({ name: 'critical', protected: true, ...UNBOUNDED }),
  Object.freeze({ name: 'standard', ...UNBOUNDED }),
  Object.freeze({ name: 'background', ...UNBOUNDED }),
]);

/** With the default tiers, after the given route rules: health probes are never shed. */
const PROBE_PATHS = ['/health', '/healthz', '/ready', '/readyz', '/live', '/livez'];
const PROBE_ROUTES = Object.freeze(PROBE_PATHS.map((path) => Object.freeze({ method: ['GET', 'HEAD'], path, tier: 'critical' })));

const OPTIONS = optionNames(GATEKEEPER);
for (const k of DEFENSE_OPTIONS) OPTIONS.add(k); // lib/defense/options.js reads them
const SHED_FIELDS = optionNames(SHED);
const G = GATEKEEPER;

/** An option with a plain default and a schema check: the default when not given. */
function plain(options, name) {
  return optionOrDefault(G, options, name, 'gatekeeper: options');
}

function shedOptions(shed) {
  if (shed === false) return { ...SHED_DEFAULTS, enabled: false, maxBaselineMs: SHED_DEFAULTS.targetLagMs };
  if (shed === undefined) shed = {};
  if (!isObject(shed)) throw new TypeError(`gatekeeper: options.shed must be an object or false, got ${typeName(shed)}`);
  onlyKnown(shed, SHED_FIELDS, 'gatekeeper: options.shed');
  const o = { ...SHED_DEFAULTS, ...Object.fromEntries(Object.entries(shed).filter(([, v]) => v !== undefined)), enabled: true };
  if (o.maxBaselineMs === undefined) o.maxBaselineMs = o.targetLagMs;
  const at = (k) => `gatekeeper: options.shed.${k}`;
  // Each option's type and range (lib/schema/gatekeeper.js), in the documented order; then the relations.
  for (const e of Object.values(SHED)) {
    if (e.name === 'windowMs') finite(o.windowMs, at('windowMs'), { ...rangeOf(e), min: o.resolutionMs });
    else schemaOption(e, o[e.name], at(e.name));
  }
  if (o.criticalLagMs <= o.targetLagMs) {
    throw new RangeError(`${at('criticalLagMs')} must be greater than targetLagMs (${o.targetLagMs}), got ${o.criticalLagMs}`);
  }
  // The sampler's window holds at most this many ticks; a longer one would be cut silently.
  if (o.windowMs / o.resolutionMs > MAX_TICKS_PER_WINDOW) {
    throw new RangeError(`${at('windowMs')} / resolutionMs must be at most ${MAX_TICKS_PER_WINDOW} ticks, got ${o.windowMs}/${o.resolutionMs}`);
  }
  return o;
}

function normalize(options) {
  if (options === undefined) options = {};
  if (!isObject(options)) throw new TypeError(`gatekeeper: options must be an object, got ${typeName(options)}`);
  onlyKnown(options, OPTIONS, 'gatekeeper: options');
  // The ledger: given, or built from the tiers.
  let ledger = options.ledger;
  if (ledger !== undefined) {
    if (!(ledger instanceof Ledger)) throw new TypeError(`gatekeeper: options.ledger must be a Ledger, got ${typeName(ledger)}`);
    if (options.tiers !== undefined || options.perKey !== undefined) {
      throw new TypeError('gatekeeper: options.tiers and options.perKey configure a new ledger; leave them out when passing options.ledger');
    }
  } else {
    const tiers = options.tiers === undefined ? DEFAULT_TIERS : options.tiers;
    if (!Array.isArray(tiers) || tiers.length === 0) {
      throw new TypeError(`gatekeeper: options.tiers must be a non-empty array of tiers, highest priority first, got ${typeName(tiers)}`);
    }
    tiers.forEach((t, i) => {
      if (isObject(t) && typeof t.name === 'string') checkTierName(t.name, `gatekeeper: options.tiers[${i}].name`);
    });
    try {
      ledger = new Ledger({ tiers, ...(options.perKey === undefined ? {} : { perKey: options.perKey }) });
    } catch (err) {
      err.message = `gatekeeper: options.${err.message.replace(/^options\./, '')}`;
      throw err;
    }
  }
  const names = ledger.tiers;
  if (names.length > MAX_TIERS) throw new RangeError(`gatekeeper: at most ${MAX_TIERS} tiers, got ${names.length}`);
  names.forEach((n, i) => {
    if (!TIER_NAME.test(n)) {
      throw new RangeError(`gatekeeper: tier ${i} of options.ledger is named ${JSON.stringify(n)}; gatekeeper tiers must be ${TIER_NAME_RULE}`);
    }
  });
  const ids = new Map(names.map((n, i) => [n, i]));

  // The default tiers, given no tier: 'standard' (the lowest is for traffic someone chose to
  // shed first), and health probes 'critical' (a shed probe makes a load balancer pull the backend).
  const defaultTiers = options.tiers === undefined && options.ledger === undefined;
  let defaultTier = defaultTiers ? ids.get('standard') : names.length - 1;
  if (options.defaultTier !== undefined) {
    if (typeof options.defaultTier !== 'string') {
      throw new TypeError(`gatekeeper: options.defaultTier must be a tier name, got ${typeName(options.defaultTier)}`);
    }
    defaultTier = ids.get(options.defaultTier);
    if (defaultTier === undefined) {
      throw new RangeError(`gatekeeper: options.defaultTier "${options.defaultTier}" is not one of the tiers (${names.join(', ')})`);
    }
  }

  const tierHeader = tierHeaderOption(options.tierHeader, 'gatekeeper: options.tierHeader');
  const secrets = tierSecretOption(options.tierSecret, 'gatekeeper: options.tierSecret');
  const headersOpt = options.rateLimitHeaders === undefined ? G.rateLimitHeaders.default : options.rateLimitHeaders;
  if (!G.rateLimitHeaders.values.includes(headersOpt)) {
    const modes = G.rateLimitHeaders.values.filter(Boolean).map((m) => `'${m}'`).join(', ');
    throw new TypeError(`gatekeeper: options.rateLimitHeaders must be ${modes} or false, got ${JSON.stringify(headersOpt)}`);
  }
  const ipv4Prefix = plain(options, 'ipv4Prefix');
  const ipv6Prefix = plain(options, 'ipv6Prefix');
  const cluster = options.cluster === undefined ? null : options.cluster;
  if (cluster !== null) {
    if (!(cluster instanceof Cluster)) throw new TypeError(`gatekeeper: options.cluster must be made by tiergate.cluster(), got ${typeName(cluster)}`);
    for (const t of cluster.tierNames) {
      if (!ids.has(t)) throw new RangeError(`gatekeeper: options.cluster has limits for tier "${t}", which is not one of the tiers (${names.join(', ')})`);
    }
    if (options.cost !== undefined && !Number.isInteger(options.cost)) {
      throw new RangeError(`gatekeeper: options.cost must be an integer with options.cluster (leases hold whole tokens), got ${options.cost}`);
    }
  }
  const withProbeRoutes = defaultTiers && (options.routes === undefined || Array.isArray(options.routes));
  return {
    cluster,
    ledger,
    names,
    ids,
    defaultTier,
    tierHeader,
    trustTierHeader: plain(options, 'trustTierHeader'),
    secrets,
    routes: compileRoutes(withProbeRoutes ? [...(options.routes || []), ...PROBE_ROUTES] : options.routes, ids, 'gatekeeper: options.routes'),
    classify: optionalFn(options.classify, 'gatekeeper: options.classify'),
    key: compileKey(options.key, 'gatekeeper: options.key'),
    trustProxy: checkTrustProxy(options.trustProxy, 'gatekeeper: options.trustProxy'),
    ipv4Prefix,
    ipv6Prefix,
    defense: compileDefense(options, ids, { v4: ipv4Prefix, v6: ipv6Prefix }),
    cost: plain(options, 'cost'),
    shed: shedOptions(options.shed),
    concurrency: concurrencyOptions(options.concurrency),
    shedStatus: plain(options, 'shedStatus'),
    shadow: shadowOption(options.shadow),
    rateLimitHeaders: headersOpt,
    rateLimitHeadersOnSuccess: plain(options, 'rateLimitHeadersOnSuccess'),
    retryAfter: retryAfterOptions(options.retryAfter, 'gatekeeper: options.retryAfter'),
    respond: optionalFn(options.respond, 'gatekeeper: options.respond'),
    onDecision: optionalFn(options.onDecision, 'gatekeeper: options.onDecision'),
    onShed: optionalFn(options.onShed, 'gatekeeper: options.onShed'),
    onReject: optionalFn(options.onReject, 'gatekeeper: options.onReject'),
  };
}

/**
 * options.shadow -> false (enforce every decision) or the share of overload decisions enforced,
 * 0..100 (`true`: none).
 */
function shadowOption(v, at = 'gatekeeper: options.shadow') {
  if (v === undefined || v === false) return false;
  if (v === true) return 0;
  if (!isObject(v)) throw new TypeError(`${at} must be false, true or { enforcePercent }, got ${typeName(v)}`);
  onlyKnown(v, optionNames(SHADOW), at);
  return optionOrDefault(SHADOW, v, 'enforcePercent', at);
}

module.exports = { normalize, shedOptions, DEFAULT_TIERS, PROBE_ROUTES };

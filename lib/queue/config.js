'use strict';
// The concurrency gate's options, validated at construction, each error naming its option.
const { describe, onlyKnown, checkNumber, checkBoolean, checkFunction, retryAfterOptions } = require('../options');
const { compileRoutes } = require('../adapters/route-rules');
const { AdaptiveLimit } = require('./adaptive-limit');
const { parseCodel, StandingRule } = require('./standing');
const { makeClassifier } = require('./classify');
const { TierHeader, checkTierName, tierHeaderOption, tierSecretOption } = require('../gatekeeper/tier-header');
const { WaitHistogram } = require('./wait-histogram');

const DEFAULT_TIERS = [
  { name: 'critical', protected: true },
  { name: 'standard' },
  { name: 'background' },
];
const OPTION_KEYS = new Set([
  'maxConcurrent', 'limit', 'maxQueue', 'queueTimeoutMs', 'timeoutStatus', 'retryAfter', 'tiers',
  'defaultTier', 'tierHeader', 'trustTierHeader', 'tierSecret', 'classify', 'routes', 'displace', 'codel', 'lifo', 'onReject',
]);
const TIER_KEYS = ['name', 'protected', 'maxQueue', 'queueTimeoutMs'];
// Keys a gatekeeper tier carries, accepted (and ignored) so one tiers array can configure both guards.
const FOREIGN_TIER_KEYS = ['algorithm', 'limit', 'windowMs', 'burst', 'perKey'];
const KNOWN_TIER_KEYS = new Set([...TIER_KEYS, ...FOREIGN_TIER_KEYS]);

/** A tier record: its settings and its counters (the waiters themselves live in WaitQueues). */
function parseTiers(tiers, defaults) {
  if (!Array.isArray(tiers) || tiers.length === 0) throw new TypeError('tiers must be a non-empty array (highest priority first)');
  const seen = new Set();
  return tiers.map((t, i) => {
    const spec = typeof t === 'string' ? { name: t } : t;
    if (spec === null || typeof spec !== 'object') throw new TypeError(`tiers[${i}] must be a tier name or { name, protected?, maxQueue?, queueTimeoutMs? }`);
    onlyKnown(spec, KNOWN_TIER_KEYS, `tiers[${i}]`);
    checkTierName(spec.name, `tiers[${i}].name`);
    // Names match exactly (the tier header's rule), but two differing only in case would confuse people.
    if (seen.has(spec.name.toLowerCase())) throw new TypeError(`tiers[${i}].name "${spec.name}" is a duplicate`);
    seen.add(spec.name.toLowerCase());
    return {
      id: i,
      name: spec.name,
      protected: spec.protected === undefined ? false : checkBoolean(`tiers[${i}].protected`, spec.protected),
      maxQueue: spec.maxQueue === undefined ? defaults.maxQueue : checkNumber(`tiers[${i}].maxQueue`, spec.maxQueue, { integer: true }),
      queueTimeoutMs: spec.queueTimeoutMs === undefined
        ? defaults.queueTimeoutMs
        : checkNumber(`tiers[${i}].queueTimeoutMs`, spec.queueTimeoutMs, { min: 0, minExclusive: true }),
      admitted: 0,
      queuedTotal: 0,
      rejected: 0,
      displaced: 0,
      timeout: 0,
      codel: 0,
      abandoned: 0,
      timeoutWaitMax: 0,
      wait: new WaitHistogram(),
    };
  });
}

/** `maxConcurrent`: a positive integer, or 'auto' with `limit` options. Returns { limit, adaptive }. */
function parseLimit(maxConcurrent, limitOptions, loopUtilization) {
  if (maxConcurrent === 'auto') {
    const adaptive = new AdaptiveLimit(limitOptions === undefined ? {} : limitOptions, 'limit', loopUtilization);
    return { limit: adaptive.limit, adaptive };
  }
  if (maxConcurrent === undefined) throw new TypeError('maxConcurrent is required: a positive integer or "auto"');
  if (typeof maxConcurrent === 'string') throw new TypeError(`maxConcurrent must be a positive integer or "auto", got ${describe(maxConcurrent)}`);
  const limit = checkNumber('maxConcurrent', maxConcurrent, { min: 1, integer: true });
  if (limitOptions !== undefined) throw new TypeError('limit is only used with maxConcurrent: "auto"');
  return { limit, adaptive: null };
}

/** Everything the gate needs, from the user's options and the framework's routing dialect. */
function parseOptions(options, routing, loopUtilization) {
  if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object, got ${describe(options)}`);
  onlyKnown(options, OPTION_KEYS, 'options');
  const {
    maxConcurrent, limit: limitOptions, maxQueue = 100, queueTimeoutMs = 10_000, timeoutStatus = 408,
    retryAfter, tiers: tierSpecs = DEFAULT_TIERS, defaultTier, tierHeader, tierSecret,
    trustTierHeader = false, classify, routes, displace = true, codel, lifo = false, onReject,
  } = options;
  const { limit, adaptive } = parseLimit(maxConcurrent, limitOptions, loopUtilization);
  checkNumber('maxQueue', maxQueue, { integer: true });
  checkNumber('queueTimeoutMs', queueTimeoutMs, { min: 0, minExclusive: true });
  checkNumber('timeoutStatus', timeoutStatus, { min: 400, max: 599, integer: true });
  const retry = retryAfterOptions(retryAfter, 'retryAfter');
  const headerName = tierHeaderOption(tierHeader, 'tierHeader');
  checkBoolean('trustTierHeader', trustTierHeader);
  const secrets = tierSecretOption(tierSecret, 'tierSecret');
  checkFunction('classify', classify);
  checkBoolean('displace', displace);
  checkBoolean('lifo', lifo);
  checkFunction('onReject', onReject);
  const standing = new StandingRule(parseCodel(codel));
  const tiers = parseTiers(tierSpecs, { maxQueue, queueTimeoutMs });
  const tierByName = new Map(tiers.map((t) => [t.name, t])); // exact names, as the tier header
  const tierIds = new Map(tiers.map((t) => [t.name, t.id])); // route rules and route configs name tiers by id
  const routeRules = compileRoutes(routes, tierIds, 'routes'); // the gatekeeper's rules
  let defaultTierRec = tiers[tiers.length - 1];
  if (defaultTier !== undefined) {
    if (typeof defaultTier !== 'string') throw new TypeError(`defaultTier must be a tier name, got ${describe(defaultTier)}`);
    defaultTierRec = tierByName.get(defaultTier);
    if (!defaultTierRec) throw new RangeError(`defaultTier "${defaultTier}" is not one of the tiers (${tiers.map((t) => t.name).join(', ')})`);
  }
  const header = headerName === null ? null : new TierHeader(tiers.map((t) => t.name), defaultTierRec.id, trustTierHeader, secrets);
  const classifyRequest = makeClassifier({ tiers, tierByName, defaultTier: defaultTierRec, headerName, header, classify, routeRules, routing });
  return { limit, adaptive, maxQueue, timeoutStatus, retry, tiers, tierIds, classifyRequest, displace, lifo, onReject, standing };
}

module.exports = { parseOptions, DEFAULT_TIERS };

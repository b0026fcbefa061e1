'use strict';
// The concurrency gate's options, validated at construction, each error naming its option.
const { describe, onlyKnown, checkNumber, checkBoolean, checkFunction, retryAfterOptions } = require('../options');
const { compileRoutes } = require('../adapters/route-rules');
const { AdaptiveLimit } = require('./adaptive-limit');
const { parseCodel, StandingRule } = require('./standing');
const { makeClassifier, MAX_HEADER_LENGTH } = require('./classify');
const { WaitHistogram } = require('./wait-histogram');

const DEFAULT_TIERS = [
  { name: 'critical', protected: true },
  { name: 'standard' },
  { name: 'background' },
];
const OPTION_KEYS = new Set([
  'maxConcurrent', 'limit', 'maxQueue', 'queueTimeoutMs', 'timeoutStatus', 'retryAfter', 'tiers',
  'defaultTier', 'tierHeader', 'trustTierHeader', 'classify', 'routes', 'displace', 'codel', 'lifo', 'onReject',
]);
const TIER_KEYS = ['name', 'protected', 'maxQueue', 'queueTimeoutMs'];
// Keys a gatekeeper tier carries, accepted (and ignored) so one tiers array can configure both guards.
const FOREIGN_TIER_KEYS = ['capacity', 'refillPerSec', 'perKey'];
const KNOWN_TIER_KEYS = new Set([...TIER_KEYS, ...FOREIGN_TIER_KEYS]);

/** A tier record: its settings and its counters (the waiters themselves live in WaitQueues). */
function parseTiers(tiers, defaults) {
  if (!Array.isArray(tiers) || tiers.length === 0) throw new TypeError('tiers must be a non-empty array (highest priority first)');
  const seen = new Set();
  return tiers.map((t, i) => {
    const spec = typeof t === 'string' ? { name: t } : t;
    if (spec === null || typeof spec !== 'object') throw new TypeError(`tiers[${i}] must be a tier name or { name, protected?, maxQueue?, queueTimeoutMs? }`);
    onlyKnown(spec, KNOWN_TIER_KEYS, `tiers[${i}]`);
    if (typeof spec.name !== 'string' || spec.name.length === 0 || spec.name.length > MAX_HEADER_LENGTH) {
      throw new TypeError(`tiers[${i}].name must be a non-empty string of at most ${MAX_HEADER_LENGTH} characters`);
    }
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
      timedOut: 0,
      codelDropped: 0,
      abandoned: 0,
      timedOutWaitMax: 0,
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
    retryAfter, tiers: tierSpecs = DEFAULT_TIERS, defaultTier, tierHeader = 'x-user-tier',
    trustTierHeader = false, classify, routes, displace = true, codel, lifo = false, onReject,
  } = options;
  const { limit, adaptive } = parseLimit(maxConcurrent, limitOptions, loopUtilization);
  checkNumber('maxQueue', maxQueue, { integer: true });
  checkNumber('queueTimeoutMs', queueTimeoutMs, { min: 0, minExclusive: true });
  checkNumber('timeoutStatus', timeoutStatus, { min: 400, max: 599, integer: true });
  const retry = retryAfterOptions(retryAfter, 'retryAfter');
  if (tierHeader !== false && (typeof tierHeader !== 'string' || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/i.test(tierHeader))) {
    throw new TypeError(`tierHeader must be a header name or false, got ${describe(tierHeader)}`);
  }
  checkBoolean('trustTierHeader', trustTierHeader);
  checkFunction('classify', classify);
  checkBoolean('displace', displace);
  checkBoolean('lifo', lifo);
  checkFunction('onReject', onReject);
  const standing = new StandingRule(parseCodel(codel));
  const tiers = parseTiers(tierSpecs, { maxQueue, queueTimeoutMs });
  const tierByName = new Map(tiers.map((t) => [t.name.toLowerCase(), t])); // header and classify(): any case
  const routeRules = compileRoutes(routes, new Map(tiers.map((t) => [t.name, t.id])), 'routes'); // the gatekeeper's rules
  let defaultTierRec = tiers[tiers.length - 1];
  if (defaultTier !== undefined) {
    if (typeof defaultTier !== 'string') throw new TypeError(`defaultTier must be a tier name, got ${describe(defaultTier)}`);
    defaultTierRec = tierByName.get(defaultTier.toLowerCase());
    if (!defaultTierRec) throw new RangeError(`defaultTier "${defaultTier}" is not one of the tiers (${tiers.map((t) => t.name).join(', ')})`);
  }
  const classifyRequest = makeClassifier({
    tiers, tierByName, defaultTier: defaultTierRec, headerName: tierHeader === false ? null : tierHeader.toLowerCase(),
    trustTierHeader, classify, routeRules, routing,
  });
  const tierIds = new Map(tiers.map((t) => [t.name, t.id]));
  return { limit, adaptive, maxQueue, timeoutStatus, retry, tiers, tierIds, classifyRequest, displace, lifo, onReject, standing };
}

module.exports = { parseOptions, DEFAULT_TIERS };

'use strict';
// The concurrency gate's options, validated at construction, each error naming its option.
const { describe, onlyKnown, checkNumber, checkBoolean, checkFunction, retryAfterOptions } = require('../options');
const { compileRoutes } = require('../http/route-rules');
const { AdaptiveLimit } = require('./adaptive-limit');
const { parseCodel, StandingRule } = require('./standing');
const { makeClassifier } = require('./classify');
const { TierHeader, checkTierName, tierHeaderOption, tierSecretOption } = require('../gatekeeper/tier-header');
const { WaitHistogram } = require('./wait-histogram');
const { optionNames, checkNumberRange } = require('../schema');
const { CONCURRENCY_GATE: C, QUEUE_TIER: T, QUEUE_TIER_FOREIGN } = require('../schema/concurrency-gate');

const DEFAULT_TIERS = [
  { name: 'critical', protected: true },
  { name: 'standard' },
  { name: 'background' },
];
const OPTION_KEYS = optionNames(C);
const KNOWN_TIER_KEYS = new Set([...Object.keys(T), ...QUEUE_TIER_FOREIGN]);

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
      protected: spec.protected === undefined ? T.protected.default : checkBoolean(`tiers[${i}].protected`, spec.protected),
      maxQueue: spec.maxQueue === undefined ? defaults.maxQueue : checkNumber(`tiers[${i}].maxQueue`, spec.maxQueue, checkNumberRange(T.maxQueue)),
      queueTimeoutMs: spec.queueTimeoutMs === undefined
        ? defaults.queueTimeoutMs
        : checkNumber(`tiers[${i}].queueTimeoutMs`, spec.queueTimeoutMs, checkNumberRange(T.queueTimeoutMs)),
      admitted: 0,
      queuedTotal: 0,
      rejected: 0,
      displaced: 0,
      timeout: 0,
      codel: 0,
      abandoned: 0,
      closing: 0,
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
  const limit = checkNumber('maxConcurrent', maxConcurrent, checkNumberRange(C.maxConcurrent));
  if (limitOptions !== undefined) throw new TypeError('limit is only used with maxConcurrent: "auto"');
  return { limit, adaptive: null };
}

/** Everything the gate needs, from the user's options and the framework's routing dialect. */
function parseOptions(options, routing, loopUtilization) {
  if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object, got ${describe(options)}`);
  onlyKnown(options, OPTION_KEYS, 'options');
  const {
    maxConcurrent, limit: limitOptions, maxQueue = C.maxQueue.default, queueTimeoutMs = C.queueTimeoutMs.default, timeoutStatus = C.timeoutStatus.default,
    retryAfter, tiers: tierSpecs = DEFAULT_TIERS, defaultTier, tierHeader, tierSecret,
    trustTierHeader = C.trustTierHeader.default, classify, routes, displace = C.displace.default, codel = C.codel.default, lifo = C.lifo.default, onReject,
  } = options;
  const { limit, adaptive } = parseLimit(maxConcurrent, limitOptions, loopUtilization);
  for (const [name, v] of [['maxQueue', maxQueue], ['queueTimeoutMs', queueTimeoutMs], ['timeoutStatus', timeoutStatus]]) {
    checkNumber(name, v, checkNumberRange(C[name]));
  }
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

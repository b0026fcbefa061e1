'use strict';
// Which tier a request waits in: classify(req), then the route rules, then the tier header (honoured
// above the default tier only when trusted), then the default tier. A client cannot promote itself
// through an untrusted header.
const { describe } = require('../options');
const { matchRoute } = require('../adapters/route-rules');
const { headersTruncated } = require('../adapters/client');

const MAX_HEADER_LENGTH = 64;

/**
 * `{ tiers, tierByName, defaultTier, headerName, trustTierHeader, classify, routeRules, routing }` ->
 * (req) => tier record.
 */
function makeClassifier({ tiers, tierByName, defaultTier, headerName, trustTierHeader, classify, routeRules, routing }) {
  // A value that cannot be read (an unknown name, an over-long value) gives the LOWEST tier, not the
  // default: behind a gateway that appends its own value, a client could otherwise pad or spoil the
  // header to get the default tier when the gateway said lower.
  const lowestTier = tiers[tiers.length - 1];

  function tierFromHeader(req) {
    if (headersTruncated(req)) return lowestTier; // the gateway's tier header may be among the lost ones
    let raw = req.headers[headerName];
    if (raw === undefined) return null;
    if (Array.isArray(raw)) raw = raw.join(',');
    if (typeof raw !== 'string' || raw.length > MAX_HEADER_LENGTH * 4) return lowestTier;
    if (raw.trim() === '') return null;
    // Several values (a client's own plus what an appending gateway added) are ambiguous: the lowest
    // tier, as the gatekeeper does, so no padding or ordering can lift a request above the gateway's.
    if (raw.includes(',')) return lowestTier;
    const t = tierByName.get(raw.trim().toLowerCase());
    return t === undefined ? lowestTier : t;
  }

  /** `routeTier`: a route's own tier id (Fastify route config), or undefined. */
  // As the gatekeeper does: a classify() result that is not a tier warns once and falls through.
  let warned = false;
  function warnClassify(name) {
    if (warned) return;
    warned = true;
    process.emitWarning(`tiergate: concurrencyGate classify(req) returned ${describe(name)}, which is not a tier; using the route rules, the header or the default tier`, 'TiergateWarning');
  }

  return function classifyRequest(req, routeTier) {
    if (classify !== undefined) {
      const name = classify(req);
      if (name !== undefined && name !== null) {
        const t = typeof name === 'string' ? tierByName.get(name.toLowerCase()) : undefined;
        if (t) return t;
        warnClassify(name);
      }
    }
    if (routeTier !== undefined) return tiers[routeTier];
    if (routeRules !== null) {
      const id = matchRoute(routeRules, req.method, req.originalUrl || req.url, routing);
      if (id >= 0) return tiers[id];
    }
    if (headerName !== null) {
      const t = tierFromHeader(req);
      if (t !== null) return trustTierHeader || t.id >= defaultTier.id ? t : defaultTier;
    }
    return defaultTier;
  };
}

module.exports = { makeClassifier, MAX_HEADER_LENGTH };

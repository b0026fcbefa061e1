'use strict';
// Which tier a request waits in: classify(req), then the route rules, then the tier header (honoured
// above the default tier only when trusted), then the default tier. A client cannot promote itself
// through an untrusted header.
const { describe } = require('../options');
const { matchRoute } = require('../http/route-rules');
const { headersTruncated } = require('../http/client');

/**
 * `{ tiers, tierByName, defaultTier, headerName, header (TierHeader), classify, routeRules, routing }`
 * -> (req, routeTier?) => tier record.
 */
function makeClassifier({ tiers, tierByName, defaultTier, headerName, header, classify, routeRules, routing }) {
  const lowestTier = tiers[tiers.length - 1];

  // The gatekeeper's rule, natively (lib/gatekeeper/tier-header.js): exact names, honoured above the
  // default only when trusted, signed tokens, and the LOWEST tier for anything unreadable (several
  // values, over-long, unknown), so no padding or ordering lifts a request above an appending gateway.
  function tierFromHeader(req) {
    if (headersTruncated(req)) return lowestTier; // the gateway's tier header may be among the lost ones
    const raw = req.headers[headerName];
    if (raw === undefined) return defaultTier;
    return tiers[header.tierOf(Array.isArray(raw) ? raw.join(', ') : raw)];
  }

  // As the gatekeeper does: a classify() result that is not a tier warns once and falls through.
  let warned = false;
  function warnClassify(name) {
    if (warned) return;
    warned = true;
    process.emitWarning(
      `tiergate: concurrencyGate classify(req) returned ${describe(name)}, which is not a tier; using the route rules, the header or the default tier`,
      'TiergateWarning',
    );
  }

  return function classifyRequest(req, routeTier) {
    if (classify !== undefined) {
      const name = classify(req);
      if (name !== undefined && name !== null) {
        const t = typeof name === 'string' ? tierByName.get(name) : undefined;
        if (t) return t;
        warnClassify(name);
      }
    }
    if (routeTier !== undefined) return tiers[routeTier];
    if (routeRules !== null) {
      const id = matchRoute(routeRules, req.method, req.originalUrl || req.url, routing);
      if (id >= 0) return tiers[id];
    }
    return headerName === null ? defaultTier : tierFromHeader(req);
  };
}

module.exports = { makeClassifier };

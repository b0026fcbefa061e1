'use strict';
// The gatekeeper's answers to a cluster refusal (lib/cluster/index.js `gate`): a banned key 403; a
// key's cluster-wide limit used up (or its safe share, Redis being away, or its last tokens still out
// to other processes past storeTimeoutMs) 429, as the local per-key
// quota answers; a tier budget used up, or a fail-closed tier while Redis does not answer, 503 as
// the local tier pool answers.
const { problemBody, problemResponse } = require('../http/problem');
const { QUOTA_CODE } = require('../quota/engine');
const { CLUSTER_BANNED } = require('./gate-codes');

const bodies = new Map();
function bannedBody(tier) {
  let b = bodies.get(tier);
  if (b === undefined) {
    b = problemBody({ type: 'urn:tiergate:problem:banned', title: 'Forbidden', status: 403, detail: 'This client is banned.', tier });
    bodies.set(tier, b);
  }
  return b;
}

function clusterRejection(responder, d, tier, tierName) {
  if (d.code === CLUSTER_BANNED) return problemResponse(403, bannedBody(tierName));
  const keyed = d.limit === 'key' && (d.code === QUOTA_CODE.EXHAUSTED || d.code === QUOTA_CODE.SHARE || d.code === QUOTA_CODE.WAITED);
  if (keyed) return responder.rateLimited(tier, 0, d.retryAfterMs, d.retryAfterMs);
  return responder.tierFull(tier, d.retryAfterMs);
}

module.exports = { clusterRejection };

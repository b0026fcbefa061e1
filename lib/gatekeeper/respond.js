'use strict';
// Rejection responses of the gatekeeper: 503 for load shedding (jittered Retry-After), 429 for a
// per-key quota (Retry-After plus rate-limit fields), bodies as RFC 9457 problem documents (lib/http/problem.js).
//
// Rate-limit fields of a per-key quota: the same as a named limit's (lib/http/rate-limit-headers.js), the
// quota named after its tier: `q` its `limit`, `w` its `windowMs` in seconds (rounded up).
const { MAX_RETRY_AFTER_SEC } = require('../options');
const { LimitHeaders } = require('../http/rate-limit-headers');
const { problemBody, problemResponse, retryAfterSeconds: seconds } = require('../http/problem');

const TITLES = { 429: 'Too Many Requests', 503: 'Service Unavailable' };

/** Problem documents are the same for every rejection of a kind and tier: built once. `shedStatus`:
 * the status of a shed (503, or 429 where a load balancer would eject a backend answering 5xx). */
function tierProblem(kind, tier, shedStatus = 503) {
  const doc = {
    overloaded: {
      type: 'urn:tiergate:problem:overloaded',
      title: TITLES[shedStatus],
      status: shedStatus,
      detail: `The service is shedding load; requests of tier "${tier}" are refused for now. Retry after the time in Retry-After.`,
    },
    'tier-capacity': {
      type: 'urn:tiergate:problem:tier-capacity',
      title: TITLES[shedStatus],
      status: shedStatus,
      detail: `The capacity reserved for tier "${tier}" is used up. Retry after the time in Retry-After.`,
    },
    'rate-limited': {
      type: 'urn:tiergate:problem:rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail: `Your request quota for tier "${tier}" is used up. Retry after the time in Retry-After.`,
    },
  }[kind];
  doc.tier = tier;
  return problemBody(doc);
}

/**
 * A per-key quota as a rate-limit policy: `limit` per `windowMs`; a fixed allowance (limit 0) has no
 * window, so its `burst` per day (`w` is required by the drafts).
 */
function quotaPolicy(name, pk) {
  return pk.limit > 0 ? { name, quota: pk.limit, windowMs: pk.windowMs } : { name, quota: pk.burst, windowMs: 86_400_000 };
}

class Responder {
  /**
   * @param {string[]} tierNames
   * @param {Array<{limit:number, windowMs:number}|null>} perKey per tier (null: no per-key quota)
   * @param {{ headers: 'draft'|'draft-6'|'draft-7'|'draft-8'|'legacy'|'both'|false, retryMinSec: number, retryMaxSec: number, shedStatus?: 429|503 }} opts
   */
  constructor(tierNames, perKey, opts) {
    this.retryMinSec = opts.retryMinSec;
    this.retrySpan = opts.retryMaxSec - opts.retryMinSec + 1;
    this.shedStatus = opts.shedStatus === undefined ? 503 : opts.shedStatus;
    this.tiers = tierNames.map((name, i) => {
      const pk = perKey[i];
      return {
        name,
        overloaded: tierProblem('overloaded', name, this.shedStatus),
        capacity: tierProblem('tier-capacity', name, this.shedStatus),
        limited: tierProblem('rate-limited', name),
        quota: pk ? new LimitHeaders(opts.headers, [quotaPolicy(name, pk)]) : null,
      };
    });
  }

  /** Retry-After for a shed: uniform whole seconds in [min, max], so clients do not return in lockstep. */
  shedRetryAfter() {
    return this.retryMinSec + Math.floor(Math.random() * this.retrySpan);
  }

  /** 503 (or options.shedStatus): the service is overloaded and this tier is being shed. */
  shed(tier) {
    return problemResponse(this.shedStatus, this.tiers[tier].overloaded, this.shedRetryAfter());
  }

  /** 503: the tier's own pool is empty (healthy loop): wait for it, jittered upwards. */
  tierFull(tier, retryAfterMs) {
    const base = seconds(retryAfterMs);
    return problemResponse(this.shedStatus, this.tiers[tier].capacity, Math.min(MAX_RETRY_AFTER_SEC, base + Math.floor(Math.random() * this.retrySpan)));
  }

  /** The rate-limit fields of the tier's per-key quota (also on admitted responses when asked). */
  quotaHeaders(headers, tier, remaining, resetMs) {
    const q = this.tiers[tier].quota;
    return q === null ? headers : q.write(headers, 1, 0, () => remaining, () => resetMs);
  }

  /** The tier's per-key quota as a policy `{ name, quota, ... }` (lib/http/rate-limit-headers.js), or null. */
  perKeyQuota(tier) {
    const q = this.tiers[tier].quota;
    return q === null ? null : q.policies[0];
  }

  /** 429: the key's own quota is used up. */
  rateLimited(tier, remaining, retryAfterMs, resetMs) {
    const out = problemResponse(429, this.tiers[tier].limited, seconds(retryAfterMs));
    this.quotaHeaders(out.headers, tier, remaining, resetMs);
    return out;
  }
}

module.exports = { Responder };

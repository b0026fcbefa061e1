'use strict';
// Rejection responses of the gatekeeper: 503 for load shedding (jittered Retry-After), 429 for a
// per-key quota (Retry-After plus rate-limit fields), bodies as RFC 9457 problem documents.
//
// Rate-limit fields:
//  - 'draft': the IETF httpapi draft (draft-ietf-httpapi-ratelimit-headers-08 and later) —
//      RateLimit-Policy: "<tier>";q=<quota>;w=<window seconds>
//      RateLimit: "<tier>";r=<remaining>;t=<seconds until the quota is fully restored>
//    A token bucket has no fixed window; `w` is the time it takes to refill from empty
//    (capacity / refillPerSec, rounded up), `q` its capacity.
//  - 'legacy': X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix time in seconds at
//    which the bucket is full again, as GitHub and most APIs send it).
//  - 'both', or false for none.
const { MAX_RETRY_AFTER_SEC } = require('../options');

const PROBLEM_TYPE = 'application/problem+json';

const TITLES = { 429: 'Too Many Requests', 503: 'Service Unavailable' };

/** Problem documents are the same for every rejection of a kind and tier: built once. `shedStatus`:
 * the status of a shed (503, or 429 where a load balancer would eject a backend answering 5xx). */
function problemBody(kind, tier, shedStatus = 503) {
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
  return JSON.stringify(doc);
}

/** A structured-field integer (RFC 8941: at most 15 digits), never `2.5` or `1e+21`. */
const SF_INTEGER_MAX = 999_999_999_999_999;
function sfInteger(n) {
  return String(Math.min(SF_INTEGER_MAX, Math.max(0, Math.floor(n))));
}

function seconds(ms) {
  // Whole seconds, at least 1 (Retry-After 0 invites an immediate retry), capped at a day.
  if (!(ms > 0)) return 1;
  return Math.min(MAX_RETRY_AFTER_SEC, Math.max(1, Math.ceil(ms / 1000)));
}

class Responder {
  /**
   * @param {string[]} tierNames
   * @param {Array<{capacity:number, refillPerSec:number}|null>} perKey per tier (null: no per-key quota)
   * @param {{ headers: 'draft'|'draft-6'|'draft-7'|'draft-8'|'legacy'|'both'|false, retryMinSec: number, retryMaxSec: number, shedStatus?: 429|503 }} opts
   */
  constructor(tierNames, perKey, opts) {
    // Every draft-* value: the tier quota keeps its named form (the named limits follow each draft: lib/defense/headers.js).
    this.draft = opts.headers === 'both' || (typeof opts.headers === 'string' && opts.headers.startsWith('draft'));
    this.legacy = opts.headers === 'legacy' || opts.headers === 'both';
    this.retryMinSec = opts.retryMinSec;
    this.retrySpan = opts.retryMaxSec - opts.retryMinSec + 1;
    this.shedStatus = opts.shedStatus === undefined ? 503 : opts.shedStatus;
    this.tiers = tierNames.map((name, i) => {
      const pk = perKey[i];
      const windowSec = pk && pk.refillPerSec > 0 ? Math.ceil(pk.capacity / pk.refillPerSec) : 0;
      const overloaded = problemBody('overloaded', name, this.shedStatus);
      const capacity = problemBody('tier-capacity', name, this.shedStatus);
      const limited = problemBody('rate-limited', name);
      return {
        name,
        overloaded,
        overloadedLength: String(Buffer.byteLength(overloaded)),
        capacity,
        capacityLength: String(Buffer.byteLength(capacity)),
        limited,
        limitedLength: String(Buffer.byteLength(limited)),
        // `w` is required by the draft; a quota that never refills has no window: say a day.
        policy: pk ? `"${name}";q=${sfInteger(pk.capacity)};w=${sfInteger(windowSec || 86400)}` : null,
      };
    });
  }

  /** Retry-After for a shed: uniform whole seconds in [min, max], so clients do not return in lockstep. */
  shedRetryAfter() {
    return this.retryMinSec + Math.floor(Math.random() * this.retrySpan);
  }

  /** 503 (or options.shedStatus): the service is overloaded and this tier is being shed. */
  shed(tier) {
    const t = this.tiers[tier];
    return {
      status: this.shedStatus,
      headers: { 'content-type': PROBLEM_TYPE, 'content-length': t.overloadedLength, 'retry-after': String(this.shedRetryAfter()), 'cache-control': 'no-store' },
      body: t.overloaded,
    };
  }

  /** 503: the tier's own pool is empty (healthy loop): wait for it, jittered upwards. */
  tierFull(tier, retryAfterMs) {
    const base = seconds(retryAfterMs);
    const t = this.tiers[tier];
    return {
      status: this.shedStatus,
      headers: { 'content-type': PROBLEM_TYPE, 'content-length': t.capacityLength, 'retry-after': String(Math.min(MAX_RETRY_AFTER_SEC, base + Math.floor(Math.random() * this.retrySpan))), 'cache-control': 'no-store' },
      body: t.capacity,
    };
  }

  /** The rate-limit fields for a keyed decision (also used on admitted responses when asked). */
  quotaHeaders(headers, tier, remaining, limit, resetMs) {
    const t = this.tiers[tier];
    const r = sfInteger(remaining);
    const resetSec = Number.isFinite(resetMs) ? Math.max(0, Math.ceil(resetMs / 1000)) : 86400;
    if (this.draft && t.policy !== null) {
      headers['ratelimit-policy'] = t.policy;
      headers.ratelimit = `"${t.name}";r=${r};t=${resetSec}`;
    }
    if (this.legacy) {
      headers['x-ratelimit-limit'] = sfInteger(limit);
      headers['x-ratelimit-remaining'] = r;
      headers['x-ratelimit-reset'] = String(Math.ceil(Date.now() / 1000) + resetSec);
    }
    return headers;
  }

  /** 429: the key's own quota is used up. */
  rateLimited(tier, remaining, limit, retryAfterMs, resetMs) {
    const t = this.tiers[tier];
    const headers = { 'content-type': PROBLEM_TYPE, 'content-length': t.limitedLength, 'retry-after': String(seconds(retryAfterMs)), 'cache-control': 'no-store' };
    this.quotaHeaders(headers, tier, remaining, limit, resetMs);
    return { status: 429, headers, body: t.limited };
  }
}

module.exports = { Responder, PROBLEM_TYPE };

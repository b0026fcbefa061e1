'use strict';
// `req.rateLimit`, set alike by the defense's named limits and the gatekeeper's per-key quotas, beside
// the headers that say the same (rate-limit-headers.js).

/** `req.rateLimit`: the tightest limit that applied (as express-rate-limit's). */
class RateLimitInfo {
  constructor(name, limit, remaining, resetMs) {
    this.name = name;
    this.limit = limit;
    this.remaining = remaining;
    this.used = limit - remaining;
    this.resetMs = resetMs;
  }

  /** When the tightest limit has room again. */
  get resetTime() {
    return Number.isFinite(this.resetMs) ? new Date(Date.now() + this.resetMs) : null;
  }
}

module.exports = { RateLimitInfo };

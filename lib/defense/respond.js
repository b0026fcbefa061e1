'use strict';
// The defense's refusals, as RFC 9457 problem documents (bodies built once):
//  - deny-listed: 403, type urn:tiergate:problem:denied, no Retry-After (a list entry has no end);
//  - banned: 403, type urn:tiergate:problem:banned, Retry-After for a temporary ban (whole seconds,
//    at most a day: a longer ban still says "not before tomorrow"), none for a permanent one;
//  - rate-limited: 429, type urn:tiergate:problem:rate-limited naming the refusing limit, Retry-After
//    and the rate-limit fields of every limit that applied (lib/http/rate-limit-headers.js);
//  - shaper-full: 503, type urn:tiergate:problem:shaper-full (a shaper's queue is at maxQueued);
//  - challenged: the application's `challenge.respond(info, req)`, else 403 with type
//    urn:tiergate:problem:challenge.
const { MAX_RETRY_AFTER_SEC } = require('../options');
const { problemBody: body, problemResponse, retryAfterSeconds: seconds } = require('../http/problem');

class DefenseResponder {
  constructor(limitNames) {
    const forbidden = (type, detail) => body({ type: `urn:tiergate:problem:${type}`, title: 'Forbidden', status: 403, detail });
    this.denied = forbidden('denied', 'Requests from your address are not accepted.');
    this.banned = forbidden('banned', 'Your client is banned for now. Retry after the time in Retry-After, if given.');
    this.permanent = forbidden('banned', 'Your client is banned until an operator lifts the ban.');
    this.challenge = forbidden('challenge', 'Prove that you are a person to continue: solve the challenge and present its pass.');
    const shaperDetail = 'Too many requests are waiting for their slot. Retry after the time in Retry-After.';
    this.shaper = body({ type: 'urn:tiergate:problem:shaper-full', title: 'Service Unavailable', status: 503, detail: shaperDetail });
    this.limited = limitNames.map((name) => body({
      type: 'urn:tiergate:problem:rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail: `The limit "${name}" is used up. Retry after the time in Retry-After.`,
      limit: name,
    }));
  }

  denyListed() {
    return problemResponse(403, this.denied);
  }

  /** `leftMs`: Infinity for a permanent ban. */
  bannedFor(leftMs) {
    if (leftMs === Infinity) return problemResponse(403, this.permanent);
    return problemResponse(403, this.banned, seconds(leftMs));
  }

  rateLimited(limit, retryAfterMs) {
    // A cost over what the limit can ever admit waits for ever: say a day.
    return problemResponse(429, this.limited[limit], seconds(Number.isFinite(retryAfterMs) ? retryAfterMs : MAX_RETRY_AFTER_SEC * 1000));
  }

  /** 503: a shaper's waiting requests are at their bound (`maxQueued`). */
  shaperFull(delayMs) {
    return problemResponse(503, this.shaper, seconds(delayMs));
  }

  challenged() {
    return problemResponse(403, this.challenge);
  }
}

module.exports = { DefenseResponder };

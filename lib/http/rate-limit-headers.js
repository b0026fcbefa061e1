'use strict';
// Rate-limit fields, written alike for the defense's named limits and the gatekeeper's per-key quotas:
// every limit that applied to the request listed, in the format chosen by the gatekeeper's
// `rateLimitHeaders`:
//
//  - 'draft-6': RateLimit-Policy: <q>;w=<w>, ... (every limit) and the separate RateLimit-Limit,
//    RateLimit-Remaining, RateLimit-Reset (seconds) of the tightest limit;
//  - 'draft-7': the same policy list, and one RateLimit: limit=<q>, remaining=<r>, reset=<t> for the
//    tightest limit;
//  - 'draft-8' (also 'draft'): named policies, one list item per limit:
//    RateLimit-Policy: "<name>";q=<q>;w=<w>, ... and RateLimit: "<name>";r=<r>;t=<t>, ...;
//  - 'legacy': X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix seconds) of the
//    tightest limit;
//  - 'both': 'draft-8' and 'legacy'; false: none.
//
// The tightest limit is the core's answer (src/core/limit/set.rs `Decision::tightest`: the one that
// refused, else the one with the fewest units left, a tie going to the later reset); this module only
// formats. `w` is the window in seconds (a token bucket's time to refill from empty).

/** A structured-field integer (RFC 8941: at most 15 digits). */
const SF_INTEGER_MAX = 999_999_999_999_999;
function sfInteger(n) {
  return String(Math.min(SF_INTEGER_MAX, Math.max(0, Math.floor(n))));
}

function resetSeconds(ms) {
  return Number.isFinite(ms) ? Math.max(0, Math.ceil(ms / 1000)) : 86400;
}

const MODES = ['draft', 'draft-6', 'draft-7', 'draft-8', 'legacy', 'both'];

class LimitHeaders {
  /** `mode`: one of MODES or false; `policies`: [{ name, quota, windowMs }] in limit order. */
  constructor(mode, policies) {
    this.mode = mode === 'draft' ? 'draft-8' : mode;
    this.legacy = mode === 'legacy' || mode === 'both';
    if (mode === 'both') this.mode = 'draft-8';
    this.policies = policies.map((p) => ({
      name: p.name,
      quota: p.quota,
      q: sfInteger(p.quota),
      w: sfInteger(Math.max(1, Math.ceil(p.windowMs / 1000))),
      named: `"${p.name}";q=${sfInteger(p.quota)};w=${sfInteger(Math.max(1, Math.ceil(p.windowMs / 1000)))}`,
    }));
  }

  /**
   * Writes the fields into `headers` for the limits in `evaluated` (a bit per limit), with each
   * limit's remaining units and reset at `remainingOf(i)`, `resetMsOf(i)`; `tightest` is its index.
   * `quotas` (optional): per limit, this request's limit where it is not the configured one (a limit
   * given as a function of the request), 0 elsewhere.
   */
  write(headers, evaluated, tightest, remainingOf, resetMsOf, quotas = null) {
    if (evaluated === 0 || (this.mode === false && !this.legacy)) return headers;
    let P = this.policies;
    if (quotas !== null) {
      P = P.map((p, i) => {
        if (!(quotas[i] > 0)) return p;
        const q = sfInteger(quotas[i]);
        return { ...p, quota: quotas[i], q, named: `"${p.name}";q=${q};w=${p.w}` };
      });
    }
    const t = P[tightest];
    const tr = sfInteger(remainingOf(tightest));
    const tt = resetSeconds(resetMsOf(tightest));
    if (this.mode === 'draft-6' || this.mode === 'draft-7') {
      let policy = '';
      for (let i = 0; i < P.length; i++) {
        if ((evaluated & (1 << i)) === 0) continue;
        // The tightest first: a draft-6/7 client reads the first item as the one in force.
        if (i === tightest) policy = policy === '' ? `${P[i].q};w=${P[i].w}` : `${P[i].q};w=${P[i].w}, ${policy}`;
        else policy = policy === '' ? `${P[i].q};w=${P[i].w}` : `${policy}, ${P[i].q};w=${P[i].w}`;
      }
      headers['ratelimit-policy'] = policy;
      if (this.mode === 'draft-6') {
        headers['ratelimit-limit'] = t.q;
        headers['ratelimit-remaining'] = tr;
        headers['ratelimit-reset'] = String(tt);
      } else {
        headers.ratelimit = `limit=${t.q}, remaining=${tr}, reset=${tt}`;
      }
    } else if (this.mode === 'draft-8') {
      let policy = '';
      let state = '';
      for (let i = 0; i < P.length; i++) {
        if ((evaluated & (1 << i)) === 0) continue;
        const sep = policy === '' ? '' : ', ';
        policy += sep + P[i].named;
        state += `${sep}"${P[i].name}";r=${sfInteger(remainingOf(i))};t=${resetSeconds(resetMsOf(i))}`;
      }
      headers['ratelimit-policy'] = policy;
      headers.ratelimit = state;
    }
    if (this.legacy) {
      headers['x-ratelimit-limit'] = t.q;
      headers['x-ratelimit-remaining'] = tr;
      headers['x-ratelimit-reset'] = String(Math.ceil(Date.now() / 1000) + tt);
    }
    return headers;
  }
}

module.exports = { LimitHeaders, MODES, sfInteger, resetSeconds };

'use strict';
// The one policy of bench:defense's cost comparison, declared once; every composition (tiergate and
// the peers in defense-compositions.js) is built from these numbers:
//
//   deny list (CIDRs, IPv4 and IPv6)  ->  ban check  ->  per-IP sliding window  ->  per-user token
//   bucket  ->  tier (from a trusted tier header)
//
// The limits are far above what the measurement sends per key, so every request is admitted: the
// figure is the hot path that every request pays, not the refusal path.
const { prng } = require('./openloop');

/** The deny list: IPv4 /16../32 and IPv6 /32../64 ranges from documentation and reserved space. */
const DENY_V4 = 96;
const DENY_V6 = 32;

function denyList(seed = 7) {
  const r = prng(seed);
  const byte = () => Math.floor(r() * 256);
  const out = [];
  for (let i = 0; i < DENY_V4; i++) {
    // 240.0.0.0/4 is reserved: no client of the measurement is in it, so nothing is refused.
    const a = 240 + (i % 15);
    const [b, c, d] = [byte(), byte(), byte()];
    const bits = [16, 20, 24, 28, 32][i % 5];
    if (bits === 16) out.push(`${a}.${b}.0.0/16`);
    else if (bits === 20) out.push(`${a}.${b}.${c & 0xf0}.0/20`);
    else if (bits === 24) out.push(`${a}.${b}.${c}.0/24`);
    else if (bits === 28) out.push(`${a}.${b}.${c}.${d & 0xf0}/28`);
    else out.push(`${a}.${b}.${c}.${d}/32`);
  }
  for (let i = 0; i < DENY_V6; i++) {
    // Documentation space (2001:db8::/32, 3fff::/20): no client of the measurement is in it.
    const h = (i * 97 + 1).toString(16);
    const y = (byte() << 8) | byte();
    const bits = [32, 48, 56, 64][i % 4];
    if (bits === 32) out.push(`3fff:${h}::/32`);
    else if (bits === 48) out.push(`2001:db8:${h}::/48`);
    else if (bits === 56) out.push(`2001:db8:${h}:${(y & 0xff00).toString(16)}::/56`);
    else out.push(`2001:db8:${h}:${y.toString(16)}::/64`);
  }
  return out;
}

const POLICY = Object.freeze({
  deny: Object.freeze(denyList()),
  // Per IP: an exact sliding window (peers without one use what they have: a fixed window).
  ip: Object.freeze({ limit: 600, windowMs: 60_000 }),
  // Per user (the `x-user-id` header): a token bucket of `limit` per `windowMs` (1,000/s) holding
  // `burst`; peers without a bucket use a fixed window of `burst` per `windowMs`.
  user: Object.freeze({ limit: 60_000, windowMs: 60_000, burst: 100_000 }),
  // The user's quota by tier (peers: the per-user limit picks its number by tier).
  tiers: Object.freeze(['critical', 'standard', 'background']),
  tierScale: Object.freeze({ critical: 4, standard: 2, background: 1 }),
  tierHeader: 'x-user-tier',
  userHeader: 'x-user-id',
  // Bans: 3 rate-limit refusals within 1 minute ban the IP for 5 minutes (the default).
  bans: Object.freeze({ strikes: 3, strikeWindowMs: 60_000, banMs: 300_000 }),
  // One proxy in front (the benchmark plays it): the client is the last X-Forwarded-For entry.
  trustProxyHops: 1,
});

/**
 * The measurement's clients: `ips` distinct IPv4 addresses (none in the deny list; 1 in 16 an
 * IPv6 address) and `users` user ids, with a seeded tier mix (10/30/60).
 */
function clients({ ips = 20_000, users = 5_000, seed = 11 } = {}) {
  const r = prng(seed);
  const addrs = [];
  for (let i = 0; i < ips; i++) {
    if (i % 16 === 15) addrs.push(`2a02:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::${(1 + (i % 97)).toString(16)}`);
    else addrs.push(`${11 + (i % 200)}.${(i >> 8) & 255}.${i & 255}.${1 + Math.floor(r() * 254)}`);
  }
  const tierOf = [];
  for (let u = 0; u < users; u++) {
    const x = r();
    tierOf.push(x < 0.1 ? 'critical' : x < 0.4 ? 'standard' : 'background');
  }
  return { addrs, users, tierOf };
}

module.exports = { POLICY, clients, denyList };

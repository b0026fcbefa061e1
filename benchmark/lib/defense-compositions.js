'use strict';
// The policy of defense-policy.js built the ways a user would build it, each as a list of Express
// middleware (req, res, next) over node's own request/response API, so that one harness runs them all
// in process (chain-harness.js) and the same lists mount on an Express app for the HTTP runs:
//
// - tiergate: one gatekeeper (deny list, bans, the per-IP limit, the per-user bucket and the tier in
//   its native decision); also the gatekeeper with defaults only (the bare admit), with the tier and
//   per-user bucket only (what existed before the defense layers), and the full chain with the
//   default ban rules (their probe rule watches each response's status: a 'finish' listener);
// - express-rate-limit x 2 + net.BlockList + a Map of bans: what its users write (a deny-list step,
//   a ban step, then one limiter per IP and one per user, the user's number picked by tier; the bans
//   are filled from the IP limiter's handler, 3 refusals within the window ban for banMs);
// - rate-limiter-flexible: its black/white wrapper (RLWrapperBlackAndWhite, the deny list as its
//   isBlackListed over a net.BlockList) around a RateLimiterMemory per IP with `blockDuration` (its
//   ban: a key that runs out is blocked for banMs), then a RateLimiterMemory per tier for users.
//
// Every composition reads the client address with the same function (lib/http/client.js, one
// trusted proxy hop), the one tiergate uses, and refuses with res.writeHead/res.end, as tiergate does.
// The peers have no sliding window or token bucket in memory: they use their fixed windows, which do
// less work per request than an exact sliding window (the comparison favours them there).
const net = require('node:net');
const path = require('node:path');
const { clientIp } = require('../../lib/http/client');
const { POLICY } = require('./defense-policy');

const root = path.join(__dirname, '..', '..');

const family = (ip) => (ip.includes(':') ? 'ipv6' : 'ipv4');

function blockListOf(cidrs) {
  const list = new net.BlockList();
  for (const c of cidrs) {
    const [addr, bits] = c.split('/');
    list.addSubnet(addr, Number(bits), family(addr));
  }
  return list;
}

function refuse(res, status, retryAfterSec) {
  const headers = { 'content-type': 'text/plain' };
  if (retryAfterSec !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSec)));
  res.writeHead(status, headers);
  res.end(status === 403 ? 'Forbidden' : 'Too Many Requests');
}

function tierOf(req, p) {
  const t = req.headers[p.tierHeader];
  return typeof t === 'string' && Object.hasOwn(p.tierScale, t) ? t : p.tiers[p.tiers.length - 1];
}

// ---- tiergate ----------------------------------------------------------------------------------

function tiergateTiers(p, perKey) {
  return p.tiers.map((name, i) => ({
    name,
    ...(i === 0 ? { protected: true } : {}),
    limit: 1e9,
    windowMs: 1000,
    ...(perKey ? { perKey: { limit: p.user.limit * p.tierScale[name], windowMs: p.user.windowMs, burst: p.user.burst * p.tierScale[name], maxKeys: 100_000 } } : {}),
  }));
}

/** The tier (from a trusted header) and the per-user bucket, keyed by the user header. */
function tierUserOptions(p) {
  return {
    tiers: tiergateTiers(p, true),
    tierHeader: p.tierHeader,
    trustTierHeader: true, // the benchmark plays the authenticating gateway
    key: { header: p.userHeader },
    trustProxy: p.trustProxyHops,
  };
}

function fullOptions(p) {
  return {
    ...tierUserOptions(p),
    deny: p.deny,
    // The policy's one rule (as the peers have it): refusals ban.
    bans: { rules: [{ name: 'rate-limited', on: 'rate-limited', threshold: p.bans.strikes, windowMs: p.bans.strikeWindowMs, banMs: p.bans.banMs }] },
    limits: [{ name: 'ip', by: 'ip', algorithm: 'sliding-window', limit: p.ip.limit, windowMs: p.ip.windowMs }],
  };
}

/**
 * The full chain: deny list, bans, per-IP exact sliding window, per-user bucket by tier. `extra`:
 * options on top (bench:defense --untimed turns shedding off with it).
 */
function tiergateFull(p = POLICY, extra = {}) {
  const { gatekeeper } = require(root);
  return [gatekeeper({ ...fullOptions(p), ...extra })];
}

/** The same with the default ban rules, whose probe rule watches every response's status. */
function tiergateDefaultBans(p = POLICY) {
  const { gatekeeper } = require(root);
  return [gatekeeper({ ...fullOptions(p), bans: {} })];
}

/** The tier and the per-user bucket only (the gatekeeper before the defense layers). */
function tiergateTierUser(p = POLICY) {
  const { gatekeeper } = require(root);
  return [gatekeeper(tierUserOptions(p))];
}

/**
 * One layer at a time on top of the tier and the per-user bucket (--breakdown): where the full
 * chain's cost goes. `bans: { rules: false }` where bans are not the layer (without it, any defense
 * option brings the default rules, whose probe rule watches every response).
 */
function tiergateLayer(layer) {
  return (p = POLICY) => {
    const { gatekeeper } = require(root);
    const full = fullOptions(p);
    const o = { ...tierUserOptions(p), bans: { rules: false } };
    if (layer === 'deny') o.deny = full.deny;
    else if (layer === 'bans') o.bans = full.bans;
    else if (layer === 'fixed-window') o.limits = [{ ...full.limits[0], algorithm: 'fixed-window' }];
    else o.limits = full.limits;
    return [gatekeeper(o)];
  };
}

/** `gatekeeper()`: its defaults, nothing configured. */
function tiergateBare() {
  const { gatekeeper } = require(root);
  return [gatekeeper()];
}

// ---- express-rate-limit x 2 + net.BlockList + a Map of bans --------------------------------------

function erlChain(p = POLICY) {
  const { rateLimit, ipKeyGenerator } = require('express-rate-limit');
  const deny = blockListOf(p.deny);
  const bans = new Map(); // IP key -> banned until (ms since the epoch)
  const strikes = new Map(); // IP key -> times of its recent refusals
  const ipKey = (req) => ipKeyGenerator(req.clientIp); // IPv6 by /56, as the limiter keys it
  const strike = (key) => {
    const now = Date.now();
    const recent = (strikes.get(key) || []).filter((t) => t > now - p.bans.strikeWindowMs);
    recent.push(now);
    if (recent.length >= p.bans.strikes) {
      bans.set(key, now + p.bans.banMs);
      strikes.delete(key);
    } else strikes.set(key, recent);
  };
  const denyStep = (req, res, next) => {
    const ip = clientIp(req, p.trustProxyHops);
    req.clientIp = ip;
    if (ip !== '' && net.isIP(ip) !== 0 && deny.check(ip, family(ip))) return refuse(res, 403);
    next();
  };
  const banStep = (req, res, next) => {
    const key = ipKey(req);
    const until = bans.get(key);
    if (until !== undefined) {
      const left = until - Date.now();
      if (left > 0) return refuse(res, 403, left / 1000);
      bans.delete(key);
    }
    next();
  };
  const common = { standardHeaders: false, legacyHeaders: false };
  const perIp = rateLimit({
    ...common,
    windowMs: p.ip.windowMs,
    limit: p.ip.limit,
    keyGenerator: ipKey,
    handler: (req, res) => {
      strike(ipKey(req));
      refuse(res, 429, p.ip.windowMs / 1000);
    },
  });
  const perUser = rateLimit({
    ...common,
    windowMs: p.user.windowMs,
    limit: (req) => p.user.burst * p.tierScale[tierOf(req, p)],
    keyGenerator: (req) => {
      const u = req.headers[p.userHeader];
      return typeof u === 'string' && u !== '' ? `u:${u}` : ipKey(req);
    },
    handler: (req, res) => refuse(res, 429, p.user.windowMs / 1000),
  });
  return [denyStep, banStep, perIp, perUser];
}

// ---- rate-limiter-flexible with its black/white wrapper and blockDuration -----------------------

function rlfChain(p = POLICY) {
  const { RateLimiterMemory, RLWrapperBlackAndWhite } = require('rate-limiter-flexible');
  const deny = blockListOf(p.deny);
  const perIp = new RLWrapperBlackAndWhite({
    limiter: new RateLimiterMemory({ keyPrefix: 'ip', points: p.ip.limit, duration: p.ip.windowMs / 1000, blockDuration: p.bans.banMs / 1000 }),
    isBlackListed: (ip) => net.isIP(ip) !== 0 && deny.check(ip, family(ip)),
  });
  const perUser = {};
  for (const t of p.tiers) {
    perUser[t] = new RateLimiterMemory({ keyPrefix: `user-${t}`, points: p.user.burst * p.tierScale[t], duration: p.user.windowMs / 1000 });
  }
  const answer = (res, next, rej) => {
    if (rej instanceof Error) return next(rej);
    // The wrapper refuses a deny-listed key with msBeforeNext = MAX_SAFE_INTEGER.
    if (rej.msBeforeNext === Number.MAX_SAFE_INTEGER) return refuse(res, 403);
    return refuse(res, 429, rej.msBeforeNext / 1000);
  };
  const ipStep = (req, res, next) => {
    const ip = clientIp(req, p.trustProxyHops);
    req.clientIp = ip;
    perIp.consume(ip).then(() => next(), (rej) => answer(res, next, rej));
  };
  const userStep = (req, res, next) => {
    const u = req.headers[p.userHeader];
    const key = typeof u === 'string' && u !== '' ? u : req.clientIp;
    perUser[tierOf(req, p)].consume(key).then(() => next(), (rej) => answer(res, next, rej));
  };
  return [ipStep, userStep];
}

/** Every composition of the cost comparison, in table order. `floor`: the harness alone. */
const COMPOSITIONS = [
  { id: 'floor', title: 'harness alone (no middleware)', build: () => [] },
  { id: 'tiergate-bare', title: 'tiergate: gatekeeper() (bare admit)', build: tiergateBare },
  { id: 'tiergate-tier-user', title: 'tiergate: tier + user bucket only', build: tiergateTierUser },
  { id: 'tiergate', title: 'tiergate: the full chain', build: tiergateFull, full: true },
  { id: 'tiergate-default-bans', title: 'tiergate: the full chain, default ban rules', build: tiergateDefaultBans },
  { id: 'layer-deny', title: 'tiergate: tier + user + deny list only', build: tiergateLayer('deny'), breakdown: true },
  { id: 'layer-bans', title: 'tiergate: tier + user + ban rule only', build: tiergateLayer('bans'), breakdown: true },
  { id: 'layer-sliding', title: 'tiergate: tier + user + per-IP sliding window only', build: tiergateLayer('sliding-window'), breakdown: true },
  { id: 'layer-fixed', title: 'tiergate: tier + user + per-IP fixed window only', build: tiergateLayer('fixed-window'), breakdown: true },
  { id: 'erl', title: 'express-rate-limit x2 + BlockList + ban Map', build: erlChain, peer: true },
  { id: 'rlf', title: 'rate-limiter-flexible + black/white wrapper', build: rlfChain, peer: true },
];

/** For the HTTP runs (server.js custom protection): the composition's list on an Express Router. */
function expressRouter({ id }) {
  const c = COMPOSITIONS.find((x) => x.id === id);
  if (!c) throw new RangeError(`unknown composition ${id}`);
  const router = require('express').Router();
  for (const mw of c.build(POLICY)) router.use(mw);
  return router;
}

module.exports = { COMPOSITIONS, tiergateFull, expressRouter, blockListOf, tiergateTiers, refuse, tierOf };

'use strict';
// The crawler incident of bench:defense (part 3): the configurations and one run of each.
//
// The server (server.js, Express, a child process) serves GET /api/items and /api/items/:id, each
// `workIters` of CPU-bound work; its capacity C (req/s) is measured first with a closed-loop probe,
// as bench:overload does. Every rate below is a multiple of C, so the scenario scales to the machine.
//
// Configurations (tiergate in all three; the generator is the proxy, trustProxy: 1):
// - `baseline`: the protected server with legitimate users only (their p99 without the crawler);
// - `before`: a global limit only (the one tier's pool: `global` x C req/s), legitimate users and
//   both crawlers;
// - `after`: the same global limit, plus per-IP and per-/24 limits (exact sliding windows) and the
//   ban rule "3 rate-limit refusals within 1 minute ban for 5 minutes";
// - `fair`: `after` with the fair-share backstop (`fairShare: true`, its defaults): while the global
//   limit runs low, the heaviest clients (and /24s) are refused first.
// Shedding is off in all three, so the only difference between before and after is the defense.
const http = require('node:http');
const { startServer, lagPerBucket } = require('./scenario');
const { warmPool } = require('./openloop');
const { crawlSchedule, CLASSES, LEGIT, ROTATING, SUBNET, SUBNET_PREFIX } = require('./crawl-traffic');
const { playSchedule, classWindow } = require('./crawl-load');
const { sampleCpu, cpuShare } = require('./proc-cpu');

/** The scenario's shape, in multiples of the measured capacity C where it is a rate. */
const DEFAULTS = Object.freeze({
  seconds: 16, // the whole run: the crawl's first 10 s (onset), then 4 s judged against the targets
  crawlStartSec: 2, // legitimate users only before
  userRate: 0.3, // req/s per legitimate user (a page every ~3 s)
  legit: 0.2, // all legitimate users together: 0.2 C (so users = 0.2 C / userRate)
  crawl: 1.2, // the rotating crawler: 1.2 C in all
  crawlIps: 100, // ... over this many addresses
  subnet: 0.2, // the /24 crawler: 0.2 C in all, over 254 addresses
  global: 0.8, // the global limit: 0.8 C (refusals cost CPU too: at 0.9 C the server saturated)
  // What a careful operator sets: per IP 5x a user's mean (3 per 10 s), so that a user's Poisson
  // burst goes over it with a chance of ~1e-7 per request (at 10 per 10 s it was ~3e-4, and 3 such
  // refusals banned the user); a /24 above one user's limit (an office behind a NAT); the global
  // limit only as the backstop. Not higher: a rotating address sends 1.2 C / crawlIps req/s, 1.9 on a
  // loaded machine (C ~160), so at 20 per 10 s it would never be refused there.
  perIp: Object.freeze({ limit: 15, windowMs: 10_000 }),
  perSubnet: Object.freeze({ limit: 30, windowMs: 10_000 }),
  burstLimit: 5, // the `burst` variant's per-IP limit per second
  timeoutMs: 2000,
});

/** The global limit only: one tier whose pool refills at `global` x C (a burst of 0.2 s of it). */
function globalLimit(cap, s) {
  const rate = Math.round(s.global * cap);
  return { tiers: [{ name: 'standard', limit: rate, windowMs: 1000, burst: Math.max(10, Math.round(0.2 * rate)) }], trustProxy: 1, shed: false };
}

/** The global limit plus per-IP and per-/24 limits and the ban rule. */
function layered(cap, s) {
  return {
    ...globalLimit(cap, s),
    limits: [
      { name: 'per-ip', by: 'ip', algorithm: 'sliding-window', limit: s.perIp.limit, windowMs: s.perIp.windowMs },
      { name: 'per-subnet', by: { prefix: { v4: 24, v6: 48 } }, algorithm: 'sliding-window', limit: s.perSubnet.limit, windowMs: s.perSubnet.windowMs },
    ],
    bans: { rules: [{ name: 'rate-limited', on: 'rate-limited', threshold: 3, windowMs: 60_000, banMs: 300_000 }] },
  };
}

/**
 * Extra configurations run beside the four (`--variants`), each judged by the same targets:
 * - `burst`: after and after + fair share with a per-IP limit of `burstLimit` per second as well;
 * - `shed`: after + fair share with shedding on (the shed controller's defaults);
 * - `oracle-first`, `oracle-deny`: bounds no deployable policy can beat, since they know which
 *   addresses crawl (the benchmark's own address plan): every crawler address served its first
 *   request at most (the first request from a fresh address is all a rate can go on), or none.
 */
const VARIANTS = ['burst', 'shed', 'oracle-first', 'oracle-deny'];
const CRAWLER_CIDRS = ['45.0.0.0/8', `${SUBNET_PREFIX}.0/24`];
const USER_CIDRS = ['81.0.0.0/8'];

function variantConfigs(cap, s, variant) {
  const burstLimits = (o) => ({ ...o, limits: [...o.limits, { name: 'per-ip-burst', by: 'ip', algorithm: 'sliding-window', limit: s.burstLimit, windowMs: 1000 }] });
  if (variant === 'burst') {
    return [
      { id: 'after-burst', title: `after + per IP ${s.burstLimit} per 1 s`, options: burstLimits(layered(cap, s)), crawler: true },
      { id: 'fair-burst', title: `after + fair share + per IP ${s.burstLimit} per 1 s`, options: { ...burstLimits(layered(cap, s)), fairShare: true }, crawler: true },
    ];
  }
  if (variant === 'shed') return [{ id: 'fair-shed', title: 'after + fair share + shedding (defaults)', options: { ...layered(cap, s), fairShare: true, shed: {} }, crawler: true }];
  if (variant === 'oracle-first') {
    // Users allow-listed (no limit applies to them); every other address gets 1 request a minute,
    // and the /24 limit of `after` still holds the /24 crawler to its /24's allowance.
    const layers = layered(cap, s);
    const o = { ...layers, allow: USER_CIDRS, limits: [{ name: 'oracle-first', by: 'ip', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, layers.limits[1]], bans: { rules: [{ name: 'rate-limited', on: 'rate-limited', threshold: 1, windowMs: 60_000, banMs: 300_000 }] } };
    return [{ id: 'oracle-first', title: 'bound: each crawler address served once (knows the crawler)', options: o, crawler: true }];
  }
  if (variant === 'oracle-deny') return [{ id: 'oracle-deny', title: 'bound: every crawler request refused (knows the crawler)', options: { ...globalLimit(cap, s), deny: CRAWLER_CIDRS }, crawler: true }];
  throw new RangeError(`unknown variant ${variant} (${VARIANTS.join(', ')})`);
}

function configurations(cap, s) {
  return [
    { id: 'baseline', title: 'no crawler (per-IP + per-/24 limits + bans)', options: layered(cap, s), crawler: false },
    { id: 'before', title: `before: global limit only (${Math.round(s.global * cap)} req/s)`, options: globalLimit(cap, s), crawler: true },
    { id: 'after', title: 'after: global + per-IP + per-/24 limits + bans', options: layered(cap, s), crawler: true },
    { id: 'fair', title: 'after + fair share (fairShare: true)', options: { ...layered(cap, s), fairShare: true }, crawler: true },
    ...(s.variants || []).flatMap((v) => variantConfigs(cap, s, v)),
  ];
}

/** The schedule of a configuration (the same seed, so before and after see the same requests). */
function scheduleFor(cap, s, withCrawler) {
  const users = Math.max(50, Math.min(5000, Math.round((s.legit * cap) / s.userRate)));
  return {
    users,
    events: crawlSchedule({
      durationMs: s.seconds * 1000,
      crawlStartMs: s.crawlStartSec * 1000,
      users,
      userRate: s.userRate,
      crawlIps: s.crawlIps,
      crawlRate: withCrawler ? s.crawl * cap : 0,
      subnetRate: withCrawler ? s.subnet * cap : 0,
    }),
  };
}

/** Runs one configuration: its own server process, warm connections, the schedule, the figures. */
async function runCrawlConfig(cfg, { cap, workIters, workKind, s }) {
  const srv = await startServer({ framework: 'express', protection: 'tiergate', options: cfg.options, workIters, workKind, record: true });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 512 });
  try {
    await warmPool(agent, { port: srv.port, path: '/hello', connections: 128 });
    const { users, events } = scheduleFor(cap, s, cfg.crawler);
    await srv.windowStart();
    const cpu = sampleCpu(srv.pid, 100);
    const load = await playSchedule({ port: srv.port, events, classes: CLASSES, timeoutMs: s.timeoutMs, agent });
    const cpuSamples = cpu.stop();
    const server = await srv.windowEnd();
    const stats = await srv.guardStats().catch(() => null);
    const lag = lagPerBucket(server.samples, load.start, load.bucketMs, load.timeline.length);
    load.timeline.forEach((row, b) => {
      row.serverLagMs = lag[b];
      const a = load.start + b * load.bucketMs;
      const share = cpuSamples.available ? cpuShare(cpuSamples.samples, a, a + load.bucketMs) : null;
      row.serverCpuPct = share === null ? 0 : 100 * share;
    });
    const crawlAt = s.crawlStartSec * 1000;
    const endAt = s.seconds * 1000;
    const onsetEnd = crawlAt + 10_000;
    const win = (cls, a, b) => classWindow(events, cls, load, a, b);
    const cpuIn = (a, b) => (cpuSamples.available ? cpuShare(cpuSamples.samples, load.start + a, load.start + b) : null);
    return {
      cfg,
      users,
      load,
      stats,
      lag: server.lag,
      figures: {
        legit: { crawl: win(LEGIT, crawlAt, endAt), onset: win(LEGIT, crawlAt, onsetEnd), steady: win(LEGIT, onsetEnd, endAt), statuses: load.classes[LEGIT].statuses },
        rotating: { onset: win(ROTATING, crawlAt, onsetEnd), steady: win(ROTATING, onsetEnd, endAt), statuses: load.classes[ROTATING].statuses },
        subnet: { onset: win(SUBNET, crawlAt, onsetEnd), steady: win(SUBNET, onsetEnd, endAt), statuses: load.classes[SUBNET].statuses },
        cpu: { crawl: cpuIn(crawlAt, endAt), steady: cpuIn(onsetEnd, endAt), before: cpuIn(0, crawlAt) },
        genLag: load.genLag,
      },
    };
  } finally {
    agent.destroy();
    await srv.stop();
  }
}

module.exports = { DEFAULTS, VARIANTS, configurations, globalLimit, layered, scheduleFor, runCrawlConfig };

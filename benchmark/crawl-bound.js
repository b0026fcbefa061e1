'use strict';
// What a policy keyed on client addresses can do at the crawler incident's onset (bench:defense part
// 3), worked out on a model instead of measured: the same seeded schedule of requests (crawl-traffic.js),
// served one at a time in arrival order by a server that spends `1000 / cap` ms on a request it
// admits and `--refuse-ms` on one it refuses (429, 403 or the pool's 503), with the scenario's
// global pool (0.8 C, a burst of 0.2 s of it), per-address limits (exact sliding windows) and bans
// decided when the request's turn comes. No loop turns, connections, GC or neighbours: the delays it
// gives are the least the policy allows, so a target it misses is out of reach on the real server too.
//
//   node benchmark/crawl-bound.js [--cap 753] [--serve-ms 1000/cap] [--refuse-ms 0.15] [--seconds 16] [--base-p99 10] [--global 0.8]
//
// --cap: the capacity C in req/s (bench:defense prints it), which sets the scenario's rates; --serve-ms:
// what a served request costs (default 1000 / cap: the closed-loop probe's; the benchmark's server at
// the onset, with every pooled connection busy, serves ~0.85 C on a whole core, ~1.6 ms); --refuse-ms: the CPU a refusal costs (the
// server's extra CPU over the crawl in the 'every crawler request refused' bound of
// `bench:defense --variants oracle-deny`, divided by the refusals); --base-p99: the measured p99 of
// legitimate users without the crawler, in ms, to which the model's extra delay is added for the
// ratio the target judges (1.2x); --global: the global limit, a multiple of C.
const { DEFAULTS } = require('./lib/crawl-scenario');
const { crawlSchedule, LEGIT } = require('./lib/crawl-traffic');

function parseArgs(argv) {
  const a = { cap: 753, serveMs: 0, refuseMs: 0.15, seconds: DEFAULTS.seconds, baseP99: 10, global: DEFAULTS.global };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = Number(argv[++i]);
    if (!Number.isFinite(v) || v <= 0) throw new RangeError(`${k} must be a positive number, got ${argv[i]}`);
    if (k === '--cap') a.cap = v;
    else if (k === '--serve-ms') a.serveMs = v;
    else if (k === '--refuse-ms') a.refuseMs = v;
    else if (k === '--seconds') a.seconds = v;
    else if (k === '--base-p99') a.baseP99 = v;
    else if (k === '--global') a.global = v;
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

/**
 * Address-keyed limits and bans, decided in arrival order. `limits`: [{ n, windowMs, subnet }] (a
 * subnet limit counts the /24 and its refusals strike the /24); `banAfter` refusals ban what was
 * struck; `usersExempt`: legitimate users pass (the bounds, which know who crawls).
 */
function addressPolicy({ limits, banAfter = 3, usersExempt = false }) {
  const rings = new Map();
  const strikes = new Map();
  const banned = new Set();
  const subnetOf = (ip) => ip.slice(0, ip.lastIndexOf('.'));
  return (ev, t) => {
    if (usersExempt && ev.cls === LEGIT) return true;
    if (banned.has(ev.ip) || banned.has(subnetOf(ev.ip))) return false;
    const windows = limits.map((l, i) => {
      const key = `${i}|${l.subnet ? subnetOf(ev.ip) : ev.ip}`;
      let ring = rings.get(key);
      if (!ring) rings.set(key, (ring = []));
      while (ring.length && ring[0] <= t - l.windowMs) ring.shift();
      return { l, ring };
    });
    const refusing = windows.find((w) => w.ring.length >= w.l.n);
    if (refusing) {
      const target = refusing.l.subnet ? subnetOf(ev.ip) : ev.ip;
      const s = (strikes.get(target) || 0) + 1;
      strikes.set(target, s);
      if (s >= banAfter) banned.add(target);
      return false;
    }
    for (const w of windows) w.ring.push(t);
    return true;
  };
}

/** One policy over the schedule: legitimate requests from the crawl start, served share and tail. */
function model(a, policy, withCrawler = true) {
  const s = { ...DEFAULTS, seconds: a.seconds, global: a.global };
  const users = Math.max(50, Math.min(5000, Math.round((s.legit * a.cap) / s.userRate)));
  const events = crawlSchedule({ durationMs: s.seconds * 1000, crawlStartMs: s.crawlStartSec * 1000, users, userRate: s.userRate, crawlIps: s.crawlIps, crawlRate: withCrawler ? s.crawl * a.cap : 0, subnetRate: withCrawler ? s.subnet * a.cap : 0 });
  const serveMs = a.serveMs || 1000 / a.cap;
  const rate = Math.round(s.global * a.cap);
  const burst = Math.max(10, Math.round(0.2 * rate)); // the tier's { limit: rate, windowMs: 1000, burst } (crawl-scenario.js)
  let tokens = burst;
  let tokensAt = 0;
  let free = 0;
  const latencies = [];
  let sent = 0;
  let longestWait = 0;
  for (const ev of events) {
    const start = Math.max(free, ev.t);
    tokens = Math.min(burst, tokens + ((start - tokensAt) * rate) / 1000);
    tokensAt = start;
    let admitted = policy(ev, start) && tokens >= 1;
    if (admitted) tokens -= 1;
    free = start + (admitted ? serveMs : a.refuseMs);
    longestWait = Math.max(longestWait, free - ev.t);
    if (ev.cls !== LEGIT || ev.t < s.crawlStartSec * 1000) continue;
    sent++;
    const latency = free - ev.t;
    if (admitted && latency <= s.timeoutMs) latencies.push(latency);
  }
  latencies.sort((x, y) => x - y);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { servedPct: (100 * latencies.length) / sent, p99: at(0.99), p999: at(0.999), maxWait: longestWait };
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  const after = [{ n: DEFAULTS.perIp.limit, windowMs: DEFAULTS.perIp.windowMs }, { n: DEFAULTS.perSubnet.limit, windowMs: DEFAULTS.perSubnet.windowMs, subnet: true }];
  const burst = (n) => [...after, { n, windowMs: 1000 }];
  const policies = [
    ['after: per IP 15 / 10 s, per /24 30 / 10 s, ban after 3', addressPolicy({ limits: after })],
    ['after + per IP 5 / 1 s', addressPolicy({ limits: burst(5) })],
    ['after + per IP 5 / 1 s, ban after 1 refusal', addressPolicy({ limits: burst(5), banAfter: 1 })],
    ['after + per IP 4 / 1 s', addressPolicy({ limits: burst(4) })],
    ['bound: each crawler address served once (and the /24 limit)', addressPolicy({ limits: [{ n: 1, windowMs: 60_000 }, after[1]], banAfter: 1, usersExempt: true })],
    ['bound: every crawler request refused', addressPolicy({ limits: [{ n: 0, windowMs: 60_000 }], banAfter: 1, usersExempt: true })],
  ];
  const base = model(a, () => true, false);
  console.log(`model: C ${a.cap} req/s, ${(a.serveMs || 1000 / a.cap).toFixed(2)} ms a served request, a refusal ${a.refuseMs} ms, global limit ${a.global} C, ${a.seconds} s, crawl from ${DEFAULTS.crawlStartSec} s; one server in arrival order`);
  console.log(`no crawler: legitimate p99 ${base.p99.toFixed(1)} ms in the model; the ratio below adds the model's extra p99 to a measured ${a.baseP99} ms`);
  console.log(`${'policy'.padEnd(58)} ${'served'.padStart(8)} ${'p99 ms'.padStart(8)} ${'p99.9 ms'.padStart(9)} ${'x base'.padStart(7)}  longest wait ms`);
  for (const [name, policy] of policies) {
    const r = model(a, policy);
    const ratio = (a.baseP99 + r.p99 - base.p99) / a.baseP99;
    console.log(`${name.padEnd(58)} ${(r.servedPct.toFixed(2) + '%').padStart(8)} ${r.p99.toFixed(1).padStart(8)} ${r.p999.toFixed(1).padStart(9)} ${(ratio.toFixed(2) + 'x').padStart(7)}  ${r.maxWait.toFixed(0)}`);
  }
}

if (require.main === module) main();

module.exports = { addressPolicy, model };

'use strict';
// npm run bench:defense-layers — what each abuse-defense layer adds to one gatekeeper admit, in
// process (no HTTP): `gate.admit(req, res)` in a tight loop over prebuilt requests, layer by layer:
//
//   bare (trusted tier header)  ->  + deny list  ->  + ban check  ->  + per-IP sliding window  ->
//   + per-user token bucket (the full chain of issue 12)  ->  + the fair-share backstop (fairShare)
//
// and each limit on its own, then the same policy from the peers (express-rate-limit x2 +
// net.BlockList + a Map of bans; rate-limiter-flexible with RLWrapperBlackAndWhite and
// blockDuration), awaited as their APIs require. Every request is admitted (limits far above what
// one key is sent), so the figure is the cost every request pays. Rounds interleave the
// configurations (each built fresh per round); the table gives the median and range over rounds.
//
//   node benchmark/defense-layers.js [--rounds 7] [--requests 200000] [--only id,id]
//
// A second measure, independent of the machine's load: `--untimed N` runs each gatekeeper
// configuration of --only for 50,000 + N admits, untimed and with shedding off, for an instruction
// counter, e.g. the native call's instructions per admit:
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//     --toggle-collect='tiergate::node::defense::defend_and_decide' --toggle-collect='tiergate::node::gate::decide' \
//     node benchmark/defense-layers.js --only full --untimed 100000
//
// (the instructions collected divided by the admits it prints).
const net = require('node:net');
const { Gatekeeper } = require('../lib/gatekeeper');
const { prng: rng } = require('./lib/openloop');

function parseArgs(argv) {
  const a = { rounds: 7, requests: 200_000, only: null, untimed: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--rounds') a.rounds = Number(argv[++i]);
    else if (k === '--requests') a.requests = Number(argv[++i]);
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--untimed') a.untimed = Number(argv[++i]);
    else throw new Error(`unknown argument ${k}`);
  }
  if (!(Number.isInteger(a.rounds) && a.rounds >= 1 && Number.isInteger(a.requests) && a.requests >= 1000)) throw new Error('--rounds >= 1, --requests >= 1000');
  if (a.untimed !== null && !(Number.isInteger(a.untimed) && a.untimed >= 1)) throw new Error('--untimed >= 1');
  return a;
}

// The clients: distinct addresses (1 in 16 IPv6), user ids and a tier mix, seeded.
const POOL = 8192;
const USERS = 2048;
const TIERS = ['critical', 'standard', 'background'];
function requests() {
  const r = rng(11);
  const out = [];
  for (let i = 0; i < POOL; i++) {
    const ip = i % 16 === 15 ? `2a02:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::${(1 + (i % 97)).toString(16)}` : `${11 + (i % 200)}.${(i >> 8) & 255}.${i & 255}.${1 + Math.floor(r() * 254)}`;
    const user = `user-${Math.floor(r() * USERS)}`;
    const x = r();
    const tier = x < 0.1 ? 'critical' : x < 0.4 ? 'standard' : 'background';
    const headers = { host: '127.0.0.1', 'x-user-tier': tier, 'x-user-id': user };
    out.push({ method: 'GET', url: '/api/items', headers, rawHeaders: Object.entries(headers).flat(), socket: { remoteAddress: ip }, ip });
  }
  return out;
}

// The deny list: 96 IPv4 ranges in reserved 240.0.0.0/4 and 32 IPv6 ranges in documentation space,
// so that no client is refused.
function denyList() {
  const r = rng(7);
  const b = () => Math.floor(r() * 256);
  const out = [];
  for (let i = 0; i < 96; i++) {
    const a = 240 + (i % 15);
    const bits = [16, 20, 24, 28, 32][i % 5];
    if (bits === 16) out.push(`${a}.${b()}.0.0/16`);
    else if (bits === 20) out.push(`${a}.${b()}.${b() & 0xf0}.0/20`);
    else if (bits === 24) out.push(`${a}.${b()}.${b()}.0/24`);
    else if (bits === 28) out.push(`${a}.${b()}.${b()}.${b() & 0xf0}/28`);
    else out.push(`${a}.${b()}.${b()}.${b()}/32`);
  }
  for (let i = 0; i < 32; i++) out.push(`2001:db8:${(i * 97 + 1).toString(16)}::/48`);
  return out;
}
const DENY = denyList();

const BASE = { trustTierHeader: true };
/** Warm-up admits before each timed run (and before --untimed's N). */
const WARM = 50_000;
const IP_LIMIT = { name: 'per-ip', algorithm: 'sliding-window', limit: 600, windowMs: 60_000 };
const USER_LIMIT = { name: 'per-user', algorithm: 'token-bucket', limit: 100_000, windowMs: 100_000, by: { header: 'x-user-id' } };
const NO_BANS = { rules: false };

// Overload sheds (503: the shared machine's own lag) are counted, not failed: a shed request has run
// the whole chain first, so its cost is the same. Any other refusal means the setup is wrong.
let shed = 0;
function gate(options) {
  const g = new Gatekeeper({ ...BASE, ...options });
  const res = {}; // not an emitter: the probe watch is left out (the same for every configuration)
  return (req) => {
    const v = g.admit(req, res);
    if (v === null) return;
    if (v.status === 503) shed++;
    else throw new Error(`refused (${v.status}): the measurement must admit every request`);
  };
}

// The peers, as their users would compose the same policy.
function blockList() {
  const bl = new net.BlockList();
  for (const c of DENY) {
    const [addr, bits] = c.split('/');
    bl.addSubnet(addr, Number(bits), addr.includes(':') ? 'ipv6' : 'ipv4');
  }
  return bl;
}

function erlComposition() {
  const { rateLimit } = require('express-rate-limit');
  const bl = blockList();
  const bans = new Map();
  const common = { standardHeaders: false, legacyHeaders: false, validate: false };
  const perIp = rateLimit({ ...common, windowMs: 60_000, limit: 600, keyGenerator: (req) => req.ip });
  const perUser = rateLimit({ ...common, windowMs: 60_000, limit: 100_000, keyGenerator: (req) => req.headers['x-user-id'] });
  const res = { setHeader() {}, getHeader() {}, status() { return this; }, send() {} };
  const noop = () => {};
  return async (req) => {
    const ip = req.ip;
    if (bl.check(ip, ip.includes(':') ? 'ipv6' : 'ipv4')) throw new Error('denied');
    const ban = bans.get(ip);
    if (ban !== undefined && ban > Date.now()) throw new Error('banned');
    const tier = req.headers['x-user-tier'];
    if (!TIERS.includes(tier)) throw new Error('tier');
    let ok = false;
    await perIp(req, res, () => { ok = true; });
    if (!ok) throw new Error('refused');
    ok = false;
    await perUser(req, res, () => { ok = true; });
    if (!ok) throw new Error('refused');
    noop();
  };
}

function rlfComposition() {
  const { RateLimiterMemory, RLWrapperBlackAndWhite } = require('rate-limiter-flexible');
  const bl = blockList();
  const perIp = new RLWrapperBlackAndWhite({
    limiter: new RateLimiterMemory({ keyPrefix: 'ip', points: 600, duration: 60, blockDuration: 300 }),
    isBlackListed: (ip) => bl.check(ip, ip.includes(':') ? 'ipv6' : 'ipv4'),
  });
  const perUser = new RateLimiterMemory({ keyPrefix: 'user', points: 100_000, duration: 100 });
  return async (req) => {
    const tier = req.headers['x-user-tier'];
    if (!TIERS.includes(tier)) throw new Error('tier');
    await perIp.consume(req.ip);
    await perUser.consume(req.headers['x-user-id']);
  };
}

const CONFIGS = [
  { id: 'bare', title: 'bare gatekeeper (trusted tier header)', make: () => gate({}) },
  { id: 'deny', title: '+ deny list (128 CIDRs), no ban rules', make: () => gate({ deny: DENY, bans: NO_BANS }) },
  { id: 'deny+ban', title: '+ ban check (default ban rules)', make: () => gate({ deny: DENY }) },
  { id: 'ip-only', title: 'bare + per-IP sliding window alone', make: () => gate({ bans: NO_BANS, limits: [IP_LIMIT] }) },
  { id: 'user-only', title: 'bare + per-user token bucket alone', make: () => gate({ bans: NO_BANS, limits: [USER_LIMIT] }) },
  { id: 'deny+ban+ip', title: '+ per-IP sliding window', make: () => gate({ deny: DENY, limits: [IP_LIMIT] }) },
  { id: 'full', title: '+ per-user token bucket (full chain)', make: () => gate({ deny: DENY, limits: [IP_LIMIT, USER_LIMIT] }), full: true },
  { id: 'full+fair', title: 'full chain + fairShare (defaults)', make: () => gate({ deny: DENY, limits: [IP_LIMIT, USER_LIMIT], fairShare: true }) },
  { id: 'erl', title: 'peer: express-rate-limit x2 + BlockList + Map', make: erlComposition, peer: true, async: true },
  { id: 'rlf', title: 'peer: rate-limiter-flexible + BlackAndWhite', make: rlfComposition, peer: true, async: true },
];

// Admits run in turns of CHUNK, the loop yielding in between (untimed): a turn stays well inside the
// gate's turn budget (shed.turnBudgetMs), as a server's turns do, so nothing is shed for running long.
const CHUNK = 500;
const { setImmediate: tick } = require('node:timers/promises');

async function runSync(fn, reqs, n) {
  let ns = 0n;
  for (let done = 0; done < n; done += CHUNK) {
    const t0 = process.hrtime.bigint();
    for (let i = done; i < done + CHUNK; i++) fn(reqs[i & (POOL - 1)]);
    ns += process.hrtime.bigint() - t0;
    await tick();
  }
  return Number(ns) / (Math.ceil(n / CHUNK) * CHUNK);
}

async function runAsync(fn, reqs, n) {
  let ns = 0n;
  for (let done = 0; done < n; done += CHUNK) {
    const t0 = process.hrtime.bigint();
    for (let i = done; i < done + CHUNK; i++) await fn(reqs[i & (POOL - 1)]);
    ns += process.hrtime.bigint() - t0;
    await tick();
  }
  return Number(ns) / (Math.ceil(n / CHUNK) * CHUNK);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const reqs = requests();
  const configs = args.only === null ? CONFIGS : CONFIGS.filter((c) => args.only.includes(c.id));
  if (args.untimed !== null) {
    // Under an instruction counter the loop is slow enough to lag: no shedding, so every admit runs
    // the whole chain the same way.
    BASE.shed = false;
    for (const c of configs.filter((x) => !x.peer)) {
      const n = Math.ceil((WARM + args.untimed) / CHUNK) * CHUNK; // runSync's whole turns
      await runSync(c.make(), reqs, n);
      console.log(`${c.id}: ${n} admits (untimed, shed: false)`);
    }
    return;
  }
  const ns = new Map(configs.map((c) => [c.id, []]));
  for (let round = 0; round < args.rounds; round++) {
    for (const c of configs) {
      const fn = c.make();
      const warm = Math.min(WARM, args.requests);
      const run = c.async ? runAsync : runSync;
      await run(fn, reqs, warm);
      ns.get(c.id).push(await run(fn, reqs, args.requests));
    }
  }
  const bare = ns.get('bare');
  const full = ns.get('full');
  const peers = configs.filter((c) => c.peer);
  const fmt = (xs, f = (v) => v.toFixed(0)) => `${f(median(xs))} [${f(Math.min(...xs))}..${f(Math.max(...xs))}]`;
  console.log(`node ${process.version}, ${args.rounds} rounds x ${args.requests} admits; ns per admit, median [range] over rounds; ratios within each round`);
  for (const c of configs) {
    const xs = ns.get(c.id);
    let line = `${c.id.padEnd(12)} ${c.title.padEnd(48)} ${fmt(xs).padStart(20)}`;
    if (bare !== undefined && c.id !== 'bare') line += `   x bare ${fmt(xs.map((v, i) => v / bare[i]), (v) => v.toFixed(2))}`;
    console.log(line);
  }
  if (full !== undefined && peers.length > 0) {
    const fastest = full.map((_, i) => Math.min(...peers.map((p) => ns.get(p.id)[i])));
    console.log(`fastest peer / full chain: ${fmt(fastest.map((v, i) => v / full[i]), (v) => v.toFixed(2))}x (target >= 5)`);
  }
  if (shed > 0) console.log(`(${shed} admits were overload sheds: the loop lagged)`);
  if (full !== undefined && bare !== undefined) console.log(`full chain / bare: ${fmt(full.map((v, i) => v / bare[i]), (v) => v.toFixed(2))}x (target <= 1.5)`);
  const fair = ns.get('full+fair');
  if (fair !== undefined && full !== undefined) console.log(`full chain + fairShare / full chain: ${fmt(fair.map((v, i) => v / full[i]), (v) => v.toFixed(3))}x (what the backstop adds per admit)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

'use strict';
// npm run bench:defense — the abuse-defense layers, in one run:
//
// 1. Cost per request of one policy — deny list + ban check + per-IP sliding window + per-user token
//    bucket + tier (lib/defense-policy.js) — as tiergate's one gatekeeper and as the peers' usual
//    compositions (express-rate-limit x2 + net.BlockList + a Map of bans; rate-limiter-flexible with
//    its black/white wrapper and blockDuration; lib/defense-compositions.js), each checked first to
//    enforce the policy (lib/defense-check.js):
//    a. in process, no network: the middleware lists run on real node request/response objects
//       (lib/chain-harness.js), every request admitted; `--runs` rounds, compositions interleaved, the
//       median and range over rounds; the harness alone (empty list) is measured and subtracted;
//    b. over HTTP (autocannon against Express in a child process): req/s and server CPU per request.
// 2. Bytes per key of each algorithm (lib/key-memory.js: a child process per algorithm, RSS and V8
//    heap before and after N keys, and the core's own count where the binding reports it).
// 3. The crawler incident (lib/crawl-scenario.js): a server of measured capacity, a few hundred
//    legitimate users, a crawler rotating through many addresses and one spread over a /24; a
//    global limit only (before) against per-IP and per-/24 limits and bans (after). Writes
//    benchmark/out/defense.svg (timeline) and defense.json.
//
//   node benchmark/defense.js [--quick] [--breakdown] [--only cost,http,memory,crawl] [--runs 5] [--requests 40000]
//        [--keys 50000] [--http-rounds N] [--memory-runs N] [--crawl-runs N] [--seconds 16]
//        [--crawl 1.2] [--crawl-ips 100] [--subnet 0.2] [--legit 0.2] [--global 0.8]
//        [--per-ip 15] [--per-subnet 30] [--work-ms 1.5] [--variants burst,shed,oracle-first,oracle-deny] [--burst-limit 5]
//   --runs N: rounds of 1a and 1b, runs of 2, repetitions of 3 (each overridable); every part reports
//   the median and range over them. --crawl, --subnet, --legit, --global: multiples of the measured
//   capacity C; --per-ip, --per-subnet: requests per 10 s. --quick: a short smoke run (~2 min).
//   --variants: part 3 also runs these configurations, judged by the same targets (lib/crawl-scenario.js:
//   a per-IP limit per second as well, shedding on, and two bounds that know the crawler's addresses).
//   --breakdown: 1a also times the gatekeeper with one defense layer at a time (where the cost goes).
//   --untimed N: instead of the parts, runs 1a's full chain (shedding off) on 1a's requests for
//   20,000 + N requests without timing, for an instruction or cache counter, e.g.
//     valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file=/tmp/cg.out \
//       --toggle-collect='tiergate::node::defense::defend_and_decide' node benchmark/defense.js --untimed 100000
//   (what was collected divided by the requests it prints).
//   The default run aims at 7 minutes or less (part 3: 5 x 4 configurations of 16 s).
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { COMPOSITIONS, tiergateFull } = require('./lib/defense-compositions');
const { checkComposition } = require('./lib/defense-check');
const { POLICY, clients } = require('./lib/defense-policy');
const { requestPool, timeChain } = require('./lib/chain-harness');
const { measureKeyMemory, SUBJECTS, HITS } = require('./lib/key-memory');
const { DEFAULTS, VARIANTS, configurations, runCrawlConfig } = require('./lib/crawl-scenario');
const { startServer, calibrateWork, measureCapacity } = require('./lib/scenario');
const { DEFAULT_WORK_KIND } = require('./lib/work');
const { timelineSvg } = require('./lib/svg');
const { CLASSES } = require('./lib/crawl-traffic');
const { printCrawlTable, crawlFigures, printCrawlTargets } = require('./lib/crawl-report');

const PARTS = ['cost', 'http', 'memory', 'crawl'];

function parseArgs(argv) {
  const a = { untimed: null, quick: false, breakdown: false, only: PARTS, runs: 5, requests: 40_000, keys: 50_000, httpRounds: null, memoryRuns: null, crawlRuns: null, httpSeconds: 1, workMs: 1.5, crawl: { ...DEFAULTS } };
  const num = (i) => {
    const v = Number(argv[i]);
    if (!Number.isFinite(v) || v <= 0) throw new RangeError(`${argv[i - 1]} must be a positive number, got ${argv[i]}`);
    return v;
  };
  const count = (i) => {
    const v = num(i);
    if (!Number.isInteger(v)) throw new RangeError(`${argv[i - 1]} must be a whole number, got ${argv[i]}`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--quick') a.quick = true;
    else if (k === '--breakdown') a.breakdown = true;
    else if (k === '--untimed') a.untimed = count(++i);
    else if (k === '--only') {
      a.only = argv[++i].split(',');
      for (const p of a.only) if (!PARTS.includes(p)) throw new RangeError(`--only: unknown part ${p} (parts: ${PARTS.join(', ')})`);
    } else if (k === '--runs') a.runs = count(++i);
    else if (k === '--http-rounds') a.httpRounds = count(++i);
    else if (k === '--memory-runs') a.memoryRuns = count(++i);
    else if (k === '--crawl-runs') a.crawlRuns = count(++i);
    else if (k === '--requests') a.requests = count(++i);
    else if (k === '--keys') a.keys = count(++i);
    else if (k === '--work-ms') a.workMs = num(++i);
    else if (k === '--seconds') a.crawl.seconds = num(++i);
    else if (k === '--crawl') a.crawl.crawl = num(++i);
    else if (k === '--crawl-ips') a.crawl.crawlIps = count(++i);
    else if (k === '--subnet') a.crawl.subnet = num(++i);
    else if (k === '--legit') a.crawl.legit = num(++i);
    else if (k === '--global') a.crawl.global = num(++i);
    else if (k === '--per-ip') a.crawl.perIp = { ...a.crawl.perIp, limit: count(++i) };
    else if (k === '--per-subnet') a.crawl.perSubnet = { ...a.crawl.perSubnet, limit: count(++i) };
    else if (k === '--burst-limit') a.crawl.burstLimit = count(++i);
    else if (k === '--variants') {
      a.crawl.variants = argv[++i].split(',');
      for (const v of a.crawl.variants) if (!VARIANTS.includes(v)) throw new RangeError(`--variants: unknown variant ${v} (${VARIANTS.join(', ')})`);
    }
    else throw new Error(`unknown argument ${k}`);
  }
  if (a.quick) {
    a.runs = Math.min(a.runs, 3);
    a.requests = Math.min(a.requests, 20_000);
    a.keys = Math.min(a.keys, 50_000);
    a.httpSeconds = 1;
    a.crawl.seconds = Math.min(a.crawl.seconds, 14);
    a.crawl.crawlStartSec = Math.min(a.crawl.crawlStartSec, 2);
  }
  // Every part repeats `runs` times unless told otherwise (--quick: one crawl, one HTTP round).
  a.httpRounds ??= a.quick ? 1 : a.runs;
  a.memoryRuns ??= a.runs;
  a.crawlRuns ??= a.quick ? 1 : a.runs;
  if (a.crawl.crawlStartSec + 10 >= a.crawl.seconds) throw new RangeError(`--seconds must be more than ${a.crawl.crawlStartSec + 10} (crawl start + the 10 s onset window)`);
  return a;
}

const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const range = (xs) => [Math.min(...xs), Math.max(...xs)];
const f0 = (v) => (v == null || Number.isNaN(v) ? '—' : Math.round(v).toString());
const f1 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(1));
const f2 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(2));
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
const mr = (xs, f = f0) => `${f(median(xs))} [${f(range(xs)[0])}–${f(range(xs)[1])}]`;
// An error's first line, without the list of known options that some carry.
const brief = (err) => String((err && err.message) || err).split('\n')[0].replace(/ \(known: [^)]*\)/, '');
const target = (pass, name, value) => console.log(`  ${pass ? 'PASS' : 'MISS'}  ${pad(name, 58)} ${value}`);

// ---- 1a. cost in process ------------------------------------------------------------------------

async function partCost(args, out) {
  console.log(`\n## 1a. Cost per request in process (no network): ${args.runs} rounds x ${args.requests} requests per composition, interleaved`);
  const c = clients();
  const pool = requestPool(c);
  console.log(`policy: deny list of ${POLICY.deny.length} CIDRs (IPv4 and IPv6); bans after ${POLICY.bans.strikes} refusals / ${POLICY.bans.strikeWindowMs / 1000} s for ${POLICY.bans.banMs / 1000} s; per IP ${POLICY.ip.limit} per ${POLICY.ip.windowMs / 1000} s; per user ${POLICY.user.limit} per ${POLICY.user.windowMs / 1000} s, burst ${POLICY.user.burst} (x tier: ${Object.entries(POLICY.tierScale).map(([t, s]) => `${t} ${s}`).join(', ')}); one trusted proxy hop`);
  console.log(`clients: ${c.addrs.length} addresses (1 in 16 IPv6) in X-Forwarded-For, ${c.users} users (x-user-id), tiers 10/30/60 by user, GET /api/items and /api/items/17 alternately`);
  const rows = [];
  for (const comp of COMPOSITIONS.filter((x) => args.breakdown || !x.breakdown)) {
    let chain;
    try {
      if (comp.peer || comp.full) {
        const failed = await checkComposition(comp.build);
        if (failed.length) throw new Error(`does not enforce the policy: ${failed.join('; ')}`);
      }
      chain = comp.build(POLICY);
    } catch (err) {
      console.log(`  ${comp.title}: could not run (${brief(err)})`);
      continue;
    }
    rows.push({ comp, chain, ns: [], wall: [], refused: 0 });
  }
  console.log(`policy check (tight numbers: deny, per-IP limit, ban outlasting the window, per-user quota): passed by ${rows.filter((r) => r.comp.peer || r.comp.full).map((r) => r.comp.id).join(', ') || 'none'}`);
  let offset = 0;
  for (const r of rows) {
    await timeChain(r.chain, pool, Math.min(20_000, args.requests), offset); // warm-up (JIT, stores)
    offset += 20_000;
  }
  for (let round = 0; round < args.runs; round++) {
    const order = round % 2 ? [...rows].reverse() : rows;
    for (const r of order) {
      const t = await timeChain(r.chain, pool, args.requests, offset);
      offset += args.requests;
      r.ns.push(t.cpuNsPerReq);
      r.wall.push(t.nsPerReq);
      r.refused += t.refused;
    }
  }
  const floor = rows.find((r) => r.comp.id === 'floor');
  const byId = (id) => rows.find((r) => r.comp.id === id);
  // Per round: above the floor of the same round, and ratios of the same round.
  const above = (r) => r.ns.map((v, i) => v - floor.ns[i]);
  const full = byId('tiergate');
  const bare = byId('tiergate-bare');
  console.log(`\n${pad('composition', 50)} ${lpad('CPU ns/req: median [range]', 26)} ${lpad('above the harness', 22)} ${lpad('x tiergate full', 16)} ${lpad('wall ns/req', 12)}`);
  const table = [];
  for (const r of rows) {
    const a = above(r);
    const x = full ? a.map((v, i) => v / (full.ns[i] - floor.ns[i])) : null;
    console.log(`${pad(r.comp.title, 50)} ${lpad(mr(r.ns), 26)} ${lpad(r.comp.id === 'floor' ? '—' : mr(a), 22)} ${lpad(x && r.comp.id !== 'floor' ? mr(x, f2) : '—', 16)} ${lpad(f0(median(r.wall)), 12)}${r.refused ? `  !! ${r.refused} refused` : ''}`);
    table.push({ id: r.comp.id, title: r.comp.title, cpuNsPerReq: r.ns, aboveHarness: a, wallNsPerReq: r.wall, refused: r.refused });
  }
  console.log('(CPU ns/req: this process\'s user+system CPU time per request, one request after another, so that time spent waiting for a CPU');
  console.log(' on a shared machine is left out; "above the harness": minus the same round\'s empty list, i.e. the middleware alone; wall: the median)');
  const shedding = rows.filter((r) => r.refused > 0);
  if (shedding.length) {
    console.log(`!! requests refused in the timed rounds by: ${shedding.map((r) => `${r.comp.id} (${r.refused})`).join(', ')}. Every request is under every`);
    console.log('   limit, so these are sheds: the loop lagged (a busy machine) and the gatekeeper shed; those rows partly time the refusal path.');
  }
  console.log('\nTargets (per-round ratios of the middleware alone; median [range] over rounds):');
  if (full && bare) {
    const ratio = above(full).map((v, i) => v / above(bare)[i]);
    target(median(ratio) <= 1.5, 'full chain <= 1.5x a bare gatekeeper() admit', `${mr(ratio, f2)}x (${f0(median(above(full)))} vs ${f0(median(above(bare)))} ns)`);
  } else console.log('  ----  full chain vs bare admit: not measured (a tiergate composition could not run)');
  const peers = rows.filter((r) => r.comp.peer);
  if (full && peers.length) {
    // The fastest peer of each round.
    const fastest = above(full).map((_, i) => Math.min(...peers.map((p) => above(p)[i])));
    const speedup = fastest.map((v, i) => v / above(full)[i]);
    const which = peers.reduce((b, p) => (median(above(p)) < median(above(b)) ? p : b));
    target(median(speedup) >= 5, '>= 5x faster than the fastest peer composition', `${mr(speedup, f2)}x (fastest peer: ${which.comp.id}, ${f0(median(above(which)))} ns)`);
  } else console.log('  ----  full chain vs the peers: not measured');
  out.cost = { runs: args.runs, requests: args.requests, table };
}

/** --untimed N: 1a's full chain over 1a's requests, 20,000 + N of them, untimed, shedding off. */
async function partUntimed(args) {
  const pool = requestPool(clients());
  // Under an instruction counter the loop is slow enough to lag: no shedding, so every request runs
  // the whole chain the same way.
  const chain = tiergateFull(POLICY, { shed: false });
  const n = 20_000 + args.untimed;
  const t = await timeChain(chain, pool, n);
  console.log(`tiergate full chain: ${n} requests (untimed, shed: false): ${t.admitted} admitted, ${t.refused} refused`);
  if (t.refused > 0) process.exitCode = 1;
}

// ---- 1b. cost over HTTP --------------------------------------------------------------------------

function cannon(port, seconds, requests) {
  const autocannon = require('autocannon');
  return new Promise((resolve, reject) => {
    autocannon({ url: `http://127.0.0.1:${port}`, connections: 32, duration: seconds, requests }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

async function partHttp(args, out) {
  console.log(`\n## 1b. The same compositions over HTTP: Express 5 in a child process, autocannon (32 connections, ${args.httpSeconds} s, ${args.httpRounds} interleaved rounds)`);
  const c = clients({ ips: 4000, users: 1000 });
  const requests = requestPool(c, { variants: 4000 }).map((s) => ({ method: 'GET', path: s.url, headers: s.headers }));
  const modulePath = path.join(__dirname, 'lib', 'defense-compositions.js');
  const rows = [];
  try {
    for (const comp of COMPOSITIONS.filter((x) => !x.breakdown)) {
      try {
        const srv = await startServer({ framework: 'express', protection: { module: modulePath, export: 'expressRouter' }, options: { id: comp.id } });
        rows.push({ comp, srv, rps: [], cpu: [], non2xx: 0, errors: 0 });
        await cannon(srv.port, 1, requests);
      } catch (err) {
        console.log(`  ${comp.title}: could not start (${brief(err)})`);
      }
    }
    for (let round = 0; round < args.httpRounds; round++) {
      for (const r of round % 2 ? [...rows].reverse() : rows) {
        const a = await r.srv.cpuUsage();
        const res = await cannon(r.srv.port, args.httpSeconds, requests);
        const b = await r.srv.cpuUsage();
        r.cpu.push((b.userUs + b.systemUs - a.userUs - a.systemUs) / Math.max(1, res.requests.total));
        r.rps.push(res.requests.average);
        r.non2xx += res.non2xx;
        r.errors += res.errors + res.timeouts;
      }
    }
  } finally {
    await Promise.all(rows.map((r) => r.srv.stop()));
  }
  const floor = rows.find((r) => r.comp.id === 'floor');
  console.log(`\n${pad('composition ("harness alone" = Express, no middleware)', 56)} ${lpad('req/s', 8)} ${lpad('server CPU µs/req', 18)} ${lpad('+ vs none', 10)}`);
  const table = [];
  for (const r of rows) {
    const cpu = median(r.cpu);
    const extra = floor ? cpu - median(floor.cpu) : NaN;
    console.log(`${pad(r.comp.title, 56)} ${lpad(f0(median(r.rps)), 8)} ${lpad(f1(cpu), 18)} ${lpad(r.comp.id === 'floor' ? '—' : (extra >= 0 ? '+' : '') + f1(extra), 10)}${r.non2xx || r.errors ? `  !! ${r.non2xx} non-2xx, ${r.errors} errors` : ''}`);
    table.push({ id: r.comp.id, rps: r.rps, cpuUsPerReq: r.cpu, non2xx: r.non2xx, errors: r.errors });
  }
  console.log('(server CPU µs/req: the server process\'s user+system CPU over the measurement / requests answered; medians over rounds)');
  // The same targets as in process, on the server's CPU above the bare Express server, per round.
  const byId = (id) => rows.find((r) => r.comp.id === id);
  const full = byId('tiergate');
  const bare = byId('tiergate-bare');
  const peers = rows.filter((r) => r.comp.peer);
  if (floor && full) {
    const above = (r) => r.cpu.map((v, i) => v - floor.cpu[i]);
    console.log('\nOn server CPU above the bare server (per round; median [range]), for scale; the targets are judged in process (1a):');
    if (bare) console.log(`  full chain / bare admit: ${mr(above(full).map((v, i) => v / above(bare)[i]), f2)}x`);
    if (peers.length) console.log(`  fastest peer / full chain: ${mr(above(full).map((v, i) => Math.min(...peers.map((p) => above(p)[i])) / v), f2)}x`);
  }
  out.http = { rounds: args.httpRounds, seconds: args.httpSeconds, table };
}

// ---- 2. bytes per key ----------------------------------------------------------------------------

async function partMemory(args, out) {
  const runs = args.memoryRuns;
  console.log(`\n## 2. Bytes per key: ${args.keys} distinct client addresses, ${HITS} requests each (limit ${HITS} per 60 s: every exact-window ring full), a child process per limiter and run; median [range] of ${runs} run${runs > 1 ? 's' : ''}`);
  const rows = SUBJECTS.map((subject) => ({ subject, rss: [], heap: [], native: [], held: null, refused: 0, error: null }));
  for (let run = 0; run < runs; run++) {
    for (const r of run % 2 ? [...rows].reverse() : rows) {
      if (r.error) continue;
      try {
        const m = await measureKeyMemory({ subject: r.subject, keys: args.keys });
        r.rss.push(m.rssPerKey);
        r.heap.push(m.heapPerKey);
        if (m.nativePerKey != null) r.native.push(m.nativePerKey);
        r.held = m.held;
        r.refused += m.refused;
      } catch (err) {
        r.error = brief(err);
      }
    }
  }
  console.log(`${pad('limiter', 32)} ${lpad('RSS B/key', 18)} ${lpad('V8 heap B/key', 18)} ${lpad('core count B/key', 17)} ${lpad('keys held', 10)}`);
  for (const r of rows) {
    if (r.error) {
      console.log(`${pad(r.subject, 32)} could not run (${r.error})`);
      continue;
    }
    console.log(`${pad(r.subject, 32)} ${lpad(mr(r.rss), 18)} ${lpad(mr(r.heap), 18)} ${lpad(r.native.length ? mr(r.native) : 'not reported', 17)} ${lpad(r.held == null ? '—' : r.held, 10)}${r.refused ? `  !! ${r.refused} refused` : ''}`);
  }
  console.log('(RSS: the process\'s resident set after GC, after minus before, / keys, after a warm-up with as many requests; V8 heap: the same');
  console.log(' for heapUsed, where the JS peers keep their state; keys held: what the limit reports holding (gate.defense.stats());');
  console.log(' core count: the bytes the Rust store counts for itself, where the binding reports it)');
  out.memory = { keys: args.keys, hits: HITS, runs, rows: rows.map(({ subject, rss, heap, native, held, refused, error }) => ({ subject, rssPerKey: rss, heapPerKey: heap, nativePerKey: native, held, refused, error })) };
}

// ---- 3. the crawler incident ---------------------------------------------------------------------

async function partCrawl(args, out) {
  const s = args.crawl;
  const runs = args.crawlRuns;
  console.log(`\n## 3. The crawler incident (${s.seconds} s per configuration, crawl from ${s.crawlStartSec} s; ${runs} repetition${runs > 1 ? 's' : ''})`);
  const workIters = calibrateWork(args.workMs, DEFAULT_WORK_KIND);
  const capRun = await measureCapacity({ workIters, workKind: DEFAULT_WORK_KIND, concurrency: 8, durationMs: 2000, path: '/api/items/1' });
  const cap = capRun.reqPerSec;
  console.log(`work: ${DEFAULT_WORK_KIND} x ${workIters} per request (~${args.workMs} ms); capacity C (closed loop, 8 clients, GET /api/items/1, unprotected Express): ${f0(cap)} req/s, p50 ${f1(capRun.p50)} ms`);
  const users = Math.max(50, Math.min(5000, Math.round((s.legit * cap) / s.userRate)));
  console.log(`traffic: ${users} legitimate users at ${s.userRate} req/s each (Poisson; ${f0(users * s.userRate)} req/s = ${s.legit} C), each from its own address and /24;`);
  console.log(`  crawler A: ${f0(s.crawl * cap)} req/s (${s.crawl} C) uniform over ${s.crawlIps} rotating addresses (${f1((s.crawl * cap) / s.crawlIps)} req/s each, each in its own /24);`);
  console.log(`  crawler B: ${f0(s.subnet * cap)} req/s (${s.subnet} C) uniform over the 254 addresses of 203.0.113.0/24 (${f2((s.subnet * cap) / 254)} req/s each);`);
  console.log('  both walk list pages and their items. One host plays every client: the load generator is the proxy in front (keep-alive pool');
  console.log('  on loopback) and sends each client\'s address in X-Forwarded-For, which the gatekeeper trusts for one hop (trustProxy: 1).');
  console.log(`limits: global ${s.global} C; after: + per IP ${s.perIp.limit} per ${s.perIp.windowMs / 1000} s, per /24 ${s.perSubnet.limit} per ${s.perSubnet.windowMs / 1000} s (exact sliding windows), ban after 3 refusals within 60 s for 300 s; shedding off${s.variants ? `; variants: ${s.variants.join(', ')}` : ''}`);
  const reps = [];
  let last = [];
  for (let rep = 0; rep < runs; rep++) {
    const configs = configurations(cap, s);
    // The reference first; before, after and after + fair share in alternating order.
    const order = rep % 2 ? [configs[0], ...configs.slice(1).reverse()] : configs;
    const results = [];
    for (const cfg of order) {
      try {
        results.push(await runCrawlConfig(cfg, { cap, workIters, workKind: DEFAULT_WORK_KIND, s }));
      } catch (err) {
        console.log(`  ${cfg.title}: could not run (${brief(err)})`);
      }
    }
    results.sort((a, b) => configs.indexOf(a.cfg) - configs.indexOf(b.cfg));
    const extra = Object.fromEntries(configs.slice(4).map((c) => [c.id, crawlFigures(results, c.id)]));
    reps.push({ results, figures: crawlFigures(results), fair: crawlFigures(results, 'fair'), extra });
    last = results;
    if (runs > 1) console.log(`  repetition ${rep + 1}/${runs} done (load average ${os.loadavg()[0].toFixed(1)})`);
  }
  console.log(`\nThe ${runs > 1 ? 'last repetition' : 'run'}:`);
  printCrawlTable(last);
  const over = runs > 1 ? ` (median [range] over ${runs} repetitions; PASS when the median meets it)` : '';
  console.log(`\nTargets, after${over}:`);
  const targets = printCrawlTargets(reps.map((r) => r.figures));
  console.log(`\nTargets, after + fair share${over}:`);
  const fairTargets = printCrawlTargets(reps.map((r) => r.fair));
  const variantTargets = {};
  for (const cfg of configurations(cap, s).slice(4)) {
    console.log(`\nTargets, ${cfg.title}${over}:`);
    variantTargets[cfg.id] = printCrawlTargets(reps.map((r) => r.extra[cfg.id]));
  }
  if (last.length) {
    const svg = timelineSvg(
      last.map((r) => ({
        title: r.cfg.title,
        timeline: r.load.timeline,
        tiers: CLASSES,
        note: `legitimate ${f1(r.figures.legit.crawl.servedPct)}% served, p99 ${f1(r.figures.legit.crawl.p99)} ms`,
      })),
      {
        title: `Served per second by class and server CPU; the crawl starts at ${s.crawlStartSec} s (capacity ${f0(cap)} req/s)`,
        right: { field: 'serverCpuPct', axis: 'server CPU % of a core', legend: 'server CPU (% of one core, per 250 ms)' },
      },
    );
    const outDir = path.join(__dirname, 'out');
    fs.mkdirSync(outDir, { recursive: true });
    fs.writeFileSync(path.join(outDir, 'defense.svg'), svg);
    console.log(`\nwrote benchmark/out/defense.svg (${runs > 1 ? 'the last repetition' : 'this run'})`);
  }
  out.crawl = {
    capacity: cap,
    workIters,
    scenario: s,
    targets,
    fairTargets,
    variantTargets,
    repetitions: reps.map((rp) => ({
      figures: rp.figures,
      fairFigures: rp.fair,
      variantFigures: rp.extra,
      results: rp.results.map((r) => ({ config: r.cfg.id, title: r.cfg.title, options: r.cfg.options, users: r.users, figures: r.figures, lag: r.lag, stats: r.stats, timeline: r.load.timeline })),
    })),
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.untimed !== null) return partUntimed(args);
  const t0 = Date.now();
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  const out = { date: new Date().toISOString(), args };
  if (args.only.includes('cost')) await partCost(args, out);
  if (args.only.includes('http')) await partHttp(args, out);
  if (args.only.includes('memory')) await partMemory(args, out);
  if (args.only.includes('crawl')) await partCrawl(args, out);
  const outDir = path.join(__dirname, 'out');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'defense.json'), JSON.stringify(out, null, 1));
  console.log(`\nload average at the end ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}; wrote benchmark/out/defense.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

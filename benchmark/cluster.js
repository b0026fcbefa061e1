'use strict';
// npm run bench:cluster — one limit shared by 4 processes of the same Express app on one Redis:
// tiergate in memory (no Redis: each process limits alone), tiergate cluster mode on Redis and on
// PostgreSQL, rate-limiter-flexible's RateLimiterRedis, and express-rate-limit with rate-limit-redis.
// For each: throughput and latency over hot keys (autocannon against the 4 processes at once), store
// calls per 1000 requests (Redis commands counted as the clients send them, by a TCP proxy in front
// of Redis: a pipeline of n is n, a script one; PostgreSQL: the lease store's calls, each one
// function call in one round trip, counted by the servers), and accuracy (4 x `--burst` requests at one key whose cluster-wide limit is
// `--limit`: admitted vs limit). Then the same table with Redis one 1 ms hop away (the proxy delaying
// each direction), where a round trip per request hurts most. Each of `--runs` runs measures every
// limiter at both latencies, in an order rotated run by run, so that a ratio compares neighbours in
// time on a noisy machine; the summary is the median [range] of the per-run figures and ratios. CPU
// per request (the 4 servers, and the store with the proxy: Redis, or PostgreSQL's server processes)
// shows each limiter's cost apart from the shared machine's saturation. PostgreSQL sits behind a
// delay proxy of its own, as Redis does.
//
//   node benchmark/cluster.js [--quick] [--runs 5] [--seconds 3] [--connections 16] [--limit 1000] [--burst 1000] [--keys 4]
//   --quick: a smoke run (1 run of 1 s per limiter and latency, 4 connections, a burst of 200 at a limit of 200).
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { fork } = require('node:child_process');
const autocannon = require('autocannon');
const { spawnSync } = require('node:child_process');
const { redisServer } = require('../__test__/helpers/redis');
const { startPostgres } = require('../__test__/service/helpers');
const { cpuSeconds } = require('./lib/proc-cpu');
const { median, medianRange } = require('./lib/stats');

const SERVER = path.join(__dirname, 'lib', 'cluster-server.js');
const PROXY = path.join(__dirname, 'lib', 'delay-proxy.js');
const PROCESSES = 4;
const KINDS = [
  { kind: 'none', title: 'no limiter (the ceiling)' },
  { kind: 'tiergate-memory', title: 'tiergate in-memory (no Redis)' },
  { kind: 'tiergate-cluster', title: 'tiergate cluster mode' },
  { kind: 'tiergate-cluster-pg', title: 'tiergate cluster mode (PostgreSQL)' },
  { kind: 'rate-limiter-flexible', title: 'rate-limiter-flexible (Redis)' },
  { kind: 'express-rate-limit', title: 'express-rate-limit + rate-limit-redis' },
];

function parseArgs(argv) {
  const a = { runs: 5, seconds: 3, connections: 16, limit: 1000, burst: 1000, keys: 4 };
  if (argv.includes('--quick')) Object.assign(a, { runs: 1, seconds: 1, connections: 4, limit: 200, burst: 200 });
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--quick') continue;
    const k = argv[i].replace(/^--/, '');
    if (!(k in a)) throw new Error(`unknown argument ${argv[i]}`);
    a[k] = Number(argv[++i]);
  }
  return a;
}

function child(file, args, env) {
  const c = fork(file, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    c.once('message', (m) => resolve({ proc: c, port: m.port }));
    c.once('exit', (code) => reject(new Error(`${path.basename(file)} exited (${code})`)));
  });
}

const stop = (c) => new Promise((resolve) => {
  c.proc.once('exit', resolve);
  c.proc.send({ op: 'stop' });
});

const ask = (c, op) => new Promise((resolve) => {
  c.proc.once('message', (m) => resolve(m.stats));
  c.proc.send({ op });
});


function cannon(port, seconds, connections, keys) {
  let n = 0;
  return new Promise((resolve, reject) => {
    autocannon({
      url: `http://127.0.0.1:${port}/`,
      connections,
      duration: seconds,
      requests: [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'x-key': `hot-${n++ % keys}` } }) }],
    }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

function burst(port, n, key) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const one = () => new Promise((resolve) => {
    http.get({ host: '127.0.0.1', port, path: '/', agent, headers: { 'x-key': key } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    }).on('error', () => resolve(0));
  });
  return Promise.all(Array.from({ length: n }, one)).finally(() => agent.destroy());
}

/** CPU seconds used so far by all of `pids`. */
const cpuOf = (pids) => pids.reduce((a, pid) => a + (cpuSeconds(pid) ?? NaN), 0);

/** CPU seconds used so far by each of `pids` (those gone: left out). */
const cpuByPid = (pids) => new Map(pids.map((p) => [p, cpuSeconds(p)]).filter(([, v]) => v !== null));

/** PostgreSQL's processes: the postmaster and every process it started (its connections' backends). */
function pgPids(pg) {
  const children = spawnSync('pgrep', ['-P', String(pg.postmaster)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
  return [pg.postmaster, ...children];
}

/** The store calls the servers made so far (their own count: PostgreSQL's). */
const storeCallsOf = async (servers) => (await Promise.all(servers.map((s) => ask(s, 'stats')))).reduce((a, s) => a + s.storeCalls, 0);

async function measure(kind, stores, args, run) {
  const { proxy, pgProxy, redis, pg } = stores;
  const onPg = kind === 'tiergate-cluster-pg';
  const redisUrl = `redis://127.0.0.1:${proxy.port}`;
  const postgresUrl = `postgres://tiergate@127.0.0.1:${pgProxy.port}/postgres`;
  const env = (limit) => ({ TG_BENCH_CLUSTER: JSON.stringify({ kind, redisUrl, postgresUrl, limit, windowMs: 3_600_000, run }) });
  // Throughput over hot keys, with a limit no key reaches.
  let servers = await Promise.all(Array.from({ length: PROCESSES }, () => child(SERVER, [], env(1e9))));
  await Promise.all(servers.map((s) => cannon(s.port, 1, args.connections, args.keys))); // warm-up
  const count = () => (onPg ? storeCallsOf(servers) : ask(proxy, 'count'));
  const before = await count();
  const serverPids = servers.map((s) => s.proc.pid);
  const storePids = () => (onPg ? [...pgPids(pg), pgProxy.proc.pid] : [redis.proc.pid, proxy.proc.pid]);
  const store0 = cpuByPid(storePids());
  const cpu0 = cpuOf(serverPids);
  const res = await Promise.all(servers.map((s) => cannon(s.port, args.seconds, args.connections, args.keys)));
  const cpu1 = cpuOf(serverPids);
  // A backend that came after the first reading counts from 0.
  let storeCpu = 0;
  for (const [pid, v] of cpuByPid(storePids())) storeCpu += v - (store0.get(pid) ?? 0);
  const commands = (await count()) - before;
  const stats = await Promise.all(servers.map((s) => ask(s, 'stats')));
  await Promise.all(servers.map(stop));
  const requests = res.reduce((a, r) => a + r.requests.total, 0);
  const row = {
    kind,
    rps: res.reduce((a, r) => a + r.requests.average, 0),
    p50: median(res.map((r) => r.latency.p50)),
    p99: Math.max(...res.map((r) => r.latency.p99)),
    commandsPer1000: (1000 * commands) / Math.max(1, requests),
    serverCpuUs: (1e6 * (cpu1 - cpu0)) / Math.max(1, requests),
    storeCpuUs: (1e6 * storeCpu) / Math.max(1, requests),
    non2xx: res.reduce((a, r) => a + r.non2xx, 0),
    errors: res.reduce((a, r) => a + r.errors + r.timeouts, 0),
    fallbackDecisions: stats[0] === null ? null : stats.reduce((a, s) => a + s.fallbackDecisions, 0),
  };
  if (kind === 'none') return { ...row, admitted: null, failed: 0 }; // nothing to be accurate about
  // Accuracy: every process fires `burst` requests at once at one key of cluster-wide limit `limit`.
  servers = await Promise.all(Array.from({ length: PROCESSES }, () => child(SERVER, [], env(args.limit))));
  const statuses = (await Promise.all(servers.map((s) => burst(s.port, args.burst, `acc-${run}`)))).flat();
  await Promise.all(servers.map(stop));
  row.admitted = statuses.filter((s) => s === 200).length;
  row.failed = statuses.filter((s) => s !== 200 && s !== 429).length;
  return row;
}

const title = (kind) => KINDS.find((k) => k.kind === kind).title;
const COLUMNS = [
  ['req/s', 8, (r) => r.rps, (v) => Math.round(v).toString()],
  ['p50 ms', 12, (r) => r.p50],
  ['p99 ms', 12, (r) => r.p99],
  ['server CPU µs/req', 18, (r) => r.serverCpuUs],
  ['store+proxy CPU µs/req', 22, (r) => r.storeCpuUs],
  ['store calls/1000 req', 20, (r) => r.commandsPer1000],
];

function flagsOf(r) {
  return [r.non2xx ? `${r.non2xx} non-2xx` : '', r.errors ? `${r.errors} errors` : '', r.failed ? `${r.failed} failed in the burst` : '', r.fallbackDecisions ? `${r.fallbackDecisions} fallback decisions` : ''].filter(Boolean).join(', ');
}

/** One run's table at one latency. */
function printRun(label, rows, args) {
  console.log(`  ${label}`);
  for (const r of rows) {
    const cells = COLUMNS.map(([name, , get, fmt = (v) => v.toFixed(1)]) => `${name} ${fmt(get(r))}`).join(', ');
    const flags = flagsOf(r);
    console.log(`    ${title(r.kind).padEnd(40)} ${cells}, admitted ${r.admitted ?? '—'} of ${args.limit}${flags ? `  !! ${flags}` : ''}`);
  }
}

/** The per-run ratios the targets are about. */
function ratiosOf(rows) {
  const by = Object.fromEntries(rows.map((r) => [r.kind, r]));
  const c = by['tiergate-cluster'];
  const pg = by['tiergate-cluster-pg'];
  const peer = Math.max(by['rate-limiter-flexible'].rps, by['express-rate-limit'].rps);
  return { ofMemory: c.rps / by['tiergate-memory'].rps, overPeer: c.rps / peer, ceiling: by.none.rps / peer, commands: c.commandsPer1000, admitted: c.admitted, pgOverPeer: pg.rps / peer, pgCalls: pg.commandsPer1000, pgAdmitted: pg.admitted };
}

/** The median [range] table over the runs at one latency, and the targets' per-run ratios. */
function printSummary(heading, runs, args) {
  console.log(`\n${heading} — median [range] of ${runs.length} runs`);
  console.log(`${'limiter'.padEnd(40)} ${COLUMNS.map(([name, w]) => name.padStart(Math.max(w, 22))).join(' ')} ${`admitted of ${args.limit}`.padStart(18)}`);
  for (const { kind } of KINDS) {
    const rs = runs.map((rows) => rows.find((r) => r.kind === kind));
    const cells = COLUMNS.map(([, w, get, fmt = (v) => v.toFixed(1)]) => medianRange(rs.map(get), fmt).padStart(Math.max(w, 22))).join(' ');
    const admitted = [...new Set(rs.map((r) => r.admitted ?? '—'))].join('/');
    console.log(`${title(kind).padEnd(40)} ${cells} ${admitted.padStart(18)}`);
  }
  const ratios = runs.map(ratiosOf);
  const target = (values, ok, text, fmt) => {
    const met = values.filter(ok).length;
    console.log(`  ${ok(median(values)) ? 'PASS' : 'MISS'}  ${text} ${medianRange(values, fmt)} (met in ${met} of ${values.length} runs)`);
  };
  target(ratios.map((x) => 100 * x.ofMemory), (v) => v >= 95, 'cluster mode % of in-memory throughput (>= 95%):', (v) => `${v.toFixed(1)}%`);
  target(ratios.map((x) => x.overPeer), (v) => v >= 2, 'cluster mode x the best peer (>= 2x):', (v) => `${v.toFixed(2)}x`);
  console.log(`        (no limiter at all: ${medianRange(ratios.map((x) => x.ceiling), (v) => `${v.toFixed(2)}x`)} the best peer, the most any limiter can be on this machine)`);
  target(ratios.map((x) => x.commands), (v) => v <= 20, 'cluster mode Redis commands per 1000 requests on hot keys (<= 20):', (v) => v.toFixed(1));
  target(ratios.map((x) => x.admitted), (v) => v <= args.limit, `cluster mode admitted of ${args.limit} (no over-admission):`, (v) => String(v));
  target(ratios.map((x) => x.pgCalls), (v) => v <= 20, 'cluster mode on PostgreSQL: store calls per 1000 requests on hot keys (<= 20):', (v) => v.toFixed(1));
  target(ratios.map((x) => x.pgAdmitted), (v) => v <= args.limit, `cluster mode on PostgreSQL admitted of ${args.limit} (no over-admission):`, (v) => String(v));
  console.log(`        (cluster mode on PostgreSQL: ${medianRange(ratios.map((x) => x.pgOverPeer), (v) => `${v.toFixed(2)}x`)} the best Redis peer's throughput)`);
}

const LATENCIES = [
  { label: 'loopback', heading: 'Redis and PostgreSQL on loopback (through the proxies, no delay)', delayMs: '0' },
  { label: '1 ms', heading: 'Redis and PostgreSQL behind 1 ms of latency each way (the proxies delaying)', delayMs: '1' },
];

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`${PROCESSES} processes of one Express app, autocannon ${args.connections} connections per process for ${args.seconds} s over ${args.keys} hot keys; accuracy: ${PROCESSES} x ${args.burst} requests at once at one key of limit ${args.limit} per hour; ${args.runs} runs, the limiters' order rotated run by run`);
  const redis = await redisServer();
  const pg = await startPostgres();
  const proxies = await Promise.all(LATENCIES.map((l) => child(PROXY, [String(redis.port), l.delayMs])));
  const pgProxies = await Promise.all(LATENCIES.map((l) => child(PROXY, [String(pg.port), l.delayMs])));
  const out = Object.fromEntries(LATENCIES.map((l) => [l.label, []]));
  try {
    let id = 0;
    for (let run = 0; run < args.runs; run++) {
      console.log(`\nrun ${run + 1} of ${args.runs} (load average ${os.loadavg()[0].toFixed(1)})`);
      const order = KINDS.map((_, i) => KINDS[(i + run) % KINDS.length].kind);
      for (const [li, latency] of LATENCIES.entries()) {
        const rows = [];
        const stores = { proxy: proxies[li], pgProxy: pgProxies[li], redis, pg };
        for (const kind of order) rows.push(await measure(kind, stores, args, `r${id++}`));
        rows.sort((a, b) => KINDS.findIndex((k) => k.kind === a.kind) - KINDS.findIndex((k) => k.kind === b.kind));
        out[latency.label].push(rows);
        printRun(latency.label, rows, args);
      }
    }
  } finally {
    await Promise.all([...proxies, ...pgProxies].map(stop));
    await redis.stop();
    await pg.stop();
  }
  for (const latency of LATENCIES) printSummary(latency.heading, out[latency.label], args);
  const dir = path.join(__dirname, 'out');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'cluster.json'), JSON.stringify({ date: new Date().toISOString(), args, loadavg: os.loadavg(), runs: out }, null, 1));
  console.log(`\nwrote benchmark/out/cluster.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

'use strict';
// npm run bench:cluster — one limit shared by 4 processes of the same Express app on one Redis:
// tiergate in memory (no Redis: each process limits alone), tiergate cluster mode, rate-limiter-
// flexible's RateLimiterRedis, and express-rate-limit with rate-limit-redis. For each: throughput
// and latency over hot keys (autocannon against the 4 processes at once), Redis commands per 1000
// requests (counted as the clients send them, by a TCP proxy in front of Redis: a pipeline of n is n,
// a script one), and accuracy (4 x `--burst` requests at one key whose cluster-wide limit is
// `--limit`: admitted vs limit). Then the same table with Redis one 1 ms hop away (the proxy delaying
// each direction), where a round trip per request hurts most.
//
//   node benchmark/cluster.js [--seconds 3] [--connections 16] [--limit 1000] [--burst 1000] [--keys 4]
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const http = require('node:http');
const { fork } = require('node:child_process');
const autocannon = require('autocannon');
const { redisServer } = require('../__test__/helpers/redis');

const SERVER = path.join(__dirname, 'lib', 'cluster-server.js');
const PROXY = path.join(__dirname, 'lib', 'delay-proxy.js');
const PROCESSES = 4;
const KINDS = [
  { kind: 'tiergate-memory', title: 'tiergate in-memory (no Redis)' },
  { kind: 'tiergate-cluster', title: 'tiergate cluster mode' },
  { kind: 'rate-limiter-flexible', title: 'rate-limiter-flexible (Redis)' },
  { kind: 'express-rate-limit', title: 'express-rate-limit + rate-limit-redis' },
];

function parseArgs(argv) {
  const a = { seconds: 3, connections: 16, limit: 1000, burst: 1000, keys: 4 };
  for (let i = 0; i < argv.length; i++) {
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

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function measure(kind, proxy, args, run) {
  const redisUrl = `redis://127.0.0.1:${proxy.port}`;
  const env = (limit) => ({ TG_BENCH_CLUSTER: JSON.stringify({ kind, redisUrl, limit, windowMs: 3_600_000, run }) });
  // Throughput over hot keys, with a limit no key reaches.
  let servers = await Promise.all(Array.from({ length: PROCESSES }, () => child(SERVER, [], env(1e9))));
  await Promise.all(servers.map((s) => cannon(s.port, 1, args.connections, args.keys))); // warm-up
  const before = await ask(proxy, 'count');
  const res = await Promise.all(servers.map((s) => cannon(s.port, args.seconds, args.connections, args.keys)));
  const commands = (await ask(proxy, 'count')) - before;
  const stats = await Promise.all(servers.map((s) => ask(s, 'stats')));
  await Promise.all(servers.map(stop));
  const requests = res.reduce((a, r) => a + r.requests.total, 0);
  const row = {
    kind,
    rps: res.reduce((a, r) => a + r.requests.average, 0),
    p50: median(res.map((r) => r.latency.p50)),
    p99: Math.max(...res.map((r) => r.latency.p99)),
    commandsPer1000: (1000 * commands) / Math.max(1, requests),
    non2xx: res.reduce((a, r) => a + r.non2xx, 0),
    errors: res.reduce((a, r) => a + r.errors + r.timeouts, 0),
    fallbackDecisions: stats[0] === null ? null : stats.reduce((a, s) => a + s.fallbackDecisions, 0),
  };
  // Accuracy: every process fires `burst` requests at once at one key of cluster-wide limit `limit`.
  servers = await Promise.all(Array.from({ length: PROCESSES }, () => child(SERVER, [], env(args.limit))));
  const statuses = (await Promise.all(servers.map((s) => burst(s.port, args.burst, `acc-${run}`)))).flat();
  await Promise.all(servers.map(stop));
  row.admitted = statuses.filter((s) => s === 200).length;
  row.failed = statuses.filter((s) => s !== 200 && s !== 429).length;
  return row;
}

function print(title, rows, args) {
  console.log(`\n${title}`);
  console.log(`${'limiter'.padEnd(40)} ${'req/s'.padStart(8)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'Redis cmds/1000 req'.padStart(20)} ${`admitted of ${args.limit}`.padStart(18)}`);
  for (const r of rows) {
    const flags = [r.non2xx ? `${r.non2xx} non-2xx` : '', r.errors ? `${r.errors} errors` : '', r.failed ? `${r.failed} failed in the burst` : '', r.fallbackDecisions ? `${r.fallbackDecisions} fallback decisions` : ''].filter(Boolean).join(', ');
    console.log(`${KINDS.find((k) => k.kind === r.kind).title.padEnd(40)} ${Math.round(r.rps).toString().padStart(8)} ${r.p50.toFixed(1).padStart(7)} ${r.p99.toFixed(1).padStart(7)} ${r.commandsPer1000.toFixed(1).padStart(20)} ${String(r.admitted).padStart(18)}${flags ? `  !! ${flags}` : ''}`);
  }
  const by = Object.fromEntries(rows.map((r) => [r.kind, r]));
  const c = by['tiergate-cluster'];
  const peer = Math.max(by['rate-limiter-flexible'].rps, by['express-rate-limit'].rps);
  const checks = [
    [c.rps >= 0.95 * by['tiergate-memory'].rps, `cluster mode ${(100 * c.rps / by['tiergate-memory'].rps).toFixed(1)}% of in-memory throughput (target >= 95%)`],
    [c.rps >= 2 * peer, `cluster mode ${(c.rps / peer).toFixed(2)}x the best peer (target >= 2x)`],
    [c.commandsPer1000 <= 20, `cluster mode ${c.commandsPer1000.toFixed(1)} Redis commands per 1000 requests on hot keys (target <= 20: one per 50)`],
    [c.admitted <= args.limit, `cluster mode admitted ${c.admitted} of a limit of ${args.limit} (target: no over-admission)`],
  ];
  for (const [ok, text] of checks) console.log(`  ${ok ? 'PASS' : 'MISS'}  ${text}`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`${PROCESSES} processes of one Express app, autocannon ${args.connections} connections per process for ${args.seconds} s over ${args.keys} hot keys; accuracy: ${PROCESSES} x ${args.burst} requests at once at one key of limit ${args.limit} per hour`);
  const redis = await redisServer();
  const proxies = await Promise.all([child(PROXY, [String(redis.port), '0']), child(PROXY, [String(redis.port), '1'])]);
  const out = {};
  try {
    let run = 0;
    for (const [label, proxy] of [['loopback', proxies[0]], ['1 ms', proxies[1]]]) {
      const rows = [];
      for (const { kind } of KINDS) rows.push(await measure(kind, proxy, args, `${label === 'loopback' ? 'd' : 'p'}${run++}`));
      out[label] = rows;
      print(label === 'loopback' ? 'Redis on loopback (through the counting proxy, no delay)' : 'Redis behind 1 ms of latency each way (the proxy delaying)', rows, args);
    }
  } finally {
    await Promise.all(proxies.map(stop));
    await redis.stop();
  }
  const dir = path.join(__dirname, 'out');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'cluster.json'), JSON.stringify({ date: new Date().toISOString(), args, loadavg: os.loadavg(), results: out }, null, 1));
  console.log(`\nwrote benchmark/out/cluster.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

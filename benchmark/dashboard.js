'use strict';
// `npm run bench:dashboard`: what watching costs.
//  1. The decision service's decisions/s with the dashboard open (its live stream read, and the
//     overview page's polls at the page's cadence: every 3 s overview, clients, analytics 5m and 15m,
//     /health/ready) against the same service with nobody watching. Rounds alternate the order; the
//     figure is with / without per round, median and range over --runs (default 5) of --seconds each.
//  2. A /metrics scrape (prom-client registry.metrics()) of a gatekeeper, a concurrency gate, a
//     LagMonitor and a ledger: median and p99 over 500 scrapes after 50 of warm-up.
//   node benchmark/dashboard.js [--runs N] [--seconds S] [--connections C]
const http = require('node:http');
const fs = require('node:fs');
const prom = require('prom-client');
const tiergate = require('..');
const { startService, admin, tmpdir, TOKEN } = require('../__test__/service/helpers');
const { checkLoad } = require('./lib/check-load');
const { cpuSeconds } = require('./lib/proc-cpu');
const { median } = require('./lib/stats');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
}
const RUNS = arg('runs', 5);
const SECONDS = arg('seconds', 5);
const CONNECTIONS = arg('connections', 100);
const COLD = 1000;

const range = (xs) => `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;

/** The dashboard open in a browser, as the server sees it: one live stream read, the overview's polls. */
function watch(url) {
  const u = new URL(url);
  let bytes = 0;
  const stream = http.get({ host: u.hostname, port: u.port, path: '/api/dashboard/stream', headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
    res.on('data', (c) => { bytes += c.length; });
  });
  stream.on('error', () => {});
  const get = (p, auth = true) => new Promise((resolve) => {
    http.get({ host: u.hostname, port: u.port, path: p, headers: auth ? { authorization: `Bearer ${TOKEN}` } : {} }, (res) => { res.resume(); res.on('end', resolve); }).on('error', resolve);
  });
  const poll = () => Promise.all(['/api/v1/admin/overview', '/api/v1/admin/clients', '/api/v1/admin/analytics?range=5m', '/api/v1/admin/analytics?range=15m'].map((p) => get(p)).concat(get('/health/ready', false)));
  poll();
  const timer = setInterval(poll, 3000);
  return () => {
    clearInterval(timer);
    stream.destroy();
    return bytes;
  };
}

async function serviceRuns() {
  const dir = tmpdir('tiergate-bench-dash-');
  const svc = await startService({ flags: { data: dir } }).ready;
  try {
    await admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: 'hot', algorithm: 'token_bucket', requestsPerSecond: 1000, burstSize: 1000 });
    for (let i = 0; i < COLD; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: `cold-${i + j}`, algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 60 })));
    }
    const load = () => checkLoad({ urls: [svc.url], connections: CONNECTIONS, durationMs: SECONDS * 1000, coldKeys: COLD });
    await load(); // warm-up
    const ratios = [];
    const cpuRatios = [];
    const rows = [];
    for (let r = 0; r < RUNS; r++) {
      const order = r % 2 === 0 ? ['without', 'with'] : ['with', 'without'];
      const got = {};
      for (const kind of order) {
        const stop = kind === 'with' ? watch(svc.url) : null;
        const cpu0 = cpuSeconds(svc.child.pid);
        got[kind] = await load();
        // The service's own CPU per answered check (the dashboard's streaming and polls included when
        // watched): unlike decisions/s, it does not move with the generator's share of the CPU.
        got[kind].cpuUs = cpu0 === null ? null : ((cpuSeconds(svc.child.pid) - cpu0) * 1e6) / got[kind].total;
        const streamed = stop ? stop() : 0;
        if (kind === 'with' && streamed === 0) throw new Error('the live stream sent nothing');
      }
      ratios.push(got.with.perSec / got.without.perSec);
      if (got.with.cpuUs !== null) cpuRatios.push(got.without.cpuUs / got.with.cpuUs);
      rows.push(`round ${r + 1}: without ${got.without.perSec.toFixed(0)}/s (p99 ${got.without.p99.toFixed(1)} ms), with ${got.with.perSec.toFixed(0)}/s (p99 ${got.with.p99.toFixed(1)} ms), errors ${got.without.errors}+${got.with.errors}; server CPU per check ${got.without.cpuUs?.toFixed(1)} / ${got.with.cpuUs?.toFixed(1)} µs`);
    }
    return { ratios, cpuRatios, rows };
  } finally {
    await svc.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function scrapeRuns() {
  const lag = new tiergate.LagMonitor({ stallMs: 500 }).start();
  const gate = tiergate.gatekeeper();
  const queue = tiergate.concurrencyGate({ maxConcurrent: 64 });
  const registry = new prom.Registry();
  tiergate.metrics({ gatekeeper: gate, queue, lag, registry });
  for (let i = 0; i < 50; i++) await registry.metrics();
  const ms = [];
  let bytes = 0;
  for (let i = 0; i < 500; i++) {
    const t0 = process.hrtime.bigint();
    bytes = (await registry.metrics()).length;
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  lag.stop();
  ms.sort((a, b) => a - b);
  return { median: ms[250], p99: ms[Math.floor(ms.length * 0.99)], bytes };
}

(async () => {
  const scrape = await scrapeRuns();
  console.log(`scrape: median ${scrape.median.toFixed(3)} ms, p99 ${scrape.p99.toFixed(3)} ms, ${scrape.bytes} bytes (500 scrapes)`);
  const { ratios, cpuRatios, rows } = await serviceRuns();
  for (const row of rows) console.log(row);
  console.log(`decisions/s with the dashboard open / without: median ${median(ratios).toFixed(3)} [${range(ratios)}] over ${RUNS} rounds of ${SECONDS} s, ${CONNECTIONS} connections`);
  if (cpuRatios.length) console.log(`checks per CPU second with the dashboard open / without (the service's own CPU): median ${median(cpuRatios).toFixed(3)} [${range(cpuRatios)}]`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});

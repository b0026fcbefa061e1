'use strict';
// Where the crawler incident's onset goes (bench:defense part 3, its first seconds), per 100 ms:
// what the server admitted and refused of the crawl and of the legitimate users, how late the
// requests reached the middleware, the loop's lag, what the fair-share backstop refused, and the
// server's CPU. One run of each configuration asked for, the same scenario as bench:defense.
//
//   node benchmark/crawl-onset.js [--configs after,fair] [--from -0.2] [--to 3] [--cap N] [--seconds 8] [--burst N] [--lag-ms N]
//
// --cap: the capacity C in req/s (default: measured as bench:defense does); --from/--to: the rows,
// seconds relative to the crawl's start; --burst N: every limited configuration also has a per-IP
// limit of N per second (exact sliding window); --lag-ms N: the fair-share configuration with
// fairShare: { lagMs: N }. The columns (each request by the 100 ms of its arrival at
// the server, 'request' event):
//   crawl in / ok      crawl requests (both crawlers) that reached the server / were served (2xx)
//   legit in / ok      the same for legitimate users
//   429 403 503        refusals of any class (limits, bans, the pool or the backstop)
//   fair               requests the backstop refused (its counter's rise in the 100 ms)
//   q ms               legitimate requests: the median and largest delay from the moment the
//                      generator sent them to their arrival at the server (queued in front of it)
//   gen                legitimate requests: how late the generator sent them at most (its own lag)
//   lag                the server loop's largest drift of a 10 ms timer in the 100 ms
//   cpu                the server's CPU, % of a core
const { DEFAULTS, configurations } = require('./lib/crawl-scenario');
const { startServer, calibrateWork, measureCapacity } = require('./lib/scenario');
const { DEFAULT_WORK_KIND } = require('./lib/work');
const { warmPool } = require('./lib/openloop');
const { crawlSchedule, CLASSES, LEGIT } = require('./lib/crawl-traffic');
const { playSchedule, classWindow } = require('./lib/crawl-load');
const { sampleCpu, cpuShare } = require('./lib/proc-cpu');
const http = require('node:http');
const os = require('node:os');

function parseArgs(argv) {
  const a = { configs: ['after', 'fair'], from: -0.2, to: 3, cap: 0, seconds: 8, burst: 0, lagMs: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[++i];
    if (k === '--configs') a.configs = v.split(',');
    else if (k === '--from') a.from = Number(v);
    else if (k === '--to') a.to = Number(v);
    else if (k === '--cap') a.cap = Number(v);
    else if (k === '--seconds') a.seconds = Number(v);
    else if (k === '--burst') a.burst = Number(v);
    else if (k === '--lag-ms') a.lagMs = Number(v);
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

const BUCKET_MS = 100;

async function runTraced(cfg, { cap, workIters, s }) {
  const srv = await startServer({ framework: 'express', protection: 'tiergate', options: cfg.options, workIters, workKind: DEFAULT_WORK_KIND, record: true, trace: true });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 512 });
  try {
    await warmPool(agent, { port: srv.port, path: '/hello', connections: 128 });
    const users = Math.max(50, Math.min(5000, Math.round((s.legit * cap) / s.userRate)));
    const events = crawlSchedule({ durationMs: s.seconds * 1000, crawlStartMs: s.crawlStartSec * 1000, users, userRate: s.userRate, crawlIps: s.crawlIps, crawlRate: s.crawl * cap, subnetRate: s.subnet * cap });
    await srv.windowStart();
    const cpu = sampleCpu(srv.pid, 50);
    const load = await playSchedule({ port: srv.port, events, classes: CLASSES, timeoutMs: s.timeoutMs, agent, stamp: true });
    const cpuSamples = cpu.stop();
    const server = await srv.windowEnd();
    const crawlAt = s.crawlStartSec * 1000;
    const legit = classWindow(events, LEGIT, load, crawlAt, s.seconds * 1000);
    return { load, server, cpuSamples, legit, timeouts: load.classes[LEGIT].statuses.timeout || 0 };
  } finally {
    agent.destroy();
    await srv.stop();
  }
}

function table(title, r, s, a) {
  const t0 = r.load.start + s.crawlStartSec * 1000;
  const n = Math.round(((a.to - a.from) * 1000) / BUCKET_MS);
  const rows = Array.from({ length: n }, () => ({ cIn: 0, cOk: 0, lIn: 0, lOk: 0, s429: 0, s403: 0, s503: 0, q: [], gen: 0, lag: 0, fair: 0 }));
  const at = (t) => Math.floor((t - t0 - a.from * 1000) / BUCKET_MS);
  const tr = r.server.trace;
  for (let i = 0; i < tr.arrived.length; i++) {
    const b = at(tr.arrived[i]);
    if (b < 0 || b >= n) continue;
    const row = rows[b];
    const ok = tr.status[i] >= 200 && tr.status[i] < 300;
    if (tr.cls[i] === 0) {
      row.lIn++;
      if (ok) row.lOk++;
      if (tr.sent[i]) row.q.push(tr.arrived[i] - tr.sent[i]);
      if (tr.sent[i]) row.gen = Math.max(row.gen, tr.sent[i] - tr.sched[i]);
    } else if (tr.cls[i] === 1 || tr.cls[i] === 2) {
      row.cIn++;
      if (ok) row.cOk++;
    }
    if (tr.status[i] === 429) row.s429++;
    else if (tr.status[i] === 403) row.s403++;
    else if (tr.status[i] === 503) row.s503++;
  }
  const lag = r.server.samples;
  for (let i = 0; i < lag.t.length; i++) {
    const b = at(lag.t[i]);
    if (b >= 0 && b < n) rows[b].lag = Math.max(rows[b].lag, lag.v[i]);
  }
  const st = tr.stats;
  for (let i = 1; i < st.length; i++) {
    const b = at(st[i].t);
    if (b >= 0 && b < n) rows[b].fair += st[i].fairRefused - st[i - 1].fairRefused;
  }
  console.log(`\n${title}: legitimate over the whole crawl ${r.legit.servedPct.toFixed(2)}% served, p99 ${r.legit.p99.toFixed(1)} ms, ${r.timeouts} timeouts`);
  console.log('   t s  crawl in   ok  legit in  ok    429   403   503  fair   q ms p50/max  gen   lag ms  cpu %');
  rows.forEach((row, b) => {
    const a0 = t0 + a.from * 1000 + b * BUCKET_MS;
    const cpu = r.cpuSamples.available ? 100 * cpuShare(r.cpuSamples.samples, a0, a0 + BUCKET_MS) : NaN;
    const q = row.q.sort((x, y) => x - y);
    const qs = q.length ? `${q[q.length >> 1].toFixed(0)}/${q[q.length - 1].toFixed(0)}` : '—';
    const ts = (a.from + (b * BUCKET_MS) / 1000).toFixed(1);
    console.log(`${ts.padStart(6)} ${String(row.cIn).padStart(9)} ${String(row.cOk).padStart(4)} ${String(row.lIn).padStart(9)} ${String(row.lOk).padStart(3)} ${String(row.s429).padStart(6)} ${String(row.s403).padStart(5)} ${String(row.s503).padStart(5)} ${String(row.fair).padStart(5)} ${qs.padStart(14)} ${row.gen.toFixed(0).padStart(4)} ${row.lag.toFixed(0).padStart(8)} ${cpu.toFixed(0).padStart(6)}`);
  });
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const s = { ...DEFAULTS, seconds: a.seconds };
  const workIters = calibrateWork(1.5, DEFAULT_WORK_KIND);
  const cap = a.cap || (await measureCapacity({ workIters, workKind: DEFAULT_WORK_KIND, concurrency: 8, durationMs: 2000, path: '/api/items/1' })).reqPerSec;
  console.log(`capacity C ${cap.toFixed(0)} req/s; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  const configs = configurations(cap, s);
  if (a.lagMs !== null) for (const c of configs) if (c.options.fairShare) c.options = { ...c.options, fairShare: { lagMs: a.lagMs } };
  if (a.burst > 0) {
    for (const c of configs) if (c.options.limits) c.options = { ...c.options, limits: [...c.options.limits, { name: 'per-ip-burst', by: 'ip', algorithm: 'sliding-window', limit: a.burst, windowMs: 1000 }] };
  }
  for (const id of a.configs) {
    const cfg = configs.find((c) => c.id === id);
    if (!cfg) throw new Error(`unknown configuration ${id} (${configs.map((c) => c.id).join(', ')})`);
    const r = await runTraced(cfg, { cap, workIters, s });
    table(`${cfg.title} (load average ${os.loadavg()[0].toFixed(1)})`, r, s, a);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

'use strict';
// npm run bench:queue — the gatekeeper's overload scenario (benchmark/overload.js: CPU-bound Express
// route, open-loop load at ~3x capacity, mix 10% critical / 30% standard / 60% background) with the
// concurrency gate in front, side by side in one run with no protection and with p-queue-style
// unbounded queueing. Also: the memory each queued request costs the gate.
//
//   node benchmark/queue.js [--quick] [--only none,pqueue,gate,auto,codel] [--framework express|http|...]
//                           [--load 3] [--seconds 5]
//                           [--work-ms 3] [--work pbkdf2|sha256-chain] [--repeat 1] [--limit 1] [--queue 100] [--timeout 500]
//
// Per configuration, one server process (benchmark/lib/scenario.js), phases in order: warm-up (0.5x,
// 1 s), unloaded (0.2x, 2 s: the unloaded latency), overload (3x: the table). With --repeat N every
// figure is the median of N runs. Writes benchmark/out/queue.{json,svg}.
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const os = require('node:os');
const { fork } = require('node:child_process');
const { startServer, calibrateWork, measureCapacity, runLoad } = require('./lib/scenario');
const { checkKind, DEFAULT_WORK_KIND } = require('./lib/work');
const { idealTierLatency, idealText } = require('./lib/ideal');
const { timelineSvg } = require('./lib/svg');
const { MIX, TIERS, WARM_CONNECTIONS } = require('./overload');
const { median } = require('./lib/stats');

const GUARDS = path.join(__dirname, 'lib', 'queue-guards.js');

function parseArgs(argv) {
  const a = { quick: false, only: null, framework: 'express', load: 3, seconds: 5, workMs: 3, work: DEFAULT_WORK_KIND, repeat: 1, limit: 1, queue: 100, timeout: 500 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v <= 0) throw new RangeError(`${k} needs a positive number`);
      return v;
    };
    if (k === '--quick') a.quick = true;
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--framework') {
      a.framework = argv[++i];
      if (!['express', 'express4', 'fastify', 'http'].includes(a.framework)) throw new RangeError('--framework: express | express4 | fastify | http');
    }
    else if (k === '--load') a.load = num();
    else if (k === '--seconds') a.seconds = num();
    else if (k === '--work-ms') a.workMs = num();
    else if (k === '--work') a.work = checkKind(argv[++i]);
    else if (k === '--repeat') a.repeat = Math.round(num());
    else if (k === '--limit') a.limit = Math.round(num());
    else if (k === '--queue') a.queue = Math.round(num());
    else if (k === '--timeout') a.timeout = num();
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

function configurations({ limit, queue, timeout }) {
  const gateBase = {
    maxQueue: queue,
    queueTimeoutMs: timeout,
    timeoutStatus: 503,
    tierHeader: 'x-user-tier',
    trustTierHeader: true, // the benchmark plays the authenticating gateway
  };
  return [
    { id: 'none', title: 'no protection', protection: 'none' },
    {
      id: 'pqueue',
      title: `p-queue (concurrency ${limit}, priority by tier, unbounded)`,
      protection: { module: GUARDS, export: 'pQueue', options: { concurrency: limit } },
      queueing: true,
    },
    {
      id: 'gate',
      title: `concurrencyGate (max ${limit}, queue ${queue}, ${timeout} ms)`,
      protection: { module: GUARDS, export: 'concurrencyGate', options: { ...gateBase, maxConcurrent: limit } },
      queueing: true,
      target: true,
      timeoutMs: timeout,
    },
    {
      id: 'auto',
      title: `concurrencyGate ('auto' 1..32, queue ${queue}, ${timeout} ms)`,
      protection: {
        module: GUARDS,
        export: 'concurrencyGate',
        options: { ...gateBase, maxConcurrent: 'auto', limit: { min: 1, max: 32, initial: 4 } },
      },
      queueing: true,
      target: true,
      timeoutMs: timeout,
    },
    {
      id: 'codel',
      title: `concurrencyGate (max ${limit}, queue ${queue}, ${timeout} ms, CoDel 5/100 ms)`,
      protection: { module: GUARDS, export: 'concurrencyGate', options: { ...gateBase, maxConcurrent: limit, codel: true } },
      queueing: true,
      target: true,
      timeoutMs: timeout,
    },
  ];
}

const f1 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(1));
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);

function rejectionText(rej) {
  const parts = Object.entries(rej).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}:${v}`);
  return parts.length ? parts.join(' ') : '-';
}

/** One configuration: warm-up, unloaded, overload; the figures the table needs. */
async function runConfig(cfg, { framework, cap, workIters, workKind, load, seconds, quick }) {
  const srv = await startServer({ framework, protection: cfg.protection, options: cfg.protection.options || {}, workIters, workKind, record: true });
  // The generator plays a reverse proxy with a warm pool of keep-alive connections, as in
  // bench:overload: without it every phase opened its connections under load, and SYNs the busy
  // server's accept queue dropped came back after the kernel's 1 s retransmit — latency no gate sees.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4096, maxFreeSockets: 4096 });
  const warm = { connections: WARM_CONNECTIONS, path: '/hello', headers: { 'x-user-tier': 'critical' } };
  const base = { path: '/work', mix: MIX, timeoutMs: 2000, agent, warm };
  try {
    await runLoad(srv, { ...base, rate: 0.5 * cap, durationMs: quick ? 500 : 1000 });
    let unloaded = null;
    if (!quick) unloaded = await runLoad(srv, { ...base, rate: 0.2 * cap, durationMs: 2000 });
    const over = await runLoad(srv, { ...base, rate: load * cap, durationMs: seconds * 1000 });
    const stats = await srv.guardStats().catch(() => null);
    return { unloaded, over, stats };
  } finally {
    agent.destroy();
    await srv.stop();
  }
}

/** Reduces one run to the numbers the table prints. */
function figures(cfg, run) {
  const out = { tiers: {}, goodput: run.over.load.goodputPerSec, lagP99: run.over.server.lag.p99, genLagP99: run.over.load.genLag.p99, stats: run.stats };
  for (const tier of TIERS) {
    const t = run.over.load.tiers[tier];
    const st = run.stats && run.stats.tiers && run.stats.tiers[tier];
    out.tiers[tier] = {
      sent: t.sent,
      successPct: t.successPct,
      p50: t.p50,
      p99: t.p99,
      steadyP99: t.steady.p99,
      waitP99: st ? st.waitMs.p99 : NaN,
      waitMax: st ? st.waitMs.max : NaN,
      timedOutWaitMax: st && st.timeoutWaitMaxMs != null ? st.timeoutWaitMaxMs : NaN,
      rejections: t.rejections,
      unloadedP99: run.unloaded ? run.unloaded.load.tiers[tier].p99 : NaN,
    };
  }
  out.limit = run.stats && run.stats.limit != null ? run.stats.limit : null;
  out.timeline = run.over.load.timeline;
  return out;
}

/** Median over repeats, cell by cell (rejection counts and the timeline from the median-goodput run). */
function combine(runs) {
  const byGoodput = [...runs].sort((a, b) => a.goodput - b.goodput);
  const mid = byGoodput[(byGoodput.length - 1) >> 1];
  const out = { tiers: {}, goodput: median(runs.map((r) => r.goodput)), lagP99: median(runs.map((r) => r.lagP99)), genLagP99: median(runs.map((r) => r.genLagP99)), limit: mid.limit, stats: mid.stats, timeline: mid.timeline, repeats: runs.length };
  for (const tier of TIERS) {
    const cell = {};
    for (const k of ['sent', 'successPct', 'p50', 'p99', 'steadyP99', 'waitP99', 'waitMax', 'timedOutWaitMax', 'unloadedP99']) cell[k] = median(runs.map((r) => r.tiers[tier][k]));
    cell.waitMax = Math.max(...runs.map((r) => r.tiers[tier].waitMax).filter((x) => !Number.isNaN(x)), -Infinity);
    cell.timedOutWaitMax = Math.max(...runs.map((r) => r.tiers[tier].timedOutWaitMax).filter((x) => !Number.isNaN(x)), -Infinity);
    cell.rejections = mid.tiers[tier].rejections;
    out.tiers[tier] = cell;
  }
  return out;
}

function printTable(rows, { cap, load, framework, out = console.log }) {
  out(`\nOverload at ${load}x capacity (${Math.round(load * cap)} req/s offered; capacity ${Math.round(cap)} req/s), mix 10/30/60, ${framework}:`);
  out(`${pad('configuration', 62)} ${pad('tier', 11)} ${lpad('success', 8)} ${lpad('p50 ms', 8)} ${lpad('p99 ms', 8)} ${lpad('wait p99', 9)} ${lpad('wait max', 9)}  rejections`);
  for (const { cfg, r } of rows) {
    TIERS.forEach((tier, i) => {
      const t = r.tiers[tier];
      out(`${pad(i === 0 ? cfg.title : '', 62)} ${pad(tier, 11)} ${lpad(f1(t.successPct) + '%', 8)} ${lpad(f1(t.p50), 8)} ${lpad(f1(t.p99), 8)} ${lpad(cfg.queueing ? f1(t.waitP99) : 'n/a', 9)} ${lpad(cfg.queueing ? f1(t.waitMax) : 'n/a', 9)}  ${rejectionText(t.rejections)}`);
    });
    const lim = r.limit != null ? `; limit at the end ${r.limit}` : '';
    out(`${pad('', 62)} goodput ${Math.round(r.goodput)} req/s = ${f1((100 * r.goodput) / cap)}% of capacity; server lag p99 ${f1(r.lagP99)} ms; generator lag p99 ${f1(r.genLagP99)} ms${lim}`);
  }
}

function evaluateTargets(cfg, r, { peak, none, ideal }) {
  const targets = [];
  const crit = r.tiers.critical;
  if (!Number.isNaN(crit.unloadedP99)) {
    const ratio = crit.p99 / crit.unloadedP99;
    targets.push({ name: 'critical p99 <= 2x unloaded p99', value: `${f1(crit.p99)} ms vs unloaded ${f1(crit.unloadedP99)} ms = ${ratio.toFixed(2)}x (requests due after the first 1 s: p99 ${f1(crit.steadyP99)} ms = ${(crit.steadyP99 / crit.unloadedP99).toFixed(2)}x); ${idealText(ideal)}`, pass: ratio <= 2 });
  }
  const admittedMax = Math.max(...TIERS.map((t) => r.tiers[t].waitMax));
  const expiredMax = Math.max(0, ...TIERS.map((t) => r.tiers[t].timedOutWaitMax).filter(Number.isFinite));
  targets.push({
    name: `no request waits longer than ${cfg.timeoutMs} ms`,
    value: `longest wait of an admitted request ${f1(admittedMax)} ms; the timeout answers went out after at most ${f1(expiredMax)} ms (timer lateness on a busy loop; server lag p99 ${f1(r.lagP99)} ms)`,
    pass: admittedMax <= cfg.timeoutMs,
  });
  targets.push({
    name: 'throughput >= 95% of the unprotected peak',
    value: `${Math.round(r.goodput)} req/s = ${f1((100 * r.goodput) / peak)}% of the best capacity probe (${Math.round(peak)}); unprotected under the same overload: ${none ? `${Math.round(none.goodput)} req/s (gate = ${f1((100 * r.goodput) / none.goodput)}% of it)` : '—'}`,
    pass: r.goodput >= 0.95 * peak,
  });
  targets.push({ name: 'critical success', value: `${f1(crit.successPct)}%`, pass: crit.successPct >= 99.5 });
  return targets;
}

// ---- memory per queued request (run in a child with --expose-gc) ----
async function memoryChild() {
  const { EventEmitter } = require('node:events');
  const { createConcurrencyGate } = require('../lib/queue');
  const results = [];
  for (const n of [10_000, 100_000]) {
    const gate = createConcurrencyGate({ maxConcurrent: 1, maxQueue: n, queueTimeoutMs: 60_000, trustTierHeader: true });
    const tiers = ['critical', 'standard', 'background'];
    // Requests and responses exist whether or not a gate queues them: build them first, measure after.
    const reqs = [];
    const ress = [];
    for (let i = 0; i <= n; i++) {
      reqs.push({ url: '/', method: 'GET', headers: { 'x-user-tier': tiers[i % 3] } });
      const res = new EventEmitter();
      res.destroyed = false;
      res.writableEnded = false;
      res.writableFinished = false;
      ress.push(res);
    }
    gate.admit(reqs[0], ress[0]); // takes the only slot: everything after queues
    global.gc();
    global.gc();
    const before = process.memoryUsage().heapUsed;
    const pending = [];
    for (let i = 1; i <= n; i++) pending.push(gate.admit(reqs[i], ress[i]));
    global.gc();
    global.gc();
    const after = process.memoryUsage().heapUsed;
    // `pending` holds the promises the adapters would hold; counted (they are part of the cost).
    const perRequest = (after - before) / n;
    if (gate.queued !== n) throw new Error(`expected ${n} queued, got ${gate.queued}`);
    gate.close();
    results.push({ queued: n, bytesPerRequest: Math.round(perRequest), pendingKept: pending.length });
  }
  // CPU cost of the gate's immediate path: admit -> 'finish' -> the slot back at the end of the turn.
  const cost = [];
  for (let rep = 0; rep < 5; rep++) {
    const n = 100_000;
    const gate = createConcurrencyGate({ maxConcurrent: n + 1, maxQueue: 0 });
    const req = { url: '/', method: 'GET', headers: { 'x-user-tier': 'standard' } };
    const ress = [];
    for (let i = 0; i < n; i++) {
      const res = new EventEmitter();
      res.destroyed = false;
      res.writableEnded = false;
      res.writableFinished = true;
      ress.push(res);
    }
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      gate.admit(req, ress[i]);
      ress[i].emit('finish');
    }
    await new Promise((resolve) => setImmediate(resolve)); // after the gate's end-of-turn release
    if (gate.inFlight !== 0) throw new Error('slots not released');
    cost.push(Number(process.hrtime.bigint() - t0) / n);
  }
  cost.sort((a, b) => a - b);
  setImmediate(() => process.send({ memory: results, admitReleaseNs: cost[2] }, () => process.disconnect()));
}

function measureMemory() {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--memory-child'], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('message', resolve);
    child.once('exit', (code) => code !== 0 && reject(new Error(`memory child exited ${code}`)));
  });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  const mem = await measureMemory();
  // Calibration under a neighbour's load reads slow and picks too little work: keep the largest of three.
  const workIters = Math.max(calibrateWork(args.workMs, args.work), calibrateWork(args.workMs, args.work), calibrateWork(args.workMs, args.work));
  // The machine is shared: probe the unprotected server's capacity three times; the load is set from
  // the median, and throughput is judged against the best probe (the unprotected peak).
  const probes = [];
  for (let i = 0; i < 3; i++) probes.push(await measureCapacity({ framework: args.framework, workIters, workKind: args.work, concurrency: 8, durationMs: 1500 }));
  probes.sort((a, b) => a.reqPerSec - b.reqPerSec);
  const capRun = probes[1];
  const cap = capRun.reqPerSec;
  const peak = probes[2].reqPerSec;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`work: ${args.work} x ${workIters} per /work request (~${args.workMs} ms); capacity (closed loop, 8 clients, ${args.framework}, no protection; 3 probes): median ${Math.round(cap)} req/s (probes ${probes.map((p) => Math.round(p.reqPerSec)).join(', ')}), p50 ${f1(capRun.p50)} ms`);
  console.log('\nMemory the gate holds per queued request (heap delta, req/res objects excluded, the adapter\'s Promise included):');
  for (const m of mem.memory) console.log(`  ${lpad(m.queued, 7)} queued: ${m.bytesPerRequest} bytes per request`);
  console.log(`CPU of the admit path (admit, 'finish', the end-of-turn release; no HTTP), median of 5 x 100,000: ${Math.round(mem.admitReleaseNs)} ns per request`);
  let configs = configurations(args);
  if (args.only) configs = configs.filter((c) => args.only.includes(c.id));
  const runs = new Map(configs.map((c) => [c.id, []]));
  for (let rep = 0; rep < args.repeat; rep++) {
    // Rotate the order each repeat: on a shared machine, a neighbour's load should not always land
    // on the same configuration.
    const order = configs.map((_, i) => configs[(i + rep) % configs.length]);
    for (const cfg of order) {
      try {
        const run = await runConfig(cfg, { framework: args.framework, cap, workIters, workKind: args.work, load: args.load, seconds: args.seconds, quick: args.quick });
        runs.get(cfg.id).push(figures(cfg, run));
        console.log(`  run ${rep + 1}/${args.repeat} ${cfg.id}: done`);
      } catch (err) {
        console.log(`  ${cfg.title}: could not run (${err.message.split('\n')[0]})`);
      }
    }
  }
  const rows = configs.filter((c) => runs.get(c.id).length).map((cfg) => ({ cfg, r: combine(runs.get(cfg.id)) }));
  if (args.repeat > 1) console.log(`\nEvery figure: median of ${args.repeat} runs (wait max: the maximum).`);
  printTable(rows, { cap, load: args.load, framework: args.framework });
  if (!args.quick) {
    console.log('\nUnloaded (0.2x) p99 latency per tier, ms:');
    for (const { cfg, r } of rows) console.log(`  ${pad(cfg.title, 62)} ${TIERS.map((t) => `${t} ${f1(r.tiers[t].unloadedP99)}`).join('  ')}`);
  }
  const none = rows.find((x) => x.cfg.id === 'none');
  const ideal = idealTierLatency({ rate: args.load * cap, durationMs: args.seconds * 1000, serviceMs: 1000 / cap, mix: MIX });
  const summary = [];
  for (const { cfg, r } of rows) {
    if (!cfg.target) continue;
    const targets = evaluateTargets(cfg, r, { peak, none: none && none.r, ideal });
    console.log(`\nTargets for ${cfg.title}:`);
    for (const t of targets) console.log(`  ${t.pass ? 'PASS' : 'MISS'}  ${pad(t.name, 46)} ${t.value}`);
    summary.push({ config: cfg.id, targets });
  }
  const outDir = path.join(__dirname, 'out');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(
    path.join(outDir, 'queue.svg'),
    timelineSvg(
      rows.map(({ cfg, r }) => ({ title: cfg.title, timeline: r.timeline, tiers: TIERS, note: TIERS.map((t) => `${t} ${f1(r.tiers[t].successPct)}%`).join('  ·  ') })),
      { title: `Goodput per tier and server lag at ${args.load}x capacity (${Math.round(args.load * cap)} req/s offered, 10/30/60 mix)` },
    ),
  );
  fs.writeFileSync(
    path.join(outDir, 'queue.json'),
    JSON.stringify({ date: new Date().toISOString(), capacity: cap, peak, probes: probes.map((p) => p.reqPerSec), workIters, args, memory: mem.memory, admitReleaseNs: mem.admitReleaseNs, results: rows.map(({ cfg, r }) => ({ config: cfg.id, title: cfg.title, ...r, timeline: undefined })), summary }, null, 1),
  );
  console.log(`\nwrote benchmark/out/queue.svg and queue.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

if (process.argv.includes('--memory-child')) {
  memoryChild();
} else if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

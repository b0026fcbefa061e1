'use strict';
// npm run bench:overload — the headline. An open-loop generator (constant arrival rate; latency from
// the scheduled send time) drives a server with a CPU-bound route at ~3x its measured capacity, mix
// 10% critical / 30% standard / 60% background, against: no protection; a global lag threshold that
// sheds every tier alike (toobusy-js on Express, @fastify/under-pressure on Fastify); tiergate.
// The server runs in a child process (scenario.js), the generator here: one core each.
//
//   node benchmark/overload.js [--quick] [--only name,name] [--load 3] [--seconds 6] [--work-ms 3]
//
// Per configuration, one server process, phases in order: warm-up (0.5x, 1 s), unloaded (0.2x, 2 s:
// the unloaded latency), 0.8x (3 s: must not shed), overload (3x, 6 s: the table). Writes
// benchmark/out/overload.{svg,json}.
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { startServer, calibrateWork, measureCapacity, runLoad } = require('./lib/scenario');
const { timelineSvg } = require('./lib/svg');

const MIX = [
  { tier: 'critical', weight: 0.1 },
  { tier: 'standard', weight: 0.3 },
  { tier: 'background', weight: 0.6 },
];
const TIERS = MIX.map((m) => m.tier);
// One lag threshold for every lag-based protection (ms). toobusy-js and under-pressure shed every
// tier once their lag estimate crosses it; tiergate starts throttling the lowest tier there.
const LAG_MS = 20;

/** tiergate's options for a server whose measured capacity is `cap` req/s. */
function tiergateOptions(cap) {
  const c = Math.round(cap);
  return {
    // Budgets well above what each tier offers at 3x, so every rejection below comes from the
    // lag-driven shed controller, not from a tier running out of tokens.
    tiers: [
      { name: 'critical', protected: true, capacity: 4 * c, refillPerSec: 4 * c },
      { name: 'standard', capacity: c, refillPerSec: 2 * c },
      { name: 'background', capacity: c, refillPerSec: 2 * c },
    ],
    tierHeader: 'x-user-tier',
    trustTierHeader: true, // the benchmark plays the authenticating gateway
    shed: { targetLagMs: LAG_MS, criticalLagMs: 5 * LAG_MS, holdMs: 1000 },
  };
}

function configurations(cap) {
  return [
    { id: 'none', title: 'no protection (Express)', framework: 'express', protection: 'none' },
    {
      id: 'toobusy',
      title: `toobusy-js (Express, maxLag ${LAG_MS} ms)`,
      framework: 'express',
      protection: 'toobusy',
      options: { maxLag: LAG_MS, interval: 20 },
      thresholdMs: LAG_MS,
    },
    {
      id: 'under-pressure',
      title: `@fastify/under-pressure (Fastify, maxEventLoopDelay ${LAG_MS} ms)`,
      framework: 'fastify',
      protection: 'under-pressure',
      options: { maxEventLoopDelay: LAG_MS, sampleInterval: 20 },
      thresholdMs: LAG_MS,
    },
    {
      id: 'tiergate',
      title: `tiergate (Express, targetLagMs ${LAG_MS} ms)`,
      framework: 'express',
      protection: 'tiergate',
      options: tiergateOptions(cap),
      thresholdMs: LAG_MS,
      target: true,
    },
  ];
}

function parseArgs(argv) {
  const a = { quick: false, only: null, load: 3, seconds: 6, workMs: 3 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--quick') a.quick = true;
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--load') a.load = Number(argv[++i]);
    else if (k === '--seconds') a.seconds = Number(argv[++i]);
    else if (k === '--work-ms') a.workMs = Number(argv[++i]);
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}

const f1 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(1));
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);

function rejectionText(rej) {
  const parts = Object.entries(rej).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}:${v}`);
  return parts.length ? parts.join(' ') : '-';
}

/** Runs one configuration through its phases. */
async function runConfig(cfg, { cap, workIters, load, seconds, quick, log }) {
  const srv = await startServer({ framework: cfg.framework, protection: cfg.protection, options: cfg.options || {}, workIters, record: true });
  const base = { path: '/work', mix: MIX, timeoutMs: 2000 };
  try {
    await runLoad(srv, { ...base, rate: 0.5 * cap, durationMs: quick ? 500 : 1000 }); // warm-up (JIT, baseline)
    let unloaded = null;
    let light = null;
    if (!quick) {
      unloaded = await runLoad(srv, { ...base, rate: 0.2 * cap, durationMs: 2000 });
      light = await runLoad(srv, { ...base, rate: 0.8 * cap, durationMs: 3000 });
    }
    const over = await runLoad(srv, { ...base, rate: load * cap, durationMs: seconds * 1000 });
    const stats = await srv.guardStats().catch(() => null);
    log?.(`  ${cfg.id}: done`);
    return { cfg, unloaded, light, over, stats };
  } finally {
    await srv.stop();
  }
}

function printTable(results, { cap, load, out = console.log }) {
  out(`\nOverload at ${load}x capacity (${Math.round(load * cap)} req/s offered; capacity ${Math.round(cap)} req/s), mix 10/30/60:`);
  out(`${pad('configuration', 58)} ${pad('tier', 11)} ${lpad('sent', 6)} ${lpad('success', 8)} ${lpad('p50 ms', 8)} ${lpad('p99 ms', 8)}  rejections`);
  for (const r of results) {
    const { tiers } = r.over.load;
    TIERS.forEach((tier, i) => {
      const t = tiers[tier];
      out(
        `${pad(i === 0 ? r.cfg.title : '', 58)} ${pad(tier, 11)} ${lpad(t.sent, 6)} ${lpad(f1(t.successPct) + '%', 8)} ${lpad(f1(t.p50), 8)} ${lpad(f1(t.p99), 8)}  ${rejectionText(t.rejections)}`,
      );
    });
    const g = r.over.load;
    out(`${pad('', 58)} ${pad('server lag p99 ' + f1(r.over.server.lag.p99) + ' ms, max ' + f1(r.over.server.lag.max) + ' ms; goodput ' + Math.round(g.goodputPerSec) + ' req/s; generator lag p99 ' + f1(g.genLag.p99) + ' ms', 80)}`);
  }
}

/** The tiergate targets of the issue, each PASS or MISS with the figure. */
function evaluateTargets(r) {
  const targets = [];
  const crit = r.over.load.tiers.critical;
  targets.push({ name: 'critical success >= 99.5%', value: `${f1(crit.successPct)}%`, pass: crit.successPct >= 99.5 });
  if (r.unloaded) {
    const u = r.unloaded.load.tiers.critical.p99;
    const ratio = crit.p99 / u;
    targets.push({
      name: 'critical p99 <= 2x unloaded p99',
      value: `${f1(crit.p99)} ms vs unloaded ${f1(u)} ms = ${ratio.toFixed(2)}x`,
      pass: ratio <= 2,
    });
  }
  let rejTotal = 0;
  let rejSheddable = 0;
  for (const tier of TIERS) {
    const t = r.over.load.tiers[tier];
    rejTotal += t.rejected;
    if (tier !== 'critical') rejSheddable += t.rejected;
  }
  const share = rejTotal ? (100 * rejSheddable) / rejTotal : 100;
  targets.push({ name: 'sheddable tiers take >= 95% of rejections', value: `${f1(share)}% of ${rejTotal}`, pass: share >= 95 });
  const o = r.over.onset(r.cfg.thresholdMs);
  targets.push({
    name: `shedding begins <= 100 ms after lag > ${r.cfg.thresholdMs} ms`,
    value:
      o.onsetMs == null
        ? `lag crossed at ${o.crossedAtMs == null ? 'never' : f1(o.crossedAtMs) + ' ms'}, first shed at ${o.firstRejectAtMs == null ? 'never' : f1(o.firstRejectAtMs) + ' ms'}`
        : `${o.onsetMs >= 0 ? '+' : ''}${f1(o.onsetMs)} ms (lag crossed at ${f1(o.crossedAtMs)} ms, first shed at ${f1(o.firstRejectAtMs)} ms into the load)`,
    pass: o.onsetMs != null && o.onsetMs <= 100,
  });
  if (r.light) {
    const sent = r.light.load.sent;
    const shed = r.light.server.rejected;
    const failed = sent - r.light.load.ok;
    targets.push({
      name: 'no shedding at 0.8x capacity',
      value: `${shed} shed of ${sent} (client-side failures ${failed}, lag p99 ${f1(r.light.server.lag.p99)} ms)`,
      pass: shed === 0,
    });
  }
  return targets;
}

function printTargets(cfg, targets, out = console.log) {
  out(`\nTargets for ${cfg.title}:`);
  for (const t of targets) out(`  ${t.pass ? 'PASS' : 'MISS'}  ${pad(t.name, 46)} ${t.value}`);
}

function writeSvg(results, file, { cap, load }) {
  const svg = timelineSvg(
    results.map((r) => ({
      title: r.cfg.title,
      timeline: r.over.load.timeline,
      tiers: TIERS,
      thresholdMs: r.cfg.thresholdMs,
      note: TIERS.map((t) => `${t} ${f1(r.over.load.tiers[t].successPct)}%`).join('  ·  '),
    })),
    { title: `Goodput per tier and server lag at ${load}x capacity (${Math.round(load * cap)} req/s offered, 10/30/60 mix)` },
  );
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, svg);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  const workIters = calibrateWork(args.workMs);
  const capRun = await measureCapacity({ workIters, concurrency: 8, durationMs: 2000 });
  const cap = capRun.reqPerSec;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`work: ${workIters} sha256 rounds per /work request (~${args.workMs} ms calibrated); capacity (closed loop, 8 clients, Express, no protection): ${Math.round(cap)} req/s, p50 ${f1(capRun.p50)} ms`);
  let configs = configurations(cap);
  if (args.only) configs = configs.filter((c) => args.only.includes(c.id));
  const results = [];
  for (const cfg of configs) {
    try {
      results.push(await runConfig(cfg, { cap, workIters, load: args.load, seconds: args.seconds, quick: args.quick }));
    } catch (err) {
      console.log(`  ${cfg.title}: could not run (${err.message.split('\n')[0]})`);
    }
  }
  printTable(results, { cap, load: args.load });
  if (!args.quick) {
    console.log('\nUnloaded (0.2x) critical latency, p50 / p99 ms:');
    for (const r of results) {
      const c = r.unloaded.load.tiers.critical;
      console.log(`  ${pad(r.cfg.title, 58)} ${f1(c.p50)} / ${f1(c.p99)}`);
    }
  }
  const summary = [];
  for (const r of results) {
    if (!r.cfg.target) continue;
    const targets = evaluateTargets(r);
    printTargets(r.cfg, targets);
    if (r.stats) console.log(`  gate.stats() after the run: ${JSON.stringify(r.stats)}`);
    summary.push({ config: r.cfg.id, targets });
  }
  const outDir = path.join(__dirname, 'out');
  writeSvg(results, path.join(outDir, 'overload.svg'), { cap, load: args.load });
  fs.writeFileSync(
    path.join(outDir, 'overload.json'),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        capacity: cap,
        workIters,
        load: args.load,
        results: results.map((r) => ({
          config: r.cfg.id,
          title: r.cfg.title,
          overload: { tiers: r.over.load.tiers, serverLag: r.over.server.lag, goodputPerSec: r.over.load.goodputPerSec, genLag: r.over.load.genLag },
          unloaded: r.unloaded && { tiers: r.unloaded.load.tiers, serverLag: r.unloaded.server.lag },
          light: r.light && { tiers: r.light.load.tiers, serverLag: r.light.server.lag, shed: r.light.server.rejected },
          stats: r.stats,
        })),
        summary,
      },
      null,
      1,
    ),
  );
  console.log(`\nwrote benchmark/out/overload.svg and overload.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

module.exports = { MIX, TIERS, LAG_MS, tiergateOptions, configurations, runConfig, printTable, evaluateTargets, printTargets, writeSvg };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

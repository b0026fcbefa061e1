'use strict';
// npm run bench:overload — the headline. An open-loop generator (constant arrival rate; see
// lib/openloop.js) drives a server with a CPU-bound route at ~3x its measured capacity, mix
// 10% critical / 30% standard / 60% background, against: no protection; a global lag threshold that
// sheds every tier alike (toobusy-js on Express, @fastify/under-pressure on Fastify); tiergate.
// The server runs in a child process (scenario.js), the generator here: one core each.
//
//   node benchmark/overload.js [--runs 5] [--quick] [--only id,id] [--load 3] [--seconds 6] [--work-ms 3] [--work pbkdf2|sha256-chain] [--shed '{json}'] [--alt DIR] [--cpu-prof DIR]
//   (ids: none, toobusy, under-pressure, tiergate-defaults, tiergate-fastify, tiergate-http,
//    tiergate-no-limit [extra: concurrency: false], tiergate [extra: spike filter off],
//    tiergate-plain [extra], tiergate-express-outside [extra: the Express app inside gatekeeper.http,
//    not behind app.use]; --shed overrides tiergate's shed options;
//    --alt DIR adds each tiergate configuration again as `<id>@alt`, its server loading tiergate from
//    the package directory DIR (another checkout with its own build): an A/B interleaved run by run;
//    repeatable, the later ones as `<id>@<DIR's name>` (a second --alt naming this checkout through
//    another path is an A/A control of the order);
//    --cpu-prof DIR writes a CPU profile of each server over its overload phase to
//    DIR/<id>-run<n>.cpuprofile, for benchmark/profile-split.js)
//
// Per configuration and run, one server process, phases in order: warm-up (0.5x, 1 s), unloaded (0.25x,
// 3 s: the unloaded latency), 0.8x (3 s: must not shed), a pause until the gate is calm, overload (3x,
// 6 s: the table) and, without a gap, 0.8x again (3 s: shed only while it recovers, <= 1 s).
// The tiergate configurations run `--runs` times (runs interleaved: run 1 of each, then run 2, ...),
// the others once; each run's figures are printed, then the median [min-max] over the runs.
// Writes benchmark/out/overload.{svg,json}: per run, goodput per tier with the server's lag and,
// under it, the controller (pressure, refill scales, capacity budget, turn and capacity sheds).
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const os = require('node:os');
const { startServer, calibrateWork, measureCapacity, runLoad, controllerPerBucket, workMeanMs, settle } = require('./lib/scenario');
const { controllerSvg, stackSvgs } = require('./lib/controller-svg');
const { checkKind, DEFAULT_WORK_KIND } = require('./lib/work');
const { idealTierLatency, idealText } = require('./lib/ideal');
const { timelineSvg } = require('./lib/svg');
const { openLoop, warmPool, nowAbs } = require('./lib/openloop');
const { waitForQuiet } = require('./lib/quiet');

const MIX = [
  { tier: 'critical', weight: 0.1 },
  { tier: 'standard', weight: 0.3 },
  { tier: 'background', weight: 0.6 },
];
const TIERS = MIX.map((m) => m.tier);
// One lag threshold for every lag-based protection (ms). toobusy-js and under-pressure shed every
// tier once their lag estimate crosses it; tiergate starts throttling the lowest tier there.
const LAG_MS = 20;
const CRITICAL_LAG_MS = 60;
const WARM_CONNECTIONS = 500;
const AFTER_MS = 3000; // the 0.8x phase right after the overload
const RECOVERY_MS = 1000; // of it, the time the gate may take to stop shedding

/**
 * tiergate's options for a server whose measured capacity is `cap` req/s; `shed` as given (the
 * gatekeeper's defaults for what it leaves out).
 */
function tiergateOptions(cap, shed) {
  const c = Math.round(cap);
  return {
    // Budgets well above what each tier offers at 3x, so every rejection below comes from the
    // lag-driven shed controller, not from a tier running out of tokens.
    tiers: [
      { name: 'critical', protected: true, limit: 4 * c, windowMs: 1000 },
      { name: 'standard', limit: 2 * c, windowMs: 1000, burst: Math.max(10, Math.ceil(0.05 * c)) },
      { name: 'background', limit: 2 * c, windowMs: 1000, burst: Math.max(10, Math.ceil(0.05 * c)) },
    ],
    tierHeader: 'x-user-tier',
    trustTierHeader: true, // the benchmark plays the authenticating gateway
    shed: { ...shed },
  };
}

// The gatekeeper's shed defaults are lag 20..60 ms on the sampler's EWMA (50 ms) with the spike
// filter (confirmMs 30). The second tiergate configuration is the same with the filter off
// (confirmMs 0): the settings the benchmark tuned before the filter existed, run side by side.
const NO_FILTER_SHED = { targetLagMs: LAG_MS, criticalLagMs: CRITICAL_LAG_MS, lagSignal: 'ewma', ewmaMs: 50, confirmMs: 0 };

/**
 * `options` as the checkout at `dir` spells them: one from before the one limit vocabulary (no
 * lib/schema/limit.js, first lib/limit-options.js) takes tiers' budgets as { capacity, refillPerSec }.
 */
function inVocabularyOf(dir, options) {
  const vocabulary = ['schema/limit.js', 'limit-options.js'].some((f) => fs.existsSync(path.join(dir, 'lib', f)));
  if (vocabulary || !options.tiers) return options;
  const tiers = options.tiers.map(({ limit, windowMs, burst, ...t }) => ({ ...t, capacity: burst ?? limit, refillPerSec: (limit * 1000) / windowMs }));
  return { ...options, tiers };
}

/** Every configuration; `extra` ones run only when named with --only. */
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
      id: 'tiergate-defaults',
      title: `tiergate (Express, default shed: lag ${LAG_MS}..${CRITICAL_LAG_MS} ms)`,
      framework: 'express',
      protection: 'tiergate',
      options: tiergateOptions(cap, {}),
      thresholdMs: LAG_MS,
      target: true,
    },
    {
      id: 'tiergate-fastify',
      title: `tiergate (Fastify, default shed)`,
      framework: 'fastify',
      protection: 'tiergate',
      options: tiergateOptions(cap, {}),
      thresholdMs: LAG_MS,
      target: true,
    },
    {
      id: 'tiergate-http',
      title: `tiergate (node:http, default shed)`,
      framework: 'http',
      protection: 'tiergate',
      options: tiergateOptions(cap, {}),
      thresholdMs: LAG_MS,
      target: true,
    },
    {
      id: 'tiergate-no-limit',
      title: `tiergate (Express, default shed, no learned concurrency limit)`,
      framework: 'express',
      protection: 'tiergate',
      options: { ...tiergateOptions(cap, {}), concurrency: false },
      thresholdMs: LAG_MS,
      target: true,
      extra: true,
      noAlt: true, // the code before the limit has no such option
    },
    {
      id: 'tiergate',
      title: `tiergate (Express, lag ${LAG_MS}..${CRITICAL_LAG_MS} ms, spike filter off)`,
      framework: 'express',
      protection: 'tiergate',
      options: tiergateOptions(cap, NO_FILTER_SHED),
      thresholdMs: LAG_MS,
      target: true,
      extra: true,
    },
    {
      id: 'tiergate-express-outside',
      title: 'tiergate (Express inside gatekeeper.http, default shed)',
      framework: 'express',
      protection: 'tiergate',
      options: tiergateOptions(cap, {}),
      outsideApp: true,
      thresholdMs: LAG_MS,
      target: true,
      extra: true,
    },
    {
      id: 'tiergate-plain',
      title: 'tiergate (Express, everything default: no tier budgets)',
      framework: 'express',
      protection: 'tiergate',
      options: { tierHeader: 'x-user-tier', trustTierHeader: true },
      thresholdMs: LAG_MS,
      target: true,
      extra: true,
    },
    ...['express', 'fastify', 'http'].map((framework) => ({
      id: `tiergate-gate-${framework}`,
      title: `tiergate + concurrencyGate (${framework}, default shed; gate max 1, queue 100, 500 ms)`,
      framework,
      protection: 'tiergate',
      options: tiergateOptions(cap, {}),
      gate: { tiers: ['critical', 'standard', 'background'], tierHeader: 'x-user-tier', trustTierHeader: true, maxConcurrent: 1, maxQueue: 100, queueTimeoutMs: 500, timeoutStatus: 503 },
      thresholdMs: LAG_MS,
      target: true,
      extra: true,
    })),
  ];
}

function parseArgs(argv) {
  const a = { runs: 5, quick: false, only: null, load: 3, seconds: 6, workMs: 3, work: DEFAULT_WORK_KIND, shed: {}, alt: [], cpuProf: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--quick') a.quick = true;
    else if (k === '--runs') {
      a.runs = Number(argv[++i]);
      if (!Number.isInteger(a.runs) || a.runs < 1) throw new RangeError('--runs must be a whole number >= 1');
    }
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--load') a.load = Number(argv[++i]);
    else if (k === '--seconds') a.seconds = Number(argv[++i]);
    else if (k === '--work-ms') a.workMs = Number(argv[++i]);
    else if (k === '--work') a.work = checkKind(argv[++i]);
    else if (k === '--shed') a.shed = JSON.parse(argv[++i]); // overrides tiergate's shed options
    else if (k === '--alt') a.alt.push(path.resolve(argv[++i]));
    else if (k === '--cpu-prof') a.cpuProf = path.resolve(argv[++i]);
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

/**
 * Runs one configuration through its phases. The generator plays a reverse proxy with a warm pool of
 * keep-alive connections (WARM_CONNECTIONS, opened before each phase): requests beyond the pool open
 * new connections, which a server that is not keeping up accepts late (its accept queue overflows and
 * the kernel drops SYNs, retried after 1 s) — what an unprotected server does to its clients.
 */
async function runConfig(cfg, { cap, workIters, workKind, load, seconds, quick, log, profileFile }) {
  const srv = await startServer({ framework: cfg.framework, protection: cfg.protection, options: cfg.options || {}, workIters, workKind, record: true, tiergateDir: cfg.tiergateDir, gate: cfg.gate, outsideApp: cfg.outsideApp });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4096, maxFreeSockets: 4096 });
  const warm = { connections: WARM_CONNECTIONS, path: '/hello', headers: { 'x-user-tier': 'critical' } };
  const base = { path: '/work', mix: MIX, timeoutMs: 2000, agent, warm };
  try {
    await runLoad(srv, { ...base, rate: 0.5 * cap, durationMs: quick ? 500 : 1000 }); // warm-up (JIT, baseline)
    let unloaded = null;
    let light = null;
    let calm = { calm: true };
    if (!quick) {
      unloaded = await runLoad(srv, { ...base, rate: 0.25 * cap, durationMs: 3000 });
      light = await runLoad(srv, { ...base, rate: 0.8 * cap, durationMs: 3000 });
      light.stats = await srv.guardStats().catch(() => null);
      calm = await settle(srv, agent, { minMs: 1000, maxMs: 6000 }); // calm before the overload
    }
    // The overload and, on the same clock without a gap, the 0.8x phase after it.
    await warmPool(agent, { port: srv.port, ...warm });
    const startAt = nowAbs() + 50;
    const { warm: _w, ...cold } = base;
    const w0 = await srv.workTime();
    if (profileFile) await srv.profileStart();
    // The gate's counters one second into the overload: what its onset did, apart from the rest.
    const firstSecond = new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt + 1000 - nowAbs()))).then(() => srv.guardStats().catch(() => null));
    const [over, after] = await Promise.all([
      runLoad(srv, { ...cold, rate: load * cap, durationMs: seconds * 1000, startAt }, { keepController: !quick }).then(async (r) => {
        if (profileFile) await srv.profileStop(profileFile);
        return r;
      }),
      quick ? null : openLoop({ ...cold, port: srv.port, rate: 0.8 * cap, durationMs: AFTER_MS, startAt: startAt + seconds * 1000, steadyFromMs: RECOVERY_MS, seed: 7 }),
    ]);
    if (after) {
      // The controller through the 0.8x phase after the overload, on that phase's timeline.
      const { controller } = await srv.controllerEnd();
      const ctl = controllerPerBucket(controller, after.start, after.bucketMs, after.timeline.length);
      for (let b = 0; b < after.timeline.length; b++) if (ctl[b]) after.timeline[b].controller = ctl[b];
    }
    const w1 = await srv.workTime();
    const stats = await srv.guardStats().catch(() => null);
    const statsAt1s = await firstSecond;
    log?.(`  ${cfg.id}: done`);
    // The work's mean wall time over the overload and the 0.8x phase after it: this run's pace.
    return { cfg, unloaded, light, over, after, stats, statsAt1s, calm, workMeanMs: workMeanMs(w0, w1) };
  } finally {
    agent.destroy();
    await srv.stop();
  }
}

function printTable(results, { cap, load, out = console.log }) {
  out(`\nOverload at ${load}x capacity (${Math.round(load * cap)} req/s offered; capacity ${Math.round(cap)} req/s), mix 10/30/60:`);
  out(`${pad('configuration', 60)} ${pad('tier', 11)} ${lpad('sent', 6)} ${lpad('success', 8)} ${lpad('p50 ms', 8)} ${lpad('p99 ms', 8)}  rejections`);
  for (const r of results) {
    const { tiers } = r.over.load;
    TIERS.forEach((tier, i) => {
      const t = tiers[tier];
      out(
        `${pad(i === 0 ? r.cfg.title : '', 60)} ${pad(tier, 11)} ${lpad(t.sent, 6)} ${lpad(f1(t.successPct) + '%', 8)} ${lpad(f1(t.p50), 8)} ${lpad(f1(t.p99), 8)}  ${rejectionText(t.rejections)}`,
      );
    });
    const g = r.over.load;
    let onset = '';
    if (r.cfg.thresholdMs) {
      const o = r.over.onset(r.cfg.thresholdMs);
      onset = `; first shed ${o.firstRejectAtMs == null ? 'never' : f1(o.firstRejectAtMs) + ' ms'} (lag > ${r.cfg.thresholdMs} ms at ${o.crossedAtMs == null ? 'never' : f1(o.crossedAtMs) + ' ms'})`;
    }
    if (!r.calm.calm) out(`${pad('', 60)} !! the gate was still shedding (pressure ${f1(r.calm.pressure)}) 6 s after the 0.8x phase; the overload phase began anyway`);
    out(`${pad('', 60)} server lag p99 ${f1(r.over.server.lag.p99)} ms, max ${f1(r.over.server.lag.max)} ms; goodput ${Math.round(g.goodputPerSec)} req/s; generator lag p99 ${f1(g.genLag.p99)} ms${onset}`);
  }
}

/** The tiergate targets of the issue, each PASS or MISS with the figure. */
function evaluateTargets(r, ideal) {
  const targets = [];
  const crit = r.over.load.tiers.critical;
  targets.push({ name: 'critical success >= 99.5%', value: `${f1(crit.successPct)}%`, pass: crit.successPct >= 99.5 });
  if (r.unloaded) {
    // Unloaded, every tier's request is the same request to the same idle server: the reference is
    // the p99 over all of them (critical alone is too few samples at 0.25x for a stable p99).
    const u = r.unloaded.load.latency.p99;
    const ratio = crit.p99 / u;
    targets.push({
      name: 'critical p99 <= 2x unloaded p99',
      value: `${f1(crit.p99)} ms vs unloaded ${f1(u)} ms = ${ratio.toFixed(2)}x (requests due after the first ${crit.steady.fromMs / 1000} s: p99 ${f1(crit.steady.p99)} ms = ${(crit.steady.p99 / u).toFixed(2)}x)${ideal ? `; ${idealText(ideal)}` : ''}`,
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

/** One run's figures for the issue's table (null where a phase did not run). */
function runFigures(r, ideal, cap) {
  const t = r.over.load.tiers;
  const crit = t.critical;
  const count503 = (rej) => rej['503'] || 0;
  const after = r.after;
  const shedAfter = after ? TIERS.reduce((n, k) => n + count503(after.tiers[k].rejections), 0) : null;
  const shedAfterSteady = after ? TIERS.reduce((n, k) => n + count503(after.tiers[k].steady.rejections), 0) : null;
  return {
    critSuccess: crit.successPct,
    critP99: crit.p99,
    critSteadyP99: crit.steady.p99,
    idealP99: ideal.p99,
    ratio: crit.p99 / ideal.p99,
    steadyRatio: crit.steady.p99 / ideal.p99,
    goodputPct: (100 * r.over.load.goodputPerSec) / cap,
    standardPct: t.standard.successPct,
    backgroundPct: t.background.successPct,
    shed08: r.light ? r.light.server.rejected : null,
    shedAfter,
    shedAfterSteady,
  };
}

/**
 * The same ratios against the capacity the server had during this run: `pace` is the run's mean
 * work time over the probe's (1.2: the machine ran 1.2x slower than when the capacity was probed),
 * the ideal scheduler is recomputed with every request costing `pace` times the probe's, and
 * goodput is set against the probe's capacity divided by the pace.
 */
function paceFigures(r, probe, args) {
  const pace = r.workMeanMs / probe.workMeanMs;
  if (!Number.isFinite(pace) || pace <= 0) return { pace: null, paceIdealP99: null, paceRatio: null, paceSteadyRatio: null, paceGoodputPct: null };
  const cap = probe.reqPerSec / pace;
  const ideal = idealTierLatency({ rate: args.load * probe.reqPerSec, durationMs: args.seconds * 1000, serviceMs: 1000 / cap, mix: MIX });
  const crit = r.over.load.tiers.critical;
  return {
    pace,
    paceIdealP99: ideal.p99,
    paceRatio: crit.p99 / ideal.p99,
    paceSteadyRatio: crit.steady.p99 / ideal.p99,
    paceGoodputPct: (100 * r.over.load.goodputPerSec) / cap,
  };
}

// The figures of the table, in order: [key, label, format].
const FIGURES = [
  ['critSuccess', 'critical success %', (v) => v.toFixed(1)],
  ['critP99', 'critical p99 ms (whole run)', f1],
  ['critSteadyP99', 'critical p99 ms (after 1st s)', f1],
  ['idealP99', 'ideal scheduler p99 ms', f1],
  ['ratio', 'critical p99 / ideal (whole)', (v) => v.toFixed(2)],
  ['steadyRatio', 'critical p99 / ideal (after 1st s)', (v) => v.toFixed(2)],
  ['goodputPct', 'goodput % of capacity', (v) => v.toFixed(0)],
  ['standardPct', 'standard served %', (v) => v.toFixed(1)],
  ['backgroundPct', 'background served %', (v) => v.toFixed(1)],
  ['pace', 'pace (work time / the probe\'s)', (v) => v.toFixed(2)],
  ['paceIdealP99', 'ideal p99 ms at the run\'s pace', f1],
  ['paceRatio', 'p99 / ideal at pace (whole)', (v) => v.toFixed(2)],
  ['paceSteadyRatio', 'p99 / ideal at pace (after 1st s)', (v) => v.toFixed(2)],
  ['paceGoodputPct', 'goodput % of capacity at pace', (v) => v.toFixed(0)],
  ['shed08', 'shed at 0.8x (before)', (v) => String(v)],
  ['shedAfter', 'shed at 0.8x after overload', (v) => String(v)],
  ['shedAfterSteady', '... of it after 1 s recovery', (v) => String(v)],
];

function median(values) {
  const v = values.filter((x) => x != null && !Number.isNaN(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return { median: v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2, min: v[0], max: v[v.length - 1], n: v.length };
}

function printRuns(byConfig, out = console.log) {
  out('\nPer run (overload 3x; ratios against the ideal scheduler on the same arrivals):');
  out(`  ${pad('configuration', 20)} ${pad('run', 4)} ${FIGURES.map(([key]) => lpad(key, 16)).join('')}`);
  for (const runs of byConfig.values()) {
    runs.forEach((r, k) => {
      out(`  ${pad(r.cfg.id, 20)} ${pad(k + 1, 4)} ${FIGURES.map(([key, , fmt]) => lpad(r.figures[key] == null ? '—' : fmt(r.figures[key]), 16)).join('')}`);
    });
  }
}

function printSummary(byConfig, out = console.log) {
  const cols = [...byConfig.values()];
  out(`\nMedian [min–max] over the runs (n = runs per configuration):`);
  out(`${pad('figure', 36)} ${cols.map((runs) => pad(`${runs[0].cfg.id} (n=${runs.length})`, 26)).join(' ')}`);
  for (const [key, label, fmt] of FIGURES) {
    const cells = cols.map((runs) => {
      const m = median(runs.map((r) => r.figures[key]));
      return pad(m == null ? '—' : `${fmt(m.median)} [${fmt(m.min)}–${fmt(m.max)}]`, 26);
    });
    out(`${pad(label, 36)} ${cells.join(' ')}`);
  }
}

function writeSvg(results, file, { cap, load }) {
  const parts = [];
  for (const r of results) {
    const run = r.run ? ` — run ${r.run}` : '';
    parts.push(
      timelineSvg(
        [
          {
            title: r.cfg.title + run,
            timeline: r.over.load.timeline,
            tiers: TIERS,
            thresholdMs: r.cfg.thresholdMs,
            note: TIERS.map((t) => `${t} ${f1(r.over.load.tiers[t].successPct)}%`).join('  ·  '),
          },
        ],
        { title: parts.length ? '' : `Goodput per tier and server lag at ${load}x capacity (${Math.round(load * cap)} req/s offered, 10/30/60 mix); under each tiergate run, its controller` },
      ),
    );
    if (r.cfg.protection === 'tiergate' && r.over.load.timeline.some((row) => row.controller)) {
      parts.push(controllerSvg([{ title: `controller${run}`, timeline: r.over.load.timeline, tiers: TIERS.slice(1), capacity: cap }]));
    }
  }
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, stackSvgs(parts));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.cpuProf) fs.mkdirSync(args.cpuProf, { recursive: true });
  const t0 = Date.now();
  const workIters = calibrateWork(args.workMs, args.work);
  const capRun = await measureCapacity({ workIters, workKind: args.work, concurrency: 8, durationMs: 2000 });
  const cap = capRun.reqPerSec;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`work: ${args.work} x ${workIters} per /work request (~${args.workMs} ms calibrated); capacity (closed loop, 8 clients, Express, no protection): ${Math.round(cap)} req/s, p50 ${f1(capRun.p50)} ms, work ${capRun.workMeanMs.toFixed(2)} ms a request`);
  let configs = configurations(cap);
  configs = args.only ? configs.filter((c) => args.only.includes(c.id)) : configs.filter((c) => !c.extra);
  if (args.only) {
    const unknown = args.only.filter((id) => !configurations(cap).some((c) => c.id === id));
    if (unknown.length) throw new Error(`--only: unknown configuration(s) ${unknown.join(', ')}`);
  }
  for (const c of configs) {
    if (c.protection !== 'tiergate' || !Object.keys(args.shed).length) continue;
    Object.assign(c.options.shed, args.shed);
    if (args.shed.targetLagMs) c.thresholdMs = args.shed.targetLagMs;
    c.title += ` + ${JSON.stringify(args.shed)}`;
  }
  // Each --alt DIR: every tiergate configuration again as `<id>@alt` (the first) or `<id>@<DIR's name>`.
  const altId = (id, dir, i) => `${id}@${i === 0 ? 'alt' : path.basename(dir)}`;
  const alts = (c) =>
    c.protection !== 'tiergate' || c.noAlt
      ? []
      : args.alt.map((dir, i) => ({ ...c, id: altId(c.id, dir, i), title: `${c.title} [${dir}]`, tiergateDir: dir, options: inVocabularyOf(dir, { ...c.options, shed: { ...c.options.shed } }) }));
  configs = configs.flatMap((c) => [c, ...alts(c)]);
  const ideal = idealTierLatency({ rate: args.load * cap, durationMs: args.seconds * 1000, serviceMs: 1000 / cap, mix: MIX });
  const results = [];
  const byConfig = new Map(configs.map((c) => [c.id, []]));
  for (let run = 1; run <= args.runs; run++) {
    for (const cfg of configs) {
      if (run > 1 && cfg.protection !== 'tiergate') continue; // the comparisons run once
      const quiet = await waitForQuiet({ maxMs: 20_000 }); // another target's leftovers off the cores
      try {
        const profileFile = args.cpuProf && path.join(args.cpuProf, `${cfg.id}-run${run}.cpuprofile`);
        const r = await runConfig(cfg, { cap, workIters, workKind: args.work, load: args.load, seconds: args.seconds, quick: args.quick, profileFile });
        r.run = cfg.protection === 'tiergate' ? run : 0;
        r.figures = { ...runFigures(r, ideal, cap), ...paceFigures(r, capRun, args) };
        results.push(r);
        byConfig.get(cfg.id).push(r);
        const f = r.figures;
        console.log(`  ${cfg.id} run ${run}: critical ${f1(f.critSuccess)}%, p99 ${f1(f.critP99)} ms (${f.ratio.toFixed(2)}x ideal), after 1st s ${f1(f.critSteadyP99)} ms (${f.steadyRatio.toFixed(2)}x); goodput ${f.goodputPct.toFixed(0)}%; standard ${f1(f.standardPct)}%, background ${f1(f.backgroundPct)}%; 0.8x shed ${f.shed08 ?? '—'}, after overload ${f.shedAfter ?? '—'} (${f.shedAfterSteady ?? '—'} after 1 s); load ${os.loadavg()[0].toFixed(1)}, machine busy ${quiet.busy == null ? '-' : (100 * quiet.busy).toFixed(0) + '%'} after a ${(quiet.waitedMs / 1000).toFixed(1)} s wait`);
      } catch (err) {
        console.log(`  ${cfg.title} run ${run}: could not run (${err.message.split('\n')[0]})`);
      }
    }
  }
  for (const [id, runs] of byConfig) if (!runs.length) byConfig.delete(id);
  const firstRuns = [...byConfig.values()].map((runs) => runs[0]);
  printTable(firstRuns, { cap, load: args.load });
  const starved = results.filter((r) => r.over.load.genLag.p99 > 20);
  if (starved.length) {
    console.log(`\nWARNING: the load generator ran late (schedule lag p99 > 20 ms) in: ${starved.map((r) => `${r.cfg.id}${r.run ? ' run ' + r.run : ''}`).join(', ')};`);
    console.log('the machine is busy with other work, so these figures are noisier than usual.');
  }
  if (!args.quick) {
    console.log('\nUnloaded (0.25x capacity, 3 s) latency of every tier, p50 / p99 ms; and the 0.8x phase (first run):');
    for (const r of firstRuns) {
      const u = r.unloaded.load.latency;
      const l = r.light;
      console.log(
        `  ${pad(r.cfg.title, 60)} ${f1(u.p50)} / ${f1(u.p99)};  0.8x: ${l.server.rejected} shed of ${l.load.sent}, p99 ${f1(l.load.latency.p99)} ms, lag p99 ${f1(l.server.lag.p99)} max ${f1(l.server.lag.max)} ms` +
          (l.stats && typeof l.stats.episodes === 'number' ? `, gate: ${l.stats.episodes} shed episode(s) so far, cause ${l.stats.cause}` : ''),
      );
    }
  }
  console.log(`\n${idealText(ideal)}; capacity probe ${Math.round(cap)} req/s`);
  printRuns(byConfig);
  printSummary(byConfig);
  const summary = [];
  for (const r of firstRuns) {
    if (!r.cfg.target) continue;
    const targets = evaluateTargets(r, ideal);
    printTargets(r.cfg, targets);
    if (r.stats) console.log(`  gate.stats() after the run: ${JSON.stringify(r.stats)}`);
    const waits = (st) => st?.concurrency?.waits;
    if (waits(r.stats) !== undefined) console.log(`  requests that found the concurrency limit reached: ${waits(r.statsAt1s) ?? '?'} in the overload's first second, ${waits(r.stats)} by the run's end`);
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
        runs: args.runs,
        ideal,
        results: results.map((r) => ({
          config: r.cfg.id,
          run: r.run,
          title: r.cfg.title,
          figures: r.figures,
          overload: { tiers: r.over.load.tiers, serverLag: r.over.server.lag, goodputPerSec: r.over.load.goodputPerSec, genLag: r.over.load.genLag, onset: r.cfg.thresholdMs ? r.over.onset(r.cfg.thresholdMs) : null, timeline: r.over.load.timeline },
          after: r.after && { tiers: r.after.tiers, timeline: r.after.timeline },
          unloaded: r.unloaded && { latency: r.unloaded.load.latency, tiers: r.unloaded.load.tiers, serverLag: r.unloaded.server.lag },
          light: r.light && { tiers: r.light.load.tiers, serverLag: r.light.server.lag, shed: r.light.server.rejected, timeline: r.light.load.timeline },
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

module.exports = { MIX, TIERS, WARM_CONNECTIONS, LAG_MS, CRITICAL_LAG_MS, NO_FILTER_SHED, tiergateOptions, configurations, runConfig, runFigures, printTable, evaluateTargets, printTargets, writeSvg };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

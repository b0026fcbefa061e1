'use strict';
// npm run bench:downstream — overload of an I/O-bound service (issue 36). The handlers wait on a
// downstream that saturates while the event loop stays idle: (pg) SELECT pg_sleep(0.02) through a pg
// Pool of --pool connections on a real PostgreSQL started here (as the service tests start one);
// (http) a slow HTTP downstream that serves --pool requests at once in ~20 ms and queues the rest;
// (mixed) ~1 ms of CPU around the same HTTP call. Configurations: no protection; toobusy-js and
// @fastify/under-pressure (lag, 20 ms); a hand-sized FIFO bulkhead at the pool size around the
// downstream call (lib/bulkhead.js: what a user must tune); gatekeeper() + concurrencyGate({
// maxConcurrent: 'auto' }) as it is today; gatekeeper() with tiers only (gatekeeperOptions below).
//
//   node benchmark/downstream.js [--runs 5] [--runs-lag 2] [--quick] [--only id,id] [--routes pg,http,mixed] [--load 3] [--pool 4] [--alt DIR]
//   (--alt DIR, repeatable: gatekeeper again as `gatekeeper@<DIR's name>`, its server loading
//   tiergate from the package directory DIR, another checkout with its own build: an A/B interleaved
//   run by run.)
//   (ids: none, toobusy, under-pressure, bulkhead, gate-auto, gatekeeper. toobusy and under-pressure
//   run only in the first --runs-lag runs: a lag signal stays flat on an idle loop, and every run of
//   every configuration at 5 runs would take ~28 min; --runs-lag 5 runs them all 5 times.)
//
// Per run, route and configuration (runs interleaved: run 1 of every route x configuration, then run
// 2, ...), after a wait for a quiet machine (lib/quiet.js), one server process (lib/downstream-server.js)
// through: warm-up (0.5x), unloaded (0.5x: the unloaded latency), 0.8x (must not shed), the step
// (--load x capacity) and, without a gap, 0.8x again (recovery); mix 10/30/60 by the trusted
// x-user-tier header, open loop (lib/openloop.js), 2 s client timeout. Then a fresh server for the
// retry storm (lib/retry-load.js): 0.8x, the same step, 0.8x, clients retrying a failed attempt (non-2xx
// or no answer in 1 s) up to 3 times, half at once, half after the answer's Retry-After.
// Writes benchmark/out/downstream-<route>.svg (per run: goodput, sheds and latency; in flight and the
// learned limit; the storm) and benchmark/out/downstream.json.
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { startServer, settle } = require('./lib/scenario');
const { openLoop, closedLoop, warmPool, nowAbs } = require('./lib/openloop');
const { retryLoad } = require('./lib/retry-load');
const { calibrate } = require('./lib/work');
const { waitForQuiet } = require('./lib/quiet');
const { idealTierLatency } = require('./lib/ideal');
const { runFigures, printReport, writeSvgs } = require('./lib/downstream-report');
const { startPostgres, pgMissing } = require('../__test__/service/helpers');

const MIX = [
  { tier: 'critical', weight: 0.1 },
  { tier: 'standard', weight: 0.3 },
  { tier: 'background', weight: 0.6 },
];
const TIERS = MIX.map((m) => m.tier);
const LAG_MS = 20; // toobusy-js's and under-pressure's threshold, as in bench:overload
const SERVICE_MS = 20; // each downstream call: pg_sleep(0.02), or the slow HTTP downstream's 20 ms
const CPU_MS = 1; // the mixed route's CPU
const CLIENT_TIMEOUT_MS = 2000;
const WARM_CONNECTIONS = 500;
const STORM_GIVE_UP_MS = 3000; // a storm client sends no attempt later than this after its request arrived
const DS_SERVER = path.join(__dirname, 'lib', 'downstream-server.js');
const SLOW_DOWNSTREAM = path.join(__dirname, 'lib', 'slow-downstream.js');
const ROUTES = ['pg', 'http', 'mixed'];

/** Phase lengths (ms): the full run, and --quick. stormBase is a multiple of retryLoad's 500 ms
 * buckets, so that the storm's recovery windows start at the step's end. */
const PHASES = {
  full: { warm: 300, unloaded: 3000, light: 600, step: 3000, after: 3000, stormBase: 500, stormStep: 1500, stormAfter: 2500 },
  quick: { warm: 300, unloaded: 1000, light: 500, step: 2000, after: 2500, stormBase: 500, stormStep: 1500, stormAfter: 2500 },
};

/**
 * THE gatekeeper configuration under test: gatekeeper() with tiers and the trusted tier header, every
 * other option its default. Budgets are far above what each tier offers at the step, so only the
 * overload protection refuses. `cap`: the route's measured capacity (req/s).
 */
function gatekeeperOptions(cap) {
  const budget = Math.ceil(4 * cap);
  return {
    tiers: [
      { name: 'critical', protected: true, limit: budget, windowMs: 1000 },
      { name: 'standard', limit: budget, windowMs: 1000 },
      { name: 'background', limit: budget, windowMs: 1000 },
    ],
    trustTierHeader: true,
  };
}

function configurations(cap, pool, alt = []) {
  const gatekeeper = { id: 'gatekeeper', title: 'gatekeeper() defaults (tiers only)', framework: 'express', protection: 'gatekeeper', options: gatekeeperOptions(cap), target: true };
  return [
    { id: 'none', title: 'no protection (Express)', framework: 'express', protection: 'none' },
    { id: 'toobusy', title: `toobusy-js (Express, maxLag ${LAG_MS} ms)`, framework: 'express', protection: 'toobusy', options: { maxLag: LAG_MS, interval: 20 }, lag: true },
    { id: 'under-pressure', title: `@fastify/under-pressure (Fastify, ${LAG_MS} ms)`, framework: 'fastify', protection: 'under-pressure', options: { maxEventLoopDelay: LAG_MS, sampleInterval: 20 }, lag: true },
    { id: 'bulkhead', title: `hand-sized bulkhead (${pool} at once, ${pool} queued, FIFO)`, framework: 'express', protection: 'bulkhead', bulkhead: { limit: pool, maxQueue: pool } },
    {
      id: 'gate-auto',
      title: "gatekeeper() + concurrencyGate({ maxConcurrent: 'auto' })",
      framework: 'express',
      protection: 'gate-auto',
      options: gatekeeperOptions(cap),
      gate: { maxConcurrent: 'auto', trustTierHeader: true },
    },
    gatekeeper,
    ...alt.map((dir) => ({ ...gatekeeper, id: `gatekeeper@${path.basename(dir)}`, title: `${gatekeeper.title} [${dir}]`, tiergateDir: dir })),
  ];
}

function parseArgs(argv) {
  const a = { runs: 5, runsLag: 2, quick: false, only: null, routes: ROUTES, load: 3, pool: 4, alt: [] };
  const num = (k, v, min) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new RangeError(`${k} must be a number >= ${min}, got ${v}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--quick') a.quick = true;
    else if (k === '--runs') a.runs = num(k, argv[++i], 1);
    else if (k === '--runs-lag') a.runsLag = num(k, argv[++i], 1);
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--routes') a.routes = argv[++i].split(',');
    else if (k === '--load') a.load = num(k, argv[++i], 1);
    else if (k === '--pool') a.pool = num(k, argv[++i], 1);
    else if (k === '--alt') a.alt.push(path.resolve(argv[++i]));
    else throw new Error(`unknown argument ${k}`);
  }
  if (a.quick && !argv.includes('--runs')) a.runs = 1;
  a.runsLag = Math.min(a.runs, argv.includes('--runs-lag') ? a.runsLag : a.quick ? 1 : a.runsLag);
  for (const r of a.routes) if (!ROUTES.includes(r)) throw new Error(`--routes: unknown route ${r} (known: ${ROUTES.join(', ')})`);
  return a;
}

/** The slow HTTP downstream in a process of its own (it must not share the service's loop). */
function startDownstreamProcess(serviceMs, concurrency) {
  const child = spawn(process.execPath, [SLOW_DOWNSTREAM, String(serviceMs), String(concurrency)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('slow downstream did not start in 10 s')), 10_000);
    child.stdout.setEncoding('utf8').on('data', (d) => {
      out += d;
      const m = /\{"port":(\d+)\}/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ port: Number(m[1]), stop: () => new Promise((r) => (child.exitCode !== null ? r() : (child.once('exit', r), child.kill('SIGTERM')))) });
      }
    });
    child.once('exit', (code) => reject(new Error(`slow downstream exited (${code})`)));
  });
}

function serverSpec(cfg, env) {
  return {
    script: DS_SERVER,
    framework: cfg.framework,
    protection: cfg.protection,
    options: cfg.options || {},
    gate: cfg.gate,
    tiergateDir: cfg.tiergateDir,
    extra: { bulkhead: cfg.bulkhead, pgUrl: env.pgUrl, poolSize: env.pool, pgSleepMs: SERVICE_MS, downstreamPort: env.downstreamPort, cpuIters: env.cpuIters },
  };
}

/** Closed-loop capacity of a route on an unprotected server, and its unloaded latency (1 client). */
async function probeRoute(route, env) {
  const srv = await startServer(serverSpec({ framework: 'express', protection: 'none' }, env));
  try {
    const p = `/${route}`;
    const unloaded = await closedLoop({ port: srv.port, path: p, concurrency: 1, durationMs: 1000, warmupMs: 300 });
    const cap = await closedLoop({ port: srv.port, path: p, concurrency: 4 * env.pool, durationMs: 1500, warmupMs: 300 });
    return { reqPerSec: cap.reqPerSec, satP50: cap.p50, unloadedP50: unloaded.p50, unloadedP99: unloaded.p99 };
  } finally {
    await srv.stop();
  }
}

/**
 * Opens a window on the server, runs `loads` (promises of a function of the start time), closes it.
 * The warm-up of the client pool (hundreds of connections and requests at once) stalls the server's
 * loop for tens of ms: the window opens once the server has settled from it (a trickle of critical
 * requests, 0.5 s at least, until a guard reports no pressure, 3 s at most), so a lag-driven shed of
 * the warm-up's own making is not counted against the phase.
 */
async function windowed(srv, agent, run) {
  await warmPool(agent, { port: srv.port, connections: WARM_CONNECTIONS, path: '/hello', headers: { 'x-user-tier': 'critical' } });
  await settle(srv, agent, { minMs: 500, maxMs: 3000 });
  await srv.windowStart();
  const startAt = nowAbs() + 50;
  const result = await run(startAt);
  const server = await srv.windowEnd();
  return { ...result, startAt, server };
}

/** One configuration on one route: the phases of the main server, then the storm on a fresh one. */
async function runOne(cfg, route, cap, env, ph, load) {
  const p = `/${route}`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4096, maxFreeSockets: 4096 });
  const base = { path: p, mix: MIX, timeoutMs: CLIENT_TIMEOUT_MS, agent };
  let srv = await startServer(serverSpec(cfg, env));
  const out = {};
  try {
    await openLoop({ ...base, port: srv.port, rate: 0.5 * cap, durationMs: ph.warm });
    // Unloaded: 0.5x at a constant rate never queues on a pool of >= 2 (a request leaves before the
    // one after next arrives), and gives twice the samples of 0.25x for the p99: ~290 in the full
    // run's 3 s, so that its p99 is the third slowest, not (of the ~95 of 1 s) the slowest.
    out.unloaded = await openLoop({ ...base, port: srv.port, rate: 0.5 * cap, durationMs: ph.unloaded });
    const light = await windowed(srv, agent, async (startAt) => ({ load: await openLoop({ ...base, port: srv.port, rate: 0.8 * cap, durationMs: ph.light, startAt }) }));
    out.light = { load: light.load, refused: light.server.rejected };
    // The step and, on the same clock without a gap, 0.8x after it.
    out.step = await windowed(srv, agent, async (startAt) => {
      const [step, after] = await Promise.all([
        openLoop({ ...base, port: srv.port, rate: load * cap, durationMs: ph.step, startAt, samples: true }),
        // drainMs: by then every request has had its answer or its timeout.
        openLoop({ ...base, port: srv.port, rate: 0.8 * cap, durationMs: ph.after, startAt: startAt + ph.step, steadyFromMs: 1000, samples: true, seed: 7, drainMs: CLIENT_TIMEOUT_MS + 100 }),
      ]);
      return { load: step, after };
    });
    out.stats = await srv.guardStats().catch(() => null);
  } finally {
    await srv.stop();
  }
  // The storm, on a fresh server: the unprotected ones are still draining the step's backlog.
  srv = await startServer(serverSpec(cfg, env));
  try {
    out.storm = await windowed(srv, agent, async (startAt) => ({
      load: await retryLoad({
        port: srv.port,
        path: p,
        mix: MIX,
        agent,
        startAt,
        giveUpMs: STORM_GIVE_UP_MS,
        phases: [{ rate: 0.8 * cap, ms: ph.stormBase }, { rate: load * cap, ms: ph.stormStep }, { rate: 0.8 * cap, ms: ph.stormAfter }],
      }),
    }));
    out.storm.stepEndMs = ph.stormBase + ph.stormStep;
  } finally {
    agent.destroy();
    await srv.stop();
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ph = args.quick ? PHASES.quick : PHASES.full;
  const t0 = Date.now();
  const env = { pool: args.pool, cpuIters: calibrate(CPU_MS) };
  const cleanups = [];
  try {
    if (args.routes.includes('pg')) {
      const missing = pgMissing();
      if (missing) {
        console.log(`route pg skipped: ${missing}`);
        args.routes = args.routes.filter((r) => r !== 'pg');
      } else {
        const pg = await startPostgres();
        cleanups.push(() => pg.stop());
        env.pgUrl = pg.url;
      }
    }
    if (args.routes.some((r) => r !== 'pg')) {
      const ds = await startDownstreamProcess(SERVICE_MS, args.pool);
      cleanups.push(() => ds.stop());
      env.downstreamPort = ds.port;
    }
    console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
    console.log(`routes: pg = SELECT pg_sleep(${SERVICE_MS / 1000}) through a pg Pool of ${args.pool}; http = a downstream serving ${args.pool} at once in ${SERVICE_MS} ms, the rest queued; mixed = ~${CPU_MS} ms CPU + the http call`);
    console.log(`phases (ms): ${JSON.stringify(ph)}; step ${args.load}x capacity; mix 10/30/60; client timeout ${CLIENT_TIMEOUT_MS} ms${args.quick ? '; --quick' : ''}`);
    const probes = {};
    const ideals = {};
    for (const route of args.routes) {
      await waitForQuiet({ maxMs: 5000 });
      probes[route] = await probeRoute(route, env);
      const pr = probes[route];
      // The ideal scheduler on `pool` servers, each request holding one for pool / capacity, give or
      // take 1 ms (without it servers that start together stay in lockstep; benchmark/ideal-bound.js).
      ideals[route] = idealTierLatency({
        rate: args.load * pr.reqPerSec,
        durationMs: ph.step,
        serviceMs: (1000 * args.pool) / pr.reqPerSec,
        mix: MIX,
        servers: args.pool,
        jitterMs: 1,
      });
      console.log(`capacity probe ${route}: ${Math.round(pr.reqPerSec)} req/s closed loop (${4 * args.pool} clients, p50 ${pr.satP50.toFixed(1)} ms); unloaded (1 client) p50 ${pr.unloadedP50.toFixed(1)} ms, p99 ${pr.unloadedP99.toFixed(1)} ms; ideal scheduler critical p99 at ${args.load}x: ${ideals[route].p99.toFixed(1)} ms`);
    }
    const all = configurations(1, args.pool, args.alt);
    if (args.only) {
      const unknown = args.only.filter((id) => !all.some((c) => c.id === id));
      if (unknown.length) throw new Error(`--only: unknown configuration(s) ${unknown.join(', ')} (known: ${all.map((c) => c.id).join(', ')})`);
    }
    const results = []; // { route, cfg, run, figures, raw }
    for (let run = 1; run <= args.runs; run++) {
      for (const route of args.routes) {
        const cap = probes[route].reqPerSec;
        // The lag-based comparisons run --runs-lag times (the first runs): their signal does not move here.
        const cfgs = configurations(cap, args.pool, args.alt).filter((c) => (!args.only || args.only.includes(c.id)) && (!c.lag || run <= args.runsLag));
        for (const cfg of cfgs) {
          const quiet = await waitForQuiet({ maxMs: 5000 });
          const runStart = Date.now();
          try {
            const raw = await runOne(cfg, route, cap, env, ph, args.load);
            const figures = runFigures(raw, { cap, ideal: ideals[route], tiers: TIERS });
            results.push({ route, cfg, run, figures, raw, quiet });
            const f = figures;
            console.log(
              `  run ${run} ${route} ${cfg.id}: critical ${f.critSuccess.toFixed(1)}%, p99 ${f.critP99.toFixed(0)} ms (${f.ratio.toFixed(2)}x unloaded ${f.unloadedP99.toFixed(0)}); goodput ${f.goodputPct.toFixed(0)}%; std ${f.standardPct.toFixed(0)}% bg ${f.backgroundPct.toFixed(0)}%; ` +
                `after: sheds>1s ${f.shedAfter1s}, crit p99>2s ${f.critAfterRatio == null ? 'none ok' : f.critAfterRatio.toFixed(2) + 'x'}; storm recovery ${f.stormRecoveryMs == null ? 'never' : f.stormRecoveryMs + ' ms'}; machine busy ${quiet.busy == null ? '-' : (100 * quiet.busy).toFixed(0) + '%'} after ${(quiet.waitedMs / 1000).toFixed(1)} s wait; run ${((Date.now() - runStart) / 1000).toFixed(1)} s`,
            );
          } catch (err) {
            console.log(`  run ${run} ${route} ${cfg.id}: could not run (${err.message.split('\n')[0]})`);
          }
        }
      }
    }
    printReport(results, { routes: args.routes, probes, ideals, load: args.load });
    const outDir = path.join(__dirname, 'out');
    writeSvgs(results, outDir, { routes: args.routes, probes, tiers: TIERS, load: args.load });
    fs.writeFileSync(
      path.join(outDir, 'downstream.json'),
      JSON.stringify({ date: new Date().toISOString(), args, phases: ph, probes, ideals, results: results.map((r) => ({ route: r.route, config: r.cfg.id, run: r.run, figures: r.figures, stats: r.raw.stats })) }, null, 1),
    );
    console.log(`\nwrote benchmark/out/downstream-{${args.routes.join(',')}}.svg and downstream.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}

module.exports = { MIX, TIERS, gatekeeperOptions, configurations, parseArgs };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

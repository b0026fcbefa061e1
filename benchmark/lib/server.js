'use strict';
// The benchmark's test server, run as a child process by scenario.js (never imported by the load
// generator: on a 2-core machine the server and the generator must each have a core and a loop).
//
// Config arrives as JSON in TG_BENCH_SERVER; results go back over the IPC channel:
//   { framework: 'express' | 'express4' | 'fastify' | 'http',
//     protection: 'none' | 'toobusy' | 'under-pressure' | 'tiergate' | 'express-rate-limit'
//                 | 'fastify-rate-limit' | { module, export?, options? },
//     options: {...},            // options for the protection (JSON)
//     workIters: number,         // iterations of work per /work request (CPU-bound route, lib/work.js)
//     workKind: 'pbkdf2' | 'sha256-chain',
//     record: boolean,           // keep a lag timeline and the first rejection time (overload runs)
//     tiergateDir?: string,      // load tiergate from this package directory instead of this one
//     outsideApp?: boolean,      // Express with protection 'tiergate': gatekeeper.http around the
//                                // app instead of app.use(gatekeeper())
//     heldLagMs?: number,        // with protection 'tiergate': the gatekeeper reads this lag from the
//                                // start (injectHealth), e.g. one that holds the turn queue on
//     gate?: {...} }             // with protection 'tiergate': a concurrencyGate with these options
//                                // after the gatekeeper (the composition docs/concurrency-gate.md shows)
//
// Routes: GET /work (CPU-bound), GET /hello (hello world); Express also serves a list and a detail
// endpoint, GET /api/items and GET /api/items/:id, each the same CPU-bound work as /work, or none when
// workIters is 0 (the crawler scenario and the HTTP cost runs of bench:defense). Commands (IPC, {id, cmd}):
//   window-start  reset the lag histogram and timeline;   window-end  -> lag figures for the window
//                 (and, with record and a protection that has stats(), its controller every 50 ms;
//                 with keepController the controller goes on being sampled until controller-end,
//                 which returns all its samples since window-start)
//   guard-stats   -> the protection's stats() if it has one;   cpu -> process.cpuUsage();   exit
//   work          -> { count, ms }: /work requests so far and the wall time their work took
const fs = require('node:fs');
const http = require('node:http');
const inspector = require('node:inspector');
const path = require('node:path');
const { monitorEventLoopDelay, performance } = require('node:perf_hooks');

const cfg = JSON.parse(process.env.TG_BENCH_SERVER || '{}');
const framework = cfg.framework || 'express';
const protection = cfg.protection || 'none';
const popts = cfg.options || {};
const workIters = cfg.workIters || 0;
const record = Boolean(cfg.record);
const gateOpts = cfg.gate || null;
// trace: every request of the window, for the crawl's onset timeline (benchmark/crawl-onset.js): its
// arrival (the 'request' event), the time the generator scheduled it (x-bench-sched), its class (the
// first octet of its X-Forwarded-For), status and finish; and the defense's counters every 20 ms.
const trace = Boolean(cfg.trace);
const MAX_TRACE = 400_000;
const SAMPLE_MS = 10;
const MAX_SAMPLES = 200_000;

const nowAbs = () => performance.timeOrigin + performance.now();
const { work, checkKind, DEFAULT_WORK_KIND } = require('./work');
const workKind = checkKind(cfg.workKind || DEFAULT_WORK_KIND);

// How long the CPU-bound work took, by the wall clock, over every /work request since the start:
// the machine's pace at that moment (a shared VM's CPU slows by tens of percent within minutes), so
// a run's figures can be set against the capacity the server had then (overload.js).
let workCount = 0;
let workMsSum = 0;
function timedWork() {
  const t0 = performance.now();
  const body = work(workIters, workKind);
  workMsSum += performance.now() - t0;
  workCount++;
  return body;
}

// ---- lag: perf_hooks histogram (p99 over the window) + a 10 ms drift sampler (timeline) ----
const histogram = monitorEventLoopDelay({ resolution: SAMPLE_MS });
histogram.enable();
const lagT = new Float64Array(MAX_SAMPLES);
const lagV = new Float32Array(MAX_SAMPLES);
let lagN = 0;
let windowOpen = false;
let firstRejectAt = 0; // absolute ms (timeOrigin-based) of the first request answered 429/503
let rejected = 0;
let handled = 0;
let connections = 0;
let prev = performance.now();
const sampler = setInterval(() => {
  const t = performance.now();
  const drift = Math.max(0, t - prev - SAMPLE_MS);
  prev = t;
  if (windowOpen && lagN < MAX_SAMPLES) {
    lagT[lagN] = performance.timeOrigin + t;
    lagV[lagN] = drift;
    lagN++;
  }
}, SAMPLE_MS);
sampler.unref();

// ---- the protection's controller over the window (record only): pressure, scales, sheds, budget ----
const CONTROLLER_MS = 50;
const MAX_CONTROLLER_SAMPLES = 20_000;
let controller = [];
// Open with the window; `window-end` with `keepController` leaves it open until `controller-end`
// (the 0.8x phase that follows the overload without a gap).
let controllerOpen = false;
const controllerSampler = setInterval(() => {
  if (!controllerOpen || !record || !statsSource || typeof statsSource.stats !== 'function' || controller.length >= MAX_CONTROLLER_SAMPLES) return;
  let s;
  try {
    s = statsSource.stats();
  } catch {
    return;
  }
  if (!s || typeof s.pressure !== 'number') return;
  const tiers = {};
  for (const [name, t] of Object.entries(s.tiers || {})) {
    tiers[name] = { scale: t.refillScale, admitted: t.admitted, shed: t.shed, turnShed: t.turnShed, capacityShed: t.capacityShed ?? 0 };
  }
  controller.push({ t: nowAbs(), pressure: s.pressure, parts: s.pressureParts ?? null, lagMs: s.controllerLagMs, busy: s.busy ?? null, elu: s.elu, capacity: s.capacity ?? null, tiers });
}, CONTROLLER_MS);
controllerSampler.unref();

/** Stamps every request's arrival; remembers when the first rejection (429/503) was decided. */
function recorder(req, res) {
  if (!windowOpen) return;
  const arrived = nowAbs();
  res.once('finish', () => {
    handled++;
    if (res.statusCode === 503 || res.statusCode === 429) {
      rejected++;
      if (firstRejectAt === 0) firstRejectAt = arrived;
    }
  });
}

const traceRows = { arrived: [], sched: [], sent: [], cls: [], status: [], finished: [] };
const traceStats = [];
function tracer(req, res) {
  if (!windowOpen || traceRows.arrived.length >= MAX_TRACE) return;
  const i = traceRows.arrived.length;
  traceRows.arrived.push(nowAbs());
  traceRows.sched.push(Number(req.headers['x-bench-sched']) || 0);
  traceRows.sent.push(Number(req.headers['x-bench-sent']) || 0);
  const xff = String(req.headers['x-forwarded-for'] || '');
  traceRows.cls.push(xff.startsWith('81.') ? 0 : xff.startsWith('45.') ? 1 : xff.startsWith('203.') ? 2 : 3);
  traceRows.status.push(0);
  traceRows.finished.push(0);
  res.once('finish', () => {
    traceRows.status[i] = res.statusCode;
    traceRows.finished[i] = nowAbs();
  });
}
const traceSampler = setInterval(() => {
  if (!trace || !windowOpen || !statsSource || traceStats.length >= 20_000) return;
  try {
    const d = statsSource.defense ? statsSource.defense.stats() : null;
    const s = statsSource.stats();
    const t = s && s.tiers && Object.values(s.tiers)[0];
    traceStats.push({ t: nowAbs(), fairRefused: d ? d.fairShareRefused || 0 : 0, banned: d ? d.refusals.banned : 0, bans: d ? d.bans : 0, tierFull: t ? t.tierFull : 0, admitted: t ? t.admitted : 0 });
  } catch {
    // a guard between configurations: no sample this tick
  }
}, 20);
traceSampler.unref();

// ---- protections ----
function loadTiergate() {
  // `tiergateDir`: another checkout's package (an A/B against another build in the same run).
  return require(cfg.tiergateDir ? path.resolve(cfg.tiergateDir) : path.join(__dirname, '..', '..'));
}

function customFactory() {
  const spec = protection;
  const mod = require(path.resolve(spec.module));
  const factory = spec.export ? mod[spec.export] : (typeof mod === 'function' ? mod : mod.default);
  if (typeof factory !== 'function') throw new TypeError(`protection module ${spec.module} exports no factory`);
  return factory;
}

let statsSource = null; // object with stats() when the protection has one

function buildExpress(express) {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  if (protection === 'toobusy') {
    const toobusy = require('toobusy-js');
    toobusy.maxLag(popts.maxLag || 50);
    toobusy.interval(popts.interval || 50);
    app.use((req, res, next) => {
      if (toobusy()) {
        res.set('retry-after', '1');
        res.status(503).send('Server too busy');
      } else next();
    });
  } else if (protection === 'tiergate' && cfg.outsideApp) {
    // Added below, around the app: a refusal never enters Express.
  } else if (protection === 'tiergate') {
    const { gatekeeper } = loadTiergate();
    const mw = gatekeeper(popts);
    statsSource = mw;
    app.use(mw);
    if (gateOpts) app.use(loadTiergate().concurrencyGate(gateOpts));
  } else if (protection === 'noop') {
    app.use((req, res, next) => next()); // what any one middleware costs Express
  } else if (protection === 'express-rate-limit') {
    const { rateLimit } = require('express-rate-limit');
    app.use(rateLimit({ windowMs: 60_000, limit: popts.limit || 1e9, standardHeaders: 'draft-8', legacyHeaders: false }));
  } else if (typeof protection === 'object') {
    const made = customFactory()(popts);
    statsSource = made;
    if (made && typeof made.admit === 'function') {
      app.use(require('../../lib/adapters').expressMiddleware(made));
    } else if (typeof made === 'function') {
      app.use(made);
    } else throw new TypeError('custom protection factory returned neither a guard nor a middleware');
  } else if (protection !== 'none') {
    throw new Error(`protection ${protection} not available for express`);
  }
  app.get('/work', (req, res) => res.send(timedWork()));
  app.get('/hello', (req, res) => res.send('hello world'));
  const item = (req, res) => res.send(workIters > 0 ? work(workIters, workKind) : 'item');
  app.get('/api/items', item);
  app.get('/api/items/:id', item);
  if (protection === 'tiergate' && cfg.outsideApp) {
    const wrapped = loadTiergate().gatekeeper.http(popts, app);
    statsSource = wrapped;
    return http.createServer(wrapped);
  }
  return http.createServer(app);
}

async function buildFastify() {
  const fastify = require('fastify')({ logger: false, keepAliveTimeout: 60_000 });
  if (protection === 'under-pressure') {
    await fastify.register(require('@fastify/under-pressure'), {
      maxEventLoopDelay: popts.maxEventLoopDelay || 50,
      sampleInterval: popts.sampleInterval || 50,
      retryAfter: 1,
    });
  } else if (protection === 'tiergate') {
    const { tiergatePlugin } = loadTiergate();
    await fastify.register(tiergatePlugin, popts);
    if (gateOpts) await fastify.register(loadTiergate().concurrencyGatePlugin, gateOpts);
    statsSource = { stats: () => (fastify.tiergate && fastify.tiergate.stats ? fastify.tiergate.stats() : null) };
    if (cfg.heldLagMs !== undefined) fastify.addHook('onReady', async () => fastify.tiergate.injectHealth({ lagMs: cfg.heldLagMs }));
  } else if (protection === 'fastify-rate-limit') {
    await fastify.register(require('@fastify/rate-limit'), { max: popts.max || 1e9, timeWindow: 60_000 });
  } else if (typeof protection === 'object') {
    const made = customFactory()(popts);
    statsSource = made;
    if (!made || typeof made.admit !== 'function') throw new TypeError('custom protection for fastify must return a guard');
    await fastify.register(require('../../lib/adapters').fastifyPlugin(() => made, 'benchGuard'));
  } else if (protection !== 'none') {
    throw new Error(`protection ${protection} not available for fastify`);
  }
  fastify.get('/work', async () => timedWork());
  fastify.get('/hello', async () => 'hello world');
  await fastify.ready();
  return fastify.server;
}

function buildHttp() {
  const handler = (req, res) => {
    if (req.url === '/work') {
      const body = timedWork();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(body);
    } else {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello world');
    }
  };
  if (protection === 'none') return http.createServer(handler);
  if (protection === 'tiergate') {
    const { gatekeeper } = loadTiergate();
    const inner = gateOpts ? loadTiergate().concurrencyGate.http(gateOpts, handler) : handler;
    const wrapped = gatekeeper.http(popts, inner);
    statsSource = wrapped;
    return http.createServer(wrapped);
  }
  if (typeof protection === 'object') {
    const made = customFactory()(popts);
    statsSource = made;
    return http.createServer(require('../../lib/adapters').httpHandler(made, handler));
  }
  throw new Error(`protection ${protection} not available for http`);
}

async function main() {
  let server;
  if (framework === 'express') server = buildExpress(require('express'));
  else if (framework === 'express4') server = buildExpress(require('express4'));
  else if (framework === 'fastify') server = await buildFastify();
  else if (framework === 'http') server = buildHttp();
  else throw new Error(`unknown framework ${framework}`);
  server.keepAliveTimeout = 60_000; // the generator keeps a warm pool of connections across phases
  if (record) server.prependListener('request', recorder);
  if (trace) server.prependListener('request', tracer);
  server.on('connection', () => {
    if (windowOpen) connections++;
  });
  if (!server.listening) await new Promise((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: cfg.backlog || 511 }, resolve));
  if (cfg.heldLagMs !== undefined && framework !== 'fastify') statsSource.injectHealth({ lagMs: cfg.heldLagMs });

  let profiler = null;
  process.on('message', (msg) => {
    const reply = (result) => process.send({ id: msg.id, result });
    if (msg.cmd === 'window-start') {
      histogram.reset();
      lagN = 0;
      firstRejectAt = 0;
      rejected = 0;
      handled = 0;
      connections = 0;
      controller = [];
      for (const k of Object.keys(traceRows)) traceRows[k] = [];
      traceStats.length = 0;
      windowOpen = true;
      controllerOpen = true;
      reply({ at: nowAbs() });
    } else if (msg.cmd === 'controller-end') {
      controllerOpen = false;
      reply({ controller });
    } else if (msg.cmd === 'window-end') {
      windowOpen = false;
      controllerOpen = Boolean(msg.keepController);
      const ms = (ns) => ns / 1e6;
      reply({
        at: nowAbs(),
        lag: {
          // monitorEventLoopDelay reports delay including the resolution; subtract it like drift.
          p50: Math.max(0, ms(histogram.percentile(50)) - SAMPLE_MS),
          p99: Math.max(0, ms(histogram.percentile(99)) - SAMPLE_MS),
          max: Math.max(0, ms(histogram.max) - SAMPLE_MS),
          mean: Math.max(0, ms(histogram.mean) - SAMPLE_MS),
        },
        samples: { t: Array.from(lagT.subarray(0, lagN)), v: Array.from(lagV.subarray(0, lagN)) },
        controller,
        trace: trace ? { ...traceRows, stats: traceStats } : undefined,
        firstRejectAt,
        rejected,
        handled,
        connections,
      });
    } else if (msg.cmd === 'profile-start') {
      // A CPU profile of this process from here to profile-stop (overload.js --cpu-prof).
      profiler = new inspector.Session();
      profiler.connect();
      profiler.post('Profiler.enable', () => profiler.post('Profiler.start', () => reply({})));
    } else if (msg.cmd === 'profile-stop') {
      profiler.post('Profiler.stop', (err, res) => {
        if (!err) fs.writeFileSync(msg.file, JSON.stringify(res.profile));
        profiler.disconnect();
        profiler = null;
        reply({ error: err ? String(err.message) : null });
      });
    } else if (msg.cmd === 'work') {
      reply({ count: workCount, ms: workMsSum });
    } else if (msg.cmd === 'cpu') {
      const u = process.cpuUsage();
      reply({ userUs: u.user, systemUs: u.system });
    } else if (msg.cmd === 'guard-stats') {
      let stats;
      try {
        stats = statsSource && typeof statsSource.stats === 'function' ? statsSource.stats() : null;
      } catch (err) {
        stats = { error: err.message };
      }
      reply(JSON.parse(JSON.stringify(stats ?? null)));
    } else if (msg.cmd === 'exit') {
      server.closeAllConnections?.();
      server.close();
      process.exit(0);
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ ready: true, port: server.address().port, pid: process.pid });
}

main().catch((err) => {
  process.send?.({ error: err.stack || String(err) });
  process.exit(1);
});

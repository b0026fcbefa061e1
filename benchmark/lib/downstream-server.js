'use strict';
// bench:downstream's service, run as a child process by scenario.js's startServer({ script }): I/O-bound
// routes whose handlers wait on a downstream, behind one protection. Same IPC commands as server.js
// (window-start, window-end, guard-stats, exit), so scenario.js's runLoad drives it.
//
// Config (JSON in TG_BENCH_SERVER):
//   { framework: 'express' | 'fastify',
//     protection: 'none' | 'toobusy' | 'under-pressure' (Fastify) | 'bulkhead' | 'gate-auto' | 'gatekeeper',
//     options: {...},           // the gatekeeper's options ('gate-auto', 'gatekeeper'), toobusy's or
//                               // under-pressure's ({ maxLag | maxEventLoopDelay, interval })
//     gate: {...},              // 'gate-auto': the concurrencyGate after the gatekeeper
//     bulkhead: { limit, maxQueue },   // 'bulkhead': around every downstream call (lib/bulkhead.js)
//     pgUrl, poolSize, pgSleepMs,      // GET /pg: SELECT pg_sleep through a pg Pool of poolSize
//     downstreamPort,                  // GET /http: a GET to the slow downstream (slow-downstream.js)
//     cpuIters }                       // GET /mixed: work(cpuIters) split around the /http call
//
// window-end also returns a sample every 50 ms of: requests in the server (arrived, not yet answered
// or closed), downstream calls in flight, the pg pool's waiting count, refusals answered so far
// (429/503/408) and the learned concurrency limit when the protection has one (the gatekeeper's
// stats().concurrency.limit, or concurrencyGate's stats().limit).
const http = require('node:http');
const path = require('node:path');
const { monitorEventLoopDelay, performance } = require('node:perf_hooks');
const { work } = require('./work');
const { bulkhead } = require('./bulkhead');

const cfg = JSON.parse(process.env.TG_BENCH_SERVER || '{}');
const framework = cfg.framework || 'express';
const protection = cfg.protection || 'none';
const popts = cfg.options || {};
const nowAbs = () => performance.timeOrigin + performance.now();
const SAMPLE_MS = 50;
const MAX_SAMPLES = 10_000;

// ---- the downstreams ----
let pool = null;
if (cfg.pgUrl) {
  const { Pool } = require('pg');
  pool = new Pool({ connectionString: cfg.pgUrl, max: cfg.poolSize || 4 });
  pool.on('error', () => {}); // a backend ended at exit: not this benchmark's concern
}
const downstreamAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
const bh = protection === 'bulkhead' ? bulkhead(cfg.bulkhead) : null;
let downstreamInFlight = 0;

function httpGet(port) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: downstreamAgent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c) => (body += c)).on('end', () => resolve(body)).on('error', reject);
    });
    req.on('error', reject);
  });
}

/** One downstream call, counted, through the bulkhead when there is one. */
async function call(fn) {
  const counted = async () => {
    downstreamInFlight++;
    try {
      return await fn();
    } finally {
      downstreamInFlight--;
    }
  };
  return bh ? bh.run(counted) : counted();
}

const sleepSec = (cfg.pgSleepMs ?? 20) / 1000;
const ROUTES = {
  '/pg': async () => {
    await call(() => pool.query('SELECT pg_sleep($1)', [sleepSec]));
    return 'ok';
  },
  '/http': () => call(() => httpGet(cfg.downstreamPort)),
  // ~1 ms of CPU around the downstream wait: parse and build the call, then render its answer.
  '/mixed': async () => {
    work(Math.ceil((cfg.cpuIters || 1) / 2));
    const body = await call(() => httpGet(cfg.downstreamPort));
    work(Math.floor((cfg.cpuIters || 1) / 2));
    return body;
  },
  '/hello': async () => 'hello world',
};

/** A route's answer, or 503 when the bulkhead refused the call (what a user's error handler sends). */
async function answer(route, send) {
  try {
    send(200, await ROUTES[route]());
  } catch (err) {
    if (err.code === 'BULKHEAD_FULL') send(503, 'busy', { 'retry-after': '1' });
    else send(500, String(err.message));
  }
}

// ---- protections ----
// `tiergateDir`: another checkout's package (an A/B against another build in the same run).
const loadTiergate = () => require(cfg.tiergateDir ? path.resolve(cfg.tiergateDir) : path.join(__dirname, '..', '..'));
let statsSource = null; // the gatekeeper (stats())
let gateSource = null; // concurrencyGate (stats().limit)

function buildExpress() {
  const express = require('express');
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  if (protection === 'toobusy') {
    const toobusy = require('toobusy-js');
    toobusy.maxLag(popts.maxLag);
    toobusy.interval(popts.interval);
    app.use((req, res, next) => {
      if (toobusy()) res.set('retry-after', '1').status(503).send('Server too busy');
      else next();
    });
  } else if (protection === 'gatekeeper' || protection === 'gate-auto') {
    const tg = loadTiergate();
    const gk = tg.gatekeeper(popts);
    statsSource = gk;
    app.use(gk);
    if (protection === 'gate-auto') {
      const gate = tg.concurrencyGate(cfg.gate);
      gateSource = gate;
      app.use(gate);
    }
  } else if (protection !== 'none' && protection !== 'bulkhead') {
    throw new Error(`protection ${protection} not available on Express`);
  }
  for (const route of Object.keys(ROUTES)) {
    app.get(route, (req, res) => answer(route, (status, body, headers) => res.status(status).set(headers || {}).send(body)));
  }
  return http.createServer(app);
}

async function buildFastify() {
  const fastify = require('fastify')({ logger: false, keepAliveTimeout: 60_000 });
  if (protection === 'under-pressure') {
    await fastify.register(require('@fastify/under-pressure'), { maxEventLoopDelay: popts.maxEventLoopDelay, sampleInterval: popts.sampleInterval, retryAfter: 1 });
  } else if (protection !== 'none' && protection !== 'bulkhead') {
    throw new Error(`protection ${protection} not available on Fastify`);
  }
  for (const route of Object.keys(ROUTES)) {
    fastify.get(route, (req, reply) => answer(route, (status, body, headers) => reply.code(status).headers(headers || {}).send(body)));
  }
  await fastify.ready();
  return fastify.server;
}

/** The learned concurrency limit now, or null when the protection has none. */
function learnedLimit() {
  try {
    const c = statsSource?.stats()?.concurrency;
    if (c && typeof c.limit === 'number') return c.limit;
    if (gateSource) return gateSource.stats().limit;
  } catch {
    // a stats() that throws (a protection closing) has no limit to plot
  }
  return null;
}

// ---- the window: loop lag (histogram) and the samples above ----
const histogram = monitorEventLoopDelay({ resolution: 10 });
histogram.enable();
let windowOpen = false;
let inFlight = 0;
let refused = 0; // 429/503/408 answered since window-start
let samples = [];
const sampler = setInterval(() => {
  if (!windowOpen || samples.length >= MAX_SAMPLES) return;
  samples.push({ t: nowAbs(), inFlight, downstream: downstreamInFlight, waiting: pool ? pool.waitingCount : null, refused, limit: learnedLimit() });
  if (process.env.TG_DS_TRACE && statsSource) { const c = statsSource.stats().concurrency; require('fs').appendFileSync(process.env.TG_DS_TRACE, JSON.stringify({ t: Math.round(nowAbs() % 1e6), inFlight, ds: downstreamInFlight, refused, lim: c.limit, infl: c.inFlight, w: c.waiting, b: +c.baselineMs.toFixed(1), ty: +c.typicalMs.toFixed(1), thr: Math.round(c.throughput), q: c.queueing, pr: c.probes, ws: c.waitShed }) + '\n'); }
}, SAMPLE_MS);
sampler.unref();

function counter(req, res) {
  inFlight++;
  let done = false;
  const end = () => {
    if (done) return;
    done = true;
    inFlight--;
    if (res.statusCode === 503 || res.statusCode === 429 || res.statusCode === 408) refused++;
  };
  res.once('finish', end);
  res.once('close', end);
}

async function main() {
  const server = framework === 'fastify' ? await buildFastify() : buildExpress();
  server.keepAliveTimeout = 60_000;
  server.prependListener('request', counter);
  if (pool) await Promise.all(Array.from({ length: cfg.poolSize || 4 }, () => pool.query('SELECT 1'))); // connections open before the clock starts
  if (!server.listening) await new Promise((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 511 }, resolve));
  process.on('message', (msg) => {
    const reply = (result) => process.send({ id: msg.id, result });
    if (msg.cmd === 'window-start') {
      histogram.reset();
      samples = [];
      refused = 0;
      windowOpen = true;
      reply({ at: nowAbs() });
    } else if (msg.cmd === 'window-end') {
      windowOpen = false;
      const ms = (ns) => Math.max(0, ns / 1e6 - 10);
      reply({
        at: nowAbs(),
        lag: { p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max), mean: ms(histogram.mean) },
        samples: { t: [], v: [] }, // scenario.js's lag timeline: not drawn here (the loop stays idle)
        downstream: samples,
        rejected: refused,
        bulkhead: bh ? bh.stats() : null,
      });
    } else if (msg.cmd === 'guard-stats') {
      let stats;
      try {
        stats = { gatekeeper: statsSource ? statsSource.stats() : null, gate: gateSource ? gateSource.stats() : null, bulkhead: bh ? bh.stats() : null };
      } catch (err) {
        stats = { error: err.message };
      }
      reply(JSON.parse(JSON.stringify(stats)));
    } else if (msg.cmd === 'exit') {
      server.closeAllConnections?.();
      server.close();
      (pool ? pool.end().catch(() => {}) : Promise.resolve()).finally(() => process.exit(0));
      setTimeout(() => process.exit(0), 1000).unref();
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ ready: true, port: server.address().port, pid: process.pid });
}

main().catch((err) => {
  process.send?.({ error: err.stack || String(err) });
  process.exit(1);
});

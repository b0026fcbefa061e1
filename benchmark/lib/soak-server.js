'use strict';
// The soak's server, run as a child process by benchmark/soak.js so that its memory is measured alone
// and it has a core of its own. Express with the gatekeeper in front of the concurrency gate, routes
// that mix CPU work with async waits, a streamed response for slow readers, a body reader for slow
// uploads and routes that fail on purpose (their 500s must give the slot back too).
//
// Config arrives as JSON in TG_SOAK_SERVER; the parent talks over IPC ({ id, cmd } -> { id, result }):
//   sample  memory, the gate's and the gatekeeper's stats, connections, handles, errors so far
//   close   stop listening, close the gate, let the process exit by itself (it must: nothing may hold it)
// Every warning, uncaught exception and unhandled rejection is recorded and reported in samples; none
// ends the process (the soak wants to see them all, and then fail).
const http = require('node:http');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { work, calibrate } = require('./work');

const cfg = JSON.parse(process.env.TG_SOAK_SERVER || '{}');
const { gatekeeper, concurrencyGate } = require(path.join(__dirname, '..', '..')); // the public API only

// ---- errors: everything the process reports is kept (bounded) and counted ----
const MAX_KEPT_ERRORS = 50;
const errors = { warnings: 0, uncaught: 0, unhandled: 0, handler: 0, list: [] };
function keep(kind, err) {
  errors[kind]++;
  if (errors.list.length < MAX_KEPT_ERRORS) {
    errors.list.push({ kind, at: Date.now(), name: err && err.name, code: err && err.code, message: String(err && err.message || err), stack: err && err.stack ? String(err.stack).split('\n').slice(0, 6).join('\n') : undefined });
  }
}
process.on('warning', (w) => keep('warnings', w));
process.on('uncaughtException', (err) => keep('uncaught', err));
process.on('unhandledRejection', (err) => keep('unhandled', err));

// ---- configuration of the guards (the parent's load names these tiers, routes and headers) ----
// The key flood's tiers: one bucket per x-api-key value, a few requests each, slow refill; the cap on
// keys (and idle eviction) is what keeps millions of distinct keys from growing memory. 'partner' is
// protected, so its keys reach the per-key buckets even while the shed controller sheds 'api'.
const PER_KEY = { limit: 3, windowMs: 60000, maxKeys: cfg.maxKeys || 50000, idleTtlMs: 30000 };
const TIERS = [
  { name: 'critical', protected: true, limit: 5000, windowMs: 1000 },
  { name: 'partner', protected: true, limit: 20000, windowMs: 1000, perKey: PER_KEY },
  { name: 'standard', limit: 2000, windowMs: 1000 },
  { name: 'api', limit: 20000, windowMs: 1000, perKey: PER_KEY },
  // A small pool, so surges also meet 'tier-full' 503s.
  { name: 'background', limit: 150, windowMs: 1000, burst: 200 },
];
const ROUTES = [
  { path: '/api', tier: 'api' },
  { path: '/partner', tier: 'partner' },
  { path: '/checkout', tier: 'critical' },
  { method: 'GET', path: '/reports', tier: 'background' },
];
const gk = gatekeeper({
  tiers: TIERS,
  trustTierHeader: true, // the load plays the authenticating gateway that sets x-user-tier
  routes: ROUTES,
  key: { header: 'x-api-key' }, // requests without it are keyed by the client IP
  // As if behind one proxy: the load's hostile X-Forwarded-For values then go through the parser that
  // picks the client IP (with trustProxy off the gatekeeper would rightly warn about them, once).
  trustProxy: 1,
  shed: {},
});
const gate = concurrencyGate({
  maxConcurrent: cfg.maxConcurrent || 16,
  maxQueue: 64,
  queueTimeoutMs: 1500,
  codel: true,
  tiers: TIERS.map((t) => ({ name: t.name, protected: Boolean(t.protected) })),
  trustTierHeader: true,
  routes: ROUTES,
});

// ---- server-side view of every response ----
const statuses = Object.create(null); // status -> count of finished responses
let closedUnfinished = 0; // responses whose connection went before they finished
function countResponse(req, res) {
  let done = false;
  res.once('finish', () => {
    done = true;
    statuses[res.statusCode] = (statuses[res.statusCode] || 0) + 1;
  });
  res.once('close', () => {
    if (!done) closedUnfinished++;
  });
}

// ---- the app ----
const express = require('express');
const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.use(gk);
app.use(gate);

const iters = calibrate(cfg.workMs || 1, 'pbkdf2'); // ~1 ms of CPU per work() call here
const intParam = (v, lo, hi, dflt) => {
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : dflt;
};

// CPU, an async wait, CPU again: the shape of a handler that calls a database between computations.
async function mixed(req, res) {
  const cpu = intParam(req.query.cpu, 0, 8, 1);
  for (let i = 0; i < cpu; i++) work(iters, 'pbkdf2');
  await sleep(intParam(req.query.wait, 0, 2000, 10));
  const out = work(iters, 'pbkdf2');
  res.send(`ok ${out}\n`);
}
app.get('/work', mixed);
app.get('/checkout/:item', mixed);
app.get('/reports/:name', mixed);
app.get('/hello', (req, res) => res.send('hello\n'));
app.get('/api/ping', (req, res) => res.send('pong\n'));
app.get('/partner/ping', (req, res) => res.send('pong\n'));
app.get('/slow', async (req, res) => {
  await sleep(intParam(req.query.ms, 0, 5000, 200));
  if (!res.destroyed) res.send('slow\n');
});
// Streams `kb` KiB in 16 KiB chunks, honouring backpressure; stops when the client goes.
app.get('/big', async (req, res) => {
  const chunk = Buffer.alloc(16 * 1024, 0x61);
  let left = intParam(req.query.kb, 16, 8192, 1024) / 16;
  res.setHeader('content-type', 'application/octet-stream');
  while (left-- > 0 && !res.destroyed) {
    if (!res.write(chunk)) {
      await new Promise((resolve) => {
        const done = () => { res.off('drain', done); res.off('close', done); resolve(); };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  if (!res.destroyed) res.end();
});
// Reads the whole body (at most 64 KiB), then answers with its length.
app.post('/upload', (req, res) => {
  let n = 0;
  req.on('data', (b) => {
    n += b.length;
    if (n > 64 * 1024) {
      res.status(413).set('connection', 'close').send('too large\n');
      req.destroy();
    }
  });
  req.on('end', () => {
    if (!res.headersSent) res.send(`got ${n}\n`);
  });
});
const expected = (message) => Object.assign(new Error(message), { soakExpected: true });
app.get('/fail', () => {
  throw expected('deliberate failure');
});
app.get('/fail-async', async () => {
  await sleep(5);
  throw expected('deliberate async failure');
});
let expectedFailures = 0;
let clientErrors = 0;
// eslint-disable-next-line no-unused-vars
app.use((err, req, res, next) => {
  if (err && err.soakExpected) expectedFailures++;
  else if (err && Number.isInteger(err.status) && err.status < 500) clientErrors++;
  else keep('handler', err);
  if (res.headersSent) res.destroy();
  else res.status(err && Number.isInteger(err.status) ? err.status : 500).send('error\n');
});

// Short timeouts bound slowloris clients and slow uploads; checked every second (node's default: 30 s).
const server = http.createServer({
  headersTimeout: cfg.headersTimeoutMs || 8000,
  requestTimeout: cfg.requestTimeoutMs || 15000,
  connectionsCheckingInterval: 1000,
  keepAliveTimeout: 5000,
}, app);
server.prependListener('request', countResponse);
let connections = 0;
let connectionsTotal = 0;
server.on('connection', (socket) => {
  connections++;
  connectionsTotal++;
  socket.once('close', () => connections--);
});

function gateFigures() {
  const s = gate.stats();
  return {
    inFlight: s.inFlight, queued: s.queued, peakInFlight: s.peakInFlight, peakQueued: s.peakQueued,
    admitted: s.admitted, admittedFromQueue: s.admittedFromQueue, released: s.released, rejected: s.rejected,
    displaced: s.displaced, timeout: s.timeout, codel: s.codel, abandoned: s.abandoned,
  };
}

function gkFigures() {
  const s = gk.stats();
  const tiers = {};
  for (const [name, t] of Object.entries(s.tiers)) {
    tiers[name] = { admitted: t.admitted, shed: t.shed, turnShed: t.turnShed, tierFull: t.tierFull, rateLimited: t.rateLimited, refillScale: t.refillScale };
  }
  const keys = {};
  for (const t of gk.ledger.snapshot()) keys[t.name] = t.keys;
  return { tiers, keys, lagMs: s.lagMs, p99LagMs: s.p99LagMs, elu: s.elu, pressure: s.pressure, cause: s.cause, episodes: s.episodes };
}

function sample() {
  const m = process.memoryUsage();
  return {
    at: Date.now(),
    cpu: process.cpuUsage(), // microseconds of user and system time since the start
    rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers,
    connections, connectionsTotal,
    resources: process.getActiveResourcesInfo().length,
    gate: gateFigures(),
    gatekeeper: gkFigures(),
    statuses: { ...statuses }, closedUnfinished, expectedFailures, clientErrors,
    errors: { warnings: errors.warnings, uncaught: errors.uncaught, unhandled: errors.unhandled, handler: errors.handler, list: errors.list },
  };
}

process.on('message', (msg) => {
  const reply = (result) => process.send({ id: msg.id, result });
  if (msg.cmd === 'sample') {
    const s = sample();
    if (msg.gc && typeof global.gc === 'function') {
      global.gc();
      s.rssAfterGc = process.memoryUsage.rss();
      s.heapUsedAfterGc = process.memoryUsage().heapUsed;
    }
    reply(s);
  } else if (msg.cmd === 'close') {
    server.close(() => {
      gate.close();
      // What is still alive now would keep the process from exiting: the parent reports it if so.
      reply({ resources: process.getActiveResourcesInfo() });
      process.disconnect(); // the IPC channel is the last thing holding the loop
    });
    server.closeIdleConnections();
  }
});

server.listen({ port: 0, host: '127.0.0.1' }, () => {
  process.send({ ready: true, port: server.address().port, iters, pid: process.pid });
});

'use strict';
// One scenario table, run against Express 4, Express 5, Fastify 5, Koa 2, Koa 3 and node:http: every adapter must
// give the same statuses, headers and bodies, and the gate the same counts.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const express4 = require('express4');
const express5 = require('express');
const fastify = require('fastify');
const Koa = require('koa');
const Koa3 = require('koa3');
const KoaRouter = require('@koa/router');
const koaMount = require('koa-mount');
const { gatekeeper, tiergatePlugin, concurrencyGatePlugin, mintTierToken } = require('../..');
const { listen, close, request } = require('../helpers/http');

const SECRET = 'frameworks-secret-0123456789-abcdef';
const BIG = 1e9;

const OPTIONS = {
  tiers: [
    { name: 'critical', protected: true, limit: BIG, windowMs: 1000 },
    { name: 'standard', limit: BIG, windowMs: 1000, perKey: { limit: 2, windowMs: 2000000 } },
    { name: 'background', limit: BIG, windowMs: 1000 },
  ],
  routes: [
    { method: 'POST', path: '/checkout', tier: 'critical' },
    { path: '/reports/', tier: 'background' },
  ],
  defaultTier: 'standard',
  tierSecret: SECRET,
  key: { header: 'x-user-id' },
  rateLimitHeaders: 'both',
  // 50..150 ms: background throttled over 50..100, standard over 100..150; no hold, instant recovery,
  // no integral term (each injected lag gives exactly its proportional pressure).
  // turnBudgetMs 0: the table is about the refill scales; under an injected episode the turn budget would
  // also shed a request that happens to arrive late in a busy turn of this (shared) test process.
  shed: { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, hysteresisMs: 10, integralMs: 0, confirmMs: 0, turnBudgetMs: 0 },
};

const signed = mintTierToken(SECRET, 'critical', { ttlSec: 600 });
const expired = mintTierToken(SECRET, 'critical', { expiresAt: Math.floor(Date.now() / 1000) - 10 });
const problem = (type) => (r) => {
  // Fastify adds a charset parameter to JSON media types; the type is the same.
  assert.match(r.headers['content-type'], /^application\/problem\+json(; charset=utf-8)?$/);
  assert.equal(r.json.type, `urn:tiergate:problem:${type}`);
  assert.ok(Number(r.headers['retry-after']) >= 1);
};
const ok = (r) => assert.deepEqual(r.json, { ok: true });

// [description, health to inject before (or null), request, expected status, extra check]
const SCENARIOS = [
  ['healthy: default tier admitted', { lagMs: 0 }, { path: '/hello', headers: { 'x-user-id': 'u1' } }, 200, ok],
  ['healthy: background route admitted', null, { path: '/reports/q3' }, 200, ok],
  ['per-key quota: second request still admitted', null, { path: '/hello', headers: { 'x-user-id': 'u1' } }, 200, ok],
  ['per-key quota: third request is 429 with rate-limit fields', null, { path: '/hello', headers: { 'x-user-id': 'u1' } }, 429, (r) => {
    problem('rate-limited')(r);
    assert.equal(r.headers['ratelimit-policy'], '"standard";q=2;w=2000');
    assert.match(r.headers.ratelimit, /^"standard";r=0;t=\d+$/);
    assert.equal(r.headers['x-ratelimit-limit'], '2');
    assert.equal(r.headers['x-ratelimit-remaining'], '0');
  }],
  ['lag 100: background shed with 503', { lagMs: 100 }, { path: '/reports/q3' }, 503, problem('overloaded')],
  ['lag 100: standard still served', null, { path: '/hello', headers: { 'x-user-id': 'u2' } }, 200, ok],
  ['lag 150: standard shed too', { lagMs: 150 }, { path: '/hello', headers: { 'x-user-id': 'u3' } }, 503, problem('overloaded')],
  ['lag 150: a forged critical header is not honoured', null, { path: '/hello', headers: { 'x-user-tier': 'critical' } }, 503, problem('overloaded')],
  ['lag 150: a signed critical token is honoured', null, { path: '/hello', headers: { 'x-user-tier': signed } }, 200, ok],
  ['lag 150: an expired token is not', null, { path: '/hello', headers: { 'x-user-tier': expired } }, 503, problem('overloaded')],
  ['lag 150: the critical route is served', null, { method: 'POST', path: '/checkout' }, 200, ok],
  ['stall: critical route still served', { stalled: true }, { method: 'POST', path: '/checkout' }, 200, ok],
  ['stall: standard shed', null, { path: '/hello', headers: { 'x-user-id': 'u4' } }, 503, problem('overloaded')],
  ['stall: background shed', null, { path: '/reports/q4' }, 503, problem('overloaded')],
  ['recovered: background served again', { lagMs: 0 }, { path: '/reports/q3' }, 200, ok],
];

const EXPECTED_COUNTS = {
  critical: { admitted: 3, shed: 0, rateLimited: 0 },
  standard: { admitted: 3, shed: 4, rateLimited: 1 },
  background: { admitted: 2, shed: 2, rateLimited: 0 },
};

function reply(res) {
  res.statusCode = 200;
  res.setHeader('content-type', 'application/json');
  res.end('{"ok":true}');
}

/** The scenario table's routes on an Express app. */
function expressRoutes(app) {
  app.get('/hello', (req, res) => res.json({ ok: true }));
  app.post('/checkout', (req, res) => res.json({ ok: true }));
  app.get('/reports/:id', (req, res) => res.json({ ok: true }));
}

/** The scenario table's routes on a Koa router. */
function koaRoutes(router) {
  const json = (ctx) => {
    ctx.body = { ok: true };
  };
  return router.get('/hello', json).post('/checkout', json).get('/reports/:id', json);
}

/** The same app on either Koa major (`Koa`: the package's class). */
async function koaApp(Koa) {
  const app = new Koa();
  const gate = gatekeeper.koa(OPTIONS);
  app.use(gate);
  app.use(koaRoutes(new KoaRouter()).routes());
  const server = http.createServer(app.callback());
  return { gate, server, port: await listen(server), stop: () => close(server) };
}

/** The same app on either Express major (`express` is the package's factory). */
async function expressApp(express) {
  const app = express();
  const gate = gatekeeper(OPTIONS);
  app.use(gate);
  expressRoutes(app);
  const server = http.createServer(app);
  return { gate, server, port: await listen(server), stop: () => close(server) };
}

/** The same routes with the gate in front of the app (docs/gatekeeper.md: where floods are the risk). */
async function expressInside(express) {
  const app = express();
  const entered = { count: 0 };
  app.use((req, res, next) => {
    entered.count++;
    next();
  });
  expressRoutes(app);
  const gate = gatekeeper.http(OPTIONS, app);
  const server = http.createServer(gate);
  return { gate, server, entered, port: await listen(server), stop: () => close(server) };
}

const FRAMEWORKS = {
  'express 4': () => expressApp(express4),
  'express 5': () => expressApp(express5),
  'express 4 inside gatekeeper.http': () => expressInside(express4),
  'express 5 inside gatekeeper.http': () => expressInside(express5),
  async 'fastify 5'() {
    const app = fastify();
    await app.register(tiergatePlugin, OPTIONS);
    app.get('/hello', async () => ({ ok: true }));
    app.post('/checkout', async () => ({ ok: true }));
    app.get('/reports/:id', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { gate: app.tiergate, port: app.server.address().port, stop: () => app.close() };
  },
  'koa 2': () => koaApp(Koa),
  'koa 3': () => koaApp(Koa3),
  async 'node:http'() {
    const gate = gatekeeper.http(OPTIONS, (req, res) => {
      const path = req.url.split('?')[0];
      if ((req.method === 'GET' && (path === '/hello' || path.startsWith('/reports/'))) || (req.method === 'POST' && path === '/checkout')) return reply(res);
      res.statusCode = 404;
      res.end();
    });
    const server = http.createServer(gate);
    return { gate, server, port: await listen(server), stop: () => close(server) };
  },
};

for (const [name, start] of Object.entries(FRAMEWORKS)) {
  test(`scenario table on ${name}`, async (t) => {
    const app = await start();
    t.after(() => app.stop());
    for (const [description, health, req, status, check] of SCENARIOS) {
      if (health) app.gate.injectHealth(health);
      const headers = { ...req.headers };
      if (req.method === 'POST') headers['content-length'] = '0';
      const r = await request(app.port, { method: req.method || 'GET', path: req.path, headers });
      assert.equal(r.status, status, `${name}: ${description}: status`);
      check(r);
    }
    const s = app.gate.stats();
    for (const [tier, counts] of Object.entries(EXPECTED_COUNTS)) {
      const got = s.tiers[tier];
      assert.deepEqual({ admitted: got.admitted, shed: got.shed, rateLimited: got.rateLimited }, counts, `${name}: counts of ${tier}`);
    }
  });
}

test('Express inside gatekeeper.http: a refused request never enters the app, an admitted one does', async (t) => {
  const app = await expressInside(express5);
  t.after(() => app.stop());
  app.gate.injectHealth({ stalled: true });
  const shed = await request(app.port, { path: '/reports/q1' });
  assert.equal(shed.status, 503);
  assert.equal(app.entered.count, 0, 'the shed request did not run Express');
  const served = await request(app.port, { method: 'POST', path: '/checkout', headers: { 'content-length': '0' } });
  assert.equal(served.status, 200);
  assert.deepEqual(served.json, { ok: true });
  assert.equal(app.entered.count, 1);
});

test('fastify: the gate is decorated and plugin options are validated', async () => {
  const app = fastify();
  await assert.rejects(async () => {
    await app.register(tiergatePlugin, { shed: { targetLagMs: -1 } });
    await app.ready();
  }, /shed\.targetLagMs/);
  const ok2 = fastify();
  await ok2.register(tiergatePlugin, { shed: false });
  await ok2.ready();
  assert.equal(typeof ok2.tiergate.stats, 'function');
  await ok2.close();
});

test('Fastify: a route sets its own tier, or opts out, in its config; a bad one fails at registration', async () => {
  const app = fastify({ logger: false });
  const seen = [];
  await app.register(tiergatePlugin, { defaultTier: 'standard', shed: false, onDecision: (info) => seen.push(`${info.tier}:${info.tierSource}`) });
  await app.register(concurrencyGatePlugin, { maxConcurrent: 4 });
  app.get('/pay', { config: { tiergate: { tier: 'critical' }, concurrencyGate: { tier: 'critical' } } }, async () => 'pay');
  app.get('/health', { config: { tiergate: false, concurrencyGate: false } }, async () => 'up');
  app.get('/plain', async () => 'plain');
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const port = app.server.address().port;
    for (const path of ['/pay', '/health', '/plain']) assert.equal((await request(port, { path })).status, 200);
    assert.deepEqual(seen, ['critical:route', 'standard:default']);
    const gate = app.concurrencyGate.stats();
    assert.equal(gate.tiers.critical.admitted, 1);
    assert.equal(gate.admitted, 2, '/health skipped the gate');
  } finally {
    await app.close();
  }
  const bad = fastify({ logger: false });
  await bad.register(tiergatePlugin, { shed: false });
  assert.throws(() => bad.get('/x', { config: { tiergate: { tier: 'gold' } } }, async () => 'x'), (err) => err.code === 'ERR_TIERGATE_INVALID_OPTION' && /GET \/x: config\.tiergate\.tier must be one of the tiers/.test(err.message));
  await bad.close();
});

// Mounted under a prefix, the app below sees the path without it (Express: req.url; koa-mount:
// ctx.path); route rules are written for the full path the client asked for, under either framework.
const MOUNTED = {
  async 'express 5 app.use(prefix)'(options) {
    const inner = express5();
    inner.use(gatekeeper(options));
    expressRoutes(inner);
    const app = express5();
    app.use('/api', inner);
    const server = http.createServer(app);
    return { port: await listen(server), stop: () => close(server) };
  },
  async 'koa 2 koa-mount(prefix)'(options) {
    const inner = new Koa();
    inner.use(gatekeeper.koa(options));
    inner.use(koaRoutes(new KoaRouter()).routes());
    const app = new Koa();
    app.use(koaMount('/api', inner));
    const server = http.createServer(app.callback());
    return { port: await listen(server), stop: () => close(server) };
  },
};

for (const [name, start] of Object.entries(MOUNTED)) {
  test(`${name}: a gate in a mounted app matches route rules on the full path`, async (t) => {
    const tiers = [];
    const app = await start({
      routes: [{ method: 'POST', path: '/api/checkout', tier: 'critical' }, { path: '/api/reports/', tier: 'background' }],
      defaultTier: 'standard',
      shed: false,
      onDecision: (info) => tiers.push(info.tier),
    });
    t.after(() => app.stop());
    assert.equal((await request(app.port, { method: 'POST', path: '/api/checkout', headers: { 'content-length': '0' } })).status, 200);
    assert.equal((await request(app.port, { path: '/api/reports/q1' })).status, 200);
    assert.equal((await request(app.port, { path: '/api/hello' })).status, 200);
    assert.deepEqual(tiers, ['critical', 'background', 'standard']);
  });
}

test('Koa answers a custom respond() as node:http does, a byte body as its bytes', async (t) => {
  const options = { shed: { turnBudgetMs: 0 }, respond: () => ({ status: 418, headers: { 'x-why': 'tea' }, body: new Uint8Array([104, 105]) }) };
  const koaGate = gatekeeper.koa(options);
  const httpGate = gatekeeper.http(options, reply);
  const answers = [];
  for (const [gate, handler] of [[httpGate, httpGate], [koaGate, new Koa().use(koaGate).callback()]]) {
    const server = http.createServer(handler);
    const port = await listen(server);
    t.after(() => close(server));
    gate.injectHealth({ stalled: true });
    const r = await request(port, { path: '/x' });
    answers.push([r.status, r.headers['x-why'], r.body]);
  }
  assert.deepEqual(answers, [[418, 'tea', 'hi'], [418, 'tea', 'hi']]);
});

'use strict';
// An async classify, key or named limit `by` (a session or token lookup) on real Express, Fastify and
// node:http servers: the decision goes on when the promise settles; a rejection falls back (warned
// once); a client that leaves while it is pending is not decided and its handler never runs.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const express = require('express');
const fastify = require('fastify');
const { gatekeeper, tiergatePlugin } = require('../..');
const { listen, close, request } = require('../helpers/http');

const BIG = 1e9;
const TIERS = [
  { name: 'critical', protected: true, limit: BIG, windowMs: 1000 },
  // One request per key and hour on the standard tier: the key a request is counted under shows.
  { name: 'standard', limit: BIG, windowMs: 1000, perKey: { limit: 1, windowMs: 3_600_000 } },
  { name: 'background', limit: BIG, windowMs: 1000 },
];

const SESSIONS = new Map([['s-gold', 'critical'], ['s-free', 'standard']]);
const TOKENS = new Map([['t-a', 'u1'], ['t-b', 'u1'], ['t-c', 'u2']]);
const tick = () => new Promise((resolve) => setTimeout(resolve, 2));
/** A session store lookup: the tier of the request's session, later. */
const lookupTier = async (req) => {
  await tick();
  return SESSIONS.get(req.headers['x-session']);
};
/** A token lookup: the user id behind the request's token, later. */
const lookupUser = async (req) => {
  await tick();
  return TOKENS.get(req.headers['x-token']);
};

/** Serves `options` through `kind`'s adapter; `handled` counts handler runs by path. */
async function serve(t, kind, options) {
  const handled = new Map();
  const handle = (path) => handled.set(path, (handled.get(path) || 0) + 1);
  let server;
  let gate;
  if (kind === 'express') {
    const app = express();
    gate = gatekeeper(options);
    app.use(gate);
    app.get('/{*any}', (req, res) => {
      handle(req.path);
      res.json({ ok: true });
    });
    server = http.createServer(app);
  } else if (kind === 'fastify') {
    const app = fastify();
    await app.register(tiergatePlugin, options);
    app.get('/*', async (req) => {
      handle(req.url);
      return { ok: true };
    });
    await app.ready();
    gate = app.tiergate;
    server = app.server;
  } else {
    gate = gatekeeper.http(options, (req, res) => {
      handle(req.url);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
    server = http.createServer(gate);
  }
  const port = await listen(server);
  t.after(() => close(server));
  return { port, gate, handled };
}

/** Collects TiergateWarnings while `t` runs. */
function warnings(t) {
  const seen = [];
  const on = (w) => {
    if (w.name === 'TiergateWarning') seen.push(w.message);
  };
  process.on('warning', on);
  t.after(() => process.off('warning', on));
  return seen;
}

for (const kind of ['express', 'fastify', 'http']) {
  test(`${kind}: an async classify promotes a request by its looked-up session`, async (t) => {
    const decisions = [];
    const { port, handled } = await serve(t, kind, {
      tiers: TIERS, defaultTier: 'standard', classify: lookupTier, onDecision: (info) => decisions.push(info),
    });
    // Twice each: the standard tier's per-key quota (1) refuses the second, the critical tier has none.
    const gold = [await request(port, { path: '/g', headers: { 'x-session': 's-gold' } }), await request(port, { path: '/g', headers: { 'x-session': 's-gold' } })];
    const free = [await request(port, { path: '/f', headers: { 'x-session': 's-free' } }), await request(port, { path: '/f', headers: { 'x-session': 's-free' } })];
    assert.deepEqual(gold.map((r) => r.status), [200, 200]);
    assert.deepEqual(free.map((r) => r.status), [200, 429]);
    assert.deepEqual(decisions.map((d) => [d.tier, d.tierSource]), [['critical', 'classify'], ['critical', 'classify'], ['standard', 'classify'], ['standard', 'classify']]);
    assert.equal(handled.get('/g'), 2);
    assert.equal(handled.get('/f'), 1);
  });

  test(`${kind}: an async key counts requests under the looked-up user`, async (t) => {
    const keys = [];
    const { port } = await serve(t, kind, { tiers: TIERS, defaultTier: 'standard', key: lookupUser, onDecision: (info) => keys.push(info.key) });
    // t-a and t-b are both u1 (one request an hour); t-c is u2. Keyed by the client IP, t-c would be refused.
    const a = await request(port, { path: '/x', headers: { 'x-token': 't-a' } });
    const b = await request(port, { path: '/x', headers: { 'x-token': 't-b' } });
    const c = await request(port, { path: '/x', headers: { 'x-token': 't-c' } });
    assert.deepEqual([a.status, b.status, c.status], [200, 429, 200]);
    assert.deepEqual(keys, ['u1', 'u1', 'u2']);
  });

  test(`${kind}: an async named-limit \`by\` counts under the looked-up user`, async (t) => {
    const { port } = await serve(t, kind, {
      tiers: TIERS, defaultTier: 'critical', limits: [{ name: 'per-user', limit: 1, windowMs: 3_600_000, by: lookupUser }],
    });
    const a = await request(port, { path: '/x', headers: { 'x-token': 't-a' } });
    const b = await request(port, { path: '/x', headers: { 'x-token': 't-b' } });
    const c = await request(port, { path: '/x', headers: { 'x-token': 't-c' } });
    assert.deepEqual([a.status, b.status, c.status], [200, 429, 200]);
    assert.equal(b.json.type, 'urn:tiergate:problem:rate-limited');
  });

  test(`${kind}: a rejecting classify or key falls back (route rules / default tier, the client IP), warned once each`, async (t) => {
    const seen = warnings(t);
    const decisions = [];
    const { port, handled } = await serve(t, kind, {
      tiers: TIERS,
      defaultTier: 'background',
      routes: [{ path: '/routed', tier: 'critical' }],
      classify: () => Promise.reject(new Error('session store down')),
      key: () => Promise.reject(new Error('token store down')),
      onDecision: (info) => decisions.push([info.tier, info.tierSource, info.key]),
    });
    for (let i = 0; i < 2; i++) {
      assert.equal((await request(port, { path: '/routed' })).status, 200);
      assert.equal((await request(port, { path: '/other' })).status, 200);
    }
    assert.deepEqual(decisions, [
      ['critical', 'route', '127.0.0.1'], ['background', 'default', '127.0.0.1'],
      ['critical', 'route', '127.0.0.1'], ['background', 'default', '127.0.0.1'],
    ]);
    assert.equal(handled.get('/routed'), 2);
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    assert.equal(seen.filter((m) => m.includes('options.classify') && m.includes('session store down')).length, 1, seen.join('\n'));
    assert.equal(seen.filter((m) => m.includes('options.key') && m.includes('token store down')).length, 1, seen.join('\n'));
  });

  // Each lookup answers only when released: the first request's client leaves before that.
  const LEAVING = {
    classify: (lookup) => ({ classify: lookup }),
    key: (lookup) => ({ key: lookup }),
    by: (lookup) => ({ limits: [{ name: 'per-user', limit: 100, windowMs: 60_000, by: lookup }] }),
  };
  for (const [which, option] of Object.entries(LEAVING)) {
    test(`${kind}: a client that leaves while its ${which} lookup is pending is not decided and runs nothing`, (t) => leaving(t, kind, option, which === 'classify' ? 'critical' : 'u1'));
  }
}

/** A request whose client leaves while `option(lookup)`'s lookup is pending, then one that stays. */
async function leaving(t, kind, option, answer) {
  let release;
  const pending = new Promise((resolve) => {
    release = resolve;
  });
  let asked = 0;
  const decisions = [];
  const lookup = (req) => {
    if (req.url !== '/leaving') return undefined;
    asked++;
    return pending;
  };
  const { port, gate, handled } = await serve(t, kind, {
    tiers: TIERS,
    defaultTier: 'standard',
    concurrency: { maxQueue: 10 },
    onDecision: (info) => decisions.push(info),
    ...option(lookup),
  });
  const gone = http.request({ host: '127.0.0.1', port, path: '/leaving' });
  const closed = new Promise((resolve) => gone.on('close', resolve));
  gone.on('error', () => {}); // destroyed on purpose
  gone.end();
  for (let i = 0; i < 500 && asked === 0; i++) await tick();
  assert.equal(asked, 1, 'the lookup was asked');
  gone.destroy();
  await closed;
  // The server sees the socket close before the lookup answers.
  for (let i = 0; i < 50; i++) await tick();
  release(answer);
  for (let i = 0; i < 20; i++) await tick();
  assert.equal(handled.get('/leaving'), undefined, 'the handler never ran');
  assert.equal(decisions.length, 0, 'no decision was made');
  const s = gate.stats();
  assert.equal(s.tiers.critical.admitted + s.tiers.standard.admitted, 0, 'nothing was admitted');
  assert.equal(s.concurrency.inFlight, 0, 'no slot is held');
  if (gate.defense !== null) assert.equal(gate.defense.stats().limits[0].keys, 0, 'no named-limit unit was taken');
  // The gate goes on deciding for others.
  assert.equal((await request(port, { path: '/next' })).status, 200);
  assert.equal(handled.get('/next'), 1);
}

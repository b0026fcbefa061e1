'use strict';
// Named limits counted by outcome, inspected, refunded, overridden and given as functions of the
// request, over real HTTP on Express 5, Express 4, Fastify 5 and node:http (lib/defense/outcome.js,
// lib/defense/admin.js, src/core/limit/overrides.rs).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { FRAMEWORKS } = require('./apps');
const { request } = require('../helpers/http');
const { gatekeeper } = require('../..');

const MIN = 60_000;
const FAILED_LOGINS = { name: 'failed-logins', limit: 5, windowMs: 15 * MIN, routes: ['/login'], methods: ['POST'], skipSuccessfulRequests: true };
const BASE = { shed: false, bans: { rules: false } };
const IP = '127.0.0.1';

const login = (port, password) => request(port, { method: 'POST', path: '/login', headers: { 'x-password': password } });

/** Resolves once `cond()` holds; fails after `ms` (a bound, not a timing assertion). */
async function until(cond, what, ms = 10_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

for (const [fw, start] of Object.entries(FRAMEWORKS)) {
  test(`${fw}: failed logins: 5 failures per 15 min, successes free; a burst of 50 failures in flight admits exactly 5`, async () => {
    const app = await start({ ...BASE, limits: [FAILED_LOGINS] });
    try {
      // Successes are free: 20 in a row, all answered.
      for (let i = 0; i < 20; i++) assert.equal((await login(app.port, 'right')).status, 200);
      assert.equal(app.gate.limits.get('failed-logins', IP).remaining, 5);
      // 50 failing logins at once, held in the handler: each admitted one holds its unit until it
      // finishes, so no more than 5 reach the handler, however many are in flight.
      app.hold.on = true;
      const statuses = [];
      const burst = Array.from({ length: 50 }, () => login(app.port, 'wrong').then((r) => statuses.push(r.status)));
      await until(() => app.hold.count === 5 && statuses.length === 45, '5 held, 45 answered');
      assert.ok(statuses.every((s) => s === 429), 'the 45 beyond the limit are refused while 5 are in flight');
      app.hold.on = false;
      app.hold.release();
      await Promise.all(burst);
      assert.equal(statuses.filter((s) => s === 401).length, 5);
      assert.equal(statuses.filter((s) => s === 429).length, 45);
      // The failures stay counted: even the right password is refused now (as express-rate-limit).
      assert.equal((await login(app.port, 'right')).status, 429);
      const s = app.gate.limits.get('failed-logins', IP);
      assert.equal(s.limit, 5);
      assert.equal(s.remaining, 0);
      assert.ok(s.resetMs > 14 * MIN && s.resetMs <= 15 * MIN, `resetMs ${s.resetMs}`);
      // Other routes are not in the limit's scope.
      assert.equal((await request(app.port, { path: '/hello' })).status, 200);
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: inspect, refund and reset one key of a named limit`, async () => {
    const app = await start({ ...BASE, limits: [{ name: 'per-ip', limit: 3, windowMs: MIN }] });
    try {
      const limits = app.gate.limits;
      assert.deepEqual(limits.get('per-ip', IP), { name: 'per-ip', key: IP, limit: 3, remaining: 3, resetMs: 0, overridden: false });
      for (let i = 0; i < 3; i++) assert.equal((await request(app.port, { path: '/hello' })).status, 200);
      assert.equal(limits.get('per-ip', IP).remaining, 0);
      assert.equal(limits.get('per-ip', IP).remaining, 0, 'get counts nothing');
      assert.equal((await request(app.port, { path: '/hello' })).status, 429);
      assert.equal(limits.refund('per-ip', IP), true);
      assert.equal(limits.get('per-ip', IP).remaining, 1);
      assert.equal((await request(app.port, { path: '/hello' })).status, 200);
      assert.equal((await request(app.port, { path: '/hello' })).status, 429);
      assert.equal(limits.reset('per-ip', IP), true);
      assert.equal(limits.get('per-ip', IP).remaining, 3);
      assert.equal(limits.refund('per-ip', '192.0.2.9', 2), false, 'a key never counted has nothing to give back');
      assert.equal(limits.get('per-ip', '192.0.2.9').remaining, 3);
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: an operator's override raises one key's limit at run time, listed and in stats()`, async () => {
    const app = await start({ ...BASE, limits: [{ name: 'per-ip', limit: 2, windowMs: MIN }] });
    try {
      const limits = app.gate.limits;
      for (let i = 0; i < 2; i++) assert.equal((await request(app.port, { path: '/hello' })).status, 200);
      assert.equal((await request(app.port, { path: '/hello' })).status, 429);
      limits.override('per-ip', IP, { limit: 4 });
      assert.deepEqual(limits.overrides(), [{ name: 'per-ip', key: IP, limit: 4 }]);
      const s = limits.get('per-ip', IP);
      assert.deepEqual([s.limit, s.remaining, s.overridden], [4, 2, true], 'the override keeps what the key has counted');
      for (let i = 0; i < 2; i++) assert.equal((await request(app.port, { path: '/hello' })).status, 200);
      assert.equal((await request(app.port, { path: '/hello' })).status, 429);
      const st = app.gate.defense.stats();
      assert.equal(st.overrides.count, 1);
      assert.equal(st.limits[0].overrides, 1);
      assert.equal(limits.clearOverride('per-ip', IP), true);
      assert.deepEqual(limits.overrides(), []);
      assert.equal(limits.get('per-ip', IP).limit, 2);
      assert.equal(app.gate.defense.stats().overrides.count, 0);
    } finally {
      await app.stop();
    }
  });

  test(`${fw}: a limit that is a function of the request (per plan), and a weight the handler reports`, async () => {
    const app = await start({
      ...BASE,
      limits: [
        { name: 'per-plan', by: { header: 'x-user' }, routes: ['/hello'], limit: (req) => (req.headers['x-plan'] === 'pro' ? 5 : 2), windowMs: MIN },
        { name: 'llm', routes: ['/llm'], limit: 100, windowMs: MIN },
      ],
    });
    try {
      const hello = (user, plan) => request(app.port, { path: '/hello', headers: { 'x-user': user, ...(plan ? { 'x-plan': plan } : {}) } }).then((r) => r.status);
      const free = [];
      for (let i = 0; i < 4; i++) free.push(await hello('ann'));
      assert.deepEqual(free, [200, 200, 429, 429]);
      const pro = [];
      for (let i = 0; i < 7; i++) pro.push(await hello('bob', 'pro'));
      assert.deepEqual(pro, [200, 200, 200, 200, 200, 429, 429]);
      // The RateLimit fields carry this request's limit.
      const refused = await request(app.port, { path: '/hello', headers: { 'x-user': 'ann' } });
      assert.equal(refused.headers['ratelimit-policy'], '"per-plan";q=2;w=60');
      const proRefused = await request(app.port, { path: '/hello', headers: { 'x-user': 'bob', 'x-plan': 'pro' } });
      assert.equal(proRefused.headers['ratelimit-policy'], '"per-plan";q=5;w=60');
      assert.equal(app.gate.limits.get('per-plan', 'bob').limit, 5);
      // Each call reserves 1 (the cost) and reports its tokens: 3 calls of 30 leave 100 - 93 = 7.
      for (let i = 0; i < 3; i++) assert.equal((await request(app.port, { path: '/llm?tokens=30' })).status, 200);
      assert.equal(app.gate.limits.get('llm', IP).remaining, 7);
      // The next call is admitted (7 left) and its 30 tokens empty the key, not into debt.
      assert.equal((await request(app.port, { path: '/llm?tokens=30' })).status, 200);
      assert.equal(app.gate.limits.get('llm', IP).remaining, 0);
      assert.equal((await request(app.port, { path: '/llm?tokens=1' })).status, 429);
    } finally {
      await app.stop();
    }
  });
}

test('node:http: skipFailedRequests gives failures back; a connection closed before its response settles as a failure', async () => {
  const app = await FRAMEWORKS['node:http']({ ...BASE, limits: [{ ...FAILED_LOGINS, skipSuccessfulRequests: undefined, skipFailedRequests: true, limit: 2 }] });
  try {
    for (let i = 0; i < 5; i++) assert.equal((await login(app.port, 'wrong')).status, 401);
    assert.equal(app.gate.limits.get('failed-logins', IP).remaining, 2);
    // Two held logins, then their clients go away: the responses close unfinished, and settle.
    app.hold.on = true;
    const reqs = [0, 1].map(() => {
      const r = http.request({ host: IP, port: app.port, method: 'POST', path: '/login', headers: { 'x-password': 'right' } });
      r.on('error', () => {});
      r.end();
      return r;
    });
    await until(() => app.hold.count === 2, '2 held');
    assert.equal(app.gate.limits.get('failed-logins', IP).remaining, 0, 'both hold their unit while in flight');
    for (const r of reqs) r.destroy();
    await until(() => app.gate.limits.get('failed-logins', IP).remaining === 2, 'the closed requests to settle as failures (given back)');
    app.hold.on = false;
    app.hold.release();
    for (let i = 0; i < 2; i++) assert.equal((await login(app.port, 'right')).status, 200);
    assert.equal((await login(app.port, 'right')).status, 429);
  } finally {
    await app.stop();
  }
});

test('node:http: requestWasSuccessful decides what a success is', async () => {
  const app = await FRAMEWORKS['node:http']({
    ...BASE,
    // Only a 200 is a success here: the 401s count.
    limits: [{ ...FAILED_LOGINS, limit: 2, requestWasSuccessful: (req, res) => res.statusCode === 401 }],
  });
  try {
    for (let i = 0; i < 4; i++) assert.equal((await login(app.port, 'wrong')).status, 401, 'the "successful" 401s are free');
    assert.equal((await login(app.port, 'right')).status, 200);
    assert.equal((await login(app.port, 'right')).status, 200);
    assert.equal((await login(app.port, 'right')).status, 429);
  } finally {
    await app.stop();
  }
});

test('overrides are capped at 10,000 (refused when full, nothing evicted); bad input is refused with a code', () => {
  const gate = gatekeeper({ ...BASE, limits: [{ name: 'per-user', by: { header: 'x-user' }, limit: 2, windowMs: MIN }] });
  const limits = gate.limits;
  for (let i = 0; i < 10_000; i++) limits.override('per-user', `u${i}`, { limit: 3 });
  assert.throws(() => limits.override('per-user', 'one-more', { limit: 3 }), { code: 'ERR_TIERGATE_OVERRIDES_FULL' });
  limits.override('per-user', 'u1', { limit: 9 }); // replacing one takes no room
  assert.equal(limits.get('per-user', 'u1').limit, 9);
  assert.equal(limits.get('per-user', 'u0').limit, 3, 'nothing was evicted');
  assert.equal(gate.defense.stats().overrides.max, 10_000);
  for (const bad of [NaN, -1, 0, 1.5, Infinity, '3', undefined]) {
    assert.throws(() => limits.override('per-user', 'x', { limit: bad }), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' }, String(bad));
  }
  for (const bad of [NaN, -1, 1.5, Infinity]) assert.throws(() => limits.refund('per-user', 'x', bad), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
  assert.throws(() => limits.override('per-user', 'x', { limit: 3, burst: 2 }), { code: /ERR_TIERGATE_(UNKNOWN_OPTION|INVALID_ARGUMENT)/ });
  assert.throws(() => limits.get('nope', 'x'), { code: 'ERR_TIERGATE_INVALID_ARGUMENT', message: /no local limit named "nope"/ });
  assert.throws(() => limits.get('per-user', ''), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
  assert.throws(() => limits.charge({}, 'per-user', 1), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
});

test('outcome and function-limit options are checked at construction', () => {
  const bad = [
    [{ name: 'a', limit: 1, windowMs: 1, skipSuccessfulRequests: 'yes' }, /skipSuccessfulRequests must be a boolean/],
    [{ name: 'a', limit: 1, windowMs: 1, requestWasSuccessful: () => true }, /requestWasSuccessful is read only with skipSuccessfulRequests or skipFailedRequests/],
    [{ name: 'a', limit: 1, windowMs: 1, skipFailedRequests: true, requestWasSuccessful: 5 }, /requestWasSuccessful must be a function/],
    [{ name: 'a', algorithm: 'sliding-window', limit: () => 2, windowMs: 1 }, /function limit is not available with 'sliding-window'/],
    [{ name: 'a', algorithm: 'token-bucket', limit: () => 2, burst: 3, windowMs: 1 }, /burst: a function limit sets the burst too/],
    [{ name: 'a', limit: '5', windowMs: 1 }, /limit must be a number or a function/],
  ];
  for (const [l, message] of bad) assert.throws(() => gatekeeper({ ...BASE, limits: [l] }), { code: 'ERR_TIERGATE_INVALID_OPTION', message }, message.source);
});

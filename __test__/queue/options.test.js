'use strict';
// Option validation, the adaptive limit's arithmetic (deterministic samples), and 'auto' on a real server.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { concurrencyGate, concurrencyGatePlugin } = require('../..');
const { createConcurrencyGate, AdaptiveLimit } = require('../../lib/queue'); // internal: not exported
const { startServer, waitFor } = require('./helpers');

test('invalid options throw at construction, naming the option', () => {
  const bad = [
    [{}, TypeError, /maxConcurrent is required/],
    [{ maxConcurrent: 0 }, RangeError, /maxConcurrent must be >= 1/],
    [{ maxConcurrent: 2.5 }, RangeError, /maxConcurrent must be an integer/],
    [{ maxConcurrent: NaN }, TypeError, /maxConcurrent must be a number/],
    [{ maxConcurrent: Infinity }, RangeError, /maxConcurrent must be finite/],
    [{ maxConcurrent: '3' }, TypeError, /maxConcurrent must be a positive integer or "auto"/],
    [{ maxConcurrent: 3, maxQueue: -1 }, RangeError, /maxQueue must be >= 0/],
    [{ maxConcurrent: 3, maxQueue: Infinity }, RangeError, /maxQueue must be finite/],
    [{ maxConcurrent: 3, queueTimeoutMs: 0 }, RangeError, /queueTimeoutMs must be > 0/],
    [{ maxConcurrent: 3, queueTimeoutMs: -5 }, RangeError, /queueTimeoutMs/],
    [{ maxConcurrent: 3, timeoutStatus: 200 }, RangeError, /timeoutStatus must be >= 400/],
    [{ maxConcurrent: 3, retryAfter: { minSec: -1 } }, RangeError, /retryAfter\.minSec must be an integer >= 0 and <= 86400, got -1/],
    [{ maxConcurrent: 3, retryAfter: { minSec: 5, maxSec: 2 } }, RangeError, /retryAfter\.maxSec must be an integer >= 5 and <= 86400, got 2/],
    [{ maxConcurrent: 3, retryAfter: { maxSec: 1e21 } }, RangeError, /retryAfter\.maxSec must be an integer >= 1 and <= 86400, got 1e\+21/],
    [{ maxConcurrent: 3, retryAfter: null }, TypeError, /retryAfter must be an object \{ minSec, maxSec \}, got null/],
    [{ maxConcurrent: 3, retryAfter: 2 }, TypeError, /retryAfter must be an object \{ minSec, maxSec \}/],
    [{ maxConcurrent: 3, tiers: [] }, TypeError, /tiers must be a non-empty array/],
    [{ maxConcurrent: 3, tiers: ['a', 'A'] }, TypeError, /tiers\[1\]\.name "A" is a duplicate/],
    [{ maxConcurrent: 3, tiers: [{ name: 'a', maxQueue: -2 }] }, RangeError, /tiers\[0\]\.maxQueue/],
    [{ maxConcurrent: 3, tiers: [{ name: 'a', weight: 2 }] }, TypeError, /tiers\[0\] has an unknown option "weight" \(known: name, protected, maxQueue, queueTimeoutMs/],
    [{ maxConcurrent: 3, tiers: [{ name: 'a', protected: 'yes' }] }, TypeError, /tiers\[0\]\.protected must be a boolean/],
    [{ maxConcurrent: 3, defaultTier: 'gold' }, RangeError, /defaultTier "gold" is not one of the tiers/],
    // Exactly as the tier is named (docs/concurrency-gate.md): no case folding.
    [{ maxConcurrent: 3, defaultTier: 'STANDARD' }, RangeError, /defaultTier "STANDARD" is not one of the tiers \(critical, standard, background\)/],
    [{ maxConcurrent: 3, tierHeader: 'bad header' }, TypeError, /tierHeader/],
    [{ maxConcurrent: 3, trustTierHeader: 1 }, TypeError, /trustTierHeader must be a boolean/],
    [{ maxConcurrent: 3, classify: 'x' }, TypeError, /classify must be a function/],
    [{ maxConcurrent: 3, displace: 'no' }, TypeError, /displace must be a boolean/],
    [{ maxConcurrent: 3, codel: 5 }, TypeError, /codel must be a boolean or/],
    [{ maxConcurrent: 3, codel: { targetMs: 0 } }, RangeError, /codel\.targetMs must be > 0/],
    [{ maxConcurrent: 3, codel: { target: 5 } }, TypeError, /codel has an unknown option "target" \(known: targetMs, intervalMs\)/],
    [{ maxConcurrent: 3, lifo: 'yes' }, TypeError, /lifo must be a boolean/],
    [{ maxConcurrent: 3, onReject: {} }, TypeError, /onReject must be a function/],
    [{ maxConcurrent: 3, limit: { min: 2 } }, TypeError, /limit is only used with maxConcurrent: "auto"/],
    [{ maxConcurrent: 3, maxQueu: 3 }, TypeError, /concurrencyGate: options has an unknown option "maxQueu" \(known: maxConcurrent, limit, maxQueue,/],
    [{ maxConcurrent: 'auto', limit: { min: 10, max: 5 } }, RangeError, /limit\.max \(5\) must be >= limit\.min \(10\)/],
    [{ maxConcurrent: 'auto', limit: { initial: 5000 } }, RangeError, /limit\.initial must be <= 1000/],
    [{ maxConcurrent: 'auto', limit: { min: NaN } }, TypeError, /limit\.min must be a number/],
    [{ maxConcurrent: 'auto', limit: { max: 1.5 } }, RangeError, /limit\.max must be an integer/],
    [{ maxConcurrent: 'auto', limit: { smoothing: 0.2 } }, TypeError, /limit has an unknown option "smoothing"/],
    [{ maxConcurrent: 'auto', limit: { speed: 1 } }, TypeError, /limit has an unknown option "speed" \(known: min, max,/],
  ];
  for (const [opts, Err, re] of bad) {
    const code = /has an unknown option/.test(re.source) ? 'ERR_TIERGATE_UNKNOWN_OPTION' : 'ERR_TIERGATE_INVALID_OPTION';
    assert.throws(() => concurrencyGate(opts), (err) => err instanceof Err && re.test(err.message) && err.code === code, JSON.stringify(opts));
  }
  assert.throws(() => concurrencyGate(null), TypeError);
  assert.throws(() => concurrencyGate({ maxConcurrent: 0 }), /^RangeError: concurrencyGate: maxConcurrent must be >= 1, got 0$/m);
  assert.throws(() => concurrencyGate.http({ maxConcurrent: 1 }), /handler must be a function/);
  // gatekeeper-style tiers (limit, windowMs) are accepted so one tiers array serves both guards
  const gate = createConcurrencyGate({
    maxConcurrent: 2,
    tiers: [{ name: 'vip', protected: true, limit: 10, windowMs: 1000 }, 'free'],
  });
  assert.deepEqual(gate.stats().queuedByTier, { vip: 0, free: 0 });
  assert.equal(gate.stats().limit, 2);
});

test('the Fastify plugin reports an invalid option through register()', async () => {
  const fastify = require('fastify')({ logger: false });
  fastify.register(concurrencyGatePlugin, { maxConcurrent: -1 });
  await assert.rejects(fastify.ready(), /maxConcurrent must be >= 1/);
});

test("the Fastify plugins ignore Fastify's own register options (prefix, logLevel)", async () => {
  const { tiergatePlugin } = require('../..');
  const fastify = require('fastify')({ logger: false });
  fastify.register(concurrencyGatePlugin, { maxConcurrent: 1, prefix: '/api', logLevel: 'warn' });
  fastify.register(tiergatePlugin, { shed: false, prefix: '/api', logLevel: 'warn' });
  await fastify.ready();
  assert.equal(fastify.concurrencyGate.stats().limit, 1);
  assert.deepEqual(fastify.tiergate.tiers, ['critical', 'standard', 'background']);
  await fastify.close();
});

test('AdaptiveLimit: steady latency under full use grows the limit to max', () => {
  const l = new AdaptiveLimit({ min: 2, max: 40, initial: 10 });
  let t = 0;
  // The limit grows by one request (or 2%) per 100 ms interval while it is reached without queueing.
  for (let i = 0; i < 5000; i++) {
    t += 1;
    l.sample(5, l.limit, t);
    assert.ok(l.limit >= 2 && l.limit <= 40);
  }
  assert.equal(l.limit, 40);
});

test('AdaptiveLimit: an app-limited service does not grow the limit', () => {
  const l = new AdaptiveLimit({ min: 2, max: 40, initial: 10 });
  for (let t = 1; t <= 2000; t++) l.sample(5, 3, t); // never more than 3 in flight
  assert.equal(l.limit, 5, 'room for a burst of the use plus its square root (at least 2), no more');
  assert.ok(l.stats().intervals >= 19, 'it kept learning');
});

test('AdaptiveLimit: latency inflation shrinks the limit, never below min; recovery raises it again', () => {
  const l = new AdaptiveLimit({ min: 3, max: 100, initial: 50 });
  let t = 0;
  // Samples come at the rate Little's law makes: the limit in flight, each `ms` long.
  const sample = (ms) => l.sample(ms, l.limit, (t += ms / l.limit));
  // Baseline 10 ms, long enough for the estimator's first probes (a reached limit is probed at once) to end.
  for (let i = 0; i < 3000; i++) sample(10);
  const before = l.limit;
  let lowest = before;
  for (let i = 0; i < 3000; i++) {
    sample(10 + 2 * l.limit); // latency grows with concurrency: queueing
    lowest = Math.min(lowest, l.limit);
    assert.ok(l.limit >= 3);
  }
  assert.ok(lowest < before * 0.75, `limit fell from ${before} to ${lowest}`);
  const low = l.limit;
  for (let i = 0; i < 6000; i++) sample(10); // back to the baseline
  assert.ok(l.limit > low, `limit recovered from ${low} to ${l.limit}`);
});

test("maxConcurrent 'auto' on a real server: the limit moves within its bounds", async () => {
  const bounds = { min: 2, max: 24, initial: 8 };
  let congested = false;
  const srv = await startServer('http', { maxConcurrent: 'auto', limit: bounds, maxQueue: 200, queueTimeoutMs: 30_000 }, (req, res) => {
    // congested: every extra request in flight adds 4 ms (a saturated downstream)
    const delay = congested ? 4 * srv.gate.stats().inFlight : 3;
    setTimeout(() => res.end('ok'), delay);
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 40 });
  const seen = [];
  const get = () => new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: srv.port, agent, path: '/' }, (res) => {
      res.resume();
      res.on('end', () => {
        seen.push(srv.gate.limit);
        resolve(res.statusCode);
      });
    }).on('error', reject);
  });
  async function closedLoop(total, workers) {
    let left = total;
    const statuses = [];
    await Promise.all(Array.from({ length: workers }, async () => {
      while (left-- > 0) statuses.push(await get());
    }));
    return statuses;
  }
  try {
    assert.equal(srv.gate.limit, 8);
    // Steady latency is what a timer gives on a quiet machine; a loaded one (other jobs) stretches
    // some timers and the limiter rightly holds. So up to 3 rounds of full use, until it grows.
    let grown = srv.gate.limit;
    for (let round = 0; round < 3 && grown <= 8; round++) {
      const phase1 = await closedLoop(1500, 40);
      assert.ok(phase1.every((s) => s === 200));
      grown = srv.gate.limit;
    }
    assert.ok(grown > 8, `limit grew from 8 to ${grown} under full use at steady latency`);
    congested = true;
    const from = seen.length;
    await closedLoop(600, 40);
    const lowest = Math.min(...seen.slice(from));
    assert.ok(lowest < grown, `limit fell from ${grown} to ${lowest} under congestion`);
    assert.ok(seen.every((l) => l >= bounds.min && l <= bounds.max), 'always within bounds');
    const s = srv.gate.stats();
    assert.equal(s.adaptive.min, 2);
    assert.equal(s.adaptive.max, 24);
    assert.ok(s.adaptive.updates > 10);
    assert.ok(s.peakInFlight <= bounds.max);
    await waitFor(() => srv.gate.stats().inFlight === 0, 'the last slots to come back');
  } finally {
    agent.destroy();
    await srv.close();
  }
});

test('classification order: classify(req), then routes, then the header (capped at the default), then the default', () => {
  const { EventEmitter } = require('node:events');
  const gate = createConcurrencyGate({
    maxConcurrent: 1,
    tiers: [{ name: 'VIP', protected: true }, 'standard', 'background'],
    defaultTier: 'standard',
    classify: (req) => (req.headers['x-vip'] === 'yes' ? 'VIP' : undefined),
    routes: [{ method: 'POST', path: '/checkout', tier: 'VIP' }, { path: /^\/reports\//, tier: 'background' }],
  });
  const res = () => Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false, writableFinished: false });
  const req = (method, url, headers = {}) => ({ method, url, headers });
  assert.equal(gate.admit(req('GET', '/'), res()), null); // takes the slot; everything below queues
  const cases = [
    [req('GET', '/x', { 'x-vip': 'yes' }), 'VIP'], // classify
    [req('POST', '/checkout?id=1'), 'VIP'], // route (prefix on whole segments, query ignored)
    [req('GET', '/checkout'), 'standard'], // method does not match: default
    [req('POST', '/checkouts'), 'standard'], // not a whole segment
    [req('GET', '/reports/7', { 'x-user-tier': 'vip' }), 'background'], // routes before the header
    [req('GET', '/y', { 'x-user-tier': 'VIP' }), 'standard'], // untrusted header above the default
    [req('GET', '/y', { 'x-user-tier': 'background' }), 'background'], // lowering oneself is fine
    [req('GET', '/y', { 'x-user-tier': 'Standard' }), 'background'], // names are exact, as the gatekeeper's: unknown, the lowest tier
  ];
  const expected = { VIP: 0, standard: 0, background: 0 };
  for (const [r, tier] of cases) {
    const verdict = gate.admit(r, res());
    assert.equal(typeof verdict.then, 'function');
    expected[tier]++;
    assert.deepEqual(gate.stats().queuedByTier, expected, `${r.method} ${r.url} ${JSON.stringify(r.headers)}`);
  }
  gate.close();
  assert.equal(gate.stats().queued, 0);
  assert.throws(() => createConcurrencyGate({ maxConcurrent: 1, routes: [{ path: '/x', tier: 'gold' }] }), /routes\[0\]\.tier "gold" is not one of the tiers/);
});

test('a queue timeout beyond setTimeout range neither fires early nor spins', async () => {
  const { EventEmitter } = require('node:events');
  const warnings = [];
  const onWarning = (w) => warnings.push(w.name);
  process.on('warning', onWarning);
  const gate = createConcurrencyGate({ maxConcurrent: 1, queueTimeoutMs: 1e12 });
  const res = () => Object.assign(new EventEmitter(), { destroyed: false, writableEnded: false, writableFinished: false });
  const req = { method: 'GET', url: '/', headers: {} };
  try {
    assert.equal(gate.admit(req, res()), null);
    gate.admit(req, res());
    await new Promise((resolve) => setTimeout(resolve, 40));
    assert.equal(gate.stats().queued, 1);
    assert.equal(gate.stats().timeout, 0);
    assert.deepEqual(warnings, []);
  } finally {
    process.off('warning', onWarning);
    gate.close();
  }
});

test('AdaptiveLimit: a saturated event loop brings the limit down to min; with idle time it grows again', () => {
  let utilization = 0.97;
  const l = new AdaptiveLimit({ min: 1, max: 40, initial: 10 }, 'limit', () => utilization);
  let t = 0;
  // A synchronous CPU-bound route: a turn runs `limit` handlers of 3 ms back to back, so the mean
  // latency of a window is 3 * (limit + 1) / 2 ms.
  const cpuBound = () => l.sample((3 * (l.limit + 1)) / 2, l.limit, (t += 1));
  for (let i = 0; i < 21; i++) cpuBound(); // t = 1..21 ms: the check at 21 ms finds the loop saturated
  assert.ok(l.saturated);
  assert.equal(l.limit, 5);
  for (let i = 0; i < 20; i++) cpuBound(); // the next check, 20 ms later
  assert.equal(l.limit, 2, 'halved every 20 ms while saturated: 10, 5, 2.5');
  for (let i = 0; i < 3000; i++) cpuBound();
  assert.equal(l.limit, 1);
  const low = l.limit;
  utilization = 0.5; // idle time again: steady latency under full use grows the limit
  for (let i = 0; i < 2000; i++) l.sample(3, l.limit, (t += 1));
  assert.equal(l.saturated, false);
  assert.ok(l.limit > low + 10, `limit grew from ${low} to ${l.limit}`);
  assert.throws(() => new AdaptiveLimit({}, 'limit', 5), /loopUtilization must be a function/);
});

test('AdaptiveLimit: without a saturated loop, latency that grows with concurrency is a queue: the estimator brings the limit down, within its bounds', () => {
  const l = new AdaptiveLimit({ min: 1, max: 40, initial: 10 }, 'limit', () => 0.5);
  let t = 0;
  for (let i = 0; i < 3000; i++) {
    // One server: each request in flight adds 1.5 ms; samples come at the rate that makes (Little's law).
    const latency = (3 * (l.limit + 1)) / 2;
    l.sample(latency, l.limit, (t += latency / l.limit));
    assert.ok(l.limit >= 1 && l.limit <= 40);
  }
  assert.equal(l.saturated, false);
  assert.ok(l.limit < 10, `the limit fell from 10 to ${l.limit}, by the estimator, not the saturation rule`);
  assert.ok(l.stats().queueing || l.stats().probes > 0);
});

'use strict';
// Prometheus metrics: a scrape of a real app under a bounded overload parses as the text format, and
// once the load has stopped its counters equal the components' stats(). Plus the options' errors,
// registration on the user's registry, and the status route's health judgement.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const prom = require('prom-client');
const t = require('../..');
const { Quota, LeaseDriver, MemoryStore } = require('tiergate/quota');
const { request, listen, close } = require('../helpers/http');
const { parsePrometheusText, sampleValue } = require('../helpers/prom-text');
const { startDashboardApp: startApp, overload } = require('../helpers/dashboard-app');

const LOAD_MS = 2000;

test('a /metrics scrape under load parses, and after the load its counters equal stats()', { timeout: 60_000 }, async (t2) => {
  const { port } = await startApp(t2);
  const load = overload(port, LOAD_MS);
  await new Promise((r) => setTimeout(r, LOAD_MS / 2));
  const during = await request(port, { path: '/metrics' });
  assert.equal(during.status, 200);
  assert.match(during.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const fams = parsePrometheusText(during.body);
  for (const name of ['tiergate_decisions_total', 'tiergate_refill_scale', 'tiergate_inflight', 'tiergate_limit', 'tiergate_queued', 'tiergate_queue_wait_seconds', 'tiergate_event_loop_lag_seconds', 'tiergate_event_loop_utilization_ratio', 'tiergate_ledger_tokens']) {
    assert.ok(fams.has(name), `${name} is missing`);
  }
  assert.equal(fams.get('tiergate_decisions_total').type, 'counter');
  assert.equal(fams.get('tiergate_queue_wait_seconds').type, 'histogram');
  // No per-client or per-IP label: every label is one of a few bounded sets (a named limit's name is configuration).
  for (const [, f] of fams) for (const s of f.samples) for (const k of Object.keys(s.labels)) assert.ok(['tier', 'verdict', 'reason', 'cause', 'le', 'limit'].includes(k), `label ${k}`);
  const statuses = await load;
  assert.ok((statuses.background[503] || 0) > 0, `background was never shed: ${JSON.stringify(statuses)}`);

  const after = parsePrometheusText((await request(port, { path: '/metrics' })).body);
  const { json: stats } = await request(port, { path: '/status/stats' });
  let admitted = 0;
  for (const [tier, s] of Object.entries(stats.gatekeeper.tiers)) {
    assert.equal(sampleValue(after, 'tiergate_decisions_total', { tier, verdict: 'admit' }), s.admitted, `${tier} admitted`);
    assert.equal(sampleValue(after, 'tiergate_decisions_total', { tier, verdict: 'shed' }), s.shed, `${tier} shed`);
    assert.equal(sampleValue(after, 'tiergate_decisions_total', { tier, verdict: 'tier-full' }), s.tierFull, `${tier} tier-full`);
    assert.equal(sampleValue(after, 'tiergate_decisions_total', { tier, verdict: 'rate-limited' }), s.rateLimited, `${tier} rate-limited`);
    const scale = sampleValue(after, 'tiergate_refill_scale', { tier }); // recovers with time: a gauge, read anew
    assert.ok(scale >= 0 && scale <= 1, `${tier} refill scale ${scale}`);
    admitted += s.admitted;
  }
  assert.ok(sampleValue(after, 'tiergate_decisions_total', { tier: 'background', verdict: 'shed' }) > 0);
  // The gatekeeper admitted what the client saw answered (not 503) plus what the gate refused after it.
  const q = stats.queue;
  assert.equal(sampleValue(after, 'tiergate_inflight'), q.inFlight);
  assert.equal(sampleValue(after, 'tiergate_limit'), q.limit);
  for (const [tier, s] of Object.entries(q.tiers)) {
    assert.equal(sampleValue(after, 'tiergate_queue_dispatched_total', { tier }), s.admitted, `${tier} dispatched`);
    assert.equal(sampleValue(after, 'tiergate_queue_rejected_total', { tier, reason: 'queue-full' }), s.rejected);
    assert.equal(sampleValue(after, 'tiergate_queue_rejected_total', { tier, reason: 'timeout' }), s.timeout);
    assert.equal(sampleValue(after, 'tiergate_queue_rejected_total', { tier, reason: 'codel' }), s.codel);
    assert.equal(sampleValue(after, 'tiergate_queue_rejected_total', { tier, reason: 'abandoned' }), s.abandoned);
    assert.equal(sampleValue(after, 'tiergate_queue_wait_seconds_count', { tier }), s.admitted, `${tier} wait count`);
    assert.equal(sampleValue(after, 'tiergate_queued', { tier }), s.queued);
  }
  const dispatched = Object.values(q.tiers).reduce((n, s) => n + s.admitted, 0);
  const refusedByGate = Object.values(q.tiers).reduce((n, s) => n + s.rejected + s.displaced + s.timeout + s.codel + s.abandoned, 0);
  assert.equal(dispatched + refusedByGate + q.queued, admitted, 'every request the gatekeeper admitted reached the gate');
});

test('metrics() registers on the given registry, refuses a second registration whole, and unregisters', () => {
  const registry = new prom.Registry();
  const gk = t.gatekeeper();
  const m = t.metrics({ gatekeeper: gk, registry });
  assert.ok(m.names.includes('tiergate_decisions_total'));
  assert.ok(m.names.includes('tiergate_event_loop_lag_seconds'), 'without a LagMonitor the gatekeeper reports the loop');
  assert.throws(() => t.metrics({ gatekeeper: gk, registry }), /tiergate_decisions_total is already registered/);
  m.unregister();
  assert.deepEqual(registry.getMetricsAsArray(), []);
  t.metrics({ gatekeeper: gk, registry }).unregister();
});

test('metrics() without a registry uses prom-client\'s default one', async () => {
  const q = t.concurrencyGate({ maxConcurrent: 3 });
  const m = t.metrics({ queue: q });
  try {
    assert.equal(m.registry, prom.register);
    const text = await prom.register.metrics();
    assert.match(text, /^tiergate_limit 3$/m);
  } finally {
    m.unregister();
  }
});

test('the queue wait histogram counts every admitted wait and its buckets bound them', async (t2) => {
  const registry = new prom.Registry();
  const q = t.concurrencyGate.http({ maxConcurrent: 1, maxQueue: 10 }, (req, res) => setTimeout(() => res.end('ok'), 20));
  t.metrics({ queue: q, registry });
  const server = http.createServer(q);
  const port = await listen(server);
  t2.after(() => close(server));
  await Promise.all([...Array(5)].map(() => request(port)));
  const fams = parsePrometheusText(await registry.metrics());
  const tier = 'background';
  assert.equal(sampleValue(fams, 'tiergate_queue_wait_seconds_count', { tier }), 5);
  // Four of them waited at least ~20 ms behind the one in flight, none as long as 10 s.
  assert.ok(sampleValue(fams, 'tiergate_queue_wait_seconds_bucket', { tier, le: '0.01' }) <= 1);
  assert.equal(sampleValue(fams, 'tiergate_queue_wait_seconds_bucket', { tier, le: '10' }), 5);
  assert.ok(sampleValue(fams, 'tiergate_queue_wait_seconds_sum', { tier }) >= 4 * 0.015);
});

test('metrics() options: errors name the option, with their codes', () => {
  const registry = new prom.Registry();
  const cases = [
    [() => t.metrics(), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /metrics: options must be an object/],
    [() => t.metrics({ registry }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /must name at least one of gatekeeper, queue, lag, ledger, leases, cluster$/],
    [() => t.metrics({ leases: {}, registry }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /metrics: options\.leases must be a LeaseDriver, got object/],
    [() => t.metrics({ gatekeeper: {}, registry }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /metrics: options\.gatekeeper must be a gatekeeper/],
    [() => t.metrics({ queue: () => {}, registry }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /metrics: options\.queue must be a concurrency gate/],
    [() => t.metrics({ lag: 1, registry }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /metrics: options\.lag must be a LagMonitor/],
    [() => t.metrics({ gatekeeper: t.gatekeeper(), registry: {} }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.registry must be a prom-client Registry/],
    [() => t.metrics({ gatekeeper: t.gatekeeper(), registry, waitBuckets: [1, NaN] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /waitBuckets\[1\]/],
    [() => t.metrics({ gatekeeper: t.gatekeeper(), registry, waitBuckets: [2, 1] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /waitBuckets\[1\]/],
    [() => t.metrics({ gatekeeper: t.gatekeeper(), registry, prefix: 'x' }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "prefix"/],
  ];
  for (const [fn, Err, code, re] of cases) assert.throws(fn, (e) => e instanceof Err && e.code === code && re.test(e.message), String(re));
});

test('without prom-client installed, metrics() names what to install (ERR_TIERGATE_MISSING_DEPENDENCY)', () => {
  const { spawnSync } = require('node:child_process');
  // A child whose module resolution cannot see prom-client: the package still loads.
  const script = `
    const Module = require('node:module');
    const orig = Module._resolveFilename;
    Module._resolveFilename = function (req, ...a) { if (req === 'prom-client') { const e = new Error("Cannot find module 'prom-client'"); e.code = 'MODULE_NOT_FOUND'; throw e; } return orig.call(this, req, ...a); };
    const t = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
    try { t.metrics({ gatekeeper: t.gatekeeper() }); } catch (e) { console.log(e.code + ' ' + e.message); }`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
  assert.match(r.stdout, /^ERR_TIERGATE_MISSING_DEPENDENCY tiergate: metrics\(\) needs the package "prom-client": npm install prom-client/);
});

test('statusRoute: 200 while healthy, 503 naming the reason while stalled or after a protected tier lost requests; stats JSON', async (t2) => {
  const tiers = [
    { name: 'critical', protected: true, limit: 0, windowMs: 1000, burst: 1 },
    { name: 'background', limit: 1e9, windowMs: 1000 },
  ];
  const gk = t.gatekeeper.http({ tiers, trustTierHeader: true }, (req, res) => res.end('ok'));
  const status = t.statusRoute({ gatekeeper: gk, recentMs: 60_000 });
  const server = http.createServer((req, res) => status.handle(req, res) || gk(req, res));
  const port = await listen(server);
  t2.after(() => close(server));
  // Health injected, not live: a loaded machine can stall a live loop past the watchdog's threshold,
  // and the route would rightly say so (the stall signal itself is tested with the lag monitor).
  const healthy = { lagMs: 0, stalled: false };
  gk.injectHealth(healthy);
  const ok = await request(port, { path: '/status' });
  assert.equal(ok.status, 200);
  assert.equal(ok.json.status, 'ok');
  assert.deepEqual(ok.json.reasons, []);
  assert.equal((await request(port, { method: 'HEAD', path: '/status' })).body, '');

  gk.injectHealth({ lagMs: 0, stalled: true });
  const stalled = await request(port, { path: '/status' });
  assert.equal(stalled.status, 503);
  assert.deepEqual(stalled.json.reasons, ['event-loop-stalled']);
  gk.injectHealth(healthy);
  assert.equal((await request(port, { path: '/status' })).status, 200);

  // The protected tier's pool holds one token and never refills: the second critical request is refused.
  assert.equal((await request(port, { headers: { 'x-user-tier': 'critical' } })).status, 200);
  assert.equal((await request(port, { headers: { 'x-user-tier': 'critical' } })).status, 503);
  const shedding = await request(port, { path: '/status' });
  assert.equal(shedding.status, 503);
  assert.deepEqual(shedding.json.reasons, ['protected-tier-shed']);

  const stats = await request(port, { path: '/status/stats' });
  assert.equal(stats.status, 200);
  assert.deepEqual(Object.keys(stats.json), ['gatekeeper', 'ledger']);
  assert.equal(stats.json.gatekeeper.tiers.critical.tierFull, 1);
});

test('statusRoute options: errors name the option', () => {
  const gk = t.gatekeeper();
  assert.throws(() => t.statusRoute({ gatekeeper: gk, path: 'status' }), (e) => e.code === 'ERR_TIERGATE_INVALID_OPTION' && /options\.path must be a path/.test(e.message));
  assert.throws(() => t.statusRoute({ gatekeeper: gk, recentMs: -1 }), (e) => e.code === 'ERR_TIERGATE_INVALID_OPTION' && /options\.recentMs/.test(e.message));
  assert.throws(() => t.statusRoute({ gatekeeper: gk, maxLagMs: Infinity }), (e) => e.code === 'ERR_TIERGATE_INVALID_OPTION' && /options\.maxLagMs/.test(e.message));
  assert.throws(() => t.statusRoute({ gatekeeper: gk, stat: true }), (e) => e.code === 'ERR_TIERGATE_UNKNOWN_OPTION');
});

test('statusRoute on Fastify: its routes skip the guards and answer', async () => {
  const fastify = require('fastify')({ logger: false });
  const q = t.concurrencyGate({ maxConcurrent: 1 }).gate; // the guard itself, as fastify.concurrencyGate is
  await fastify.register(t.tiergatePlugin, { tiers: [{ name: 'only', limit: 0, windowMs: 1000, burst: 1 }] });
  fastify.register(t.statusRoute({ gatekeeper: fastify.tiergate, queue: q }).plugin);
  fastify.get('/', async () => 'x');
  await fastify.ready();
  fastify.tiergate.injectHealth({ lagMs: 0, stalled: false }); // as above: the route's logic, not the machine's load
  for (let i = 0; i < 3; i++) assert.equal((await fastify.inject('/status')).statusCode, 200);
  const r = await fastify.inject('/status');
  assert.equal(r.json().status, 'ok');
  assert.equal(fastify.tiergate.stats().tiers.only.admitted, 0, 'the status route went through the gatekeeper');
  await fastify.close();
});

test('a lease driver\'s families agree with its stats()', async () => {
  const registry = new prom.Registry();
  const quota = new Quota({ limits: [{ name: 'api', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 5 }] });
  const driver = new LeaseDriver(quota, new MemoryStore(), { storeTimeoutMs: 200 });
  try {
    t.metrics({ leases: driver, registry });
    const limit = quota.limitId('api');
    const codes = [];
    for (let i = 0; i < 8; i++) {
      const d = driver.spend(limit, 'client-a');
      codes.push(typeof d === 'number' ? d : (await d).code);
    }
    const s = driver.stats();
    const fams = parsePrometheusText(await registry.metrics());
    const lease = sampleValue(fams, 'tiergate_lease_decisions_total', { decision: 'lease' });
    assert.equal(lease, s.decisions.lease);
    assert.equal(sampleValue(fams, 'tiergate_lease_decisions_total', { decision: 'exhausted' }), s.decisions.exhausted);
    assert.equal(s.decisions.lease + s.decisions.exhausted + s.decisions.provisional, 8, JSON.stringify(s.decisions));
    assert.ok(s.decisions.exhausted >= 3, 'a burst of 5 refuses the rest');
    assert.equal(sampleValue(fams, 'tiergate_lease_store_up'), s.storeUp ? 1 : 0);
    assert.equal(sampleValue(fams, 'tiergate_lease_tokens_granted_total'), s.granted);
    assert.equal(sampleValue(fams, 'tiergate_lease_store_requests_total'), s.requestsSent);
    assert.ok(s.requestsSent > 0);
    for (const [, f] of fams) for (const x of f.samples) for (const k of Object.keys(x.labels)) assert.equal(k, 'decision');
  } finally {
    await driver.close();
  }
});

'use strict';
// Shadow mode on a real server: the overload decisions (the shed controller's, the turn budget's,
// the concurrency limit's: tests in concurrency.test.js) are made, counted and reported to the
// hooks, the channel and stats(), and none is enforced but the share asked for; tier budgets and
// per-key quotas bind as always. The loop's health is injected (the controller's test seam).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const diagnostics = require('node:diagnostics_channel');
const { gatekeeper, DECISION_CHANNEL } = require('../..');
const { listen, close, request } = require('../helpers/http');
const { UNLIMITED_TIERS } = require('../helpers/tiers');

// 50..150 ms: background throttled over 50..100, standard over 100..150; acts at once.
const SHED = { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, hysteresisMs: 10, integralMs: 0, confirmMs: 0 };

async function serve(t, options) {
  const handler = gatekeeper.http({ tiers: UNLIMITED_TIERS, trustTierHeader: true, shed: SHED, ...options }, (req, res) => res.end('ok'));
  const server = http.createServer(handler);
  const port = await listen(server);
  t.after(() => close(server));
  const get = (tier) => request(port, { headers: { 'x-user-tier': tier } });
  return { gate: handler, get };
}

async function statuses(get, tier, n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push((await get(tier)).status);
  return out;
}

test('shadow mode serves what the controller would shed and reports it as a shed not enforced', async (t) => {
  const sheds = [];
  const decisions = [];
  const published = [];
  const onPublish = (info) => published.push(info);
  diagnostics.subscribe(DECISION_CHANNEL, onPublish);
  t.after(() => diagnostics.unsubscribe(DECISION_CHANNEL, onPublish));
  const { gate, get } = await serve(t, { shadow: true, onShed: (i) => sheds.push(i), onDecision: (i) => decisions.push(i) });
  assert.equal(gate.stats().queue, null, 'no turn queue: nothing is made to wait for a turn');
  gate.injectHealth({ lagMs: 150 }); // every unprotected tier at scale 0
  assert.deepEqual(await statuses(get, 'background', 10), Array(10).fill(200));
  assert.deepEqual(await statuses(get, 'standard', 5), Array(5).fill(200));
  assert.deepEqual(await statuses(get, 'critical', 5), Array(5).fill(200));
  const s = gate.stats();
  assert.deepEqual(s.shadow, { enforcePercent: 0 });
  assert.deepEqual([s.tiers.background.shadowShed, s.tiers.standard.shadowShed, s.tiers.critical.shadowShed], [10, 5, 0]);
  assert.deepEqual([s.tiers.background.shed, s.tiers.background.admitted], [0, 10]);
  assert.deepEqual([s.tiers.background.refillScale, s.tiers.standard.refillScale], [0, 0], 'the scales it would apply');
  assert.equal(sheds.length, 15);
  for (const i of sheds) {
    assert.deepEqual([i.verdict, i.status, i.shadow, i.cause], ['shed', 503, true, 'lag']);
    assert.ok(i.tier === 'background' || i.tier === 'standard');
  }
  // One info per decision: the shadow sheds as sheds, the protected tier's as admits.
  assert.deepEqual(decisions.map((i) => i.verdict).sort(), [...Array(5).fill('admit'), ...Array(15).fill('shed')]);
  assert.deepEqual(decisions.filter((i) => i.verdict === 'admit').map((i) => i.shadow), Array(5).fill(false));
  assert.equal(published.filter((i) => i.shadow).length, 15);
  // Healthy again: nothing would be shed.
  gate.injectHealth({ lagMs: 0 });
  assert.deepEqual(await statuses(get, 'background', 3), [200, 200, 200]);
  assert.equal(gate.stats().tiers.background.shadowShed, 10);
});

test('enforcePercent enforces that share of the decisions, evenly; the rest are served', async (t) => {
  const sheds = [];
  const { gate, get } = await serve(t, { shadow: { enforcePercent: 25 }, onShed: (i) => sheds.push(i) });
  gate.injectHealth({ lagMs: 150 });
  const got = await statuses(get, 'background', 40);
  assert.deepEqual(got, Array.from({ length: 40 }, (_, i) => (i % 4 === 3 ? 503 : 200)));
  const b = gate.stats().tiers.background;
  assert.deepEqual([b.shed, b.shadowShed, b.admitted], [10, 30, 30]);
  assert.deepEqual([sheds.filter((i) => i.shadow).length, sheds.filter((i) => !i.shadow).length], [30, 10]);
  assert.deepEqual(gate.stats().shadow, { enforcePercent: 25 });
  // 100%: every decision enforced, as without shadow mode.
  const all = await serve(t, { shadow: { enforcePercent: 100 } });
  all.gate.injectHealth({ lagMs: 150 });
  assert.deepEqual(await statuses(all.get, 'background', 4), [503, 503, 503, 503]);
});

test("a throttled tier's would-be sheds are counted while its budget still binds", async (t) => {
  // Background throttled to half (lag 75 ms) on a budget of 10: the enforcing gate admits 5 of 12,
  // the shadow gate 10 (flagging 5) and refuses the rest as the full tier they are.
  const tiers = [
    { name: 'critical', protected: true, limit: 1000, windowMs: 1000 },
    { name: 'standard', limit: 1000, windowMs: 1000 },
    { name: 'background', limit: 10, windowMs: 1000 },
  ];
  const real = await serve(t, { tiers });
  const shadow = await serve(t, { tiers, shadow: true });
  real.gate.injectHealth({ lagMs: 75 });
  shadow.gate.injectHealth({ lagMs: 75 });
  const a = await statuses(real.get, 'background', 12);
  const b = await statuses(shadow.get, 'background', 12);
  assert.equal(a.filter((s) => s === 200).length, 5, a.join());
  assert.equal(b.filter((s) => s === 200).length, 10, b.join());
  const r = real.gate.stats().tiers.background;
  const s = shadow.gate.stats().tiers.background;
  assert.deepEqual([r.admitted, r.shed], [5, 7]);
  assert.deepEqual([s.admitted, s.shadowShed, s.shed, s.tierFull], [10, 5, 0, 2]);
});

test('options.shadow is checked at construction, with a stable code', () => {
  const bad = [
    ['yes', TypeError, /options\.shadow must be false, true or \{ enforcePercent \}/],
    [1, TypeError, /options\.shadow/],
    [{ enforcePercent: -1 }, RangeError, /options\.shadow\.enforcePercent/],
    [{ enforcePercent: 101 }, RangeError, /options\.shadow\.enforcePercent/],
    [{ enforcePercent: NaN }, RangeError, /options\.shadow\.enforcePercent/],
    [{ enforcePercent: Infinity }, RangeError, /options\.shadow\.enforcePercent/],
    [{ enforcePercent: '5' }, TypeError, /options\.shadow\.enforcePercent/],
  ];
  for (const [shadow, Ctor, msg] of bad) {
    assert.throws(() => gatekeeper({ shadow }), (err) => err instanceof Ctor && msg.test(err.message) && err.code === 'ERR_TIERGATE_INVALID_OPTION', JSON.stringify(shadow));
  }
  const unknown = (err) => err.code === 'ERR_TIERGATE_UNKNOWN_OPTION';
  assert.throws(() => gatekeeper({ shadow: { enforce: 5 } }), (err) => unknown(err) && /options\.shadow has an unknown option "enforce"/.test(err.message));
  // Shadow mode covers every overload decision: the concurrency limit has no shadow of its own.
  assert.throws(() => gatekeeper({ concurrency: { shadow: true } }), (err) => unknown(err) && /options\.concurrency has an unknown option "shadow"/.test(err.message));
  for (const ok of [false, true, {}, { enforcePercent: 0 }, { enforcePercent: 12.5 }, { enforcePercent: 100 }]) gatekeeper({ shadow: ok });
  assert.equal(gatekeeper({}).stats().shadow, null);
});

test("metrics report shadow mode's would-be sheds and the learned limit, as stats() does", async (t) => {
  const prom = require('prom-client');
  const { metrics } = require('../..');
  const { parsePrometheusText, sampleValue } = require('../helpers/prom-text');
  const { gate, get } = await serve(t, { shadow: true });
  const registry = new prom.Registry();
  const m = metrics({ gatekeeper: gate, registry });
  t.after(() => m.unregister());
  gate.injectHealth({ lagMs: 150 });
  await statuses(get, 'background', 6);
  await statuses(get, 'standard', 2);
  const fams = parsePrometheusText(await registry.metrics());
  const s = gate.stats();
  for (const tier of ['critical', 'standard', 'background']) {
    assert.equal(sampleValue(fams, 'tiergate_shadow_shed_total', { tier }), s.tiers[tier].shadowShed, tier);
  }
  assert.equal(sampleValue(fams, 'tiergate_shadow_shed_total', { tier: 'background' }), 6);
  const c = s.concurrency;
  assert.equal(sampleValue(fams, 'tiergate_concurrency_limit'), c.limit);
  assert.equal(sampleValue(fams, 'tiergate_concurrency_inflight'), c.inFlight);
  assert.equal(sampleValue(fams, 'tiergate_concurrency_waiting'), c.waiting);
  assert.equal(sampleValue(fams, 'tiergate_concurrency_waits_total'), c.waits);
  assert.equal(sampleValue(fams, 'tiergate_concurrency_shadow_waits_total'), c.shadowWaits);
  assert.equal(sampleValue(fams, 'tiergate_concurrency_shed_total', { reason: 'wait' }), c.waitShed);
  assert.equal(fams.get('tiergate_concurrency_shed_total').type, 'counter');
  // Without the limit, no family of it.
  const off = metrics({ gatekeeper: gatekeeper({ concurrency: false }), registry: new prom.Registry() });
  assert.ok(!off.names.includes('tiergate_concurrency_limit') && off.names.includes('tiergate_shadow_shed_total'));
});

test('with cluster mode: each would-be shed heard of once, then the cluster decides (real Redis)', { timeout: 60_000 }, async (t) => {
  const { needRedis, redisServer } = require('../helpers/redis');
  const { cluster } = require('../..');
  if (!needRedis(t)) return;
  const redis = await redisServer();
  const c = cluster({ redis: redis.url, tiers: { background: { perKey: { algorithm: 'token-bucket', limit: 3, windowMs: 60_000 } } } });
  t.after(async () => {
    await c.close();
    await redis.stop();
  });
  await c.ready;
  const sheds = [];
  const decisions = [];
  const { gate, get } = await serve(t, { shadow: true, cluster: c, key: { header: 'x-user' }, onShed: (i) => sheds.push(i), onDecision: (i) => decisions.push(i) });
  gate.injectHealth({ lagMs: 150 });
  const got = await statuses(get, 'background', 5);
  assert.deepEqual(got.filter((s) => s === 200).length, 3, `the cluster's per-key limit still binds: ${got}`);
  assert.equal(sheds.length, 3, 'the three the cluster admitted, each once');
  assert.ok(sheds.every((i) => i.shadow && i.cause === 'lag'));
  assert.equal(decisions.filter((i) => i.shadow).length, 3);
  assert.equal(decisions.length, 5, 'one info per request: three shadow sheds, two cluster refusals');
});

test('shedStatus 429: the info of a shed says the status sent, enforced or in shadow mode', async (t) => {
  const infos = [];
  const real = await serve(t, { shedStatus: 429, onShed: (i) => infos.push(i) });
  real.gate.injectHealth({ lagMs: 150 });
  assert.deepEqual(await statuses(real.get, 'background', 2), [429, 429]);
  const shadow = await serve(t, { shedStatus: 429, shadow: true, onShed: (i) => infos.push(i) });
  shadow.gate.injectHealth({ lagMs: 150 });
  assert.deepEqual(await statuses(shadow.get, 'background', 2), [200, 200]);
  assert.deepEqual(infos.map((i) => [i.status, i.shadow]), [[429, false], [429, false], [429, true], [429, true]]);
});

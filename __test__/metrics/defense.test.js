'use strict';
// Metrics of the abuse defense and of cluster mode: a real node:http app refuses by the deny list, a
// ban, named limits and a challenge; a scrape of /metrics parses and agrees with
// gate.defense.stats(). With cluster mode on a real redis-server, the ban channel's and the lease
// driver's families (fallback decisions, store health) agree with cluster.stats(), Redis up and down.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const prom = require('prom-client');
const t = require('../..');
const { request, listen, close } = require('../helpers/http');
const { parsePrometheusText, sampleValue } = require('../helpers/prom-text');
const { needRedis, redisServer } = require('../helpers/redis');

const BOUNDED_LABELS = ['tier', 'verdict', 'reason', 'cause', 'le', 'limit', 'decision'];

/** The app behind `gate`, and /metrics of `m` on its own server (not behind the gate). */
async function serve(t2, gate, m) {
  const app = http.createServer(gate);
  const scrape = http.createServer((req, res) => m.handler(req, res));
  await listen(app);
  await listen(scrape);
  t2.after(async () => {
    m.unregister();
    await close(app);
    await close(scrape);
  });
  const hit = async (ip, p = '/', headers = {}) => (await request(app.address().port, { path: p, headers: { 'x-forwarded-for': ip, ...headers } })).status;
  const families = async () => parsePrometheusText((await request(scrape.address().port, { path: '/metrics' })).body);
  return { hit, families };
}

const handler = (req, res) => {
  res.statusCode = req.url.startsWith('/missing') ? 404 : 200;
  res.end('ok');
};

test('defense metrics: bans, refusals by reason, per-limit refusals and challenges agree with stats()', async (t2) => {
  const gate = t.gatekeeper.http({
    trustProxy: 1,
    limits: [
      { name: 'per-ip', by: 'ip', algorithm: 'fixed-window', limit: 3, windowMs: 60_000, routes: ['/api'] },
      { name: 'search', by: 'ip', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, routes: ['/search'] },
    ],
    deny: ['192.0.2.0/24'],
    bans: { rules: [{ name: 'probe', on: 'probe', threshold: 3, windowMs: 60_000, banMs: 60_000 }, { name: 'limited', on: 'rate-limited', threshold: 3, windowMs: 60_000, banMs: 60_000 }] },
    challenge: { secret: 'a-challenge-secret-of-32-bytes-or-more!!', afterStrikes: 2 },
  }, handler);
  const m = t.metrics({ gatekeeper: gate, registry: new prom.Registry() });
  const { hit, families } = await serve(t2, gate, m);

  const seen = [];
  for (let i = 0; i < 4; i++) seen.push(await hit('198.51.100.1', '/api/x')); // 3 served, 1 refused by per-ip
  seen.push(await hit('198.51.100.1', '/search'), await hit('198.51.100.1', '/search')); // 1 served, 1 refused by search
  for (let i = 0; i < 2; i++) seen.push(await hit('192.0.2.7')); // deny-listed
  // Two probes are two strikes: the challenge (afterStrikes 2) answers the next three.
  for (let i = 0; i < 5; i++) seen.push(await hit('198.51.100.2', `/missing/${i}`));
  gate.defense.bans.ban('198.51.100.3', { durationMs: 60_000 });
  for (let i = 0; i < 2; i++) seen.push(await hit('198.51.100.3')); // banned
  const s = gate.defense.stats();
  t2.diagnostic(`statuses ${seen.join(' ')}; stats ${JSON.stringify({ bans: s.bans, refusals: s.refusals, limits: s.limits })}`);
  assert.deepEqual(seen, [200, 200, 200, 429, 200, 429, 403, 403, 404, 404, 403, 403, 403, 403, 403]);
  assert.deepEqual(s.refusals, { denyListed: 2, banned: 2, challenged: 3, shaperFull: 0 });
  assert.equal(s.bans, 1);
  assert.deepEqual(s.limits.map((l) => l.refused), [1, 1]);

  const fams = await families();
  assert.equal(sampleValue(fams, 'tiergate_bans'), s.bans);
  for (const f of ['added', 'lifted', 'expired', 'evicted']) assert.equal(sampleValue(fams, `tiergate_bans_${f}_total`), s[f], f);
  assert.equal(sampleValue(fams, 'tiergate_ban_refusals_total'), s.refused);
  assert.equal(sampleValue(fams, 'tiergate_defense_refusals_total', { reason: 'deny-listed' }), s.refusals.denyListed);
  assert.equal(sampleValue(fams, 'tiergate_defense_refusals_total', { reason: 'banned' }), s.refusals.banned);
  assert.equal(sampleValue(fams, 'tiergate_challenges_total'), s.refusals.challenged);
  for (const l of s.limits) {
    assert.equal(sampleValue(fams, 'tiergate_limit_refusals_total', { limit: l.name }), l.refused, l.name);
    assert.equal(sampleValue(fams, 'tiergate_limit_keys', { limit: l.name }), l.keys, l.name);
  }
  assert.equal(fams.get('tiergate_bans').type, 'gauge');
  assert.equal(fams.get('tiergate_limit_refusals_total').type, 'counter');
  for (const [, f] of fams) for (const x of f.samples) for (const k of Object.keys(x.labels)) assert.ok(BOUNDED_LABELS.includes(k), `label ${k}`);

  // An operator lift shows at the next scrape.
  assert.equal(gate.defense.bans.lift('198.51.100.3'), true);
  const later = await families();
  assert.equal(sampleValue(later, 'tiergate_bans'), gate.defense.stats().bans);
  assert.equal(sampleValue(later, 'tiergate_bans_lifted_total'), 1);
});

test('cluster metrics: ban channel and lease driver families agree with cluster.stats(), Redis up then down', { timeout: 60_000 }, async (t2) => {
  if (!needRedis(t2)) return;
  const redis = await redisServer();
  const c = t.cluster({ redis: redis.url, storeTimeoutMs: 100, fallback: 'open', limits: [{ name: 'calls', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 5, retryMs: 50 }] });
  t2.after(async () => {
    await c.close();
    await redis.stop();
  });
  await c.ready;
  const gate = t.gatekeeper.http({ cluster: c, trustProxy: 1, bans: {} }, handler);
  const m = t.metrics({ gatekeeper: gate, registry: new prom.Registry() });
  const { hit, families } = await serve(t2, gate, m);

  gate.defense.bans.ban('203.0.113.0/24', { durationMs: 60_000 });
  assert.equal(await hit('203.0.113.5'), 403);
  for (let i = 0; i < 3; i++) assert.equal((await c.check('calls', 'k')).allowed, true);
  let s = c.stats();
  let fams = await families();
  assert.equal(sampleValue(fams, 'tiergate_cluster_ban_changes_published_total'), s.bans.published);
  assert.equal(s.bans.published, 1);
  assert.equal(sampleValue(fams, 'tiergate_cluster_ban_changes_received_total'), 0);
  assert.equal(sampleValue(fams, 'tiergate_lease_store_up'), 1);
  assert.equal(sampleValue(fams, 'tiergate_lease_decisions_total', { decision: 'lease' }), s.decisions.lease);
  assert.equal(sampleValue(fams, 'tiergate_bans'), 1, 'the defense holds the cluster ban');

  // Redis away: decisions fall back (open) and are counted; the store is reported down.
  await redis.kill('SIGKILL');
  for (let i = 0; i < 10 && c.stats().storeUp; i++) await c.check('calls', `cold-${i}`);
  for (let i = 0; i < 3; i++) await c.check('calls', 'cold-x');
  s = c.stats();
  fams = await families();
  assert.equal(s.storeUp, false);
  assert.equal(sampleValue(fams, 'tiergate_lease_store_up'), 0);
  assert.ok(s.fallbackDecisions > 0, JSON.stringify(s.decisions));
  for (const [field, decision] of [['fallback', 'fallback'], ['storeDown', 'store-down'], ['share', 'share'], ['lease', 'lease']]) {
    assert.equal(sampleValue(fams, 'tiergate_lease_decisions_total', { decision }), s.decisions[field], decision);
  }
  assert.equal(sampleValue(fams, 'tiergate_lease_store_timeouts_total') + sampleValue(fams, 'tiergate_lease_store_errors_total'), s.timeouts + s.storeErrors);
});

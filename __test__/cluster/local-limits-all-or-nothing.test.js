'use strict';
// A request counted by local named limits and refused by the cluster step (a cluster-funded named
// limit used up, on a real redis-server) counts in none of the local limits: their units are given
// back, by header key and by client address, with no second refund when a limit that skips failed
// requests settles. Both ways the cluster answers: at once (the key's lease is held) and late (the
// first request of a key waits for its lease request, and another process has used the limit up).
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { needRedis, redisServer } = require('../helpers/redis');
const { listen, close, request } = require('../helpers/http');
const { gatekeeper, cluster } = require('../..');
const { QUOTA_CODE } = require('../../lib/quota/engine');

const CLUSTER_LIMIT = 3;
const LOCAL_LIMIT = 20;
const limits = () => [{ name: 'search', algorithm: 'fixed-window', limit: CLUSTER_LIMIT, windowMs: 600_000, fallback: 'closed' }];

test('Redis: a request the cluster refuses gives back what the local named limits counted', { timeout: 60_000 }, async (t) => {
  if (!needRedis(t)) return;
  const redis = await redisServer();
  t.after(() => redis.stop());
  // Exact mode with a generous wait: a loaded machine's late store answer must not refuse for itself.
  const shared = cluster({ redis: redis.url, storeTimeoutMs: 5000, limits: limits() });
  const other = cluster({ redis: redis.url, storeTimeoutMs: 5000, limits: limits() });
  t.after(() => Promise.all([shared.close(), other.close()]));
  const gate = gatekeeper.http({
    tiers: [{ name: 'paid', limit: 1e9, windowMs: 1000 }],
    cluster: shared,
    // No local overload protection: a loaded test machine must not turn requests into 503s of its own.
    shed: false,
    concurrency: false,
    limits: [
      { name: 'per-key', by: { header: 'x-key' }, limit: LOCAL_LIMIT, windowMs: 600_000 },
      { name: 'search', by: { header: 'x-key' }, cluster: true },
      { name: 'per-ip', by: 'ip', limit: LOCAL_LIMIT, windowMs: 600_000 },
      { name: 'failures', by: { header: 'x-key' }, limit: LOCAL_LIMIT, windowMs: 600_000, skipFailedRequests: true },
    ],
    bans: { rules: false },
  }, (req, res) => res.end('ok'));
  const server = http.createServer(gate);
  const port = await listen(server);
  t.after(() => close(server));
  const left = (name, key) => gate.limits.get(name, key).remaining;

  await t.test('the cluster refuses at once: the local units come back', async () => {
    for (let i = 0; i < CLUSTER_LIMIT; i++) assert.equal((await request(port, { headers: { 'x-key': 'a' } })).status, 200);
    assert.deepEqual([left('per-key', 'a'), left('failures', 'a')], [LOCAL_LIMIT - CLUSTER_LIMIT, LOCAL_LIMIT - CLUSTER_LIMIT]);
    const ipBefore = left('per-ip', '127.0.0.1');
    for (let i = 0; i < 5; i++) {
      const r = await request(port, { headers: { 'x-key': 'a' } });
      assert.equal(r.status, 429);
      assert.equal(r.json.limit, 'search', 'refused by the cluster limit');
    }
    assert.equal(left('per-key', 'a'), LOCAL_LIMIT - CLUSTER_LIMIT, 'the refused requests count in the local limit by header');
    assert.equal(left('per-ip', '127.0.0.1'), ipBefore, 'nor in the one by address');
    assert.equal(left('failures', 'a'), LOCAL_LIMIT - CLUSTER_LIMIT, 'given back once: the failed outcome gives back nothing more');
  });

  await t.test('the cluster refuses late (the key waits for its lease): the local units come back', async () => {
    // Another process uses key b's cluster limit up; this one has never leased for b.
    for (let i = 0; i < CLUSTER_LIMIT; i++) {
      const r = other.spend('search', 'b');
      assert.ok((typeof r === 'number' ? r : (await r).code) < QUOTA_CODE.NEED_LEASE, 'spent');
    }
    const ipBefore = left('per-ip', '127.0.0.1');
    for (let i = 0; i < 3; i++) assert.equal((await request(port, { headers: { 'x-key': 'b' } })).status, 429);
    assert.deepEqual([left('per-key', 'b'), left('failures', 'b'), left('per-ip', '127.0.0.1')], [LOCAL_LIMIT, LOCAL_LIMIT, ipBefore]);
  });
});

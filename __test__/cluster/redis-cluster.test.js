'use strict';
// Cluster mode on a real 3-master Redis Cluster, through the user's own ioredis Cluster client: keys
// spread over the masters (each script touches one slot), limits exact per key, bans propagated.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { needRedis, redisCluster } = require('../helpers/redis');
const { startNodes } = require('../helpers/cluster-nodes');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sum = (rs, status) => rs.reduce((a, r) => a + (r.statuses[status] || 0), 0);

test('cluster mode on a 3-master Redis Cluster', { timeout: 120_000 }, async (t) => {
  if (!needRedis(t)) return;
  const rc = await redisCluster();
  let nodes = [];
  t.after(async () => {
    await Promise.all(nodes.map((n) => n.close()));
    await rc.stop();
  });
  const cfg = {
    nodes: rc.nodes,
    tiers: [{ name: 'api', limit: 1e9, windowMs: 1000 }],
    cluster: { storeTimeoutMs: 500, tiers: { api: { perKey: { algorithm: 'fixed-window', limit: 40, windowMs: 3_600_000 } } } },
  };
  nodes = await startNodes(3, cfg);

  await t.test('each of 12 keys admits exactly its limit across 3 processes, and the keys live on every master', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `user-${i}`);
    for (const key of keys) {
      const rs = await Promise.all(nodes.map((n) => n.call('burst', { n: 60, key, tier: 'api' })));
      assert.equal(sum(rs, 200), 40, `${key}: ${JSON.stringify(rs)}`);
    }
    const perMaster = rc.servers.map((s) => Number(spawnSync('redis-cli', ['-p', String(s.port), 'dbsize'], { encoding: 'utf8' }).stdout.trim()));
    assert.ok(perMaster.every((n) => n > 0), `keys per master: ${perMaster}`);
  });

  await t.test('a ban in one process reaches the others through the cluster', async () => {
    const watching = nodes.slice(1).map((n) => n.call('until403', { key: 'mallory', tier: 'api', timeoutMs: 5000 }));
    await sleep(20);
    await nodes[0].call('ban', { target: 'mallory', durationMs: 60_000 });
    const seen = await Promise.all(watching);
    assert.ok(seen.every((s) => s !== null), 'enforced everywhere');
  });
});

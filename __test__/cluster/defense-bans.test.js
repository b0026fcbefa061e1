'use strict';
// Cluster bans through the abuse defense's ban table, on a real redis-server: several processes
// behind gatekeepers with `cluster` and a probe rule. A ban a rule makes in one process is enforced
// by the others within 100 ms, with its expiry; CIDR bans, permanent bans, operator lifts and the
// allow/deny lists reach every process; nothing echoes back; a late process loads what it missed.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { needRedis } = require('../helpers/redis');
const { startNode, startNodesOnRedis } = require('../helpers/cluster-nodes');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PROBES = 5;
const BAN_MS = 600_000;
const CFG = {
  // The cluster carries no tier limits here: only its ban channel is under test.
  cluster: { storeTimeoutMs: 200, limits: [{ name: 'unused', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] },
  defense: { bans: { rules: [{ name: 'probe', on: 'probe', threshold: PROBES, windowMs: 60_000, banMs: BAN_MS }] } },
};

test('cluster mode with the abuse defense: one ban table per process, shared over Redis', { timeout: 120_000 }, async (t) => {
  if (!needRedis(t)) return;
  const { redis, nodes } = await startNodesOnRedis(t, 3, CFG);
  const published = () => Promise.all(nodes.map(async (n) => (await n.call('stats')).bans.published));

  await t.test('a probe-flood ban in one process is enforced (403) by the others within 100 ms, with its expiry', async () => {
    let best = Infinity;
    let ip;
    for (let trial = 0; trial < 3 && best > 100; trial++) {
      ip = `198.51.100.${10 + trial}`;
      const watching = nodes.slice(1).map((n) => n.call('until403', { key: 'k', tier: 'paid', ip, timeoutMs: 5000 }));
      await sleep(20);
      const flood = await nodes[0].call('probe', { n: PROBES + 2, ip, tier: 'paid' });
      assert.equal(flood.statuses[404], PROBES, `banned after ${PROBES} probes: ${JSON.stringify(flood.statuses)}`);
      assert.equal(flood.statuses[403], 2);
      const at = await nodes[0].call('defense', { op: 'bannedAt', target: ip });
      assert.ok(at !== null, 'the rule banned the prober in the first process');
      const seen = await Promise.all(watching);
      assert.ok(seen.every((s) => s !== null), 'every other process refuses the banned client');
      best = Math.min(best, Math.max(...seen.map((s) => s - at)));
    }
    t.diagnostic(`a rule's ban enforced by both other processes within ${best} ms`);
    assert.ok(best <= 100, `enforced everywhere within ${best} ms`);
    const [here, there] = await Promise.all([nodes[0].call('defense', { op: 'get', target: ip }), nodes[2].call('defense', { op: 'get', target: ip })]);
    assert.equal(there.source, 'rule');
    assert.equal(there.cidr, false);
    assert.ok(there.until !== null && Math.abs(there.until - here.until) < 5000, `the expiry crossed: ${here.until} here, ${there.until} there`);
  });

  await t.test('an operator lift in one process propagates; a permanent ban stays permanent', async () => {
    const ip = '198.51.100.50';
    await nodes[1].call('defense', { op: 'ban', target: ip });
    const seen = await Promise.all([0, 2].map((i) => nodes[i].call('until403', { key: 'k', tier: 'paid', ip, timeoutMs: 5000 })));
    assert.ok(seen.every((s) => s !== null), 'the operator ban is enforced everywhere');
    assert.equal((await nodes[2].call('defense', { op: 'get', target: ip })).until, null, 'permanent there too');
    assert.equal(await nodes[0].call('defense', { op: 'lift', target: ip }), true);
    const served = await Promise.all([1, 2].map((i) => nodes[i].call('until403', { key: 'k', tier: 'paid', ip, timeoutMs: 5000, status: 200 })));
    assert.ok(served.every((s) => s !== null), 'the lift is applied everywhere');
    for (const n of nodes) assert.equal(await n.call('defense', { op: 'get', target: ip }), null);
  });

  await t.test('CIDR bans and the deny list reach every process, matched as prefixes', async () => {
    await nodes[2].call('defense', { op: 'ban', target: '203.0.113.0/24', durationMs: 60_000 });
    await nodes[0].call('defense', { op: 'setLists', lists: { deny: ['192.0.2.0/24'] } });
    for (const i of [0, 1]) assert.ok((await nodes[i].call('until403', { key: 'k', tier: 'paid', ip: '203.0.113.77', timeoutMs: 5000 })) !== null, `node ${i} refuses an address inside the banned prefix`);
    for (const i of [1, 2]) {
      assert.ok((await nodes[i].call('until403', { key: 'k', tier: 'paid', ip: '192.0.2.5', timeoutMs: 5000 })) !== null, `node ${i} refuses a denied address`);
      assert.deepEqual((await nodes[i].call('defense', { op: 'lists' })).deny, ['192.0.2.0/24']);
    }
    assert.equal(await nodes[1].call('status', { ip: '203.0.114.1', tier: 'paid' }), 200, 'outside the prefix: served');
  });

  await t.test('no echo: each process published only the changes made in it', async () => {
    // node 0: the rule's bans (one per trial above, at least one) and the lists, and the lift; node 1: its
    // operator ban; node 2: the CIDR ban. Remote changes applied to a table are not published again.
    const [p0, p1, p2] = await published();
    assert.ok(p0 >= 3 && p0 <= 5, `node 0 published ${p0}`);
    assert.equal(p1, 1);
    assert.equal(p2, 1);
  });

  await t.test('a lift published while the others\' subscriptions are down is applied when they resubscribe', async () => {
    // Redis drops every subscriber (CLIENT KILL), and the lift is published before they are back
    // (ioredis reconnects after 50 ms): they learn of it from the tombstone the lift left in the hash.
    let missedLive = 0;
    for (let trial = 0; trial < 3 && missedLive === 0; trial++) {
      const ip = `198.51.100.${70 + trial}`;
      await nodes[1].call('defense', { op: 'ban', target: ip, durationMs: BAN_MS });
      for (const i of [0, 2]) assert.ok((await nodes[i].call('until403', { key: 'k', tier: 'paid', ip, timeoutMs: 5000 })) !== null, `node ${i} has the ban`);
      const received = async () => Promise.all([1, 2].map(async (i) => (await nodes[i].call('stats')).bans.received));
      const before = await received();
      const kill = spawnSync('redis-cli', ['-p', String(redis.port), 'CLIENT', 'KILL', 'TYPE', 'pubsub'], { encoding: 'utf8' });
      assert.equal(kill.status, 0, kill.stderr);
      assert.equal(await nodes[0].call('defense', { op: 'lift', target: ip }), true);
      for (const i of [1, 2]) assert.ok((await nodes[i].call('until403', { key: 'k', tier: 'paid', ip, timeoutMs: 5000, status: 200 })) !== null, `node ${i} lifted the ban`);
      const after = await received();
      missedLive += after.filter((r, k) => r === before[k]).length;
    }
    assert.ok(missedLive > 0, 'at least one process missed a lift live and applied it from the hash');
  });

  await t.test('a process that starts late loads the shared bans and lists into its defense, and prunes what has ended', async () => {
    // An expired ban and a lift older than the tombstones' 24 h, as another process left them (fields:
    // `b:k:<client key>`, `b:c:<CIDR prefix>`).
    const cli = (...a) => spawnSync('redis-cli', ['-p', String(redis.port), ...a], { encoding: 'utf8' });
    const HASH = 'tiergate:{bans}';
    cli('HSET', HASH, 'b:k:192.0.2.200', JSON.stringify({ target: '192.0.2.200', cidr: false, until: Date.now() - 1000, reason: 'old', source: 'rule', offense: 1 }));
    cli('HSET', HASH, 'b:k:192.0.2.201', JSON.stringify({ target: '192.0.2.201', cidr: false, lifted: Date.now() - 25 * 3600_000 }));
    const late = startNode({ url: redis.url, ...CFG });
    nodes.push(late);
    await late.ready;
    let s = 0;
    for (let i = 0; i < 100 && s !== 403; i++) {
      s = await late.call('status', { ip: '203.0.113.9', tier: 'paid' });
      if (s !== 403) await sleep(20);
    }
    assert.equal(s, 403, 'the CIDR ban is in force in the late process');
    assert.equal(await late.call('status', { ip: '192.0.2.99', tier: 'paid' }), 403, 'and the deny list');
    assert.equal((await late.call('defense', { op: 'get', target: '203.0.113.0/24' })).cidr, true);
    // The prune follows the load's apply: give it up to 2 s.
    const held = (f) => cli('HEXISTS', HASH, f).stdout.trim() === '1';
    for (let i = 0; i < 100 && (held('b:k:192.0.2.200') || held('b:k:192.0.2.201')); i++) await sleep(20);
    assert.equal(held('b:k:192.0.2.200'), false, 'the expired ban is pruned');
    assert.equal(held('b:k:192.0.2.201'), false, 'the old tombstone is pruned');
    assert.equal(held('b:c:203.0.113.0/24'), true, 'a live ban stays');
  });
});

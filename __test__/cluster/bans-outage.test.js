'use strict';
// Bans made while Redis is away (lib/cluster/ban-outbox.js), on a real redis-server that the test kills
// or pauses (paused: PostgreSQL too): the change holds at once in the process that made it, ban() settles within SETTLE_MS as
// 'queued', and when Redis is back the change reaches the shared hash, the other processes and a
// process started afterwards. Past MAX_QUEUED waiting changes, a change is refused with a code.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { needRedis, redisServer } = require('../helpers/redis');
const { startNode, startNodesOnRedis, startNodesOnStore } = require('../helpers/cluster-nodes');
const { STORES } = require('../helpers/cluster-stores');
const { cluster } = require('../..');
const { SETTLE_MS } = require('../../lib/cluster/bans');
const { MAX_QUEUED } = require('../../lib/cluster/ban-outbox');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CFG = { cluster: { storeTimeoutMs: 200, limits: [{ name: 'unused', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] } };
const HASH = 'tiergate:{bans}';

/** The hash's entries naming `target` (redis-cli, outside the library). */
function stored(port, target) {
  const out = spawnSync('redis-cli', ['-p', String(port), '--no-raw', 'HGETALL', HASH], { encoding: 'utf8' }).stdout;
  return out.split('\n').filter((line) => line.includes(`\\"target\\":\\"${target}\\"`) || line.includes(`"target":"${target}"`));
}

/** Polls until `target` is in the hash (up to `ms`). */
async function untilStored(port, target, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (stored(port, target).length > 0) return true;
    await sleep(50);
  }
  return false;
}

test('bans made while Redis is away are shared when it is back', { timeout: 120_000 }, async (t) => {
  if (!needRedis(t)) return;
  const { redis, nodes, cfg } = await startNodesOnRedis(t, 2, CFG);

  await t.test('Redis killed: the ban is queued, enforced here at once; after a restart on the same port the other process, a new one and the hash have it', async () => {
    await redis.kill('SIGKILL');
    const r = await nodes[0].call('bans', { op: 'ban', target: 'outage-kill', durationMs: 600_000 });
    assert.equal(r.value, 'queued', JSON.stringify(r));
    assert.ok((await nodes[0].call('until403', { key: 'outage-kill', tier: 'paid', timeoutMs: 2000 })) !== null, 'enforced where it was made');
    assert.ok((await nodes[0].call('stats')).bans.queued >= 1);
    await redis.start();
    assert.ok(await untilStored(redis.port, 'outage-kill'), 'the ban reached the hash');
    assert.ok((await nodes[1].call('until403', { key: 'outage-kill', tier: 'paid', timeoutMs: 10_000 })) !== null, 'the other process enforces it');
    const late = startNode(cfg);
    nodes.push(late);
    await late.ready;
    assert.ok((await late.call('until403', { key: 'outage-kill', tier: 'paid', timeoutMs: 5000 })) !== null, 'a process started afterwards enforces it');
    const s = (await nodes[0].call('stats')).bans;
    assert.equal(s.queued, 0, 'nothing left waiting');
    assert.ok(s.publishErrors >= 1, 'the sends Redis refused were counted');
  });

  await t.test('a lift and new lists made while Redis is down are shared too, in order', async () => {
    await redis.kill('SIGKILL');
    const lifted = await nodes[0].call('bans', { op: 'lift', target: 'outage-kill' });
    const listed = await nodes[0].call('bans', { op: 'setLists', lists: { allow: [], deny: ['x'] } });
    assert.deepEqual([lifted.value, listed.value], ['queued', 'queued']);
    await redis.start();
    for (const n of nodes.slice(1)) assert.ok((await n.call('until403', { key: 'outage-kill', tier: 'paid', timeoutMs: 10_000, status: 200 })) !== null, 'the lift reached the others');
    const out = spawnSync('redis-cli', ['-p', String(redis.port), 'HGET', HASH, 'lists'], { encoding: 'utf8' }).stdout;
    assert.match(out, /"deny":\["x"\]/);
  });
});

for (const kind of STORES) test(`${kind.name} paused (SIGSTOP): ban() settles as queued within ${SETTLE_MS} ms; on SIGCONT the ban reaches the others and the store`, { timeout: 120_000 }, async (t) => {
  if (!kind.need(t)) return;
  const { server, nodes } = await startNodesOnStore(t, 2, CFG, kind);
  server.freeze();
  let r;
  try {
    r = await Promise.race([nodes[0].call('bans', { op: 'ban', target: 'outage-pause', durationMs: 600_000 }), sleep(10_000).then(() => ({ value: 'did not settle in 10 s' }))]);
  } finally {
    server.thaw();
  }
  assert.equal(r.value, 'queued', JSON.stringify(r));
  // The bound is SETTLE_MS by the process's timer: a loaded machine runs timers late, hence the margin.
  assert.ok(r.ms < SETTLE_MS + 1500, `settled after ${r.ms} ms`);
  for (const n of nodes.slice(1)) assert.ok((await n.call('until403', { key: 'outage-pause', tier: 'paid', timeoutMs: 10_000 })) !== null, 'enforced elsewhere once the store runs again');
  let kept = false;
  for (let i = 0; i < 200 && !kept; i++) {
    kept = (await server.banEntries()).some((e) => e.includes('"target":"outage-pause"'));
    if (!kept) await sleep(50);
  }
  assert.ok(kept, 'and in the store');
});

test(`past ${MAX_QUEUED} changes waiting for Redis, ban() rejects with ERR_TIERGATE_BAN_NOT_SHARED; the queued ones all arrive`, { timeout: 120_000 }, async (t) => {
  if (!needRedis(t)) return;
  const redis = await redisServer();
  const c = cluster({ redis: redis.url, limits: [{ name: 'unused', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] });
  t.after(async () => {
    await c.close();
    await redis.stop();
  });
  await c.ready;
  await redis.kill('SIGKILL');
  const queued = [];
  for (let i = 0; i < MAX_QUEUED; i++) queued.push(c.bans.ban(`q-${i}`, { durationMs: 600_000 }));
  await assert.rejects(c.bans.ban('one-too-many', { durationMs: 600_000 }), { code: 'ERR_TIERGATE_BAN_NOT_SHARED' });
  assert.notEqual(c.bans.table.get('one-too-many'), null, 'it holds in this process');
  assert.deepEqual(new Set(await Promise.all(queued)), new Set(['queued']));
  assert.deepEqual([c.stats().bans.queued, c.stats().bans.dropped], [MAX_QUEUED, 1]);
  await redis.start();
  let held = 0;
  for (let i = 0; i < 300 && held < MAX_QUEUED; i++) {
    await sleep(100);
    held = Number(spawnSync('redis-cli', ['-p', String(redis.port), 'HLEN', HASH], { encoding: 'utf8' }).stdout.trim());
  }
  assert.equal(held, MAX_QUEUED, 'every queued ban is in the hash');
  // Redis has the last writes before this process has read their replies: wait for those too.
  for (let i = 0; i < 100 && c.stats().bans.queued > 0; i++) await sleep(50);
  assert.equal(c.stats().bans.queued, 0);
});

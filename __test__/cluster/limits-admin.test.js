'use strict';
// gate.limits on cluster-funded limits, on a real redis-server and on a real PostgreSQL, across 3
// processes: inspect, reset and refund one key as the store counts it, and overrides kept in the store
// that every process enforces (N processes x M requests on the key admit exactly the overridden limit),
// listed, visible in stats(), capped and cleared; bad input refused with codes.
const test = require('node:test');
const assert = require('node:assert/strict');
const { STORES } = require('../helpers/cluster-stores');
const { startNodesOnStore } = require('../helpers/cluster-nodes');
const { cluster } = require('../..');

const sum = (rs, status) => rs.reduce((a, r) => a + (r.statuses[status] || 0), 0);
const late = async (nodes) => (await Promise.all(nodes.map((n) => n.call('stats')))).reduce((a, s) => a + s.timeouts + s.waitTimeouts, 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const LIMIT = 20;
const RENEWAL_MS = 300;
const WINDOW = { name: 'search', algorithm: 'sliding-window', limit: LIMIT, windowMs: 600_000, fallback: 'closed', retryMs: 100, renewalPeriodMs: RENEWAL_MS };
const BUCKET = { name: 'export', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: LIMIT, fallback: 'closed', retryMs: 100, renewalPeriodMs: RENEWAL_MS };
const CFG = {
  cluster: { storeTimeoutMs: 300, minHolders: 3, limits: [WINDOW, BUCKET] },
  defense: {
    limits: [
      { name: 'search', by: { header: 'x-key' }, tiers: 'paid', cluster: true },
      { name: 'export', by: { header: 'x-key' }, tiers: 'free', cluster: true },
    ],
    bans: { rules: false },
  },
};

async function call(node, method, ...args) {
  const r = await node.call('limits', { method, args });
  if (r.error !== undefined) throw Object.assign(new Error(r.message), { code: r.error });
  return r.value;
}

/** Tokens the processes hold in leases of (limit, key), once no request for it is in flight. */
async function held(nodes, limit, key) {
  for (let i = 0; i < 100; i++) {
    const states = await Promise.all(nodes.map((n) => n.call('keyState', { limit, key })));
    if (!states.some((s) => s.pending)) return states.reduce((a, s) => a + s.held, 0);
    await sleep(20);
  }
  throw new Error('a lease request stayed in flight');
}

/**
 * `n` simultaneous requests for `key` on each node: the admitted count, checked against `expected`
 * (exact when every store answer came in time; never above it otherwise).
 */
async function burst(t, nodes, key, tier, n, expected) {
  const before = await late(nodes);
  const rs = await Promise.all(nodes.map((x) => x.call('burst', { n, key, tier })));
  const admitted = sum(rs, 200);
  assert.equal(admitted + sum(rs, 429), n * nodes.length, `every refusal is the limit's 429: ${JSON.stringify(rs)}`);
  assert.ok(admitted <= expected, `never above ${expected}: ${admitted}`);
  if ((await late(nodes)) === before) assert.equal(admitted, expected, JSON.stringify(rs));
  else t.diagnostic(`store answers came after storeTimeoutMs (a loaded machine): ${admitted} of ${expected} admitted`);
  return admitted;
}

for (const kind of STORES) test(`${kind.name}: gate.limits on cluster limits across 3 processes`, { timeout: 180_000 }, async (t) => {
  if (!kind.need(t)) return;
  const { server, nodes } = await startNodesOnStore(t, 3, CFG, kind);

  for (const [limit, tier] of [['search', 'paid'], ['export', 'free']]) {
    await t.test(`${limit}: inspect, reset and refund one key`, async (t2) => {
      const key = `k-${limit}`;
      const fresh = await call(nodes[1], 'get', limit, key);
      assert.deepEqual(fresh, { name: limit, key, limit: LIMIT, remaining: LIMIT, resetMs: 0, overridden: false });

      await burst(t2, nodes, key, tier, 100, LIMIT);
      const spent = await call(nodes[2], 'get', limit, key);
      assert.equal(spent.remaining, 0, 'what leases hold out counts as spent');
      if (limit === 'search') assert.ok(spent.resetMs > 0 && spent.resetMs <= WINDOW.windowMs + 20_000, JSON.stringify(spent));
      assert.equal(await call(nodes[2], 'get', limit, key).then((s) => s.remaining), 0, 'get counts nothing');

      // A refund on one process: the store's count, seen by all; never beyond the limit.
      assert.equal(await call(nodes[0], 'refund', limit, key, 5), 5);
      assert.equal((await call(nodes[1], 'get', limit, key)).remaining, 5);
      let h = await held(nodes, limit, key);
      await sleep(RENEWAL_MS + 200); // a process that found the key empty asks again within renewalPeriodMs
      await burst(t2, nodes, key, tier, 100, 5 + h);

      // A reset on one process: the key's count cleared in the store; leases granted before it are spent as granted.
      assert.equal(await call(nodes[1], 'reset', limit, key), true);
      assert.equal((await call(nodes[2], 'get', limit, key)).remaining, LIMIT);
      h = await held(nodes, limit, key);
      await sleep(RENEWAL_MS + 200);
      await burst(t2, nodes, key, tier, 100, LIMIT + h);
      assert.equal(await call(nodes[0], 'refund', limit, key, 1000), LIMIT, 'a refund gives back what was counted, no more');
      assert.equal((await call(nodes[0], 'get', limit, key)).remaining, LIMIT, 'never beyond the limit');
    });

    await t.test(`${limit}: an override set on one process is enforced by all`, async (t2) => {
      for (const [key, to] of [[`low-${limit}`, 7], [`high-${limit}`, 33]]) {
        await call(nodes[0], 'override', limit, key, { limit: to });
        assert.deepEqual(await call(nodes[2], 'get', limit, key), { name: limit, key, limit: to, remaining: to, resetMs: 0, overridden: true });
        await burst(t2, nodes, key, tier, 100, to);
        assert.equal((await call(nodes[1], 'get', limit, key)).remaining, 0);
      }
    });
  }

  await t.test('overrides: listed on every process, in stats(), cleared on another', async () => {
    const want = [{ name: 'export', key: 'high-export', limit: 33 }, { name: 'export', key: 'low-export', limit: 7 }, { name: 'search', key: 'high-search', limit: 33 }, { name: 'search', key: 'low-search', limit: 7 }];
    const byKey = (a, b) => `${a.name} ${a.key}`.localeCompare(`${b.name} ${b.key}`);
    for (const n of nodes) assert.deepEqual((await call(n, 'overrides')).sort(byKey), want);
    const s0 = await nodes[0].call('defense', { op: 'stats' });
    assert.deepEqual(s0.overrides.cluster, { count: 4, max: 10_000 });
    assert.deepEqual(s0.clusterLimits.map((l) => [l.name, l.overrides]), [['search', 2], ['export', 2]]);
    assert.equal(await call(nodes[1], 'clearOverride', 'search', 'low-search'), true);
    assert.equal(await call(nodes[2], 'clearOverride', 'search', 'low-search'), false);
    assert.equal((await call(nodes[0], 'get', 'search', 'low-search')).overridden, false);
    assert.equal((await call(nodes[0], 'get', 'search', 'low-search')).limit, LIMIT);
    // Another process's stats() shows the change within a second of asking (read in the background).
    let count;
    for (let i = 0; i < 40 && count !== 3; i++) {
      count = (await nodes[2].call('defense', { op: 'stats' })).overrides.cluster.count;
      if (count !== 3) await sleep(100);
    }
    assert.equal(count, 3);
  });

  await t.test('bad input: clear errors with codes', async () => {
    const bad = [
      ['get', 'nope', 'k'],
      ['get', 'search', ''],
      ['get', 'search', 42],
      ['reset', 'search', null],
      ['refund', 'search', 'k', -1],
      ['refund', 'search', 'k', 1.5],
      ['refund', 'search', 'k', '3'],
      ['override', 'search', 'k', { limit: 0 }],
      ['override', 'search', 'k', { limit: 2.5 }],
      ['override', 'search', 'k', 10],
      ['clearOverride', 'search', ''],
      ['charge', { headers: {} }, 'search', 1],
    ];
    for (const [method, ...args] of bad) {
      const r = await nodes[0].call('limits', { method, args });
      assert.equal(r.error, 'ERR_TIERGATE_INVALID_ARGUMENT', `${method}(${JSON.stringify(args)}): ${JSON.stringify(r)}`);
    }
    const unknown = await nodes[0].call('limits', { method: 'override', args: ['search', 'k', { limit: 10, burst: 3 }] });
    assert.equal(unknown.error, 'ERR_TIERGATE_UNKNOWN_OPTION', 'as the local limits answer it');
    // Numbers IPC cannot carry, on a cluster of this process.
    const c = cluster({ ...server.option, limits: [WINDOW], bans: false });
    t.after(() => c.close());
    await c.ready;
    for (const v of [NaN, Infinity, -Infinity, -1]) {
      await assert.rejects(c.limits.refund('search', 'k', v), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
      await assert.rejects(c.limits.override('search', 'k', { limit: v }), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
    }
    await assert.rejects(c.limits.get('search', 'x'.repeat(5000)), { code: 'ERR_TIERGATE_INVALID_ARGUMENT' });
  });

  await t.test('a lease from before a reset: its return credits nothing (the reset gave its tokens back)', async () => {
    const FIXED = { name: 'fixed', algorithm: 'fixed-window', limit: LIMIT, windowMs: 3_600_000 };
    const c = cluster({ ...server.option, limits: [BUCKET, FIXED], bans: false });
    t.after(() => c.close());
    await c.ready;
    for (const name of ['export', 'fixed']) {
      const spec = c.quota.limits[c.limitId(name)];
      const key = `floor-${name}`;
      const lease = async (holder, size) => (await c.store.lease([{ limit: spec, key, size, ttlMs: 60_000, holder }]))[0];
      const old = await lease('h1', 5);
      assert.equal(old.granted, 5);
      assert.equal(await c.limits.reset(name, key), true);
      assert.equal((await lease('h2', 100)).granted, LIMIT, 'a fresh count after the reset');
      await c.store.release([{ limit: spec, key, lease: old.lease, tokens: 5, reason: 'expired', holder: 'h1' }]);
      assert.equal((await c.limits.get(name, key)).remaining, 0, `${name}: the old lease's return is not credited`);
    }
  });

  await t.test('overrides are capped in the cluster', async () => {
    const c = cluster({ ...server.option, limits: [WINDOW], bans: false });
    t.after(() => c.close());
    await c.ready;
    const have = (await c.limits.overrides()).length;
    // Fill up to the cap outside the library (one statement), then the next one is refused.
    await fillOverrides(kind, server, 10_000 - have);
    await assert.rejects(c.limits.override('search', 'one-more', { limit: 3 }), { code: 'ERR_TIERGATE_OVERRIDES_FULL' });
    // One in force may still change.
    await c.limits.override('search', 'high-search', { limit: 34 });
    assert.equal((await c.limits.get('search', 'high-search')).limit, 34);
    assert.equal(c.stats().limitOverrides.overrides, 10_000);
  });

  await t.test('a store that does not answer: a call rejects within storeDownMs', async () => {
    const c = cluster({ ...server.option, limits: [WINDOW], bans: false, storeTimeoutMs: 100, storeDownMs: 500 });
    t.after(() => c.close());
    await c.ready;
    await c.limits.get('search', 'k');
    server.freeze();
    try {
      const t0 = Date.now();
      await assert.rejects(c.limits.get('search', 'k'));
      await assert.rejects(c.limits.override('search', 'k', { limit: 3 }));
      assert.ok(Date.now() - t0 < 10_000, 'bounded, not hung');
    } finally {
      server.thaw();
    }
  });
});

/** Adds `n` overrides of limit 'search' as the store keeps them, in one statement. */
async function fillOverrides(kind, server, n) {
  if (kind.name === 'Redis') {
    const Redis = require('ioredis');
    const r = new Redis(server.option.redis);
    try {
      const args = [];
      for (let i = 0; i < n; i++) args.push(JSON.stringify(['search', `fill-${i}`]), 3);
      await r.hset('tiergate:{ov}', ...args);
    } finally {
      r.disconnect();
    }
    return;
  }
  const { Client } = require('pg');
  const c = new Client({ connectionString: server.option.postgres });
  await c.connect();
  try {
    await c.query(`INSERT INTO tiergate_lease_keys (limit_name, key, ov_a, ov_b, ov_limit, forget_at)
      SELECT 'search', 'fill-' || i, 3, 600000, 3, 'Infinity' FROM generate_series(1, $1) i`, [n]);
  } finally {
    await c.end();
  }
}

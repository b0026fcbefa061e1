'use strict';
// The shared algorithm vectors' leases (__test__/fixtures/algorithm-vectors.json, "leases": the
// store side of cluster leases) against every lease store: lib/quota/store-rules.js in the memory
// store and in the SQLite and PostgreSQL lease stores (a real database each), and the Lua script of
// lib/cluster/script.js on a real Redis. The Rust reference store answers the same vectors
// (src/core/quota/tests/vectors.rs).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Redis = require('ioredis');
const { MemoryStore } = require('../../lib/quota/memory-store');
const { SqliteLeaseStore } = require('../../lib/service/stores/lease-sqlite');
const { PostgresLeaseStore } = require('../../lib/service/stores/lease-postgres');
const { LUA, limitArgs } = require('../../lib/cluster/script');
const { needRedis, redisServer } = require('../helpers/redis');
const { tmpdir, pgMissing } = require('../service/helpers');
const { VECTORS, BASE, pgWithClock } = require('../helpers/vectors');

/** A vector's config as the stores' limit spec (the fields store-rules.js and limitArgs read). */
function specOf(alg, c, name) {
  return { name, algorithm: alg, limit: c.limit, windowMs: c.windowMs, ...(alg === 'token-bucket' ? { burst: c.burst } : {}) };
}

const CASES = Object.entries(VECTORS.leases).flatMap(([alg, cases]) => cases.map((c, i) => [alg, c, `vec-${alg}-${i}`]));

/**
 * Runs every case on a store `{ setTime(ms), lease(batch), release(batch) }`. `release` answers the
 * tokens credited where the store says (the Lua script), else undefined: the lease stores' contract
 * (lib/quota/store.js) answers nothing to a return, and what they credited shows in the next
 * lease's `remaining`, which the vectors check.
 */
async function runAll(store) {
  for (const [alg, c, name] of CASES) {
    const spec = specOf(alg, c, name);
    const leases = new Map();
    for (const [i, step] of c.steps.entries()) {
      const at = `${alg}: ${c.name}, step ${i} (t ${step.t} ms)`;
      await store.setTime(BASE + step.t);
      if (step.op === 'lease') {
        const [g] = await store.lease([{ limit: spec, key: 'k', size: step.size, ttlMs: step.ttlMs, holder: step.holder }]);
        if (g instanceof Error) throw g;
        assert.deepEqual(
          { granted: g.granted, ttlMs: g.ttlMs, remaining: g.remaining, holders: g.holders, retryAfterMs: g.retryAfterMs },
          { granted: step.granted, ttlMs: step.grantedTtlMs, remaining: step.remaining, holders: step.holders, retryAfterMs: step.retryAfterMs },
          at,
        );
        // A fixed window's leases are named by their window (counted from the vectors' t = 0).
        if (step.window !== undefined) assert.equal(g.lease - BASE / c.windowMs, step.window, `${at}: lease`);
        if (step.as !== undefined) leases.set(step.as, g.lease);
      } else {
        const credited = await store.release([{ limit: spec, key: 'k', lease: leases.get(step.lease), tokens: step.tokens, reason: step.reason, idleMs: step.idleMs, holder: step.holder }]);
        if (credited !== undefined) assert.equal(credited, step.credited, `${at}: credited`);
      }
    }
  }
}

/** A store of lib/quota/store.js whose clock is set by the test. */
function clocked(make) {
  let now = 0;
  const store = make(() => now);
  return {
    store,
    setTime: (ms) => { now = ms; },
    lease: (batch) => store.lease(batch),
    release: async (batch) => { await store.release(batch); },
  };
}

test('the memory lease store (lib/quota/store-rules.js) answers the vectors', async () => {
  await runAll(clocked((now) => new MemoryStore({ now })));
});

test('the SQLite lease store answers the vectors', async (t) => {
  const dir = tmpdir('tiergate-lease-vectors-');
  const s = clocked((now) => new SqliteLeaseStore({ file: path.join(dir, 'leases.sqlite'), now }));
  t.after(async () => {
    await s.store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await runAll(s);
});

test('the PostgreSQL lease store answers the vectors', { skip: pgMissing() }, async (t) => {
  const { clock, store } = await pgWithClock(t, (url) => new PostgresLeaseStore({ connectionString: url }));
  await runAll({ setTime: (ms) => clock.set(ms), lease: (b) => store.lease(b), release: async (b) => { await store.release(b); } });
});

test('the Redis Lua script answers the vectors', async (t) => {
  if (!needRedis(t)) return;
  const server = await redisServer();
  const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  t.after(async () => {
    client.disconnect();
    await server.stop();
  });
  await client.connect();
  // The script reads Redis's clock (TIME); here it reads the test's, passed after its arguments
  // (ARGV[#ARGV - 1], ARGV[#ARGV]: seconds and microseconds, as TIME answers). Nothing else changes.
  const TIME = "redis.call('TIME')";
  assert.equal(LUA.split(TIME).length, 2, 'the script reads the clock once');
  const script = LUA.replace(TIME, '{ ARGV[#ARGV - 1], ARGV[#ARGV] }');
  let now = 0;
  // The script also sets the key's expiry (PEXPIRE) in Redis's real time, which the test's clock
  // does not follow: each call is followed by PERSIST in the same transaction, so that a key is not
  // forgotten between two steps of the test's time (forgetting is the stores' prune, not in the vectors).
  const call = async (key, argv) => {
    const clockArgs = [Math.floor(now / 1000), (now % 1000) * 1000];
    const out = await client.multi().eval(script, 1, key, ...argv, ...clockArgs).persist(key).exec();
    if (out[0][0]) throw out[0][0];
    return out[0][1];
  };
  const keyOf = (spec) => `vectors:${spec.name}`;
  await runAll({
    setTime: (ms) => { now = ms; },
    // The arguments as RedisStore sends them (lib/cluster/redis-store.js).
    lease: (batch) => Promise.all(batch.map(async (r) => {
      const [granted, ttlMs, remaining, holders, lease, retryAfterMs] = (await call(keyOf(r.limit), ['lease', ...limitArgs(r.limit), r.size, r.ttlMs, r.holder])).map(Number);
      return { granted, ttlMs, remaining, holders, lease, retryAfterMs };
    })),
    release: async ([r]) => Number(await call(keyOf(r.limit), ['release', ...limitArgs(r.limit), r.lease, r.tokens, r.reason, r.holder, r.idleMs === undefined ? '' : r.idleMs])),
  });
});

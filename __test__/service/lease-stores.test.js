'use strict';
// The SQL lease stores (SQLite, PostgreSQL) against lib/quota's store contract: the same scripted
// requests answered as the in-memory reference store answers them, and the lease driver over each
// with three holders sharing one store (500 simultaneous spends on a limit of 100 → exactly 100).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Quota, LeaseDriver, MemoryStore } = require('tiergate/quota');
const { SqliteLeaseStore, PostgresLeaseStore } = require('tiergate/service');
const { PostgresStore } = require('tiergate/cluster');
const { tmpdir, startPostgres, pgMissing } = require('./helpers');

const dir = tmpdir('tiergate-lease-');
const pgSkip = pgMissing();
let pg;
test.before(async () => { if (!pgSkip) pg = await startPostgres(); });
test.after(async () => {
  if (pg) await pg.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const HOUR = 3_600_000;
const spec = (q, i) => q.limits[i];
const limitsOf = () => new Quota({ limits: [
  { name: 'bucket', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 5 },
  { name: 'fixed', algorithm: 'fixed-window', limit: 10, windowMs: HOUR },
  { name: 'sliding', algorithm: 'sliding-window', limit: 10, windowMs: HOUR },
] });

/** A script of requests and returns; the answers without the lease ids (stores name leases their own way). */
async function script(store) {
  const q = limitsOf();
  const [b, f, s] = [0, 1, 2].map((i) => spec(q, i));
  const req = (limit, key, size, holder = 'h1') => ({ limit, key, size, ttlMs: 10_000, holder });
  const out = [];
  const shape = (g) => ({ granted: g.granted, remaining: g.remaining, holders: g.holders, retry: g.retryAfterMs > 0 });
  let [g1, g2] = await store.lease([req(b, 'k', 8), req(b, 'k', 1, 'h2')]);
  out.push(shape(g1), shape(g2));
  await store.release([{ limit: b, key: 'k', lease: g1.lease, tokens: 2, reason: 'expired', holder: 'h1' }]);
  [g1] = await store.lease([req(b, 'k', 8, 'h2')]);
  out.push(shape(g1));
  [g1, g2] = await store.lease([req(f, 'k', 6), req(f, 'k', 6, 'h2')]);
  out.push(shape(g1), shape(g2), g1.lease === g2.lease, g1.ttlMs <= 10_000);
  await store.release([{ limit: f, key: 'k', lease: g1.lease, tokens: 3, reason: 'released', holder: 'h1' }]);
  [g1] = await store.lease([req(f, 'k', 5, 'h3')]);
  out.push(shape(g1));
  [g1] = await store.lease([req(s, 'k', 10)]);
  [g2] = await store.lease([req(s, 'k', 1)]);
  out.push(shape(g1), shape(g2));
  await store.release([{ limit: s, key: 'k', lease: g1.lease, tokens: 4, reason: 'evicted', holder: 'h1' }]);
  [g1] = await store.lease([req(s, 'k', 9)]);
  out.push(shape(g1));
  [g1] = await store.lease([req(s, 'other', 3)]);
  out.push(shape(g1));
  // A lease spent dry: its record ends one window after the last spend (an hour and a second ago
  // here, so at once), not one window after its TTL; one spent from a moment ago still counts.
  [g1] = await store.lease([req(s, 'spent', 10)]);
  await store.release([{ limit: s, key: 'spent', lease: g1.lease, tokens: 0, reason: 'spent', idleMs: HOUR + 1000, holder: 'h1' }]);
  [g2] = await store.lease([req(s, 'spent', 10)]);
  out.push(shape(g1), shape(g2));
  await store.release([{ limit: s, key: 'spent', lease: g2.lease, tokens: 3, reason: 'expired', idleMs: 5, holder: 'h1' }]);
  [g1] = await store.lease([req(s, 'spent', 10)]);
  out.push(shape(g1));
  return out;
}

const stores = [
  ['SQLite', () => new SqliteLeaseStore({ file: path.join(dir, `script-${Math.random()}.sqlite`) }), false],
  ['PostgreSQL', () => new PostgresLeaseStore({ connectionString: pg.url }), pgSkip],
  // Cluster mode's: one function call per batch, a table of its own per prefix.
  ['PostgreSQL (cluster mode)', () => new PostgresStore({ postgres: pg.url, prefix: `t${Math.random().toString(36).slice(2)}` }), pgSkip],
];

for (const [name, make, skip] of stores) {
  test(`${name}: answers the contract's script as the reference store does`, { skip }, async () => {
    const expected = await script(new MemoryStore());
    assert.deepEqual(expected.slice(0, 3), [
      { granted: 5, remaining: 0, holders: 1, retry: true },
      { granted: 0, remaining: 0, holders: 2, retry: true },
      { granted: 2, remaining: 0, holders: 2, retry: true },
    ], 'the reference itself');
    assert.deepEqual(expected.slice(-3).map((g) => g.granted), [10, 10, 3], 'the reference: a dry lease leaves the window one window after its last spend');
    const store = make();
    try {
      assert.deepEqual(await script(store), expected);
    } finally {
      await store.close();
    }
  });

  test(`${name}: three lease drivers on one store, 500 simultaneous spends on a limit of 100 → exactly 100`, { skip }, async () => {
    const limits = [
      { name: 'bucket', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 100, fallback: 'closed' },
      { name: 'window', algorithm: 'sliding-window', limit: 100, windowMs: HOUR, fallback: 'closed' },
    ];
    const store = make();
    // A generous timeout: a loaded machine must not turn a slow grant into a refusal here.
    const drivers = ['a', 'b', 'c'].map((holder) => new LeaseDriver(new Quota({ limits }), store, { holder, storeTimeoutMs: 5000 }));
    try {
      for (const limit of [0, 1]) {
        const rs = await Promise.all(Array.from({ length: 500 }, (_, i) => drivers[i % 3].check(limit, 'hot')));
        assert.equal(rs.filter((r) => r.allowed).length, 100, limits[limit].name);
        assert.ok(rs.every((r) => r.allowed || r.reason === 'EXHAUSTED'), rs.map((r) => r.reason).join());
      }
    } finally {
      await Promise.all(drivers.map((d) => d.close()));
      await store.close();
    }
  });
}

test('SQLite: prune forgets keys whose state a fresh one equals', async () => {
  let now = 1_000_000;
  const store = new SqliteLeaseStore({ file: path.join(dir, 'prune.sqlite'), now: () => now });
  const q = limitsOf();
  await store.lease([{ limit: spec(q, 2), key: 'gone', size: 3, ttlMs: 1000, holder: 'h' }]);
  assert.equal(await store.prune(), 0);
  now += 1000 + HOUR;
  assert.equal(await store.prune(), 1);
  const [g] = await store.lease([{ limit: spec(q, 2), key: 'gone', size: 10, ttlMs: 1000, holder: 'h' }]);
  assert.equal(g.granted, 10);
  await store.close();
});

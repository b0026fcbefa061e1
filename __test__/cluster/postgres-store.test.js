'use strict';
// Cluster mode's PostgreSQL store (lib/cluster/postgres-store.js) on a real PostgreSQL: one
// statement per batch, its objects in the schema and prefix given, batches in any order never
// deadlock, a row held locked elsewhere fails a batch within the timeout, pruning, and its options.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Pool } = require('pg');
const { cluster, PostgresStore } = require('tiergate/cluster');
const { startPostgres, pgMissing } = require('../service/helpers');

const pgSkip = pgMissing();
const HOUR = 3_600_000;
const fixed = (name, limit = 1000, windowMs = HOUR) => ({ name, algorithm: 'fixed-window', limit, windowMs });
const req = (limit, key, size = 1, holder = 'h') => ({ limit, key, size, ttlMs: 10_000, holder });

test('the PostgreSQL store', { skip: pgSkip, timeout: 60_000 }, async (t) => {
  const pg = await startPostgres();
  const admin = new Pool({ connectionString: pg.url, max: 2 });
  t.after(async () => {
    await admin.end();
    await pg.stop();
  });

  await t.test('one statement per batch, in the schema and with the prefix given; your pool stays yours', async () => {
    const pool = new Pool({ connectionString: pg.url, max: 2 });
    const store = new PostgresStore({ postgres: { pool, schema: 'limits' }, prefix: 'app' });
    await store.open();
    // Every statement the store sends, on connections of this real pool.
    const sent = [];
    pool.on('acquire', (c) => {
      if (c.counted) return;
      c.counted = true;
      const query = c.query.bind(c);
      c.query = (...args) => {
        sent.push(String(args[0].text || args[0]));
        return query(...args);
      };
    });
    const batch = Array.from({ length: 50 }, (_, i) => req(fixed('api'), `k${i}`, 3));
    const grants = await store.lease(batch);
    assert.deepEqual(grants.map((g) => g.granted), batch.map(() => 3));
    await store.release(grants.map((g, i) => ({ limit: batch[i].limit, key: batch[i].key, lease: g.lease, tokens: 1, reason: 'released', holder: 'h' })));
    assert.equal(sent.length, 2, `one statement per batch: ${sent.join(' | ')}`);
    const { rows } = await admin.query("SELECT count(*)::int AS n, sum(used)::int AS used FROM limits.app_lease_keys WHERE limit_name = 'api'");
    assert.deepEqual(rows[0], { n: 50, used: 100 });
    await store.close();
    assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1, 'close() leaves your pool open');
    await pool.end();
  });

  await t.test('20 batches of the same 40 keys in shuffled orders at once: no deadlock, every grant debited once', async () => {
    const store = new PostgresStore({ postgres: { connectionString: pg.url, poolSize: 8 }, prefix: 'shuffle' });
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
    const shuffled = () => keys.map((k) => [Math.random(), k]).sort((a, b) => a[0] - b[0]).map(([, k]) => k);
    const out = await Promise.all(Array.from({ length: 20 }, (_, j) => store.lease(shuffled().map((k) => req(fixed('hot', 15), k, 1, `h${j}`)))));
    for (const grants of out) for (const g of grants) assert.ok(!(g instanceof Error), String(g));
    const granted = out.flat().reduce((a, g) => a + g.granted, 0);
    assert.equal(granted, 40 * 15, 'each key granted exactly its limit of 15, over 20 requests of 1');
    await store.close();
  });

  await t.test("a key's row held locked by another session: its batch fails within the timeout, and succeeds once it is let go", async () => {
    const store = new PostgresStore({ postgres: pg.url, prefix: 'locked', timeoutMs: 300 });
    const limit = fixed('api');
    await store.lease([req(limit, 'held')]);
    const holder = await admin.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM locked_lease_keys WHERE key = 'held' FOR UPDATE");
      const t0 = performance.now();
      await assert.rejects(store.lease([req(limit, 'held')]));
      const ms = performance.now() - t0;
      assert.ok(ms < 5000, `failed after ${ms} ms, not hung`);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    const [g] = await store.lease([req(limit, 'held')]);
    assert.equal(g.granted, 1);
    await store.close();
  });

  await t.test('a role that may not create anything uses the tables and functions an owner created', async () => {
    const owner = new PostgresStore({ postgres: pg.url, prefix: 'shared' });
    await owner.open();
    await owner.close();
    await admin.query('CREATE ROLE app LOGIN; GRANT SELECT, INSERT, UPDATE, DELETE ON shared_lease_keys, shared_bans TO app');
    const c = cluster({ postgres: pg.url.replace('tiergate@', 'app@'), prefix: 'shared', limits: [fixed('api', 2)] });
    try {
      await c.ready;
      assert.deepEqual((await Promise.all([1, 2, 3].map(() => c.check('api', 'k')))).map((d) => d.reason), ['LEASE', 'LEASE', 'EXHAUSTED']);
      assert.equal(await c.bans.ban('203.0.113.9', { durationMs: 60_000 }), 'published');
    } finally {
      await c.close();
    }
  });

  await t.test("bans: lists longer than a NOTIFY's 8000 bytes reach the others (by a reload); a LISTEN connection ended by the server is made again, and what it missed is loaded", async () => {
    const [a, b] = ['a', 'b'].map((holder) => cluster({ postgres: pg.url, prefix: 'bans', holder, limits: [fixed('api')] }));
    const until = async (fn, what) => {
      for (let i = 0; i < 200 && !fn(); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(fn(), what);
    };
    try {
      await Promise.all([a.ready, b.ready]);
      const deny = Array.from({ length: 1000 }, (_, i) => `198.51.${i >> 8}.${i & 255}`);
      assert.equal(await a.bans.setLists({ deny }), 'published');
      await until(() => b.bans.table.lists.deny.length === 1000, 'the long lists reached b');
      // The listening connections: their last statement was the LISTEN, or the ping before a reload.
      const { rowCount } = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query IN ('LISTEN bans_bans', 'SELECT 1')");
      assert.equal(rowCount, 2, "both processes' LISTEN connections ended");
      await a.bans.ban('missed', { durationMs: 60_000 });
      await until(() => b.bans.table.get('missed') !== null, 'b loaded the ban made while it was not listening');
      await a.bans.ban('live', { durationMs: 60_000 });
      await until(() => b.bans.table.get('live') !== null, 'b hears bans again');
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  await t.test('prune forgets the rows a fresh state equals, only those', async () => {
    const store = new PostgresStore({ postgres: pg.url, prefix: 'prune' });
    await store.lease([req(fixed('short', 10, 200), 'gone', 1), req(fixed('long'), 'kept', 1)]);
    await store.release([{ limit: fixed('short', 10, 200), key: 'gone', lease: 0, tokens: 0, reason: 'released', holder: 'h' }]);
    // The short window ends within 200 ms; its holder's lease (ttlMs 10 s, cut to the window) with it.
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(await store.prune(), 1);
    const { rows } = await admin.query('SELECT key FROM prune_lease_keys ORDER BY key');
    assert.deepEqual(rows.map((r) => r.key), ['kept']);
    await store.close();
  });
});

test('cluster({ postgres }) and PostgresStore check their options', () => {
  const limits = [fixed('x')];
  const bad = [
    [{ limits }, 'cluster: options needs exactly one of redis and postgres', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ redis: 'redis://127.0.0.1:1', postgres: 'postgres://127.0.0.1:1/x', limits }, 'cluster: options needs exactly one of redis and postgres', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: 42, limits }, 'PostgresStore options.postgres must be a postgres:// URL, a pg.Pool or an object { connectionString | pool, schema?, poolSize? }, got number', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: {}, limits }, 'PostgresStore options.postgres needs exactly one of connectionString and pool', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: { connectionString: 'postgres://h/x', user: 'me' }, limits }, /PostgresStore options.postgres has an unknown option "user"/, 'ERR_TIERGATE_UNKNOWN_OPTION'],
    [{ postgres: { connectionString: 'postgres://h/x', poolSize: 0 }, limits }, 'PostgresStore options.postgres.poolSize must be an integer >= 1 and <= 100, got 0', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: { connectionString: 'postgres://h/x', poolSize: NaN }, limits }, 'PostgresStore options.postgres.poolSize must be an integer >= 1 and <= 100, got NaN', 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: { connectionString: 'postgres://h/x', schema: 'Bad-Name' }, limits }, /PostgresStore options.postgres.schema must be 1-63 characters of a-z 0-9 _/, 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: 'postgres://h/x', prefix: 'app:limits', limits }, /PostgresStore options.prefix must be 1-40 characters of a-z 0-9 _/, 'ERR_TIERGATE_INVALID_OPTION'],
    [{ postgres: { pool: new Pool(), poolSize: 2 }, limits }, "PostgresStore options.postgres.poolSize sizes a pool of the store's own; your pool has its own size", 'ERR_TIERGATE_INVALID_OPTION'],
  ];
  for (const [options, message, code] of bad) {
    assert.throws(() => cluster(options), (err) => {
      assert.equal(err.code, code, err.message);
      if (typeof message === 'string') assert.equal(err.message, message);
      else assert.match(err.message, message);
      return true;
    });
  }
  assert.throws(() => new PostgresStore({ postgres: 'postgres://h/x', timeoutMs: -1 }), /PostgresStore options.timeoutMs must be a finite number >= 1/);
  assert.throws(() => new PostgresStore({ postgres: 'postgres://h/x', timeoutMs: Infinity }), RangeError);
  assert.throws(() => new PostgresStore({ postgres: 'postgres://h/x', ttl: 1 }), { code: 'ERR_TIERGATE_UNKNOWN_OPTION' });
});

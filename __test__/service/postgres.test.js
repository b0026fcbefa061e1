'use strict';
// Three `tiergate serve` instances on one PostgreSQL (a cluster of this test's own): migrations
// applied once though they start together, exact decisions across instances, shared bans, and state
// that outlives every instance.
const test = require('node:test');
const assert = require('node:assert/strict');
const { startService, startPostgres, pgMissing, admin, check } = require('./helpers');

const skip = pgMissing();
let pg;
let services = [];
const urls = () => services.map((s) => s.url);

async function startAll(n) {
  services = await Promise.all(Array.from({ length: n }, () => startService({ flags: { database: pg.url, 'pool-size': 8 } }).ready));
}

test.before(async () => {
  if (skip) return;
  pg = await startPostgres();
  await startAll(3);
});
test.after(async () => {
  await Promise.all(services.map((s) => s.stop()));
  if (pg) await pg.stop();
});

function tally(responses) {
  const out = { 200: 0, 429: 0, other: [] };
  for (const r of responses) {
    if (r.status === 200 || r.status === 429) out[r.status]++;
    else out.other.push(`${r.status} ${JSON.stringify(r.body)}`);
  }
  return out;
}

test('three instances started together applied the schema once', { skip }, async () => {
  const { Client } = require('pg');
  const c = new Client({ connectionString: pg.url });
  await c.connect();
  try {
    const { rows } = await c.query('SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version');
    assert.ok(rows.length >= 1);
    for (const r of rows) assert.equal(r.n, 1);
  } finally {
    await c.end();
  }
});

test('500 simultaneous checks over three instances on a sliding window of 100: exactly 100 allowed', { skip }, async () => {
  const u = urls();
  assert.equal((await admin(u[0], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-window', algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 600 })).status, 201);
  const t = tally(await Promise.all(Array.from({ length: 500 }, (_, i) => check(u[i % 3], 'pg-window'))));
  assert.deepEqual([t[200], t[429], t.other], [100, 400, []]);
});

test('50 simultaneous checks over three instances on a token bucket of burst 1: exactly 1 allowed', { skip }, async () => {
  const u = urls();
  assert.equal((await admin(u[1], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-bucket', algorithm: 'token_bucket', requestsPerSecond: 0.001, burstSize: 1 })).status, 201);
  const t = tally(await Promise.all(Array.from({ length: 50 }, (_, i) => check(u[i % 3], 'pg-bucket'))));
  assert.deepEqual([t[200], t[429], t.other], [1, 49, []]);
});

test('a client made on one instance and a ban placed on another hold on the third', { skip }, async () => {
  const u = urls();
  assert.equal((await admin(u[0], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-shared', algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 60 })).status, 201);
  assert.equal((await admin(u[1], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-shared', algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 60 })).status, 409);
  assert.equal((await check(u[2], 'pg-shared')).status, 200);
  assert.equal((await admin(u[1], 'POST', '/api/v1/admin/bans', { clientKey: 'pg-shared', durationSeconds: 60, reason: 'test' })).status, 201);
  const banned = await check(u[2], 'pg-shared');
  assert.equal(banned.status, 403);
  assert.equal(banned.body.error, 'BANNED');
  assert.equal((await admin(u[0], 'DELETE', '/api/v1/admin/bans/pg-shared')).status, 204);
  assert.equal((await check(u[1], 'pg-shared')).status, 200);
  // The totals commit with each decision (the banned check counts as denied), so any instance has
  // them as soon as the answers are back; the records themselves are written behind.
  const { summary } = (await admin(u[0], 'GET', '/api/v1/admin/clients/pg-shared/activity')).body;
  assert.deepEqual(summary, { totalRequests: 3, allowedRequests: 2, deniedRequests: 1 });
  const ready = await admin(u[2], 'GET', '/health/ready');
  assert.equal(ready.body.store.type, 'postgres');
});

test('over three instances, a busy client and quiet ones checked together: each exact', { skip }, async () => {
  const u = urls();
  assert.equal((await admin(u[2], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-busy', algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 600 })).status, 201);
  const quiet = Array.from({ length: 30 }, (_, i) => `pg-quiet-${i}`);
  for (const clientKey of quiet) assert.equal((await admin(u[0], 'POST', '/api/v1/admin/clients', { clientKey, algorithm: 'token_bucket', requestsPerSecond: 0.001, burstSize: 5 })).status, 201);
  // 300 checks of the busy client interleaved with 10 of each quiet one, spread over the instances.
  const keys = [];
  for (let i = 0; i < 300; i++) keys.push('pg-busy', quiet[i % quiet.length]);
  const answers = await Promise.all(keys.map((k, i) => check(u[i % 3], k).then((r) => [k, r])));
  const by = new Map();
  for (const [k, r] of answers) { if (!by.has(k)) by.set(k, []); by.get(k).push(r); }
  const busy = tally(by.get('pg-busy'));
  assert.deepEqual([busy[200], busy[429], busy.other], [100, 200, []]);
  for (const k of quiet) {
    const t = tally(by.get(k));
    assert.deepEqual([t[200], t[429], t.other], [5, 5, []], k);
  }
});

test('SIGKILL of one instance in the middle of a burst: never more than the policy across the instances', { skip }, async () => {
  const u = urls();
  assert.equal((await admin(u[0], 'POST', '/api/v1/admin/clients', { clientKey: 'pg-kill', algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 600 })).status, 201);
  const victim = services[2];
  const burst = Promise.all(Array.from({ length: 150 }, (_, i) => check(u[i % 3], 'pg-kill').catch(() => null)));
  setTimeout(() => victim.child.kill('SIGKILL'), 20);
  const seen = (await burst).filter((r) => r && r.status === 200).length;
  await victim.exited;
  let after = 0;
  while (after <= 100 && (await check(u[0], 'pg-kill')).status === 200) after++;
  // Every decision committed before its answer: what the survivors allow after the kill is exactly
  // what is left, so the answered and the later admissions never sum past the limit. What the kill can
  // cost is the decisions committed whose answers it cut off: at most the victim's share of the burst.
  assert.ok(seen + after <= 100, `${seen} + ${after}`);
  assert.ok(seen + after >= 50, `${seen} + ${after}`);
  services[2] = await startService({ flags: { database: pg.url, 'pool-size': 8 } }).ready;
});

test('every instance stopped and one started again: state and history are kept', { skip }, async () => {
  const before = await admin(urls()[0], 'GET', '/api/v1/admin/clients/pg-window/activity');
  await Promise.all(services.map((s) => s.stop()));
  for (const s of services) assert.equal((await s.exited).code, 0, s.output);
  await startAll(1);
  const u = urls()[0];
  assert.equal((await check(u, 'pg-window')).status, 429, 'the window is still full');
  assert.equal((await check(u, 'pg-bucket')).status, 429, 'the bucket is still empty');
  const after = await admin(u, 'GET', '/api/v1/admin/clients/pg-window/activity');
  assert.equal(after.body.summary.totalRequests, before.body.summary.totalRequests + 1);
});

test('a batch of the store inlines its keys and states as literals: quotes and backslashes in keys decide and save exactly', { skip }, async () => {
  const { PostgresStore } = require('../../lib/service/stores/postgres');
  const store = new PostgresStore({ connectionString: pg.url, poolSize: 2 });
  try {
    // The API's key pattern allows none of these; the store must still quote them (and not be
    // injected): a batch is simple-protocol SQL text.
    const keys = ["lit'quote", 'lit"dquote', 'lit\\back', "lit\\'); DROP TABLE clients; --"];
    for (const clientKey of keys) assert.ok(await store.createClient({ clientKey, algorithm: 'sliding_window', maxRequests: 3, windowSeconds: 600 }));
    const batch = () => new Map(keys.map((k) => [k, [1, 1]]));
    const first = await store.decideAll(batch());
    const second = await store.decideAll(batch());
    for (const k of keys) {
      assert.deepEqual(first.get(k).results.map((r) => r.allowed), [true, true], k);
      assert.deepEqual(second.get(k).results.map((r) => r.allowed), [true, false], k);
      const state = JSON.parse((await store.pool.query('SELECT state FROM clients WHERE client_key = $1', [k])).rows[0].state);
      assert.equal(state.entries.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0), 3, k);
    }
  } finally {
    await store.close();
  }
});

test('totals are counted by the decision itself, one by one as in a batch, and a store upgraded from the schema before keeps its own', { skip }, async () => {
  const { PostgresStore } = require('../../lib/service/stores/postgres');
  const { migrations } = require('../../lib/service/migrations');
  const { Client } = require('pg');
  const maintenance = new Client({ connectionString: pg.url });
  await maintenance.connect();
  await maintenance.query('CREATE DATABASE upgraded');
  await maintenance.end();
  const url = pg.url.replace(/\/postgres$/, '/upgraded');
  // The schema as the release before left it, with one client's totals in client_stats.
  const old = new Client({ connectionString: url });
  await old.connect();
  await old.query('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
  for (const m of migrations('postgres').filter((x) => x.version <= 2)) {
    await old.query(m.sql);
    await old.query('INSERT INTO schema_migrations VALUES ($1, $2, 0)', [m.version, m.name]);
  }
  await old.query(`INSERT INTO clients (client_key, algorithm, max_requests, window_seconds, state, created_at, updated_at) VALUES ('kept', 'sliding_window', 5, 60, '{"entries":[]}', 0, 0)`);
  await old.query(`INSERT INTO client_stats VALUES ('kept', 7, 4, 3, 1700000000000)`);
  await old.end();
  const store = new PostgresStore({ connectionString: url, poolSize: 2 });
  try {
    await store.open();
    const [kept] = await store.listClients();
    assert.deepEqual([kept.clientKey, kept.totalRequests, kept.lastActivityAt], ['kept', 7, new Date(1700000000000).toISOString()]);
    assert.deepEqual((await store.clientActivity('kept', 5)).summary, { totalRequests: 7, allowedRequests: 4, deniedRequests: 3 });
    // The fallback path (one transaction per client) and the batch count alike: 5 of 7 allowed.
    const one = await store.decideOne('kept', [1, 1, 1]);
    assert.deepEqual(one.results.map((r) => r.allowed), [true, true, true]);
    const batch = await store.decideAll(new Map([['kept', [1, 1, 1, 1]]]));
    assert.deepEqual(batch.get('kept').results.map((r) => r.allowed), [true, true, false, false]);
    assert.deepEqual((await store.clientActivity('kept', 5)).summary, { totalRequests: 14, allowedRequests: 9, deniedRequests: 5 });
    assert.deepEqual(await store.overview(5).then((o) => [o.totalClients, o.totalAllowed, o.totalDenied]), [1, 9, 5]);
    assert.equal((await store.pool.query("SELECT to_regclass('client_stats') AS t")).rows[0].t, null, 'the old table is gone');
  } finally {
    await store.close();
  }
});

test('retention deletes in steps of PRUNE_ROWS: a backlog ends at exactly the row cap, and rows past their age all go', { skip }, async () => {
  const { PostgresStore } = require('../../lib/service/stores/postgres');
  const { PRUNE_ROWS } = require('../../lib/service/stores/rows');
  const admin0 = new PostgresStore({ connectionString: pg.url, poolSize: 1 });
  await admin0.query('CREATE DATABASE retention');
  await admin0.close();
  const store = new PostgresStore({ connectionString: pg.url.replace(/\/postgres$/, '/retention'), poolSize: 2 });
  try {
    await store.open();
    const deleted = [];
    const connect = store.connect.bind(store);
    store.connect = async () => {
      const client = await connect();
      const query = client.query.bind(client);
      return Object.assign(Object.create(client), {
        query: async (sql, params) => {
          const r = await query(sql, params);
          if (sql.startsWith('DELETE FROM activity ')) deleted.push(r.rowCount);
          return r;
        },
      });
    };
    const now = Date.now();
    const rec = (i, at) => ({ clientKey: `k-${i % 7}`, at, allowed: i % 2 === 0, cost: 1, responseMs: 0.5 });
    const bucketAgeMs = { second: 3_600_000, minute: 3_600_000 };
    await store.writeActivity(Array.from({ length: 4 * PRUNE_ROWS + 101 }, (_, i) => rec(i, now)));
    await store.prune({ now, maxAgeMs: 3_600_000, maxRows: 100, bucketAgeMs });
    const { rows: [ids] } = await store.query('SELECT count(*)::int AS n, min(id) AS lo, max(id) AS hi FROM activity');
    assert.deepEqual([ids.n, Number(ids.hi) - Number(ids.lo)], [100, 99]);
    assert.ok(deleted.length >= 5 && deleted.every((n) => n <= PRUNE_ROWS), `steps ${deleted}`);
    assert.equal(deleted.reduce((a, b) => a + b, 0), 4 * PRUNE_ROWS + 1);

    await store.writeActivity(Array.from({ length: 2 * PRUNE_ROWS + 500 }, (_, i) => rec(i, now - 7_200_000)));
    await store.prune({ now, maxAgeMs: 3_600_000, maxRows: 1_000_000, bucketAgeMs });
    assert.equal(await store.activityCount(), 100);
  } finally {
    await store.close();
  }
});

test('instances sharing the database prune one at a time: while another holds the prune lock, a prune skips its round and deletes nothing', { skip }, async () => {
  const { PostgresStore, PRUNE_LOCK } = require('../../lib/service/stores/postgres');
  const admin0 = new PostgresStore({ connectionString: pg.url, poolSize: 1 });
  await admin0.query('CREATE DATABASE prune_lock');
  await admin0.close();
  const url = pg.url.replace(/\/postgres$/, '/prune_lock');
  const [a, b] = [new PostgresStore({ connectionString: url, poolSize: 2 }), new PostgresStore({ connectionString: url, poolSize: 2 })];
  try {
    await a.open();
    await b.open();
    const now = Date.now();
    const retention = { now, maxAgeMs: 3_600_000, maxRows: 100, bucketAgeMs: { second: 3_600_000, minute: 3_600_000 } };
    await a.writeActivity(Array.from({ length: 300 }, (_, i) => ({ clientKey: `k-${i % 3}`, at: now, allowed: true, cost: 1, responseMs: 0.5 })));
    // Instance a is pruning: its connection holds the lock while b's round comes.
    const holder = await a.connect();
    await holder.query('SELECT pg_advisory_lock($1)', [PRUNE_LOCK]);
    try {
      assert.equal(await b.prune(retention), false);
      assert.equal(await b.activityCount(), 300);
    } finally {
      await holder.query('SELECT pg_advisory_unlock($1)', [PRUNE_LOCK]);
      holder.release();
    }
    assert.equal(await b.prune(retention), true);
    assert.equal(await b.activityCount(), 100);
    // Both at once: a round is applied, and no lock is left held after it.
    const done = await Promise.all([a.prune(retention), b.prune(retention)]);
    assert.ok(done.includes(true), `rounds ${done}`);
    const { rows: held } = await a.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'");
    assert.equal(held[0].n, 0);
  } finally {
    await a.close();
    await b.close();
  }
});

test(`at most MAX_AT_STORE batches at the store: checks gather behind them, and one batch waiting on a lock stops no other client`, { skip }, async () => {
  const { MAX_AT_STORE } = require('../../lib/service/decisions');
  // An instance whose bounds outlast the locks this test holds across several steps (the bounds
  // themselves are tested in postgres-faults.test.js).
  const svc = await startService({ flags: { database: pg.url, 'store-timeout-ms': 20_000, 'pg-lock-timeout-ms': 5000 } }).ready;
  const u = svc.url;
  const keys = Array.from({ length: MAX_AT_STORE }, (_, i) => `cap-${i}`); // each its own batch
  const free = 'cap-free';
  for (const clientKey of [...keys, free]) assert.equal((await admin(u, 'POST', '/api/v1/admin/clients', { clientKey, algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 600 })).status, 201);
  const { Client } = require('pg');
  const holder = new Client({ connectionString: pg.url });
  await holder.connect();
  const { setTimeout: sleep } = require('node:timers/promises');
  const answered = (p) => Promise.race([p.then(() => true), sleep(300, false)]);
  try {
    // One client's row locked elsewhere: its batch waits, the next client's is decided meanwhile.
    await holder.query("BEGIN; SELECT 1 FROM clients WHERE client_key = 'cap-0' FOR UPDATE");
    const stuck = [check(u, 'cap-0')];
    await sleep(50);
    assert.equal((await check(u, free)).status, 200, 'a batch waiting on a lock stops another client');
    // MAX_AT_STORE batches waiting on locks (one client each, sent in turns of their own): the next
    // client's check waits for one of them to end, and is then decided.
    await holder.query(`SELECT 1 FROM clients WHERE client_key = ANY($1) FOR UPDATE`, [keys.slice(1)]);
    for (const k of keys.slice(1)) { stuck.push(check(u, k)); await sleep(50); }
    const gathered = check(u, free);
    assert.equal(await answered(gathered), false, `a check was decided while ${MAX_AT_STORE} batches were at the store`);
    await holder.query('ROLLBACK');
    assert.deepEqual((await Promise.all([...stuck, gathered])).map((r) => r.status), Array(MAX_AT_STORE + 1).fill(200));
  } finally {
    await holder.end();
    await svc.stop();
  }
});

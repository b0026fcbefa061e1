'use strict';
// Faults of a shared PostgreSQL, injected for real: a row lock held by a session that does not move
// (another instance SIGSTOPped mid-transaction), and the whole PostgreSQL server SIGSTOPped. Every
// check is answered within its bound — a 503 where the store cannot decide it, the others decided —
// readiness says when checks cannot be answered, and everything comes back after SIGCONT.
const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { startService, startPostgres, pgMissing, admin, check, request, rowIsLocked } = require('./helpers');

const skip = pgMissing();
let pg;
const started = [];

test.before(async () => {
  if (skip) return;
  pg = await startPostgres();
});
test.after(async () => {
  await Promise.all(started.map((s) => s.stop()));
  if (pg) await pg.stop();
});

async function serve(flags = {}, name = 'tiergate-test') {
  const svc = await startService({ flags: { database: `${pg.url}?application_name=${name}`, ...flags } }).ready;
  started.push(svc);
  return svc;
}

const UNANSWERED = Symbol('unanswered');
/** `promise`'s value, or UNANSWERED if it has none within `ms` (a hang, not a slow answer: the bounds
 * under test are below a second, `ms` is seconds). */
const within = (promise, ms) => Promise.race([promise, sleep(ms, UNANSWERED)]);

const newClient = (u, clientKey) => admin(u, 'POST', '/api/v1/admin/clients', { clientKey, algorithm: 'token_bucket', requestsPerSecond: 1_000_000, burstSize: 1_000_000 });

async function rawClient() {
  const { Client } = require('pg');
  const c = new Client({ connectionString: pg.url });
  await c.connect();
  return c;
}


function assertLocked503(r, key) {
  assert.equal(r.status, 503, `${key}: ${JSON.stringify(r.body)}`);
  assert.equal(r.body.error, 'STORE_UNAVAILABLE');
  assert.match(r.body.message, /locked by another instance/);
}

test('the bounds are options with defaults: NaN, negative and a lock timeout of half the store timeout or more are refused', () => {
  const { resolve, OPTIONS } = require('../../lib/service/config');
  const env = { TIERGATE_ADMIN_TOKEN: 'c0ffee-9d2b4e71a8f35c60e4' };
  const d = resolve({}, env);
  assert.deepEqual([d.storeTimeoutMs, d.pgLockTimeoutMs], [OPTIONS.storeTimeoutMs.default, OPTIONS.pgLockTimeoutMs.default]);
  assert.equal(resolve({}, { ...env, TIERGATE_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS: '1500' }).pgIdleInTransactionTimeoutMs, 1500);
  for (const bad of [{ storeTimeoutMs: NaN }, { storeTimeoutMs: -1 }, { pgStatementTimeoutMs: Infinity }, { pgLockTimeoutMs: 1.5 }, { storeTimeoutMs: 500, pgLockTimeoutMs: 250 }]) {
    assert.throws(() => resolve(bad, env), (e) => e.code === 'ERR_TIERGATE_INVALID_OPTION', JSON.stringify(bad));
  }
});

test('a batch with one client whose row is held locked elsewhere: that client fails after the lock timeout, the others are decided', { skip }, async () => {
  const { PostgresStore } = require('../../lib/service/stores/postgres');
  const store = new PostgresStore({ connectionString: pg.url, poolSize: 4 });
  const holder = await rawClient();
  try {
    await store.open();
    for (const clientKey of ['batch-held', 'batch-free-0', 'batch-free-1']) assert.ok(await store.createClient({ clientKey, algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 600 }));
    await holder.query("BEGIN; SELECT 1 FROM clients WHERE client_key = 'batch-held' FOR UPDATE");
    const out = await within(store.decideBatch(new Map([['batch-free-0', [1, 1]], ['batch-held', [1]], ['batch-free-1', [1]]])), 5000);
    assert.notEqual(out, UNANSWERED, 'the batch waited on the held lock');
    assert.ok(out.get('batch-held') instanceof Error);
    assert.equal(out.get('batch-held').status, 503);
    assert.match(out.get('batch-held').message, /locked by another instance/);
    assert.deepEqual(out.get('batch-free-0').results.map((r) => r.allowed), [true, true]);
    assert.deepEqual(out.get('batch-free-1').results.map((r) => r.allowed), [true]);
    await holder.query('ROLLBACK');
    // Nothing of the held client was counted; the others' decisions were committed.
    const again = await store.decideBatch(new Map([['batch-held', [1]], ['batch-free-0', [1]]]));
    assert.equal(again.get('batch-held').results[0].remaining, 9);
    assert.equal(again.get('batch-free-0').results[0].remaining, 7);
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
    await store.close();
  }
});

test('over HTTP, a row held locked elsewhere: its checks get a 503 within the bound, a client checked with it is answered', { skip }, async () => {
  const svc = await serve();
  const u = svc.url;
  for (const k of ['http-held', 'http-free']) assert.equal((await newClient(u, k)).status, 201);
  const holder = await rawClient();
  try {
    await holder.query("BEGIN; SELECT 1 FROM clients WHERE client_key = 'http-held' FOR UPDATE");
    const answers = await within(Promise.all([check(u, 'http-held'), check(u, 'http-free'), check(u, 'http-held')]), 5000);
    assert.notEqual(answers, UNANSWERED, 'the checks waited on the held lock');
    assertLocked503(answers[0], 'http-held');
    // The second waited for the first one's batch, then for the lock: its bound ran out first or not.
    assert.deepEqual([answers[2].status, answers[2].body.error], [503, 'STORE_UNAVAILABLE']);
    assert.equal(answers[1].status, 200);
    assert.equal((await request(u, 'GET', '/health/ready')).status, 200, 'one locked client does not make the instance unready');
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.end();
  }
  assert.equal((await check(u, 'http-held')).status, 200);
});

test('instance A SIGSTOPped while its batch holds a row lock: B answers within its bound, and the server ends A\'s transaction after the idle timeout', { skip }, async () => {
  const idleMs = 4000;
  const a = await serve({ 'pg-idle-in-transaction-timeout-ms': idleMs }, 'tiergate-a');
  const b = await serve({}, 'tiergate-b');
  for (const k of ['hot', 'cold']) assert.equal((await newClient(a.url, k)).status, 201);
  const probe = await rawClient();
  // Load on the hot client at A: 32 checks in flight at once until the test stops it.
  let loading = true;
  const loader = async () => { while (loading) await check(a.url, 'hot').catch(() => null); };
  const load = Array.from({ length: 32 }, loader);
  let stopped = false;
  try {
    // A holds the hot row's lock for one round trip of each batch: stop it until it is caught holding it.
    let locked = false;
    for (let attempt = 0; attempt < 40 && !locked; attempt++) {
      await sleep(20 + (attempt % 5) * 7);
      a.child.kill('SIGSTOP');
      stopped = true;
      locked = await rowIsLocked(probe, 'hot');
      if (!locked) { a.child.kill('SIGCONT'); stopped = false; }
    }
    assert.ok(locked, 'A was never caught holding the lock');
    const answers = await within(Promise.all([check(b.url, 'cold'), check(b.url, 'hot')]), 3000);
    assert.notEqual(answers, UNANSWERED, 'B waited on the stopped instance');
    assert.equal(answers[0].status, 200, 'a client A never touched');
    assertLocked503(answers[1], 'hot');
    // The server ends A's transaction (A is still stopped) and the lock is free.
    let released = false;
    for (let i = 0; i < 100 && !released; i++) {
      await sleep(100);
      released = !(await rowIsLocked(probe, 'hot'));
    }
    assert.ok(released, `the lock was still held 10 s after A stopped (idle timeout ${idleMs} ms)`);
    assert.equal((await check(b.url, 'hot')).status, 200);
  } finally {
    if (stopped) a.child.kill('SIGCONT');
    loading = false;
    await Promise.all(load);
    await probe.end();
  }
  // The server ended A's session while A was stopped: A lives on (the error its connection reports
  // on resuming is not unhandled) and answers again.
  let status = 0;
  for (let i = 0; i < 20 && status !== 200; i++) status = (await check(a.url, 'cold')).status;
  assert.equal(status, 200);
});

// Last: it freezes the cluster the tests above share.
test('the PostgreSQL server SIGSTOPped: checks get a 503 within the bound, readiness is 503 while it is stuck and 200 once checks succeed', { skip }, async () => {
  const poolSize = 4;
  const svc = await serve({ 'pool-size': poolSize }, 'tiergate-frozen');
  const u = svc.url;
  assert.equal((await newClient(u, 'frozen')).status, 201);
  assert.equal((await check(u, 'frozen')).status, 200);
  assert.equal((await request(u, 'GET', '/health/ready')).status, 200);
  try {
    pg.signal('SIGSTOP');
    for (let round = 0; round < 4; round++) {
      const [c, r] = await within(Promise.all([check(u, 'frozen'), request(u, 'GET', '/health/ready')]), 5000).then((x) => (x === UNANSWERED ? [x, x] : x));
      assert.notEqual(c, UNANSWERED, `round ${round}: the check waited on the frozen server`);
      assert.equal(c.status, 503, JSON.stringify(c.body));
      assert.equal(c.body.error, 'STORE_UNAVAILABLE');
      assert.notEqual(r, UNANSWERED, `round ${round}: readiness waited on the frozen server`);
      assert.equal(r.status, 503, `round ${round}: ready while the store is frozen`);
      await sleep(300);
    }
  } finally {
    pg.signal('SIGCONT');
  }
  let status = 0;
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await check(u, 'frozen')).status;
    if (status !== 200) await sleep(100);
  }
  assert.equal(status, 200, 'checks succeed again after SIGCONT');
  assert.equal((await request(u, 'GET', '/health/ready')).status, 200);
  // The connections destroyed while the server was frozen are gone: no more than the pool's.
  const probe = await rawClient();
  try {
    let n = Infinity;
    for (let i = 0; i < 50 && n > poolSize; i++) {
      n = (await probe.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'tiergate-frozen'")).rows[0].n;
      if (n > poolSize) await sleep(100);
    }
    assert.ok(n <= poolSize, `${n} connections of a pool of ${poolSize}`);
  } finally {
    await probe.end();
  }
});

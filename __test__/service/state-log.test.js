'use strict';
// The embedded store's decisions: held in memory, committed as one state_log row per batch, folded
// into clients.state. Exact with two connections on one file (another writer makes a batch fold and
// reload; also two service processes), nothing of a failed batch counts, the log is folded away, and
// memory stays bounded.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { SqliteStore } = require('../../lib/service/stores/sqlite');
const { SqliteDecisions } = require('../../lib/service/stores/sqlite-decisions');
const { tmpdir } = require('./helpers');

const window = (clientKey, maxRequests) => ({ clientKey, algorithm: 'sliding_window', maxRequests, windowSeconds: 600 });
const dirs = [];
test.after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });

async function openStore(dir = tmpdir('tiergate-statelog-')) {
  dirs.push(dir);
  const store = new SqliteStore({ dataDir: dir });
  await store.open();
  return store;
}

const allowedIn = (outcome) => outcome.results.filter((r) => r.allowed).length;
const stateInFile = (store, key) => JSON.parse(store.db.prepare('SELECT state FROM clients WHERE client_key = ?').pluck().get(key));
const logRows = (store) => store.db.prepare('SELECT count(*) FROM state_log').pluck().get();

test('two connections on one file, batches interleaved: exactly the limit allowed', async () => {
  const a = await openStore();
  const b = await openStore(dirs[dirs.length - 1]);
  try {
    await a.createClient(window('shared', 100));
    let allowed = 0;
    for (let i = 0; i < 50; i++) {
      const store = i % 2 === 0 ? a : b;
      const out = await store.decideBatch(new Map([['shared', [1, 1, 1, 1, 1]]]));
      allowed += allowedIn(out.get('shared'));
    }
    assert.equal(allowed, 100);
    // Each store's own answer shows what the other had taken.
    const last = (await a.decideBatch(new Map([['shared', [1]]]))).get('shared');
    assert.equal(last.results[0].allowed, false);
    assert.equal(last.results[0].remaining, 0);
  } finally {
    await a.close();
    await b.close();
  }
});

test('a batch whose transaction fails counts for nothing; the next one starts from the file', async () => {
  const store = await openStore();
  try {
    await store.createClient(window('fails', 10));
    assert.equal(allowedIn((await store.decideBatch(new Map([['fails', [1, 1, 1]]]))).get('fails')), 3);
    store.db.exec("CREATE TEMP TRIGGER no_log BEFORE INSERT ON state_log BEGIN SELECT RAISE(ABORT, 'refused'); END");
    await assert.rejects(store.decideBatch(new Map([['fails', [1, 1, 1, 1]]])), /refused/);
    store.db.exec('DROP TRIGGER no_log');
    const after = (await store.decideBatch(new Map([['fails', Array(10).fill(1)]]))).get('fails');
    assert.equal(allowedIn(after), 7, 'the failed batch took no slot');
  } finally {
    await store.close();
  }
});

test('the background fold writes what the log holds: nothing of a failed batch, each client\'s latest state', async () => {
  const store = await openStore();
  const counted = (key) => stateInFile(store, key).entries.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0);
  try {
    await store.createClient(window('held', 10));
    await store.createClient(window('other', 10));
    await store.decideBatch(new Map([['held', [1, 1]], ['other', [1]]]));
    // A batch that changes the held states and then fails: the memory is ahead of the file.
    store.db.exec("CREATE TEMP TRIGGER no_log BEFORE INSERT ON state_log BEGIN SELECT RAISE(ABORT, 'refused'); END");
    await assert.rejects(store.decideBatch(new Map([['held', [1, 1, 1]], ['other', [1, 1]]])), /refused/);
    store.db.exec('DROP TRIGGER no_log');
    await store.decisions.foldSoon();
    assert.deepEqual([counted('held'), counted('other')], [2, 1], 'the failed batch\'s states were not written');
    assert.equal(logRows(store), 0);
    // Many clients over more than one fold transaction, some changed twice: each with its latest state.
    const keys = Array.from({ length: 600 }, (_, i) => `many-${i}`);
    for (const k of keys) await store.createClient(window(k, 10));
    await store.decideBatch(new Map(keys.map((k) => [k, [1]])));
    await store.decideBatch(new Map(keys.filter((_, i) => i % 3 === 0).map((k) => [k, [1, 1]])));
    await store.decisions.foldSoon();
    assert.equal(logRows(store), 0);
    keys.forEach((k, i) => assert.equal(counted(k), i % 3 === 0 ? 3 : 1, k));
  } finally {
    await store.close();
  }
});

test('the log is folded into clients.state and emptied; replacing a client folds first', async () => {
  const store = await openStore();
  try {
    await store.createClient(window('folded', 5));
    await store.decideBatch(new Map([['folded', [1, 1]]]));
    assert.equal(logRows(store), 1);
    assert.equal(stateInFile(store, 'folded').entries.length, 0, 'the row is behind until the fold');
    await store.decisions.foldSoon();
    assert.equal(logRows(store), 0);
    assert.equal(stateInFile(store, 'folded').entries[1], 2);
    await store.decideBatch(new Map([['folded', [1]]]));
    await store.replaceClient(window('folded', 5));
    await store.decisions.foldSoon();
    assert.deepEqual(stateInFile(store, 'folded').entries, [], 'no logged state landed on the replaced row');
    assert.equal(allowedIn((await store.decideBatch(new Map([['folded', Array(6).fill(1)]]))).get('folded')), 5);
  } finally {
    await store.close();
  }
});

test('every background fold runs, not only the first: the log stays short while batches go on', async () => {
  const store = await openStore();
  try {
    await store.createClient(window('often', 1000));
    for (let round = 1; round <= 3; round++) {
      await store.decideBatch(new Map([['often', [1]]]));
      assert.equal(logRows(store), 1);
      await store.decisions.foldSoon();
      assert.equal(logRows(store), 0, `fold ${round} emptied the log`);
      const counted = stateInFile(store, 'often').entries.filter((_, i) => i % 2 === 1).reduce((a, b) => a + b, 0);
      assert.equal(counted, round, `fold ${round} wrote the state`);
    }
    // The timer's folds too (FOLD_MS apart), bounded in time.
    await store.decideBatch(new Map([['often', [1]]]));
    const until = Date.now() + 5000;
    while (logRows(store) > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(logRows(store), 0, 'the timer folded the log');
  } finally {
    await store.close();
  }
});

test('memory holds at most maxHeld clients once their states are folded, and forgetting loses nothing', async () => {
  const store = await openStore();
  try {
    const decisions = new SqliteDecisions(store.db, { maxHeld: 10 });
    decisions.stop();
    for (let i = 0; i < 50; i++) await store.createClient(window(`k${i}`, 3));
    const batch = () => new Map(Array.from({ length: 50 }, (_, i) => [`k${i}`, [1]]));
    decisions.decideBatch(batch(), Date.now());
    assert.equal(decisions.held.size, 50, 'nothing is forgotten before its state is folded');
    await decisions.foldSoon();
    assert.equal(decisions.held.size, 10);
    decisions.decideBatch(batch(), Date.now());
    const third = decisions.decideBatch(batch(), Date.now());
    for (const [, o] of third) assert.equal(o.results[0].remaining, 0, 'the third check of each client takes its last slot');
    for (const [, o] of decisions.decideBatch(batch(), Date.now())) assert.equal(o.results[0].allowed, false);
  } finally {
    await store.close();
  }
});

test('two service processes on one data folder: 500 simultaneous checks over both on a window of 100 allow exactly 100', async () => {
  const { startService, admin, check } = require('./helpers');
  const dir = tmpdir('tiergate-statelog-two-');
  dirs.push(dir);
  const one = await startService({ flags: { data: dir } }).ready;
  const two = await startService({ flags: { data: dir } }).ready;
  try {
    assert.equal((await admin(one.url, 'POST', '/api/v1/admin/clients', window('two-procs', 100))).status, 201);
    const res = await Promise.all(Array.from({ length: 500 }, (_, i) => check(i % 2 ? one.url : two.url, 'two-procs')));
    const statuses = res.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 200).length, 100);
    assert.equal(statuses.filter((s) => s === 429).length, 400);
  } finally {
    await Promise.all([one.stop(), two.stop()]);
  }
});

'use strict';
// The embedded store's activity file, written by a worker thread: what a write resolved is committed
// (another connection reads it), totals stay exact with two stores (two workers) writing one folder,
// a deleted client's history goes, a folder from before the activity file keeps its history, and the
// worker checkpoints the store file's WAL (the decisions' connection does not).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { SqliteStore } = require('../../lib/service/stores/sqlite');
const { migrate } = require('../../lib/service/stores/sqlite');
const { tmpdir } = require('./helpers');

const window = (clientKey, maxRequests) => ({ clientKey, algorithm: 'sliding_window', maxRequests, windowSeconds: 600 });
const dirs = [];
test.after(() => { for (const d of dirs) fs.rmSync(d, { recursive: true, force: true }); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function folder() {
  const d = tmpdir('tiergate-activity-');
  dirs.push(d);
  return d;
}
async function openStore(dir) {
  const store = new SqliteStore({ dataDir: dir });
  await store.open();
  return store;
}
const rec = (clientKey, allowed, at = Date.now()) => ({ clientKey, at, allowed, cost: 1, responseMs: 0.25 });
function readActivity(dir, fn) {
  const db = new Database(path.join(dir, 'activity.sqlite'), { readonly: true, fileMustExist: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

test('a write that resolved is committed: a connection of its own reads every row and total', async () => {
  const dir = folder();
  const store = await openStore(dir);
  try {
    await store.createClient(window('seen', 10));
    await store.writeActivity([rec('seen', true), rec('seen', true), rec('seen', false)]);
    const [rowsIn, stats] = readActivity(dir, (db) => [
      db.prepare("SELECT count(*) FROM activity WHERE client_key = 'seen'").pluck().get(),
      db.prepare("SELECT total, allowed, denied FROM client_stats WHERE client_key = 'seen'").get(),
    ]);
    assert.equal(rowsIn, 3);
    assert.deepEqual(stats, { total: 3, allowed: 2, denied: 1 });
  } finally {
    await store.close();
  }
});

test('two stores on one folder write at once (two workers): the totals are exact', async () => {
  const dir = folder();
  const a = await openStore(dir);
  const b = await openStore(dir);
  try {
    await a.createClient(window('shared', 10));
    const writes = [];
    for (let i = 0; i < 40; i++) {
      const batch = Array.from({ length: 250 }, (_, j) => rec('shared', j % 5 !== 0));
      writes.push((i % 2 ? a : b).writeActivity(batch));
    }
    await Promise.all(writes);
    const { summary } = await b.clientActivity('shared', 5);
    assert.deepEqual(summary, { totalRequests: 10_000, allowedRequests: 8000, deniedRequests: 2000 });
    assert.equal(await a.activityCount(), 10_000);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('deleting a client removes its history; records for a client that is gone add no totals', async () => {
  const dir = folder();
  const store = await openStore(dir);
  try {
    await store.createClient(window('gone', 10));
    await store.writeActivity([rec('gone', true), rec('gone', false)]);
    assert.equal(await store.deleteClient('gone'), true);
    await store.writeActivity([rec('gone', true)]); // late: decided before the delete, written after
    assert.equal(readActivity(dir, (db) => db.prepare("SELECT count(*) FROM client_stats WHERE client_key = 'gone'").pluck().get()), 0);
    await store.createClient(window('gone', 10));
    const { summary } = await store.clientActivity('gone', 5);
    assert.deepEqual(summary, { totalRequests: 0, allowedRequests: 0, deniedRequests: 0 });
  } finally {
    await store.close();
  }
});

test('a folder from before the activity file: its records, totals and buckets move there once', async () => {
  const dir = folder();
  // The layout before: migrations 001-003 put the activity tables in the store's file.
  const old = new Database(path.join(dir, 'tiergate.sqlite'));
  migrate(old);
  const now = Date.now();
  old.prepare("INSERT INTO clients (client_key, algorithm, max_requests, window_seconds, state, created_at, updated_at) VALUES ('old', 'sliding_window', 10, 600, '{\"entries\":[]}', ?, ?)").run(now, now);
  const insert = old.prepare("INSERT INTO activity (client_key, at, allowed, cost, response_ms) VALUES ('old', ?, 1, 1, 0.5)");
  for (let i = 0; i < 7; i++) insert.run(now);
  old.prepare("INSERT INTO client_stats (client_key, total, allowed, denied, last_at) VALUES ('old', 7, 7, 0, ?)").run(now);
  old.prepare('INSERT INTO activity_buckets (resolution, start, incoming, allowed, denied, response_ms_sum) VALUES (1000, ?, 7, 7, 0, 3.5)').run(now - (now % 1000));
  old.close();
  for (let start = 0; start < 2; start++) { // the second start finds nothing left to move
    const store = await openStore(dir);
    try {
      const { summary, recentActivity } = await store.clientActivity('old', 20);
      assert.deepEqual(summary, { totalRequests: 7, allowedRequests: 7, deniedRequests: 0 });
      assert.equal(recentActivity.length, 7);
      const points = await store.analytics('5m');
      assert.equal(points.reduce((n, p) => n + p.incoming, 0), 7);
      const left = store.db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('activity', 'client_stats', 'activity_buckets')").pluck().get();
      assert.equal(left, 0, 'the store file no longer holds activity tables');
    } finally {
      await store.close();
    }
  }
});

test('the worker checkpoints the store file: its WAL restarts while batches go on', async () => {
  const dir = folder();
  const store = await openStore(dir);
  try {
    assert.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 0, 'the decisions connection makes no checkpoint');
    const keys = Array.from({ length: 100 }, (_, i) => `w${i}`);
    for (const k of keys) await store.createClient(window(k, 1_000_000));
    // The WAL header's checkpoint sequence number (bytes 12-15) changes when a writer starts the
    // WAL over, which it does only after a checkpoint copied all of it.
    const wal = path.join(dir, 'tiergate.sqlite-wal');
    const sequence = () => fs.readFileSync(wal).readUInt32BE(12);
    await store.decideBatch(new Map(keys.map((k) => [k, [1]])));
    const first = sequence();
    const until = Date.now() + 10_000;
    while (sequence() === first && Date.now() < until) {
      await store.decideBatch(new Map(keys.map((k) => [k, [1]])));
      await sleep(20);
    }
    assert.notEqual(sequence(), first, 'the WAL was checkpointed and started over');
  } finally {
    await store.close();
  }
});

test('after close, a late write is refused and starts no worker again', async () => {
  const store = await openStore(folder());
  await store.close();
  await assert.rejects(store.writeActivity([rec('late', true)]), /closed/);
  assert.equal(store.activity.worker, null);
});

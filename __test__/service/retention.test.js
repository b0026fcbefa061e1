'use strict';
// The embedded store's retention deletes in bounded steps (in the activity worker; the event loop
// runs meanwhile): a backlog many steps long still ends at the row cap, and rows past their age all go.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { SqliteStore } = require('../../lib/service/stores/sqlite');
const { tmpdir } = require('./helpers');

const BUCKET_AGE_MS = { second: 3_600_000, minute: 3_600_000 };

async function storeWith(records) {
  const dir = tmpdir('tiergate-retention-');
  const store = new SqliteStore({ dataDir: dir });
  await store.open();
  await store.writeActivity(records);
  return { store, done: async () => { await store.close(); fs.rmSync(dir, { recursive: true, force: true }); } };
}

const rec = (i, at) => ({ clientKey: `k-${i % 7}`, at, allowed: i % 2 === 0, cost: 1, responseMs: 0.5 });

test('a backlog of 9,001 rows over a cap of 100 is pruned to exactly the newest 100', async () => {
  const now = Date.now();
  const { store, done } = await storeWith(Array.from({ length: 9101 }, (_, i) => rec(i, now)));
  try {
    // An immediate that re-queues itself runs once per turn of the loop: it counts the turns the
    // prune gave back (a prune in one go would resolve before the first of them).
    let turns = 0;
    let counting = true;
    const tick = () => { if (counting) { turns++; setImmediate(tick); } };
    setImmediate(tick);
    await store.prune({ now, maxAgeMs: 3_600_000, maxRows: 100, bucketAgeMs: BUCKET_AGE_MS });
    counting = false;
    assert.equal(await store.activityCount(), 100);
    const newest = store.activityDb.prepare('SELECT min(id) AS lo, max(id) AS hi FROM activity').get();
    assert.equal(newest.hi - newest.lo, 99);
    assert.ok(turns >= 3, `the prune gave the loop ${turns} turns`);
  } finally {
    await done();
  }
});

test('rows older than the age limit all go, however many; newer ones stay', async () => {
  const now = Date.now();
  const old = Array.from({ length: 5000 }, (_, i) => rec(i, now - 7_200_000));
  const recent = Array.from({ length: 30 }, (_, i) => rec(i, now - 1000));
  const { store, done } = await storeWith(old.concat(recent));
  try {
    await store.prune({ now, maxAgeMs: 3_600_000, maxRows: 1_000_000, bucketAgeMs: BUCKET_AGE_MS });
    assert.equal(await store.activityCount(), 30);
  } finally {
    await done();
  }
});

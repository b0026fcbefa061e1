'use strict';
// Exact accounting across real worker threads on one Ledger.shared: the workers are released together
// (Atomics barrier) and race on the same native state.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Ledger } = require('../..');

const WORKERS = 4;
const ATTEMPTS = 10_000;

const workerSource = `
const { workerData, parentPort } = require('node:worker_threads');
const { Ledger } = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
const { name, config, key, attempts, gate } = workerData;
const ledger = Ledger.shared(name, config);
const flag = new Int32Array(gate);
Atomics.add(flag, 1, 1);
Atomics.wait(flag, 0, 0, 10_000);          // released together
let granted = 0;
for (let i = 0; i < attempts; i++) if (ledger.tryConsume('t', key)) granted++;
parentPort.postMessage(granted);
`;

async function race(name, config, key) {
  const gate = new SharedArrayBuffer(8);
  const flag = new Int32Array(gate);
  const workers = Array.from({ length: WORKERS }, () =>
    new Worker(workerSource, { eval: true, workerData: { name, config, key, attempts: ATTEMPTS, gate } }));
  const results = workers.map((w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  }));
  const deadline = Date.now() + 20_000;
  while (Atomics.load(flag, 1) < WORKERS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  const granted = await Promise.all(results);
  await Promise.all(workers.map((w) => w.terminate()));
  return granted;
}

test('4 workers x 10,000 attempts on a shared tier of 1,000 tokens grant exactly 1,000', async () => {
  const config = { tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1000 }] };
  const mine = Ledger.shared('threads: tier', config); // held here, so the workers share it
  const granted = await race('threads: tier', config, undefined);
  assert.equal(granted.reduce((a, b) => a + b, 0), 1000, `per worker: ${granted}`);
  assert.equal(mine.snapshot()[0].tokens, 0);
});

test('4 workers x 10,000 attempts on one key of 1,000 tokens grant exactly 1,000', async () => {
  const config = { tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1e9, perKey: { limit: 0, windowMs: 1000, burst: 1000 } }] };
  const mine = Ledger.shared('threads: key', config);
  const granted = await race('threads: key', config, 'the-one-key');
  assert.equal(granted.reduce((a, b) => a + b, 0), 1000, `per worker: ${granted}`);
  const [tier] = mine.snapshot();
  assert.equal(tier.keys, 1);
  assert.equal(tier.tokens, 1e9 - 1000, 'the pool paid exactly what the key granted');
});

test('workers that create Ledger.shared first still share one ledger with the main thread', async () => {
  const config = { tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 500 }] };
  // Nobody in the main thread holds this one until the workers have created it.
  const granted = await race('threads: created by workers', config, undefined);
  assert.equal(granted.reduce((a, b) => a + b, 0), 500);
});

test('refill scale, snapshot and reset are shared with workers too', async () => {
  const config = { tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 10, perKey: { limit: 0, windowMs: 1000, burst: 2 } }] };
  const mine = Ledger.shared('threads: shared state', config);
  mine.tryConsume('t', 'from-main', 2);
  const worker = new Worker(`
    const { parentPort } = require('node:worker_threads');
    const { Ledger } = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
    const l = Ledger.shared('threads: shared state');
    const seen = l.snapshot()[0];
    const keyEmpty = !l.tryConsume('t', 'from-main');
    l.setRefillScale('t', 0.25);
    l.tryConsume('t', 'from-worker', 1);
    parentPort.postMessage({ tokens: seen.tokens, keys: seen.keys, keyEmpty });
  `, { eval: true });
  const seen = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.deepEqual(seen, { tokens: 8, keys: 1, keyEmpty: true });
  assert.equal(mine.refillScale('t'), 0.25);
  assert.deepEqual([mine.snapshot()[0].tokens, mine.snapshot()[0].keys], [7, 2]);
  assert.equal(mine.reset('t'), 3);
  assert.equal(mine.snapshot()[0].tokens, 10);
});

'use strict';
// tryConsume's per-thread key cache (lib/ledger/key-cache.js): a repeated key is debited by its native slot,
// with exactly the results, errors and accounting of the uncached call.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { Ledger } = require('../..');
const { keyedTryConsume, KEY_CACHE_BYPASS_MS } = require('../../lib/ledger/key-cache');

const keyed = (perKey, extra = {}) => new Ledger({
  tiers: [
    { name: 'plain', limit: 0, windowMs: 1000, burst: 100 },
    { name: 'k', limit: 0, windowMs: 1000, burst: 1000, perKey: { limit: 0, windowMs: 1000, burst: 3, ...perKey }, ...extra },
  ],
});

test('a cached key is debited as the uncached call debits it: quota, pool, cost, by id and by name', () => {
  const l = keyed({});
  const seen = [];
  for (let i = 0; i < 5; i++) seen.push(l.tryConsume(1, 'u'));
  assert.deepEqual(seen, [true, true, true, false, false]);
  assert.equal(l.tryConsume('k', 'v', 2.5), true);
  assert.equal(l.tryConsume('k', 'v', 0.5), true, 'the same bucket by name');
  assert.equal(l.tryConsume(1, 'v'), false);
  assert.equal(l.tryConsume(1, 'v', 0), true, 'a zero cost on an empty bucket');
  assert.equal(l.tryConsume(1, 'w', -0), true);
  assert.equal(l.snapshot()[1].tokens, 1000 - 6, 'the pool paid what the keys granted');
  assert.equal(l.tryConsume(0, 'u'), true, 'a tier without per-key buckets ignores the key');
  assert.equal(l.snapshot()[0].tokens, 99);
});

test('a key whose bucket was reset, evicted or cleared is looked up again, and no other key pays', () => {
  const l = keyed({ maxKeys: 1 });
  assert.equal(l.tryConsume(1, 'a'), true); // a: 2 left
  assert.equal(l.tryConsume(1, 'b'), true); // evicts a; b: 2 left
  // a's cached slot now holds b: a comes back as a new, full bucket and b is untouched.
  assert.deepEqual([l.tryConsume(1, 'a'), l.tryConsume(1, 'a'), l.tryConsume(1, 'a'), l.tryConsume(1, 'a')], [true, true, true, false]);
  assert.equal(l.reset(1, 'a'), 1);
  assert.equal(l.tryConsume(1, 'a', 3), true, 'reset forgot the key: full again');
  l.reset(1);
  assert.equal(l.tryConsume(1, 'a', 3), true, 'reset(tier) forgot it too');
  assert.equal(l.snapshot()[1].keys, 1);
});

test('bad arguments throw the uncached errors, before and after the key is cached', () => {
  const l = keyed({});
  const check = () => {
    assert.throws(() => l.tryConsume(1, 'u', NaN), { name: 'RangeError', message: /cost must be a finite number >= 0 \(got NaN\)/ });
    assert.throws(() => l.tryConsume(1, 'u', -1), { name: 'RangeError', message: /got -1/ });
    assert.throws(() => l.tryConsume(1, 'u', Infinity), { name: 'RangeError', message: /got Infinity/ });
    assert.throws(() => l.tryConsume(1, 'u', '2'), { name: 'TypeError', message: /cost must be a number, got string/ });
    assert.throws(() => l.tryConsume(1, 'u', { valueOf: () => 1 }), { name: 'TypeError', message: /got object/ });
    assert.throws(() => l.tryConsume('nope', 'u'), { name: 'RangeError', message: /unknown tier "nope"/ });
    assert.throws(() => l.tryConsume(2, 'u'), { name: 'RangeError', message: /tier 2 is not a tier id/ });
    assert.throws(() => l.tryConsume(0.5, 'u'), { name: 'RangeError', message: /tier 0.5 is not a tier id/ });
    assert.throws(() => l.tryConsume(1, 5), { name: 'TypeError', message: /key must be a string or undefined, got number/ });
    assert.throws(() => l.tryConsume(1, 'k'.repeat(1025)), { name: 'RangeError', message: /key is 1025 bytes long/ });
  };
  check();
  assert.equal(l.tryConsume(1, 'u'), true);
  check();
  assert.equal(l.snapshot()[1].tokens, 999, 'nothing was debited by a refused call');
  const { tryConsume } = l;
  assert.equal(tryConsume(1, 'u'), true, 'works detached from the ledger, as the raw function did');
});

// A stand-in for the native callbacks: records what the cache asks for.
function fakeNative() {
  const slots = new Map(); // index -> key
  const calls = [];
  const raw = {
    slotArgs: new Float64Array(3),
    slotHits: new Float64Array(1),
    tryConsume: (...args) => { calls.push(['plain', ...args]); return true; },
    tryConsumeKeyed: (tier, key, cost, index) => {
      calls.push(['keyed', key, index]);
      if (index >= 0) slots.set(index, key);
      return true;
    },
    tryConsumeSlot: () => {
      const index = raw.slotArgs[0]; // one tier: code = index
      calls.push(['slot', slots.get(index)]);
      raw.slotArgs[2] = slots.has(index) ? 1 : -1;
      if (slots.has(index)) raw.slotHits[0]++;
    },
  };
  return { raw, slots, calls };
}

test('the cache stays within maxKeys, re-resolves stale slots in place, and steps aside for unique keys', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { raw, slots, calls } = fakeNative();
  const tryConsume = keyedTryConsume(raw, new Map([['t', 0]]), [4], 1);
  for (const k of ['a', 'b', 'a', 'b']) tryConsume(0, k);
  assert.deepEqual(calls.map((c) => c[0]), ['keyed', 'keyed', 'slot', 'slot']);
  slots.delete(0); // a's slot went stale
  calls.length = 0;
  tryConsume(0, 'a');
  assert.deepEqual(calls, [['slot', undefined], ['keyed', 'a', 0]], 'looked up again into the same index');
  // Keys that recur (hits >= size) keep the cache in use when it fills.
  for (const k of ['c', 'd', 'c', 'd', 'a', 'b']) tryConsume(0, k);
  calls.length = 0;
  tryConsume(0, 'e'); // full, but it paid: emptied and used again
  assert.deepEqual(calls, [['keyed', 'e', 0]]);
  // Unique keys: the cache fills with no hits, then is set aside for KEY_CACHE_BYPASS_MS: meanwhile
  // keyed calls go to the raw function, as without a cache; then it is used again.
  for (const k of ['f', 'g', 'h']) tryConsume(0, k);
  calls.length = 0;
  tryConsume(0, 'u0');
  assert.deepEqual(calls, [['keyed', 'u0', -1]], 'found full, having paid nothing: not cached');
  calls.length = 0;
  for (const k of ['u1', 'u2', 'e']) tryConsume(0, k);
  assert.deepEqual(calls, [['plain', 0, 'u1', undefined], ['plain', 0, 'u2', undefined], ['plain', 0, 'e', undefined]]);
  t.mock.timers.tick(KEY_CACHE_BYPASS_MS);
  calls.length = 0;
  tryConsume(0, 'u3');
  tryConsume(0, 'u3');
  assert.deepEqual(calls, [['keyed', 'u3', 0], ['slot', 'u3']], 'cached again');
  assert.ok(Math.max(...slots.keys()) < 4, 'never more slots than maxKeys');
  // Calls the cache does not take go to the raw function with the arguments given.
  calls.length = 0;
  tryConsume(0);
  tryConsume('t', undefined, 2);
  tryConsume(0, 'x'.repeat(200));
  assert.deepEqual(calls, [['plain', 0], ['plain', 't', undefined, 2], ['keyed', 'x'.repeat(200), -1]]);
});

test('4 workers debiting 50 shared keys through their own caches grant exactly the pool', async () => {
  const config = { tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1000, perKey: { limit: 0, windowMs: 1000, burst: 30, maxKeys: 64 } }] };
  const mine = Ledger.shared('key-cache: threads', config);
  const source = `
    const { workerData, parentPort } = require('node:worker_threads');
    const { Ledger } = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
    const ledger = Ledger.shared('key-cache: threads', workerData.config);
    const flag = new Int32Array(workerData.gate);
    Atomics.add(flag, 1, 1);
    Atomics.wait(flag, 0, 0, 10_000);
    const granted = new Array(50).fill(0);
    for (let i = 0; i < 5000; i++) if (ledger.tryConsume(0, 'user-' + ((i * 7 + workerData.w) % 50))) granted[(i * 7 + workerData.w) % 50]++;
    parentPort.postMessage(granted);`;
  const gate = new SharedArrayBuffer(8);
  const flag = new Int32Array(gate);
  const workers = [0, 1, 2, 3].map((w) => new Worker(source, { eval: true, workerData: { config, gate, w } }));
  const results = workers.map((w) => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); }));
  const deadline = Date.now() + 20_000;
  while (Atomics.load(flag, 1) < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  const granted = await Promise.all(results);
  await Promise.all(workers.map((w) => w.terminate()));
  const perKey = granted[0].map((_, k) => granted.reduce((a, g) => a + g[k], 0));
  assert.ok(perKey.every((n) => n <= 30), `per key: ${perKey}`);
  assert.equal(perKey.reduce((a, b) => a + b, 0), 1000);
  assert.equal(mine.snapshot()[0].tokens, 0);
});

test('tier names alternating call after call each debit their own tier; an unknown name still throws', () => {
  const l = keyed({});
  for (let i = 0; i < 10; i++) {
    assert.equal(l.tryConsume('plain'), true);
    assert.equal(l.tryConsume('k', `u${i}`), true);
    assert.equal(l.tryConsume('k'), true);
  }
  const [plain, k] = l.snapshot();
  assert.equal(plain.tokens, 90);
  assert.equal(k.tokens, 1000 - 20);
  assert.throws(() => l.tryConsume('nope'), /nope/);
  assert.throws(() => l.tryConsume('nope', 'u1'), /nope/);
  assert.equal(l.tryConsume('plain'), true, 'the remembered name is not disturbed by a failed lookup');
  assert.equal(l.snapshot()[0].tokens, 89);
});

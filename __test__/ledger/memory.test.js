'use strict';
// Keyed state is bounded: a flood of 1,000,000 unique keys leaves at most maxKeys buckets and native
// memory that does not grow with the flood.
const test = require('node:test');
const assert = require('node:assert/strict');
const { Ledger } = require('../..');

function nativeBytes() {
  // What the process holds outside the V8 heap (the JS strings of the flood are garbage in the heap).
  const m = process.memoryUsage();
  return m.rss - m.heapTotal;
}

test('maxKeys holds under 1,000,000 unique keys and memory stays bounded', () => {
  const maxKeys = 10_000;
  const l = new Ledger({
    tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 4294967295, perKey: { limit: 5, windowMs: 5000, maxKeys } }],
  });
  let before = 0;
  let peakKeys = 0;
  for (let i = 0; i < 1_000_000; i++) {
    assert.ok(l.tryConsume(0, `flood-${i}-abcdefgh`), 'a new key starts full');
    if (i === 99_999) before = nativeBytes(); // after the table has reached its cap
    if (i % 50_000 === 0) peakKeys = Math.max(peakKeys, l.snapshot()[0].keys);
  }
  const { keys, tokens } = l.snapshot()[0];
  peakKeys = Math.max(peakKeys, keys);
  assert.ok(keys <= maxKeys, `${keys} keys held`);
  assert.ok(keys >= maxKeys * 0.95, `${keys} keys held: the cap is used, not undershot`);
  assert.ok(peakKeys <= maxKeys);
  assert.equal(tokens, 4294967295 - 1_000_000, 'every debit reached the pool');
  // 900,000 more keys after the cap: unbounded growth would be ~60 MB here; allow noise.
  const grown = nativeBytes() - before;
  assert.ok(grown < 16 * 1024 * 1024, `native memory grew by ${(grown / 1048576).toFixed(1)} MiB after the cap`);
});

test('an evicted key comes back with a full bucket; recent keys keep their state', async () => {
  const l = new Ledger({
    tiers: [{ name: 't', limit: 0, windowMs: 1000, burst: 1e9, perKey: { limit: 0, windowMs: 1000, burst: 2, maxKeys: 100 } }],
  });
  assert.ok(l.tryConsume(0, 'old', 2));
  assert.equal(l.tryConsume(0, 'old'), false);
  // tryConsume stamps buckets with the coarse clock (ticks of up to 10 ms): "least recently touched"
  // is told apart from one tick to the next, so let a few ticks pass.
  await new Promise((resolve) => setTimeout(resolve, 30));
  for (let i = 0; i < 1000; i++) l.tryConsume(0, `new-${i}`);
  assert.ok(l.snapshot()[0].keys <= 100);
  assert.equal(l.tryConsume(0, 'old'), true, 'the least recently used key was evicted');
  assert.equal(l.tryConsume(0, 'new-999', 1), true);
  assert.equal(l.tryConsume(0, 'new-999', 1), false, 'a recent key kept its state');
});

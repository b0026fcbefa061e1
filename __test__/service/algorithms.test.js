'use strict';
// The service's algorithms as pure functions of (policy, state, now): exact arithmetic at chosen
// instants. For each, a refused check's retryAfterMs is exact: at that instant the check passes, a
// millisecond before it does not.
const test = require('node:test');
const assert = require('node:assert/strict');
const { ALGORITHMS, initialState, decide, describeState } = require('../../lib/service/algorithms');

/** A decider over one client's state (a fresh copy per call of `at`, so probing changes nothing). */
function client(policy, t0 = 0) {
  let state = initialState(policy, t0);
  const copy = () => JSON.parse(JSON.stringify(state));
  return {
    check(now, cost = 1) {
      return decide(policy, state, now, cost);
    },
    /** Whether a check of `cost` at `now` would pass (the state is left as it is). */
    would(now, cost = 1) {
      return decide(policy, copy(), now, cost).allowed;
    },
    get state() {
      return state;
    },
  };
}

function assertRetryExact(c, now, cost = 1) {
  const r = c.check(now, cost);
  assert.equal(r.allowed, false);
  const at = now + Math.ceil(r.retryAfterMs);
  assert.equal(c.would(at, cost), true, `passes at the retry time (${r.retryAfterMs} ms after ${now})`);
  assert.equal(c.would(at - 1, cost), false, `refused 1 ms before it (${at - 1})`);
}

test('fixed window: the count resets on each window edge; up to twice the limit across an edge', () => {
  const p = { clientKey: 'f', algorithm: 'fixed_window', maxRequests: 3, windowSeconds: 10 };
  const c = client(p);
  for (const t of [9000, 9500, 9900]) assert.equal(c.check(t).allowed, true);
  const r = c.check(9950);
  assert.deepEqual([r.allowed, r.remaining, r.resetAtMs, r.retryAfterMs], [false, 0, 10_000, 50]);
  for (const t of [10_000, 10_001, 10_002]) assert.equal(c.check(t).allowed, true, 'a new window');
  assert.equal(c.check(10_003).allowed, false);
  assert.equal(c.check(12_000, 4).retryAfterMs, 8000, 'a cost above the limit waits for the window end, and never passes');
  assertRetryExact(c, 15_000);
  assert.deepEqual(describeState(p, c.state, 19_999), { used: 3, remaining: 0, resetAt: new Date(20_000).toISOString() });
});

test('sliding counter: the previous window weighted by its overlap; the retry is exact', () => {
  const p = { clientKey: 's', algorithm: 'sliding_counter', maxRequests: 10, windowSeconds: 10 };
  const c = client(p);
  for (let i = 0; i < 10; i++) assert.equal(c.check(5000 + i).allowed, true);
  assert.equal(c.check(9999).allowed, false);
  // At 12,500 a quarter of the next window has passed: the estimate is 10 × 0.75 = 7.5, room for 2.
  assert.equal(c.check(12_500).allowed, true);
  assert.equal(c.check(12_500).allowed, true);
  const r = c.check(12_500);
  assert.equal(r.allowed, false);
  assert.equal(r.remaining, 0);
  // 10 × (1 − x) + 2 + 1 ≤ 10 → x ≥ 0.3: at 13,000.
  assert.equal(r.retryAfterMs, 500);
  assertRetryExact(c, 12_600);
  assertRetryExact(c, 19_990, 9); // room only in the next window: 2 × (1 − x) + 9 ≤ 10 at x = 0.5
  // Two windows later everything has slid out.
  assert.equal(describeState(p, c.state, 40_000).used, 0);
  assert.equal(c.check(40_000, 10).allowed, true);
});

test('GCRA: a burst at once, then one unit per emission interval; the retry is exact', () => {
  const p = { clientKey: 'g', algorithm: 'gcra', requestsPerSecond: 10, burstSize: 5 };
  const c = client(p);
  for (let i = 0; i < 5; i++) assert.equal(c.check(1000).allowed, true);
  const r = c.check(1000);
  assert.deepEqual([r.allowed, r.remaining, r.retryAfterMs, r.resetAtMs], [false, 0, 100, 1500]);
  assert.equal(c.check(1100).allowed, true, 'one interval later: one unit');
  assert.equal(c.check(1100).allowed, false);
  assertRetryExact(c, 1150);
  assertRetryExact(c, 1150, 3);
  assert.equal(c.check(1150, 6).allowed, false, 'a cost above the burst never passes');
  assert.equal(describeState(p, c.state, 10_000).remaining, 5, 'idle: the whole burst again');
});

test('GCRA admits what a token bucket of the same rate and burst admits, on the same arrivals', () => {
  const rate = { requestsPerSecond: 7, burstSize: 4 };
  const g = client({ clientKey: 'g', algorithm: 'gcra', ...rate });
  const b = client({ clientKey: 'b', algorithm: 'token_bucket', ...rate });
  let t = 0;
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 5000; i++) {
    t += Math.floor(next() * 300);
    const cost = 1 + Math.floor(next() * 3);
    assert.equal(g.check(t, cost).allowed, b.check(t, cost).allowed, `arrival ${i} at ${t} ms, cost ${cost}`);
  }
});

test('the exact sliding window and the token bucket keep their retry exactness', () => {
  const w = client({ clientKey: 'w', algorithm: 'sliding_window', maxRequests: 3, windowSeconds: 1 });
  for (const t of [0, 300, 600]) w.check(t);
  assertRetryExact(w, 700);
  const b = client({ clientKey: 'b', algorithm: 'token_bucket', requestsPerSecond: 4, burstSize: 2 });
  b.check(0, 2);
  assertRetryExact(b, 100);
});

test('every algorithm names its fields once (the validation and the OpenAPI document read them)', () => {
  assert.deepEqual(Object.keys(ALGORITHMS).sort(), ['fixed_window', 'gcra', 'sliding_counter', 'sliding_window', 'token_bucket']);
  for (const a of Object.values(ALGORITHMS)) assert.ok(a.fields.length === 2);
});

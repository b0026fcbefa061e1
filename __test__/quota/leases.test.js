'use strict';
// The lease engine's binding and the lease driver, over the in-memory store and over stores that
// misbehave as real ones do (never answer, fail, answer late). The Redis store has its own suites
// (__test__/cluster/).
const test = require('node:test');
const assert = require('node:assert/strict');
const { Quota, LeaseDriver, MemoryStore, QUOTA_CODE } = require('tiergate/quota');

const bucket = (extra) => ({ name: 'api', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 100, ...extra });

function driver(limits, store = new MemoryStore(), options = {}) {
  const q = new Quota({ limits });
  return new LeaseDriver(q, store, { storeTimeoutMs: 250, ...options });
}

/** A store whose every call hangs until `release()`d: a store that does not answer. */
function hangingStore(inner = new MemoryStore()) {
  const held = [];
  return {
    calls: 0,
    returns: [],
    lease(batch) {
      this.calls++;
      return new Promise((resolve) => held.push(() => resolve(inner.lease(batch))));
    },
    async release(batch) {
      this.returns.push(...batch);
      return inner.release(batch);
    },
    answerAll() {
      for (const f of held.splice(0)) f();
    },
  };
}

test('options are checked and named, with stable codes', () => {
  const bad = (options, re, Ctor = TypeError) => assert.throws(() => new Quota(options), (e) => e instanceof Ctor && re.test(e.message) && e.code.startsWith('ERR_TIERGATE_'));
  bad(undefined, /Quota options must be an object/);
  bad({ limits: [bucket()], foo: 1 }, /unknown option "foo"/);
  bad({ limits: 'x' }, /options.limits must be an array/);
  bad({ limits: [bucket({ algorithm: 'leaky' })] }, /limits\[0\].algorithm must be one of 'token-bucket', 'fixed-window', 'sliding-window', got "leaky"/, RangeError);
  bad({ limits: [bucket({ fallback: 'maybe' })] }, /limits\[0\].fallback must be 'open' or 'closed'/, RangeError);
  // An allowance of 0 would be taken natively for 'wait' while the spec says 'provisional'.
  bad({ limits: [bucket({ unfunded: 'provisional', provisional: 0 })] }, /limits\[0\].provisional must be an integer >= 1/, RangeError);
  bad({ limits: [bucket({ limit: 1.5 })] }, /limits\[0\].limit must be an integer from 0 to 4294967295 \(got 1.5\)/, RangeError);
  bad({ limits: [bucket({ burst: undefined })] }, /limits\[0\].burst is required with limit 0/, RangeError);
  bad({ limits: [{ name: 'w', algorithm: 'fixed-window', limit: 10, windowMs: 1000, burst: 5 }] }, /limits\[0\].burst applies to the token-bucket and gcra algorithms only/, RangeError);
  bad({ limits: [{ name: 'w', limit: 0, windowMs: 1000 }] }, /limits\[0\].limit must be an integer from 1/, RangeError);
  bad({ limits: [bucket({ provisional: 3 })] }, /limits\[0\].provisional is the allowance/);
  bad({ limits: [bucket({ burst: NaN })] }, /limits\[0\].burst must be an integer from 1 to 4294967295 \(got NaN\)/, RangeError);
  bad({ limits: [bucket({ limit: -1 })] }, /limits\[0\].limit must be an integer from 0/, RangeError);
  bad({ limits: [bucket({ rate: 1 })] }, /limits\[0\] has an unknown option "rate"/);
  bad({ limits: [bucket({ maxLease: 1.5 })] }, /limits\[0\].maxLease must be an integer/, RangeError);
  bad({ limits: [bucket(), bucket()] }, /limits\[1\].name "api" is a duplicate/, RangeError);
  bad({ limits: [{ name: 'w', algorithm: 'fixed-window', limit: 10, windowMs: Infinity }] }, /limits\[0\].windowMs/, RangeError);
  const q = new Quota({ limits: [bucket()] });
  assert.throws(() => new LeaseDriver(q, {}), /store.lease must be a function/);
  assert.throws(() => new LeaseDriver(q, new MemoryStore(), { storeTimeoutMs: 0 }), /storeTimeoutMs must be a finite number >= 1/);
  assert.throws(() => new LeaseDriver({}, new MemoryStore()), /quota must be a Quota/);
});

test('trySpend checks its arguments (ERR_TIERGATE_INVALID_ARGUMENT)', () => {
  const q = new Quota({ limits: [bucket()] });
  const code = (fn, Ctor, re) => assert.throws(fn, (e) => e instanceof Ctor && e.code === 'ERR_TIERGATE_INVALID_ARGUMENT' && re.test(e.message));
  code(() => q.trySpend(1, 'k'), RangeError, /limit 1 is not a limit id/);
  code(() => q.trySpend('api', 'k'), TypeError, /limit must be a limit id/);
  code(() => q.trySpend(0, 5), TypeError, /key must be a string/);
  code(() => q.trySpend(0, 'x'.repeat(1025)), RangeError, /key is 1025 bytes long/);
  code(() => q.trySpend(0, 'k', 1.5), RangeError, /cost must be an integer >= 0 \(got 1.5\)/);
  code(() => q.trySpend(0, 'k', -1), RangeError, /cost must be an integer/);
  assert.equal(q.trySpend(0, 'k'), QUOTA_CODE.NEED_LEASE);
  assert.equal(q.trySpend(0, 'k'), QUOTA_CODE.AWAITING);
  assert.equal(q.limitId('api'), 0);
  assert.throws(() => q.limitId('nope'), /unknown limit "nope"/);
  const work = q.poll();
  // Both spends waiting on it are asked for in the one request.
  assert.deepEqual(work.requests, [{ id: 1, limit: 0, key: 'k', size: 2, ttlMs: 10_000 }]);
  assert.throws(() => q.grant(0, 'k', 1, { granted: -1, ttlMs: 1, remaining: 0, holders: 1, lease: 1, retryAfterMs: 0 }), /grant: granted must be an integer >= 0/);
  assert.equal(q.grant(0, 'k', 1, { granted: 5, ttlMs: 10_000, remaining: 95, holders: 1, lease: 7, retryAfterMs: 0 }), null);
  assert.deepEqual(q.keyState(0, 'k'), { held: 5, debt: 0, pending: false });
  assert.equal(q.trySpend(0, 'k', 5), QUOTA_CODE.LEASE);
  // A grant for no request in flight comes back to be returned, as late.
  assert.deepEqual(q.grant(0, 'k', 99, { granted: 3, ttlMs: 10_000, remaining: 92, holders: 1, lease: 8, retryAfterMs: 0 }), { limit: 0, key: 'k', lease: 8, tokens: 3, reason: 'late' });
  assert.deepEqual(q.releaseAll(), []);
});

test('500 simultaneous spends on a key of limit 100: exactly 100 admitted, in a few round trips', async () => {
  const d = driver([bucket()]);
  const rs = await Promise.all(Array.from({ length: 500 }, () => d.check(0, 'k')));
  assert.equal(rs.filter((r) => r.allowed).length, 100);
  assert.ok(rs.filter((r) => !r.allowed).every((r) => r.reason === 'EXHAUSTED' && r.retryAfterMs > 0), 'the rest are refused as exhausted');
  const s = d.stats();
  assert.equal(s.decisions.lease, 100);
  assert.equal(s.decisions.exhausted, 400);
  assert.equal(s.fallbackDecisions, 0);
  assert.ok(s.requests < 30, `${s.requests} requests`);
  // Once refused as exhausted, a spend is decided at once, from memory.
  assert.equal(d.spend(0, 'k'), QUOTA_CODE.EXHAUSTED);
  assert.ok(d.result[0] > 0);
  await d.close();
});

test('provisional: a new key is admitted at once from its allowance, and the grant repays it', async () => {
  const store = new MemoryStore();
  const d = driver([bucket({ unfunded: 'provisional', provisional: 2 })], store);
  assert.equal(d.spend(0, 'k'), QUOTA_CODE.PROVISIONAL);
  assert.equal(d.spend(0, 'k'), QUOTA_CODE.PROVISIONAL);
  const third = d.spend(0, 'k');
  assert.equal(typeof third.then, 'function', 'past the allowance, a spend waits');
  assert.equal((await third).code, QUOTA_CODE.LEASE);
  assert.equal(d.stats().repaid, 2);
  await d.close();
});

test('a store that does not answer: no spend waits past storeTimeoutMs (refused WAITED, not fallen back); after storeDownMs open falls back to the share, closed refuses; both counted', async () => {
  const store = hangingStore();
  const d = driver([bucket({ name: 'open', burst: 10 }), bucket({ name: 'closed', fallback: 'closed' })], store, { storeTimeoutMs: 40, storeDownMs: 150 });
  const t0 = process.hrtime.bigint();
  const first = await Promise.all([...Array.from({ length: 20 }, () => d.check(0, 'k')), ...Array.from({ length: 5 }, () => d.check(1, 'k'))]);
  const waitedMs = Number(process.hrtime.bigint() - t0) / 1e6;
  assert.ok(waitedMs < 40 + 1000, `decided within the timeout (plus a loaded machine's slack): ${waitedMs} ms`);
  assert.ok(first.every((r) => r.reason === 'WAITED' && !r.allowed), 'a silent store is slow, not down, until storeDownMs: nothing from the share');
  assert.equal(d.stats().storeUp, true);
  await new Promise((r) => setTimeout(r, 200));
  const s0 = d.stats();
  assert.equal(s0.storeUp, false, 'silent for storeDownMs: down');
  assert.ok(s0.timeouts >= 2);
  const rs = await Promise.all([...Array.from({ length: 20 }, () => d.check(0, 'k')), ...Array.from({ length: 5 }, () => d.check(1, 'k'))]);
  const open = rs.slice(0, 20);
  const closed = rs.slice(20);
  // The safe share: burst 10 over the one holder known (minHolders 1).
  assert.equal(open.filter((r) => r.reason === 'FALLBACK').length, 10);
  assert.ok(open.slice(10).every((r) => r.reason === 'SHARE'));
  assert.ok(closed.every((r) => r.reason === 'STORE_DOWN' && !r.allowed));
  assert.equal(d.stats().fallbackDecisions, 25);
  // Now decided at once, without waiting.
  assert.equal(d.spend(1, 'k'), QUOTA_CODE.STORE_DOWN);
  // The store answers at last: the late grants are applied and their tokens sent back as late.
  store.answerAll();
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(d.stats().lateGrants >= 2);
  assert.ok(store.returns.some((r) => r.reason === 'late' && r.tokens > 0), 'late tokens go back');
  await d.close();
});

test('a store that fails and comes back: fallback while down, leases again after', async () => {
  const inner = new MemoryStore();
  let down = true;
  const store = {
    lease: (b) => (down ? Promise.reject(new Error('ECONNREFUSED')) : inner.lease(b)),
    release: (b) => inner.release(b),
  };
  const d = driver([bucket({ burst: 1000, retryMs: 20, renewalPeriodMs: 100, leadTimeMs: 50, leaseTtlMs: 1000 })], store);
  assert.equal((await d.check(0, 'k')).reason, 'FALLBACK');
  assert.ok(d.stats().storeErrors >= 1);
  down = false;
  const deadline = Date.now() + 5000;
  let r;
  do {
    await new Promise((res) => setTimeout(res, 10));
    r = await d.check(0, 'k');
  } while (r.reason !== 'LEASE' && Date.now() < deadline);
  assert.equal(r.reason, 'LEASE', 'back on leases once the store answers');
  assert.equal(d.stats().storeUp, true);
  await d.close();
});

test('close sends unspent leases back: the store can grant them again', async () => {
  const store = new MemoryStore();
  const limits = [bucket({ burst: 50, initialLease: 40 })];
  const a = driver(limits, store);
  assert.equal((await a.check(0, 'k')).allowed, true);
  assert.ok(a.quota.keyState(0, 'k').held >= 39);
  await a.close();
  const b = driver(limits, store);
  const rs = await Promise.all(Array.from({ length: 60 }, () => b.check(0, 'k')));
  assert.equal(rs.filter((r) => r.allowed).length, 49, 'all but the one spent');
  await b.close();
});

test('MemoryStore: a fixed window ends its leases with the window, to the fraction of a millisecond', async () => {
  let now = 5 * 3_600_000 + 3_599_999.4;
  const store = new MemoryStore({ now: () => now });
  const q = new Quota({ limits: [{ name: 'w', algorithm: 'fixed-window', limit: 10, windowMs: 3_600_000 }] });
  const [g] = await store.lease([{ limit: q.limits[0], key: 'k', size: 4, ttlMs: 10_000, holder: 'a' }]);
  assert.equal(g.granted, 4);
  assert.equal(g.lease, 5, 'named by its window');
  assert.ok(Math.abs(g.ttlMs - 0.6) < 1e-6, `${g.ttlMs}`);
  now += 1;
  const [h] = await store.lease([{ limit: q.limits[0], key: 'k', size: 20, ttlMs: 10_000, holder: 'b' }]);
  assert.deepEqual([h.granted, h.lease, h.holders], [10, 6, 1], 'a new window: the full limit, the old holder gone');
  await store.release([{ limit: q.limits[0], key: 'k', lease: 5, tokens: 4, reason: 'expired', holder: 'a' }]);
  const [z] = await store.lease([{ limit: q.limits[0], key: 'k', size: 1, ttlMs: 10_000, holder: 'b' }]);
  assert.equal(z.granted, 0, 'a return of an older window credits nothing');
  assert.ok(z.retryAfterMs > 0);
});

test('a contended key whose store keeps answering: spends past storeTimeoutMs are refused as WAITED, not fallen back', async () => {
  // A store that answers every request in 20 ms with a single token (its last ones, shared out).
  const store = {
    lease: (batch) => new Promise((r) => setTimeout(() => r(batch.map(() => ({ granted: 1, ttlMs: 10_000, remaining: 3, holders: 4, lease: 1, retryAfterMs: 0 }))), 20)),
    release: async () => {},
  };
  const d = driver([bucket()], store, { storeTimeoutMs: 100 });
  const rs = await Promise.all(Array.from({ length: 30 }, () => d.check(0, 'k')));
  const s = d.stats();
  assert.ok(rs.filter((r) => r.allowed).every((r) => r.reason === 'LEASE'));
  assert.ok(rs.some((r) => r.reason === 'WAITED'), 'some waited out their storeTimeoutMs');
  assert.ok(rs.every((r) => r.allowed || r.reason === 'WAITED'));
  assert.equal(s.fallbackDecisions, 0);
  assert.equal(s.storeUp, true, 'the store answered throughout');
  assert.equal(s.decisions.waited, rs.filter((r) => r.reason === 'WAITED').length);
  await d.close();
});

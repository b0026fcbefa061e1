'use strict';
// The store hung, on each store (Redis, PostgreSQL): the whole server SIGSTOPped mid-load (a frozen
// host: connections stay open, nothing answers), then SIGCONTed. The targets (docs/cluster.md, "When
// the store fails or is slow"): every spend is answered within storeTimeoutMs (plus how late this
// process's timers ran); once a request has gone unanswered for storeDownMs the store is down: an
// open limit admits from its fallback share, a closed one refuses; after SIGCONT the process is back
// on leases and exact. Loads are bounded in count and time.
const test = require('node:test');
const assert = require('node:assert/strict');
const { STORES } = require('../helpers/cluster-stores');
const { cluster } = require('../..');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const STORE_TIMEOUT_MS = 50;
const STORE_DOWN_MS = 300;
const OUTAGE_MS = 1500;
const HOUR = 3_600_000;

for (const kind of STORES) test(`${kind.name} SIGSTOPped mid-load: answered within storeTimeoutMs, open limits on the fallback share, closed ones refused; exact again after SIGCONT`, { timeout: 60_000 }, async (t) => {
  if (!kind.need(t)) return;
  const server = await kind.start();
  const limits = [
    { name: 'open', algorithm: 'fixed-window', limit: 1000, windowMs: HOUR, fallback: 'open', retryMs: 100 },
    { name: 'closed', algorithm: 'fixed-window', limit: 1000, windowMs: HOUR, fallback: 'closed', retryMs: 100 },
    { name: 'after', algorithm: 'fixed-window', limit: 50, windowMs: HOUR, fallback: 'closed', retryMs: 100 },
  ];
  const c = cluster({ ...server.option, limits, storeTimeoutMs: STORE_TIMEOUT_MS, storeDownMs: STORE_DOWN_MS, bans: false });
  let frozen = false;
  t.after(async () => {
    if (frozen) server.thaw();
    await c.close();
    await server.stop();
  });
  await c.ready;
  for (const l of ['open', 'closed']) assert.equal((await c.check(l, 'warm')).reason, 'LEASE');

  // How late this process's timers ran at worst: a spend's wait may exceed storeTimeoutMs by that.
  let latenessMs = 0;
  let tickAt = performance.now();
  const ticker = setInterval(() => {
    latenessMs = Math.max(latenessMs, performance.now() - tickAt - 10);
    tickAt = performance.now();
  }, 10);
  server.freeze();
  frozen = true;
  const t0 = performance.now();
  const decided = { open: [], closed: [] };
  const pending = [];
  // A new key every 20 ms on each limit (each needs a lease from the store), at most 200 in all.
  for (let i = 0; performance.now() - t0 < OUTAGE_MS && i < 100; i++) {
    for (const l of ['open', 'closed']) {
      const at = performance.now() - t0;
      pending.push(c.check(l, `new-${i}`).then((d) => decided[l].push({ at, reason: d.reason, allowed: d.allowed })));
    }
    await sleep(20);
  }
  // Each spend settles by itself; this bound only ends a test whose spends would hang.
  let hang;
  const hung = new Promise((resolve) => {
    hang = setTimeout(resolve, 5000, 'hung');
  });
  const settled = await Promise.race([Promise.all(pending), hung]);
  clearTimeout(hang);
  clearInterval(ticker);
  assert.notEqual(settled, 'hung', 'every spend was answered while the store was stopped');
  const during = c.stats();
  t.diagnostic(`open: ${JSON.stringify(count(decided.open))}; closed: ${JSON.stringify(count(decided.closed))}; longest wait ${during.maxWaitMs.toFixed(0)} ms (timers up to ${latenessMs.toFixed(0)} ms late)`);
  assert.ok(during.maxWaitMs <= STORE_TIMEOUT_MS + 100 + latenessMs, `longest wait ${during.maxWaitMs} ms`);
  assert.equal(during.storeUp, false, 'the stopped store is taken for down');
  assert.ok(during.timeouts > 0, 'requests unanswered for storeDownMs are counted');
  // Down: the open limit admits new keys from its share, the closed one refuses them.
  assert.ok(decided.open.some((d) => d.allowed && (d.reason === 'FALLBACK' || d.reason === 'SHARE')), 'the open limit falls back');
  assert.ok(decided.closed.some((d) => d.reason === 'STORE_DOWN'), 'the closed limit refuses as STORE_DOWN');
  assert.equal(decided.closed.filter((d) => d.allowed).length, 0, 'a closed limit admits no key without a lease');
  assert.ok(during.fallbackDecisions > 0);

  server.thaw();
  frozen = false;
  // Back on leases: each round asks the store again (a key probes it every retryMs).
  const thawed = performance.now();
  let up = false;
  for (let i = 0; !up && performance.now() - thawed < 10_000; i++) {
    await c.check('closed', `probe-${i}`);
    await sleep(50);
    up = c.stats().storeUp;
  }
  assert.ok(up, 'back on leases after SIGCONT');
  const before = c.stats().waitTimeouts;
  const rs = await Promise.all(Array.from({ length: 200 }, () => c.check('after', 'k')));
  const admitted = rs.filter((d) => d.allowed).length;
  assert.ok(admitted <= 50, `never above the limit: ${admitted}`);
  // A spend refused WAITED (a slow answer on a loaded machine) leaves its tokens leased: short, never over.
  if (c.stats().waitTimeouts === before) assert.equal(admitted, 50, 'exact again');
  else t.diagnostic(`a store answer came after storeTimeoutMs: ${admitted} of 50`);
});

function count(ds) {
  const out = {};
  for (const d of ds) out[d.reason] = (out[d.reason] || 0) + 1;
  return out;
}

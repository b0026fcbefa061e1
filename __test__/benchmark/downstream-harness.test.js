'use strict';
// bench:downstream's harness (benchmark/lib): the slow HTTP downstream serves at most K at once and
// queues the rest; the hand-sized bulkhead bounds concurrency and refuses beyond its queue; the retry
// generator retries at once or after Retry-After; the figures' recovery and the K-server ideal.
// Real HTTP servers on 127.0.0.1; every load is small and bounded.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { startSlowDownstream } = require('../../benchmark/lib/slow-downstream');
const { bulkhead } = require('../../benchmark/lib/bulkhead');
const { retryLoad, recoveryMs, successShares } = require('../../benchmark/lib/retry-load');
const { idealTierLatency } = require('../../benchmark/lib/ideal');

const get = (port, p = '/') =>
  new Promise((resolve, reject) => {
    const t0 = Date.now();
    http.get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c) => (body += c)).on('end', () => resolve({ status: res.statusCode, body, ms: Date.now() - t0 }));
    }).on('error', reject);
  });

test('the slow downstream serves at most K at once and queues the rest in order', async (t) => {
  const ds = await startSlowDownstream({ serviceMs: 40, concurrency: 2 });
  t.after(() => ds.close());
  const answers = await Promise.all(Array.from({ length: 6 }, () => get(ds.port)));
  assert.ok(answers.every((a) => a.status === 200 && a.body === 'downstream ok'));
  const st = ds.stats();
  assert.equal(st.maxInService, 2);
  assert.equal(st.served, 6);
  assert.equal(st.queued, 0);
  // 6 requests, 2 at a time, 40 ms each: the last waits for two rounds before its own.
  const slowest = Math.max(...answers.map((a) => a.ms));
  assert.ok(slowest >= 110, `slowest ${slowest} ms`);
  assert.throws(() => startSlowDownstream({ serviceMs: NaN }), RangeError);
  assert.throws(() => startSlowDownstream({ concurrency: 0 }), RangeError);
});

test('the bulkhead runs at most `limit` at once, queues `maxQueue` FIFO and refuses the rest', async () => {
  const bh = bulkhead({ limit: 2, maxQueue: 2 });
  let running = 0;
  let most = 0;
  const order = [];
  const job = (i) => async () => {
    running++;
    most = Math.max(most, running);
    order.push(i);
    await new Promise((r) => setTimeout(r, 20));
    running--;
    return i;
  };
  const settled = await Promise.allSettled([0, 1, 2, 3, 4, 5].map((i) => bh.run(job(i))));
  assert.equal(most, 2);
  assert.deepEqual(order, [0, 1, 2, 3]);
  assert.deepEqual(settled.slice(0, 4).map((s) => s.value), [0, 1, 2, 3]);
  for (const s of settled.slice(4)) assert.equal(s.reason.code, 'BULKHEAD_FULL');
  assert.deepEqual(bh.stats(), { limit: 2, active: 0, queued: 0, maxActive: 2 });
  // A failing call frees its slot too.
  await assert.rejects(bh.run(async () => { throw new Error('boom'); }), /boom/);
  assert.equal(bh.stats().active, 0);
  assert.throws(() => bulkhead({ limit: 0 }), RangeError);
  assert.throws(() => bulkhead({ limit: 1, maxQueue: -1 }), RangeError);
});

test('retryLoad retries a 503 at once, or after its Retry-After, and counts logical successes', async (t) => {
  // Attempts alternate: every odd one is refused with Retry-After: 1, every even one answered.
  let n = 0;
  const server = http.createServer((req, res) => {
    res.writeHead(++n % 2 === 1 ? 503 : 200, { 'retry-after': '1' });
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const agent = new http.Agent({ keepAlive: true });
  t.after(() => agent.destroy());
  const port = server.address().port;
  const mix = [{ tier: 'critical', weight: 1 }];
  // Two requests 100 ms apart retrying at once: each refused, then answered straight away.
  const atOnce = await retryLoad({ port, agent, mix, populations: ['at-once'], phases: [{ rate: 10, ms: 200 }], bucketMs: 100 });
  assert.deepEqual(atOnce.totals['at-once'], { logical: 2, ok: 2, attempts: 4, gaveUp: 0 });
  const okBy = (r, from, to) => r.timeline.filter((row) => row.t >= from && row.t < to).reduce((a, row) => a + (row.goodput * r.bucketMs) / 1000, 0);
  assert.equal(okBy(atOnce, 0, 0.3), 2);
  assert.equal(recoveryMs(atOnce, 0), 0);
  // One request honouring Retry-After: refused, answered only after the 1 s it was told to wait.
  const polite = await retryLoad({ port, agent, mix, populations: ['retry-after'], phases: [{ rate: 10, ms: 100 }], bucketMs: 100 });
  assert.deepEqual(polite.totals['retry-after'], { logical: 1, ok: 1, attempts: 2, gaveUp: 0 });
  assert.equal(okBy(polite, 0, 1), 0);
  assert.equal(okBy(polite, 1, 1.3), 1);
  assert.deepEqual(successShares(polite, 0).map((x) => x.share), [1]);
  assert.throws(() => retryLoad({ port: 1, phases: [{ rate: NaN, ms: 100 }], mix: [{ tier: 'a', weight: 1 }] }), RangeError);
});

test('recoveryMs: the first bucket from which every later one succeeds, or null', () => {
  const row = (t, due, ok) => ({ t, due: { 'at-once': due }, ok: { 'at-once': ok }, attempts: due, goodput: 0 });
  const r = { totalMs: 2000, bucketMs: 500, populations: ['at-once'], timeline: [row(0, 10, 10), row(0.5, 10, 0), row(1, 10, 10), row(1.5, 10, 10)] };
  assert.equal(recoveryMs(r, 500), 500);
  r.timeline[3] = row(1.5, 10, 9); // 90%: below 95%
  assert.equal(recoveryMs(r, 500), null);
});

test('the ideal scheduler on K servers: unloaded, a request waits for nobody', () => {
  const mix = [{ tier: 'critical', weight: 0.1 }, { tier: 'background', weight: 0.9 }];
  const idle = idealTierLatency({ rate: 50, durationMs: 2000, serviceMs: 20, mix, servers: 4 });
  assert.equal(idle.p99, 20);
  // At 3x four servers' capacity the favoured tier waits at most one service time for a free server.
  const loaded = idealTierLatency({ rate: 600, durationMs: 2000, serviceMs: 20, mix, servers: 4 });
  assert.ok(loaded.p99 > 20 && loaded.p99 <= 40, `p99 ${loaded.p99}`);
  // One server: the same as before K servers existed.
  const one = idealTierLatency({ rate: 900, durationMs: 6000, serviceMs: 1000 / 300, mix: [{ tier: 'critical', weight: 0.1 }, { tier: 'standard', weight: 0.3 }, { tier: 'background', weight: 0.6 }] });
  assert.equal(one.p99.toFixed(3), '12.222');
});

'use strict';
// POST /api/v1/admin/clients/:clientKey/refund against real `tiergate serve` processes, on the
// embedded store and on a PostgreSQL of the test's own (two instances): units given back to the
// client's count for every algorithm, never beyond its limit, exact while checks run at once;
// admin auth, bad bodies and unknown clients refused as the other admin routes refuse them.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { TOKEN, tmpdir, startService, startPostgres, pgMissing, request, admin, check } = require('./helpers');

const POLICIES = [
  { clientKey: 'r-window', algorithm: 'sliding_window', maxRequests: 10, windowSeconds: 600 },
  { clientKey: 'r-fixed', algorithm: 'fixed_window', maxRequests: 10, windowSeconds: 3600 },
  { clientKey: 'r-counter', algorithm: 'sliding_counter', maxRequests: 10, windowSeconds: 3600 },
  { clientKey: 'r-bucket', algorithm: 'token_bucket', requestsPerSecond: 0.0001, burstSize: 10 },
  { clientKey: 'r-gcra', algorithm: 'gcra', requestsPerSecond: 0.0001, burstSize: 10 },
];

const refund = (url, key, body, token = TOKEN) => request(url, 'POST', `/api/v1/admin/clients/${key}/refund`, { body, token });
const statuses = (rs) => rs.reduce((a, r) => ({ ...a, [r.status]: (a[r.status] || 0) + 1 }), {});

async function suite(t, urls) {
  const [a, b] = [urls[0], urls[urls.length - 1]];
  for (const p of POLICIES) {
    await t.test(`${p.algorithm}: units given back, never beyond the limit`, async () => {
      const created = await admin(a, 'POST', '/api/v1/admin/clients', p);
      assert.equal(created.status, 201, JSON.stringify(created.body));
      // 10 of 30 checks at once (across the instances) pass.
      const first = await Promise.all(Array.from({ length: 30 }, (_, i) => check(urls[i % urls.length], p.clientKey)));
      assert.deepEqual(statuses(first), { 200: 10, 429: 20 });

      const r = await refund(b, p.clientKey, { units: 4 });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.clientKey, p.clientKey);
      assert.equal(r.body.refunded, 4);
      assert.equal(r.body.currentState.remaining, 4, JSON.stringify(r.body));
      // Exactly the refunded units pass, however many ask at once.
      const second = await Promise.all(Array.from({ length: 30 }, (_, i) => check(urls[i % urls.length], p.clientKey)));
      assert.deepEqual(statuses(second), { 200: 4, 429: 26 });

      // More than was counted: what was counted comes back, no more.
      const all = await refund(a, p.clientKey, { units: 1000 });
      assert.equal(all.body.refunded, 10);
      assert.equal(all.body.currentState.remaining, 10);
      const none = await refund(a, p.clientKey, {});
      assert.equal(none.status, 200);
      assert.equal(none.body.refunded, 0, 'a full allowance takes nothing back');
      const third = await Promise.all(Array.from({ length: 30 }, (_, i) => check(urls[i % urls.length], p.clientKey)));
      assert.deepEqual(statuses(third), { 200: 10, 429: 20 });
      const activity = await admin(b, 'GET', `/api/v1/admin/clients/${p.clientKey}/activity`);
      assert.equal(activity.body.currentState.remaining, 0);
    });
  }

  await t.test('auth, bad bodies, unknown clients', async () => {
    assert.equal((await refund(a, 'r-window', { units: 1 }, null)).status, 401);
    assert.equal((await refund(a, 'r-window', { units: 1 }, 'wrong-token-0123456789')).status, 401);
    const missing = await refund(a, 'nobody', { units: 1 });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error, 'CLIENT_NOT_FOUND');
    for (const body of [{ units: 0 }, { units: -1 }, { units: 1.5 }, { units: '3' }, { units: null }, { units: 1e300 }, { units: 1, cost: 1 }, [1], 5]) {
      const r = await refund(a, 'r-window', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.error, 'VALIDATION_ERROR', JSON.stringify(r.body));
    }
    const wrongMethod = await request(a, 'GET', '/api/v1/admin/clients/r-window/refund', { token: TOKEN });
    assert.equal(wrongMethod.status, 405);
  });
}

test('refund on the embedded store', async (t) => {
  const dir = tmpdir('tiergate-svc-refund-');
  const svc = await startService({ flags: { data: dir } }).ready;
  t.after(async () => {
    await svc.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await suite(t, [svc.url]);
});

test('refund on PostgreSQL, two instances', { skip: pgMissing() }, async (t) => {
  const pg = await startPostgres();
  const services = [];
  t.after(async () => {
    await Promise.all(services.map((s) => s.stop()));
    await pg.stop();
  });
  // One after the other: the first applies the migrations.
  services.push(await startService({ flags: { database: pg.url } }).ready);
  services.push(await startService({ flags: { database: pg.url } }).ready);
  await suite(t, services.map((s) => s.url));
});

'use strict';
// The decision service's HTTP contract against a real `tiergate serve` process on the embedded store:
// exact decisions under concurrency, headers, CRUD, bans, bad input of every kind, admin auth, health.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { TOKEN, tmpdir, startService, request, admin, check } = require('./helpers');

const dir = tmpdir('tiergate-svc-');
let svc;
let url;
test.before(async () => {
  svc = await startService({ flags: { data: dir } }).ready;
  url = svc.url;
});
test.after(async () => {
  if (svc) await svc.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const window = (clientKey, maxRequests, windowSeconds = 600) => ({ clientKey, algorithm: 'sliding_window', maxRequests, windowSeconds });
const bucket = (clientKey, burstSize, requestsPerSecond = 0.001) => ({ clientKey, algorithm: 'token_bucket', requestsPerSecond, burstSize });

async function create(policy) {
  const res = await admin(url, 'POST', '/api/v1/admin/clients', policy);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.client;
}

function tally(responses) {
  const out = { 200: 0, 429: 0, other: [] };
  for (const r of responses) {
    if (r.status === 200 || r.status === 429) out[r.status]++;
    else out.other.push(r.status);
  }
  return out;
}

test('500 simultaneous checks on a sliding window of 100: exactly 100 allowed, 400 denied', async () => {
  await create(window('burst-window', 100));
  const res = await Promise.all(Array.from({ length: 500 }, () => check(url, 'burst-window')));
  const t = tally(res);
  assert.deepEqual([t[200], t[429], t.other], [100, 400, []]);
  for (const r of res.filter((x) => x.status === 429)) {
    assert.equal(r.body.allowed, false);
    assert.equal(r.body.message, 'Rate limit exceeded');
    assert.ok(Number(r.headers['retry-after']) >= 1);
  }
  const remaining = res.filter((x) => x.status === 200).map((x) => x.body.remaining).sort((a, b) => a - b);
  assert.deepEqual(remaining, Array.from({ length: 100 }, (_, i) => i), 'each allowed check saw its own remaining');
});

test('50 simultaneous checks on a token bucket of burst 1: exactly 1 allowed', async () => {
  await create(bucket('burst-bucket', 1));
  const t = tally(await Promise.all(Array.from({ length: 50 }, () => check(url, 'burst-bucket'))));
  assert.deepEqual([t[200], t[429], t.other], [1, 49, []]);
});

test('the abuse defense\'s algorithms as policies: 300 simultaneous checks on a limit of 100 allow exactly 100 each', async () => {
  // A day's window: a burst of a few hundred milliseconds does not straddle a window edge.
  const policies = [
    { clientKey: 'burst-fixed', algorithm: 'fixed_window', maxRequests: 100, windowSeconds: 86_400 },
    { clientKey: 'burst-counter', algorithm: 'sliding_counter', maxRequests: 100, windowSeconds: 86_400 },
    { clientKey: 'burst-gcra', algorithm: 'gcra', requestsPerSecond: 0.001, burstSize: 100 },
  ];
  for (const p of policies) {
    assert.deepEqual(await create(p), { ...(await admin(url, 'GET', `/api/v1/admin/clients/${p.clientKey}`)).body.client });
    const res = await Promise.all(Array.from({ length: 300 }, () => check(url, p.clientKey)));
    const t = tally(res);
    assert.deepEqual([t[200], t[429], t.other], [100, 200, []], p.algorithm);
    const ok = res.find((r) => r.status === 200);
    assert.equal(ok.body.algorithm, p.algorithm);
    assert.equal(ok.headers['x-ratelimit-limit'], '100');
    const no = res.find((r) => r.status === 429);
    assert.ok(Number(no.headers['retry-after']) >= 1, p.algorithm);
    const activity = await admin(url, 'GET', `/api/v1/admin/clients/${p.clientKey}/activity`);
    assert.equal(activity.body.currentState.remaining, 0, JSON.stringify(activity.body.currentState));
  }
  const bad = await admin(url, 'POST', '/api/v1/admin/clients', { clientKey: 'bad-gcra', algorithm: 'gcra', maxRequests: 5, windowSeconds: 1 });
  assert.deepEqual([bad.status, bad.body.error], [400, 'VALIDATION_ERROR'], 'a rate algorithm takes requestsPerSecond and burstSize');
});

test('a check answers with the contract fields and headers', async () => {
  await create(window('headers', 3, 60));
  const before = Math.floor(Date.now() / 1000);
  const ok = await check(url, 'headers', 2);
  assert.equal(ok.status, 200);
  assert.deepEqual(Object.keys(ok.body).sort(), ['algorithm', 'allowed', 'clientKey', 'limit', 'remaining', 'resetAt']);
  assert.deepEqual([ok.body.allowed, ok.body.clientKey, ok.body.algorithm, ok.body.limit, ok.body.remaining], [true, 'headers', 'sliding_window', 3, 1]);
  assert.match(ok.body.resetAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(ok.headers['x-ratelimit-limit'], '3');
  assert.equal(ok.headers['x-ratelimit-remaining'], '1');
  const reset = Number(ok.headers['x-ratelimit-reset']);
  assert.ok(reset >= before + 60 && reset <= before + 62, `reset ${reset}`);
  assert.equal(reset, Math.ceil(Date.parse(ok.body.resetAt) / 1000));
  assert.equal(ok.headers['ratelimit-policy'], '"default";q=3;w=60');
  assert.match(ok.headers.ratelimit, /^"default";r=1;t=(59|60)$/);
  const denied = await check(url, 'headers', 2);
  assert.equal(denied.status, 429);
  assert.equal(denied.body.remaining, 1, 'a denied request takes no slot');
  const retry = Number(denied.headers['retry-after']);
  assert.ok(retry >= 59 && retry <= 60, `Retry-After ${retry}: when the oldest request leaves the window`);
  assert.equal((await check(url, 'headers', 1)).status, 200, 'the slot the denial did not take');
});

test('a token bucket refills fractionally; Retry-After is the time to the next whole token', async () => {
  await create(bucket('refill', 2, 0.5));
  assert.equal((await check(url, 'refill', 2)).status, 200);
  const denied = await check(url, 'refill');
  assert.equal(denied.status, 429);
  assert.equal(denied.headers['retry-after'], '2');
  const reset = Date.parse(denied.body.resetAt) - Date.now();
  assert.ok(reset > 3000 && reset <= 4000, `full in ${reset} ms`);
});

test('unknown client: 404 CLIENT_NOT_FOUND; every response carries X-Request-ID (a safe one is kept)', async () => {
  const res = await request(url, 'POST', '/api/v1/rate-limit/check', { body: { clientKey: 'nobody' }, headers: { 'x-request-id': 'caller-id.1' } });
  assert.equal(res.status, 404);
  assert.deepEqual(res.body, { error: 'CLIENT_NOT_FOUND', message: 'no client with clientKey "nobody"', requestId: 'caller-id.1' });
  assert.equal(res.headers['x-request-id'], 'caller-id.1');
  const unsafe = await request(url, 'GET', '/health/live', { headers: { 'x-request-id': 'a b<script>' } });
  assert.match(unsafe.headers['x-request-id'], /^[0-9a-f-]{36}$/);
});

test('admin CRUD: create, duplicate, get, list, replace (resets state), delete (removes state)', async () => {
  const created = await create(window('crud', 2));
  assert.equal(created.clientKey, 'crud');
  const dup = await admin(url, 'POST', '/api/v1/admin/clients', window('crud', 5));
  assert.equal(dup.status, 409);
  assert.equal(dup.body.error, 'DUPLICATE_CLIENT_KEY');
  assert.equal((await admin(url, 'GET', '/api/v1/admin/clients/crud')).body.client.maxRequests, 2);
  await check(url, 'crud');
  await check(url, 'crud');
  assert.equal((await check(url, 'crud')).status, 429);
  const list = (await admin(url, 'GET', '/api/v1/admin/clients')).body.clients;
  const row = list.find((c) => c.clientKey === 'crud');
  assert.equal(row.totalRequests, 3);
  assert.ok(Date.parse(row.lastActivityAt) > 0);
  const put = await admin(url, 'PUT', '/api/v1/admin/clients/crud', bucket('crud', 1));
  assert.equal(put.status, 200);
  assert.equal(put.body.client.algorithm, 'token_bucket');
  assert.equal((await check(url, 'crud')).status, 200, 'the replaced policy starts full');
  const activity = await admin(url, 'GET', '/api/v1/admin/clients/crud/activity');
  assert.equal(activity.status, 200);
  assert.deepEqual(activity.body.summary, { totalRequests: 4, allowedRequests: 3, deniedRequests: 1 });
  assert.equal(activity.body.currentState.algorithm, 'token_bucket');
  assert.equal(activity.body.currentState.remaining, 0);
  assert.equal(activity.body.recentActivity.length, 4);
  assert.equal((await admin(url, 'DELETE', '/api/v1/admin/clients/crud')).status, 204);
  assert.equal((await check(url, 'crud')).status, 404);
  assert.equal((await admin(url, 'DELETE', '/api/v1/admin/clients/crud')).status, 404);
  await create(window('crud', 1));
  assert.deepEqual((await admin(url, 'GET', '/api/v1/admin/clients/crud/activity')).body.summary, { totalRequests: 0, allowedRequests: 0, deniedRequests: 0 }, 'no state or history came back');
});

test('overview and analytics', async () => {
  await create(window('stats', 1));
  await check(url, 'stats');
  await check(url, 'stats');
  const o = await admin(url, 'GET', '/api/v1/admin/overview');
  assert.equal(o.status, 200);
  assert.ok(o.body.totalClients >= 1);
  assert.ok(o.body.totalAllowed >= 1 && o.body.totalDenied >= 1);
  assert.equal(o.body.recentActivity.length, 20);
  assert.equal(o.body.recentActivity[0].clientKey, 'stats');
  assert.equal(o.body.recentActivity[0].allowed, false, 'newest first');
  for (const range of ['1m', '5m', '15m', '1h', '24h']) {
    const a = await admin(url, 'GET', `/api/v1/admin/analytics?range=${range}`);
    assert.equal(a.status, 200);
    assert.equal(a.body.range, range);
    assert.equal(a.body.dataSource, 'aggregated');
    const sum = a.body.points.reduce((n, p) => n + p.incoming, 0);
    assert.ok(sum >= 2, `${range}: ${sum}`);
    for (const p of a.body.points) assert.equal(p.incoming, p.allowed + p.denied);
  }
  const bad = await admin(url, 'GET', '/api/v1/admin/analytics?range=2h');
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error, 'VALIDATION_ERROR');
});

test('bans: a banned key gets 403 BANNED (Retry-After for a temporary ban), listed, lifted', async () => {
  await create(window('banned', 100));
  const ban = await admin(url, 'POST', '/api/v1/admin/bans', { clientKey: 'banned', durationSeconds: 120, reason: 'scraping' });
  assert.equal(ban.status, 201);
  assert.equal(ban.body.ban.reason, 'scraping');
  const res = await check(url, 'banned');
  assert.equal(res.status, 403);
  assert.equal(res.body.allowed, false);
  assert.equal(res.body.error, 'BANNED');
  assert.equal(res.body.reason, 'scraping');
  const retry = Number(res.headers['retry-after']);
  assert.ok(retry >= 119 && retry <= 120, `Retry-After ${retry}`);
  assert.ok((await admin(url, 'GET', '/api/v1/admin/bans')).body.bans.some((b) => b.clientKey === 'banned'));
  await admin(url, 'POST', '/api/v1/admin/bans', { clientKey: 'banned', reason: 'permanent' });
  const forever = await check(url, 'banned');
  assert.equal(forever.status, 403);
  assert.equal(forever.headers['retry-after'], undefined);
  assert.equal(forever.body.bannedUntil, null);
  assert.equal((await admin(url, 'DELETE', '/api/v1/admin/bans/banned')).status, 204);
  assert.equal((await admin(url, 'DELETE', '/api/v1/admin/bans/banned')).status, 404);
  assert.equal((await check(url, 'banned')).status, 200);
  assert.equal((await admin(url, 'POST', '/api/v1/admin/bans', { clientKey: 'x', durationSeconds: -5 })).status, 400);
});

test('bad input of every kind: a clear 4xx with a code, and nothing lost', async () => {
  await create(window('guarded', 5));
  await check(url, 'guarded');
  const post = (body, opts = {}) => request(url, 'POST', '/api/v1/admin/clients', { token: TOKEN, body, ...opts });
  const cases = [
    ['negative limit', window('n1', -1), 400, /maxRequests/],
    ['zero limit', window('n2', 0), 400, /maxRequests/],
    ['non-integer limit', window('n3', 2.5), 400, /maxRequests must be an integer/],
    ['non-integer window', { ...window('n4', 5), windowSeconds: 1.5 }, 400, /windowSeconds/],
    ['negative rate', bucket('n5', 5, -1), 400, /requestsPerSecond/],
    ['huge number', window('n6', 1e300), 400, /maxRequests must be an integer from 1 to 100000/],
    ['huge burst', bucket('n7', 2 ** 53), 400, /burstSize/],
    ['string number', { ...window('n8', 5), maxRequests: '5' }, 400, /maxRequests must be a number, got string/],
    ['null number', { ...window('n9', 5), maxRequests: null }, 400, /got null/],
    ['unknown algorithm', { clientKey: 'n10', algorithm: 'leaky_bucket', maxRequests: 1, windowSeconds: 1 }, 400, /algorithm must be one of/],
    ['no algorithm', { clientKey: 'n11', maxRequests: 1, windowSeconds: 1 }, 400, /algorithm is required/],
    ['mixed algorithm fields', { ...window('n12', 5), burstSize: 3 }, 400, /unknown field "burstSize"/],
    ['missing field', { clientKey: 'n13', algorithm: 'token_bucket', burstSize: 3 }, 400, /requestsPerSecond is required/],
    ['bad clientKey', window('-bad key', 5), 400, /clientKey must match/],
    ['long clientKey', window('k'.repeat(129), 5), 400, /clientKey must match/],
    ['clientKey a number', { ...window('x', 5), clientKey: 7 }, 400, /clientKey must be a string, got number/],
    ['an array body', [1, 2], 400, /the body must be a JSON object, got array/],
    ['a string body', 'text', 400, /got string/],
  ];
  for (const [what, body, status, message] of cases) {
    const res = await post(body);
    assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error, 'VALIDATION_ERROR', what);
    assert.match(res.body.message, message, what);
    assert.ok(res.body.requestId, what);
  }
  const rawCases = [
    ['invalid JSON', '{"clientKey": "x",', 'application/json', 400, 'MALFORMED_JSON'],
    ['empty body', '', 'application/json', 400, 'VALIDATION_ERROR'],
    ['1 MB body', JSON.stringify({ clientKey: 'big', pad: 'x'.repeat(1024 * 1024) }), 'application/json', 413, 'PAYLOAD_TOO_LARGE'],
    ['not JSON', 'clientKey=x', 'application/x-www-form-urlencoded', 415, 'UNSUPPORTED_MEDIA_TYPE'],
  ];
  for (const [what, raw, type, status, code] of rawCases) {
    for (const p of ['/api/v1/admin/clients', '/api/v1/rate-limit/check']) {
      const res = await request(url, 'POST', p, { raw, token: TOKEN, headers: { 'content-type': type } });
      assert.equal(res.status, status, `${what} on ${p}`);
      assert.equal(res.body.error, code, `${what} on ${p}`);
    }
  }
  const checks = [
    [{ clientKey: 'guarded', cost: 0 }, /cost/],
    [{ clientKey: 'guarded', cost: -1 }, /cost/],
    [{ clientKey: 'guarded', cost: 1.5 }, /cost must be an integer/],
    [{ clientKey: 'guarded', cost: '1' }, /cost must be a number/],
    [{ clientKey: 'guarded', extra: 1 }, /unknown field "extra"/],
    [{}, /clientKey must be a string, got undefined/],
  ];
  for (const [body, message] of checks) {
    const res = await request(url, 'POST', '/api/v1/rate-limit/check', { body });
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.match(res.body.message, message);
  }
  const put = await admin(url, 'PUT', '/api/v1/admin/clients/guarded', { ...window('other', 5) });
  assert.equal(put.status, 400);
  // Nothing lost: none of the bad bodies made a client, and the good one kept its policy and state.
  const keys = (await admin(url, 'GET', '/api/v1/admin/clients')).body.clients.map((c) => c.clientKey);
  assert.deepEqual(keys.filter((k) => /^n\d+$|^big$|^x$/.test(k)), []);
  const res = await check(url, 'guarded');
  assert.equal(res.status, 200);
  assert.equal(res.body.remaining, 3, 'the bad checks took nothing');
  // No store or stack text reaches a caller.
  for (const r of [await post(window('n1', -1))]) assert.doesNotMatch(JSON.stringify(r.body), /sqlite|SQL|at .*\.js/i);
});

test('the admin API refuses requests without the token, or with a wrong one', async () => {
  const endpoints = [['GET', '/api/v1/admin/overview'], ['GET', '/api/v1/admin/clients'], ['POST', '/api/v1/admin/clients'], ['DELETE', '/api/v1/admin/clients/headers'], ['GET', '/api/v1/admin/bans']];
  for (const [i, [method, p]] of endpoints.entries()) {
    const none = await request(url, method, p, { body: method === 'POST' ? window('sneaky', 1) : undefined });
    assert.equal(none.status, 401, `${method} ${p}`);
    assert.equal(none.body.error, 'UNAUTHORIZED');
    assert.match(none.headers['www-authenticate'], /^Bearer/);
    // Four wrong tokens: a fifth from this address would hold it off (hardening.test.js).
    if (i === endpoints.length - 1) continue;
    const wrong = await request(url, method, p, { token: `${TOKEN}x` });
    assert.equal(wrong.status, 401);
  }
  assert.equal((await admin(url, 'GET', '/api/v1/admin/clients/sneaky')).status, 404, 'nothing was created');
  assert.equal((await admin(url, 'GET', '/api/v1/admin/clients/headers')).status, 200, 'nothing was deleted');
});

test('health, metrics, OpenAPI, unknown routes and methods', async () => {
  assert.equal((await request(url, 'GET', '/health/live')).body.status, 'ok');
  const readyRes = await request(url, 'GET', '/health/ready');
  assert.equal(readyRes.status, 200);
  assert.equal(readyRes.body.store.type, 'sqlite');
  assert.equal(typeof readyRes.body.store.latencyMs, 'number');
  assert.equal((await request(url, 'GET', '/health')).status, 200);
  const m = await request(url, 'GET', '/metrics');
  assert.match(m.headers['content-type'], /^text\/plain/);
  assert.match(m.body, /^tiergate_service_decisions_total\{result="allowed"\} \d+$/m);
  assert.match(m.body, /^# TYPE tiergate_service_http_responses_total counter$/m);
  const doc = (await request(url, 'GET', '/api/v1/openapi.json')).body;
  assert.equal(doc.openapi, '3.1.0');
  assert.ok(doc.paths['/api/v1/rate-limit/check'].post);
  assert.equal(doc.components.schemas.WindowPolicy.properties.maxRequests.maximum, 100000);
  const nf = await request(url, 'GET', '/nope');
  assert.deepEqual([nf.status, nf.body.error], [404, 'NOT_FOUND']);
  const na = await request(url, 'GET', '/api/v1/rate-limit/check');
  assert.deepEqual([na.status, na.body.error, na.headers.allow], [405, 'METHOD_NOT_ALLOWED', 'POST']);
});

'use strict';
// The decision service against callers that are not its clients, on real `tiergate serve` processes:
// a web page of another origin spending a quota (bodies not declared as JSON), a cost no policy can
// admit, slow rates (1 per hour, 1 per day), a client that sends its headers slowly, a flood of
// connections, and an admin token that is weak or being guessed.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const { randomBytes } = require('node:crypto');
const { TOKEN, tmpdir, startService, request, admin, check } = require('./helpers');
const config = require('../../lib/service/config');
const { AuthFailures } = require('../../lib/service/auth-failures');

const dirs = [];
const running = [];
async function start(flags = {}, opts = {}) {
  const data = tmpdir('tiergate-hard-');
  dirs.push(data);
  const svc = await startService({ ...opts, flags: { data, ...flags } }).ready;
  running.push(svc);
  return svc;
}
test.after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CHECK = '/api/v1/rate-limit/check';
const remainingOf = async (url, key) => {
  const r = await check(url, key);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.remaining;
};

test('the check refuses a body not declared as JSON (what a page of another origin can send), and spends nothing', async () => {
  const { url } = await start();
  assert.equal((await admin(url, 'POST', '/api/v1/admin/clients', { clientKey: 'victim', algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 3600 })).status, 201);
  const body = JSON.stringify({ clientKey: 'victim', cost: 60 });
  const boundary = 'tiergate-boundary';
  const multipart = `--${boundary}\r\nContent-Disposition: form-data; name="x"\r\n\r\n${body}\r\n--${boundary}--\r\n`;
  const cases = [
    ['no Content-Type (a no-cors fetch of a Blob, sendBeacon)', body, {}],
    ['text/plain', body, { 'content-type': 'text/plain;charset=UTF-8' }],
    ['multipart/form-data', multipart, { 'content-type': `multipart/form-data; boundary=${boundary}` }],
    ['a form', 'clientKey=victim&cost=60', { 'content-type': 'application/x-www-form-urlencoded' }],
  ];
  for (const [what, raw, headers] of cases) {
    const r = await request(url, 'POST', CHECK, { raw, headers });
    assert.equal(r.status, 415, what);
    assert.match(r.headers['content-type'], /^application\/problem\+json/, what);
    assert.equal(r.body.error, 'UNSUPPORTED_MEDIA_TYPE', what);
    assert.equal(r.body.type, 'urn:tiergate:problem:unsupported-media-type', what);
    assert.equal(r.body.status, 415, what);
    assert.ok(r.body.detail && r.body.requestId, what);
  }
  // Nothing was spent: the first JSON check has all but its own cost left.
  assert.equal(await remainingOf(url, 'victim'), 99);
  const declared = await request(url, 'POST', CHECK, { raw: body, headers: { 'content-type': 'application/json' } });
  assert.deepEqual([declared.status, declared.body.remaining], [200, 39], 'declared as JSON, it is spent');
  const activity = (await admin(url, 'GET', '/api/v1/admin/clients/victim/activity')).body;
  assert.equal(activity.summary.totalRequests, 2, 'the refused bodies were not recorded either');
});

test('a cost above the client\'s limit is a 400 that spends nothing; a cost within it is spent', async () => {
  const { url } = await start();
  assert.equal((await admin(url, 'POST', '/api/v1/admin/clients', { clientKey: 'window', algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 3600 })).status, 201);
  assert.equal((await admin(url, 'POST', '/api/v1/admin/clients', { clientKey: 'bucket', algorithm: 'token_bucket', requestsPerSecond: 1, burstSize: 10 })).status, 201);
  for (const [key, limit] of [['window', 100], ['bucket', 10]]) {
    for (const cost of [1_000_000, limit + 1]) {
      const r = await check(url, key, cost);
      assert.equal(r.status, 400, `${key} cost ${cost}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error, 'VALIDATION_ERROR');
      assert.match(r.body.message, new RegExp(`cost must be at most the client's limit \\(${limit}\\), got ${cost}`));
    }
    assert.equal(await remainingOf(url, key), limit - 1, `${key}: the window was not emptied`);
  }
  const all = await check(url, 'window', 99);
  assert.deepEqual([all.status, all.body.remaining], [200, 0], 'a cost up to the limit is an ordinary check');
});

test('slow rates: 1 per hour and 1 per day make token buckets (and GCRA) that deny for about that long', async () => {
  const { url } = await start();
  for (const [key, algorithm, seconds] of [['hourly', 'token_bucket', 3600], ['daily', 'token_bucket', 86_400], ['hourly-gcra', 'gcra', 3600]]) {
    const created = await admin(url, 'POST', '/api/v1/admin/clients', { clientKey: key, algorithm, requestsPerSecond: 1 / seconds, burstSize: 1 });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal((await admin(url, 'GET', `/api/v1/admin/clients/${key}`)).body.client.requestsPerSecond, 1 / seconds, 'stored as given');
    const first = await check(url, key);
    assert.deepEqual([first.status, first.body.remaining], [200, 0], key);
    const t = Date.now();
    const denied = await check(url, key);
    assert.equal(denied.status, 429, key);
    const retry = Number(denied.headers['retry-after']);
    assert.ok(retry > seconds - 60 && retry <= seconds, `${key}: Retry-After ${retry} s, about ${seconds}`);
    assert.equal(denied.body.retryAfter, retry);
    const resetIn = (Date.parse(denied.body.resetAt) - t) / 1000;
    assert.ok(resetIn > seconds - 60 && resetIn <= seconds + 1, `${key}: resetAt in ${resetIn} s`);
    assert.match(denied.headers['ratelimit-policy'], new RegExp(`;w=${seconds}$`));
  }
  const post = (requestsPerSecond, clientKey) => request(url, 'POST', '/api/v1/admin/clients', { token: TOKEN, raw: `{"clientKey":"${clientKey}","algorithm":"token_bucket","requestsPerSecond":${requestsPerSecond},"burstSize":1}`, headers: { 'content-type': 'application/json' } });
  // JSON has no NaN or Infinity: 1e400 parses to Infinity, and a NaN sent by JSON.stringify is null.
  for (const [what, value] of [['zero', '0'], ['negative zero', '-0'], ['negative', '-0.5'], ['Infinity', '1e400'], ['NaN', 'null'], ['a string', '"0.01"'], ['above the bound', '1000001'], ['so slow no date could say when it refills', '1e-300']]) {
    const r = await post(value, 'refused');
    assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error, 'VALIDATION_ERROR', what);
    assert.match(r.body.message, /requestsPerSecond|burstSize \/ requestsPerSecond/, what);
  }
  assert.equal((await post('1e-12', 'eons')).status, 201, 'one per 10^12 s, burst 1: the slowest bucket');
  assert.equal((await check(url, 'eons')).status, 200);
  const never = await check(url, 'eons');
  assert.equal(never.status, 429);
  assert.ok(Number.isFinite(Date.parse(never.body.resetAt)), never.body.resetAt);
});

test('a client that sends its headers slowly is cut off within headersTimeoutMs and about a second', async () => {
  const { url } = await start({ 'headers-timeout-ms': 1000, 'request-timeout-ms': 2000 });
  const { port } = new URL(url);
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const started = Date.now();
  let answer = '';
  socket.setEncoding('utf8').on('data', (d) => { answer += d; });
  socket.on('error', () => {}); // a reset once the server cuts it off
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.write(`POST ${CHECK} HTTP/1.1\r\nHost: x\r\n`);
  // One header line every 200 ms, for at most 15 s: never the end of the headers.
  let open = true;
  closed.then(() => { open = false; });
  for (let i = 0; open && i < 75; i++) {
    await sleep(200);
    if (open) socket.write(`X-Slow-${i}: a\r\n`);
  }
  const elapsed = Date.now() - started;
  socket.destroy();
  assert.equal(open, false, `still open after ${elapsed} ms`);
  // headersTimeout (1 s) + the 1 s check interval, with room for a loaded machine; node's default
  // interval (30 s) would have kept it open past the loop's 15 s.
  assert.ok(elapsed < 6000, `cut off after ${elapsed} ms`);
  assert.match(answer, /^HTTP\/1\.1 408 /);
});

test('maxConnections: past it a new connection is closed at once; one frees, the next is served', async () => {
  const { url } = await start({ 'max-connections': 2 });
  const { port } = new URL(url);
  // Two held connections, each answered once and kept alive.
  const held = [];
  for (let i = 0; i < 2; i++) {
    const s = net.connect(port, '127.0.0.1');
    held.push(s);
    const answered = new Promise((resolve) => s.setEncoding('utf8').once('data', resolve));
    s.write('GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.match(await answered, /^HTTP\/1\.1 200 /);
  }
  const extra = net.connect(port, '127.0.0.1');
  let got = '';
  extra.setEncoding('utf8').on('data', (d) => { got += d; });
  extra.on('error', () => {});
  extra.on('connect', () => extra.write('GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n'));
  await new Promise((resolve) => extra.once('close', resolve));
  assert.equal(got, '', 'the connection over the cap was closed unanswered');
  held[0].destroy();
  await sleep(100);
  assert.equal((await request(url, 'GET', '/health/live', { headers: { connection: 'close' } })).status, 200);
  for (const s of held) s.destroy();
});

test('a low-entropy admin token stops the start with a code naming it; random ones pass', async () => {
  for (const token of ['aaaaaaaaaaaaaaaa', 'abababababababababababab', 'admin-token-1234']) {
    const svc = startService({ token, flags: { data: tmpdir('tiergate-hard-') } });
    await assert.rejects(svc.ready, (err) => err.code === 1 && /ERR_TIERGATE_ADMIN_TOKEN_REQUIRED: adminToken .*too easy to guess/.test(err.output), token);
    assert.ok(!svc.output.includes(token), 'the token is not printed');
  }
  assert.equal(config.tokenBits('aaaaaaaaaaaaaaaa'), 0);
  for (const token of [randomBytes(24).toString('hex'), randomBytes(24).toString('base64'), TOKEN]) {
    assert.ok(config.resolve({ adminToken: token }, {}).adminToken === token, token);
  }
});

test('repeated wrong credentials from an address: 429 with Retry-After for a growing delay', async () => {
  const { url } = await start();
  const wrong = () => request(url, 'GET', '/api/v1/admin/clients', { token: 'wrong-token-0123456789abcdef' });
  // A bounded burst of guesses: the first five are looked at, the rest wait.
  const statuses = [];
  for (let i = 0; i < 20; i++) statuses.push((await wrong()).status);
  assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
  assert.ok(statuses.slice(5).every((s) => s === 429), statuses.join(' '));
  const held = await wrong();
  assert.equal(held.body.error, 'TOO_MANY_AUTH_FAILURES');
  assert.equal(held.headers['retry-after'], '1', 'the first delay is a second');
  // The right token waits too (a guess that passes would otherwise tell), and so does the dashboard.
  assert.equal((await admin(url, 'GET', '/api/v1/admin/clients')).status, 429);
  assert.equal((await request(url, 'GET', '/api/dashboard/info', { token: 'wrong-token-0123456789abcdef' })).status, 429);
  assert.equal((await request(url, 'GET', '/health/live')).status, 200, 'what needs no credential is served');
  // After the delay, one more failure: the next delay is twice as long.
  await sleep(1100);
  assert.equal((await request(url, 'GET', '/api/dashboard/info', { token: 'wrong-token-0123456789abcdef' })).status, 401);
  const longer = await wrong();
  assert.deepEqual([longer.status, longer.headers['retry-after']], [429, '2']);
  await sleep(2100);
  assert.equal((await admin(url, 'GET', '/api/v1/admin/clients')).status, 200, 'the right token, once the delay is over');
});

test('the failures table is bounded: the address touched longest ago makes room', () => {
  const f = new AuthFailures({ maxAddresses: 3 });
  const now = 1_000_000;
  for (let i = 0; i < 5; i++) f.fail('192.0.2.1', now);
  assert.ok(f.waitMs('192.0.2.1', now) > 0);
  for (const a of ['192.0.2.2', '192.0.2.3', '192.0.2.4']) f.fail(a, now + 1);
  assert.equal(f.size, 3);
  assert.equal(f.waitMs('192.0.2.1', now + 1), 0, 'evicted');
  // Forgotten a minute after its delay ends.
  for (let i = 0; i < 5; i++) f.fail('192.0.2.9', now);
  assert.equal(f.waitMs('192.0.2.9', now + 1000 + 60_000), 0);
  assert.equal(f.byAddress.has('192.0.2.9'), false);
});

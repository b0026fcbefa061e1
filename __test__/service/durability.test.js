'use strict';
// What survives a stop: a SIGTERM drains and keeps every state and record; a SIGKILL keeps every
// decision's state (it commits before the answer) and loses at most the activity records not yet
// written behind. Retention keeps the activity table bounded. Startup refuses to run the admin API open.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');
const { TOKEN, tmpdir, startService, admin, check, request } = require('./helpers');

const dirs = [];
const running = [];
function dataDir() {
  const d = tmpdir('tiergate-dur-');
  dirs.push(d);
  return d;
}
async function start(opts) {
  const svc = await startService(opts).ready;
  running.push(svc);
  return svc;
}
test.after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const window = (clientKey, maxRequests) => ({ clientKey, algorithm: 'sliding_window', maxRequests, windowSeconds: 600 });

async function allowedUntilDenied(url, key, max) {
  let n = 0;
  while (n <= max) {
    const r = await check(url, key);
    if (r.status !== 200) { assert.equal(r.status, 429); return n; }
    n++;
  }
  return n;
}

test('SIGTERM drains, exits 0, and a restart keeps every state and record', async () => {
  const data = dataDir();
  let svc = await start({ flags: { data } });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', window('kept', 100));
  await admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: 'kept-bucket', algorithm: 'token_bucket', requestsPerSecond: 0.001, burstSize: 5 });
  const res = await Promise.all(Array.from({ length: 50 }, () => check(svc.url, 'kept')));
  assert.ok(res.every((r) => r.status === 200));
  await check(svc.url, 'kept-bucket', 3);
  await svc.stop();
  assert.deepEqual(await svc.exited, { code: 0, signal: null }, svc.output);
  svc = await start({ flags: { data } });
  const activity = await admin(svc.url, 'GET', '/api/v1/admin/clients/kept/activity');
  assert.deepEqual(activity.body.summary, { totalRequests: 50, allowedRequests: 50, deniedRequests: 0 }, 'every record was flushed on the way out');
  assert.equal(activity.body.currentState.remaining, 50);
  assert.equal((await check(svc.url, 'kept-bucket', 2)).body.remaining, 0, 'the bucket kept its debit');
  assert.equal((await check(svc.url, 'kept-bucket')).status, 429);
  await svc.stop();
});

test('SIGKILL: no decision is forgotten (never more than the policy); only unwritten activity records are lost', async () => {
  const data = dataDir();
  const flushMs = 50;
  let svc = await start({ flags: { data, 'activity-flush-ms': flushMs } });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', window('killed', 100));
  const first = await Promise.all(Array.from({ length: 60 }, () => check(svc.url, 'killed')));
  assert.ok(first.every((r) => r.status === 200));
  // Far past the flush interval (a loaded machine may run timers late): these 60 records are written.
  await sleep(20 * flushMs);
  const last = await Promise.all(Array.from({ length: 10 }, () => check(svc.url, 'killed')));
  assert.ok(last.every((r) => r.status === 200));
  svc.child.kill('SIGKILL');
  await svc.exited;
  svc = await start({ flags: { data } });
  // Every answered decision is in the state: exactly 100 - 70 more are allowed, never more.
  assert.equal(await allowedUntilDenied(svc.url, 'killed', 100), 30);
  const { summary } = (await admin(svc.url, 'GET', '/api/v1/admin/clients/killed/activity')).body;
  const before = summary.totalRequests - 31; // this run's own checks, all flushed by the admin read
  assert.ok(before >= 60 && before <= 70, `kept ${before} of the 70 records from before the kill`);
  await svc.stop();
});

test('retention: the activity table stays within its row cap; totals and analytics buckets keep the history', async () => {
  const data = dataDir();
  const svc = await start({ flags: { data, 'activity-max-rows': 100, 'prune-interval-ms': 100 } });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', window('busy', 1000));
  for (let round = 0; round < 3; round++) await Promise.all(Array.from({ length: 100 }, () => check(svc.url, 'busy')));
  await admin(svc.url, 'GET', '/api/v1/admin/overview'); // flushes
  const db = new Database(path.join(data, 'activity.sqlite'), { readonly: true, fileMustExist: true });
  let rows = Infinity;
  try {
    for (let i = 0; i < 100 && rows > 100; i++) {
      rows = db.prepare('SELECT count(*) FROM activity').pluck().get();
      if (rows > 100) await sleep(50);
    }
  } finally {
    db.close();
  }
  assert.ok(rows <= 100, `${rows} activity rows`);
  const { summary } = (await admin(svc.url, 'GET', '/api/v1/admin/clients/busy/activity')).body;
  assert.equal(summary.totalRequests, 300);
  const points = (await admin(svc.url, 'GET', '/api/v1/admin/analytics?range=5m')).body.points;
  assert.equal(points.reduce((n, p) => n + p.incoming, 0), 300);
  await svc.stop();
});

test('the service refuses to start without an admin token, or with a short one', async () => {
  for (const token of [null, 'short']) {
    const svc = startService({ token, flags: { data: dataDir() } });
    await assert.rejects(svc.ready, (err) => err.code === 1 && /ERR_TIERGATE_ADMIN_TOKEN_REQUIRED/.test(err.output));
  }
  const bad = startService({ flags: { data: dataDir(), port: 'eighty' } });
  await assert.rejects(bad.ready, (err) => err.code === 1 && /ERR_TIERGATE_INVALID_OPTION/.test(err.output));
  const unknown = startService({ flags: { data: dataDir(), 'no-such-flag': 1 } });
  await assert.rejects(unknown.ready, (err) => err.code === 1 && /ERR_TIERGATE_UNKNOWN_OPTION/.test(err.output));
});

test('a token from a file; caller API keys on the check when configured', async () => {
  const data = dataDir();
  const file = path.join(data, 'token');
  fs.writeFileSync(file, `${TOKEN}\n`);
  const key = 'caller-key-0123456789';
  const svc = await start({ token: null, flags: { data, 'admin-token-file': file }, env: { TIERGATE_API_KEYS: key } });
  assert.equal((await admin(svc.url, 'POST', '/api/v1/admin/clients', window('keyed', 5))).status, 201);
  const none = await check(svc.url, 'keyed');
  assert.deepEqual([none.status, none.body.error], [401, 'UNAUTHORIZED']);
  const ok = await request(svc.url, 'POST', '/api/v1/rate-limit/check', { body: { clientKey: 'keyed' }, token: key });
  assert.equal(ok.status, 200);
  await svc.stop();
});

test('SIGTERM waits for a request in flight: it is answered, then the process exits 0', async () => {
  const net = require('node:net');
  const data = dataDir();
  const svc = await start({ flags: { data } });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', window('inflight', 5));
  const { port } = new URL(svc.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  let answer = '';
  socket.setEncoding('utf8').on('data', (d) => { answer += d; });
  const body = '{"clientKey":"inflight"}';
  // Headers and half the body: the request is in flight when the signal comes.
  socket.write(`POST /api/v1/rate-limit/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
  await sleep(100);
  svc.child.kill('SIGTERM');
  await sleep(200);
  assert.equal(svc.child.exitCode, null, 'it did not exit with a request in flight');
  socket.write(body.slice(10));
  await new Promise((r) => socket.once('close', r));
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(answer, /"remaining":4/);
  assert.deepEqual(await svc.exited, { code: 0, signal: null });
});

test('CORS: an allowed origin gets its headers and a preflight; another gets none', async () => {
  const svc = await start({ flags: { data: dataDir(), 'cors-origins': 'https://dash.example' } });
  const pre = await request(svc.url, 'OPTIONS', '/api/v1/admin/overview', { headers: { origin: 'https://dash.example', 'access-control-request-method': 'GET' } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers['access-control-allow-origin'], 'https://dash.example');
  assert.match(pre.headers['access-control-allow-headers'], /Authorization/);
  const other = await request(svc.url, 'GET', '/health/live', { headers: { origin: 'https://evil.example' } });
  assert.equal(other.headers['access-control-allow-origin'], undefined);
  await svc.stop();
});

'use strict';
// tiergate.client() and the middleware built on it, against a real `tiergate serve` process; failing
// open and closed against a port nobody listens on and a server that never answers.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const http = require('node:http');
const { once } = require('node:events');
const tiergate = require('tiergate/service');
const { tmpdir, startService, admin, request } = require('./helpers');

const dir = tmpdir('tiergate-client-');
let svc;
const clients = [];
const make = (url, o) => { const c = tiergate.client(url, o); clients.push(c); return c; };
test.before(async () => {
  svc = await startService({ flags: { data: dir } }).ready;
  await admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: 'app', algorithm: 'sliding_window', maxRequests: 2, windowSeconds: 600 });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: 'mw', algorithm: 'sliding_window', maxRequests: 1, windowSeconds: 600 });
  await admin(svc.url, 'POST', '/api/v1/admin/clients', { clientKey: 'fy', algorithm: 'sliding_window', maxRequests: 1, windowSeconds: 600 });
});
test.after(async () => {
  for (const c of clients) c.close();
  await svc.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function closedPort() {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

test('check: allowed, then denied with Retry-After, over kept-alive connections', async () => {
  const c = make(svc.url);
  const a = await c.check('app');
  assert.deepEqual([a.allowed, a.status, a.limit, a.remaining, a.error], [true, 200, 2, 1, null]);
  await c.check('app', { cost: 1 });
  const d = await c.check('app');
  assert.deepEqual([d.allowed, d.status, d.remaining], [false, 429, 0]);
  assert.ok(d.retryAfter >= 1);
  assert.equal(d.headers['x-ratelimit-limit'], '2');
});

test('no usable answer: fail open or closed, with ERR_TIERGATE_SERVICE_UNAVAILABLE', async () => {
  const down = `http://127.0.0.1:${await closedPort()}`;
  const open = await make(down).check('app');
  assert.deepEqual([open.allowed, open.status, open.failedOpen, open.error.code], [true, 0, true, 'ERR_TIERGATE_SERVICE_UNAVAILABLE']);
  const closed = await make(down, { failOpen: false }).check('app');
  assert.deepEqual([closed.allowed, closed.failedOpen], [false, false]);
  // A server that accepts and never answers: the timeout decides.
  const silent = net.createServer((s) => s.on('data', () => {})).listen(0, '127.0.0.1');
  await once(silent, 'listening');
  try {
    const t = await make(`http://127.0.0.1:${silent.address().port}`, { timeoutMs: 100, failOpen: false }).check('app');
    assert.equal(t.allowed, false);
    assert.match(t.error.message, /did not answer within 100 ms/);
  } finally {
    silent.close();
  }
  const unknown = await make(svc.url, { failOpen: false }).check('nobody');
  assert.deepEqual([unknown.allowed, unknown.status, unknown.detail ?? unknown.error.detail.error], [false, 404, 'CLIENT_NOT_FOUND']);
});

test('client options are checked', () => {
  for (const [url, o, code, msg] of [
    ['ftp://x', undefined, 'ERR_TIERGATE_INVALID_OPTION', /http\(s\) URL/],
    ['http://x', { timeoutMs: -1 }, 'ERR_TIERGATE_INVALID_OPTION', /timeoutMs/],
    ['http://x', { timeoutMs: NaN }, 'ERR_TIERGATE_INVALID_OPTION', /timeoutMs/],
    ['http://x', { failOpen: 'no' }, 'ERR_TIERGATE_INVALID_OPTION', /failOpen must be a boolean/],
    ['http://x', { retries: 1 }, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "retries"/],
  ]) assert.throws(() => tiergate.client(url, o), (e) => e.code === code && msg.test(e.message));
  const c = make('http://127.0.0.1:1');
  assert.throws(() => c.middleware({}), (e) => e.code === 'ERR_TIERGATE_INVALID_OPTION' && /key must be a function/.test(e.message));
});

async function listen(server) {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${server.address().port}`;
}

test('Express middleware: the service decides; a refusal is a 429 with the service headers', async () => {
  const express = require('express');
  const app = express();
  app.use(make(svc.url).middleware({ key: () => 'mw' }));
  app.get('/', (req, res) => res.send('hello'));
  const server = http.createServer(app);
  const base = await listen(server);
  try {
    const ok = await request(base, 'GET', '/');
    assert.deepEqual([ok.status, ok.body, ok.headers['x-ratelimit-remaining']], [200, 'hello', '0']);
    const no = await request(base, 'GET', '/');
    assert.equal(no.status, 429);
    assert.equal(no.body.error, 'RATE_LIMIT_EXCEEDED');
    assert.ok(Number(no.headers['retry-after']) >= 1);
  } finally {
    server.close();
  }
});

test('Fastify onRequest hook', async () => {
  const fastify = require('fastify')({ logger: false });
  fastify.addHook('onRequest', make(svc.url).fastifyHook({ key: () => 'fy' }));
  fastify.get('/', async () => 'hello');
  const base = await fastify.listen({ port: 0, host: '127.0.0.1' });
  try {
    assert.equal((await request(base, 'GET', '/')).status, 200);
    const no = await request(base, 'GET', '/');
    assert.equal(no.status, 429);
    assert.equal(no.headers['x-ratelimit-limit'], '1');
  } finally {
    await fastify.close();
  }
});

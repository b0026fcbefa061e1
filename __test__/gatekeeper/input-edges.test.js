'use strict';
// Regression tests for review findings on the gatekeeper, each against a real server on 127.0.0.1.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const express = require('express');
const { gatekeeper } = require('../..');
const { listen, close, request } = require('../helpers/http');

test('route rules cannot be escaped with upper case or an absolute-form target (Express routes both)', async () => {
  const seen = [];
  const app = express();
  app.use(gatekeeper({
    routes: [{ path: '/reports/', tier: 'background' }, { path: /^\/admin\//i, tier: 'background' }],
    defaultTier: 'standard',
    shed: false,
    onDecision: (info, req) => seen.push([req.url, info.tier]),
  }));
  app.get('/reports/:id', (req, res) => res.send('report'));
  app.get('/admin/x', (req, res) => res.send('admin'));
  const server = http.createServer(app);
  const port = await listen(server);
  try {
    const paths = ['/reports/1', '/REPORTS/1', '/Reports/1', 'http://x/reports/1', 'HTTP://X:80/Reports/1?a=1', '/ADMIN/x', 'http://x/admin/x'];
    for (const path of paths) assert.equal((await request(port, { path })).status, 200, `${path} reaches the Express route`);
    assert.deepEqual(seen, paths.map((p) => [p, 'background']));
    // Still whole segments, and other targets keep the default.
    seen.length = 0;
    await request(port, { path: '/reportsx' });
    await request(port, { path: 'http://x/' });
    assert.deepEqual(seen.map((s) => s[1]), ['standard', 'standard']);
  } finally {
    await close(server);
  }
});

test('a bad respond() result cannot crash the node:http server', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  let custom;
  const tiers = [{ name: 'a', limit: 1, windowMs: 1e6 }];
  const handler = gatekeeper.http({ shed: false, tiers, respond: () => custom }, (req, res) => res.end('ok'));
  const server = http.createServer(handler);
  const port = await listen(server);
  try {
    assert.equal((await request(port)).status, 200);
    // A status node:http refuses: warned, the default rejection is sent.
    custom = { status: 1000, body: 'x' };
    const r = await request(port);
    assert.equal(r.status, 503);
    assert.equal(r.json.type, 'urn:tiergate:problem:tier-capacity');
    // A header value node:http refuses: a 500, not an uncaught exception.
    custom = { status: 429, headers: { 'x-bad': 'a\r\nb' }, body: 'x' };
    assert.equal((await request(port)).status, 500);
    custom = { status: 418, body: 'teapot' };
    assert.deepEqual([(await request(port)).status, (await request(port)).body], [418, 'teapot'], 'the server is still serving');
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(warnings.some((m) => /options\.respond threw.*100\.\.599/s.test(m)), warnings.join('\n'));
  } finally {
    process.off('warning', onWarning);
    await close(server);
  }
});

test('rate-limit fields carry plain integers for fractional remainders or the largest per-key limit', async () => {
  // A fractional cost leaves a fractional remainder (2.5 of 3); the largest limit is 2^32-1.
  for (const [limit, cost, q, r] of [[3, 0.5, '3', '2'], [4294967295, 1, '4294967295', '4294967294']]) {
    const handler = gatekeeper.http({
      shed: false,
      cost,
      tiers: [{ name: 'a', limit: 1e9, windowMs: 1000 }],
      perKey: { limit, windowMs: 1e12 },
      rateLimitHeaders: 'both',
      rateLimitHeadersOnSuccess: true,
    }, (req, res) => res.end('ok'));
    const server = http.createServer(handler);
    const port = await listen(server);
    try {
      const h = (await request(port)).headers;
      assert.match(h['ratelimit-policy'], new RegExp(`^"a";q=${q};w=\\d+$`), h['ratelimit-policy']);
      assert.match(h.ratelimit, new RegExp(`^"a";r=${r};t=\\d+$`), h.ratelimit);
      assert.equal(h['x-ratelimit-limit'], q);
      assert.equal(h['x-ratelimit-remaining'], r);
    } finally {
      await close(server);
    }
  }
});

test('a key function returning a number keys by that number, not silently by IP; other types warn', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  let id;
  const keys = [];
  const handler = gatekeeper.http({
    shed: false,
    perKey: { limit: 1, windowMs: 1e6 },
    key: () => id,
    onDecision: (info) => keys.push(info.key),
  }, (req, res) => res.end('ok'));
  const server = http.createServer(handler);
  const port = await listen(server);
  try {
    id = 42;
    assert.equal((await request(port)).status, 200);
    assert.equal((await request(port)).status, 429, 'user 42 used its quota');
    id = 43;
    assert.equal((await request(port)).status, 200, 'user 43 has its own bucket, not the shared IP one');
    id = { user: 1 };
    await request(port);
    assert.deepEqual(keys, ['42', '42', '43', '127.0.0.1']);
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(warnings.some((m) => /options\.key returned .*not a string/.test(m)), warnings.join('\n'));
  } finally {
    process.off('warning', onWarning);
    await close(server);
  }
});

test('an over-long X-Forwarded-For entry from a trusted hop keys the shared invalid-IP bucket, it does not throw', async () => {
  const app = express();
  const gate = gatekeeper({ perKey: { limit: 0, windowMs: 1000, burst: 2 }, trustProxy: 1, shed: false });
  app.use(gate);
  app.get('/', (req, res) => res.send('ok'));
  const server = http.createServer(app);
  const port = await listen(server);
  try {
    const junk = { 'x-forwarded-for': 'x'.repeat(1500) };
    const other = { 'x-forwarded-for': `${'y'.repeat(1800)}` };
    // Both are unparsable addresses: one shared bucket of 2, then 429 (not a 500 from a thrown error).
    assert.deepEqual(
      [(await request(port, { headers: junk })).status, (await request(port, { headers: other })).status, (await request(port, { headers: junk })).status],
      [200, 200, 429],
    );
    // A well-formed address keeps its own bucket.
    assert.equal((await request(port, { headers: { 'x-forwarded-for': '203.0.113.9' } })).status, 200);
  } finally {
    await close(server);
  }
});

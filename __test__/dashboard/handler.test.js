'use strict';
// The dashboard's handler without a browser: it refuses to exist without a token, mounts on Express,
// node:http (with a prefix) and Fastify, streams samples over SSE with the token only, bounds its
// streams and its history, and ships the vendored uPlot unmodified.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const t = require('../..');
const { listen, close, request } = require('../helpers/http');

const TOKEN = 'handler-test-token-0123456789abcdef';
const auth = { authorization: `Bearer ${TOKEN}` };

test('dashboard() refuses to be built without a token, or with a short one, naming the option', () => {
  const gk = t.gatekeeper();
  const cases = [
    [() => t.dashboard({ gatekeeper: gk }), TypeError, /dashboard: options\.token is required: .* never open/],
    [() => t.dashboard({ gatekeeper: gk, token: '' }), TypeError, /options\.token is required/],
    [() => t.dashboard({ gatekeeper: gk, token: 'short' }), RangeError, /options\.token must be at least 16 bytes/],
    [() => t.dashboard({ gatekeeper: gk, token: 42 }), TypeError, /options\.token must be a string or a Buffer/],
    [() => t.dashboard(), TypeError, /dashboard: options must be an object with a token/],
    [() => t.dashboard({ token: TOKEN }), TypeError, /must name at least one of gatekeeper, queue, lag, ledger$/],
    [() => t.dashboard({ gatekeeper: gk, token: TOKEN, intervalMs: 5000 }), RangeError, /options\.intervalMs must be an integer >= 100 and <= 1000/],
    [() => t.dashboard({ gatekeeper: gk, token: TOKEN, historySec: NaN }), RangeError, /options\.historySec/],
    [() => t.dashboard({ gatekeeper: gk, token: TOKEN, prefix: 'x/' }), TypeError, /options\.prefix must be a path/],
    [() => t.dashboard({ gatekeeper: gk, token: TOKEN, service: { apiBase: 'v1' } }), TypeError, /options\.service\.apiBase must be a path/],
  ];
  for (const [fn, Err, re] of cases) assert.throws(fn, (e) => e instanceof Err && e.code === 'ERR_TIERGATE_INVALID_OPTION' && re.test(e.message), String(re));
  assert.throws(() => t.dashboard({ gatekeeper: gk, token: TOKEN, open: true }), (e) => e.code === 'ERR_TIERGATE_UNKNOWN_OPTION');
});

function sse(port, p, headers, { events = 2, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const got = [];
    const req = http.request({ host: '127.0.0.1', port, path: p, headers }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return resolve({ status: res.statusCode, events: [] });
      }
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        buf += c;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = /^event: (.*)$/m.exec(block);
          const data = /^data: (.*)$/m.exec(block);
          if (ev && data) got.push({ event: ev[1], data: JSON.parse(data[1]) });
          if (got.length >= events) {
            req.destroy();
            resolve({ status: 200, headers: res.headers, events: got });
          }
        }
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('no events in time')));
    req.on('error', (err) => (got.length >= events ? undefined : reject(err)));
    req.end();
  });
}

test('node:http with a prefix: the app, the info, and a stream of samples with per-second rates', async (t2) => {
  const gate = t.gatekeeper.http({}, (req, res) => res.end('ok'));
  const queue = t.concurrencyGate({ maxConcurrent: 2 });
  const dash = t.dashboard({ gatekeeper: gate, queue, token: TOKEN, prefix: '/ops', intervalMs: 100, historySec: 10 });
  t2.after(() => dash.close());
  const server = http.createServer((req, res) => dash.handle(req, res) || gate(req, res));
  const port = await listen(server);
  t2.after(() => close(server));
  assert.equal((await request(port, { path: '/ops' })).headers.location, '/ops/');
  const index = await request(port, { path: '/ops/' });
  assert.equal(index.status, 200);
  assert.match(index.headers['content-type'], /^text\/html/);
  assert.equal((await request(port, { path: '/ops/', headers: { 'if-none-match': index.headers.etag } })).status, 304);
  assert.equal((await request(port, { path: '/ops/vendor/uPlot.iife.min.js' })).status, 200);
  assert.equal((await request(port, { path: '/ops/nope.js' })).status, 404);
  assert.equal((await request(port, { path: '/elsewhere' })).body, 'ok', 'outside the prefix the app answers');

  const info = await request(port, { path: '/ops/api/dashboard/info', headers: auth });
  assert.equal(info.status, 200);
  assert.deepEqual(info.json.library.tiers.map((x) => x.name), ['critical', 'standard', 'background']);
  assert.deepEqual(info.json.library.components, ['gatekeeper', 'queue', 'ledger']);
  assert.equal(info.json.service, null);

  for (let i = 0; i < 20; i++) await request(port, { path: '/work' });
  const s = await sse(port, '/ops/api/dashboard/stream', auth, { events: 3 });
  assert.equal(s.status, 200);
  assert.match(s.headers['content-type'], /^text\/event-stream/);
  assert.equal(s.events[0].event, 'history');
  assert.ok(Array.isArray(s.events[0].data) && s.events[0].data.length >= 1);
  const all = [...s.events[0].data, ...s.events.slice(1).map((e) => e.data)];
  // The 20 requests appear as a rate in the sample whose interval held them.
  const admittedPerSec = all.map((x) => x.gatekeeper.tiers.standard.admitted); // the default tier of gatekeeper()
  assert.ok(admittedPerSec.some((r) => r > 0), `no admitted rate in ${JSON.stringify(admittedPerSec)}`);
  assert.equal(s.events[1].event, 'sample');
  assert.ok(typeof s.events[1].data.loop.elu === 'number');
  assert.equal(s.events[1].data.queue.limit, 2);
  assert.equal(s.events[1].data.health.status, 'ok');
  assert.equal((await sse(port, '/ops/api/dashboard/stream', {})).status, 401);
});

test('the history is bounded, and streams beyond maxStreams are refused', async (t2) => {
  const lag = new t.LagMonitor().start();
  t2.after(() => lag.stop());
  const dash = t.dashboard({ lag, token: TOKEN, intervalMs: 100, historySec: 10, maxStreams: 1 });
  t2.after(() => dash.close());
  const server = http.createServer(dash);
  const port = await listen(server);
  t2.after(() => close(server));
  const open = http.get({ host: '127.0.0.1', port, path: '/api/dashboard/stream', headers: auth });
  await new Promise((r) => open.once('response', r));
  const second = await request(port, { path: '/api/dashboard/stream', headers: auth });
  assert.equal(second.status, 503);
  assert.equal(second.json.error, 'TOO_MANY_STREAMS');
  open.destroy();
  await new Promise((r) => setTimeout(r, 1500));
  const h = await request(port, { path: '/api/dashboard/history', headers: auth });
  assert.ok(h.json.samples.length >= 5 && h.json.samples.length <= 100, `${h.json.samples.length} samples`);
  assert.equal(typeof h.json.samples[0].loop.lagMs, 'number');
});

test('Express mount and Fastify plugin serve the same app, and the guards skip it on Fastify', async (t2) => {
  const express = require('express');
  const gk = t.gatekeeper();
  const dash = t.dashboard({ gatekeeper: gk, token: TOKEN });
  t2.after(() => dash.close());
  const app = express();
  app.use('/tiergate', dash);
  app.use((req, res) => res.status(418).end());
  const server = http.createServer(app);
  const port = await listen(server);
  t2.after(() => close(server));
  assert.equal((await request(port, { path: '/tiergate' })).headers.location, '/tiergate/');
  assert.equal((await request(port, { path: '/tiergate/app.js' })).status, 200);
  assert.equal((await request(port, { path: '/tiergate/api/dashboard/stats', headers: auth })).json.gatekeeper.tiers.critical.admitted, 0);

  const fastify = require('fastify')({ logger: false });
  await fastify.register(t.tiergatePlugin, { tiers: [{ name: 'only', limit: 0, windowMs: 1000, burst: 1 }] });
  const fdash = t.dashboard({ gatekeeper: fastify.tiergate, token: TOKEN });
  t2.after(() => fdash.close());
  await fastify.register(fdash.plugin, { prefix: '/tiergate' });
  await fastify.ready();
  assert.equal((await fastify.inject('/tiergate')).headers.location, '/tiergate/');
  assert.equal((await fastify.inject('/tiergate/')).statusCode, 200);
  assert.equal((await fastify.inject('/tiergate/charts.js')).statusCode, 200);
  assert.equal((await fastify.inject({ url: '/tiergate/api/dashboard/info', headers: auth })).json().library.tiers[0].name, 'only');
  assert.equal((await fastify.inject('/tiergate/api/dashboard/info')).statusCode, 401);
  assert.equal(fastify.tiergate.stats().tiers.only.admitted, 0, 'the dashboard went through the gatekeeper');
  await fastify.close();
});

test('the vendored uPlot is the uplot package\'s file, with its licence', () => {
  const vendor = path.join(__dirname, '..', '..', 'lib', 'dashboard', 'public', 'vendor');
  const pkg = path.dirname(require.resolve('uplot/package.json'));
  assert.ok(fs.readFileSync(path.join(vendor, 'uPlot.iife.min.js')).equals(fs.readFileSync(path.join(pkg, 'dist', 'uPlot.iife.min.js'))));
  assert.ok(fs.readFileSync(path.join(vendor, 'uPlot.min.css')).equals(fs.readFileSync(path.join(pkg, 'dist', 'uPlot.min.css'))));
  assert.ok(fs.readFileSync(path.join(vendor, 'uPlot.LICENSE')).equals(fs.readFileSync(path.join(pkg, 'LICENSE'))));
});

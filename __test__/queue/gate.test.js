'use strict';
// The concurrency gate against real servers: node:http, Express 5, Express 4, Fastify 5 and Koa 2.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { FRAMEWORKS, startServer, request, waitFor, heldHandler, sleep } = require('./helpers');
const { concurrencyGate } = require('../..');
const { queueFamilies } = require('../../lib/metrics/queue'); // internal: the families metrics() registers

const HANDLER_MS = 150;

for (const kind of FRAMEWORKS) {
  test(`${kind}: classic scenario — 15 at once, maxConcurrent 3, maxQueue 10`, async () => {
    const started = [];
    let finished = 0;
    const srv = await startServer(kind, { maxConcurrent: 3, maxQueue: 10 }, (req, res) => {
      started.push(req.headers['x-seq']);
      setTimeout(() => {
        finished++;
        res.end('ok');
      }, HANDLER_MS);
    });
    try {
      const results = await Promise.all(
        Array.from({ length: 15 }, (_, i) => request(srv.port, { headers: { 'x-seq': String(i) } }).then((r) => ({ ...r, seq: String(i) }))),
      );
      const bySeq = new Map(results.map((r) => [r.seq, r]));
      const arrivals = srv.arrivals;
      assert.equal(arrivals.length, 15);
      assert.equal(finished, 13);
      // 3 immediate + 10 queued ran, in arrival order; the last 2 arrivals got an immediate 503
      assert.deepEqual(started, arrivals.slice(0, 13));
      const rejected = results.filter((r) => r.status === 503).map((r) => r.seq).sort();
      assert.deepEqual(rejected, arrivals.slice(13).sort());
      assert.equal(results.filter((r) => r.status === 200).length, 13);
      const firstOk = Math.min(...results.filter((r) => r.status === 200).map((r) => r.at));
      for (const seq of rejected) {
        const r = bySeq.get(seq);
        assert.ok(r.at < firstOk, 'the 503s are answered before any handler completes');
        assert.match(r.headers['retry-after'], /^\d+$/);
        assert.match(r.headers['content-type'], /^application\/problem\+json/);
        assert.equal(JSON.parse(r.body).status, 503);
      }
      // queued requests complete in arrival order, each group one handler time after the previous one
      for (let p = 3; p < 13; p++) {
        const cur = bySeq.get(arrivals[p]);
        const prev = bySeq.get(arrivals[p - 3]);
        assert.ok(cur.at - prev.at >= HANDLER_MS / 3, `arrival ${p} completes a handler time after arrival ${p - 3}`);
        assert.ok(cur.ms >= Math.floor(p / 3 + 1) * HANDLER_MS - 5, `arrival ${p} waited for ${Math.floor(p / 3)} handler times`);
      }
      // slots come back at the end of the loop turn in which each response finished
      await waitFor(() => srv.gate.stats().inFlight === 0, 'the last slots to come back');
      const s = srv.gate.stats();
      assert.equal(s.queued, 0);
      assert.equal(s.admittedImmediately, 3);
      assert.equal(s.admittedFromQueue, 10);
      assert.equal(s.rejected, 2);
      assert.equal(s.released, 13);
      assert.equal(s.peakQueued, 10);
      assert.equal(s.limit, 3);
    } finally {
      await srv.close();
    }
  });
}

/** Sends requests one after another, each once the previous one is queued (arrival order is known). */
async function enqueue(srv, list) {
  const out = [];
  for (const { seq, tier, path, expect = 'queued' } of list) {
    const before = srv.gate.stats();
    const headers = { 'x-seq': seq };
    if (tier) headers['x-user-tier'] = tier;
    const p = request(srv.port, { path, headers });
    p.catch(() => {});
    out.push(p);
    if (expect === 'queued') await waitFor(() => srv.gate.stats().queuedByTier && srv.gate.stats().tiers && srv.gate.stats().queued + srv.gate.stats().displaced > before.queued + before.displaced, `${seq} queued`);
    else await waitFor(() => srv.gate.stats().rejected > before.rejected, `${seq} rejected`);
  }
  return out;
}

async function holdOneSlot(srv, held) {
  const first = request(srv.port, { headers: { 'x-seq': 'holder' } });
  await waitFor(() => held.pending.length === 1, 'the slot holder to start');
  return [first]; // not the promise itself: an async function would wait for it
}

async function drainHeld(held, count) {
  for (let i = 0; i < count; i++) {
    await waitFor(() => held.pending.length > 0, 'a handler to start');
    held.releaseOne();
  }
}

test('a critical request queued behind background requests runs first (trusted header)', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 20, trustTierHeader: true }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const reqs = await enqueue(srv, [
      { seq: 'b1', tier: 'background' }, { seq: 'b2', tier: 'background' }, { seq: 's1', tier: 'standard' },
      { seq: 'b3', tier: 'background' }, { seq: 'c1', tier: 'critical' },
    ]);
    assert.deepEqual(srv.gate.stats().queuedByTier, { critical: 1, standard: 1, background: 3 });
    await drainHeld(held, 6);
    const results = await Promise.all([holder, ...reqs]);
    assert.ok(results.every((r) => r.status === 200));
    assert.deepEqual(held.started, ['holder', 'c1', 's1', 'b1', 'b2', 'b3']);
  } finally {
    await srv.close();
  }
});

test('an untrusted tier header cannot promote a request above the default tier', async () => {
  const held = heldHandler();
  const srv = await startServer('express', { maxConcurrent: 1, maxQueue: 20, defaultTier: 'standard' }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const reqs = await enqueue(srv, [
      { seq: 'x1' }, { seq: 'b1', tier: 'background' }, { seq: 'forged', tier: 'critical' }, { seq: 'junk', tier: '\u00ff'.repeat(300) },
      { seq: 'multi', tier: 'critical, background' },
    ]);
    assert.deepEqual(srv.gate.stats().queuedByTier, { critical: 0, standard: 2, background: 3 });
    await drainHeld(held, 6);
    await Promise.all([holder, ...reqs]);
    // lowering oneself is honoured; the forged "critical" waits in the default (standard) tier, FIFO;
    // an over-long value is unreadable: the lowest tier
    assert.deepEqual(held.started, ['holder', 'x1', 'forged', 'b1', 'junk', 'multi']);
  } finally {
    await srv.close();
  }
});

test('a trusted header behind an appending gateway: no value is missed; junk or over-long gives the lowest tier', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 20, trustTierHeader: true, defaultTier: 'standard' }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const crit8 = Array(8).fill('critical').join(',');
    const reqs = await enqueue(srv, [
      { seq: 'padded', tier: `${crit8}, standard` }, // the gateway's ", standard" after 8 client values
      { seq: 'junk8', tier: 'critical,a,a,a,a,a,a,a, standard' },
      { seq: 'long', tier: `critical,${'x'.repeat(300)}, standard` }, // past the length cap
      { seq: 'unknown', tier: 'gold' },
      { seq: 'c1', tier: 'critical' },
    ]);
    // the lowest tier (background), not the default (standard), for several values or what cannot be read
    assert.deepEqual(srv.gate.stats().queuedByTier, { critical: 1, standard: 0, background: 4 });
    await drainHeld(held, 6);
    await Promise.all([holder, ...reqs]);
    assert.deepEqual(held.started, ['holder', 'c1', 'padded', 'junk8', 'long', 'unknown']);
  } finally {
    await srv.close();
  }
});

test('classify(req) chooses the tier; a trusted classifier may promote', async () => {
  const held = heldHandler();
  const classify = (req) => (req.url.startsWith('/checkout') ? 'critical' : req.url.startsWith('/reports') ? 'background' : undefined);
  const srv = await startServer('fastify', { maxConcurrent: 1, maxQueue: 20, classify }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const order = await enqueue(srv, [
      { seq: 'r1', path: '/reports/1' },
      { seq: 'other', path: '/other' },
      { seq: 'co', path: '/checkout' },
    ]);
    assert.deepEqual(srv.gate.stats().queuedByTier, { critical: 1, standard: 0, background: 2 });
    await drainHeld(held, 4);
    await Promise.all([holder, ...order]);
    assert.deepEqual(held.started, ['holder', 'co', 'r1', 'other']);
  } finally {
    await srv.close();
  }
});

test('a higher tier displaces the newest lower-tier waiter when the queue is full', async () => {
  const held = heldHandler();
  const seen = [];
  const onReject = (info, req) => seen.push(`${req.headers['x-seq']}:${info.reason}:${info.status}:${info.tier}`);
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 2, trustTierHeader: true, onReject }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const [b1, b2] = await enqueue(srv, [{ seq: 'b1', tier: 'background' }, { seq: 'b2', tier: 'background' }]);
    const [c1] = await enqueue(srv, [{ seq: 'c1', tier: 'critical' }]);
    const displaced = await b2;
    assert.equal(displaced.status, 503);
    assert.match(displaced.headers['retry-after'], /^\d+$/);
    assert.equal(JSON.parse(displaced.body).type, 'urn:tiergate:problem:displaced');
    // a background arrival cannot displace anyone: 503 queue-full
    const [b3] = await enqueue(srv, [{ seq: 'b3', tier: 'background', expect: 'rejected' }]);
    assert.equal((await b3).status, 503);
    await drainHeld(held, 3);
    const results = await Promise.all([holder, b1, c1]);
    assert.ok(results.every((r) => r.status === 200));
    assert.deepEqual(held.started, ['holder', 'c1', 'b1']);
    const s = srv.gate.stats();
    assert.equal(s.displaced, 1);
    assert.equal(s.tiers.background.displaced, 1);
    assert.equal(s.rejected, 1);
    assert.deepEqual(seen, ['b2:displaced:503:background', 'b3:queue-full:503:background']);
  } finally {
    await srv.close();
  }
});

test('displace: false rejects the higher tier instead', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 1, trustTierHeader: true, displace: false }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const [b1] = await enqueue(srv, [{ seq: 'b1', tier: 'background' }]);
    const [c1] = await enqueue(srv, [{ seq: 'c1', tier: 'critical', expect: 'rejected' }]);
    assert.equal((await c1).status, 503);
    await drainHeld(held, 2);
    assert.equal((await b1).status, 200);
    await holder;
  } finally {
    await srv.close();
  }
});

for (const [kind, status] of [['http', undefined], ['express', 503], ['express4', 408], ['fastify', 503], ['koa', 503], ['http', 504]]) {
  test(`${kind}: a request queued longer than queueTimeoutMs gets ${status ?? 'the default 408'} and never runs`, async () => {
    const held = heldHandler();
    const opts = { maxConcurrent: 1, maxQueue: 5, queueTimeoutMs: 80 };
    if (status !== undefined) opts.timeoutStatus = status;
    const srv = await startServer(kind, opts, held.handler);
    try {
      const [holder] = await holdOneSlot(srv, held);
      const [late] = await enqueue(srv, [{ seq: 'late' }]);
      const r = await late;
      assert.equal(r.status, status ?? 408);
      assert.ok(r.ms >= 75, `waited ${r.ms} ms`);
      const body = JSON.parse(r.body);
      assert.equal(body.type, 'urn:tiergate:problem:timeout');
      assert.deepEqual([body.status, body.title], [status ?? 408, http.STATUS_CODES[status ?? 408]]);
      // 408 closes the connection; any other status tells the client when to come back.
      if ((status ?? 408) !== 408) assert.match(r.headers['retry-after'], /^\d+$/);
      else assert.equal(r.headers['retry-after'], undefined);
      const s = srv.gate.stats();
      assert.equal(s.timeout, 1);
      assert.equal(s.codel, 0);
      assert.equal(s.queued, 0);
      assert.ok(s.tiers.background.waitMs.max === 0, 'a timed-out request is not counted as admitted');
      held.releaseOne();
      await holder;
      assert.deepEqual(held.started, ['holder']);
      await waitFor(() => srv.gate.stats().inFlight === 0, 'release');
    } finally {
      await srv.close();
    }
  });
}

for (const kind of FRAMEWORKS) {
  test(`${kind}: handler errors (thrown and rejected) release the slot`, async () => {
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on('warning', onWarning);
    const srv = await startServer(kind, { maxConcurrent: 1, maxQueue: 10 }, (req, res) => {
      if (req.url === '/throw') throw new Error('boom');
      if (req.url === '/reject') return Promise.reject(new Error('async boom'));
      res.end('ok');
      return undefined;
    });
    try {
      const results = await Promise.all([
        request(srv.port, { path: '/throw' }), request(srv.port, { path: '/reject' }), request(srv.port, { path: '/throw' }),
        request(srv.port, { path: '/reject' }), request(srv.port, { path: '/ok' }),
      ]);
      assert.deepEqual(results.map((r) => r.status).sort(), [200, 500, 500, 500, 500]);
      await waitFor(() => srv.gate.stats().inFlight === 0, 'all slots released');
      const s = srv.gate.stats();
      assert.equal(s.released, 5);
      assert.equal(s.queued, 0);
      assert.equal((await request(srv.port, { path: '/ok' })).status, 200);
    } finally {
      process.off('warning', onWarning);
      await srv.close();
    }
  });
}

test('CoDel: a standing queue cuts the wait of sheddable tiers to the target, never of protected ones', async () => {
  const held = heldHandler();
  const srv = await startServer('http', {
    maxConcurrent: 1, maxQueue: 10, queueTimeoutMs: 5000, trustTierHeader: true, codel: { targetMs: 5, intervalMs: 60 },
  }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const [b1, c1] = await enqueue(srv, [{ seq: 'b1', tier: 'background' }, { seq: 'c1', tier: 'critical' }]);
    assert.equal(srv.gate.stats().standing, false);
    const r = await b1; // dropped once the queue has stood for 60 ms, long before its 5 s timeout
    assert.equal(r.status, 408);
    assert.ok(r.ms >= 55 && r.ms < 4000, `dropped after ${r.ms} ms`);
    assert.equal(JSON.parse(r.body).type, 'urn:tiergate:problem:codel');
    const s = srv.gate.stats();
    assert.equal(s.standing, true);
    assert.equal(s.tiers.background.codel, 1);
    assert.equal(s.tiers.background.timeout, 0, 'a CoDel drop is counted under its own cause only');
    assert.equal(s.tiers.background.allowedWaitMs, 5);
    assert.equal(s.tiers.critical.allowedWaitMs, 5000);
    assert.equal(s.tiers.critical.queued, 1);
    await drainHeld(held, 2);
    assert.equal((await c1).status, 200);
    await holder;
    assert.equal(srv.gate.stats().standing, false);
    assert.equal(srv.gate.stats().tiers.background.allowedWaitMs, 5000);
  } finally {
    await srv.close();
  }
});

test('without codel the same standing queue keeps the full timeout', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 10, queueTimeoutMs: 5000 }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const [b1] = await enqueue(srv, [{ seq: 'b1' }]);
    await sleep(150);
    assert.equal(srv.gate.stats().queued, 1);
    await drainHeld(held, 2);
    assert.equal((await b1).status, 200);
    await holder;
  } finally {
    await srv.close();
  }
});

test('adaptive LIFO serves the newest waiter first while the queue is standing', async () => {
  const held = heldHandler();
  const srv = await startServer('express', { maxConcurrent: 1, maxQueue: 10, lifo: true }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const reqs = await enqueue(srv, [{ seq: 'b1' }, { seq: 'b2' }, { seq: 'b3' }]);
    await waitFor(() => srv.gate.stats().standing, 'a standing queue');
    await drainHeld(held, 4);
    await Promise.all([holder, ...reqs]);
    assert.deepEqual(held.started, ['holder', 'b3', 'b2', 'b1']);
    assert.equal(srv.gate.stats().lifoDequeues, 2); // the last waiter is both head and tail
  } finally {
    await srv.close();
  }
});

test('adaptive LIFO stays FIFO while the queue is not standing', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 10, lifo: true, codel: { targetMs: 500, intervalMs: 10_000 } }, held.handler);
  try {
    const [holder] = await holdOneSlot(srv, held);
    const reqs = await enqueue(srv, [{ seq: 'b1' }, { seq: 'b2' }, { seq: 'b3' }]);
    await drainHeld(held, 4);
    await Promise.all([holder, ...reqs]);
    assert.deepEqual(held.started, ['holder', 'b1', 'b2', 'b3']);
  } finally {
    await srv.close();
  }
});

test('a synchronous route: requests read in one loop turn are served by tier, not in socket order', async () => {
  const net = require('node:net');
  const started = [];
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 50, trustTierHeader: true }, (req, res) => {
    started.push(req.headers['x-seq']);
    res.end('ok'); // synchronous: the response finishes before the next socket is even read
  });
  const sockets = [];
  try {
    const names = ['b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'c0'];
    for (let i = 0; i < names.length; i++) {
      const s = net.connect(srv.port, '127.0.0.1');
      s.on('error', () => {});
      s.resume();
      sockets.push(s);
      await new Promise((resolve) => s.once('connect', resolve));
    }
    // All requests are written, then this (the server's) loop is kept busy until they have all
    // arrived: the server reads them in one turn.
    names.forEach((name, i) => {
      const tier = name.startsWith('c') ? 'critical' : 'background';
      sockets[i].write(`GET / HTTP/1.1\r\nhost: x\r\nx-seq: ${name}\r\nx-user-tier: ${tier}\r\n\r\n`);
    });
    const until = Date.now() + 50;
    while (Date.now() < until);
    await waitFor(() => started.length === names.length, 'every request to run');
    // One handler ran at once (whichever socket was read first); the critical one is served next.
    assert.ok(started.indexOf('c0') <= 1, `critical started at position ${started.indexOf('c0')}: ${started.join(' ')}`);
    const s = srv.gate.stats();
    assert.equal(s.admittedImmediately, 1);
    assert.equal(s.admittedFromQueue, 6);
  } finally {
    for (const s of sockets) s.destroy();
    await srv.close();
  }
});

test('the gate wraps a whole Express app or Fastify instance at the node:http level', async () => {
  const http = require('node:http');
  const express = require('express');
  const app = express();
  app.get('/x', (req, res) => res.json({ ok: true }));
  const wrapped = concurrencyGate.http({ maxConcurrent: 2, maxQueue: 0 }, app);
  const server = http.createServer(wrapped);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  let captured;
  const fastify = require('fastify')({
    logger: false,
    serverFactory: (handler) => {
      captured = concurrencyGate.http({ maxConcurrent: 2, maxQueue: 0 }, handler);
      return http.createServer(captured);
    },
  });
  fastify.get('/x', async () => ({ ok: true }));
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  try {
    const a = await request(server.address().port, { path: '/x' });
    const b = await request(fastify.server.address().port, { path: '/x' });
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.deepEqual(JSON.parse(b.body), { ok: true });
    assert.equal(wrapped.stats().admitted, 1);
    assert.equal(captured.stats().admitted, 1);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await fastify.close();
  }
});

test('the same gate mounted twice (app and router) holds one slot per request', async () => {
  const express = require('express');
  const mw = concurrencyGate({ maxConcurrent: 1, maxQueue: 5, queueTimeoutMs: 2000 });
  const app = express();
  app.use(mw);
  const api = express.Router();
  api.use(mw); // the request already holds this gate's slot: it must pass, not queue behind itself
  api.get('/x', (req, res) => res.send('ok'));
  app.use('/api', api);
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    for (let i = 0; i < 3; i++) {
      const r = await request(server.address().port, { path: '/api/x' });
      assert.equal(r.status, 200);
    }
    await waitFor(() => mw.stats().inFlight === 0, 'the slots to come back');
    const s = mw.stats();
    assert.equal(s.admitted, 3);
    assert.equal(s.released, 3);
    assert.equal(s.queued, 0);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test('http: a handler that throws after sending headers has its response destroyed and its slot released', async () => {
  const onWarning = () => {};
  process.on('warning', onWarning);
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 5 }, (req, res) => {
    if (req.url === '/half') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
      throw new Error('broke mid-response');
    }
    res.end('ok');
    return undefined;
  });
  try {
    await assert.rejects(request(srv.port, { path: '/half' }), /aborted|socket hang up|ECONNRESET/);
    await waitFor(() => srv.gate.stats().inFlight === 0, 'the slot to come back');
    assert.equal((await request(srv.port, { path: '/ok' })).status, 200);
    assert.equal(srv.gate.stats().released >= 1, true);
  } finally {
    process.off('warning', onWarning);
    await srv.close();
  }
});

test('http: close() answers every waiter 503 closing, counted as closing (stats and the metric), not as queue-full', async () => {
  const held = heldHandler();
  const srv = await startServer('http', { maxConcurrent: 1, maxQueue: 5 }, held.handler);
  try {
    const first = request(srv.port, { headers: { 'x-seq': '0' } });
    await waitFor(() => held.started.length === 1, 'the first request to hold the slot');
    const waiters = [1, 2].map((i) => request(srv.port, { headers: { 'x-seq': String(i) } }));
    await waitFor(() => srv.gate.stats().queued === 2, 'two waiters');
    srv.gate.close();
    for (const r of await Promise.all(waiters)) {
      assert.equal(r.status, 503);
      assert.equal(JSON.parse(r.body).type, 'urn:tiergate:problem:closing');
    }
    held.releaseOne();
    assert.equal((await first).status, 200, 'the request in flight finishes normally');
    const s = srv.gate.stats();
    const tier = Object.keys(s.tiers).find((name) => s.tiers[name].closing > 0);
    assert.deepEqual([s.closing, s.rejected, s.tiers[tier].closing, s.tiers[tier].rejected], [2, 0, 2, 0]);
    const rows = queueFamilies(srv.gate, () => srv.gate.stats())
      .find((f) => f.name === 'tiergate_queue_rejected_total')
      .get().values;
    const value = (reason) => rows.find((r) => r.labels.tier === tier && r.labels.reason === reason).value;
    assert.deepEqual([value('closing'), value('queue-full')], [2, 0]);
  } finally {
    await srv.close();
  }
});

'use strict';
// 1,000 clients that disconnect while queued or in flight: every slot comes back, no queued handler runs.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { FRAMEWORKS, startServer, request, waitFor } = require('./helpers');
const { concurrencyGate, concurrencyGatePlugin } = require('../..');

const CLIENTS = 1000;
const LIMIT = 10;

async function openClients(srv, count) {
  const reqs = [];
  for (let i = 0; i < count; i += 100) {
    // in batches, so the listen backlog never overflows into SYN retries
    for (let j = i; j < Math.min(count, i + 100); j++) {
      const p = request(srv.port, { headers: { 'x-seq': String(j) } });
      p.catch(() => {}); // destroyed on purpose
      reqs.push(p.req);
    }
    await waitFor(() => srv.arrivals.length >= Math.min(count, i + 100), `${i + 100} arrivals`);
  }
  return reqs;
}

for (const kind of FRAMEWORKS) {
  test(`${kind}: ${CLIENTS} clients disconnecting while queued, then in flight, leave nothing behind`, async () => {
    const running = new Set();
    let handlerRuns = 0;
    const srv = await startServer(kind, { maxConcurrent: LIMIT, maxQueue: CLIENTS }, (req, res) => {
      handlerRuns++;
      running.add(req.headers['x-seq']);
      res.on('close', () => running.delete(req.headers['x-seq'])); // never answers: held until the client goes
    });
    try {
      const clients = await openClients(srv, CLIENTS);
      await waitFor(() => srv.gate.stats().queued === CLIENTS - LIMIT, 'everyone queued');
      assert.equal(srv.gate.stats().inFlight, LIMIT);
      assert.equal(handlerRuns, LIMIT);
      const inFlightSeqs = new Set(running);
      // the queued clients go first: none of their handlers may run
      clients.forEach((req, i) => {
        if (!inFlightSeqs.has(String(i))) req.destroy();
      });
      await waitFor(() => srv.gate.stats().queued === 0, 'queued clients removed');
      assert.equal(srv.gate.stats().inFlight, LIMIT);
      assert.equal(handlerRuns, LIMIT);
      // then the in-flight ones
      clients.forEach((req, i) => {
        if (inFlightSeqs.has(String(i))) req.destroy();
      });
      await waitFor(() => srv.gate.stats().inFlight === 0, 'slots released');
      const s = srv.gate.stats();
      assert.equal(handlerRuns, LIMIT);
      assert.equal(s.queued, 0);
      assert.equal(s.abandoned, CLIENTS - LIMIT);
      assert.equal(s.released, LIMIT);
      // the gate still works afterwards, immediately
      const ok = request(srv.port, { headers: { 'x-seq': 'after' } });
      await waitFor(() => running.has('after'), 'a fresh request to run');
      assert.equal(srv.gate.stats().admittedImmediately, LIMIT + 1);
      ok.req.destroy();
      ok.catch(() => {});
      await waitFor(() => srv.gate.stats().inFlight === 0, 'fresh slot released');
    } finally {
      await srv.close();
    }
  });
}

test(`http: ${CLIENTS} clients disconnecting in random order keep the books exact`, async () => {
  let handlerRuns = 0;
  const srv = await startServer('http', { maxConcurrent: LIMIT, maxQueue: CLIENTS }, () => {
    handlerRuns++;
  });
  try {
    const clients = await openClients(srv, CLIENTS);
    await waitFor(() => srv.gate.stats().queued === CLIENTS - LIMIT, 'everyone queued');
    // in flight and queued clients interleaved: a slot freed by a leaving client may be handed to a
    // waiter whose own close has not been read yet; that request runs and is released on its close.
    const order = clients.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    for (const i of order) clients[i].destroy();
    await waitFor(() => srv.gate.stats().inFlight === 0 && srv.gate.stats().queued === 0, 'all clients gone');
    const s = srv.gate.stats();
    assert.equal(s.released, s.admitted);
    assert.equal(s.admitted + s.abandoned, CLIENTS);
    assert.equal(handlerRuns, s.admitted);
    assert.ok(s.abandoned > 0);
  } finally {
    await srv.close();
  }
});

// A slow middleware or hook before the gate (say an async auth lookup): the client leaves while it
// runs, so the response's 'close' has fired before admit(). The gate must not take a slot that no
// event will ever give back.
for (const kind of ['express', 'fastify']) {
  test(`${kind}: a client gone before the gate runs takes no slot`, async () => {
    const LIMIT_HERE = 2;
    const options = { maxConcurrent: LIMIT_HERE, maxQueue: 10, queueTimeoutMs: 2000 };
    let reached = 0;
    let passed = 0; // aborted requests handed on to the gate (both frameworks call it synchronously)
    // holds the request until its client has gone (no timing involved)
    const untilGone = (req, res, then) => {
      reached++;
      if (req.headers['x-leave'] !== 'yes') return then();
      res.once('close', () => setImmediate(() => {
        then();
        passed++;
      }));
    };
    let gate;
    let server;
    let fastify;
    if (kind === 'express') {
      const express = require('express');
      const mw = concurrencyGate(options);
      gate = mw.gate;
      const app = express();
      app.use((req, res, next) => untilGone(req, res, next));
      app.use(mw);
      app.use((req, res) => res.end('ok'));
      server = http.createServer(app);
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    } else {
      fastify = require('fastify')({ logger: false });
      fastify.addHook('onRequest', (request, reply, done) => untilGone(request.raw, reply.raw, done));
      await fastify.register(concurrencyGatePlugin, options);
      gate = fastify.concurrencyGate;
      fastify.get('/', async () => 'ok');
      await fastify.listen({ port: 0, host: '127.0.0.1' });
      server = fastify.server;
    }
    const port = server.address().port;
    try {
      for (let i = 0; i < LIMIT_HERE + 1; i++) {
        const p = request(port, { headers: { 'x-leave': 'yes' } });
        p.catch(() => {}); // destroyed on purpose
        await waitFor(() => reached === i + 1, 'the request to reach the slow middleware');
        p.req.destroy();
      }
      await waitFor(() => passed === LIMIT_HERE + 1, 'the aborted requests to reach the gate', 5000);
      assert.equal(gate.stats().inFlight, 0);
      assert.equal(gate.stats().queued, 0);
      const ok = await request(port);
      assert.equal(ok.status, 200);
      assert.equal(ok.body, 'ok');
    } finally {
      server.closeAllConnections?.();
      if (fastify) await fastify.close();
      else await new Promise((resolve) => server.close(resolve));
    }
  });
}

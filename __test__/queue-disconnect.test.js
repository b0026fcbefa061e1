'use strict';
// 1,000 clients that disconnect while queued or in flight: every slot comes back, no queued handler runs.
const test = require('node:test');
const assert = require('node:assert/strict');
const { FRAMEWORKS, startServer, request, waitFor } = require('./queue-helpers');

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

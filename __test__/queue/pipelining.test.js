'use strict';
// Pipelined requests on connections that die: every slot and every place in the queue comes back
// exactly once, and no handler runs for a client that has already gone. Node emits neither 'finish'
// nor 'close' on the response of a pipelined request that is not yet attached to its socket, so this
// is the case a gate that watches only the response gets wrong.
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const { FRAMEWORKS, startServer, request, waitFor, sleep } = require('./helpers');

function pipelined(port, count, tag) {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (d) => {
    received += d;
  });
  socket.on('error', () => {}); // reset on purpose, or by the server after a half-close
  const closed = new Promise((resolve) => socket.once('close', resolve));
  const connected = new Promise((resolve) => socket.once('connect', resolve));
  let wire = '';
  for (let i = 0; i < count; i++) wire += `GET /p HTTP/1.1\r\nHost: x\r\nx-seq: ${tag}-${i}\r\n\r\n`;
  connected.then(() => socket.write(wire));
  return { socket, connected, closed, answers: () => (received.match(/HTTP\/1\.1 200/g) || []).length };
}

async function settled(srv) {
  await waitFor(() => srv.gate.stats().inFlight === 0 && srv.gate.stats().queued === 0, 'every slot and place back', 10_000);
}

async function freshRequestServed(srv) {
  const r = await request(srv.port, { headers: { 'x-seq': 'fresh' } });
  assert.equal(r.status, 200);
}

for (const kind of FRAMEWORKS) {
  test(`${kind}: one connection with maxConcurrent + 1 pipelined requests, destroyed, leaves no slot behind`, async () => {
    const srv = await startServer(kind, { maxConcurrent: 2 }, (req, res) => {
      setTimeout(() => res.end('ok'), 50);
    });
    try {
      const c = pipelined(srv.port, 3, 'one');
      await c.connected;
      await sleep(10);
      c.socket.destroy();
      await c.closed;
      await settled(srv);
      const s = srv.gate.stats();
      assert.equal(s.released, s.admitted);
      await freshRequestServed(srv);
    } finally {
      await srv.close();
    }
  });

  test(`${kind}: many sockets x many pipelined requests, reset, half-closed, destroyed or read: exactly once`, async () => {
    const SOCKETS = 32;
    const PER_SOCKET = 8;
    const fates = ['reset', 'half-close', 'destroy', 'read'];
    let handlerRuns = 0;
    let ranForGoneClient = 0;
    const srv = await startServer(kind, { maxConcurrent: 3, maxQueue: SOCKETS * PER_SOCKET, queueTimeoutMs: 30_000 }, (req, res) => {
      handlerRuns++;
      if (req.socket.destroyed) ranForGoneClient++;
      setTimeout(() => res.end('ok'), 1 + (handlerRuns % 7));
    });
    try {
      const conns = [];
      for (let i = 0; i < SOCKETS; i++) {
        const fate = fates[i % fates.length];
        const c = pipelined(srv.port, PER_SOCKET, `s${i}`);
        c.fate = fate;
        conns.push(c);
        c.connected.then(async () => {
          await sleep(i % 13);
          if (fate === 'reset') c.socket.resetAndDestroy();
          else if (fate === 'half-close') c.socket.end();
          else if (fate === 'destroy') c.socket.destroy();
        });
      }
      const readers = conns.filter((c) => c.fate === 'read');
      await waitFor(() => readers.every((c) => c.answers() === PER_SOCKET), 'every reading socket answered in full', 20_000);
      for (const c of conns) if (c.fate === 'read') c.socket.destroy();
      await Promise.all(conns.map((c) => c.closed));
      await settled(srv);
      const s = srv.gate.stats();
      assert.equal(s.released, s.admitted, 'each admitted request released its slot exactly once');
      assert.equal(handlerRuns, s.admitted, 'a handler ran once per admitted request');
      assert.equal(ranForGoneClient, 0, 'no handler ran for a client already gone');
      assert.ok(s.admitted >= readers.length * PER_SOCKET);
      assert.equal(s.rejected + s.timeout + s.codel, 0, 'nothing was refused: every request was admitted or dropped as gone');
      assert.ok(s.admitted + s.abandoned <= srv.arrivals.length);
      await freshRequestServed(srv);
    } finally {
      await srv.close();
    }
  });
}

'use strict';
// The gatekeeper probed as an attacker would: quotas that must not be skipped by closing the socket
// early, and route rules that must classify the path the framework routes.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const express = require('express');
const { gatekeeper } = require('..');
const { listen, close } = require('./helpers/http');
const { waitFor } = require('./queue-helpers');

test('a client that closes its socket before the gatekeeper runs still pays its per-IP quota', async () => {
  const CLIENTS = 20;
  let handlerRuns = 0;
  let decisions = 0;
  const app = express();
  app.use(async (req, res, next) => {
    await new Promise((resolve) => setTimeout(resolve, 20)); // e.g. a session lookup; the client leaves meanwhile
    next();
  });
  app.use(gatekeeper({ perKey: { capacity: 1, refillPerSec: 0.001 }, shed: false, onDecision: () => decisions++ }));
  app.post('/', (req, res) => {
    handlerRuns++;
    res.send('ok');
  });
  const server = http.createServer(app);
  const port = await listen(server);
  try {
    for (let i = 0; i < CLIENTS; i++) {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.end('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n', () => socket.destroy());
      });
      socket.on('error', () => {});
    }
    await waitFor(() => decisions === CLIENTS, `${CLIENTS} decisions`);
    // One quota of 1 for the address the socket reported, one for the shared unusable-IP key.
    assert.ok(handlerRuns <= 2, `the handler ran ${handlerRuns} times against a per-IP quota of 1`);
  } finally {
    await close(server);
  }
});

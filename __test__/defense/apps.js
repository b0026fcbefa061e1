'use strict';
// The same small app on Express 4, Express 5, Fastify 5 and node:http, guarded by a gatekeeper built
// from the given options: GET /hello and /api/* (200 JSON), POST /login (200), GET /slow (answers
// when `release()` is called), and anything else 404 as the framework answers unknown routes.
const http = require('node:http');
const express4 = require('express4');
const express5 = require('express');
const fastify = require('fastify');
const { gatekeeper, tiergatePlugin } = require('../..');
const { listen, close } = require('../helpers/http');

function slowGate() {
  let waiting = [];
  return {
    wait: () => new Promise((resolve) => waiting.push(resolve)),
    release() {
      const w = waiting;
      waiting = [];
      for (const r of w) r();
    },
    get count() {
      return waiting.length;
    },
  };
}

async function expressApp(express, options) {
  const slow = slowGate();
  const app = express();
  const gate = gatekeeper(options);
  app.use(gate);
  app.get('/hello', (req, res) => res.json({ ok: true, rateLimit: req.rateLimit || null }));
  app.get('/api/:x', (req, res) => res.json({ ok: true }));
  app.post('/login', (req, res) => res.json({ ok: true }));
  app.get('/slow', async (req, res) => {
    await slow.wait();
    res.json({ ok: true });
  });
  const server = http.createServer(app);
  return { gate, defense: gate.defense, slow, port: await listen(server), stop: () => close(server) };
}

const FRAMEWORKS = {
  'express 4': (options) => expressApp(express4, options),
  'express 5': (options) => expressApp(express5, options),
  async 'fastify 5'(options) {
    const slow = slowGate();
    const app = fastify();
    await app.register(tiergatePlugin, options);
    app.get('/hello', async (request) => ({ ok: true, rateLimit: request.raw.rateLimit || null }));
    app.get('/api/:x', async () => ({ ok: true }));
    app.post('/login', async () => ({ ok: true }));
    app.get('/slow', async () => {
      await slow.wait();
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { gate: app.tiergate, defense: app.tiergate.defense, slow, port: app.server.address().port, stop: () => app.close() };
  },
  async 'node:http'(options) {
    const slow = slowGate();
    const json = (req, res, body) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body));
    };
    const gate = gatekeeper.http(options, async (req, res) => {
      const path = req.url.split('?')[0];
      if (req.method === 'GET' && path === '/hello') return json(req, res, { ok: true, rateLimit: req.rateLimit || null });
      if (req.method === 'GET' && path.startsWith('/api/')) return json(req, res, { ok: true });
      if (req.method === 'POST' && path === '/login') return json(req, res, { ok: true });
      if (req.method === 'GET' && path === '/slow') {
        await slow.wait();
        return json(req, res, { ok: true });
      }
      res.statusCode = 404;
      res.end('not found');
    });
    const server = http.createServer(gate);
    return { gate, defense: gate.defense, slow, server, port: await listen(server), stop: () => close(server) };
  },
};

module.exports = { FRAMEWORKS };

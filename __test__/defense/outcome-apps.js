'use strict';
// A login and an LLM endpoint on Express 5, Express 4, Fastify 5 and node:http, guarded by a gatekeeper
// built from the given options:
// - POST /login: 200 with `x-password: right`, else 401; while `hold` is on, answers only when
//   `release()` is called (so a burst is in flight at once);
// - GET /llm?tokens=N: reports N units to the limit named `llm` (`gate.limits.charge`), then 200;
// - GET /hello: 200.
const http = require('node:http');
const express4 = require('express4');
const express5 = require('express');
const fastify = require('fastify');
const { gatekeeper, tiergatePlugin } = require('../..');
const { listen, close } = require('../helpers/http');

function holder() {
  let waiting = [];
  return {
    on: false,
    wait() {
      return this.on ? new Promise((resolve) => waiting.push(resolve)) : null;
    },
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

const loginStatus = (headers) => (headers['x-password'] === 'right' ? 200 : 401);
const tokensOf = (url) => Number(new URL(url, 'http://x').searchParams.get('tokens'));

async function expressApp(express, options) {
  const hold = holder();
  const app = express();
  const gate = gatekeeper(options);
  app.use(gate);
  app.post('/login', async (req, res) => {
    await hold.wait();
    res.status(loginStatus(req.headers)).json({ ok: true });
  });
  app.get('/llm', (req, res) => {
    gate.limits.charge(req, 'llm', tokensOf(req.url));
    res.json({ ok: true });
  });
  app.get('/hello', (req, res) => res.json({ ok: true }));
  const server = http.createServer(app);
  return { gate, hold, port: await listen(server), stop: () => close(server) };
}

const FRAMEWORKS = {
  'express 5': (options) => expressApp(express5, options),
  'express 4': (options) => expressApp(express4, options),
  async 'fastify 5'(options) {
    const hold = holder();
    const app = fastify();
    await app.register(tiergatePlugin, options);
    app.post('/login', async (request, reply) => {
      await hold.wait();
      reply.code(loginStatus(request.headers));
      return { ok: true };
    });
    app.get('/llm', async (request) => {
      app.tiergate.limits.charge(request.raw, 'llm', tokensOf(request.url));
      return { ok: true };
    });
    app.get('/hello', async () => ({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { gate: app.tiergate, hold, port: app.server.address().port, stop: () => app.close() };
  },
  async 'node:http'(options) {
    const hold = holder();
    const end = (res, status) => {
      res.statusCode = status;
      res.setHeader('content-type', 'application/json');
      res.end('{"ok":true}');
    };
    const gate = gatekeeper.http(options, async (req, res) => {
      const path = req.url.split('?')[0];
      if (req.method === 'POST' && path === '/login') {
        await hold.wait();
        return end(res, loginStatus(req.headers));
      }
      if (path === '/llm') {
        gate.limits.charge(req, 'llm', tokensOf(req.url));
        return end(res, 200);
      }
      return end(res, path === '/hello' ? 200 : 404);
    });
    const server = http.createServer(gate);
    return { gate, hold, port: await listen(server), stop: () => close(server) };
  },
};

module.exports = { FRAMEWORKS };

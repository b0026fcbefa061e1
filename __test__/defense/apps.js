'use strict';
// The same small app on Express 4, Express 5, Fastify 5 and node:http, guarded by a gatekeeper built
// from the given options (`app.gate`, `app.defense`), every route answering JSON:
// - GET /hello: 200 with `rateLimit` (req.rateLimit); GET /api/:x: 200;
// - POST /login: 401 with an `x-password` other than `right`, else 200; while `hold.on`, answers only
//   when `hold.release()` is called (so a burst is in flight at once);
// - GET /slow: answers when `hold.release()` is called;
// - GET /llm?tokens=N: reports N units to the limit named `llm` (`gate.limits.charge`), then 200;
// - anything else 404, as the framework answers unknown routes.
const http = require('node:http');
const express4 = require('express4');
const express5 = require('express');
const fastify = require('fastify');
const { gatekeeper, tiergatePlugin } = require('../..');
const { listen, close } = require('../helpers/http');

/** Requests waiting for `release()`; `on` holds the logins too. */
function holder() {
  let waiting = [];
  return {
    on: false,
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

const OK = { status: 200, body: { ok: true } };
const loginStatus = (headers) => (headers['x-password'] === undefined || headers['x-password'] === 'right' ? 200 : 401);
const tokensOf = (url) => Number(new URL(url, 'http://x').searchParams.get('tokens'));

/** The routes, each answering (gate, node's req) with { status, body } or a promise of it. */
function routes(hold) {
  return [
    { method: 'GET', path: '/hello', answer: (gate, req) => ({ status: 200, body: { ok: true, rateLimit: req.rateLimit || null } }) },
    { method: 'GET', path: '/api/:x', answer: () => OK },
    {
      method: 'POST',
      path: '/login',
      async answer(gate, req) {
        if (hold.on) await hold.wait();
        return { status: loginStatus(req.headers), body: { ok: true } };
      },
    },
    { method: 'GET', path: '/slow', answer: () => hold.wait().then(() => OK) },
    {
      method: 'GET',
      path: '/llm',
      answer(gate, req) {
        gate.limits.charge(req, 'llm', tokensOf(req.url));
        return OK;
      },
    },
  ];
}

async function expressApp(express, options) {
  const hold = holder();
  const app = express();
  const gate = gatekeeper(options);
  app.use(gate);
  for (const r of routes(hold)) {
    app[r.method.toLowerCase()](r.path, async (req, res) => {
      const a = await r.answer(gate, req);
      res.status(a.status).json(a.body);
    });
  }
  const server = http.createServer(app);
  return { gate, defense: gate.defense, hold, port: await listen(server), stop: () => close(server) };
}

/** node:http's own routing: a path ending in a `:param` segment matches any path below its prefix. */
function nodeRoute(list, method, path) {
  return list.find((r) => r.method === method && (r.path.includes('/:') ? path.startsWith(r.path.slice(0, r.path.indexOf(':'))) : path === r.path));
}

const FRAMEWORKS = {
  'express 4': (options) => expressApp(express4, options),
  'express 5': (options) => expressApp(express5, options),
  async 'fastify 5'(options) {
    const hold = holder();
    const app = fastify();
    await app.register(tiergatePlugin, options);
    for (const r of routes(hold)) {
      app.route({
        method: r.method,
        url: r.path,
        async handler(request, reply) {
          const a = await r.answer(app.tiergate, request.raw);
          reply.code(a.status);
          return a.body;
        },
      });
    }
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { gate: app.tiergate, defense: app.tiergate.defense, hold, port: app.server.address().port, stop: () => app.close() };
  },
  async 'node:http'(options) {
    const hold = holder();
    const list = routes(hold);
    const gate = gatekeeper.http(options, async (req, res) => {
      const r = nodeRoute(list, req.method, req.url.split('?')[0]);
      if (r === undefined) {
        res.statusCode = 404;
        return res.end('not found');
      }
      const a = await r.answer(gate, req);
      res.statusCode = a.status;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(a.body));
    });
    const server = http.createServer(gate);
    return { gate, defense: gate.defense, hold, server, port: await listen(server), stop: () => close(server) };
  },
};

module.exports = { FRAMEWORKS };

'use strict';
// Shared by the queue test files: one real server per framework (node:http, Express 5, Express 4,
// Fastify 5, Koa 2, Koa 3) with the concurrency gate in front of a handler written once in node:http shape.
const http = require('node:http');
const { performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const { concurrencyGate, concurrencyGatePlugin } = require('../..');

const FRAMEWORKS = ['http', 'express', 'express4', 'fastify', 'koa', 'koa3'];

/**
 * Starts a server on 127.0.0.1:0. `handler(req, res)` may return a promise; errors it throws become a
 * 500 through each framework's own error path. Records the server-side arrival order of `x-seq`.
 */
async function startServer(kind, options, handler) {
  let server;
  let gate;
  let fastify;
  if (kind === 'http') {
    const h = concurrencyGate.http(options, handler);
    gate = h.gate;
    server = http.createServer(h);
  } else if (kind === 'express' || kind === 'express4') {
    const express = require(kind);
    const app = express();
    app.set('env', 'test'); // the final error handler would log every expected 500
    const mw = concurrencyGate(options);
    gate = mw.gate;
    app.use(mw);
    app.use((req, res, next) => {
      const out = handler(req, res); // a synchronous throw reaches Express's own error handler
      if (out && typeof out.then === 'function') out.then(undefined, next);
    });
    server = http.createServer(app);
  } else if (kind === 'fastify') {
    fastify = require('fastify')({ logger: false });
    await fastify.register(concurrencyGatePlugin, options);
    gate = fastify.concurrencyGate;
    fastify.route({
      method: ['GET', 'POST'],
      url: '/*',
      handler: (request, reply) => {
        const out = handler(request.raw, reply.raw); // throws and rejections reach Fastify's error handler (500)
        if (out && typeof out.then === 'function') return out.then(() => reply.hijack());
        reply.hijack();
      },
    });
  } else if (kind === 'koa' || kind === 'koa3') {
    const Koa = require(kind);
    const app = new Koa();
    app.silent = true; // Koa's default error handler would log every expected 500
    const mw = concurrencyGate.koa(options);
    gate = mw.gate;
    app.use(mw);
    app.use((ctx) => {
      ctx.respond = false; // the handler writes the response; its throw or rejection reaches Koa's error handler (500)
      ctx.res.statusCode = 200; // node's default, which Koa sets to 404 until a body is given
      return handler(ctx.req, ctx.res);
    });
    server = http.createServer(app.callback());
  } else {
    throw new Error(`unknown framework ${kind}`);
  }
  const arrivals = [];
  if (fastify) {
    fastify.server.prependListener('request', (req) => arrivals.push(req.headers['x-seq']));
    await fastify.listen({ port: 0, host: '127.0.0.1', backlog: 2048 });
    server = fastify.server;
  } else {
    server.prependListener('request', (req) => arrivals.push(req.headers['x-seq']));
    await new Promise((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 2048 }, resolve));
  }
  return {
    port: server.address().port,
    gate,
    arrivals,
    server,
    async close() {
      server.closeAllConnections?.();
      if (fastify) await fastify.close();
      else await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** One request on its own connection; `.req` lets a test disconnect the client. */
function request(port, { path = '/', headers = {}, method = 'GET' } = {}) {
  const t0 = performance.now();
  let req;
  const done = new Promise((resolve, reject) => {
    req = http.request({ host: '127.0.0.1', port, path, method, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => {
        body += d;
      });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body, ms: performance.now() - t0, at: performance.now() }));
    });
    req.on('error', reject);
    req.end();
  });
  done.req = req;
  return done;
}

/** Waits (bounded) until `cond()` is true. */
async function waitFor(cond, what, timeoutMs = 10_000) {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** A handler whose requests stay in flight until the test lets them go, recording start order. */
function heldHandler() {
  const started = [];
  const pending = [];
  const handler = (req, res) => {
    started.push(req.headers['x-seq']);
    pending.push(res);
  };
  return {
    handler,
    started,
    pending,
    releaseOne(body = 'ok') {
      const res = pending.shift();
      res.end(body);
    },
  };
}

module.exports = { FRAMEWORKS, startServer, request, waitFor, heldHandler, sleep };

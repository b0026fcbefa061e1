'use strict';
// The gatekeeper probed as an attacker would: quotas that must not be skipped by closing the socket
// early, and route rules that must classify the path the framework routes.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const express = require('express');
const { gatekeeper } = require('../..');
const { listen, close } = require('../helpers/http');
const { waitFor } = require('../queue/helpers');

test('a client that closes its socket before the gatekeeper runs still pays its per-IP quota', async () => {
  const CLIENTS = 20;
  let handlerRuns = 0;
  let decisions = 0;
  const app = express();
  app.use(async (req, res, next) => {
    await new Promise((resolve) => setTimeout(resolve, 20)); // e.g. a session lookup; the client leaves meanwhile
    next();
  });
  app.use(gatekeeper({ perKey: { limit: 1, windowMs: 1e6 }, shed: false, onDecision: () => decisions++ }));
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

// Targets an attacker would try: authority ending at '?', backslashes, escapes, case, dot segments.
const TARGETS = [
  '/payments/1', '/reports/1', '/reports/1?x', '/reports/1#x', '/', '/other',
  'http://x/payments/1', 'HTTP://x:80/reports/1', 'https://x/reports/1?a=1', 'http://x?/payments/1', 'http://x?/reports/1',
  'http://x/reports\\1', '/reports\\1', 'http://x\\reports/1', 'http://x/payments\\1?\\',
  '/%72eports/1', '/re%70orts/1', '/%70ayments/1', '/%50ayments/1', '/reports%2F1', '/re%2570orts/1', '/reports%5c1',
  '/REPORTS/1', '/Payments/1', '/x/../reports/1', '/./reports/1', '/reports/./1', '/%2e%2e/reports/1', '/a/%2e%2e/reports/1',
  '/reports/../payments/1', '//reports/1', '/reports;a/1', '/reportsx/1', '/paymentsx',
];

function rawGet(port, target) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => {
      data += d;
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      const status = Number((/^HTTP\/1\.1 (\d{3})/.exec(data) || [])[1]);
      const body = data.slice(data.indexOf('\r\n\r\n') + 4);
      resolve({ status, served: /^(PAY|REP)$/.test(body) ? body : 'other' });
    });
  });
}

const ROUTING_RULES = { routes: [{ path: '/payments/', tier: 'critical' }, { path: '/reports/', tier: 'background' }], defaultTier: 'standard', shed: false };

async function routingServer(kind, onDecision) {
  const options = { ...ROUTING_RULES, onDecision };
  if (kind === 'fastify') {
    const fastify = require('fastify')({ logger: false });
    await fastify.register(require('../..').tiergatePlugin, options);
    fastify.get('/payments/:id', async () => 'PAY');
    fastify.get('/reports/:id', async () => 'REP');
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    return { port: fastify.server.address().port, close: () => fastify.close() };
  }
  let server;
  if (kind === 'koa' || kind === 'koa3') {
    const app = new (require(kind))();
    app.use(gatekeeper.koa(options));
    const router = new (require('@koa/router'))();
    router.get('/payments/:id', (ctx) => {
      ctx.body = 'PAY';
    });
    router.get('/reports/:id', (ctx) => {
      ctx.body = 'REP';
    });
    app.use(router.routes());
    server = http.createServer(app.callback());
  } else if (kind === 'http') {
    // An application routing on the WHATWG URL's decoded path: the node:http dialect must classify
    // at least everything such a router serves.
    server = http.createServer(gatekeeper.http(options, (req, res) => {
      let path;
      try {
        path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
      } catch {
        path = '';
      }
      res.end(/^\/payments\/[^/]+$/i.test(path) ? 'PAY' : /^\/reports\/[^/]+$/i.test(path) ? 'REP' : 'none');
    }));
  } else {
    const app = require(kind)();
    app.use(gatekeeper(options));
    app.get('/payments/:id', (req, res) => res.send('PAY'));
    app.get('/reports/:id', (req, res) => res.send('REP'));
    server = http.createServer(app);
  }
  const port = await listen(server);
  return { port, close: () => close(server) };
}

for (const kind of ['express', 'express4', 'fastify', 'koa', 'koa3', 'http']) {
  test(`${kind}: route rules classify the path the router serves, however the target is spelled`, async () => {
    let tier;
    const srv = await routingServer(kind, (info) => {
      tier = info.tier;
    });
    const wrong = [];
    try {
      for (const target of TARGETS) {
        tier = undefined;
        const { status, served } = await rawGet(srv.port, target);
        if (tier === undefined) continue; // refused by node's parser: no handler ran
        // What the router served carries the rule's tier (no background route reached as standard),
        // and nothing else is critical (no tier picked by spelling). On node:http the application's
        // router is unknown, so only the first is required there.
        if (served === 'PAY' && tier !== 'critical') wrong.push(`${target}: served PAY as ${tier}`);
        if (served === 'REP' && tier !== 'background') wrong.push(`${target}: served REP as ${tier}`);
        if (kind !== 'http' && served === 'other' && tier === 'critical') wrong.push(`${target}: served ${status} (not the payments route) as critical`);
      }
    } finally {
      await srv.close();
    }
    assert.deepEqual(wrong, []);
  });
}

// Node keeps only the first headers (maxHeadersCount); a gateway appends its own after the client's.
function paddedRequest(port, gatewayHeaders, padding) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      let head = 'GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n';
      for (let i = 0; i < padding; i++) head += `x-pad-${i}: 1\r\n`;
      for (const [k, v] of Object.entries(gatewayHeaders)) head += `${k}: ${v}\r\n`;
      socket.write(`${head}\r\n`);
    });
    let data = '';
    socket.on('data', (d) => {
      data += d;
    });
    socket.on('error', () => {});
    socket.on('close', () => resolve(Number((/^HTTP\/1\.1 (\d{3})/.exec(data) || [])[1])));
  });
}

test('a request whose headers node truncated is not trusted: no tier from its header, no address from X-Forwarded-For', async () => {
  const seen = [];
  const app = express();
  app.use(gatekeeper({
    trustTierHeader: true,
    trustProxy: 1,
    defaultTier: 'standard',
    perKey: { limit: 100, windowMs: 1e8 },
    shed: false,
    onDecision: (info) => seen.push([info.tier, info.tierSource, info.key]),
  }));
  app.get('/', (req, res) => res.send('ok'));
  const server = http.createServer(app);
  server.maxHeadersCount = 50; // the same cut as node's default of 2,000, at a size a test sends quickly
  const port = await listen(server);
  try {
    const gatewaySays = { 'x-user-tier': 'critical', 'x-forwarded-for': '203.0.113.7' };
    assert.equal(await paddedRequest(port, gatewaySays, 3), 200);
    assert.equal(await paddedRequest(port, gatewaySays, 60), 200);
    assert.deepEqual(seen, [['critical', 'header', '203.0.113.7'], ['background', 'truncated', '']]);
  } finally {
    await close(server);
  }
});

test("node's default cut (1,000 headers on node 20) is detected too", async () => {
  const seen = [];
  // 2,100 headers take more than node's default 16 KiB header limit, which a deployment may raise.
  const server = http.createServer({ maxHeaderSize: 65536 }, gatekeeper.http({ trustTierHeader: true, shed: false, onDecision: (info) => seen.push(info.tierSource) }, (req, res) => res.end('ok')));
  const port = await listen(server);
  try {
    assert.equal(await paddedRequest(port, { 'x-user-tier': 'critical' }, 2100), 200);
    assert.deepEqual(seen, ['truncated']);
  } finally {
    await close(server);
  }
});

test('onShed reports overload sheds only; a tier budget running out on a healthy loop goes to onReject', async () => {
  const shed = [];
  const rejected = [];
  const handler = gatekeeper.http({
    tiers: [{ name: 'critical', protected: true, limit: 100, windowMs: 1000 }, { name: 'standard', limit: 1, windowMs: 1e6 }],
    shed: false,
    onShed: (info) => shed.push(info.verdict),
    onReject: (info) => rejected.push(info.verdict),
  }, (req, res) => res.end('ok'));
  const server = http.createServer(handler);
  const port = await listen(server);
  try {
    assert.equal((await rawGet(port, '/')).status, 200);
    assert.equal((await rawGet(port, '/')).status, 503);
    assert.deepEqual(rejected, ['tier-full']);
    assert.deepEqual(shed, []);
  } finally {
    await close(server);
  }
});

test('X-Forwarded-For with trustProxy off warns once, with a code', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  const handler = gatekeeper.http({ perKey: { limit: 10, windowMs: 10000 }, shed: false }, (req, res) => res.end('ok'));
  const server = http.createServer(handler);
  const port = await listen(server);
  try {
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => {
        http.get({ host: '127.0.0.1', port, headers: { 'x-forwarded-for': '203.0.113.1' } }, (res) => res.resume().on('end', resolve));
      });
    }
    await new Promise((resolve) => setImmediate(resolve));
    const ours = warnings.filter((w) => w.code === 'ERR_TIERGATE_UNEXPECTED_X_FORWARDED_FOR');
    assert.equal(ours.length, 1);
    assert.match(ours[0].message, /trustProxy/);
  } finally {
    process.off('warning', onWarning);
    await close(server);
  }
});

test('a throwing hook warns once per hook, not once for all; a queue classify() that returns junk warns and falls through', async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w.message);
  process.on('warning', onWarning);
  const { concurrencyGate } = require('../..');
  const gate = concurrencyGate.http({ maxConcurrent: 2, classify: () => 42 }, (req, res) => res.end('ok'));
  const handler = gatekeeper.http({
    tiers: [{ name: 'only', limit: 1, windowMs: 1e6 }],
    shed: false,
    onDecision: () => {
      throw new Error('decision hook broke');
    },
    onReject: () => {
      throw new Error('reject hook broke');
    },
  }, (req, res) => gate(req, res));
  const server = http.createServer(handler);
  const port = await listen(server);
  try {
    assert.equal((await rawGet(port, '/')).status, 200, 'classify() junk: served in the default tier');
    assert.equal((await rawGet(port, '/')).status, 503);
    assert.equal((await rawGet(port, '/')).status, 503);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(warnings.filter((m) => /options\.onDecision threw/.test(m)).length, 1);
    assert.equal(warnings.filter((m) => /options\.onReject threw/.test(m)).length, 1);
    assert.equal(warnings.filter((m) => /classify\(req\) returned 42/.test(m)).length, 1);
  } finally {
    process.off('warning', onWarning);
    await close(server);
  }
});

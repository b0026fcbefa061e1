'use strict';
// Small helpers for gatekeeper tests: listen on 127.0.0.1:0, make one request with a timeout, serve
// a handler to tiered GETs over warm keep-alive connections.
const http = require('node:http');

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address().port));
  });
}

function close(server) {
  return new Promise((resolve) => {
    if (typeof server.closeAllConnections === 'function') server.closeAllConnections();
    server.close(() => resolve());
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One request; resolves { status, headers, body, json } or rejects after `timeoutMs`. */
function request(port, { method = 'GET', path = '/', headers = {}, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        let json;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, body, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`request ${method} ${path} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Serves `handler` on 127.0.0.1 through a keep-alive agent of `connections` sockets, closed after the
 * test `t`; `get(path, tier)` resolves the status of a GET carrying `x-user-tier: tier`.
 */
async function serveTiers(t, handler, connections) {
  const server = http.createServer(handler);
  const port = await listen(server);
  const tierAgent = new http.Agent({ keepAlive: true, maxSockets: connections });
  t.after(() => {
    tierAgent.destroy();
    return close(server);
  });
  const get = (path, tier) =>
    new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path, agent: tierAgent, headers: { 'x-user-tier': tier } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', reject);
    });
  return { port, get };
}

module.exports = { listen, close, request, agent, serveTiers };

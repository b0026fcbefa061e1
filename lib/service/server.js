'use strict';
// The decision service on node:http: options → store → routes, request ids, CORS, access logs, and
// a drain on close (stop accepting, finish what is in flight, flush the activity, close the store).
const http = require('node:http');
const { once } = require('node:events');
const { randomUUID } = require('node:crypto');
const config = require('./config');
const { createLogger } = require('./log');
const { HttpError, requestId, sendError, sendJson } = require('./http');
const { bearer } = require('./auth');
const { AuthFailures } = require('./auth-failures');
const { match, check } = require('./routes');
const { Decisions } = require('./decisions');
const { ActivityWriter } = require('./activity');
const { ServiceMetrics } = require('./metrics');
const { dashboard } = require('../dashboard');
const { LagMonitor } = require('../lag');

const HOUR_MS = 3_600_000;
const CHECK_PATH = '/api/v1/rate-limit/check';
// The dashboard's data, behind the admin token (its files are public).
const DASHBOARD_API = '/api/dashboard/';
// How often node looks for connections past headersTimeoutMs or requestTimeoutMs: each takes effect
// within this much of its value (node's default, 30 s, had let a 10 s header timeout run to 40 s).
const CONNECTIONS_CHECK_MS = 1000;
// How long aggregated buckets are kept, by resolution: the analytics ranges read within these.
const BUCKET_AGE_MS = Object.freeze({ second: 2 * HOUR_MS, minute: 30 * 24 * HOUR_MS });

function openStore(options) {
  if (options.database) {
    const { PostgresStore } = require('./stores/postgres');
    const { poolSize, storeTimeoutMs, pgLockTimeoutMs, pgIdleInTransactionTimeoutMs, pgStatementTimeoutMs } = options;
    return new PostgresStore({ connectionString: options.database, poolSize, storeTimeoutMs, pgLockTimeoutMs, pgIdleInTransactionTimeoutMs, pgStatementTimeoutMs });
  }
  const { SqliteStore } = require('./stores/sqlite');
  return new SqliteStore({ dataDir: options.data });
}

function corsHeaders(origins, req, res) {
  const origin = req.headers.origin;
  if (!origin || origins.length === 0) return false;
  const allowed = origins.includes('*') ? '*' : origins.includes(origin) ? origin : null;
  if (!allowed) return false;
  res.setHeader('Access-Control-Allow-Origin', allowed);
  res.setHeader('Vary', 'Origin');
  res.setHeader('Access-Control-Expose-Headers', 'X-Request-ID, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, RateLimit, RateLimit-Policy');
  return true;
}

/** A decision service, not yet listening: `await service.start()`, then `await service.close()`. */
function createService(explicit = {}, env = process.env) {
  const options = config.resolve(explicit, env);
  const log = createLogger(options.logLevel);
  const store = openStore(options);
  // The dashboard at / (its data behind the same admin token): the service's pages, and the live
  // page for this process's event loop.
  const lag = new LagMonitor({ stallMs: 1000 });
  const authFailures = new AuthFailures();
  const ctx = {
    options,
    log,
    store,
    metrics: new ServiceMetrics(),
    decisions: new Decisions(store, { log, timeoutMs: options.storeTimeoutMs }),
    activity: null,
    adminAuth: bearer([options.adminToken], 'tiergate-admin'),
    checkAuth: options.apiKeys.length ? bearer(options.apiKeys, 'tiergate-check') : null,
    storeLatencyMs: null,
    inFlight: 0,
    draining: false,
    dashboard: dashboard({ token: options.adminToken, lag, service: { apiBase: '/api/v1' } }),
    authenticate,
  };

  /**
   * Runs a bearer `check` on the request, unless its address has failed too often lately: then a 429
   * with Retry-After, the credential unread. A refused credential counts against the address
   * (./auth-failures.js).
   */
  function authenticate(req, check) {
    const address = req.socket.remoteAddress;
    if (address === undefined) { check(req); return; } // the peer is gone: no address to slow down
    const now = Date.now();
    const wait = authFailures.waitMs(address, now);
    if (wait > 0) {
      const seconds = Math.ceil(wait / 1000);
      const err = new HttpError(429, 'TOO_MANY_AUTH_FAILURES', `too many failed credentials from this address: retry after ${seconds} s`);
      err.headers = { 'Retry-After': String(seconds) };
      throw err;
    }
    try {
      check(req);
    } catch (err) {
      // A request without a credential guesses nothing: only a refused one counts.
      if (req.headers.authorization !== undefined) authFailures.fail(address, now);
      throw err;
    }
  }

  /** Answers a request that failed: an HttpError as it is, anything else as a 500 with no detail. */
  function fail(res, err) {
    if (res.headersSent) { res.destroy(); return; }
    if (err instanceof HttpError) {
      sendError(res, err);
      return;
    }
    // Anything else is a bug or a store failure: logged here, never shown to the caller.
    log.error('request failed', { requestId: res.requestId, error: String(err && err.stack) });
    sendError(res, new HttpError(500, 'INTERNAL_ERROR', 'the service could not handle this request'));
  }

  // One 'close' listener for every response (`this` is the response): no closure per request.
  function closed() {
    const res = this;
    ctx.inFlight--;
    ctx.metrics.response(res.route, res.statusCode);
    if (log.enabled('info')) {
      const { req } = res;
      log.info('request', { requestId: res.requestId, method: req.method, path: req.url.split('?', 1)[0], status: res.statusCode, durationMs: Math.round(Number(process.hrtime.bigint() - req.startedAt) / 1e3) / 1e3 });
    }
  }

  async function handle(req, res) {
    const q = req.url.indexOf('?');
    const pathname = q < 0 ? req.url : req.url.slice(0, q);
    req.search = q < 0 ? '' : req.url.slice(q + 1);
    const cors = corsHeaders(options.corsOrigins, req, res);
    if (req.method === 'OPTIONS' && cors) {
      res.setHeader('Access-Control-Allow-Methods', 'GET, POST, PUT, DELETE, OPTIONS');
      res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type, X-Request-ID');
      res.setHeader('Access-Control-Max-Age', '600');
      res.statusCode = 204;
      res.end();
      return 'preflight';
    }
    const found = match(req.method, pathname);
    // The dashboard checks the same token; checked here first, its failures count like the API's.
    if (!found && pathname.startsWith(DASHBOARD_API)) authenticate(req, ctx.adminAuth);
    if (!found && ctx.dashboard.handle(req, res)) {
      res.route = 'dashboard';
      return 'dashboard';
    }
    if (!found) throw new HttpError(404, 'NOT_FOUND', `no endpoint ${req.method} ${pathname}`);
    if (found.allow) {
      const err = new HttpError(405, 'METHOD_NOT_ALLOWED', `${pathname} accepts ${found.allow.join(', ')}`);
      err.headers = { Allow: found.allow.join(', ') };
      throw err;
    }
    res.route = found.route.pattern;
    if (found.route.admin) authenticate(req, ctx.adminAuth);
    await found.route.handler(ctx, req, res, found.params);
  }

  const server = http.createServer({
    requestTimeout: options.requestTimeoutMs,
    headersTimeout: options.headersTimeoutMs,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    connectionsCheckingInterval: CONNECTIONS_CHECK_MS,
  }, (req, res) => {
    req.startedAt = process.hrtime.bigint();
    res.requestId = requestId(req);
    res.route = 'unmatched';
    if (ctx.draining) res.setHeader('Connection', 'close');
    ctx.inFlight++;
    res.on('close', closed);
    if (req.method === 'POST' && req.url === CHECK_PATH) {
      // The check goes straight to its handler (no router). Its answer puts the id in its one
      // writeHead: a setHeader first would send node down writeHead's slower merging path.
      res.idInHead = true;
      res.route = CHECK_PATH;
      corsHeaders(options.corsOrigins, req, res);
      check(ctx, req, res).catch((err) => fail(res, err));
      return;
    }
    res.setHeader('X-Request-ID', res.requestId);
    handle(req, res).catch((err) => fail(res, err));
  });
  server.maxConnections = options.maxConnections;
  server.on('clientError', (err, socket) => {
    // A request the parser could not read, or that took too long: no handler runs, but the answer
    // still carries an id (and says which, as node's own answer would).
    const code = err && err.code;
    const status = code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
    if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nX-Request-ID: ${randomUUID()}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  });

  let address = null;
  return {
    options,
    server,
    get url() { return address && `http://${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`; },

    async start() {
      await store.open();
      lag.start();
      ctx.activity = new ActivityWriter(store, {
        flushMs: options.activityFlushMs,
        pruneMs: options.pruneIntervalMs,
        maxBuffered: options.activityMaxBuffered,
        retention: { maxAgeMs: options.activityMaxAgeHours * HOUR_MS, maxRows: options.activityMaxRows, bucketAgeMs: BUCKET_AGE_MS },
        log,
      });
      server.listen(options.port, options.host);
      await once(server, 'listening');
      const a = server.address();
      address = { host: a.address, port: a.port };
      return address;
    },

    /** Stops accepting, lets in-flight requests finish (up to drainTimeoutMs), flushes, closes the store. */
    async close() {
      if (ctx.draining) return;
      ctx.draining = true;
      ctx.dashboard.close(); // its live streams would otherwise hold the drain open to the timeout
      const closed = new Promise((resolve) => server.close(resolve));
      // A kept-alive connection whose request finishes during the drain becomes idle: close it then,
      // rather than after the keep-alive timeout.
      server.closeIdleConnections();
      const idler = setInterval(() => server.closeIdleConnections(), 25);
      let timer;
      const late = new Promise((resolve) => { timer = setTimeout(resolve, options.drainTimeoutMs); });
      await Promise.race([closed, late]);
      clearTimeout(timer);
      clearInterval(idler);
      server.closeAllConnections();
      await ctx.decisions.idle();
      if (ctx.activity) {
        ctx.activity.stop();
        await ctx.activity.flush().catch((err) => log.error('final activity flush failed', { error: String(err && err.message) }));
      }
      await store.close();
      lag.stop();
    },
  };
}

module.exports = { createService, sendJson };

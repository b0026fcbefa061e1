'use strict';
// The dashboard: one static web app (./public, no build step) and the few JSON/SSE endpoints it
// reads, mountable in the application (Express middleware, node:http handler, Fastify plugin) and
// served by the decision service at `/`. Every data endpoint requires the admin token; the files of
// the app itself carry no data.
//
//   GET  ./                         the app (index.html, scripts, styles, vendored uPlot)
//   GET  ./api/dashboard/info       what is observed: tiers, components, sampling, the service's API base
//   GET  ./api/dashboard/history    the samples kept (the last `historySec` seconds)
//   GET  ./api/dashboard/stream     Server-Sent Events: `history` once, then one `sample` per interval
//   GET  ./api/dashboard/stats      every component's stats() now
const { buildingOptions } = require('../errors');
const { onlyKnown, isObject, typeName, optionOrDefault } = require('../options');
const { DASHBOARD } = require('../schema/dashboard');
const { optionNames } = require('../schema');
const { components, FIELDS } = require('../metrics/components');
const { Health, allStats } = require('../metrics/status');
const { tokenOption, authorized } = require('./auth');
const { serveFile, SECURITY_HEADERS } = require('./files');
const { Sampler } = require('./sampler');

const OPTIONS = optionNames(DASHBOARD);
const SERVICE_OPTIONS = new Set(['apiBase']);
const PATH = /^\/[A-Za-z0-9._~/-]*$/;
const HEARTBEAT_MS = 15_000;
/** Bytes a live stream may have waiting for a slow reader before it is closed. */
const MAX_BUFFERED_BYTES = 1 << 20;

function pathOption(v, at, { allowRoot }) {
  if (typeof v !== 'string' || !PATH.test(v) || (!allowRoot && v === '/') || (v.length > 1 && v.endsWith('/'))) {
    throw new TypeError(`${at} must be a path like "/tiergate" (no trailing slash), got ${JSON.stringify(v)}`);
  }
  return v;
}

function parse(options) {
  if (!isObject(options)) throw new TypeError(`dashboard: options must be an object with a token, got ${typeName(options)}`);
  onlyKnown(options, OPTIONS, 'dashboard: options');
  const token = tokenOption(options.token, 'dashboard: options.token');
  let service = null;
  if (options.service !== undefined && options.service !== false) {
    if (!isObject(options.service)) throw new TypeError(`dashboard: options.service must be an object { apiBase } or false, got ${typeName(options.service)}`);
    onlyKnown(options.service, SERVICE_OPTIONS, 'dashboard: options.service');
    service = { apiBase: options.service.apiBase === undefined ? '/api/v1' : pathOption(options.service.apiBase, 'dashboard: options.service.apiBase', { allowRoot: false }) };
  }
  const observed = FIELDS.some((k) => options[k] !== undefined);
  // The decision service's pages need no library component; the library pages need at least one.
  const c = observed || service === null ? components(options, 'dashboard: options') : {};
  return {
    c,
    token,
    service,
    prefix: options.prefix === undefined ? null : pathOption(options.prefix, 'dashboard: options.prefix', { allowRoot: false }),
    intervalMs: optionOrDefault(DASHBOARD, options, 'intervalMs', 'dashboard: options'),
    historySec: optionOrDefault(DASHBOARD, options, 'historySec', 'dashboard: options'),
    maxStreams: optionOrDefault(DASHBOARD, options, 'maxStreams', 'dashboard: options'),
  };
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

function tierList(c) {
  if (c.gatekeeper) {
    const t = c.gatekeeper.stats().tiers;
    return Object.keys(t).map((name) => ({ name, protected: t[name].protected }));
  }
  if (c.queue) return c.queue.tierInfo();
  if (c.ledger) return c.ledger.snapshot().map((t) => ({ name: t.name, protected: t.protected }));
  return [];
}

/**
 * `dashboard({ token, gatekeeper?, queue?, lag?, ledger?, prefix?, intervalMs?, historySec?,
 * maxStreams?, service? })`: `(req, res, next?)` for Express (`app.use('/tiergate', ...)`), with
 * `.handle(req, res)` for node:http (true when it answered; give `prefix`), `.plugin` for Fastify
 * (`fastify.register(d.plugin, { prefix: '/tiergate' })`) and `.close()`.
 */
function dashboard(options) {
  const o = buildingOptions(() => parse(options));
  const observed = Object.keys(o.c).length > 0;
  const sampler = observed ? new Sampler(o.c, { intervalMs: o.intervalMs, historySec: o.historySec, health: new Health(o.c) }) : null;
  if (sampler !== null) sampler.start();
  const streams = new Set();

  const info = () => {
    // The gatekeeper's shadow mode and learned concurrency limit: the page draws their series.
    const gk = observed && o.c.gatekeeper ? o.c.gatekeeper.stats() : null;
    return {
      library: observed ? {
        tiers: tierList(o.c),
        components: Object.keys(o.c),
        shadow: gk !== null && gk.shadow !== null,
        learnedLimit: gk !== null && gk.concurrency !== null,
        intervalMs: o.intervalMs,
        historySec: o.historySec,
      } : null,
      service: o.service,
    };
  };

  function stream(req, res) {
    if (streams.size >= o.maxStreams) return json(res, 503, { error: 'TOO_MANY_STREAMS', message: `at most ${o.maxStreams} live streams are open at once` });
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    res.flushHeaders();
    if (res.socket) res.socket.setNoDelay(true);
    // A reader that stopped reading must not make the server buffer without bound: past the cap its
    // stream ends (the page reconnects and starts again from the kept history).
    const send = (event, data) => {
      if (res.writableLength > MAX_BUFFERED_BYTES) {
        res.destroy();
        return;
      }
      res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    send('history', sampler.history());
    const unsubscribe = sampler.subscribe((s) => send('sample', s));
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    const entry = { res, end: null };
    entry.end = () => {
      unsubscribe();
      clearInterval(heartbeat);
      streams.delete(entry);
    };
    streams.add(entry);
    res.on('close', entry.end);
  }

  // The path under the mount point, or null when the request is not the dashboard's.
  function subpath(req) {
    const q = req.url.indexOf('?');
    let p = q < 0 ? req.url : req.url.slice(0, q);
    if (o.prefix !== null) {
      if (p !== o.prefix && !p.startsWith(`${o.prefix}/`)) return null;
      p = p.slice(o.prefix.length) || '';
    }
    return p;
  }

  function answer(req, res, p) {
    if (p === '' || (p === '/' && req.originalUrl !== undefined && !(req.originalUrl.split('?')[0]).endsWith('/'))) {
      // The app's links are relative: it must be loaded from a URL that ends with a slash.
      const seen = (req.originalUrl || req.url).split('?')[0];
      res.writeHead(308, { location: `${seen}/` });
      res.end();
      return true;
    }
    if (p.startsWith('/api/dashboard/')) {
      if (!authorized(req, o.token)) {
        json(res, 401, { error: 'UNAUTHORIZED', message: 'the dashboard needs the admin token: Authorization: Bearer <token>' });
        return true;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        json(res, 405, { error: 'METHOD_NOT_ALLOWED', message: 'only GET' });
        return true;
      }
      const what = p.slice('/api/dashboard/'.length);
      if (what === 'info') json(res, 200, info());
      else if (what === 'history') json(res, 200, { samples: sampler === null ? [] : sampler.history() });
      else if (what === 'stats') json(res, 200, allStats(o.c));
      else if (what === 'stream' && sampler !== null) stream(req, res);
      else json(res, 404, { error: 'NOT_FOUND', message: `no dashboard endpoint ${what}` });
      return true;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    return serveFile(req, res, p);
  }

  // With a prefix, everything under it is the dashboard's (an unknown path is its 404); without one
  // (an Express mount, the service at /) what it does not know goes on to the application.
  function handle(req, res) {
    const p = subpath(req);
    if (p === null) return false;
    if (answer(req, res, p)) return true;
    if (o.prefix === null) return false;
    json(res, 404, { error: 'NOT_FOUND', message: 'not found' });
    return true;
  }

  function middleware(req, res, next) {
    if (handle(req, res)) return;
    if (typeof next === 'function') next();
    else json(res, 404, { error: 'NOT_FOUND', message: 'not found' });
  }
  middleware.handle = handle;
  middleware.plugin = function dashboardPlugin(fastify, _opts, done) {
    // Fastify strips nothing from the raw URL: the route's wildcard is the path under the prefix.
    const config = { tiergate: false, concurrencyGate: false };
    const route = (request, reply) => {
      reply.hijack();
      const p = request.params && request.params['*'] !== undefined ? `/${request.params['*']}` : '/';
      const raw = request.raw.url.split('?')[0];
      if (p === '/' && !raw.endsWith('/')) {
        reply.raw.writeHead(308, { location: `${raw}/` });
        reply.raw.end();
        return;
      }
      if (!answer(request.raw, reply.raw, p)) json(reply.raw, 404, { error: 'NOT_FOUND', message: 'not found' });
    };
    fastify.route({ method: ['GET', 'HEAD'], url: '/', config, handler: route, exposeHeadRoute: false });
    fastify.route({ method: ['GET', 'HEAD'], url: '/*', config, handler: route, exposeHeadRoute: false });
    done();
  };
  /** Stops sampling and ends the open streams. */
  middleware.close = () => {
    if (sampler !== null) sampler.stop();
    for (const s of [...streams]) {
      s.end();
      s.res.end();
    }
  };
  return middleware;
}

module.exports = { dashboardOptions: parse, dashboard };

'use strict';
// Health for load balancers and JSON stats for people, like @fastify/under-pressure's status route:
// GET <path> answers 200 {status:'ok'} or 503 {status:'unavailable', reasons}, GET <path>/stats every
// component's stats(). Unavailable while the loop is stalled (the watchdog's flag, which also holds
// through the first tick after a block), while the lag is above `maxLagMs` when one is set, and for
// `recentMs` after a protected tier last lost a request to overload (shed, its pool empty, or refused
// by the concurrency gate): a process that cannot serve its protected tier should get less traffic.
const { buildingOptions } = require('../errors');
const { onlyKnown, isObject, optionOrDefault, typeName } = require('../options');
const { components } = require('./components');
const { STATUS_ROUTE } = require('../schema/metrics');
const { optionNames } = require('../schema');

const OPTIONS = optionNames(STATUS_ROUTE);

/** Requests of protected tiers refused for overload so far (counters only grow between resets). */
function protectedRefusals(c) {
  let n = 0;
  if (c.gatekeeper) for (const t of Object.values(c.gatekeeper.stats().tiers)) if (t.protected) n += t.shed + t.tierFull;
  if (c.queue) {
    const s = c.queue.stats();
    for (const { name, protected: p } of c.queue.tierInfo()) if (p) n += s.tiers[name].rejected + s.tiers[name].displaced + s.tiers[name].timeout + s.tiers[name].codel;
  }
  return n;
}

/** The health judgement over time: remembers when protected refusals last grew. */
class Health {
  constructor(c, { recentMs = STATUS_ROUTE.recentMs.default, maxLagMs } = {}) {
    this.c = c;
    this.recentMs = recentMs;
    this.maxLagMs = maxLagMs;
    this.last = protectedRefusals(c);
    this.lastGrewAt = -Infinity;
  }

  check(now = Date.now()) {
    const c = this.c;
    const n = protectedRefusals(c);
    if (n > this.last) this.lastGrewAt = now;
    this.last = n; // a resetStats() lowers it: the next growth counts from there
    const loop = c.lag ? c.lag.stats() : c.gatekeeper ? c.gatekeeper.stats() : null;
    const lagMs = loop === null ? null : loop.lagMs;
    const stalled = (c.lag ? c.lag.stalled : false) || (c.gatekeeper ? c.gatekeeper.stats().stalled : false);
    const reasons = [];
    if (stalled) reasons.push('event-loop-stalled');
    if (this.maxLagMs !== undefined && lagMs !== null && lagMs > this.maxLagMs) reasons.push('event-loop-lag');
    if (now - this.lastGrewAt < this.recentMs) reasons.push('protected-tier-shed');
    const body = { status: reasons.length === 0 ? 'ok' : 'unavailable', reasons, stalled, lagMs };
    if (loop !== null) body.elu = loop.elu;
    if (c.gatekeeper) body.pressure = c.gatekeeper.stats().pressure;
    if (c.queue) {
      body.inFlight = c.queue.inFlight;
      body.queued = c.queue.queued;
    }
    return body;
  }
}

/** Every component's stats, as one JSON-ready object. */
function allStats(c) {
  const out = {};
  if (c.gatekeeper) out.gatekeeper = c.gatekeeper.stats();
  if (c.queue) out.queue = c.queue.stats();
  if (c.lag) out.lag = c.lag.stats();
  if (c.ledger) out.ledger = c.ledger.snapshot();
  return out;
}

function sendJson(res, status, body, head) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(head ? undefined : text);
}

/** statusRoute()'s options: the components, then each option as written (checked) or its declared default. */
function statusRouteOptions(options) {
  if (!isObject(options)) throw new TypeError(`statusRoute: options must be an object, got ${typeName(options)}`);
  onlyKnown(options, OPTIONS, 'statusRoute: options');
  const c = components(options, 'statusRoute: options');
  const get = (name) => optionOrDefault(STATUS_ROUTE, options, name, 'statusRoute: options');
  const path = get('path');
  if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~/-]*$/.test(path) || (path.length > 1 && path.endsWith('/'))) {
    throw new TypeError(`statusRoute: options.path must be a path like "/status", got ${JSON.stringify(path)}`);
  }
  return { c, path, recentMs: get('recentMs'), maxLagMs: get('maxLagMs'), stats: get('stats') };
}

/**
 * `statusRoute({ gatekeeper?, queue?, lag?, ledger?, path?, recentMs?, maxLagMs?, stats? })`: an
 * Express middleware `(req, res, next)` (mount it before the guards), with `.handle(req, res)` for
 * node:http (true when it answered) and `.plugin` for Fastify (routes that skip tiergate's guards).
 */
function statusRoute(options) {
  const o = buildingOptions(() => {
    const parsed = statusRouteOptions(options);
    return { ...parsed, health: new Health(parsed.c, parsed) };
  });
  const statsPath = o.path === '/' ? '/stats' : `${o.path}/stats`;

  function handle(req, res) {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const q = req.url.indexOf('?');
    const p = q < 0 ? req.url : req.url.slice(0, q);
    if (p === o.path) {
      const body = o.health.check();
      sendJson(res, body.status === 'ok' ? 200 : 503, body, req.method === 'HEAD');
      return true;
    }
    if (o.stats && p === statsPath) {
      sendJson(res, 200, allStats(o.c), req.method === 'HEAD');
      return true;
    }
    return false;
  }

  function middleware(req, res, next) {
    if (!handle(req, res)) next();
  }
  middleware.handle = handle;
  middleware.check = () => o.health.check();
  middleware.plugin = function statusPlugin(fastify, _opts, done) {
    // Health checks must be answered however loaded the process is: the guards skip these routes.
    const config = { tiergate: false, concurrencyGate: false };
    const answer = (request, reply) => {
      reply.hijack();
      handle(request.raw, reply.raw);
    };
    fastify.get(o.path, { config }, answer);
    if (o.stats) fastify.get(statsPath, { config }, answer);
    done();
  };
  middleware.plugin[Symbol.for('skip-override')] = true;
  return middleware;
}

module.exports = { statusRoute, statusRouteOptions, allStats, Health };

'use strict';
// The concurrency gate's public face: the guard factory and its Express, node:http and Fastify forms.
// The parts: ./config.js (options), ./classify.js (which tier waits where), ./gate.js (slots and the
// queue), ./wait-queues.js, ./standing.js (CoDel, adaptive LIFO), ./deadline-timer.js,
// ./connections.js, ./adaptive-limit.js.
const { performance } = require('node:perf_hooks');
const { expressMiddleware, httpHandler, fastifyPlugin } = require('../adapters');
const { koaMiddleware } = require('../adapters/koa');
const { DIALECTS } = require('../http/routing');
const { CODES, withCode } = require('../errors');
const { AdaptiveLimit } = require('./adaptive-limit');
const { parseOptions } = require('./config');
const { compileRouteConfig } = require('../http/route-rules');
const { ConcurrencyGate } = require('./gate');

/** Reads this thread's event-loop utilization since the previous read (the adaptive limit's saturation test). */
function loopUtilizationReader() {
  let last = performance.eventLoopUtilization();
  return () => {
    const current = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(current, last);
    last = current;
    return utilization;
  };
}

/**
 * Builds the concurrency gate guard: `{ admit(req, res), stats(), resetStats(), limit, inFlight,
 * queued, close() }`. Use it through `concurrencyGate(options)` (Express), `concurrencyGate.http(options,
 * handler)` or `fastify.register(concurrencyGatePlugin, options)`.
 */
function createConcurrencyGate(options, routing = DIALECTS.http) {
  let gate;
  try {
    gate = new ConcurrencyGate(parseOptions(options, routing, loopUtilizationReader()));
  } catch (err) {
    if (err instanceof TypeError || err instanceof RangeError) err.message = `concurrencyGate: ${err.message}`;
    throw withCode(err, CODES.INVALID_OPTION);
  }
  return {
    admit: (req, res, route) => gate.admit(req, res, route),
    compileRoute: (value, at) => compileRouteConfig(value, gate.tierIds, at),
    stats: () => gate.stats(),
    waits: (boundsMs) => gate.waits(boundsMs),
    /** Calls `fn(tierName, waitedMs)` for each admitted request; returns the function that stops it. */
    observeWaits: (fn) => {
      gate.waitListeners.add(fn);
      return () => gate.waitListeners.delete(fn);
    },
    tierInfo: () => gate.tierInfo(),
    resetStats: () => gate.resetStats(),
    close: () => gate.close(),
    get limit() {
      return gate.limit;
    },
    get inFlight() {
      return gate.inFlight;
    },
    get queued() {
      return gate.queues.size;
    },
  };
}

function attach(target, gate) {
  target.gate = gate;
  target.stats = gate.stats;
  target.resetStats = gate.resetStats;
  target.close = gate.close;
  return target;
}

/** Express 4/5 middleware: `app.use(concurrencyGate({ maxConcurrent: 8, maxQueue: 100 }))`. */
function concurrencyGate(options) {
  const gate = createConcurrencyGate(options, DIALECTS.express);
  return attach(expressMiddleware(gate), gate);
}

/** Wraps a node:http handler (handler errors: see adapters.httpHandler). */
concurrencyGate.http = function http(options, handler) {
  const gate = createConcurrencyGate(options);
  return attach(httpHandler(gate, handler), gate);
};

/** Koa 2/3 middleware: `app.use(concurrencyGate.koa(options))`. */
concurrencyGate.koa = function koa(options) {
  const gate = createConcurrencyGate(options, DIALECTS.koa);
  return attach(koaMiddleware(gate), gate);
};

/** Fastify 5 plugin: `fastify.register(concurrencyGatePlugin, options)`; `fastify.concurrencyGate.stats()`. */
const concurrencyGatePlugin = fastifyPlugin(createConcurrencyGate, 'concurrencyGate');

module.exports = { concurrencyGate, concurrencyGatePlugin, createConcurrencyGate, AdaptiveLimit };

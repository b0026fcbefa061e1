'use strict';
// The gatekeeper as each framework takes it: Express middleware, a node:http handler, Koa middleware,
// a Fastify plugin. Each carries the gate's stats(), injectHealth(), ... (`expose`).
const { expressMiddleware, httpHandler, fastifyPlugin } = require('../adapters');
const { koaMiddleware } = require('../adapters/koa');
const { DIALECTS } = require('../http/routing');
const { Gatekeeper } = require('./gatekeeper');

const METHODS = ['stats', 'resetStats', 'injectHealth', 'useLiveHealth', 'updateController'];

function expose(target, gk) {
  for (const m of METHODS) target[m] = gk[m].bind(gk);
  Object.defineProperty(target, 'gatekeeper', { value: gk });
  Object.defineProperty(target, 'ledger', { get: () => gk.ledger });
  Object.defineProperty(target, 'tiers', { get: () => gk.tiers });
  Object.defineProperty(target, 'defense', { get: () => gk.defense });
  Object.defineProperty(target, 'limits', { get: () => gk.limits });
  Object.defineProperty(target, 'cluster', { get: () => gk.cluster });
  return target;
}

/** Express 4/5 middleware: `app.use(gatekeeper(options))`. Carries stats(), injectHealth(), ... */
function gatekeeper(options) {
  const gk = new Gatekeeper(options, DIALECTS.express);
  return expose(expressMiddleware(gk), gk);
}

/** node:http: `http.createServer(gatekeeper.http(options, handler))`. */
gatekeeper.http = function http(options, handler) {
  const gk = new Gatekeeper(options);
  return expose(httpHandler(gk, handler), gk);
};

/** Koa 2/3: `app.use(gatekeeper.koa(options))`. */
gatekeeper.koa = function koa(options) {
  const gk = new Gatekeeper(options, DIALECTS.koa);
  return expose(koaMiddleware(gk), gk);
};

/** Fastify 5: `fastify.register(tiergatePlugin, options)`; the gate is `fastify.tiergate`. */
const tiergatePlugin = fastifyPlugin((options, routing) => new Gatekeeper(options, routing), 'tiergate');

module.exports = { gatekeeper, tiergatePlugin };

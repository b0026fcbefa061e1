'use strict';
// One guard, three frameworks. A guard decides for one request:
//
//   guard.admit(req, res) -> null                 proceed to the handler
//                          | { status, headers, body }   answer with this instead (body: string)
//                          | Promise<null | { status, headers, body }>   (guards that queue)
//
// `req`/`res` are always node's IncomingMessage/ServerResponse (Fastify passes request.raw/reply.raw),
// so guards are written once. A rejection is not written to a client that has already gone.
// A guard factory takes the options and the routing dialect of its framework (lib/http/routing.js).
const { fastifyDialect } = require('../http/routing');

// Gone: answered already, or its client can no longer receive an answer. The response alone does not
// say so for a pipelined request whose response is not yet attached to the socket (node emits neither
// 'finish' nor 'close' on it when the connection dies): its request and its socket do.
function isGone(res) {
  if (res.destroyed || res.writableEnded) return true;
  const req = res.req;
  if (req === undefined || req === null) return false;
  if (req.readableAborted === true) return true; // destroyed before its body ended: the connection died
  const socket = req.socket;
  return socket !== null && socket !== undefined && socket.destroyed === true;
}

/** The answer to a request whose client left while its guard decided: never written (writeRejection skips it). */
const GONE = Object.freeze({ status: 499, headers: {}, body: '' });

function writeRejection(res, rejection) {
  if (isGone(res) || res.headersSent) return;
  res.writeHead(rejection.status, rejection.headers);
  res.end(rejection.body);
}

// Runs the guard and calls `proceed()` or writes the rejection; errors go to `fail`. `route`: the
// route's own settings (Fastify's route config), compiled by the guard.
function run(guard, req, res, proceed, reject, fail, route) {
  let verdict;
  try {
    verdict = guard.admit(req, res, route);
  } catch (err) {
    return fail(err);
  }
  if (verdict === null) return proceed();
  if (typeof verdict.then !== 'function') return safeReject(reject, verdict, fail);
  verdict.then((v) => (v === null ? proceed() : safeReject(reject, v, fail)), fail);
}

// Writing a rejection can throw (a custom `respond` with a CR/LF header value, say); that must reach
// `fail` (500 / next(err)), not escape as an uncaught exception that ends the process.
function safeReject(reject, rejection, fail) {
  try {
    reject(rejection);
  } catch (err) {
    fail(err);
  }
}

/** Express 4/5 middleware: `app.use(expressMiddleware(guard))`. */
function expressMiddleware(guard) {
  return function tiergate(req, res, next) {
    run(guard, req, res, next, (r) => writeRejection(res, r), next);
  };
}

/**
 * Wraps a `node:http` request handler: `http.createServer(httpHandler(guard, handler))`. An error the
 * handler throws (or its promise rejects with) answers 500 if nothing was sent yet, else drops the
 * connection, and is reported with process.emitWarning: it must not become an uncaught exception or
 * an unhandled rejection after a queued request was let through.
 */
function httpHandler(guard, handler) {
  if (typeof handler !== 'function') throw new TypeError('handler must be a function (req, res)');
  return function tiergate(req, res) {
    const fail = (err) => {
      if (!isGone(res)) {
        if (res.headersSent) {
          res.destroy(err);
        } else {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end('Internal Server Error');
        }
      }
      process.emitWarning(err);
    };
    const proceed = () => {
      let out;
      try {
        out = handler(req, res);
      } catch (err) {
        return fail(err);
      }
      if (out !== null && typeof out === 'object' && typeof out.then === 'function') out.then(undefined, fail);
    };
    run(guard, req, res, proceed, (r) => writeRejection(res, r), fail);
  };
}

/** Keys Fastify itself may leave in a plugin's options (register options, not the guard's). */
/** A route whose config opts out of a guard. */
const SKIP = Symbol('tiergate.route.skip');

const FASTIFY_REGISTER_KEYS = new Set(['prefix', 'logLevel', 'logSerializers']);

function withoutRegisterKeys(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) return options;
  const out = {};
  for (const k of Object.keys(options)) if (!FASTIFY_REGISTER_KEYS.has(k)) out[k] = options[k];
  return out;
}

/**
 * A Fastify 4/5 plugin from a guard factory: `fastify.register(plugin, options)`. Registered without
 * encapsulation (like fastify-plugin does) so it guards every route of the instance it is registered on.
 * A route can set its own tier, or opt out, in its config under the plugin's name (as
 * @fastify/rate-limit reads `config.rateLimit`): `{ config: { tiergate: { tier: 'critical' } } }`, or
 * `{ config: { tiergate: false } }`. Route configs are checked as routes are added (errors name the
 * route), through the guard's `compileRoute(value, at)`.
 */
function fastifyPlugin(makeGuard, name) {
  function plugin(fastify, options, done) {
    let guard;
    try {
      guard = makeGuard(withoutRegisterKeys(options), fastifyDialect(fastify.initialConfig));
    } catch (err) {
      return done(err);
    }
    fastify.decorate(name, guard);
    const compiled = new WeakMap(); // route config object -> the guard's compiled settings
    const compile = (config, at) => {
      let c = compiled.get(config);
      if (c === undefined) {
        const value = config[name];
        c = value === false ? SKIP : guard.compileRoute(value, at);
        compiled.set(config, c);
      }
      return c;
    };
    fastify.addHook('onRoute', (route) => {
      if (route.config && route.config[name] !== undefined) compile(route.config, `${[].concat(route.method).join(',')} ${route.url}: config.${name}`);
    });
    fastify.addHook('onRequest', (request, reply, next) => {
      const config = request.routeOptions && request.routeOptions.config;
      let route;
      if (config && config[name] !== undefined) {
        try {
          route = compile(config, `${request.method} ${request.routeOptions.url}: config.${name}`);
        } catch (err) {
          return next(err);
        }
        if (route === SKIP) return next();
      }
      run(guard, request.raw, reply.raw, next, (r) => {
        if (isGone(reply.raw)) return;
        reply.code(r.status).headers(r.headers).send(r.body);
      }, next, route);
    });
    done();
  }
  plugin[Symbol.for('skip-override')] = true;
  plugin[Symbol.for('fastify.display-name')] = name;
  return plugin;
}

module.exports = { expressMiddleware, httpHandler, fastifyPlugin, writeRejection, isGone, GONE };

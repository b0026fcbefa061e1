'use strict';
// The guard contract (./index.js) as Koa 2/3 middleware: `app.use(koaMiddleware(guard))`.
//
// What a guard holds (a concurrency slot, a queue place, a lease) it releases on the response's
// 'finish' or 'close', as under every other framework: Koa writes the response after the middleware
// chain settles, an error thrown downstream is answered by Koa's own error handler (its response
// finishes), and a client that goes away closes the response. So the middleware only awaits next().

/**
 * Koa middleware from a guard. Refusals are answered through ctx (status, headers, body) so Koa's own
 * response logic (HEAD, content-length) applies, with the same status, headers and body as elsewhere.
 */
function koaMiddleware(guard) {
  return function tiergate(ctx, next) {
    const req = ctx.req;
    // Route rules match the path the application routes: under koa-mount, req.url has lost the mount
    // prefix, as under Express's app.use(prefix), so the guard reads req.originalUrl as it does there.
    if (req.originalUrl === undefined) req.originalUrl = ctx.originalUrl;
    const verdict = guard.admit(req, ctx.res); // a throw rejects the middleware: Koa answers 500
    if (verdict === null) return next();
    if (typeof verdict.then !== 'function') return refuse(ctx, verdict);
    // then() now, not `await`: a queued request must start inside the queue's own turn (its
    // synchronous cost is timed there, lib/gatekeeper/turn-queue.js), not a microtask later.
    return new Promise((resolve, reject) => {
      verdict.then((v) => {
        try {
          resolve(v === null ? next() : refuse(ctx, v));
        } catch (err) {
          reject(err); // a rejection Koa cannot set (a custom respond's bad header): Koa answers 500
        }
      }, reject);
    });
  };
}

function refuse(ctx, rejection) {
  ctx.status = rejection.status;
  ctx.set(rejection.headers); // before the body: a string body would otherwise set text/plain
  // Koa sends strings and Buffers as they are but would JSON-encode another Uint8Array (a custom
  // `respond` may give one), which res.end() sends as bytes under the other adapters.
  const body = rejection.body;
  ctx.body = body instanceof Uint8Array && !Buffer.isBuffer(body) ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : body;
  return undefined;
}

module.exports = { koaMiddleware };

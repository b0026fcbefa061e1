'use strict';
// options.classify and options.key may return a promise (a session or token lookup). The synchronous
// path only checks `typeof x.then === 'function'` on a returned value that is no tier name / no key;
// the decision then goes on when the promise settles. Nothing is taken before the decision (no token,
// no slot, no reservation), so a request whose client left meanwhile is simply not decided: it gets
// GONE, which no adapter writes, and its handler never runs.
const { isGone, GONE } = require('../adapters');

/** The gatekeeper's key step's answer when options.key returned a promise. */
const PENDING = Symbol('tiergate.key.pending');
/** No settled key is waiting to be used (the synchronous case). */
const NOT_SETTLED = Symbol('tiergate.key.notSettled');

/**
 * `go(value)` once `p` settles (`go(undefined)` after `rejected(err)` when it is rejected), or GONE
 * when the response's client has left by then.
 */
function whenSettled(p, res, go, rejected) {
  return Promise.resolve(p).then((v) => (isGone(res) ? GONE : go(v)), (err) => {
    rejected(err);
    return isGone(res) ? GONE : go(undefined);
  });
}

module.exports = { whenSettled, PENDING, NOT_SETTLED };

'use strict';
// Which of the defense's named limits one request falls under, and what each counts it by and costs:
// the limit's methods, tiers and routes (matched on the path the framework routes, read at most once
// per request, for local and cluster limits alike), its `by` (./keys.js) and its `cost`. A function's
// value that is no key or cost is warned once per option and counts by the client address / costs 1.
const { routedPath } = require('../http/routing');
const { matchPath } = require('../http/route-rules');
const { keyArg, takePending, UNUSABLE } = require('./keys');

class LimitScope {
  #routing;
  #folded;
  #warn;
  #warned = new Set();
  // The request's routed path: undefined until a limit with routes needs it (begin() resets it).
  #path;
  /** The local limits whose `by` returned a promise since begin(), each followed by the promise; or null. */
  pendingBy = null;

  /** `routing`: the framework's dialect (lib/http/routing.js); `warn(name, err)`. */
  constructor(routing, warn) {
    this.#routing = routing;
    this.#folded = !routing.caseSensitive;
    this.#warn = warn;
  }

  /** A new request: its path is read again, no promise is pending. */
  begin() {
    this.#path = undefined;
    this.pendingBy = null;
  }

  /**
   * What limit `l` counts this request by (true: the client address), or undefined when its methods,
   * tiers or routes leave the request out.
   */
  keyFor(l, req, tier) {
    if (l.methods !== null && !l.methods.includes(req.method)) return undefined;
    if (l.tiers !== null && !l.tiers.includes(tier)) return undefined;
    if (l.routes !== null) {
      if (this.#path === undefined) this.#path = routedPath(req.originalUrl || req.url, this.#routing);
      if (this.#path === null || matchPath(l.routes, req.method, this.#path, this.#folded) < 0) return undefined;
    }
    const k = keyArg(l.by, req);
    if (k !== UNUSABLE) return k;
    const p = takePending();
    // A promise: check() waits for it (a local limit's; a cluster limit's key is needed at once).
    if (p !== null && !l.cluster) {
      if (this.pendingBy === null) this.pendingBy = [];
      this.pendingBy.push(l, p);
      return true;
    }
    this.#warnOnce(`${l.option}.by`);
    return true;
  }

  /** What this request costs limit `l`: its `cost`, or its cost function's value (1 when unusable). */
  costOf(l, req) {
    if (l.costFn === null) return l.cost;
    let v;
    try {
      v = l.costFn(req);
    } catch (err) {
      this.#warn(`${l.option}.cost`, err);
      return 1;
    }
    if (Number.isInteger(v) && v >= 0 && v <= 0xffffffff) return v;
    this.#warnOnce(`${l.option}.cost`);
    return 1;
  }

  #warnOnce(name) {
    if (this.#warned.has(name)) return;
    this.#warned.add(name);
    this.#warn(name, new TypeError('returned a value that is not usable (see docs/defense.md); counting by the client address / a cost of 1'));
  }
}

module.exports = { LimitScope };

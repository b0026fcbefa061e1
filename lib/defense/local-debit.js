'use strict';
// What the local named limits counted for a request the cluster step may still refuse (lib/gatekeeper/
// cluster-step.js): the cluster's limits are spent after the local ones, so a request the cluster
// refuses gives the local units back (natively, `limitRefund`, as a skipped outcome does: only what
// still counts), and counts in none of them. Filled in place per request; copied only for a request
// that waits (a shaper's delay, a `by` promise, a store's late answer).
const { performance } = require('node:perf_hooks');
const { SETTLE } = require('./outcome');

class LocalDebit {
  /** `n`: the local limits. */
  constructor(n) {
    /** Per limit: its key for this request (true: the client address `ip`), undefined where it did not apply. */
    this.keys = new Array(n).fill(undefined);
    this.costs = new Float64Array(n);
    this.ip = undefined;
    /** performance.now() before the decision: the age handed to the refund is never short. */
    this.t0 = 0;
    /** Some limit counted something. */
    this.any = false;
  }

  /** Records an admission: `keys[keyAt + i]` limit i's key, `costs` one per limit (null: 1 each). */
  record(keys, keyAt, costs, ip, t0) {
    let any = false;
    for (let i = 0; i < this.keys.length; i++) {
      const k = keys[keyAt + i];
      const c = costs === null ? 1 : costs[i];
      this.keys[i] = c === 0 ? undefined : k;
      this.costs[i] = c;
      if (k !== undefined && c !== 0) any = true;
    }
    this.ip = ip;
    this.t0 = t0;
    this.any = any;
  }

  /** Nothing to give back (a request the defense did not admit). */
  clear() {
    this.any = false;
  }

  copy() {
    const d = new LocalDebit(0);
    d.keys = this.keys.slice();
    d.costs = this.costs.slice();
    d.ip = this.ip;
    d.t0 = this.t0;
    d.any = this.any;
    return d;
  }

  /**
   * Gives the units back to every limit that counted `req` (`handle`: the DefenseHandle), once; its
   * outcome settlement (./outcome.js) is cancelled, so nothing is given back twice. `warn(i, err)`.
   */
  giveBack(req, handle, warn) {
    if (!this.any) return;
    this.any = false;
    const rec = req[SETTLE];
    if (rec !== undefined) rec.settled = true;
    const ageMs = Math.max(0, performance.now() - this.t0);
    for (let i = 0; i < this.keys.length; i++) {
      const k = this.keys[i];
      if (k === undefined || (k === true && typeof this.ip !== 'string')) continue;
      try {
        handle.limitRefund(i, k === true ? this.ip : k, k === true, this.costs[i], ageMs);
      } catch (err) {
        warn(i, err);
      }
    }
  }
}

module.exports = { LocalDebit };

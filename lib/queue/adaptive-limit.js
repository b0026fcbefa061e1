'use strict';
// maxConcurrent: 'auto' — the concurrency gate's limit, learned by the same estimator as the
// gatekeeper's (src/core/concurrency: the knee, throughput × the baseline latency, by Little's law;
// docs/gatekeeper.md, "The learned concurrency limit"). The gate counts its own requests in flight
// and hands each finished one's latency over (`sample`).
//
// One rule is the gate's own: every 20 ms (on samples) the event loop's utilization since the last
// check is read, and at >= 0.9 (saturated) the limit is halved at once. A saturated loop cannot run
// more requests at once, only longer turns, and on a CPU-bound route every extra request per turn
// adds a handler's time to everyone's latency — including the wait of requests not yet read from
// their sockets, which no latency sample sees. The limit falls until the loop has idle time again
// (on a CPU-bound route: to `min`), then the estimator takes over.
const native = require('../native');
const { checkNumber, checkFunction, onlyKnown } = require('../options');
const { optionNames, checkNumberRange } = require('../schema');
const { ADAPTIVE_LIMIT: L } = require('../schema/concurrency-gate');

const SATURATED = 0.9;
const SATURATION_CHECK_MS = 20;
const SATURATED_DECREASE = 0.5;

const LIMIT_KEYS = optionNames(L);

class AdaptiveLimit {
  #handle;
  /**
   * @param {object} [options]
   * @param {number} [options.min=1]      lowest limit
   * @param {number} [options.max=1000]   highest limit
   * @param {number} [options.initial]    starting limit (default: min(max, max(min, 10)))
   * @param {string} [prefix]             option path used in error messages
   * @param {() => number} [loopUtilization] the event loop's utilization (0..1) since its previous
   *                                         call, read every 20 ms (on samples); NaN = unknown
   */
  constructor(options = {}, prefix = 'limit', loopUtilization = () => NaN) {
    if (options === null || typeof options !== 'object') throw new TypeError(`${prefix} must be an object`);
    onlyKnown(options, LIMIT_KEYS, prefix);
    const o = { min: L.min.default, max: L.max.default, ...options };
    this.min = checkNumber(`${prefix}.min`, o.min, checkNumberRange(L.min));
    this.max = checkNumber(`${prefix}.max`, o.max, checkNumberRange(L.max));
    if (this.max < this.min) throw new RangeError(`${prefix}.max (${this.max}) must be >= ${prefix}.min (${this.min})`);
    const initial = o.initial === undefined ? Math.min(this.max, Math.max(this.min, 10)) : o.initial;
    checkNumber(`${prefix}.initial`, initial, { ...checkNumberRange(L.initial), min: this.min, max: this.max });
    this._loopUtilization = checkFunction('loopUtilization', loopUtilization);
    this.#handle = new native.ConcurrencyLimitHandle({ minLimit: this.min, maxLimit: this.max, initialLimit: initial });
    this.limit = initial;
    this.updates = 0;
    this._checkedAt = -1;
    this.saturated = false; // the loop was saturated at the last check
  }

  /**
   * Records one latency sample. Returns true when the limit changed.
   * @param {number} rttMs      admission-to-finish time of one request
   * @param {number} inFlight   requests in flight when it finished (itself included)
   * @param {number} now        monotonic ms (performance.now())
   */
  sample(rttMs, inFlight, now) {
    let limit;
    if (this._checkedAt < 0) this._checkedAt = now;
    if (now - this._checkedAt >= SATURATION_CHECK_MS) {
      this._checkedAt = now;
      this.saturated = this._loopUtilization() >= SATURATED;
      if (this.saturated) limit = this.#handle.cut(SATURATED_DECREASE);
    }
    if (limit === undefined) limit = this.#handle.observe(rttMs, inFlight, now);
    if (limit === this.limit) return false;
    this.limit = limit;
    this.updates++;
    return true;
  }

  /** The estimator's figures: limit, estimate (before rounding), baselineMs, meanMs (the last
   * interval's), throughput, queueing, intervals. */
  stats() {
    return this.#handle.stats();
  }
}

module.exports = { AdaptiveLimit };

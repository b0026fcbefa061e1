'use strict';
// An adaptive concurrency limit from observed latency: a gradient estimator in the style of Netflix
// concurrency-limits' Gradient2 (and Envoy's adaptive concurrency filter).
//
// Latency samples (admission until the slot comes back, in ms) are gathered in windows of at least
// `windowMs` and `minSamples`. At the end of a window:
//   short    = mean latency of the window
//   baseline = the no-load latency: follows lower windows quickly (a quarter of the way per window)
//              and higher ones slowly (1/longWindow per window), so it stays near the best latency
//              seen recently instead of drifting up with a standing load
//   gradient = clamp(tolerance * baseline / short, 0.5, 1)   1 = no queueing, < 1 = latency inflating
//   target   = limit * gradient + sqrt(limit)                sqrt(limit): headroom to probe upwards
//   limit    = limit * (1 - smoothing) + target * smoothing, clamped to [min, max]
// The limit only grows while the gate is actually using at least half of it (an app-limited service
// says nothing about how much more it could take). Every 20 ms, apart from the windows, the event
// loop's utilization since the last check is read; at >= 0.9 (saturated) the limit is halved at once
// and the window starts afresh: a saturated loop cannot run more requests
// at once, only longer turns, and on a CPU-bound route every extra request per turn adds a handler's
// time to everyone's latency — including the wait of requests not yet read from their sockets, which
// no latency sample sees, so the gradient alone cannot tell. The limit falls until the loop has idle
// time again (on a CPU-bound route: to `min`), then the gradient takes over; on an I/O-bound route it
// grows until the latency of the downstream starts to inflate.

const { checkNumber, checkFunction, onlyKnown } = require('../options');

// Event-loop utilization at or above which the loop counts as saturated, how often (ms) it is checked,
// and the factor a saturated check applies to the limit (AIMD's multiplicative decrease: a CPU-bound
// route under a sudden overload goes from 32 to 1 in about 100 ms).
const SATURATED = 0.9;
const SATURATION_CHECK_MS = 20;
const SATURATED_DECREASE = 0.5;

const LIMIT_KEYS = new Set(['min', 'max', 'initial', 'tolerance', 'smoothing', 'windowMs', 'minSamples', 'longWindow']);

class AdaptiveLimit {
  /**
   * @param {object} [options]
   * @param {number} [options.min=1]          lowest limit
   * @param {number} [options.max=1000]       highest limit
   * @param {number} [options.initial]        starting limit (default: min(max, max(min, 10)))
   * @param {number} [options.tolerance=1.5]  latency inflation tolerated before the limit falls (>= 1)
   * @param {number} [options.smoothing=0.2]  weight of each window's target (0 < s <= 1)
   * @param {number} [options.windowMs=100]   minimum window length
   * @param {number} [options.minSamples=10]  minimum samples per window
   * @param {number} [options.longWindow=100] windows over which the baseline rises (EWMA span upwards)
   * @param {string} [prefix]                 option path used in error messages
   * @param {() => number} [loopUtilization]   the event loop's utilization (0..1) since its previous
   *                                           call, read every 20 ms (on samples); NaN = unknown (not saturated)
   */
  constructor(options = {}, prefix = 'limit', loopUtilization = () => NaN) {
    if (options === null || typeof options !== 'object') throw new TypeError(`${prefix} must be an object`);
    onlyKnown(options, LIMIT_KEYS, prefix);
    const o = { min: 1, max: 1000, tolerance: 1.5, smoothing: 0.2, windowMs: 100, minSamples: 10, longWindow: 100, ...options };
    this.min = checkNumber(`${prefix}.min`, o.min, { min: 1, integer: true });
    this.max = checkNumber(`${prefix}.max`, o.max, { min: 1, integer: true });
    if (this.max < this.min) throw new RangeError(`${prefix}.max (${this.max}) must be >= ${prefix}.min (${this.min})`);
    const initial = o.initial === undefined ? Math.min(this.max, Math.max(this.min, 10)) : o.initial;
    checkNumber(`${prefix}.initial`, initial, { min: this.min, max: this.max, integer: true });
    this.tolerance = checkNumber(`${prefix}.tolerance`, o.tolerance, { min: 1 });
    this.smoothing = checkNumber(`${prefix}.smoothing`, o.smoothing, { min: 0, minExclusive: true, max: 1 });
    this.windowMs = checkNumber(`${prefix}.windowMs`, o.windowMs, { min: 0, minExclusive: true });
    this.minSamples = checkNumber(`${prefix}.minSamples`, o.minSamples, { min: 1, integer: true });
    this.longWindow = checkNumber(`${prefix}.longWindow`, o.longWindow, { min: 1 });
    this.estimate = initial;
    this.limit = initial;
    this.longRtt = 0; // 0 = no baseline yet
    this.lastShortRtt = 0;
    this.updates = 0;
    this._windowStart = -1;
    this._sum = 0;
    this._count = 0;
    this._maxInFlight = 0;
    this._loopUtilization = checkFunction('loopUtilization', loopUtilization);
    this._checkedAt = 0;
    this.saturated = false; // the loop was saturated at the last check
  }

  /**
   * Records one latency sample. Returns true when the limit changed.
   * @param {number} rttMs      admission-to-finish time of one request
   * @param {number} inFlight   requests in flight when it finished (itself included)
   * @param {number} now        monotonic ms (performance.now())
   */
  sample(rttMs, inFlight, now) {
    if (this._windowStart < 0) this._windowStart = this._checkedAt = now;
    if (now - this._checkedAt >= SATURATION_CHECK_MS) {
      this._checkedAt = now;
      this.saturated = this._loopUtilization() >= SATURATED;
      if (this.saturated) {
        // The samples gathered so far were taken at the larger limit: start the window afresh.
        this._windowStart = now;
        this._sum = 0;
        this._count = 0;
        this._maxInFlight = 0;
        this.updates++;
        return this._set(this.estimate * SATURATED_DECREASE);
      }
    }
    this._sum += rttMs;
    this._count++;
    if (inFlight > this._maxInFlight) this._maxInFlight = inFlight;
    if (this._count < this.minSamples || now - this._windowStart < this.windowMs) return false;
    const short = this._sum / this._count;
    const maxInFlight = this._maxInFlight;
    this._windowStart = now;
    this._sum = 0;
    this._count = 0;
    this._maxInFlight = 0;
    return this._update(short, maxInFlight);
  }

  _update(short, maxInFlight) {
    this.lastShortRtt = short;
    this.updates++;
    if (this.longRtt === 0) this.longRtt = short;
    else if (short < this.longRtt) this.longRtt += (short - this.longRtt) / 4;
    else this.longRtt += (short - this.longRtt) / this.longWindow;
    const gradient = Math.max(0.5, Math.min(1, (this.tolerance * this.longRtt) / Math.max(short, 1e-6)));
    // App-limited (the gate never came close to the limit) or loop-limited (saturated at the last
    // check): the samples say nothing about raising it.
    if (gradient >= 1 && (maxInFlight < this.estimate / 2 || this.saturated)) return false;
    const target = this.estimate * gradient + Math.sqrt(this.estimate);
    return this._set(this.estimate * (1 - this.smoothing) + target * this.smoothing);
  }

  /** Moves the estimate to `next` (clamped); true when the integer limit changed. */
  _set(next) {
    next = Math.max(this.min, Math.min(this.max, next));
    this.estimate = next;
    const limit = Math.max(this.min, Math.min(this.max, Math.floor(next)));
    if (limit === this.limit) return false;
    this.limit = limit;
    return true;
  }
}

module.exports = { AdaptiveLimit };

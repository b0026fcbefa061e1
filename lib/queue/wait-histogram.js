'use strict';
/**
 * Log-bucketed histogram of wait times (ms), fixed memory: 5% buckets from 10 µs to ~20 minutes.
 * Percentiles are the bucket's upper bound (never under-reports), capped at the exact maximum.
 */
class WaitHistogram {
  constructor() {
    this.counts = new Float64Array(WaitHistogram.BUCKETS);
    this.count = 0;
    this.sum = 0; // for the Prometheus histogram's _sum (lib/metrics)
    this.max = 0;
  }

  record(ms) {
    let i = 0;
    if (ms > WaitHistogram.BASE) i = Math.min(WaitHistogram.BUCKETS - 1, Math.ceil(Math.log(ms / WaitHistogram.BASE) / WaitHistogram.LOG_GROWTH));
    this.counts[i]++;
    this.count++;
    this.sum += ms;
    if (ms > this.max) this.max = ms;
  }

  percentile(p) {
    if (this.count === 0) return 0;
    const rank = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i];
      if (seen >= rank) return Math.min(this.max, i === 0 ? WaitHistogram.BASE : WaitHistogram.BASE * Math.exp(i * WaitHistogram.LOG_GROWTH));
    }
    return this.max;
  }

  /**
   * Cumulative counts at each bound of `boundsMs` (ascending): the samples whose bucket lies wholly
   * at or below the bound. A sample near a bound may count at the next one up (never below its value).
   */
  cumulative(boundsMs) {
    const out = new Array(boundsMs.length).fill(0);
    let b = 0;
    let seen = 0;
    for (let i = 0; i < this.counts.length && b < boundsMs.length; i++) {
      const upper = i === 0 ? WaitHistogram.BASE : WaitHistogram.BASE * Math.exp(i * WaitHistogram.LOG_GROWTH);
      while (b < boundsMs.length && upper > boundsMs[b]) out[b++] = seen;
      seen += this.counts[i];
    }
    while (b < boundsMs.length) out[b++] = seen;
    return out;
  }

  reset() {
    this.counts.fill(0);
    this.count = 0;
    this.sum = 0;
    this.max = 0;
  }
}
WaitHistogram.BASE = 0.01;
WaitHistogram.LOG_GROWTH = Math.log(1.05);
WaitHistogram.BUCKETS = 420;

module.exports = { WaitHistogram };

'use strict';
// One unref'd timer for the whole gate, armed at the earliest moment something may have to happen
// (a waiter's deadline): no timer per waiter, no polling.

/** setTimeout takes at most 2^31-1 ms (longer fires at once): a far deadline is re-armed on waking. */
const MAX_TIMEOUT_MS = 2_147_483_647;

class DeadlineTimer {
  constructor(onFire) {
    this.onFire = onFire;
    this.timer = null;
    this.at = Infinity;
    this.fire = () => {
      this.timer = null;
      this.at = Infinity;
      this.onFire();
    };
  }

  /** Fires at `at` (a performance.now() time; `now` is the current one) unless an earlier wake-up is armed. */
  arm(at, now) {
    if (this.timer !== null && at >= this.at) return;
    this.disarm();
    if (at === Infinity) return;
    this.at = at;
    this.timer = setTimeout(this.fire, Math.min(MAX_TIMEOUT_MS, Math.max(1, Math.ceil(at - now))));
    this.timer.unref();
  }

  disarm() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.at = Infinity;
  }
}

module.exports = { DeadlineTimer };

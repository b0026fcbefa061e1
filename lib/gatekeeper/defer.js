'use strict';
// Deferred requests (src/core/gate, "Deferral"): an unprotected request that finds the current loop
// turn's budget spent waits here for a later turn instead of being shed. One waiting request is
// decided again per loop turn, in its check phase (setImmediate): after the poll that read that turn's
// requests, whose protected ones have run by then. Highest tier first, oldest first. While requests
// wait, a new unprotected one of the episode goes behind them however young the turn. Bounded: with
// DEFER_LIMIT waiting, the turn budget sheds it instead.
const { isGone } = require('../adapters');

/** Requests one gatekeeper holds for a later turn, all tiers together. */
const DEFER_LIMIT = 16;

class Deferrals {
  #queues;
  #size = 0;
  #armed = false;
  #run;
  #drop;

  /**
   * `tiers`: how many; `run(entry)`: decides it again (null, a rejection or a Promise of one);
   * `drop(entry)`: the rejection for one whose client has gone meanwhile (never written: nobody is
   * there to answer).
   */
  constructor(tiers, { run, drop }) {
    this.#queues = Array.from({ length: tiers }, () => []);
    this.#run = run;
    this.#drop = drop;
  }

  /** Requests waiting now. */
  get size() {
    return this.#size;
  }

  /** Whether one more fits. */
  get room() {
    return this.#size < DEFER_LIMIT;
  }

  /** Holds `entry` (`{ tier, res, ... }`) for a later turn: the Promise the guard returns. */
  add(entry) {
    return new Promise((resolve) => {
      entry.resolve = resolve;
      this.#queues[entry.tier].push(entry);
      this.#size++;
      if (!this.#armed) {
        this.#armed = true;
        setImmediate(this.#drain);
      }
    });
  }

  // One request per turn: the rest wait for the next check phase, after the next poll.
  #drain = () => {
    this.#armed = false;
    for (const q of this.#queues) {
      while (q.length > 0) {
        const e = q.shift();
        this.#size--;
        if (isGone(e.res)) {
          e.resolve(this.#drop(e));
          continue;
        }
        if (this.#size > 0) {
          this.#armed = true;
          setImmediate(this.#drain);
        }
        e.resolve(this.#run(e));
        return;
      }
    }
  };
}

module.exports = { Deferrals, DEFER_LIMIT };

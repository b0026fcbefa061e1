'use strict';
// The shaper's delayed requests: a request a GCRA shaper admitted for a later slot waits here until
// its slot, then goes on. One unref'd timer for all of them (the concurrency gate's DeadlineTimer,
// armed at the earliest slot), a binary heap by slot time, and a bound: past `max` waiting requests a
// new one is refused instead of queued (its slot stays taken: the shaper has counted it, and giving
// slots back would let a flood shift everyone's schedule).
const { performance } = require('node:perf_hooks');
const { DeadlineTimer } = require('../queue/deadline-timer');

class Shaper {
  constructor(max) {
    this.max = max;
    this.heap = [];
    this.timer = new DeadlineTimer(() => this.#wake());
  }

  get size() {
    return this.heap.length;
  }

  /** A promise that resolves after `delayMs`, or null when `max` requests are already waiting. */
  delay(delayMs) {
    if (this.heap.length >= this.max) return null;
    const now = performance.now();
    return new Promise((resolve) => {
      this.#push({ at: now + delayMs, resolve });
      this.timer.arm(this.heap[0].at, now);
    });
  }

  #wake() {
    const now = performance.now();
    // Timers fire up to a millisecond early or late; a slot within 1 ms is due.
    while (this.heap.length > 0 && this.heap[0].at <= now + 1) this.#pop().resolve();
    if (this.heap.length > 0) this.timer.arm(this.heap[0].at, now);
  }

  #push(node) {
    const h = this.heap;
    h.push(node);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].at <= node.at) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = node;
  }

  #pop() {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const c = l + 1 < h.length && h[l + 1].at < h[l].at ? l + 1 : l;
        if (h[c].at >= last.at) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
}

module.exports = { Shaper };

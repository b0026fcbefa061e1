'use strict';
// Failed credentials by address, so that guessing the admin token (or an API key) gets slower: an
// address's first FREE_FAILURES failures cost nothing; the failure that reaches it, and every later
// one, holds the address off for a delay that doubles each time (BASE_DELAY_MS, 2×, 4× … up to
// MAX_DELAY_MS), during which its authenticated requests are answered 429 without their credential
// being looked at. An address is forgotten FORGET_MS after its last failure or the end of its delay,
// whichever is later. Memory is bounded: at most MAX_ADDRESSES are held, and the one touched longest
// ago makes room for a new one.

const FREE_FAILURES = 5;
const FORGET_MS = 60_000;
const BASE_DELAY_MS = 1000;
const MAX_DELAY_MS = 10 * 60_000;
const MAX_ADDRESSES = 10_000;

class AuthFailures {
  constructor({ maxAddresses = MAX_ADDRESSES } = {}) {
    this.maxAddresses = maxAddresses;
    // address → { failures, delays, lastAt, blockedUntil }, in the order they were last touched.
    this.byAddress = new Map();
  }

  #live(address, now) {
    const e = this.byAddress.get(address);
    if (e === undefined) return undefined;
    if (now >= Math.max(e.lastAt, e.blockedUntil) + FORGET_MS) {
      this.byAddress.delete(address);
      return undefined;
    }
    return e;
  }

  /** How long (ms) `address` is still held off; 0 when its credentials may be checked. */
  waitMs(address, now) {
    const e = this.#live(address, now);
    return e === undefined ? 0 : Math.max(0, e.blockedUntil - now);
  }

  /** Records a failed credential from `address`. */
  fail(address, now) {
    let e = this.#live(address, now);
    if (e === undefined) e = { failures: 0, delays: 0, lastAt: now, blockedUntil: 0 };
    else this.byAddress.delete(address); // re-inserted below: the Map's order is the touch order
    e.failures++;
    e.lastAt = now;
    if (e.failures >= FREE_FAILURES) {
      e.blockedUntil = now + Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** e.delays);
      e.delays++;
    }
    this.byAddress.set(address, e);
    if (this.byAddress.size > this.maxAddresses) this.byAddress.delete(this.byAddress.keys().next().value);
  }

  get size() {
    return this.byAddress.size;
  }
}

module.exports = { AuthFailures, FREE_FAILURES, FORGET_MS, BASE_DELAY_MS, MAX_DELAY_MS, MAX_ADDRESSES };

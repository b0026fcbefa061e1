'use strict';
// A lease store in this process's memory (lib/quota/store.js): the contract's semantics in plain JS,
// for one process (several engines in it, e.g. one per worker thread sharing nothing else) and as the
// reference a database store can be read against. State is bounded by `maxKeys` (the least recently
// used key goes first; forgetting a key can only refill it early, as a store restart would).
const { finite } = require('../options');
const rules = require('./store-rules');

class MemoryStore {
  #keys = new Map();
  #seq = 1;
  #max;
  #now;

  /**
   * `{ maxKeys = 100000, now }`: `now` (ms) is the store's clock; by default Unix time with its
   * fraction (a window's remainder from a rounded-down instant would let a lease outlive its window).
   */
  constructor({ maxKeys = 100_000, now = () => performance.timeOrigin + performance.now() } = {}) {
    this.#max = finite(maxKeys, 'MemoryStore options.maxKeys', { min: 1, integer: true });
    this.#now = now;
  }

  async lease(batch) {
    return batch.map((r) => this.#grant(r, this.#now()));
  }

  async release(batch) {
    const now = this.#now();
    for (const r of batch) this.#credit(r, now);
  }

  #state(limit, key, now) {
    const k = `${limit.name}\0${key}`;
    let s = this.#keys.get(k);
    if (s === undefined) {
      if (this.#keys.size >= this.#max) this.#keys.delete(this.#keys.keys().next().value);
      s = rules.emptyState(limit, now);
    } else this.#keys.delete(k);
    this.#keys.set(k, s); // most recently used last
    rules.advance(s, limit, now);
    return s;
  }

  #grant(r, now) {
    return rules.grant(this.#state(r.limit, r.key, now), r, now, this.#seq++);
  }

  #credit(r, now) {
    rules.credit(this.#state(r.limit, r.key, now), r, now);
  }
}

module.exports = { MemoryStore };

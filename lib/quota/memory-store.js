'use strict';
// A lease store in this process's memory (lib/quota/store.js): the contract's semantics in plain JS,
// for one process (several engines in it, e.g. one per worker thread sharing nothing else) and as the
// reference a database store can be read against. State is bounded by `maxKeys` (the least recently
// used key goes first; forgetting a key can only refill it early, as a store restart would).
const { finite } = require('../options');

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
      s = { tokens: limit.burst, at: now, window: -1, used: 0, records: [], holders: new Map() };
    } else this.#keys.delete(k);
    this.#keys.set(k, s); // most recently used last
    for (const [h, exp] of s.holders) if (exp <= now) s.holders.delete(h);
    if (limit.algorithm === 'token-bucket') {
      s.tokens = Math.min(limit.burst, s.tokens + ((now - s.at) * limit.rate) / 1000);
      s.at = now;
    } else if (limit.algorithm === 'fixed-window') {
      const w = Math.floor(now / limit.windowMs);
      if (w !== s.window) {
        s.window = w;
        s.used = 0;
      }
    } else s.records = s.records.filter((r) => r.until > now && r.tokens > 0);
    return s;
  }

  #grant({ limit, key, size, ttlMs, holder }, now) {
    const s = this.#state(limit, key, now);
    let granted;
    let remaining;
    let lease = this.#seq++;
    let retryAfterMs = 0;
    if (limit.algorithm === 'token-bucket') {
      granted = Math.min(size, Math.floor(s.tokens));
      s.tokens -= granted;
      remaining = Math.floor(s.tokens);
      // A bucket that never refills may still get tokens back (returns): ask again after a lease's life.
      if (remaining === 0) retryAfterMs = limit.rate > 0 ? Math.ceil(((1 - s.tokens) / limit.rate) * 1000) : ttlMs;
    } else if (limit.algorithm === 'fixed-window') {
      const cap = Math.floor(limit.limit);
      granted = Math.min(size, cap - s.used);
      s.used += granted;
      remaining = cap - s.used;
      const end = (s.window + 1) * limit.windowMs;
      ttlMs = Math.min(ttlMs, end - now);
      lease = s.window;
      if (remaining === 0) retryAfterMs = Math.ceil(end - now);
    } else {
      const cap = Math.floor(limit.limit);
      const used = s.records.reduce((a, r) => a + r.tokens, 0);
      granted = Math.min(size, cap - used);
      if (granted > 0) s.records.push({ id: lease, tokens: granted, until: now + ttlMs + limit.windowMs });
      remaining = cap - used - granted;
      if (remaining === 0) retryAfterMs = Math.ceil(Math.min(...s.records.map((r) => r.until - now)));
    }
    if (granted > 0) s.holders.set(holder, Math.max(s.holders.get(holder) || 0, now + ttlMs));
    const holders = s.holders.size + (s.holders.has(holder) ? 0 : 1);
    return { granted, ttlMs, remaining, holders, lease, retryAfterMs };
  }

  #credit({ limit, key, lease, tokens, reason, holder }, now) {
    const s = this.#state(limit, key, now);
    if (limit.algorithm === 'token-bucket') s.tokens = Math.min(limit.burst, s.tokens + tokens);
    else if (limit.algorithm === 'fixed-window') {
      if (lease === s.window) s.used -= Math.min(tokens, s.used);
    } else {
      const r = s.records.find((x) => x.id === lease);
      if (r !== undefined) r.tokens -= Math.min(tokens, r.tokens);
    }
    if (reason === 'released') s.holders.delete(holder);
  }
}

module.exports = { MemoryStore };

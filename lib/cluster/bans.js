'use strict';
// Bans and allow/deny lists shared across processes: Redis pub/sub carries each change to every
// process, which applies it to a local cache (BanCache) that requests read from memory. A hash
// (`<prefix>:{bans}`) keeps the current bans and lists, so that a process that starts (or
// resubscribes after Redis comes back) loads what it missed.
//
// Events, as published (JSON): { op: 'ban', target, durationMs | null (permanent), reason? }
// | { op: 'lift', target } | { op: 'lists', allow: string[], deny: string[] }, each with `origin`
// (the publishing channel's id). Durations, not instants, cross: each process ends a ban by its own
// clock from when it heard of it. A channel ignores its own events (it applied them when it
// published them).
//
// Connecting another ban table (the gatekeeper's defense): `channel.onRemote(fn)` hands it every
// event from another process; feed its own changes to `channel.ban/lift/setLists`. While `fn` runs,
// `channel.applying` is true and publishing is a no-op, so a table that reports the remote change it
// just applied as its own does not echo it back.
const { randomBytes } = require('node:crypto');
const { typeName } = require('../options');

const MAX_BANS = 100_000;

/** Exact-target bans in memory, with expiry by this process's clock; bounded (soonest-ending go first). */
class BanCache {
  #bans = new Map(); // target -> { until (ms, Infinity: permanent), reason }
  #max;
  lists = { allow: [], deny: [] };

  constructor(max = MAX_BANS) {
    this.#max = max;
  }

  ban(target, durationMs, reason) {
    const until = durationMs === null ? Infinity : Date.now() + durationMs;
    const had = this.#bans.get(target);
    if (had !== undefined && had.until >= until) return;
    if (had === undefined && this.#bans.size >= this.#max) this.#evict();
    this.#bans.set(target, { until, reason: reason || '' });
  }

  lift(target) {
    return this.#bans.delete(target);
  }

  /** The ban on `target` now: `{ until, reason }` or null. */
  get(target) {
    const b = this.#bans.get(target);
    if (b === undefined) return null;
    if (b.until <= Date.now()) {
      this.#bans.delete(target);
      return null;
    }
    return b;
  }

  get size() {
    return this.#bans.size;
  }

  #evict() {
    const now = Date.now();
    let victim;
    let soonest = Infinity;
    for (const [t, b] of this.#bans) {
      if (b.until <= now) {
        this.#bans.delete(t);
        return;
      }
      if (b.until < soonest) {
        soonest = b.until;
        victim = t;
      }
    }
    if (victim !== undefined) this.#bans.delete(victim);
  }
}

class BanChannel {
  #client;
  #sub;
  #channel;
  #hash;
  #listeners = [];
  #started = null;
  /** True while remote events are handed to listeners. */
  applying = false;
  id = randomBytes(6).toString('hex');
  cache = new BanCache();
  stats = { published: 0, received: 0, publishErrors: 0 };

  /** `client`: an ioredis client (Redis or Cluster); `prefix`: the store's key prefix. */
  constructor(client, prefix) {
    this.#client = client;
    this.#channel = `${prefix}:bans`;
    this.#hash = `${prefix}:{bans}`;
  }

  /** Subscribes and loads the current bans; resolves when both are done. */
  start() {
    if (this.#started !== null) return this.#started;
    const sub = this.#client.duplicate();
    sub.on('error', () => {});
    this.#sub = sub;
    sub.on('message', (channel, text) => {
      if (channel === this.#channel) this.#receive(text);
    });
    // After a reconnect (Redis restarted) the subscription is renewed by ioredis; reload what was missed.
    sub.on('ready', () => {
      if (this.#started !== null) this.#load().catch(() => {});
    });
    this.#started = sub.subscribe(this.#channel).then(() => this.#load());
    return this.#started;
  }

  async #load() {
    const all = await this.#client.hgetall(this.#hash);
    const now = Date.now();
    for (const [field, text] of Object.entries(all || {})) {
      let e;
      try {
        e = JSON.parse(text);
      } catch {
        continue;
      }
      if (field === 'lists') this.#apply({ op: 'lists', allow: e.allow, deny: e.deny });
      else if (e.until === null) this.#apply({ op: 'ban', target: e.target, durationMs: null, reason: e.reason });
      else if (e.until > now) this.#apply({ op: 'ban', target: e.target, durationMs: e.until - now, reason: e.reason });
    }
  }

  #receive(text) {
    let e;
    try {
      e = JSON.parse(text);
    } catch {
      return;
    }
    if (e === null || typeof e !== 'object' || e.origin === this.id) return;
    this.stats.received++;
    this.#apply(e);
  }

  #apply(e) {
    if (e.op === 'ban' && typeof e.target === 'string') this.cache.ban(e.target, e.durationMs === null ? null : Math.max(0, Number(e.durationMs) || 0), e.reason);
    else if (e.op === 'lift' && typeof e.target === 'string') this.cache.lift(e.target);
    else if (e.op === 'lists' && Array.isArray(e.allow) && Array.isArray(e.deny)) this.cache.lists = { allow: e.allow.map(String), deny: e.deny.map(String) };
    else return;
    this.applying = true;
    try {
      for (const fn of this.#listeners) {
        try {
          fn(e);
        } catch (err) {
          process.emitWarning(`tiergate: a cluster ban listener threw: ${err && err.stack ? err.stack : err}`, 'TiergateWarning');
        }
      }
    } finally {
      this.applying = false;
    }
  }

  /** Calls `fn(event)` for every change made by another process (and for what `start` loads). */
  onRemote(fn) {
    if (typeof fn !== 'function') throw new TypeError(`onRemote: listener must be a function, got ${typeName(fn)}`);
    this.#listeners.push(fn);
  }

  #publish(e, record) {
    if (this.applying) return Promise.resolve();
    const text = JSON.stringify({ ...e, origin: this.id });
    this.stats.published++;
    const persist = record === undefined ? this.#client.hdel(this.#hash, e.target) : this.#client.hset(this.#hash, e.op === 'lists' ? 'lists' : e.target, JSON.stringify(record));
    return Promise.all([persist, this.#client.publish(this.#channel, text)]).then(
      () => undefined,
      () => {
        this.stats.publishErrors++;
      },
    );
  }

  /** Bans `target` here at once and in every process (`durationMs` null: until lifted). */
  ban(target, { durationMs = null, reason = '' } = {}) {
    if (typeof target !== 'string' || target === '') throw new TypeError(`ban: target must be a non-empty string, got ${typeName(target)}`);
    if (durationMs !== null && !(Number.isFinite(durationMs) && durationMs > 0)) throw new RangeError(`ban: durationMs must be a finite number > 0 or null, got ${durationMs}`);
    this.cache.ban(target, durationMs, reason);
    return this.#publish({ op: 'ban', target, durationMs, reason }, { target, until: durationMs === null ? null : Date.now() + durationMs, reason });
  }

  lift(target) {
    if (typeof target !== 'string' || target === '') throw new TypeError(`lift: target must be a non-empty string, got ${typeName(target)}`);
    this.cache.lift(target);
    return this.#publish({ op: 'lift', target });
  }

  /** Replaces the allow and deny lists everywhere (entries as the receiving table parses them). */
  setLists({ allow = [], deny = [] } = {}) {
    if (!Array.isArray(allow) || !Array.isArray(deny)) throw new TypeError('setLists: allow and deny must be arrays of strings');
    this.cache.lists = { allow: allow.map(String), deny: deny.map(String) };
    const e = { op: 'lists', allow: this.cache.lists.allow, deny: this.cache.lists.deny };
    return this.#publish(e, { allow: e.allow, deny: e.deny });
  }

  async close() {
    if (this.#sub !== undefined) this.#sub.disconnect();
  }
}

module.exports = { BanChannel, BanCache };

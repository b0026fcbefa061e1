'use strict';
// Bans and allow/deny lists shared across processes: Redis pub/sub carries each change to every
// process, which applies it to its one local ban table; requests read that table from memory. A hash
// (`<prefix>:{bans}`) keeps the current bans and lists, so that a process that starts (or
// resubscribes after Redis comes back) loads what it missed.
//
// Events, as published (JSON): { op: 'ban', target, cidr, durationMs | null (permanent), reason,
// source, offense } | { op: 'lift', target, cidr } | { op: 'lists', allow: string[], deny: string[] },
// each with `origin` (the publishing channel's id). Durations, not instants, cross: each process ends a
// ban by its own clock from when it heard of it. A channel ignores its own events.
//
// A lift stays in the hash as a tombstone ({ target, cidr, lifted: Unix ms }) for LIFT_RETENTION_MS, so
// that a process whose subscription was down when it was published still lifts the ban when it
// reloads: a reloaded lift (`before`) ends only a ban that began before it, give or take LIFT_SKEW_MS
// of clock difference between hosts, so that a ban this process made later, while Redis was away,
// stays. A reload prunes expired bans and tombstones; each process reloads every RELOAD_MS too, which
// bounds the hash and repairs whatever else a process missed.
//
// The table is BanCache below (exact keys: the gatekeeper's cluster step reads it) or, when the
// gatekeeper has the abuse defense, the defense's own table (./defense-table.js: CIDR prefixes,
// escalation, lists). A table has ban(target, { durationMs, reason }), lift(target), setLists(lists),
// apply(event) for a remote event, `size`, and connect(report): it reports every change made in
// this process to `report(event)`, which publishes it. While a remote event is applied, reports are
// dropped, so that a table that reports what it just applied does not echo it back.
const { randomBytes } = require('node:crypto');
const { typeName } = require('../options');

const MAX_BANS = 100_000;
/** How long a lift is kept in the hash for processes that reload after missing it. */
const LIFT_RETENTION_MS = 24 * 3600_000;
/** The clock difference between hosts that a reloaded lift allows for. */
const LIFT_SKEW_MS = 60_000;
const RELOAD_MS = 10 * 60_000;
const DELETE_IF_UNCHANGED = "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0";

function checkBan(target, durationMs) {
  if (typeof target !== 'string' || target === '') throw new TypeError(`ban: target must be a non-empty string, got ${typeName(target)}`);
  if (durationMs !== null && !(Number.isFinite(durationMs) && durationMs > 0)) throw new RangeError(`ban: durationMs must be a finite number > 0 or null, got ${durationMs}`);
}

/** Exact-target bans in memory, with expiry by this process's clock; bounded (soonest-ending go first). */
class BanCache {
  #bans = new Map(); // target -> { since, until (Unix ms, Infinity: permanent), reason }
  #max;
  #report = () => {};
  lists = { allow: [], deny: [] };

  constructor(max = MAX_BANS) {
    this.#max = max;
  }

  connect(report) {
    this.#report = report;
  }

  ban(target, { durationMs = null, reason = '' } = {}) {
    checkBan(target, durationMs);
    this.#set(target, durationMs, reason);
    this.#report({ op: 'ban', target, cidr: false, durationMs, reason, source: 'operator', offense: 0 });
  }

  lift(target) {
    if (typeof target !== 'string' || target === '') throw new TypeError(`lift: target must be a non-empty string, got ${typeName(target)}`);
    this.#bans.delete(target);
    this.#report({ op: 'lift', target, cidr: false });
  }

  setLists({ allow = [], deny = [] } = {}) {
    if (!Array.isArray(allow) || !Array.isArray(deny)) throw new TypeError('setLists: allow and deny must be arrays of strings');
    this.lists = { allow: allow.map(String), deny: deny.map(String) };
    this.#report({ op: 'lists', allow: this.lists.allow, deny: this.lists.deny });
  }

  /** A remote event. A CIDR ban cannot match an exact key: it is not held here. */
  apply(e) {
    if (e.op === 'ban') {
      if (e.cidr !== true) this.#set(e.target, e.durationMs, e.reason);
    } else if (e.op === 'lift') {
      const b = this.#bans.get(e.target);
      if (b !== undefined && !(b.since > e.before)) this.#bans.delete(e.target);
    } else this.lists = { allow: e.allow.map(String), deny: e.deny.map(String) };
  }

  #set(target, durationMs, reason) {
    const until = durationMs === null ? Infinity : Date.now() + durationMs;
    const had = this.#bans.get(target);
    if (had !== undefined && had.until >= until) return;
    if (had === undefined && this.#bans.size >= this.#max) this.#evict();
    this.#bans.set(target, { since: Date.now(), until, reason: reason || '' });
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

/** A remote event in a shape a table can apply, or null. */
function wellFormed(e) {
  if (e === null || typeof e !== 'object') return null;
  if (e.op === 'ban' && typeof e.target === 'string' && e.target !== '') {
    const d = e.durationMs === null ? null : Number(e.durationMs);
    if (d !== null && !(Number.isFinite(d) && d >= 0)) return null;
    const offense = Number.isInteger(e.offense) && e.offense >= 0 ? e.offense : 0;
    return { op: 'ban', target: e.target, cidr: e.cidr === true, durationMs: d, reason: typeof e.reason === 'string' ? e.reason : '', source: e.source === 'rule' ? 'rule' : 'operator', offense };
  }
  if (e.op === 'lift' && typeof e.target === 'string' && e.target !== '') return { op: 'lift', target: e.target, cidr: e.cidr === true, before: Number.isFinite(e.before) ? e.before : Infinity };
  if (e.op === 'lists' && Array.isArray(e.allow) && Array.isArray(e.deny)) return { op: 'lists', allow: e.allow.map(String), deny: e.deny.map(String) };
  return null;
}

class BanChannel {
  #client;
  #sub;
  #channel;
  #hash;
  #started = null;
  #applying = false;
  #sent = null;
  #table = null;
  #reload = null;
  id = randomBytes(6).toString('hex');
  stats = { published: 0, received: 0, publishErrors: 0, applyErrors: 0 };

  /** `client`: an ioredis client (Redis or Cluster); `prefix`: the store's key prefix. */
  constructor(client, prefix) {
    this.#client = client;
    this.#channel = `${prefix}:bans`;
    this.#hash = `${prefix}:{bans}`;
    this.useTable(new BanCache());
  }

  /** The local table (a BanCache unless useTable gave another). */
  get table() {
    return this.#table;
  }

  /** Makes `table` the one this process enforces; what the channel holds is loaded into it. */
  useTable(table) {
    this.#table = table;
    table.connect((e) => this.#share(e));
    if (this.#started !== null) this.#started.then(() => this.#load()).catch(() => {});
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
    this.#reload = setInterval(() => this.#load().catch(() => {}), RELOAD_MS).unref();
    return this.#started;
  }

  async #load() {
    const all = await this.#client.hgetall(this.#hash);
    const now = Date.now();
    const stale = [];
    for (const [field, text] of Object.entries(all || {})) {
      let e;
      try {
        e = JSON.parse(text);
      } catch {
        continue;
      }
      if (e === null || typeof e !== 'object') continue;
      if (field === 'lists') this.#apply({ op: 'lists', allow: e.allow, deny: e.deny });
      else if (typeof e.lifted === 'number') {
        if (e.lifted + LIFT_RETENTION_MS > now) this.#apply({ op: 'lift', target: e.target, cidr: e.cidr, before: e.lifted + LIFT_SKEW_MS });
        else stale.push([field, text]);
      } else if (e.until === null || e.until > now) this.#apply({ ...e, op: 'ban', durationMs: e.until === null ? null : e.until - now });
      else stale.push([field, text]);
    }
    // Only if unchanged since read: another process may have banned the same target meanwhile.
    for (const [field, text] of stale) await this.#client.eval(DELETE_IF_UNCHANGED, 1, this.#hash, field, text);
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

  #apply(raw) {
    const e = wellFormed(raw);
    if (e === null) return;
    this.#applying = true;
    try {
      this.#table.apply(e);
    } catch (err) {
      // A record the table refuses (a full table, a prefix it cannot parse): counted, once warned.
      if (this.stats.applyErrors++ === 0) process.emitWarning(`tiergate: a shared ban change was not applied: ${err && err.message}`, 'TiergateWarning');
    } finally {
      this.#applying = false;
    }
  }

  // A change the table made in this process: to the hash and to every other process.
  #share(e) {
    if (this.#applying) return;
    const text = JSON.stringify({ ...e, origin: this.id });
    this.stats.published++;
    const persist = e.op === 'lift'
      ? this.#client.hset(this.#hash, e.target, JSON.stringify({ target: e.target, cidr: e.cidr === true, lifted: Date.now() }))
      : e.op === 'lists'
        ? this.#client.hset(this.#hash, 'lists', JSON.stringify({ allow: e.allow, deny: e.deny }))
        : this.#client.hset(this.#hash, e.target, JSON.stringify({ target: e.target, cidr: e.cidr, until: e.durationMs === null ? null : Date.now() + e.durationMs, reason: e.reason, source: e.source, offense: e.offense }));
    const sent = Promise.all([persist, this.#client.publish(this.#channel, text)]).then(
      () => undefined,
      () => {
        this.stats.publishErrors++;
      },
    );
    if (this.#sent !== null) this.#sent.push(sent);
  }

  // Runs an operator change on the table; resolves when what it reported is published.
  #via(fn) {
    const sent = [];
    this.#sent = sent;
    try {
      fn();
    } finally {
      this.#sent = null;
    }
    return Promise.all(sent).then(() => undefined);
  }

  /** Bans `target` here at once and in every process (`durationMs` null: until lifted). */
  ban(target, { durationMs = null, reason = '' } = {}) {
    return this.#via(() => this.#table.ban(target, { durationMs, reason }));
  }

  lift(target) {
    return this.#via(() => this.#table.lift(target));
  }

  /** Replaces the allow and deny lists everywhere. */
  setLists(lists = {}) {
    return this.#via(() => this.#table.setLists(lists));
  }

  async close() {
    clearInterval(this.#reload);
    if (this.#sub !== undefined) this.#sub.disconnect();
  }
}

module.exports = { BanChannel, BanCache };

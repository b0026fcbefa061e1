'use strict';
// Bans and allow/deny lists shared across processes: Redis pub/sub carries each change to every
// process, which applies it to its one local ban table; requests read that table from memory. A hash
// (`<prefix>:{bans}`) keeps the current bans and lists, so that a process that starts (or
// resubscribes after Redis comes back) loads what it missed.
//
// Events, as published (JSON): { op: 'ban', target, cidr, durationMs | null (permanent), reason,
// source, offense } | { op: 'lift', target, cidr, before? } | { op: 'lists', allow: string[], deny:
// string[] }, each with `origin` (the publishing channel's id) and `sentAt` (Unix ms). Durations, not
// instants, cross: each process ends a ban by its own clock from when it heard of it. A channel
// ignores its own events. Hash fields: `lists`, and `b:k:<target>` / `b:c:<target>` (CIDR) for a ban
// or its tombstone, so no target can land on the lists' field or on a ban of the other kind.
//
// Changes made here go to Redis through an outbox (./ban-outbox.js): queued while Redis does not take
// them, sent when it does (a ban still running, with the time it has left). With `banKey`, every
// message and entry is signed (./ban-signature.js); what does not verify, or a message sent more than
// CLOCK_SKEW_MS from now, is ignored and counted (`rejected`).
//
// A lift stays in the hash as a tombstone ({ target, cidr, lifted: Unix ms }) for LIFT_RETENTION_MS, so
// that a process whose subscription was down when it was published still lifts the ban when it
// reloads: a reloaded lift (`before`) ends only a ban that began before it, give or take CLOCK_SKEW_MS
// of clock difference between hosts, so that a ban this process made later, while Redis was away,
// stays. A reload prunes expired bans and tombstones; each process reloads every RELOAD_MS too, which
// bounds the hash and repairs whatever else a process missed.
//
// The table is BanCache below (exact keys: the gatekeeper's cluster step reads it) or, when the
// gatekeeper has the abuse defense, the defense's own table (./defense-table.js: CIDR prefixes,
// escalation, lists). A table has ban(target, { durationMs, reason }), lift(target), setLists(lists),
// apply(event) for a remote event, `size`, and connect(report): it reports every change made in
// this process to `report(event)`, which queues it for Redis. While a remote event is applied, reports are
// dropped, so that a table that reports what it just applied does not echo it back.
const { randomBytes } = require('node:crypto');
const { typeName } = require('../options');
const { CODES, codedError } = require('../errors');
const { BanSigner } = require('./ban-signature');
const { BanOutbox, MAX_QUEUED } = require('./ban-outbox');

const MAX_BANS = 100_000;
/** How long a lift is kept in the hash for processes that reload after missing it. */
const LIFT_RETENTION_MS = 24 * 3600_000;
/** The clock difference between hosts allowed for: by a reloaded lift, and in a signed message's age. */
const CLOCK_SKEW_MS = 60_000;
/** The longest ban(), lift() or setLists() waits for Redis before it resolves 'queued'; close() waits as long for the queue. */
const SETTLE_MS = 1000;
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

/** The hash field of a ban or its tombstone: one per (target, cidr), apart from the lists' field. */
function banField(target, cidr) {
  return `${cidr === true ? 'b:c:' : 'b:k:'}${target}`;
}

class BanChannel {
  #client;
  #sub;
  #channel;
  #hash;
  #signer;
  #outbox;
  #started = null;
  #applying = false;
  #sent = null;
  #table = null;
  #reload = null;
  #onReady = null;
  id = randomBytes(6).toString('hex');
  #stats = { published: 0, received: 0, publishErrors: 0, applyErrors: 0, rejected: 0 };

  /**
   * `client`: an ioredis client (Redis or Cluster); `prefix`: the store's key prefix; `keys`: the
   * banKey Buffers (the first signs; none: unsigned).
   */
  constructor(client, prefix, keys = []) {
    this.#client = client;
    this.#channel = `${prefix}:bans`;
    this.#hash = `${prefix}:{bans}`;
    this.#signer = new BanSigner(keys);
    this.#outbox = new BanOutbox((changes) => this.#deliver(changes));
    this.useTable(new BanCache());
  }

  /** published/received: changes; publishErrors: sends Redis did not take; queued, dropped: ./ban-outbox.js; rejected: unsigned or stale texts ignored. */
  get stats() {
    return { ...this.#stats, publishErrors: this.#outbox.failures, queued: this.#outbox.size, dropped: this.#outbox.dropped };
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
    // After a reconnect (Redis restarted) ioredis renews the subscription; once a PING behind it is
    // answered the subscription is live, and what was published before it is in the hash: reload.
    sub.on('ready', () => {
      if (this.#started !== null) sub.ping().then(() => this.#load()).catch(() => {});
    });
    // The main connection back: send what was queued meanwhile.
    this.#onReady = () => this.#outbox.flush();
    this.#client.on('ready', this.#onReady);
    this.#started = sub.subscribe(this.#channel).then(() => this.#load());
    this.#reload = setInterval(() => this.#load().catch(() => {}), RELOAD_MS).unref();
    return this.#started;
  }

  async #load() {
    const all = await this.#client.hgetall(this.#hash);
    const now = Date.now();
    const stale = [];
    for (const [field, text] of Object.entries(all || {})) {
      const json = this.#signer.open(`${this.#hash}\n${field}`, text);
      if (json === null) {
        this.#stats.rejected++;
        continue;
      }
      let e;
      try {
        e = JSON.parse(json);
      } catch {
        continue;
      }
      if (e === null || typeof e !== 'object') continue;
      if (field === 'lists') this.#apply({ op: 'lists', allow: e.allow, deny: e.deny });
      else if (typeof e.lifted === 'number') {
        if (e.lifted + LIFT_RETENTION_MS > now) this.#apply({ op: 'lift', target: e.target, cidr: e.cidr, before: e.lifted + CLOCK_SKEW_MS });
        else stale.push([field, text]);
      } else if (e.until === null || e.until > now) this.#apply({ ...e, op: 'ban', durationMs: e.until === null ? null : e.until - now });
      else stale.push([field, text]);
    }
    // Only if unchanged since read: another process may have banned the same target meanwhile.
    for (const [field, text] of stale) await this.#client.eval(DELETE_IF_UNCHANGED, 1, this.#hash, field, text);
  }

  #receive(text) {
    const json = this.#signer.open(this.#channel, text);
    if (json === null) {
      this.#stats.rejected++;
      return;
    }
    let e;
    try {
      e = JSON.parse(json);
    } catch {
      return;
    }
    if (e === null || typeof e !== 'object' || e.origin === this.id) return;
    // Signed, it must also be recent: a message recorded off the channel cannot be replayed later.
    if (this.#signer.signs && !(Math.abs(Date.now() - e.sentAt) <= CLOCK_SKEW_MS)) {
      this.#stats.rejected++;
      return;
    }
    this.#stats.received++;
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
      if (this.#stats.applyErrors++ === 0) process.emitWarning(`tiergate: a shared ban change was not applied: ${err && err.message}`, 'TiergateWarning');
    } finally {
      this.#applying = false;
    }
  }

  // A change the table made in this process: queued for the hash and every other process.
  #share(e) {
    if (this.#applying) return;
    const delivered = this.#outbox.push({ e, at: Date.now() });
    if (delivered === null && this.#outbox.dropped === 1) process.emitWarning(`tiergate: more than ${MAX_QUEUED} ban changes wait for Redis; later ones hold in this process only (stats().bans.dropped)`, 'TiergateWarning');
    if (this.#sent !== null) this.#sent.push(delivered);
  }

  // Writes queued changes to the hash and publishes them, in order; how many, from the first, Redis took.
  async #deliver(changes) {
    const now = Date.now();
    const writes = changes.map(({ e, at }) => {
      const field = e.op === 'lists' ? 'lists' : banField(e.target, e.cidr);
      let entry;
      let message;
      if (e.op === 'ban') {
        const until = e.durationMs === null ? null : at + e.durationMs;
        if (until !== null && until <= now) return null; // ended while it waited: nothing to share
        entry = { target: e.target, cidr: e.cidr, until, reason: e.reason, source: e.source, offense: e.offense };
        message = { ...e, durationMs: until === null ? null : until - now };
      } else if (e.op === 'lift') {
        entry = { target: e.target, cidr: e.cidr === true, lifted: at };
        // Sent late, a lift ends only bans older than itself (as a reloaded one does).
        message = now - at > SETTLE_MS ? { ...e, before: at + CLOCK_SKEW_MS } : e;
      } else {
        entry = { allow: e.allow, deny: e.deny };
        message = e;
      }
      const text = JSON.stringify({ ...message, origin: this.id, sentAt: now });
      // The hash first: a process subscribing meanwhile finds in it what it did not hear.
      return Promise.all([
        this.#client.hset(this.#hash, field, this.#signer.seal(`${this.#hash}\n${field}`, JSON.stringify(entry))),
        this.#client.publish(this.#channel, this.#signer.seal(this.#channel, text)),
      ]);
    });
    const done = await Promise.allSettled(writes);
    let n = 0;
    while (n < done.length && done[n].status === 'fulfilled') n++;
    this.#stats.published += done.slice(0, n).filter((d) => d.value !== null).length;
    return n;
  }

  // Runs an operator change on the table; settles as the changes it reported go to Redis.
  #via(fn) {
    const sent = [];
    this.#sent = sent;
    try {
      fn();
    } finally {
      this.#sent = null;
    }
    if (sent.includes(null)) return Promise.reject(codedError(Error, CODES.BAN_NOT_SHARED, `tiergate: ${MAX_QUEUED} ban changes already wait for Redis; this one holds in this process only`));
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(resolve, SETTLE_MS, 'queued');
    });
    return Promise.race([Promise.all(sent).then(() => 'published'), late]).finally(() => clearTimeout(timer));
  }

  /**
   * Bans `target` here at once and in every process (`durationMs` null: until lifted). Resolves
   * 'published' once Redis has it, or 'queued' when it does not within SETTLE_MS (it is sent when
   * Redis takes it); rejects with ERR_TIERGATE_BAN_NOT_SHARED when the queue is full.
   */
  ban(target, { durationMs = null, reason = '' } = {}) {
    return this.#via(() => this.#table.ban(target, { durationMs, reason }));
  }

  /** Lifts a ban here and everywhere; settles as ban() does. */
  lift(target) {
    return this.#via(() => this.#table.lift(target));
  }

  /** Replaces the allow and deny lists everywhere; settles as ban() does. */
  setLists(lists = {}) {
    return this.#via(() => this.#table.setLists(lists));
  }

  /** Sends what is queued (waiting up to SETTLE_MS), then unsubscribes. */
  async close() {
    clearInterval(this.#reload);
    await this.#outbox.close(SETTLE_MS);
    if (this.#onReady !== null) this.#client.off('ready', this.#onReady);
    if (this.#sub !== undefined) this.#sub.disconnect();
  }
}

module.exports = { BanChannel, BanCache, SETTLE_MS, CLOCK_SKEW_MS, DELETE_IF_UNCHANGED };

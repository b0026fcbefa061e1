'use strict';
// The lease driver: the background loop around a lease engine (lib/quota/engine.js) and a store
// (lib/quota/store.js says what a store implements). Every tick it polls the engine, sends the
// requests due to the store in batches and the returns after them, and hands the answers back
// (grant / fail). Decisions are counted by code.
//
// Two bounds, kept apart because a late answer from a live store is not a dead store:
// - `storeTimeoutMs` bounds a spend's wait: a spend that needs a lease waits for its key's one
//   request, at most storeTimeoutMs from when that request went out (a stall of this process's own
//   loop before it could send adds to that; no library can shorten it), then is refused as WAITED.
//   The request itself stays in flight: its answer, however late, funds the key's next spends.
// - `storeDownMs` judges the store: a store error, or a request unanswered that long, fails the
//   request and the engine falls back for that limit ('open': the last leases, then a safe share;
//   'closed': refuse) until a grant comes back. An answer later than that is applied and its tokens
//   sent back.
const { randomBytes } = require('node:crypto');
const { Quota, QUOTA_CODE, QUOTA_CODE_NAMES: CODE_NAMES } = require('./engine');
const { checkStore } = require('./store');
const { isObject, onlyKnown, finite, typeName } = require('../options');
const { buildingOptions } = require('../errors');
const { LEASE_DRIVER } = require('../schema/cluster');
const { defaultsOf, optionNames, rangeOf } = require('../schema');

const { NEED_LEASE, AWAITING, STORE_DOWN, WAITED } = QUOTA_CODE;
/** Codes of decisions taken because the store was not answering. */
const FALLBACK_CODES = [QUOTA_CODE.FALLBACK, QUOTA_CODE.STORE_DOWN, QUOTA_CODE.SHARE];

/** The driver's defaults and ranges, declared once (lib/schema/cluster.js). */
const DRIVER_DEFAULTS = Object.freeze(defaultsOf(LEASE_DRIVER));
const OPTION_FIELDS = optionNames(LEASE_DRIVER);

function camel(name) {
  return name.toLowerCase().replace(/_(\w)/g, (_, c) => c.toUpperCase());
}

function driverOptions(options) {
  if (options === undefined) options = {};
  if (!isObject(options)) throw new TypeError(`LeaseDriver options must be an object, got ${typeName(options)}`);
  onlyKnown(options, OPTION_FIELDS, 'LeaseDriver options');
  const get = (f, range = rangeOf(LEASE_DRIVER[f])) => finite(options[f] === undefined ? DRIVER_DEFAULTS[f] : options[f], `LeaseDriver options.${f}`, range);
  const holder = options.holder === undefined ? randomBytes(8).toString('hex') : options.holder;
  if (typeof holder !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(holder)) {
    throw new TypeError(`LeaseDriver options.holder must be 1-64 characters of A-Z a-z 0-9 _ . : -, got ${typeName(holder)} ${JSON.stringify(holder)}`);
  }
  const storeTimeoutMs = get('storeTimeoutMs');
  // A store that answers within a spend's wait is never taken for down: at least storeTimeoutMs.
  const storeDownMs = options.storeDownMs === undefined
    ? Math.max(DRIVER_DEFAULTS.storeDownMs, storeTimeoutMs)
    : get('storeDownMs', { ...rangeOf(LEASE_DRIVER.storeDownMs), min: storeTimeoutMs });
  return { storeTimeoutMs, storeDownMs, pollIntervalMs: get('pollIntervalMs'), batchSize: get('batchSize'), holder };
}

const wkey = (limit, key) => `${limit}\0${key}`;

// Timers run before the loop reads its sockets: after a long turn (a busy process), a store's answer
// that came in time may still be unread when its timeout fires. It is not a timeout: read it first.
const afterPendingIo = (fn) => setImmediate(fn);

class LeaseDriver {
  #quota;
  #trySpend;
  #result;
  #store;
  #o;
  /** Request id -> { id, limit, key, size, ttlMs, done }: sent, not yet answered (or timed out). */
  #inflight = new Map();
  /** (limit, key) -> spends waiting for that key's answer. */
  #waiters = new Map();
  #counts = new Float64Array(CODE_NAMES.length);
  #s = { batches: 0, requestsSent: 0, returnsSent: 0, storeErrors: 0, returnErrors: 0, timeouts: 0, lateGrants: 0, waits: 0, waitTimeouts: 0, maxWaitMs: 0 };
  #timer;
  #flushQueued = false;
  #closed = false;

  /**
   * @param {Quota} quota the engine
   * @param {object} store a lease store (lib/quota/store.js)
   * @param {{ storeTimeoutMs?: number, pollIntervalMs?: number, batchSize?: number, holder?: string }} [options]
   */
  constructor(quota, store, options) {
    buildingOptions(() => {
      if (!(quota instanceof Quota)) throw new TypeError(`LeaseDriver: quota must be a Quota, got ${typeName(quota)}`);
      checkStore(store, 'LeaseDriver: store');
      this.#o = driverOptions(options);
    });
    this.#quota = quota;
    this.#trySpend = quota.trySpend;
    this.#result = quota.result;
    this.#store = store;
    this.#timer = setInterval(() => this.flush(), this.#o.pollIntervalMs);
    this.#timer.unref();
  }

  /** This process's name in the store (holder counts, returns). */
  get holder() {
    return this.#o.holder;
  }

  get quota() {
    return this.#quota;
  }

  get storeTimeoutMs() {
    return this.#o.storeTimeoutMs;
  }

  get storeDownMs() {
    return this.#o.storeDownMs;
  }

  /**
   * Spends `cost` tokens of `key` under limit id `limit`. Decided from process memory: a code at once
   * (QUOTA_CODE: LEASE, PROVISIONAL or FALLBACK admit; a refusal's wait is `driver.result[0]`, read it
   * before the next spend). A key without lease under `unfunded: 'wait'` gives a Promise of
   * `{ code, retryAfterMs }` instead, settled within `storeTimeoutMs`.
   */
  spend(limit, key, cost = 1) {
    const c = this.#trySpend(limit, key, cost);
    if (c !== NEED_LEASE && c !== AWAITING) {
      this.#counts[c]++;
      return c;
    }
    if (c === NEED_LEASE) this.#queueFlush();
    return this.#wait(limit, key, cost);
  }

  /** `spend`, always as a Promise of `{ allowed, code, reason, retryAfterMs }` (reason: the code's name). */
  async check(limit, key, cost = 1) {
    const r = this.spend(limit, key, cost);
    const d = typeof r === 'number' ? { code: r, retryAfterMs: r > AWAITING ? this.#result[0] : 0 } : await r;
    return { allowed: d.code < NEED_LEASE, code: d.code, reason: CODE_NAMES[d.code], retryAfterMs: d.retryAfterMs };
  }

  /** The Float64Array `[retryAfterMs]` the last synchronous refusal wrote. */
  get result() {
    return this.#result;
  }

  #wait(limit, key, cost) {
    this.#s.waits++;
    if (this.#closed) return Promise.resolve(this.#settleNow(STORE_DOWN, this.#o.storeTimeoutMs));
    return new Promise((resolve) => {
      const w = { limit, key, cost, resolve, timer: null, t0: performance.now(), answered: false };
      // Re-armed from the send if its request goes out later than now (#armFromSend).
      this.#arm(w, this.#o.storeTimeoutMs);
      const k = wkey(limit, key);
      const list = this.#waiters.get(k);
      if (list === undefined) this.#waiters.set(k, [w]);
      else list.push(w);
    });
  }

  #arm(w, ms) {
    clearTimeout(w.timer);
    w.timer = setTimeout(() => afterPendingIo(() => this.#waitExpired(w)), ms);
  }

  /**
   * The spends waiting on `chunk`'s keys that no answer has reached yet wait storeTimeoutMs from now,
   * when their request goes out: the time before it (this loop busy, or stalled) was not the store's.
   */
  #armFromSend(chunk) {
    const now = performance.now();
    for (const r of chunk) {
      const list = this.#waiters.get(wkey(r.limit, r.key));
      if (list === undefined) continue;
      for (const w of list) {
        if (!w.answered && now - w.t0 > 1) this.#arm(w, this.#o.storeTimeoutMs);
      }
    }
  }

  #settleNow(code, retryAfterMs) {
    this.#counts[code]++;
    return { code, retryAfterMs };
  }

  #settle(w, code, retryAfterMs = code > AWAITING ? this.#result[0] : 0) {
    clearTimeout(w.timer);
    const waited = performance.now() - w.t0;
    if (waited > this.#s.maxWaitMs) this.#s.maxWaitMs = waited;
    w.resolve(this.#settleNow(code, retryAfterMs));
  }

  /** Asks again for every spend waiting on (limit, key): its answer (or failure) is in. */
  #retryWaiters(limit, key) {
    const k = wkey(limit, key);
    const list = this.#waiters.get(k);
    if (list === undefined) return;
    this.#waiters.delete(k);
    const still = [];
    for (const w of list) {
      const c = this.#trySpend(w.limit, w.key, w.cost);
      if (c === NEED_LEASE || c === AWAITING) {
        if (c === NEED_LEASE) this.#queueFlush();
        w.answered = true;
        still.push(w);
      } else this.#settle(w, c);
    }
    if (still.length > 0) {
      const later = this.#waiters.get(k);
      this.#waiters.set(k, later === undefined ? still : still.concat(later));
    }
  }

  /**
   * A spend waited `storeTimeoutMs` for its key's request. It is decided now from what the engine
   * holds; still unfunded, it is refused as WAITED (a refusal, never an admission from the fallback
   * share: a slow store is not a down one). Its request stays in flight.
   */
  #waitExpired(w) {
    const k = wkey(w.limit, w.key);
    const rest = this.#waiters.get(k);
    if (rest === undefined || !rest.includes(w)) return;
    rest.splice(rest.indexOf(w), 1);
    if (rest.length === 0) this.#waiters.delete(k);
    const c = this.#trySpend(w.limit, w.key, w.cost);
    if (c === NEED_LEASE || c === AWAITING) {
      this.#s.waitTimeouts++;
      if (c === NEED_LEASE) this.#queueFlush();
      this.#settle(w, WAITED, this.#o.storeTimeoutMs);
    } else this.#settle(w, c);
  }

  #queueFlush() {
    if (this.#flushQueued || this.#closed) return;
    this.#flushQueued = true;
    // After this turn's other spends, so that they go out in one batch.
    setImmediate(() => {
      this.#flushQueued = false;
      this.flush();
    });
  }

  /** Polls the engine and sends what is due (the loop does this every `pollIntervalMs`). */
  flush() {
    if (this.#closed) return;
    const { requests, returns } = this.#quota.poll();
    const n = this.#o.batchSize;
    for (let i = 0; i < requests.length; i += n) this.#sendRequests(requests.slice(i, i + n));
    if (returns.length > 0) this.#sendReturns(returns);
  }

  #sendRequests(chunk) {
    const specs = this.#quota.limits;
    const holder = this.#o.holder;
    const batch = chunk.map((r) => ({ limit: specs[r.limit], key: r.key, size: r.size, ttlMs: r.ttlMs, holder }));
    for (const r of chunk) {
      r.done = false;
      this.#inflight.set(r.id, r);
    }
    this.#s.batches++;
    this.#s.requestsSent += chunk.length;
    this.#armFromSend(chunk);
    const timer = setTimeout(() => afterPendingIo(() => {
      for (const r of chunk) {
        if (!r.done) {
          this.#s.timeouts++;
          this.#failOne(r);
        }
      }
    }), this.#o.storeDownMs);
    let sent;
    try {
      sent = Promise.resolve(this.#store.lease(batch));
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      (answers) => {
        clearTimeout(timer);
        this.#answer(chunk, answers);
      },
      () => {
        clearTimeout(timer);
        this.#s.storeErrors++;
        for (const r of chunk) this.#failOne(r);
      },
    );
  }

  #answer(chunk, answers) {
    const back = [];
    for (let i = 0; i < chunk.length; i++) {
      const r = chunk[i];
      const a = Array.isArray(answers) ? answers[i] : undefined;
      if (a === undefined || a === null || a instanceof Error) {
        this.#s.storeErrors++;
        this.#failOne(r);
        continue;
      }
      if (r.done) this.#s.lateGrants++;
      let ret;
      try {
        // A grant after a timeout comes back as `late` (its tokens to return): the engine tells.
        ret = this.#quota.grant(r.limit, r.key, r.id, a);
      } catch {
        this.#s.storeErrors++;
        this.#failOne(r);
        continue;
      }
      this.#forget(r);
      if (ret !== null && ret !== undefined) back.push(ret);
      this.#retryWaiters(r.limit, r.key);
    }
    if (back.length > 0) this.#sendReturns(back);
    if (this.#quota.wantsPoll()) this.#queueFlush();
  }

  #forget(r) {
    if (!r.done) {
      r.done = true;
      this.#inflight.delete(r.id);
    }
  }

  #failOne(r) {
    if (r === undefined || r.done) return;
    this.#forget(r);
    this.#quota.fail(r.limit, r.key, r.id);
    this.#retryWaiters(r.limit, r.key);
  }

  #sendReturns(returns) {
    const specs = this.#quota.limits;
    const holder = this.#o.holder;
    const batch = returns.map((r) => ({ limit: specs[r.limit], key: r.key, lease: r.lease, tokens: r.tokens, reason: r.reason, idleMs: r.idleMs, holder }));
    this.#s.returnsSent += batch.length;
    let sent;
    try {
      sent = Promise.resolve(this.#store.release(batch));
    } catch (err) {
      sent = Promise.reject(err);
    }
    // Best effort: a lost return strands its tokens until the lease's TTL.
    return sent.then(undefined, () => {
      this.#s.returnErrors++;
    });
  }

  /**
   * The engine's totals (lib/quota/engine.js) and the driver's: `decisions` by code name,
   * `fallbackDecisions` (decisions taken because the store was not answering: FALLBACK, STORE_DOWN,
   * SHARE), waits, waitTimeouts (spends refused as WAITED), maxWaitMs (the longest a spend waited for the
   * store), batches, requestsSent, returnsSent, storeErrors, returnErrors, timeouts, lateGrants, inFlight.
   */
  stats() {
    const decisions = {};
    CODE_NAMES.forEach((n, i) => {
      if (i !== NEED_LEASE && i !== AWAITING) decisions[camel(n)] = this.#counts[i];
    });
    const fallbackDecisions = FALLBACK_CODES.reduce((s, c) => s + this.#counts[c], 0);
    return { ...this.#quota.stats(), ...this.#s, decisions, fallbackDecisions, inFlight: this.#inflight.size };
  }

  /**
   * Stops the loop, decides every waiting spend (as the store being down), and sends every unspent
   * lease back (waiting at most `storeTimeoutMs` for the store). The store itself is the caller's.
   */
  async close() {
    if (this.#closed) return;
    clearInterval(this.#timer);
    for (const [, list] of this.#waiters) {
      for (const w of list) this.#settle(w, STORE_DOWN, this.#o.storeTimeoutMs);
    }
    this.#waiters.clear();
    const returns = this.#quota.releaseAll();
    this.#closed = true;
    if (returns.length === 0) return;
    let timer;
    const timeout = new Promise((resolve) => {
      timer = setTimeout(resolve, this.#o.storeTimeoutMs);
    });
    await Promise.race([this.#sendReturns(returns), timeout]);
    clearTimeout(timer);
  }
}

module.exports = { LeaseDriver, DRIVER_DEFAULTS, FALLBACK_CODES, driverOptions };

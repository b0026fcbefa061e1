'use strict';
// Counting a named limit's requests by their outcome (express-rate-limit's `skipSuccessfulRequests`,
// `skipFailedRequests`, `requestWasSuccessful`) and by a weight the handler reports after the fact
// (`gate.limits.charge(req, name, units)`: an LLM call's tokens).
//
// Exact under concurrency: a request is counted when it is admitted (its reservation: the limit's
// cost, as any request), and settled when its response closes: a skipped outcome gives the
// reservation back (natively, `limitRefund`, only what still counts: not a window that has passed),
// a reported weight is added (`limitCharge`, up to what the key has left). Since every admitted
// request holds its unit until it settles, a burst against a limit of N admits at most N requests
// that have not settled as skipped: 50 failing logins at once against 5 admit exactly 5.
//
// Memory: the settlement record lives on the response (a symbol), nothing in a map; it is settled
// once, at 'close', which node emits after 'finish' and also when the connection closes first (that
// request settles as failed).
const { performance } = require('node:perf_hooks');
const { typeName, optionalFn, boolean } = require('../options');

/** The record of a request a limit counts by outcome, on its response and its request. */
const SETTLE = Symbol('tiergate.limits.settle');
/** Fields per settlement item in a record's flat `items`: limit index, key, by address, cost, weight. */
const ITEM = 5;

/** express-rate-limit's default: a response below 400 is a success. */
function statusBelow400(_req, res) {
  return res.statusCode < 400;
}

/** The outcome options of one local limit: `{ skipSuccessful, skipFailed, wasSuccessful }`. */
function compileOutcome(l, at) {
  const skipSuccessful = l.skipSuccessfulRequests === undefined ? false : boolean(l.skipSuccessfulRequests, `${at}.skipSuccessfulRequests`);
  const skipFailed = l.skipFailedRequests === undefined ? false : boolean(l.skipFailedRequests, `${at}.skipFailedRequests`);
  const fn = optionalFn(l.requestWasSuccessful, `${at}.requestWasSuccessful`);
  if (fn !== null && !skipSuccessful && !skipFailed) {
    throw new TypeError(`${at}.requestWasSuccessful is read only with skipSuccessfulRequests or skipFailedRequests; set one, or leave it out`);
  }
  return { skipSuccessful, skipFailed, wasSuccessful: fn === null ? statusBelow400 : fn };
}

/** The one 'close' listener (no closure per request): settles the record on the response. */
function onClose() {
  const rec = this[SETTLE];
  if (rec === undefined || rec.settled) return;
  rec.settled = true;
  rec.outcome.settle(rec, this);
}

class Outcome {
  #handle;
  #limits;
  #warn;

  /** `handle`: the DefenseHandle; `limits`: the compiled local limits; `warn(name, err)`. */
  constructor(handle, limits, warn) {
    this.#handle = handle;
    this.#limits = limits;
    this.#warn = warn;
    /** Indices of the limits that count by outcome (empty: nothing to watch). */
    this.watched = limits.flatMap((l, i) => (l.skipSuccessful || l.skipFailed ? [i] : []));
  }

  /**
   * After an admission at `t0` (performance.now() before the decision, so the age is never short):
   * records the reservations of the watched limits that counted this request (`keys[i]`: true for
   * the client address `ip`, or the key; `costs`: one per limit, or null for 1).
   */
  reserve(req, res, keys, keyAt, costs, ip, t0) {
    if (typeof res.on !== 'function') return;
    let items = null;
    for (const i of this.watched) {
      const k = keys[keyAt + i];
      const cost = costs === null ? 1 : costs[i];
      if (k === undefined || cost === 0) continue;
      if (items === null) items = [];
      items.push(i, k === true ? ip : k, k === true, cost, 0);
    }
    if (items === null) return;
    const rec = { outcome: this, req, t0, items, settled: false };
    req[SETTLE] = rec;
    res[SETTLE] = rec;
    res.on('close', onClose);
  }

  /**
   * Adds `units` to what limit `i` counts for `req` when its response settles: true when `req` holds
   * an unsettled reservation of that limit (else the caller charges now).
   */
  defer(req, i, units) {
    const rec = req[SETTLE];
    if (rec === undefined || rec.settled) return false;
    const items = rec.items;
    for (let j = 0; j < items.length; j += ITEM) {
      if (items[j] === i) {
        items[j + 4] += units;
        return true;
      }
    }
    return false;
  }

  settle(rec, res) {
    const { req, items } = rec;
    const ageMs = Math.max(0, performance.now() - rec.t0);
    // Closed before the response finished: a failure (requestWasSuccessful is not asked).
    const finished = res.writableFinished === true;
    for (let j = 0; j < items.length; j += ITEM) {
      const i = items[j];
      const l = this.#limits[i];
      const ok = finished && this.#successful(l, req, res);
      const skip = ok ? l.skipSuccessful : l.skipFailed;
      try {
        if (skip) this.#handle.limitRefund(i, items[j + 1], items[j + 2], items[j + 3], ageMs);
        else if (items[j + 4] > 0) this.#handle.limitCharge(i, items[j + 1], items[j + 2], Math.min(items[j + 4], 0xffffffff));
      } catch (err) {
        this.#warn(`${l.option}.settle`, err);
      }
    }
  }

  #successful(l, req, res) {
    try {
      const v = l.wasSuccessful(req, res);
      if (typeof v === 'boolean') return v;
      this.#warn(`${l.option}.requestWasSuccessful`, new TypeError(`must return a boolean, got ${typeName(v)}; counted as a failure`));
    } catch (err) {
      this.#warn(`${l.option}.requestWasSuccessful`, err);
    }
    return false;
  }
}

module.exports = { Outcome, compileOutcome, SETTLE };

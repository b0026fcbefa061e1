'use strict';
// Batches checks into store transactions. Checks that arrive together (one turn of the event loop)
// for one client are decided in one transaction, in arrival order; while a client's batch is at the
// store, its next checks gather for the following one. The more callers wait, the larger a batch and
// the fewer transactions per decision: a hot client costs one lock per batch, not per check. At most
// MAX_AT_STORE batches are at the store at once; while they are, checks of every client gather for
// the next one. Every check is answered within the store timeout of its arrival: a batch at the store
// past its deadline is answered 503 and its slot given to the next.
const { performance } = require('node:perf_hooks');
const { HttpError } = require('./http');

/** The most checks of one client decided in one transaction. */
const MAX_BATCH = 1000;
/** The most batches at the store at once. A cap, rather than a batch every turn: fewer, larger
 * transactions cost the database and this process less, and instances sharing PostgreSQL wait on
 * fewer row locks (benchmark/RESULTS.md, load:test). Two, not one, so that a batch waiting on a lock
 * held elsewhere does not stop every other client's decisions. A synchronous store (SQLite) answers
 * before the next turn, so it never meets the cap. */
const MAX_AT_STORE = 2;

class Decisions {
  constructor(store, { log, timeoutMs }) {
    this.store = store;
    this.log = log;
    this.timeoutMs = timeoutMs;
    // When a batch last ended decided and when one last failed whole (the store gave no answer):
    // readiness is off while the last one failed (see failing()).
    this.decidedAt = 0;
    this.failedAt = 0;
    this.pending = new Map(); // clientKey → [{ cost, resolve, reject }]
    this.busy = new Set(); // clientKeys with a batch at the store
    this.scheduled = false;
    this.inFlight = 0;
    this.idleWaiters = [];
    this.run = () => this.flush();
  }

  /** Resolves to the store's outcome for this check: { found, banned?, policy, result, now }. */
  check(clientKey, cost) {
    return new Promise((resolve, reject) => {
      let list = this.pending.get(clientKey);
      if (!list) {
        this.pending.set(clientKey, (list = []));
        list.since = performance.now(); // its checks' deadline is since + timeoutMs
      }
      list.push({ cost, resolve, reject });
      this.schedule();
    });
  }

  schedule() {
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.run);
    }
  }

  flush() {
    this.scheduled = false;
    if (this.inFlight >= MAX_AT_STORE) return; // the batch that ends next schedules this again
    const batch = new Map();
    const waiters = new Map();
    let since = Infinity; // the oldest check's arrival: the batch's deadline is since + timeoutMs
    for (const [key, list] of this.pending) {
      if (this.busy.has(key)) continue;
      const take = list.length > MAX_BATCH ? list.splice(0, MAX_BATCH) : list;
      if (take === list) this.pending.delete(key);
      batch.set(key, take.map((w) => w.cost));
      waiters.set(key, take);
      this.busy.add(key);
      if (list.since < since) since = list.since;
    }
    if (batch.size === 0) return;
    this.inFlight++;
    const deadline = since + this.timeoutMs;
    let ended = false;
    const done = () => {
      ended = true;
      clearTimeout(timer);
      for (const key of batch.keys()) this.busy.delete(key);
      this.inFlight--;
      if (this.pending.size) this.schedule();
      else if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    };
    const fail = (list, err) => {
      this.log.error('store decision failed', { error: String(err && (err.cause || err).message) });
      // The store's own 503 says what failed (a timeout, a locked row); anything else is not shown.
      const failure = err instanceof HttpError ? err : new HttpError(503, 'STORE_UNAVAILABLE', 'the store did not answer; try again');
      for (const w of list) w.reject(failure);
    };
    const failAll = (err) => {
      this.failedAt = performance.now();
      done();
      for (const list of waiters.values()) fail(list, err);
    };
    // The store ends its own work by the deadline too (a PostgreSQL connection that has not answered
    // is destroyed); this timer is the answer's bound whatever the store does.
    const timer = setTimeout(() => {
      if (!ended) failAll(new HttpError(503, 'STORE_UNAVAILABLE', `the store did not answer within ${this.timeoutMs} ms; try again`));
    }, Math.max(0, deadline - performance.now()));
    // A store answers a Map of clientKey → outcome, or → Error for a client whose transaction failed
    // (nothing of it was committed), or rejects for the whole batch.
    this.store.decideBatch(batch, deadline).then((outcomes) => {
      if (ended) return; // answered 503 at the deadline; what the store committed since only counts against the limit
      this.decidedAt = performance.now();
      done();
      for (const [key, list] of waiters) {
        const o = outcomes.get(key);
        if (o instanceof Error) { fail(list, o); continue; }
        list.forEach((w, i) => w.resolve(o.found && !o.banned ? { found: true, policy: o.policy, result: o.results[i], now: o.now } : o));
      }
    }, (err) => {
      if (!ended) failAll(err);
    });
  }

  /** Whether the store failed the last batch that ended (no answer, or none in time), less than a
   * store timeout ago: decisions are stuck, and the instance is not ready. */
  failing() {
    return this.failedAt > this.decidedAt && performance.now() - this.failedAt < this.timeoutMs;
  }

  /** Resolves when no check is waiting or at the store (for a drain). */
  idle() {
    if (this.pending.size === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

module.exports = { Decisions, MAX_BATCH, MAX_AT_STORE };

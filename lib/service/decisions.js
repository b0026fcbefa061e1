'use strict';
// Batches checks into store transactions. Checks that arrive together (one turn of the event loop)
// for one client are decided in one transaction, in arrival order; while a client's batch is at the
// store, its next checks gather for the following one. The more callers wait, the larger a batch and
// the fewer transactions per decision: a hot client costs one lock per batch, not per check. At most
// MAX_AT_STORE batches are at the store at once; while they are, checks of every client gather for
// the next one.
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
  constructor(store, { log }) {
    this.store = store;
    this.log = log;
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
      if (!list) this.pending.set(clientKey, (list = []));
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
    for (const [key, list] of this.pending) {
      if (this.busy.has(key)) continue;
      const take = list.length > MAX_BATCH ? list.splice(0, MAX_BATCH) : list;
      if (take === list) this.pending.delete(key);
      batch.set(key, take.map((w) => w.cost));
      waiters.set(key, take);
      this.busy.add(key);
    }
    if (batch.size === 0) return;
    this.inFlight++;
    const done = () => {
      for (const key of batch.keys()) this.busy.delete(key);
      this.inFlight--;
      if (this.pending.size) this.schedule();
      else if (this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    };
    const fail = (list, err) => {
      this.log.error('store decision failed', { error: String(err && (err.cause || err).message) });
      const failure = new HttpError(503, 'STORE_UNAVAILABLE', 'the store did not answer; try again');
      for (const w of list) w.reject(failure);
    };
    // A store answers a Map of clientKey → outcome, or → Error for a client whose transaction failed
    // (nothing of it was committed), or rejects for the whole batch.
    this.store.decideBatch(batch).then((outcomes) => {
      done();
      for (const [key, list] of waiters) {
        const o = outcomes.get(key);
        if (o instanceof Error) { fail(list, o); continue; }
        list.forEach((w, i) => w.resolve(o.found && !o.banned ? { found: true, policy: o.policy, result: o.results[i], now: o.now } : o));
      }
    }, (err) => {
      done();
      for (const list of waiters.values()) fail(list, err);
    });
  }

  /** Resolves when no check is waiting or at the store (for a drain). */
  idle() {
    if (this.pending.size === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }
}

module.exports = { Decisions, MAX_BATCH, MAX_AT_STORE };

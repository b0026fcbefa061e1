'use strict';
// The turn queue: how the gatekeeper serves a saturated loop.
//
// Admitted inline, requests run in the order the loop reads their sockets: on a CPU-bound route a
// protected request read after twenty unprotected ones waits for all twenty. So during a shed episode
// an unprotected request the controller admits does not run in the turn that read it: it waits in its
// tier's FIFO, and one check-phase callback per turn (setImmediate) runs waiters, highest tier first,
// until the turn has spent the turn budget (at least one waiter per turn), then yields to I/O. A turn
// then holds about one budget of unprotected work; a protected request is never queued and runs as
// soon as it is read; what the loop cannot run is shed by how long it waited (shed.queueMaxWaitMs),
// and a full queue (shed.queueMaxLength) makes room by shedding the newest of a lower tier, instead of
// by lag. The budget is time, not a count: a handler that waits on I/O costs little synchronous time,
// so many start per turn and nothing caps how many are in flight.
//
// The queue starts with an episode (pressure > 0), as soon as the lag the controller reads reaches
// START_LAG_SHARE of its target, or when an unprotected request is admitted in a loop turn whose
// previous two inline ones each ran at least the turn budget, without waiting for the spike filter to
// confirm an episode (queueing sheds nothing by itself, and the onset of an overload is where a burst
// admitted inline hurts most: the lag shows a saturated loop only once a sampler tick is late, some
// turns after the first one that ran costly requests back to back);
// it stays on while it holds waiters, and ends once it is empty, the pressure is 0, the lag under that
// start and no turn has left waiters behind for HOLD_MS (a queue that a burst alone started, and whose
// turns have all run it empty, at once).
const { AsyncResource } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');
const { isGone } = require('../adapters');

/** The queue ends this long (ms) after a turn last left waiters behind, once empty and the pressure is 0. */
const HOLD_MS = 1000;
/**
 * The queue starts once the controller's lag reaches this share of its target: queueing sheds
 * nothing by itself, and at an overload's onset each turn inlines the burst the one before let in, so
 * starting a turn or two earlier keeps most of that burst out of the protected tier's way.
 */
const START_LAG_SHARE = 0.25;
/** The async resource type a queued request's callbacks run under (async_hooks' `type`). */
const WAITER_RESOURCE = 'tiergate.TurnQueueWaiter';

const now = () => performance.now();

/**
 * One queued request: a thenable, settled with null (run now) or a rejection. The guard contract's
 * consumer (lib/adapters run()) calls then() once, synchronously, so a waiter is run from the drain's
 * own call stack and its synchronous cost is timed there. Its callbacks run in the async context of
 * the then() call, as a Promise's do: AsyncLocalStorage in the handler sees the request's store, not
 * that of whichever request scheduled the drain. One AsyncResource per waiter, entered at settle():
 * node 20's AsyncResource.bind wraps each function in deprecation getters (DEP0172), which cost
 * about 30 µs per queued request here.
 */
class Waiter {
  constructor(tier, req, res, t0, source, key) {
    this.tier = tier;
    this.req = req;
    this.res = res;
    this.t0 = t0;
    this.source = source; // how its tier was chosen, and its key: for the hooks of a shed
    this.key = key;
    this.ok = null;
    this.fail = null;
    this.context = null;
    this.value = undefined;
  }

  then(ok, fail) {
    if (this.value !== undefined) ok(this.value);
    else {
      this.ok = ok;
      this.fail = typeof fail === 'function' ? fail : null;
      this.context = new AsyncResource(WAITER_RESOURCE);
    }
  }

  settle(value) {
    this.value = value;
    const ok = this.ok;
    if (ok === null) return;
    const context = this.context;
    try {
      context.runInAsyncScope(ok, undefined, value);
    } catch (err) {
      // The adapters catch their handlers' errors; anything else must not end the drain's turn.
      if (this.fail !== null) context.runInAsyncScope(this.fail, undefined, err);
      else process.emitWarning(err);
    } finally {
      context.emitDestroy();
    }
  }
}

class TierQueue {
  constructor() {
    this.items = [];
    this.head = 0;
    this.deferred = 0; // requests that waited here
    this.shed = 0; // shed after waiting (too long, or displaced by a higher tier)
    this.abandoned = 0; // their client went away while they waited
    this.waitMaxMs = 0; // longest wait of a request that then ran
  }

  get length() {
    return this.items.length - this.head;
  }

  first() {
    return this.items[this.head];
  }

  shift() {
    const w = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return w;
  }

  pop() {
    const w = this.items.pop();
    if (this.head === this.items.length) {
      this.items.length = 0;
      this.head = 0;
    }
    return w;
  }
}

class TurnQueue {
  /**
   * `protectedTiers`: per tier id, whether it is protected (never queued). From the gatekeeper's shed
   * options: `turnBudgetMs`; `queueMaxWaitMs`, the longest wait before a waiter is shed instead of
   * run; `queueMaxLength`, the waiters across tiers, beyond which a newcomer takes the place of the
   * newest waiter of a lower tier; `targetLagMs`, the controller's target (the queue starts at
   * START_LAG_SHARE of it). `shed(waiter, waitedMs)`: the rejection for a waiter that is shed (the
   * gatekeeper's 503); a newcomer shed at once is a waiter that never waited.
   */
  constructor(protectedTiers, { turnBudgetMs, queueMaxWaitMs, queueMaxLength, targetLagMs }, shed) {
    this.protected = protectedTiers;
    this.budgetMs = turnBudgetMs;
    this.maxWaitMs = queueMaxWaitMs;
    this.maxLength = queueMaxLength;
    this.startLagMs = targetLagMs * START_LAG_SHARE;
    this.shedRejection = shed;
    this.tiers = protectedTiers.map(() => new TierQueue());
    this.active = false;
    this.size = 0;
    this.peak = 0;
    this.episodes = 0;
    this.lastLeftAt = 0;
    this.burstOnly = false; // it started on a burst in one turn, and no decision since saw lag or pressure
    this.leftBehind = false; // since it started, a turn's budget ran out with waiters left
    this.scheduled = false;
    this.protectedRan = false; // a protected request ran while the queue was on, since the last drain
    this.drainTurn = () => this.drain();
  }

  /**
   * Whether a decision's pressure, lag and inline run (the shorter of the last two runs of the turn
   * between the unprotected requests it admitted inline: 0 when fewer) leave the queue off (it
   * neither starts nor, empty, holds).
   */
  calm(pressure, lagMs, inlineRunMs) {
    return this.lagCalm(pressure, lagMs) && inlineRunMs < this.budgetMs;
  }

  /** Whether pressure and lag alone leave the queue off. */
  lagCalm(pressure, lagMs) {
    return pressure === 0 && lagMs < this.startLagMs;
  }

  /** For an admitted request while the queue may be on: null (run now), a Waiter or a rejection. */
  admit(req, res, tier, pressure, lagMs, inlineRunMs, source, key) {
    if (this.protected[tier]) {
      this.protectedRan = true; // (the gatekeeper asks only while the queue is on or the loop not calm)
      return null;
    }
    const t = now();
    const lagCalm = this.lagCalm(pressure, lagMs);
    const calm = this.calm(pressure, lagMs, inlineRunMs);
    if (!this.active) {
      if (calm) return null;
      this.active = true;
      this.episodes++;
      this.lastLeftAt = t;
      this.burstOnly = lagCalm;
      this.leftBehind = false;
    } else if (this.size === 0 && calm && (t - this.lastLeftAt > HOLD_MS || (this.burstOnly && !this.leftBehind))) {
      // Started by a burst alone, and every turn since ran all it queued: the loop keeps up (a
      // collection or one slow handler between cheap requests, not an overload), so it ends at once.
      this.active = false;
      return null;
    } else if (!lagCalm) {
      this.burstOnly = false;
    }
    const w = new Waiter(tier, req, res, t, source, key);
    if (this.size >= this.maxLength && !this.displaceFor(tier, t)) {
      this.tiers[tier].shed++;
      return this.shedRejection(w, 0);
    }
    this.tiers[tier].items.push(w);
    this.tiers[tier].deferred++;
    if (++this.size > this.peak) this.peak = this.size;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.drainTurn);
    }
    return w;
  }

  // Sheds the newest waiter of the lowest tier below `tier` that has one; false if none has.
  displaceFor(tier, t) {
    for (let id = this.tiers.length - 1; id > tier; id--) {
      const q = this.tiers[id];
      if (q.length === 0) continue;
      const w = q.pop();
      this.size--;
      q.shed++;
      w.settle(this.shedRejection(w, t - w.t0));
      return true;
    }
    return false;
  }

  drain() {
    this.scheduled = false;
    const start = now();
    const tiers = this.tiers;
    // Heads are their tier's oldest: shed the overstayed first (lower tiers may not run for a while).
    for (let id = 0; id < tiers.length; id++) {
      const q = tiers[id];
      while (q.length > 0 && start - q.first().t0 > this.maxWaitMs) {
        const w = q.shift();
        this.size--;
        q.shed++;
        w.settle(this.shedRejection(w, start - w.t0));
      }
    }
    // Protected requests ran since the last drain: they may be the first of a burst whose rest the
    // loop has not read yet. Poll once more before an unprotected handler takes the loop, as a
    // priority scheduler starts a waiting protected request whenever one ends.
    if (this.protectedRan && this.size > 0) {
      this.protectedRan = false;
      this.drainLater(start);
      return;
    }
    let t = start;
    let id = 0;
    while (this.size > 0) {
      while (tiers[id].length === 0) id++;
      const q = tiers[id];
      const w = q.shift();
      this.size--;
      if (isGone(w.res)) {
        q.abandoned++;
        w.settle(this.shedRejection(w, t - w.t0)); // not written: its client is gone
        continue;
      }
      if (t - w.t0 > q.waitMaxMs) q.waitMaxMs = t - w.t0;
      w.settle(null); // runs the request's handler, synchronously
      t = now();
      if (t - start >= this.budgetMs) break;
      id = 0; // what the handler did may have queued a higher tier
    }
    if (this.size > 0) {
      this.leftBehind = true;
      this.drainLater(t);
    }
  }

  // Waiters are left at `t` for a later turn: the queue holds on, and drains again after the next poll.
  drainLater(t) {
    this.lastLeftAt = t;
    this.scheduled = true;
    setImmediate(this.drainTurn);
  }

  /** The queue's figures for stats(). */
  stats() {
    let deferred = 0;
    let shed = 0;
    let abandoned = 0;
    for (const q of this.tiers) {
      deferred += q.deferred;
      shed += q.shed;
      abandoned += q.abandoned;
    }
    return {
      active: this.active, queued: this.size, peak: this.peak, episodes: this.episodes,
      deferred, shed, abandoned, maxWaitMs: this.maxWaitMs, maxQueue: this.maxLength,
    };
  }

  tierStats(id) {
    const q = this.tiers[id];
    return { queued: q.length, deferred: q.deferred, queueShed: q.shed, queueWaitMaxMs: Math.round(q.waitMaxMs * 1000) / 1000 };
  }

  resetStats() {
    this.peak = this.size;
    this.episodes = 0;
    for (const q of this.tiers) q.deferred = q.shed = q.abandoned = q.waitMaxMs = 0;
  }
}

module.exports = { TurnQueue, Waiter, HOLD_MS, START_LAG_SHARE };

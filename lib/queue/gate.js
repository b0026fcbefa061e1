'use strict';
// The concurrency gate: at most `limit` requests in flight, the excess waiting in bounded per-tier
// FIFO queues for at most a timeout, served highest tier first. A guard for lib/adapters (Express,
// Fastify, node:http): admit() answers null (run now), a rejection, or a Promise of either (queued).
//
// Event-driven: a slot comes back when the response emits 'finish' or 'close', or its connection
// closes (./connections.js), and is handed on at the end of that event-loop turn (see "slots"); one
// unref'd timer (./deadline-timer.js) expires waiters. Queued requests hold a Promise, one list node
// and one 'close' listener; the counters are plain JS numbers (a queue of JS continuations gains
// nothing from a native crossing).
const { STATUS_CODES } = require('node:http');
const { performance } = require('node:perf_hooks');
const { isGone, GONE } = require('../adapters');
const { problemBody, problemResponse } = require('../http/problem');
const { WaitQueues } = require('./wait-queues');
const { DeadlineTimer } = require('./deadline-timer');
const { ConnectionWatch } = require('./connections');

const DETAILS = {
  'queue-full': 'The service is at its concurrency limit and its queue for this tier is full. Retry after the time in Retry-After.',
  displaced: 'The request was waiting in the queue and gave its place to a higher-priority request. Retry after the time in Retry-After.',
  timeout: 'The request waited in the queue for longer than the allowed time.',
  codel: 'The queue has been standing; waiting requests of this tier are given only a short wait.',
  closing: 'The service is closing its request queue.',
};

function now() {
  return performance.now();
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

/** Problem documents (RFC 9457), the same for every rejection of a kind and tier: built once. */
function problemBodies(tiers, timeoutStatus) {
  const bodies = {};
  for (const reason of Object.keys(DETAILS)) {
    bodies[reason] = tiers.map((tier) => {
      const status = reason === 'timeout' || reason === 'codel' ? timeoutStatus : 503;
      const b = problemBody({
        type: `urn:tiergate:problem:${reason}`,
        title: STATUS_CODES[status] || 'Request Rejected', // timeoutStatus may be any 4xx/5xx
        status,
        detail: DETAILS[reason],
        tier: tier.name,
      });
      return { status, ...b };
    });
  }
  return bodies;
}

class ConcurrencyGate {
  /** `config`: what ./config.js parseOptions returns. */
  constructor(config) {
    Object.assign(this, config);
    this.queues = new WaitQueues(this.tiers.length);
    this.timer = new DeadlineTimer(() => this.onTimer());
    this.connections = new ConnectionWatch((res) => (res[this.kWaiter] !== undefined ? this.dropGone(res) : this.release(res)));
    this.bodies = problemBodies(this.tiers, this.timeoutStatus);
    this.retrySpan = this.retry.maxSec - this.retry.minSec + 1;
    this.kSlot = Symbol('tiergate.queue.slot'); // res[kSlot]: admission time while the slot is held
    this.kWaiter = Symbol('tiergate.queue.waiter'); // res[kWaiter]: the queue node while queued
    this.inFlight = 0;
    this.peakInFlight = 0;
    this.admittedImmediately = 0;
    this.admittedFromQueue = 0;
    this.released = 0;
    this.lifoDequeues = 0;
    // ---- slots
    // A response that finishes (or whose connection closes) gives its slot back at the end of the
    // current event-loop turn: one setImmediate per turn, shared by every release of that turn, hands
    // the freed slots to the best waiters. The slot is never idle longer than the rest of that turn,
    // and a CPU-bound (synchronous) route runs at most `limit` handlers per turn, so the requests read
    // from sockets meanwhile queue and are served by tier instead of in socket order.
    this.releasing = []; // admission times of the slots given back this turn (-1: no latency sample)
    this.releaseScheduled = false;
    const gate = this;
    this.onResponseEnd = function onResponseEnd() {
      gate.release(this); // 'finish' or 'close'; `this` is the response
    };
    this.onQueuedClose = function onQueuedClose() {
      gate.dropGone(this); // the client of a queued request went away
    };
    this.releaseSlots = () => this.releaseBatch();
    this.waitListeners = new Set(); // (tierName, waitedMs) per admitted request: OpenTelemetry's histogram (lib/metrics/otel.js)
  }

  recordWait(tier, ms) {
    tier.wait.record(ms);
    if (this.waitListeners.size !== 0) for (const fn of this.waitListeners) fn(tier.name, ms);
  }

  // ---- rejections
  rejection(req, tier, reason) {
    const b = this.bodies[reason][tier.id];
    // A 408 closes the connection; anything else says when to come back, jittered: no lockstep return.
    const out = problemResponse(b.status, b, b.status === 408 ? undefined : this.retry.minSec + Math.floor(Math.random() * this.retrySpan));
    if (b.status === 408) out.headers.connection = 'close';
    if (this.onReject !== undefined) {
      try {
        this.onReject({ reason, status: b.status, tier: tier.name }, req); // info first, as every hook
      } catch (err) {
        process.emitWarning(err);
      }
    }
    return out;
  }

  // ---- slots
  takeSlot(res, t) {
    this.inFlight++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    res[this.kSlot] = t;
    res.on('finish', this.onResponseEnd);
    res.on('close', this.onResponseEnd);
    this.connections.track(res);
  }

  /** The slot of `res` comes back (at the end of this turn). Exactly once per slot. */
  release(res) {
    const start = res[this.kSlot];
    if (start === undefined) return;
    res[this.kSlot] = undefined;
    this.connections.untrack(res);
    // Latency samples for the adaptive limit: finished responses only (an aborted one says nothing).
    this.releasing.push(this.adaptive !== null && res.writableFinished ? start : -1);
    if (!this.releaseScheduled) {
      this.releaseScheduled = true;
      setImmediate(this.releaseSlots);
    }
  }

  releaseBatch() {
    this.releaseScheduled = false;
    const batch = this.releasing;
    this.releasing = [];
    const t = now();
    if (this.adaptive !== null) {
      for (let i = 0; i < batch.length; i++) {
        if (batch[i] >= 0 && this.adaptive.sample(t - batch[i], this.inFlight, t)) this.limit = this.adaptive.limit;
      }
    }
    this.inFlight -= batch.length;
    this.released += batch.length;
    if (this.queues.size > 0) this.drain(t);
  }

  // ---- the queue
  enqueue(req, res, tier, t) {
    const node = { req, res, tier, t0: t, resolve: null, prev: null, next: null };
    const promise = new Promise((resolve) => {
      node.resolve = resolve;
    });
    this.queues.push(tier.id, node);
    tier.queuedTotal++;
    res[this.kWaiter] = node;
    res.on('close', this.onQueuedClose);
    this.connections.track(res);
    this.schedule(t);
    return promise;
  }

  unlink(node) {
    this.queues.unlink(node.tier.id, node);
    node.res.removeListener('close', this.onQueuedClose);
    node.res[this.kWaiter] = undefined;
    this.connections.untrack(node.res);
  }

  /** A queued request whose client left: dropped without running its handler. */
  dropGone(res) {
    const node = res[this.kWaiter];
    if (node === undefined) return;
    this.unlink(node);
    node.tier.abandoned++;
    node.resolve(GONE);
    if (this.queues.size === 0) this.timer.disarm();
  }

  expire(node, t) {
    const tier = node.tier;
    const waited = t - node.t0;
    const byCodel = waited < tier.queueTimeoutMs;
    this.unlink(node);
    // One name per cause in hooks, stats and metrics: 'timeout' (the tier's whole queueTimeoutMs),
    // 'codel' (the short wait of a standing queue).
    const cause = byCodel ? 'codel' : 'timeout';
    tier[cause]++;
    if (waited > tier.timeoutWaitMax) tier.timeoutWaitMax = waited;
    node.resolve(this.rejection(node.req, tier, cause));
  }

  // Hands free slots to waiters: highest tier first, oldest first (newest first under adaptive LIFO
  // while the queue is standing). Waiters that have gone or overstayed are dropped on the way.
  drain(t) {
    const queues = this.queues;
    while (this.inFlight < this.limit && queues.size > 0) {
      const tier = this.tiers[queues.first()];
      const fromTail = this.lifo && queues.sizeOf(tier.id) > 1 && this.standing.standing(queues, t);
      const node = fromTail ? queues.tail(tier.id) : queues.head(tier.id);
      if (isGone(node.res)) {
        this.unlink(node);
        tier.abandoned++;
        node.resolve(GONE);
        continue;
      }
      const waited = t - node.t0;
      if (waited > this.standing.allowedWait(tier, queues, t)) {
        this.expire(node, t);
        continue;
      }
      if (fromTail) this.lifoDequeues++;
      this.unlink(node);
      tier.admitted++;
      this.recordWait(tier, waited);
      this.admittedFromQueue++;
      this.takeSlot(node.res, t);
      node.resolve(null);
    }
    this.schedule(t);
  }

  // ---- the timer: armed at the earliest moment a queued request may have to be expired
  nextDeadline(t) {
    const queues = this.queues;
    let next = this.standing.nextChange(queues, t); // CoDel shortens the allowed wait once the queue stands
    for (const tier of this.tiers) {
      const head = queues.head(tier.id);
      if (head !== null) next = Math.min(next, head.t0 + this.standing.allowedWait(tier, queues, t));
    }
    return next;
  }

  schedule(t) {
    if (this.queues.size === 0) this.timer.disarm();
    else this.timer.arm(this.nextDeadline(t), t);
  }

  onTimer() {
    const t = now();
    const queues = this.queues;
    for (const tier of this.tiers) {
      const allowed = this.standing.allowedWait(tier, queues, t);
      for (let head = queues.head(tier.id); head !== null && t - head.t0 >= allowed; head = queues.head(tier.id)) this.expire(head, t);
    }
    if (this.inFlight < this.limit && queues.size > 0) this.drain(t);
    else this.schedule(t);
  }

  // ---- the guard
  /** `route`: a route's own tier id (compileRoute), or undefined. */
  admit(req, res, route) {
    // The client may have left while an earlier middleware or hook ran: a slot taken now would never
    // come back through the response's events.
    if (isGone(res)) return GONE;
    // Already holds this gate's slot (the same gate mounted twice, e.g. on the app and a router):
    // a second slot would never be released, and with one slot left it would wait behind itself.
    if (res[this.kSlot] !== undefined) return null;
    const tier = this.classifyRequest(req, route);
    const t = now();
    const queues = this.queues;
    if (queues.size > 0 && this.inFlight < this.limit) this.drain(t); // only after a limit change or stale waiters
    if (this.inFlight < this.limit && queues.size === 0) {
      tier.admitted++;
      this.recordWait(tier, 0);
      this.admittedImmediately++;
      this.takeSlot(res, t);
      return null;
    }
    if (queues.sizeOf(tier.id) >= tier.maxQueue) {
      tier.rejected++;
      return this.rejection(req, tier, 'queue-full');
    }
    if (queues.size >= this.maxQueue) {
      // Full: a higher tier may displace the newest waiter of the lowest tier below it.
      const victimId = this.displace ? queues.lowestBelow(tier.id) : -1;
      if (victimId < 0) {
        tier.rejected++;
        return this.rejection(req, tier, 'queue-full');
      }
      const victimTier = this.tiers[victimId];
      const victim = queues.tail(victimId);
      this.unlink(victim);
      victimTier.displaced++;
      victim.resolve(this.rejection(victim.req, victimTier, 'displaced'));
    }
    return this.enqueue(req, res, tier, t);
  }

  stats() {
    const t = now();
    const queues = this.queues;
    const perTier = {};
    const queuedByTier = {};
    let timeout = 0;
    let codel = 0;
    let rejected = 0;
    let displaced = 0;
    let abandoned = 0;
    let closing = 0;
    for (const tier of this.tiers) {
      const size = queues.sizeOf(tier.id);
      queuedByTier[tier.name] = size;
      timeout += tier.timeout;
      codel += tier.codel;
      rejected += tier.rejected;
      displaced += tier.displaced;
      abandoned += tier.abandoned;
      closing += tier.closing;
      perTier[tier.name] = {
        queued: size,
        admitted: tier.admitted,
        queuedTotal: tier.queuedTotal,
        rejected: tier.rejected,
        displaced: tier.displaced,
        timeout: tier.timeout,
        codel: tier.codel,
        abandoned: tier.abandoned,
        closing: tier.closing,
        waitMs: { p50: round3(tier.wait.percentile(50)), p99: round3(tier.wait.percentile(99)), max: round3(tier.wait.max) },
        timeoutWaitMaxMs: round3(tier.timeoutWaitMax),
        allowedWaitMs: this.standing.allowedWait(tier, queues, t),
      };
    }
    const a = this.adaptive;
    return {
      limit: this.limit,
      adaptive: a === null ? null : (() => {
        const e = a.stats();
        return {
          min: a.min, max: a.max, estimate: round3(e.estimate), baselineMs: round3(e.baselineMs), lastWindowMs: round3(e.typicalMs),
          throughput: round3(e.throughput), queueing: e.queueing, updates: e.intervals, saturated: a.saturated,
        };
      })(),
      inFlight: this.inFlight,
      queued: queues.size,
      queuedByTier,
      maxQueue: this.maxQueue,
      standing: this.standing.standing(queues, t),
      admitted: this.admittedImmediately + this.admittedFromQueue,
      admittedImmediately: this.admittedImmediately,
      admittedFromQueue: this.admittedFromQueue,
      released: this.released,
      rejected,
      displaced,
      timeout,
      codel,
      abandoned,
      closing,
      lifoDequeues: this.lifoDequeues,
      peakInFlight: this.peakInFlight,
      peakQueued: queues.peak,
      tiers: perTier,
    };
  }

  /** Per tier: the admitted waits as a histogram at `boundsMs` (cumulative), with count and sum (ms). */
  waits(boundsMs) {
    const out = {};
    for (const tier of this.tiers) out[tier.name] = { cumulative: tier.wait.cumulative(boundsMs), count: tier.wait.count, sumMs: tier.wait.sum };
    return out;
  }

  /** Tier names and whether each is protected, highest priority first. */
  tierInfo() {
    return this.tiers.map((t) => ({ name: t.name, protected: t.protected }));
  }

  resetStats() {
    this.admittedImmediately = this.admittedFromQueue = this.released = this.lifoDequeues = 0;
    this.peakInFlight = this.inFlight;
    this.queues.peak = this.queues.size;
    for (const tier of this.tiers) {
      tier.admitted = tier.queuedTotal = tier.rejected = tier.displaced = tier.timeout = tier.codel = tier.abandoned = tier.closing = tier.timeoutWaitMax = 0;
      tier.wait.reset();
    }
  }

  /** Rejects every queued request (503) and stops the timer; in-flight requests finish normally. */
  close() {
    for (const tier of this.tiers) {
      for (let node = this.queues.head(tier.id); node !== null; node = this.queues.head(tier.id)) {
        this.unlink(node);
        tier.closing++;
        node.resolve(this.rejection(node.req, tier, 'closing'));
      }
    }
    this.timer.disarm();
  }
}

module.exports = { ConcurrencyGate, GONE };

'use strict';
// Concurrency gate: at most N requests in flight, the excess waiting in bounded per-tier FIFO queues
// for at most a timeout, served highest tier first. A guard for lib/adapters/index.js (Express, Fastify,
// node:http): admit() answers null (run now), a rejection, or a Promise of either (queued).
//
// Everything is event-driven: a slot is handed to the next waiter when the response emits 'finish' or
// 'close', or its connection closes (at the end of that event-loop turn, see "slots" below), and one
// unref'd timer (armed at the earliest queue deadline) expires waiters — no polling. Queued requests hold a Promise, one small list node and one shared 'close' listener; the
// counters are plain JS numbers (a queue of JS continuations gains nothing from a native crossing).

const { STATUS_CODES } = require('node:http');
const { performance } = require('node:perf_hooks');
const { expressMiddleware, httpHandler, fastifyPlugin, isGone } = require('../adapters');
const { AdaptiveLimit } = require('./adaptive-limit');
const { describe, onlyKnown, checkNumber, checkBoolean, checkFunction, retryAfterOptions } = require('../options');
const { CODES, withCode } = require('../errors');
const { PROBLEM_TYPE } = require('../gatekeeper/respond');
const { compileRoutes, matchRoute } = require('../adapters/route-rules');
const { headersTruncated } = require('../adapters/client');
const { DIALECTS } = require('../adapters/routing');

const DEFAULT_TIERS = [
  { name: 'critical', protected: true },
  { name: 'standard' },
  { name: 'background' },
];
const OPTION_KEYS = new Set([
  'maxConcurrent', 'limit', 'maxQueue', 'queueTimeoutMs', 'timeoutStatus', 'retryAfter', 'tiers',
  'defaultTier', 'tierHeader', 'trustTierHeader', 'classify', 'routes', 'displace', 'codel', 'lifo', 'onReject',
]);
const TIER_KEYS = new Set(['name', 'protected', 'maxQueue', 'queueTimeoutMs']);
// Keys a gatekeeper tier carries, accepted (and ignored) so one tiers array can configure both guards.
const FOREIGN_TIER_KEYS = new Set(['capacity', 'refillPerSec', 'perKey']);
const KNOWN_TIER_KEYS = new Set([...TIER_KEYS, ...FOREIGN_TIER_KEYS]);
const CODEL_KEYS = new Set(['targetMs', 'intervalMs']);
const MAX_HEADER_LENGTH = 64;

function now() {
  return performance.now();
}

function parseTiers(tiers, defaults) {
  if (!Array.isArray(tiers) || tiers.length === 0) throw new TypeError('tiers must be a non-empty array (highest priority first)');
  const seen = new Set();
  return tiers.map((t, i) => {
    const spec = typeof t === 'string' ? { name: t } : t;
    if (spec === null || typeof spec !== 'object') throw new TypeError(`tiers[${i}] must be a tier name or { name, protected?, maxQueue?, queueTimeoutMs? }`);
    onlyKnown(spec, KNOWN_TIER_KEYS, `tiers[${i}]`);
    if (typeof spec.name !== 'string' || spec.name.length === 0 || spec.name.length > MAX_HEADER_LENGTH) {
      throw new TypeError(`tiers[${i}].name must be a non-empty string of at most ${MAX_HEADER_LENGTH} characters`);
    }
    const name = spec.name;
    if (seen.has(name.toLowerCase())) throw new TypeError(`tiers[${i}].name "${spec.name}" is a duplicate`);
    seen.add(name.toLowerCase());
    const maxQueue = spec.maxQueue === undefined ? defaults.maxQueue : checkNumber(`tiers[${i}].maxQueue`, spec.maxQueue, { integer: true });
    const timeout = spec.queueTimeoutMs === undefined
      ? defaults.queueTimeoutMs
      : checkNumber(`tiers[${i}].queueTimeoutMs`, spec.queueTimeoutMs, { min: 0, minExclusive: true });
    return {
      id: i,
      name,
      protected: spec.protected === undefined ? false : checkBoolean(`tiers[${i}].protected`, spec.protected),
      maxQueue,
      queueTimeoutMs: timeout,
      // the queue: a doubly linked list of waiters, oldest at head
      head: null,
      tail: null,
      size: 0,
      // counters
      admitted: 0,
      queuedTotal: 0,
      rejected: 0,
      displaced: 0,
      timedOut: 0,
      codelDropped: 0,
      abandoned: 0,
      timedOutWaitMax: 0,
      wait: new WaitHistogram(),
    };
  });
}

function parseCodel(codel) {
  if (codel === undefined || codel === false) return null;
  if (codel === true) return { targetMs: 5, intervalMs: 100 };
  if (codel === null || typeof codel !== 'object') throw new TypeError(`codel must be a boolean or { targetMs, intervalMs }, got ${describe(codel)}`);
  onlyKnown(codel, CODEL_KEYS, 'codel');
  const targetMs = codel.targetMs === undefined ? 5 : checkNumber('codel.targetMs', codel.targetMs, { min: 0, minExclusive: true });
  const intervalMs = codel.intervalMs === undefined ? 100 : checkNumber('codel.intervalMs', codel.intervalMs, { min: 0, minExclusive: true });
  return { targetMs, intervalMs };
}

/**
 * Log-bucketed histogram of wait times (ms), fixed memory: 5% buckets from 10 µs to ~20 minutes.
 * Percentiles are the bucket's upper bound (never under-reports), capped at the exact maximum.
 */
class WaitHistogram {
  constructor() {
    this.counts = new Float64Array(WaitHistogram.BUCKETS);
    this.count = 0;
    this.max = 0;
  }

  record(ms) {
    let i = 0;
    if (ms > WaitHistogram.BASE) i = Math.min(WaitHistogram.BUCKETS - 1, Math.ceil(Math.log(ms / WaitHistogram.BASE) / WaitHistogram.LOG_GROWTH));
    this.counts[i]++;
    this.count++;
    if (ms > this.max) this.max = ms;
  }

  percentile(p) {
    if (this.count === 0) return 0;
    const rank = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i];
      if (seen >= rank) return Math.min(this.max, i === 0 ? WaitHistogram.BASE : WaitHistogram.BASE * Math.exp(i * WaitHistogram.LOG_GROWTH));
    }
    return this.max;
  }

  reset() {
    this.counts.fill(0);
    this.count = 0;
    this.max = 0;
  }
}
WaitHistogram.BASE = 0.01;
WaitHistogram.LOG_GROWTH = Math.log(1.05);
WaitHistogram.BUCKETS = 420;

/** Reads this thread's event-loop utilization since the previous read (the adaptive limit's saturation test). */
function loopUtilizationReader() {
  let last = performance.eventLoopUtilization();
  return () => {
    const current = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(current, last);
    last = current;
    return utilization;
  };
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

/**
 * Builds the concurrency gate guard: `{ admit(req, res), stats(), resetStats(), limit, close() }`.
 * Use it through `concurrencyGate(options)` (Express), `concurrencyGate.http(options, handler)` or
 * `fastify.register(concurrencyGatePlugin, options)`.
 */
function createConcurrencyGate(options, routing = DIALECTS.http) {
  try {
    return buildGate(options, routing);
  } catch (err) {
    if (err instanceof TypeError || err instanceof RangeError) err.message = `concurrencyGate: ${err.message}`;
    throw withCode(err, CODES.INVALID_OPTION);
  }
}

function buildGate(options, routing) {
  if (options === null || typeof options !== 'object') throw new TypeError('concurrencyGate options must be an object');
  onlyKnown(options, OPTION_KEYS, 'options');
  const {
    maxConcurrent, limit: limitOptions, maxQueue = 100, queueTimeoutMs = 10_000, timeoutStatus = 408,
    retryAfter, tiers: tierSpecs = DEFAULT_TIERS, defaultTier, tierHeader = 'x-user-tier',
    trustTierHeader = false, classify, routes, displace = true, codel: codelSpec, lifo = false, onReject,
  } = options;

  // ---- options, validated at construction, each error naming its option
  let adaptive = null;
  let limit;
  if (maxConcurrent === 'auto') {
    adaptive = new AdaptiveLimit(limitOptions === undefined ? {} : limitOptions, 'limit', loopUtilizationReader());
    limit = adaptive.limit;
  } else {
    if (maxConcurrent === undefined) throw new TypeError('maxConcurrent is required: a positive integer or "auto"');
    if (typeof maxConcurrent === 'string') throw new TypeError(`maxConcurrent must be a positive integer or "auto", got ${describe(maxConcurrent)}`);
    limit = checkNumber('maxConcurrent', maxConcurrent, { min: 1, integer: true });
    if (limitOptions !== undefined) throw new TypeError('limit is only used with maxConcurrent: "auto"');
  }
  checkNumber('maxQueue', maxQueue, { integer: true });
  checkNumber('queueTimeoutMs', queueTimeoutMs, { min: 0, minExclusive: true });
  checkNumber('timeoutStatus', timeoutStatus, { min: 400, max: 599, integer: true });
  const { minSec: retryMinSec, maxSec: retryMaxSec } = retryAfterOptions(retryAfter, 'retryAfter');
  const retrySpan = retryMaxSec - retryMinSec + 1;
  if (tierHeader !== false && (typeof tierHeader !== 'string' || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/i.test(tierHeader))) {
    throw new TypeError(`tierHeader must be a header name or false, got ${describe(tierHeader)}`);
  }
  const headerName = tierHeader === false ? null : tierHeader.toLowerCase();
  checkBoolean('trustTierHeader', trustTierHeader);
  checkFunction('classify', classify);
  checkBoolean('displace', displace);
  checkBoolean('lifo', lifo);
  checkFunction('onReject', onReject);
  const codel = parseCodel(codelSpec);
  // A standing queue (non-empty for a whole interval) drives both CoDel and adaptive LIFO.
  const standingIntervalMs = codel ? codel.intervalMs : 100;
  const tiers = parseTiers(tierSpecs, { maxQueue, queueTimeoutMs });
  const tierByName = new Map(tiers.map((t) => [t.name.toLowerCase(), t])); // header and classify(): any case
  const routeRules = compileRoutes(routes, new Map(tiers.map((t) => [t.name, t.id])), 'routes'); // the gatekeeper's rules
  let defaultTierRec = tiers[tiers.length - 1];
  if (defaultTier !== undefined) {
    if (typeof defaultTier !== 'string') throw new TypeError(`defaultTier must be a tier name, got ${describe(defaultTier)}`);
    defaultTierRec = tierByName.get(defaultTier.toLowerCase());
    if (!defaultTierRec) throw new RangeError(`defaultTier "${defaultTier}" is not one of the tiers (${tiers.map((t) => t.name).join(', ')})`);
  }

  // ---- state
  let inFlight = 0;
  let queued = 0;
  let nonEmptySince = -1; // when the queue last went from empty to non-empty (-1: empty)
  let timer = null;
  let timerAt = Infinity;
  let peakInFlight = 0;
  let peakQueued = 0;
  let admittedImmediately = 0;
  let admittedFromQueue = 0;
  let released = 0;
  let lifoDequeues = 0;
  const kSlot = Symbol('tiergate.queue.slot'); // res[kSlot]: admission time while the slot is held
  const kWaiter = Symbol('tiergate.queue.waiter'); // res[kWaiter]: the queue node while queued
  const kHeld = Symbol('tiergate.queue.held'); // socket[kHeld]: the responses on it holding a slot or a place

  // ---- classification (a client cannot promote itself through an untrusted header)
  // A value that cannot be read (an unknown name, an over-long value) gives the LOWEST tier, not the
  // default: behind a gateway that appends its own value, a client could otherwise pad or spoil the
  // header to get the default tier when the gateway said lower.
  const lowestTier = tiers[tiers.length - 1];
  function tierFromHeader(req) {
    let raw = req.headers[headerName];
    if (raw === undefined) return null;
    if (Array.isArray(raw)) raw = raw.join(',');
    if (typeof raw !== 'string' || raw.length > MAX_HEADER_LENGTH * 4) return lowestTier;
    if (raw.trim() === '') return null;
    // Several values (a client's own plus what an appending gateway added) are ambiguous: the lowest
    // tier, as the gatekeeper does, so no padding or ordering can lift a request above the gateway's.
    if (raw.includes(',')) return lowestTier;
    const t = tierByName.get(raw.trim().toLowerCase());
    return t === undefined ? lowestTier : t;
  }

  function classifyRequest(req) {
    if (classify !== undefined) {
      const name = classify(req);
      if (name !== undefined && name !== null) {
        if (typeof name !== 'string') throw new TypeError(`classify(req) must return a tier name or undefined, got ${describe(name)}`);
        const t = tierByName.get(name.toLowerCase());
        if (t) return t;
      }
    }
    if (routeRules !== null) {
      const id = matchRoute(routeRules, req.method, req.originalUrl || req.url, routing);
      if (id >= 0) return tiers[id];
    }
    if (headerName !== null) {
      if (headersTruncated(req)) return lowestTier; // the gateway's tier header may be among the lost ones
      const t = tierFromHeader(req);
      if (t !== null) return trustTierHeader || t.id >= defaultTierRec.id ? t : defaultTierRec;
    }
    return defaultTierRec;
  }

  // ---- rejections
  // Problem documents (RFC 9457) are the same for every rejection of a kind and tier: built once.
  const bodies = {};
  for (const reason of Object.keys(DETAILS)) {
    bodies[reason] = tiers.map((tier) => {
      const status = reason === 'queue-timeout' || reason === 'queue-wait' ? timeoutStatus : 503;
      const body = JSON.stringify({
        type: `urn:tiergate:problem:${reason}`,
        title: STATUS_CODES[status] || 'Request Rejected', // timeoutStatus may be any 4xx/5xx
        status,
        detail: DETAILS[reason],
        tier: tier.name,
      });
      return { status, body, length: String(Buffer.byteLength(body)) };
    });
  }

  function rejection(req, tier, reason) {
    const b = bodies[reason][tier.id];
    const headers = { 'content-type': PROBLEM_TYPE, 'content-length': b.length, 'cache-control': 'no-store' };
    if (b.status === 408) headers.connection = 'close';
    else headers['retry-after'] = String(retryMinSec + Math.floor(Math.random() * retrySpan)); // jittered: no lockstep return
    if (onReject !== undefined) {
      try {
        onReject(req, { reason, status: b.status, tier: tier.name });
      } catch (err) {
        process.emitWarning(err);
      }
    }
    return { status: b.status, headers, body: b.body };
  }

  // ---- slots
  // A response that finishes (or whose connection closes) gives its slot back at the end of the
  // current event-loop turn: one setImmediate per turn, shared by every release of that turn, hands
  // the freed slots to the best waiters. The slot is never idle longer than the rest of that turn, and
  // a CPU-bound (synchronous) route runs at most `limit` handlers per turn, so the requests read from
  // sockets meanwhile queue and are served by tier instead of in socket order.
  let releasing = []; // admission times of the slots given back this turn
  let releaseScheduled = false;

  function onResponseEnd() {
    // 'finish' or 'close' of an admitted request's response, or its connection's 'close'; `this` is the
    // response. Exactly once.
    const start = this[kSlot];
    if (start === undefined) return;
    this[kSlot] = undefined;
    untrack(this);
    // Latency samples for the adaptive limit: finished responses only (an aborted one says nothing).
    releasing.push(adaptive !== null && this.writableFinished ? start : -1);
    if (!releaseScheduled) {
      releaseScheduled = true;
      setImmediate(releaseSlots);
    }
  }

  function releaseSlots() {
    releaseScheduled = false;
    const batch = releasing;
    releasing = [];
    const t = now();
    if (adaptive !== null) {
      for (let i = 0; i < batch.length; i++) {
        if (batch[i] >= 0 && adaptive.sample(t - batch[i], inFlight, t)) limit = adaptive.limit;
      }
    }
    inFlight -= batch.length;
    released += batch.length;
    if (queued > 0) drain(t);
  }

  function takeSlot(res, t) {
    inFlight++;
    if (inFlight > peakInFlight) peakInFlight = inFlight;
    res[kSlot] = t;
    res.on('finish', onResponseEnd);
    res.on('close', onResponseEnd);
    track(res);
  }

  // ---- connections
  // Node emits neither 'finish' nor 'close' on the response of a pipelined request that is not yet
  // attached to its socket when that connection dies (reset, half-closed, destroyed): only the socket
  // says so. Each socket carrying a slot holder or a waiter of this gate gets one 'close' listener for
  // its lifetime, and a set of those responses (entries leave it as they leave the gate).
  function track(res) {
    const socket = res.req && res.req.socket;
    if (socket === null || socket === undefined || typeof socket.once !== 'function') return;
    let held = socket[kHeld];
    if (held === undefined) {
      held = new Set();
      socket[kHeld] = held;
      socket.once('close', onSocketClose);
    }
    held.add(res);
  }

  function untrack(res) {
    const socket = res.req && res.req.socket;
    const held = socket ? socket[kHeld] : undefined;
    if (held !== undefined) held.delete(res);
  }

  function onSocketClose() {
    const held = this[kHeld];
    this[kHeld] = undefined;
    for (const res of held) {
      if (res[kWaiter] !== undefined) onQueuedClose.call(res);
      else onResponseEnd.call(res);
    }
  }

  // ---- queue (per tier doubly linked lists; O(1) push, pop at either end, unlink)
  function push(tier, node) {
    node.prev = tier.tail;
    node.next = null;
    if (tier.tail !== null) tier.tail.next = node;
    else tier.head = node;
    tier.tail = node;
    tier.size++;
    if (queued === 0) nonEmptySince = node.t0;
    queued++;
    if (queued > peakQueued) peakQueued = queued;
  }

  function unlink(node) {
    const tier = node.tier;
    if (node.prev !== null) node.prev.next = node.next;
    else tier.head = node.next;
    if (node.next !== null) node.next.prev = node.prev;
    else tier.tail = node.prev;
    node.prev = node.next = null;
    tier.size--;
    queued--;
    if (queued === 0) nonEmptySince = -1;
    node.res.removeListener('close', onQueuedClose);
    node.res[kWaiter] = undefined;
    untrack(node.res);
  }

  function standing(t) {
    return nonEmptySince >= 0 && t - nonEmptySince >= standingIntervalMs;
  }

  // The wait a tier's waiters are allowed right now: the tier's timeout, or CoDel's short target for
  // unprotected tiers while a standing queue exists.
  function allowedWait(tier, t) {
    if (codel !== null && !tier.protected && standing(t) && codel.targetMs < tier.queueTimeoutMs) return codel.targetMs;
    return tier.queueTimeoutMs;
  }

  function expire(node, t) {
    const tier = node.tier;
    const waited = t - node.t0;
    const byCodel = waited < tier.queueTimeoutMs;
    unlink(node);
    tier.timedOut++;
    if (waited > tier.timedOutWaitMax) tier.timedOutWaitMax = waited;
    if (byCodel) tier.codelDropped++;
    node.resolve(rejection(node.req, tier, byCodel ? 'queue-wait' : 'queue-timeout'));
  }

  function onQueuedClose() {
    // the client of a queued request went away: drop it without running the handler
    const node = this[kWaiter];
    if (node === undefined) return;
    unlink(node);
    node.tier.abandoned++;
    node.resolve(GONE);
    if (queued === 0) disarm();
  }

  // Hands free slots to waiters: highest tier first, oldest first (newest first under adaptive LIFO
  // while the queue is standing). Waiters that have gone or overstayed are dropped on the way.
  function drain(t) {
    while (inFlight < limit && queued > 0) {
      let tier = null;
      for (let i = 0; i < tiers.length; i++) {
        if (tiers[i].size > 0) {
          tier = tiers[i];
          break;
        }
      }
      const fromTail = lifo && tier.size > 1 && standing(t);
      const node = fromTail ? tier.tail : tier.head;
      if (isGone(node.res)) {
        unlink(node);
        tier.abandoned++;
        node.resolve(GONE);
        continue;
      }
      const waited = t - node.t0;
      if (waited > allowedWait(tier, t)) {
        expire(node, t);
        continue;
      }
      if (fromTail) lifoDequeues++;
      unlink(node);
      tier.admitted++;
      tier.wait.record(waited);
      admittedFromQueue++;
      takeSlot(node.res, t);
      node.resolve(null);
    }
    schedule(t);
  }

  // ---- the one timer: armed at the earliest moment a queued request may have to be expired
  function nextDeadline() {
    let next = Infinity;
    const t = now();
    for (let i = 0; i < tiers.length; i++) {
      const tier = tiers[i];
      if (tier.head !== null) {
        const d = tier.head.t0 + allowedWait(tier, t);
        if (d < next) next = d;
      }
    }
    // CoDel shortens the allowed wait the moment the queue becomes standing.
    if (codel !== null && queued > 0 && !standing(t)) next = Math.min(next, nonEmptySince + standingIntervalMs);
    return next;
  }

  function disarm() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    timerAt = Infinity;
  }

  function schedule(t) {
    if (queued === 0) return disarm();
    const next = nextDeadline();
    if (next >= timerAt && timer !== null) return; // an earlier wake-up is already armed
    disarm();
    if (next === Infinity) return;
    timerAt = next;
    // setTimeout takes at most 2^31-1 ms (longer fires at once): a far deadline is re-armed on waking.
    timer = setTimeout(onTimer, Math.min(2_147_483_647, Math.max(1, Math.ceil(next - t))));
    timer.unref();
  }

  function onTimer() {
    timer = null;
    timerAt = Infinity;
    const t = now();
    for (let i = 0; i < tiers.length; i++) {
      const tier = tiers[i];
      const allowed = allowedWait(tier, t);
      while (tier.head !== null && t - tier.head.t0 >= allowed) expire(tier.head, t);
    }
    if (inFlight < limit && queued > 0) drain(t);
    else schedule(t);
  }

  // ---- the guard
  function admit(req, res) {
    // The client may have left while an earlier middleware or hook ran: its 'close' has already
    // fired, so a slot taken now would never come back.
    if (isGone(res)) return GONE;
    // Already holds this gate's slot (the same gate mounted twice, e.g. on the app and a router):
    // a second slot would never be released, and with one slot left it would wait behind itself.
    if (res[kSlot] !== undefined) return null;
    const tier = classifyRequest(req);
    const t = now();
    if (queued > 0 && inFlight < limit) drain(t); // only after a limit change or stale waiters
    if (inFlight < limit && queued === 0) {
      tier.admitted++;
      tier.wait.record(0);
      admittedImmediately++;
      takeSlot(res, t);
      return null;
    }
    if (tier.size >= tier.maxQueue) {
      tier.rejected++;
      return rejection(req, tier, 'queue-full');
    }
    if (queued >= maxQueue) {
      // Full: a higher tier may displace the newest waiter of the lowest tier below it.
      let victimTier = null;
      if (displace) {
        for (let i = tiers.length - 1; i > tier.id; i--) {
          if (tiers[i].size > 0) {
            victimTier = tiers[i];
            break;
          }
        }
      }
      if (victimTier === null) {
        tier.rejected++;
        return rejection(req, tier, 'queue-full');
      }
      const victim = victimTier.tail;
      unlink(victim);
      victimTier.displaced++;
      victim.resolve(rejection(victim.req, victimTier, 'displaced'));
    }
    const node = { req, res, tier, t0: t, resolve: null, prev: null, next: null };
    const promise = new Promise((resolve) => {
      node.resolve = resolve;
    });
    push(tier, node);
    tier.queuedTotal++;
    res[kWaiter] = node;
    res.on('close', onQueuedClose);
    track(res);
    schedule(t);
    return promise;
  }

  function stats() {
    const t = now();
    const perTier = {};
    const queuedByTier = {};
    let timedOut = 0;
    let rejected = 0;
    let displaced = 0;
    let abandoned = 0;
    for (const tier of tiers) {
      queuedByTier[tier.name] = tier.size;
      timedOut += tier.timedOut;
      rejected += tier.rejected;
      displaced += tier.displaced;
      abandoned += tier.abandoned;
      perTier[tier.name] = {
        queued: tier.size,
        admitted: tier.admitted,
        queuedTotal: tier.queuedTotal,
        rejected: tier.rejected,
        displaced: tier.displaced,
        timedOut: tier.timedOut,
        codelDropped: tier.codelDropped,
        abandoned: tier.abandoned,
        waitMs: { p50: round3(tier.wait.percentile(50)), p99: round3(tier.wait.percentile(99)), max: round3(tier.wait.max) },
        timedOutWaitMaxMs: round3(tier.timedOutWaitMax),
        allowedWaitMs: allowedWait(tier, t),
      };
    }
    return {
      limit,
      adaptive: adaptive === null ? null : {
        min: adaptive.min, max: adaptive.max, estimate: round3(adaptive.estimate),
        baselineMs: round3(adaptive.longRtt), lastWindowMs: round3(adaptive.lastShortRtt), updates: adaptive.updates,
        saturated: adaptive.saturated,
      },
      inFlight,
      queued,
      queuedByTier,
      maxQueue,
      standing: standing(t),
      admitted: admittedImmediately + admittedFromQueue,
      admittedImmediately,
      admittedFromQueue,
      released,
      rejected,
      displaced,
      timedOut,
      abandoned,
      lifoDequeues,
      peakInFlight,
      peakQueued,
      tiers: perTier,
    };
  }

  function resetStats() {
    admittedImmediately = admittedFromQueue = released = lifoDequeues = 0;
    peakInFlight = inFlight;
    peakQueued = queued;
    for (const tier of tiers) {
      tier.admitted = tier.queuedTotal = tier.rejected = tier.displaced = tier.timedOut = tier.codelDropped = tier.abandoned = tier.timedOutWaitMax = 0;
      tier.wait.reset();
    }
  }

  /** Rejects every queued request (503) and stops the timer; in-flight requests finish normally. */
  function close() {
    for (const tier of tiers) {
      while (tier.head !== null) {
        const node = tier.head;
        unlink(node);
        tier.rejected++;
        node.resolve(rejection(node.req, tier, 'closing'));
      }
    }
    disarm();
  }

  return {
    admit,
    stats,
    resetStats,
    close,
    get limit() {
      return limit;
    },
    get inFlight() {
      return inFlight;
    },
    get queued() {
      return queued;
    },
  };
}

const DETAILS = {
  'queue-full': 'The service is at its concurrency limit and its queue for this tier is full. Retry after the time in Retry-After.',
  displaced: 'The request was waiting in the queue and gave its place to a higher-priority request. Retry after the time in Retry-After.',
  'queue-timeout': 'The request waited in the queue for longer than the allowed time.',
  'queue-wait': 'The queue has been standing; waiting requests of this tier are given only a short wait.',
  closing: 'The service is closing its request queue.',
};
// Resolution for a waiter whose client has gone: nothing is written (adapters skip gone responses).
const GONE = Object.freeze({ status: 499, headers: {}, body: '' });

function attach(target, gate) {
  target.gate = gate;
  target.stats = gate.stats;
  target.resetStats = gate.resetStats;
  target.close = gate.close;
  return target;
}

/** Express 4/5 middleware: `app.use(concurrencyGate({ maxConcurrent: 8, maxQueue: 100 }))`. */
function concurrencyGate(options) {
  const gate = createConcurrencyGate(options, DIALECTS.express);
  return attach(expressMiddleware(gate), gate);
}

/** Wraps a node:http handler (handler errors: see adapters.httpHandler). */
concurrencyGate.http = function http(options, handler) {
  const gate = createConcurrencyGate(options);
  return attach(httpHandler(gate, handler), gate);
};

/** Fastify 5 plugin: `fastify.register(concurrencyGatePlugin, options)`; `fastify.concurrencyGate.stats()`. */
const concurrencyGatePlugin = fastifyPlugin(createConcurrencyGate, 'concurrencyGate');

module.exports = { concurrencyGate, concurrencyGatePlugin, createConcurrencyGate, AdaptiveLimit };

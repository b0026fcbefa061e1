'use strict';
// The gatekeeper's side of the learned concurrency limit (src/core/concurrency, decided in the one
// native decision): the overload the event loop cannot see, a saturated database pool or upstream.
//
// An admitted request holds a slot until its response finishes; its latency from the slot to the
// finish goes back to the estimator with the slot (a request refused or abandoned after taking one
// gives it back without a sample). A request of an unprotected tier that found every slot in use
// waits here, in its tier's FIFO, served highest tier first as slots come back; it is shed (503, or
// options.shedStatus) once it has waited `maxWaitMs`, or when `maxQueue` are waiting and it is the
// newest of the lowest tier. Protected tiers never wait. Users' signals (a pool's waiting count over
// its size, say) are read every SIGNAL_INTERVAL_MS, off the hot path.
const { performance } = require('node:perf_hooks');
const { isObject, onlyKnown, typeName, schemaOption } = require('../options');
const { optionNames, defaultsOf } = require('../schema');
const { CONCURRENCY } = require('../schema/gatekeeper');
const { isGone } = require('../adapters');
const { Waiter } = require('./turn-queue');

const SIGNAL_INTERVAL_MS = 100;
/** How often waiters are checked for their wait bound (and spare slots handed over). */
const TICK_MS = 10;
const DEFAULTS = Object.freeze(defaultsOf(CONCURRENCY));
const FIELDS = optionNames(CONCURRENCY);

/** options.concurrency -> null (off) or complete options. */
function concurrencyOptions(v, at = 'gatekeeper: options.concurrency') {
  if (v === false) return null;
  if (v === undefined) v = {};
  if (!isObject(v)) throw new TypeError(`${at} must be an object or false, got ${typeName(v)}`);
  onlyKnown(v, FIELDS, at);
  const o = { ...DEFAULTS };
  for (const f of ['minLimit', 'maxLimit', 'initialLimit', 'maxWaitMs', 'maxQueue']) {
    if (v[f] !== undefined) o[f] = schemaOption(CONCURRENCY[f], v[f], `${at}.${f}`);
  }
  if (v.maxLimit !== undefined && v.initialLimit === undefined) o.initialLimit = Math.min(o.initialLimit, o.maxLimit);
  if (o.maxLimit < o.minLimit) throw new RangeError(`${at}.maxLimit must be >= minLimit (${o.minLimit}), got ${o.maxLimit}`);
  if (o.initialLimit < o.minLimit || o.initialLimit > o.maxLimit) {
    throw new RangeError(`${at}.initialLimit must be from minLimit to maxLimit, got ${o.initialLimit}`);
  }
  const signals = v.signals === undefined ? [] : [].concat(v.signals);
  signals.forEach((fn, i) => {
    if (typeof fn !== 'function') {
      throw new TypeError(
        `${at}.signals[${i}] must be a function returning a number (requests waiting downstream over its size, 0: none), got ${typeName(fn)}`,
      );
    }
  });
  o.signals = signals;
  return o;
}

class Slots {
  #handle;
  #o;
  #shed;
  #run;
  #warn;
  /** Per tier, the requests waiting for a slot, oldest first. */
  #waiting;
  #count = 0;
  #tick = null;
  #signalTimer = null;
  #s = { waited: 0, waitShed: 0, fullShed: 0, maxWaitMs: 0 };
  #kStart = Symbol('tiergate.slot.start');
  #kEpoch = Symbol('tiergate.slot.epoch');

  /**
   * `shed(w, waitedMs, cause)`: a waiter shed ('wait': its wait bound; 'full': the queue was full);
   * returns the rejection to send. `run(w, first)`: a waiter whose slot is taken (settles it);
   * `first`: the first of those started together. `warn(name, err)`: a signal that threw.
   */
  constructor(handle, tierCount, o, { shed, run, warn }) {
    this.#handle = handle;
    this.#o = o;
    this.#shed = shed;
    this.#run = run;
    this.#warn = warn;
    this.#waiting = Array.from({ length: tierCount }, () => []);
    const end = (res) => this.#end(res);
    // One pair of listeners for every response: `this` is the response.
    this.onFinish = function onFinish() {
      end(this);
    };
    if (o.signals.length > 0) {
      this.#signalTimer = setInterval(() => this.#readSignals(), SIGNAL_INTERVAL_MS);
      this.#signalTimer.unref();
    }
  }

  get waiting() {
    return this.#count;
  }

  /** The request holds a slot of `epoch` from now until its response finishes or its connection closes. */
  track(res, epoch) {
    // A caller of admit() without a response to watch (a unit test's stand-in): nothing to wait for.
    if (res === null || typeof res !== 'object' || typeof res.on !== 'function') return this.#release(epoch, -1);
    res[this.#kStart] = performance.now();
    res[this.#kEpoch] = epoch;
    res.on('finish', this.onFinish);
    res.on('close', this.onFinish);
  }

  /** A request refused or abandoned after it took its slot: the slot back without a sample (a
   * request that holds none gives nothing back). */
  giveBack(res) {
    if (res !== null && typeof res === 'object') this.#end(res, true);
  }

  #end(res, noSample = false) {
    const t0 = res[this.#kStart];
    if (t0 === undefined) return;
    res[this.#kStart] = undefined;
    res.removeListener('finish', this.onFinish);
    res.removeListener('close', this.onFinish);
    // An aborted response says nothing of the service's latency.
    this.#release(res[this.#kEpoch], noSample || !res.writableFinished ? -1 : performance.now() - t0);
  }

  #release(epoch, latencyMs) {
    // (Waiters shed after a hand-over and before their start leave fewer than were handed slots.)
    const n = this.#handle.releaseSlot(epoch, latencyMs, Math.max(0, this.#count - this.#handed));
    if (n === 0) return;
    // The first waiter starts now, in the callback of the response that freed its slot: its call
    // reaches the downstream in this loop turn, which the limit at the knee (no headroom) needs to
    // keep the downstream busy.
    this.#start(1);
    if (n > 1) this.#startLater(n - 1);
  }

  // Any more waiters start at the end of this loop turn (one check-phase callback for every slot
  // of the turn): the loop reads its sockets in between, so a protected request arriving meanwhile
  // is not queued behind a run of handlers started back to back.
  #handed = 0;
  #startScheduled = false;
  #startLater(n) {
    this.#handed += n;
    if (this.#startScheduled) return;
    this.#startScheduled = true;
    setImmediate(() => {
      this.#startScheduled = false;
      const k = this.#handed;
      this.#handed = 0;
      this.#start(k);
    });
  }

  /** A request of `tier` found every slot in use: a thenable settled with null (run) or a rejection. */
  wait(req, res, tier, source, key) {
    const o = this.#o;
    this.#s.waited++;
    const w = new Waiter(tier, req, res, performance.now(), source, key);
    if (this.#count >= o.maxQueue) {
      // Full: the newest waiter of the lowest tier below this one makes room, else this one goes.
      let victim = null;
      for (let t = this.#waiting.length - 1; t > tier && victim === null; t--) {
        if (this.#waiting[t].length > 0) victim = this.#waiting[t].pop();
      }
      if (victim === null) {
        this.#s.fullShed++;
        w.settle(this.#shed(w, 0, 'full'));
        return w;
      }
      this.#count--;
      this.#s.fullShed++;
      victim.settle(this.#shed(victim, performance.now() - victim.t0, 'full'));
    }
    this.#waiting[tier].push(w);
    this.#count++;
    if (this.#tick === null) {
      this.#tick = setInterval(() => this.#expire(), TICK_MS);
      this.#tick.unref();
    }
    return w;
  }

  /** Starts `n` waiters, highest tier first, whose slots the estimator has just taken. */
  #start(n) {
    const epoch = this.#handle.slotEpoch();
    let started = 0;
    for (let t = 0; t < this.#waiting.length && n > 0; t++) {
      const q = this.#waiting[t];
      while (q.length > 0 && n > 0) {
        const w = q.shift();
        this.#count--;
        if (isGone(w.res)) continue; // its client left while it waited: the slot goes to the next one
        n--;
        const waited = performance.now() - w.t0;
        if (waited > this.#s.maxWaitMs) this.#s.maxWaitMs = waited;
        this.track(w.res, epoch);
        this.#run(w, started++ === 0);
      }
    }
    // Slots taken for waiters that were gone go back.
    for (; n > 0; n--) this.#handle.releaseSlot(epoch, -1, 0);
    if (this.#count === 0) this.#stopTick();
  }

  /** Sheds the waiters past their wait bound; hands spare slots to the rest. */
  #expire() {
    const now = performance.now();
    const max = this.#o.maxWaitMs;
    for (const q of this.#waiting) {
      while (q.length > 0 && now - q[0].t0 >= max) {
        const w = q.shift();
        this.#count--;
        this.#s.waitShed++;
        w.settle(this.#shed(w, now - w.t0, 'wait'));
      }
    }
    if (this.#count > this.#handed) {
      const n = this.#handle.handOverSlots(this.#count - this.#handed);
      if (n > 0) this.#startLater(n);
    }
    if (this.#count === 0) this.#stopTick();
  }

  #stopTick() {
    if (this.#tick !== null) {
      clearInterval(this.#tick);
      this.#tick = null;
    }
  }

  #readSignals() {
    let v = 0;
    for (const fn of this.#o.signals) {
      let x;
      try {
        x = fn();
      } catch (err) {
        this.#warn('concurrency.signals', err);
        continue;
      }
      if (typeof x === 'number' && x > v) v = x;
    }
    this.#handle.setConcurrencySignal(v);
  }

  stats() {
    return { waiting: this.#count, ...this.#s };
  }
}

module.exports = { Slots, concurrencyOptions, CONCURRENCY_DEFAULTS: DEFAULTS };

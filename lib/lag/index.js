'use strict';
// LagMonitor: event-loop lag, utilisation and heap of the current thread, sampled by a native libuv
// timer (src/node/lag.rs). All monitors of a thread share one timer, running at the finest resolution
// any of them asked for; each monitor keeps its own window, EWMA and stall threshold.
const v8 = require('node:v8');
const native = require('../native');
const { onlyKnown } = require('../options');
const { optionNames } = require('../schema');
const { LAG_MONITOR: L, MAX_TICKS_PER_WINDOW } = require('../schema/lag');
const { CODES, codedError, buildingOptions } = require('../errors');

// Heap figures come from V8 through the same call JS would make; registered once per thread.
native.lagSetHeapSource(v8.getHeapStatistics);

const OPTIONS = optionNames(L);

/** Option `name` (whole ms in its schema range, from `min` when given), or `fallback`. */
function wholeMs(options, name, fallback, min = L[name].min) {
  const v = options[name];
  const max = L[name].max;
  if (v === undefined) return fallback;
  if (typeof v !== 'number') throw new TypeError(`LagMonitor: ${name} must be a number, got ${typeof v}`);
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`LagMonitor: ${name} must be a whole number of milliseconds in ${min}..${max}, got ${v}`);
  }
  return v;
}

function lagOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('LagMonitor: options must be an object');
  onlyKnown(options, OPTIONS, 'LagMonitor: options');
  const resolutionMs = wholeMs(options, 'resolutionMs', L.resolutionMs.default);
  const windowMs = wholeMs(options, 'windowMs', L.windowMs.default, resolutionMs);
  if (windowMs / resolutionMs > MAX_TICKS_PER_WINDOW) {
    throw new RangeError(`LagMonitor: windowMs / resolutionMs must be at most ${MAX_TICKS_PER_WINDOW} ticks, got ${windowMs}/${resolutionMs}`);
  }
  const ewmaMs = wholeMs(options, 'ewmaMs', Math.max(1, Math.round(windowMs / 4)));
  const stallMs = wholeMs(options, 'stallMs', undefined);
  return { resolutionMs, windowMs, ewmaMs, stallMs };
}

class LagMonitor {
  #handle;
  #fast;
  #resolutionMs;
  #windowMs;
  #stallMs;

  /**
   * @param {{ resolutionMs?: number, windowMs?: number, ewmaMs?: number, stallMs?: number }} [options]
   */
  constructor(options = {}) {
    const { resolutionMs, windowMs, ewmaMs, stallMs } = buildingOptions(() => lagOptions(options));
    this.#resolutionMs = resolutionMs;
    this.#windowMs = windowMs;
    this.#stallMs = stallMs;
    this.#handle = new native.LagMonitorHandle(resolutionMs, windowMs, ewmaMs, stallMs);
    // Raw N-API readers bound to this monitor: the hot-path getters are one direct native call each.
    this.#fast = this.#handle.fastReaders();
  }

  /**
   * Observes, from any thread of this process (e.g. a worker serving health checks while the main loop
   * is blocked), the health record of a monitor shared with `monitor.share()`.
   * @param {number} id
   */
  static observe(id) {
    if (typeof id !== 'number') {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `LagMonitor.observe: id must be a number from monitor.share(), got ${typeof id}`);
    }
    if (!Number.isInteger(id) || id < 1 || id > 0xffffffff) {
      throw codedError(RangeError, CODES.INVALID_ARGUMENT, `LagMonitor.observe: id must be an integer from monitor.share() (1..4294967295), got ${id}`);
    }
    let handle;
    try {
      handle = new native.LoopObserverHandle(id);
    } catch (err) {
      // The native refusal: no live monitor shares this id. A value error, coded as the check above.
      if (err && err.code === 'InvalidArg') {
        throw Object.assign(new RangeError(`LagMonitor.observe: ${err.message}`, { cause: err }), { code: CODES.INVALID_ARGUMENT });
      }
      throw err;
    }
    return new LoopObserver(handle);
  }

  /** An id that `LagMonitor.observe(id)` accepts in any thread (post it to a worker). */
  share() {
    return this.#handle.share();
  }

  /** Starts sampling with an empty window. Idempotent. */
  start() {
    this.#handle.start();
    return this;
  }

  /** Stops sampling (the thread's timer stops when no monitor uses it). The last stats stay readable. */
  stop() {
    this.#handle.stop();
    return this;
  }

  get running() {
    return this.#handle.running;
  }

  /** Lag right now in ms: the latest tick's drift, or how overdue the next tick already is if that is
   *  larger. One native call, for hot paths. */
  get lagMs() {
    return this.#fast.lagMs();
  }

  /** True while the loop is overdue by more than `stallMs` (set by a watchdog thread), and through the
   *  first tick after such a block. Always false without `stallMs`. */
  get stalled() {
    return this.#fast.stalled();
  }

  /** One object with every figure; see the README ("LagMonitor") for what each one means. */
  stats() {
    const a = this.#handle.stats();
    // Read now (~0.3 µs): the native record refreshes heap figures only every 100 ms.
    const heap = v8.getHeapStatistics();
    const heapUsed = heap.used_heap_size;
    const heapLimit = heap.heap_size_limit;
    return {
      running: this.#handle.running,
      lagMs: a[14],
      latestMs: a[0],
      ewmaMs: a[1],
      meanMs: a[2],
      p50Ms: a[3],
      p90Ms: a[4],
      p99Ms: a[5],
      maxMs: a[6],
      maxBlockMs: a[15],
      elu: a[7],
      samples: a[8],
      ticks: a[9],
      heapUsed,
      heapLimit,
      heapRatio: heapLimit > 0 ? heapUsed / heapLimit : 0,
      rss: process.memoryUsage.rss(),
      stalled: a[12] === 1,
      resolutionMs: this.#resolutionMs,
      intervalMs: a[13],
      windowMs: this.#windowMs,
      stallMs: this.#stallMs,
    };
  }
}

/** Read-only view of a shared monitor's health, from another thread. Values are those of the monitor's
 *  latest tick (and its watchdog): lock-free reads of the same native record. */
class LoopObserver {
  #handle;
  constructor(handle) {
    this.#handle = handle;
  }

  get stalled() {
    return this.#handle.stalled();
  }

  /** { lagMs, ewmaMs, p99Ms, elu, heapUsed, heapLimit, stalled, ticks } */
  sample() {
    const a = this.#handle.sample();
    return { lagMs: a[0], ewmaMs: a[1], p99Ms: a[2], elu: a[3], heapUsed: a[4], heapLimit: a[5], stalled: a[6] === 1, ticks: a[7] };
  }
}

module.exports = { LagMonitor, LoopObserver };
// For the gatekeeper's shed options (same limit); not enumerable, so index.js does not publish it.
Object.defineProperty(module.exports, 'MAX_TICKS_PER_WINDOW', { value: MAX_TICKS_PER_WINDOW });

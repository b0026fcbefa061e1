export interface LagMonitorOptions {
  /** Timer interval in whole ms, 1..60000. Default 10. Monitors on one thread share one timer running
   *  at the finest resolution any of them asked for. */
  resolutionMs?: number;
  /** Rolling window for mean / quantiles / max / ELU, whole ms ≥ resolutionMs. Default 1000. At most
   *  32768 ticks per window. */
  windowMs?: number;
  /** Time constant of the time-weighted EWMA, whole ms. Default windowMs / 4. */
  ewmaMs?: number;
  /** Raise `stalled` when the loop is overdue by more than this many ms (watchdog thread). Default: off. */
  stallMs?: number;
}

export interface LagStats {
  running: boolean;
  /** Lag right now, ms: latestMs, or how overdue the next tick already is if that is larger. */
  lagMs: number;
  /** Drift of the latest tick: how late the timer fired, ms. */
  latestMs: number;
  /** Time-weighted exponential moving average of drift, ms. */
  ewmaMs: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Longest stretch the loop ran without polling for I/O (a synchronous block) in the window, ms:
   *  measured once per loop iteration, independent of resolutionMs. */
  maxBlockMs: number;
  /** Event-loop utilisation over the window, 0..1. */
  elu: number;
  /** Ticks currently in the window. */
  samples: number;
  /** Ticks recorded since start(). */
  ticks: number;
  /** V8 heap used / limit of this thread's isolate, bytes. */
  heapUsed: number;
  heapLimit: number;
  heapRatio: number;
  /** Resident set size of the process, bytes (read when stats() is called). */
  rss: number;
  stalled: boolean;
  resolutionMs: number;
  /** Interval the thread's shared timer runs at (0 when stopped). */
  intervalMs: number;
  windowMs: number;
  stallMs: number | undefined;
}

export interface LoopSample {
  /** Drift of the monitored loop's latest tick, ms. */
  lagMs: number;
  ewmaMs: number;
  p99Ms: number;
  elu: number;
  heapUsed: number;
  heapLimit: number;
  stalled: boolean;
  ticks: number;
}

/** Read-only, lock-free view of a shared monitor's health from another thread. */
export declare class LoopObserver {
  private constructor();
  readonly stalled: boolean;
  sample(): LoopSample;
}

export declare class LagMonitor {
  constructor(options?: LagMonitorOptions);
  /** Observe a monitor shared with `share()`, from any thread of the process. */
  static observe(id: number): LoopObserver;
  /** An id for `LagMonitor.observe(id)` in another thread. */
  share(): number;
  start(): this;
  stop(): this;
  readonly running: boolean;
  /** Lag right now, ms (see LagStats.lagMs); one native call. */
  readonly lagMs: number;
  readonly stalled: boolean;
  stats(): LagStats;
}

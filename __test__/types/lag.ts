// Typed usage of the LagMonitor API (checked with tsc --noEmit --strict).
import { LagMonitor, type LoopObserver, type LagMonitorOptions, type LagStats, type LoopSample } from 'tiergate';

const options: LagMonitorOptions = { resolutionMs: 10, windowMs: 1000, ewmaMs: 250, stallMs: 500 };
const monitor: LagMonitor = new LagMonitor(options).start();
const defaults = new LagMonitor();
defaults.start().stop();

const lag: number = monitor.lagMs;
const stalled: boolean = monitor.stalled;
const running: boolean = monitor.running;
const s: LagStats = monitor.stats();
const figures: number[] = [s.lagMs, s.latestMs, s.ewmaMs, s.meanMs, s.p50Ms, s.p90Ms, s.p99Ms, s.maxMs, s.maxBlockMs, s.elu];
const memory: number = s.heapUsed / s.heapLimit + s.heapRatio + s.rss;
const window: number = s.samples + s.ticks + s.resolutionMs + s.intervalMs + s.windowMs;
const stallMs: number | undefined = s.stallMs;

const id: number = monitor.share();
const observer: LoopObserver = LagMonitor.observe(id);
const seen: boolean = observer.stalled;
const sample: LoopSample = observer.sample();
const p99: number = sample.p99Ms + sample.lagMs + sample.ewmaMs + sample.elu + sample.ticks;

// @ts-expect-error options are numbers
new LagMonitor({ resolutionMs: '10' });
// @ts-expect-error unknown option
new LagMonitor({ stalMs: 100 });
// @ts-expect-error read-only
monitor.lagMs = 1;

monitor.stop();
export { lag, stalled, running, figures, memory, window, stallMs, seen, p99 };

'use strict';
// The LagMonitor's options (docs/lag.md#options): the sampler's durations, whole milliseconds. The
// gatekeeper's shed group takes the same four with the same ranges (./gatekeeper.js spreads these).
const { schema } = require('./index');

/** A window holds at most this many ticks (bounded memory; see src/core/histogram.rs). */
const MAX_TICKS_PER_WINDOW = 32768;
const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

// resolutionMs: at most a minute, as the native side checks it for both (src/core/health/sampler.rs
// `MAX_RESOLUTION_MS`).
const LAG_MONITOR = schema([
  { name: 'resolutionMs', type: 'integer', default: 10, min: 1, max: MINUTE_MS, doc: 'timer interval' },
  { name: 'windowMs', type: 'integer', default: 1000, min: 1, max: HOUR_MS, accepted: `≥ \`resolutionMs\`, at most ${MAX_TICKS_PER_WINDOW} ticks`, doc: 'rolling window of mean, quantiles, max, `maxBlockMs` and ELU' },
  { name: 'ewmaMs', type: 'integer', min: 1, max: HOUR_MS, docDefault: '`windowMs / 4` (rounded, ≥ 1)', doc: 'time constant of the EWMA' },
  { name: 'stallMs', type: 'integer', min: 1, max: HOUR_MS, docDefault: 'none (no watchdog)', doc: '`stalled` is raised when the loop is overdue by more than this' },
]);

module.exports = { LAG_MONITOR, MAX_TICKS_PER_WINDOW };

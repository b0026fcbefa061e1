'use strict';
// A LagMonitor's families: the loop's health as the application's own monitor measures it.
const { familyMaker } = require('./family');

function lagFamilies(snapshot) {
  const f = familyMaker(snapshot);
  return [
    f('tiergate_event_loop_lag_seconds', 'gauge', 'Event-loop lag now (LagMonitor).', (s) => [{ value: s.lagMs / 1000 }], 'max'),
    f('tiergate_event_loop_lag_ewma_seconds', 'gauge', 'Event-loop lag, exponential moving average.', (s) => [{ value: s.ewmaMs / 1000 }], 'max'),
    f('tiergate_event_loop_lag_p99_seconds', 'gauge', 'Event-loop lag, 99th percentile over the monitor window.', (s) => [{ value: s.p99Ms / 1000 }], 'max'),
    f('tiergate_event_loop_lag_max_seconds', 'gauge', 'Longest event-loop lag in the monitor window.', (s) => [{ value: s.maxMs / 1000 }], 'max'),
    f('tiergate_event_loop_block_max_seconds', 'gauge', 'Longest synchronous block (no I/O poll) in the monitor window.', (s) => [{ value: s.maxBlockMs / 1000 }], 'max'),
    f('tiergate_event_loop_utilization_ratio', 'gauge', 'Event-loop utilisation over the monitor window (0..1).', (s) => [{ value: s.elu }], 'average'),
    f('tiergate_event_loop_stalled', 'gauge', 'Whether the stall watchdog sees the loop blocked (1).', (s) => [{ value: s.stalled ? 1 : 0 }], 'max'),
    f('tiergate_event_loop_ticks_total', 'counter', 'Lag monitor ticks recorded since it started.', (s) => [{ value: s.ticks }]),
    f('tiergate_heap_used_bytes', 'gauge', 'V8 heap used.', (s) => [{ value: s.heapUsed }]),
    f('tiergate_heap_limit_bytes', 'gauge', 'V8 heap limit.', (s) => [{ value: s.heapLimit }]),
  ];
}

module.exports = { lagFamilies };

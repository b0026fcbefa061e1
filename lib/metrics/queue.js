'use strict';
// The concurrency gate's families, named after Kubernetes API Priority and Fairness (the closest
// existing system): executing, limit, waiting per tier, dispatched, rejected by reason, wait time.
const { familyMaker, Family, histogramRows } = require('./family');

/** Wait-time histogram bounds, seconds. */
const WAIT_BUCKETS = Object.freeze([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
/** The wait-time histogram's name (lib/metrics/otel.js records it per request). */
const WAIT_FAMILY = 'tiergate_queue_wait_seconds';
// Label and stats field per cause; timeout, codel, abandoned and closing are the same name everywhere.
const REJECT_REASONS = [
  ['queue-full', 'rejected'],
  ['displaced', 'displaced'],
  ['timeout', 'timeout'],
  ['codel', 'codel'],
  ['abandoned', 'abandoned'],
  ['closing', 'closing'],
];

function perTier(s, field) {
  return Object.entries(s.tiers).map(([tier, t]) => ({ labels: { tier }, value: t[field] }));
}

/** `guard`: the guard createConcurrencyGate returns; `snapshot`: its stats(), once per scrape. */
function queueFamilies(guard, snapshot, buckets = WAIT_BUCKETS) {
  const boundsMs = buckets.map((b) => b * 1000);
  const f = familyMaker(snapshot);
  return [
    f('tiergate_inflight', 'gauge', 'Requests holding a concurrency slot now.', (s) => [{ value: s.inFlight }]),
    f('tiergate_limit', 'gauge', 'The concurrency limit in force (adaptive or fixed).', (s) => [{ value: s.limit }]),
    f('tiergate_queue_capacity', 'gauge', 'Waiters the queue holds at most, all tiers together.', (s) => [{ value: s.maxQueue }]),
    f('tiergate_queued', 'gauge', 'Requests waiting in the queue now, by tier.', (s) => perTier(s, 'queued')),
    f('tiergate_queue_standing', 'gauge', 'Whether the queue is standing (1): CoDel and adaptive LIFO act.', (s) => [{ value: s.standing ? 1 : 0 }], 'max'),
    f('tiergate_queue_dispatched_total', 'counter', 'Requests given a slot, at once or from the queue, by tier.', (s) => perTier(s, 'admitted')),
    f('tiergate_queue_rejected_total', 'counter', 'Requests the gate refused, by tier and reason (queue-full, displaced, timeout, codel, abandoned, closing).', (s) => {
      const rows = [];
      for (const [tier, t] of Object.entries(s.tiers)) for (const [reason, field] of REJECT_REASONS) rows.push({ labels: { tier, reason }, value: t[field] });
      return rows;
    }),
    new Family({
      name: WAIT_FAMILY,
      type: 'histogram',
      help: 'Time admitted requests waited for a slot (0 for immediate admission), by tier.',
      snapshot: () => guard.waits(boundsMs),
      read: (waits) => Object.entries(waits).flatMap(([tier, w]) => histogramRows(WAIT_FAMILY, { tier }, buckets, w.cumulative, w.count, w.sumMs / 1000)),
    }),
  ];
}

module.exports = { queueFamilies, WAIT_BUCKETS, WAIT_FAMILY };

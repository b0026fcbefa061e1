'use strict';
// The gatekeeper's families: decisions per tier and verdict, the shed controller's state, and the
// loop health its sampler reads (used when no LagMonitor is given).
const native = require('../native');
const { familyMaker } = require('./family');

// The verdict and cause labels are the gate's own names, declared once natively (src/node/gate/constants.rs).
const { verdictNames: VERDICTS, causes: CAUSES } = native.gateConstants();
/** The gatekeeper's stats() field per verdict. */
const VERDICT_FIELD = Object.freeze({ admit: 'admitted', shed: 'shed', 'tier-full': 'tierFull', 'rate-limited': 'rateLimited' });
const VERDICT_FIELDS = VERDICTS.map((v) => [v, VERDICT_FIELD[v]]);

function perTier(s, field) {
  return Object.entries(s.tiers).map(([tier, t]) => ({ labels: { tier }, value: t[field] }));
}

/**
 * `snapshot`: the gatekeeper's stats(), once per scrape. `withLoop`: also the loop-health gauges;
 * `withConcurrency`: the learned concurrency limit's (the gatekeeper has it on).
 */
function gatekeeperFamilies(snapshot, { withLoop, withConcurrency }) {
  // Aggregators for prom-client's AggregatorRegistry (several workers): counts add up, a lag is the worst one.
  const f = familyMaker(snapshot);
  const families = [
    f('tiergate_decisions_total', 'counter', `Gatekeeper decisions by tier and verdict (${VERDICTS.join(', ')}).`, (s) => {
      const rows = [];
      for (const [tier, t] of Object.entries(s.tiers)) for (const [verdict, field] of VERDICT_FIELDS) rows.push({ labels: { tier, verdict }, value: t[field] });
      return rows;
    }),
    f('tiergate_turn_shed_total', 'counter', 'Of the shed decisions, those made by the turn budget, by tier.', (s) => perTier(s, 'turnShed')),
    f('tiergate_shadow_shed_total', 'counter', 'Shadow mode: requests served that the shed controller would have shed, by tier.', (s) => perTier(s, 'shadowShed')),
    f('tiergate_refill_scale', 'gauge', 'Refill scale the shed controller gives each tier (0..1; 1 is the configured rate).', (s) => perTier(s, 'refillScale'), 'average'),
    f('tiergate_tier_protected', 'gauge', 'Whether the tier is protected (1) from shedding.', (s) => Object.entries(s.tiers).map(([tier, t]) => ({ labels: { tier }, value: t.protected ? 1 : 0 })), 'max'),
    f('tiergate_shed_pressure', 'gauge', 'The shed controller\'s pressure (0: no shedding, 1: every unprotected tier shed).', (s) => [{ value: s.pressure }], 'max'),
    f('tiergate_shed_cause', 'gauge', `What drives the shed controller now: 1 for the current cause (${CAUSES.join(', ')}).`, (s) => CAUSES.map((cause) => ({ labels: { cause }, value: s.cause === cause ? 1 : 0 })), 'max'),
    f('tiergate_shed_episodes_total', 'counter', 'Shed episodes begun.', (s) => [{ value: s.episodes }]),
    f('tiergate_shed_controller_lag_seconds', 'gauge', 'The event-loop lag the shed controller acted on.', (s) => [{ value: s.controllerLagMs / 1000 }], 'max'),
    f('tiergate_shed_target_lag_seconds', 'gauge', 'Lag at which the lowest tier starts to be shed (in force, baseline included).', (s) => [{ value: s.targetLagMs / 1000 }], 'max'),
    f('tiergate_shed_critical_lag_seconds', 'gauge', 'Lag at which every unprotected tier is shed (in force, baseline included).', (s) => [{ value: s.criticalLagMs / 1000 }], 'max'),
  ];
  if (withConcurrency) {
    const c = (s) => s.concurrency;
    families.push(
      f('tiergate_concurrency_limit', 'gauge', 'The learned concurrency limit: requests of unprotected tiers admitted at once.', (s) => [{ value: c(s).limit }]),
      f('tiergate_concurrency_inflight', 'gauge', 'Requests holding a slot of the learned limit (protected ones included).', (s) => [{ value: c(s).inFlight }]),
      f('tiergate_concurrency_waiting', 'gauge', 'Requests waiting for a slot of the learned limit.', (s) => [{ value: c(s).waiting }]),
      f('tiergate_concurrency_waits_total', 'counter', 'Requests that found every slot in use (in shadow mode, served all the same).', (s) => [{ value: c(s).waits }]),
      f('tiergate_concurrency_shadow_waits_total', 'counter', 'Shadow mode: requests served that would have waited for a slot.', (s) => [{ value: c(s).shadowWaits }]),
      f('tiergate_concurrency_shed_total', 'counter', 'Requests that waited for a slot and were shed, by reason (wait: maxWaitMs; full: maxQueue).',
        (s) => [{ labels: { reason: 'wait' }, value: c(s).waitShed }, { labels: { reason: 'full' }, value: c(s).fullShed }]),
    );
  }
  if (withLoop) {
    families.push(
      f('tiergate_event_loop_lag_seconds', 'gauge', 'Event-loop lag now (the gatekeeper\'s sampler).', (s) => [{ value: s.lagMs / 1000 }], 'max'),
      f('tiergate_event_loop_lag_ewma_seconds', 'gauge', 'Event-loop lag, exponential moving average.', (s) => [{ value: s.ewmaLagMs / 1000 }], 'max'),
      f('tiergate_event_loop_lag_p99_seconds', 'gauge', 'Event-loop lag, 99th percentile over the sampler window.', (s) => [{ value: s.p99LagMs / 1000 }], 'max'),
      f('tiergate_event_loop_utilization_ratio', 'gauge', 'Event-loop utilisation (0..1).', (s) => [{ value: s.elu }], 'average'),
      f('tiergate_event_loop_stalled', 'gauge', 'Whether the stall watchdog sees the loop blocked (1).', (s) => [{ value: s.stalled ? 1 : 0 }], 'max'),
      f('tiergate_heap_used_bytes', 'gauge', 'V8 heap used.', (s) => [{ value: s.heapUsed }]),
      f('tiergate_heap_limit_bytes', 'gauge', 'V8 heap limit.', (s) => [{ value: s.heapLimit }]),
    );
  }
  return families;
}

module.exports = { gatekeeperFamilies, VERDICT_FIELDS };

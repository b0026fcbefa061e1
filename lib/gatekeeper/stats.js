'use strict';
// gate.stats(): the native gate's counters and the loop's health, with the turn queue's and the
// concurrency limit's parts merged in, as docs/stats.md describes them.

/**
 * Per tier (by name): admitted, shed, tierFull, rateLimited, refillScale, shadowShed, protected; and the loop:
 * lagMs, ewmaLagMs, p99LagMs, elu, heapUsed, heapLimit, heapRatio, stalled; and the controller:
 * pressure (0..1), pressureParts { lag, integral, turn }, busy (utilisation of the last ~100 ms it
 * read), cause, episodes, baselineMs, targetLagMs, criticalLagMs (in force), injected; shadow mode
 * (null, or { enforcePercent }).
 * `s`: the native handle's stats(); `q`: the turn queue or null; `slots`: the concurrency slots or null.
 */
function gateStats(s, q, slots) {
  const tiers = {};
  s.tiers.forEach((t, i) => {
    tiers[t.name] = {
      protected: t.protected, admitted: t.admitted, shed: t.shed, turnShed: t.turnShed,
      tierFull: t.tierFull, rateLimited: t.rateLimited, refillScale: t.refillScale, shadowShed: t.shadowShed,
    };
    if (q === null) return;
    // The decision admitted what the turn queue holds or shed: a request counts as admitted once it
    // runs, as shed once the queue sheds it, so each request is counted once (and admitted only grows).
    const qt = q.tierStats(i);
    Object.assign(tiers[t.name], qt);
    tiers[t.name].admitted = Math.max(0, t.admitted - qt.queueShed - qt.queued);
    tiers[t.name].shed = t.shed + qt.queueShed;
  });
  return {
    tiers,
    queue: q === null ? null : q.stats(),
    concurrency: slots === null ? null : { ...s.concurrency, ...slots.stats() },
    lagMs: s.lagMs,
    ewmaLagMs: s.ewmaLagMs,
    p99LagMs: s.p99LagMs,
    controllerLagMs: s.controllerLagMs,
    busy: s.busy,
    pressureParts: { lag: s.pressureLag, integral: s.pressureIntegral, turn: s.pressureTurn },
    elu: s.elu,
    heapUsed: s.heapUsed,
    heapLimit: s.heapLimit,
    heapRatio: s.heapLimit > 0 ? s.heapUsed / s.heapLimit : 0,
    stalled: s.stalled,
    pressure: s.pressure,
    cause: s.cause,
    episodes: s.episodes,
    baselineMs: s.baselineMs,
    targetLagMs: s.targetLagMs,
    criticalLagMs: s.criticalLagMs,
    injected: s.injected,
    shadow: s.shadow ? { enforcePercent: s.shadowEnforcePercent } : null,
  };
}

module.exports = { gateStats };

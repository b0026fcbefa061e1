'use strict';
// The decision-info object hooks (onDecision, onShed, onReject, respond) and the 'tiergate:decision'
// channel receive: built here only, so every verdict gives the same fields in the same order (one
// object shape for V8, one contract for users). A cause's own fields (queueWaitMs, cluster,
// concurrencyLimit, queueFull) are added by the caller after.

/**
 * One decision's info; `cause`: what refused (or null / 'none'), see docs/gatekeeper.md. `shadow`:
 * shadow mode did not enforce this refusal (the request was served).
 */
function decisionInfo(verdict, status, tier, tierSource, key, remaining, limit, retryAfterMs, resetMs, refillScale, pressure, lagMs, cause, shadow = false) {
  return { verdict, status, tier, tierSource, key, remaining, limit, retryAfterMs, resetMs, refillScale, pressure, lagMs, cause, shadow };
}

module.exports = { decisionInfo };

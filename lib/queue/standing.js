'use strict';
// A standing queue — non-empty for a whole interval — is a queue that is not draining: a burst has
// become a backlog. CoDel then gives unprotected tiers only a short wait (their waiters are dropped
// once they have waited longer than `targetMs`), and adaptive LIFO serves a tier newest first.
const { describe, onlyKnown, checkNumber } = require('../options');
const { defaultsOf, checkNumberRange } = require('../schema');
const { CODEL } = require('../schema/concurrency-gate');

const CODEL_DEFAULTS = Object.freeze(defaultsOf(CODEL));
const CODEL_KEYS = new Set(Object.keys(CODEL_DEFAULTS));
/** Without CoDel, adaptive LIFO still needs an interval after which the queue counts as standing. */
const STANDING_INTERVAL_MS = 100;

/** `codel`: false/undefined (off), true (defaults) or { targetMs, intervalMs }. Returns null or the settings. */
function parseCodel(codel) {
  if (codel === undefined || codel === false) return null;
  if (codel === true) return { ...CODEL_DEFAULTS };
  if (codel === null || typeof codel !== 'object') throw new TypeError(`codel must be a boolean or { targetMs, intervalMs }, got ${describe(codel)}`);
  onlyKnown(codel, CODEL_KEYS, 'codel');
  const targetMs = codel.targetMs === undefined ? CODEL_DEFAULTS.targetMs : checkNumber('codel.targetMs', codel.targetMs, checkNumberRange(CODEL.targetMs));
  const intervalMs = codel.intervalMs === undefined
    ? CODEL_DEFAULTS.intervalMs
    : checkNumber('codel.intervalMs', codel.intervalMs, checkNumberRange(CODEL.intervalMs));
  return { targetMs, intervalMs };
}

class StandingRule {
  /** @param {{ targetMs, intervalMs } | null} codel */
  constructor(codel) {
    this.codel = codel;
    this.intervalMs = codel ? codel.intervalMs : STANDING_INTERVAL_MS;
  }

  /** Has the queue (its `nonEmptySince`) been standing at time `t`? */
  standing(queues, t) {
    return queues.nonEmptySince >= 0 && t - queues.nonEmptySince >= this.intervalMs;
  }

  /** The wait a tier's waiters are allowed now: its timeout, or CoDel's target while standing. */
  allowedWait(tier, queues, t) {
    const c = this.codel;
    if (c !== null && !tier.protected && c.targetMs < tier.queueTimeoutMs && this.standing(queues, t)) return c.targetMs;
    return tier.queueTimeoutMs;
  }

  /** When the allowed waits change next by themselves (the queue becomes standing), or Infinity. */
  nextChange(queues, t) {
    if (this.codel === null || queues.size === 0 || this.standing(queues, t)) return Infinity;
    return queues.nonEmptySince + this.intervalMs;
  }
}

module.exports = { StandingRule, parseCodel, CODEL_DEFAULTS };

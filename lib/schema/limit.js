'use strict';
// The one vocabulary of a limit, `{ algorithm?, limit, windowMs, burst? }`: `limit` units per
// `windowMs`; a token bucket (and GCRA) admits up to `burst` (default `limit`) at once and refills at
// limit / windowMs. Named limits, cluster limits, tiers' budgets and per-key quotas all take it and
// are checked here, with the messages the native named limits give (src/core/limit/spec.rs), so one
// bad value reads the same wherever it is written. Tier budgets and per-key quotas are token buckets
// held by the ledger in its own units (capacity, tokens per second): `bucketUnits` translates, here
// only. A ledger bucket may also be a fixed allowance, `limit: 0` with a `burst` (it never refills),
// as a named limit may not.
const { typeName } = require('../options');

/** Every algorithm a limit may name, as the native named limits spell them. */
const ALGORITHMS = Object.freeze(['token-bucket', 'fixed-window', 'sliding-window', 'sliding-counter', 'gcra']);
/** What `burst` applies to. */
const BURST_ALGORITHMS = Object.freeze(['token-bucket', 'gcra']);
/** A count (limit, burst) is a whole number from 1 to this (u32::MAX, as natively). */
const MAX_COUNT = 4294967295;
/** The longest window: about 31.7 years (src/core/limit/spec.rs MAX_WINDOW_MS). */
const MAX_WINDOW_MS = 1e12;
/** The ledger's largest rate, tokens per second (src/core/ledger/config.rs MAX_AMOUNT). */
const MAX_RATE_PER_SEC = 1e15;

function count(v, at, min = 1) {
  if (!(Number.isInteger(v) && v >= min && v <= MAX_COUNT)) throw new RangeError(`${at} must be an integer from ${min} to ${MAX_COUNT} (got ${v})`);
  return v;
}

function windowMs(v, at) {
  if (!(Number.isFinite(v) && v <= MAX_WINDOW_MS && v * 1e6 >= 0.5)) {
    throw new RangeError(`${at} must be a finite number > 0 (at least 1e-6, one nanosecond) and at most ${MAX_WINDOW_MS} (got ${v})`);
  }
  return v;
}

/**
 * `{ algorithm, limit, windowMs, burst? }` of `l`, checked (`at` names it: "limits[0]"); `algorithm`
 * is the one in force (the caller's default filled in) and must be one of `allowed`. Types are
 * TypeErrors, values RangeErrors; `burst` stays undefined when not given.
 */
function limitNumbers(l, at, algorithm, allowed = ALGORITHMS, minLimit = 1) {
  if (!allowed.includes(algorithm)) throw new RangeError(`${at}.algorithm must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(algorithm)}`);
  for (const k of ['limit', 'windowMs']) {
    if (typeof l[k] !== 'number') throw new TypeError(`${at}.${k} must be a number, got ${typeName(l[k])}`);
  }
  if (l.burst !== undefined && typeof l.burst !== 'number') throw new TypeError(`${at}.burst must be a number, got ${typeName(l.burst)}`);
  count(l.limit, `${at}.limit`, minLimit);
  windowMs(l.windowMs, `${at}.windowMs`);
  if (l.burst !== undefined) {
    if (!BURST_ALGORITHMS.includes(algorithm)) throw new RangeError(`${at}.burst applies to the token-bucket and gcra algorithms only`);
    count(l.burst, `${at}.burst`);
  }
  return { algorithm, limit: l.limit, windowMs: l.windowMs, burst: l.burst };
}

/**
 * A token bucket's `{ algorithm: 'token-bucket', limit, windowMs, burst }` (burst filled in) from the
 * limit words of `l`: tiers' budgets and per-key quotas, which are token buckets only. `limit: 0`
 * with a `burst` is a fixed allowance.
 */
function tokenBucket(l, at) {
  const algorithm = l.algorithm === undefined ? 'token-bucket' : l.algorithm;
  if (algorithm !== 'token-bucket') throw new RangeError(`${at}.algorithm must be 'token-bucket' (the ledger's buckets are token buckets), got ${JSON.stringify(algorithm)}`);
  const b = limitNumbers(l, at, algorithm, ALGORITHMS, 0);
  if (b.limit === 0 && b.burst === undefined) throw new RangeError(`${at}.burst is required with limit 0 (a fixed allowance of burst tokens, never refilled)`);
  const burst = b.burst === undefined ? b.limit : b.burst;
  if ((b.limit * 1000) / b.windowMs > MAX_RATE_PER_SEC) {
    throw new RangeError(`${at}.windowMs: limit / windowMs must be at most ${MAX_RATE_PER_SEC} per second, got ${b.limit} per ${b.windowMs} ms`);
  }
  return { algorithm, limit: b.limit, windowMs: b.windowMs, burst };
}

/** A checked token bucket in the ledger's native units: `{ capacity, refillPerSec }`. */
function bucketUnits(b) {
  return { capacity: b.burst, refillPerSec: (b.limit * 1000) / b.windowMs };
}

module.exports = { ALGORITHMS, BURST_ALGORITHMS, MAX_COUNT, MAX_WINDOW_MS, limitNumbers, tokenBucket, bucketUnits };

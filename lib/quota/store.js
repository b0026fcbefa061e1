'use strict';
// The lease store contract: what a store (Redis, SQLite, PostgreSQL, memory) implements for the
// lease driver (lib/quota/driver.js). The semantics are the engine's (src/core/quota/wire.rs); the
// Rust reference store (src/core/quota/tests/store.rs) and lib/quota/memory-store.js implement them.
//
// A store is any object with two methods (and an optional third):
//
//   store.lease(batch: StoreRequest[]) -> Promise<Array<StoreGrant | Error>>
//     One answer per request, in order; an Error (or a rejected promise for the whole batch) fails
//     those requests (the driver then falls back for their limits until a later grant). Each request
//     is handled atomically per (limit.name, key):
//       granted   = min(size, what the limit has left now), debited at once (before use);
//       ttlMs     = the lease's life from now (at most the asked ttlMs; a fixed window ends it with
//                   the window);
//       remaining = what the limit has left after this grant (integer, floor);
//       holders   = distinct `holder`s with an unexpired lease of this key, the requester included;
//       lease     = the lease's name, an integer >= 0 echoed in returns (fixed window: the window
//                   index; otherwise a record id or any integer);
//       retryAfterMs = when remaining is 0, ms until the store may grant again (the window's end,
//                   one token's refill; the asked ttlMs for a bucket that never refills, limit 0), else 0.
//     The holder of a lease must be remembered until the lease's TTL, never less.
//
//   store.release(batch: StoreReturn[]) -> Promise<void>
//     Best effort, never retried: tokens of a lease the engine will not spend. A token bucket
//     credits them back (capped at burst); a fixed window credits them only if `lease` names the
//     current window; a sliding window shrinks that lease's record and, with `idleMs` (the lease was
//     spent from, last `idleMs` before the return was made), ends the record one window after that
//     spend (`min(until, now - idleMs + windowMs)`). Reason 'spent' (tokens 0): a sliding window's
//     lease spent dry, sent only to end its record. reason 'released' means the
//     holder is shutting down (the store may forget it as a holder). Losing a return only strands
//     its tokens until the lease's TTL.
//
//   store.close() -> Promise<void>   (optional; the driver never calls it: the store is its owner's)
//
// StoreRequest: { limit: LimitSpec, key: string, size: integer >= 1, ttlMs: number, holder: string }
// StoreReturn:  { limit: LimitSpec, key: string, lease: integer, tokens: integer >= 0,
//                 reason: 'released'|'evicted'|'expired'|'late'|'unusable'|'overflow'|'spent',
//                 idleMs?: number, holder: string }
// LimitSpec (frozen, from Quota's options): { name, algorithm: 'token-bucket'|'fixed-window'|
//   'sliding-window', limit & windowMs (limit units per windowMs), burst (token bucket: tokens
//   when full, default limit),
//   fallback, unfunded, provisional, renewalPeriodMs, leadTimeMs, leaseTtlMs, maxLease,
//   initialLease, retryMs, minHolders }
//
// The store's clock is its own (Redis TIME, the database's now()): durations, never instants, cross
// the wire, so clocks need not agree.
const { typeName } = require('../options');

/** Throws unless `store` has the contract's methods. */
function checkStore(store, at) {
  if (store === null || typeof store !== 'object') throw new TypeError(`${at} must be a lease store { lease(batch), release(batch) }, got ${typeName(store)}`);
  for (const m of ['lease', 'release']) {
    if (typeof store[m] !== 'function') {
      throw new TypeError(`${at}.${m} must be a function (a lease store has lease(batch) and release(batch)), got ${typeName(store[m])}`);
    }
  }
  return store;
}

module.exports = { checkStore };

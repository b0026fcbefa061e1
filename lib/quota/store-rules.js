'use strict';
// The lease store contract (lib/quota/store.js) as pure functions over one (limit, key)'s state: the
// MemoryStore runs them in this process, the SQL lease stores inside the transaction that holds that
// key's row, at the store's clock. Same semantics as the engine's reference store
// (src/core/quota/tests/store.rs) and the Redis script: debit before use, holders remembered until
// their lease's TTL.

/** A key's state as stored (JSON): bucket tokens, fixed-window count, sliding records, holders. */
function emptyState(limit, now) {
  return { tokens: limit.algorithm === 'token-bucket' ? limit.burst : 0, at: now, window: -1, used: 0, records: [], holders: {} };
}

/** Brings a state to `now`: expired holders go, the bucket refills, the window turns, old records leave. */
function advance(s, limit, now) {
  for (const h of Object.keys(s.holders)) if (s.holders[h] <= now) delete s.holders[h];
  if (limit.algorithm === 'token-bucket') {
    if (now > s.at) {
      s.tokens = Math.min(limit.burst, s.tokens + ((now - s.at) * limit.limit) / limit.windowMs); // limit per windowMs
      s.at = now;
    }
  } else if (limit.algorithm === 'fixed-window') {
    // A clock read behind the window counted in (a step back) counts in it, as the Rust core's fixed
    // window does: going back to an earlier window would grant its limit again.
    const w = Math.floor(now / limit.windowMs);
    if (w > s.window) {
      s.window = w;
      s.used = 0;
    }
  } else {
    s.records = s.records.filter((r) => r.until > now && r.tokens > 0);
  }
}

/** Handles one StoreRequest on state `s` (advanced to `now`); `leaseId` names a new lease. */
function grant(s, { limit, size, ttlMs, holder }, now, leaseId) {
  let granted;
  let remaining;
  let lease = leaseId;
  let retryAfterMs = 0;
  if (limit.algorithm === 'token-bucket') {
    granted = Math.min(size, Math.floor(s.tokens));
    s.tokens -= granted;
    remaining = Math.floor(s.tokens);
    // A bucket that never refills may still get tokens back (returns): ask again after a lease's life.
    if (remaining === 0) retryAfterMs = limit.limit > 0 ? Math.ceil(((1 - s.tokens) * limit.windowMs) / limit.limit) : ttlMs;
  } else if (limit.algorithm === 'fixed-window') {
    const cap = Math.floor(limit.limit);
    granted = Math.min(size, cap - s.used);
    s.used += granted;
    remaining = cap - s.used;
    const end = (s.window + 1) * limit.windowMs;
    ttlMs = Math.min(ttlMs, end - now);
    lease = s.window;
    if (remaining === 0) retryAfterMs = Math.ceil(end - now);
  } else {
    const cap = Math.floor(limit.limit);
    const used = s.records.reduce((a, r) => a + r.tokens, 0);
    granted = Math.min(size, cap - used);
    if (granted > 0) s.records.push({ id: lease, tokens: granted, until: now + ttlMs + limit.windowMs });
    remaining = cap - used - granted;
    if (remaining === 0) retryAfterMs = Math.ceil(Math.min(...s.records.map((r) => r.until - now)));
  }
  if (granted > 0) s.holders[holder] = Math.max(s.holders[holder] || 0, now + ttlMs);
  const holders = Object.keys(s.holders).length + (Object.hasOwn(s.holders, holder) ? 0 : 1);
  return { granted, ttlMs, remaining, holders, lease, retryAfterMs };
}

/** Applies one StoreReturn on state `s` (advanced to `now`). */
function credit(s, { limit, lease, tokens, reason, idleMs, holder }, now) {
  if (limit.algorithm === 'token-bucket') s.tokens = Math.min(limit.burst, s.tokens + tokens);
  else if (limit.algorithm === 'fixed-window') {
    if (lease === s.window) s.used -= Math.min(tokens, s.used);
  } else {
    const r = s.records.find((x) => x.id === lease);
    if (r !== undefined) {
      r.tokens -= Math.min(tokens, r.tokens);
      // Spent from: its spends leave the window one window after the last of them.
      if (idleMs !== undefined) r.until = Math.min(r.until, now - idleMs + limit.windowMs);
    }
  }
  if (reason === 'released') delete s.holders[holder];
}

/** Whether a state holds nothing worth keeping (a full bucket, an empty window, no holders). */
function idle(s, limit) {
  if (Object.keys(s.holders).length) return false;
  if (limit.algorithm === 'token-bucket') return s.tokens >= limit.burst;
  if (limit.algorithm === 'fixed-window') return s.used === 0;
  return s.records.length === 0;
}

/** Requests in one lock order (limit name, key) with their original places, so batches never deadlock. */
function lockOrder(batch) {
  return batch.map((r, i) => ({ r, i })).sort((a, b) => (a.r.limit.name + '\0' + a.r.key < b.r.limit.name + '\0' + b.r.key ? -1 : 1));
}

module.exports = { emptyState, advance, grant, credit, idle, lockOrder };

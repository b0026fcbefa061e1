'use strict';
// The contract's two algorithms as pure functions of (policy, state, now in ms). A store runs them
// inside the transaction that holds the client's row, so the state a decision reads is the state it
// writes back: exactness comes from the store's lock, not from this file.

const TOKEN_BUCKET = 'token_bucket';
const SLIDING_WINDOW = 'sliding_window';
// Fractional refill accumulates float error: 0.9999999999 tokens after exactly one second is a token.
const EPS = 1e-9;

function initialState(policy, now) {
  return policy.algorithm === TOKEN_BUCKET ? { tokens: policy.burstSize, at: now } : { entries: [] };
}

/** The policy's limit: what X-RateLimit-Limit reports. */
function limitOf(policy) {
  return policy.algorithm === TOKEN_BUCKET ? policy.burstSize : policy.maxRequests;
}

/** The policy's window in seconds, for RateLimit-Policy (a bucket's: the time to refill from empty). */
function windowSecondsOf(policy) {
  return policy.algorithm === TOKEN_BUCKET ? Math.ceil(policy.burstSize / policy.requestsPerSecond) : policy.windowSeconds;
}

function refill(policy, s, now) {
  if (now > s.at) {
    s.tokens = Math.min(policy.burstSize, s.tokens + ((now - s.at) * policy.requestsPerSecond) / 1000);
    s.at = now;
  }
}

function bucketDecide(policy, s, now, cost) {
  refill(policy, s, now);
  const allowed = cost <= policy.burstSize && s.tokens + EPS >= cost;
  if (allowed) s.tokens = Math.max(0, s.tokens - cost);
  const rate = policy.requestsPerSecond / 1000; // tokens per ms
  return {
    allowed,
    remaining: Math.floor(s.tokens + EPS),
    resetAtMs: now + (policy.burstSize - s.tokens) / rate,
    // The next whole token (or `cost` of them); a cost above the burst waits for a full bucket, and
    // is refused then too: it can never pass.
    retryAfterMs: allowed ? 0 : (Math.min(cost, policy.burstSize) - s.tokens) / rate,
  };
}

// A window's state: a flat array [t0, n0, t1, n1, ...] of allowed requests' times (ms) and costs,
// oldest first; requests of one millisecond share an entry, so it never holds more than the limit.
function prune(s, now, windowMs) {
  let i = 0;
  while (i < s.entries.length && s.entries[i] <= now - windowMs) i += 2;
  if (i > 0) s.entries.splice(0, i);
}

function used(s) {
  let n = 0;
  for (let i = 1; i < s.entries.length; i += 2) n += s.entries[i];
  return n;
}

function windowDecide(policy, s, now, cost) {
  const windowMs = policy.windowSeconds * 1000;
  prune(s, now, windowMs);
  const before = used(s);
  const allowed = before + cost <= policy.maxRequests;
  if (allowed) {
    const last = s.entries.length - 2;
    if (last >= 0 && s.entries[last] === now) s.entries[last + 1] += cost;
    else s.entries.push(now, cost);
  }
  const count = allowed ? before + cost : before;
  let retryAfterMs = 0;
  if (!allowed) {
    // The slots free up as the oldest requests leave the window; a denied request takes none.
    const need = Math.min(count + cost - policy.maxRequests, count);
    let freed = 0;
    retryAfterMs = windowMs;
    for (let i = 0; i < s.entries.length; i += 2) {
      freed += s.entries[i + 1];
      if (freed >= need) { retryAfterMs = s.entries[i] + windowMs - now; break; }
    }
  }
  return {
    allowed,
    remaining: policy.maxRequests - count,
    resetAtMs: s.entries.length ? s.entries[0] + windowMs : now,
    retryAfterMs,
  };
}

/** Decides one check of `cost`, updating `state` in place. */
function decide(policy, state, now, cost) {
  return policy.algorithm === TOKEN_BUCKET ? bucketDecide(policy, state, now, cost) : windowDecide(policy, state, now, cost);
}

/** The state as the activity endpoint shows it, at `now`, without changing it. */
function describeState(policy, state, now) {
  const s = JSON.parse(JSON.stringify(state));
  if (policy.algorithm === TOKEN_BUCKET) {
    refill(policy, s, now);
    return { tokens: s.tokens, remaining: Math.floor(s.tokens + EPS), resetAt: new Date(now + ((policy.burstSize - s.tokens) * 1000) / policy.requestsPerSecond).toISOString() };
  }
  prune(s, now, policy.windowSeconds * 1000);
  const n = used(s);
  return { used: n, remaining: policy.maxRequests - n, resetAt: new Date(s.entries.length ? s.entries[0] + policy.windowSeconds * 1000 : now).toISOString() };
}

module.exports = { TOKEN_BUCKET, SLIDING_WINDOW, initialState, decide, describeState, limitOf, windowSecondsOf };

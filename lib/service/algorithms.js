'use strict';
// The policies' algorithms as pure functions of (policy, state, now in ms). A store runs them inside
// the transaction that holds the client's row, so the state a decision reads is the state it writes
// back: exactness comes from the store's lock, not from this file. The contract's two (token bucket,
// exact sliding window) and the abuse defense's others (fixed window, sliding counter, GCRA), each
// with a state of a few numbers (the exact window's: at most `maxRequests` entries).

const TOKEN_BUCKET = 'token_bucket';
const SLIDING_WINDOW = 'sliding_window';
const FIXED_WINDOW = 'fixed_window';
const SLIDING_COUNTER = 'sliding_counter';
const GCRA = 'gcra';
// Fractional arithmetic accumulates float error: 0.9999999999 tokens after exactly one second is a token.
const EPS = 1e-9;

/** A policy's fields by its shape: a rate with a burst, or a count per window. */
const RATE_FIELDS = ['requestsPerSecond', 'burstSize'];
const WINDOW_FIELDS = ['maxRequests', 'windowSeconds'];

// ---- token bucket: { tokens, at } ----

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

function bucketDescribe(policy, s, now) {
  refill(policy, s, now);
  return { tokens: s.tokens, remaining: Math.floor(s.tokens + EPS), resetAtMs: now + ((policy.burstSize - s.tokens) * 1000) / policy.requestsPerSecond };
}

// ---- exact sliding window: { entries: [t0, n0, t1, n1, ...] } ----
// Allowed requests' times (ms) and costs, oldest first; requests of one millisecond share an entry,
// so it never holds more than the limit.

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

function windowDescribe(policy, s, now) {
  prune(s, now, policy.windowSeconds * 1000);
  const n = used(s);
  return { used: n, remaining: policy.maxRequests - n, resetAtMs: s.entries.length ? s.entries[0] + policy.windowSeconds * 1000 : now };
}

// ---- fixed window: { at, window, count } ----
// Windows aligned on multiples of the window since the epoch; a client may send up to twice the
// limit across an edge.

function fixedRoll(policy, s, now) {
  const w = Math.floor(now / (policy.windowSeconds * 1000));
  if (w !== s.window) {
    s.window = w;
    s.count = 0;
  }
  s.at = Math.max(s.at, now);
  return (w + 1) * policy.windowSeconds * 1000; // the window's end
}

function fixedDecide(policy, s, now, cost) {
  const end = fixedRoll(policy, s, now);
  const allowed = s.count + cost <= policy.maxRequests;
  if (allowed) s.count += cost;
  // Refused: nothing frees up before the window ends (a cost above the limit never passes).
  return { allowed, remaining: policy.maxRequests - s.count, resetAtMs: end, retryAfterMs: allowed ? 0 : end - now };
}

function fixedDescribe(policy, s, now) {
  const end = fixedRoll(policy, s, now);
  return { used: s.count, remaining: policy.maxRequests - s.count, resetAtMs: end };
}

// ---- sliding counter: { at, window, previous, current } ----
// The previous fixed window's count weighted by how much of it the sliding window still covers,
// plus the current one's: two numbers per client instead of a timestamp per request, at the price of
// assuming the previous window's requests were spread evenly.

function counterRoll(policy, s, now) {
  const windowMs = policy.windowSeconds * 1000;
  const w = Math.floor(now / windowMs);
  if (w === s.window + 1) {
    s.previous = s.current;
    s.current = 0;
  } else if (w !== s.window) {
    s.previous = 0;
    s.current = 0;
  }
  s.window = w;
  s.at = Math.max(s.at, now);
  const elapsed = (now - w * windowMs) / windowMs;
  return { windowMs, start: w * windowMs, estimate: s.previous * (1 - elapsed) + s.current };
}

/** When the estimate first leaves room for `cost` (ms), given the state at `now`. */
function counterRetry(policy, s, now, cost, start, windowMs) {
  const max = policy.maxRequests;
  if (cost > max) return start + windowMs - now; // never passes; as the fixed window says
  // In this window: previous × (1 − x) + current + cost ≤ max.
  const room = max - s.current - cost;
  if (room >= 0 && s.previous > 0) {
    const x = 1 - room / s.previous;
    if (x < 1) return Math.max(0, start + x * windowMs - now);
  }
  // In the next: current × (1 − x) + cost ≤ max (current > 0, or it would have fit now).
  const x = s.current > 0 ? Math.max(0, 1 - (max - cost) / s.current) : 0;
  return start + windowMs + x * windowMs - now;
}

function counterDecide(policy, s, now, cost) {
  const { windowMs, start, estimate } = counterRoll(policy, s, now);
  const allowed = estimate + cost <= policy.maxRequests + EPS;
  if (allowed) s.current += cost;
  const after = allowed ? estimate + cost : estimate;
  return {
    allowed,
    remaining: Math.max(0, Math.floor(policy.maxRequests - after + EPS)),
    // Empty once the current window's count has slid out: the end of the next window.
    resetAtMs: s.current > 0 ? start + 2 * windowMs : s.previous > 0 ? start + windowMs : now,
    retryAfterMs: allowed ? 0 : counterRetry(policy, s, now, cost, start, windowMs),
  };
}

function counterDescribe(policy, s, now) {
  const { windowMs, start, estimate } = counterRoll(policy, s, now);
  return { used: estimate, remaining: Math.max(0, Math.floor(policy.maxRequests - estimate + EPS)), resetAtMs: s.current > 0 ? start + 2 * windowMs : s.previous > 0 ? start + windowMs : now };
}

// ---- GCRA: { at, tat } ----
// The theoretical arrival time of the next unit: a unit costs 1000 / requestsPerSecond ms of it, and
// a request passes if it ends no further than `burstSize` units ahead of now. A token bucket in one
// number; refuses what comes early.

function gcraDecide(policy, s, now, cost) {
  const t = 1000 / policy.requestsPerSecond; // ms per unit
  const horizon = policy.burstSize * t;
  const from = Math.max(s.tat, now);
  const next = from + cost * t;
  const allowed = cost <= policy.burstSize && next - now <= horizon + EPS;
  if (allowed) s.tat = next;
  s.at = Math.max(s.at, now);
  const ahead = Math.max(s.tat, now) - now;
  return {
    allowed,
    remaining: Math.max(0, Math.floor((horizon - ahead) / t + EPS)),
    resetAtMs: Math.max(s.tat, now),
    // When `cost` units fit (a cost above the burst: when the meter is empty, and refused then too).
    retryAfterMs: allowed ? 0 : cost > policy.burstSize ? ahead : next - horizon - now,
  };
}

function gcraDescribe(policy, s, now) {
  const t = 1000 / policy.requestsPerSecond;
  const ahead = Math.max(s.tat, now) - now;
  return { remaining: Math.max(0, Math.floor((policy.burstSize * t - ahead) / t + EPS)), resetAtMs: Math.max(s.tat, now) };
}

// ---- refunds: `units` given back to a state at `now`, never beyond the limit; the units credited ----

function bucketRefund(policy, s, now, units) {
  refill(policy, s, now);
  // Up to a full bucket; a refill's fraction of a token counts as the whole one it completes.
  const credited = Math.max(0, Math.min(units, policy.burstSize - s.tokens));
  s.tokens += credited;
  return Math.ceil(credited - EPS);
}

// The newest allowed requests go back first.
function windowRefund(policy, s, now, units) {
  prune(s, now, policy.windowSeconds * 1000);
  let credited = 0;
  while (credited < units && s.entries.length > 0) {
    const last = s.entries.length - 1;
    const take = Math.min(units - credited, s.entries[last]);
    credited += take;
    s.entries[last] -= take;
    if (s.entries[last] === 0) s.entries.splice(last - 1, 2);
  }
  return credited;
}

function fixedRefund(policy, s, now, units) {
  fixedRoll(policy, s, now);
  const credited = Math.min(units, s.count);
  s.count -= credited;
  return credited;
}

// The current window's count first; then the previous one's, as far as the estimate still counts it.
function counterRefund(policy, s, now, units) {
  counterRoll(policy, s, now);
  const fromCurrent = Math.min(units, s.current);
  s.current -= fromCurrent;
  const fromPrevious = Math.min(units - fromCurrent, s.previous);
  s.previous -= fromPrevious;
  return fromCurrent + fromPrevious;
}

function gcraRefund(policy, s, now, units) {
  const t = 1000 / policy.requestsPerSecond;
  const from = Math.max(s.tat, now);
  // Up to an empty meter (as a bucket, up to full); a fraction of a unit counts as the whole one.
  const credited = Math.min(units, (from - now) / t);
  s.tat = from - credited * t;
  s.at = Math.max(s.at, now);
  return Math.ceil(credited - EPS);
}

/** Every algorithm: its fields, its first state, its decision, reading and refund, its limit and window. */
const rateLimit = (p) => p.burstSize;
const rateWindow = (p) => Math.ceil(p.burstSize / p.requestsPerSecond); // the time to refill from empty
const countLimit = (p) => p.maxRequests;
const countWindow = (p) => p.windowSeconds;
const ALGORITHMS = Object.freeze({
  [TOKEN_BUCKET]: { fields: RATE_FIELDS, initial: (p, now) => ({ tokens: p.burstSize, at: now }), decide: bucketDecide, describe: bucketDescribe, refund: bucketRefund, lastTime: (s) => s.at, limit: rateLimit, windowSeconds: rateWindow },
  [SLIDING_WINDOW]: { fields: WINDOW_FIELDS, initial: () => ({ entries: [] }), decide: windowDecide, describe: windowDescribe, refund: windowRefund, lastTime: (s) => (s.entries.length ? s.entries[s.entries.length - 2] : 0), limit: countLimit, windowSeconds: countWindow },
  [FIXED_WINDOW]: { fields: WINDOW_FIELDS, initial: () => ({ at: 0, window: -1, count: 0 }), decide: fixedDecide, describe: fixedDescribe, refund: fixedRefund, lastTime: (s) => s.at, limit: countLimit, windowSeconds: countWindow },
  [SLIDING_COUNTER]: { fields: WINDOW_FIELDS, initial: () => ({ at: 0, window: -2, previous: 0, current: 0 }), decide: counterDecide, describe: counterDescribe, refund: counterRefund, lastTime: (s) => s.at, limit: countLimit, windowSeconds: countWindow },
  [GCRA]: { fields: RATE_FIELDS, initial: () => ({ at: 0, tat: 0 }), decide: gcraDecide, describe: gcraDescribe, refund: gcraRefund, lastTime: (s) => s.at, limit: rateLimit, windowSeconds: rateWindow },
});

/** Whether the policy is a rate with a burst (else a count per window). */
function isRate(policy) {
  return ALGORITHMS[policy.algorithm].fields === RATE_FIELDS;
}

function initialState(policy, now) {
  return ALGORITHMS[policy.algorithm].initial(policy, now);
}

/** The policy's limit: what X-RateLimit-Limit reports. */
function limitOf(policy) {
  return ALGORITHMS[policy.algorithm].limit(policy);
}

/** The policy's window in seconds, for RateLimit-Policy. */
function windowSecondsOf(policy) {
  return ALGORITHMS[policy.algorithm].windowSeconds(policy);
}

/** The time of the state's last decision (ms): a decision never runs the state's clock backwards. */
function lastTime(policy, state) {
  return ALGORITHMS[policy.algorithm].lastTime(state);
}

/** Decides one check of `cost`, updating `state` in place. */
function decide(policy, state, now, cost) {
  return ALGORITHMS[policy.algorithm].decide(policy, state, now, cost);
}

/** Gives `units` back to `state` at `now` (in place), never beyond the limit; the units credited. */
function refund(policy, state, now, units) {
  return ALGORITHMS[policy.algorithm].refund(policy, state, now, units);
}

/** The state as the activity endpoint shows it, at `now`, without changing it. */
function describeState(policy, state, now) {
  const { resetAtMs, ...rest } = ALGORITHMS[policy.algorithm].describe(policy, JSON.parse(JSON.stringify(state)), now);
  return { ...rest, resetAt: new Date(resetAtMs).toISOString() };
}

module.exports = { ALGORITHMS, RATE_FIELDS, isRate, initialState, decide, refund, describeState, limitOf, windowSecondsOf, lastTime };

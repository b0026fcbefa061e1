'use strict';
// What the two stores share: rows to contract objects, a decision batch over one client's row, and
// the activity aggregation. Column names are the same in both schemas (migrations/).
const { isRate, initialState, decide, refund, describeState, lastTime } = require('../algorithms');

/** Analytics resolutions (ms) kept as aggregated buckets, and how long each is kept. */
const RESOLUTIONS = Object.freeze({ second: 1000, minute: 60_000 });
// Activity rows deleted per retention step: one long delete holds SQLite's write lock, or a core of
// PostgreSQL, while the decisions wait behind it.
const PRUNE_ROWS = 2000;

function policyOf(row) {
  const base = { clientKey: row.client_key, algorithm: row.algorithm };
  return isRate(base)
    ? { ...base, requestsPerSecond: Number(row.requests_per_second), burstSize: Number(row.burst_size) }
    : { ...base, maxRequests: Number(row.max_requests), windowSeconds: Number(row.window_seconds) };
}

function iso(ms) {
  return ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString();
}

function clientOf(row) {
  return { ...policyOf(row), createdAt: iso(row.created_at), updatedAt: iso(row.updated_at) };
}

/** The columns of a policy, in the order the INSERT/UPDATE statements take them. */
function policyColumns(p) {
  const rate = isRate(p);
  return [p.algorithm, rate ? p.requestsPerSecond : null, rate ? p.burstSize : null, rate ? null : p.maxRequests, rate ? null : p.windowSeconds];
}

function freshState(p, now) {
  return JSON.stringify(initialState(p, now));
}

function banOf(row) {
  return { clientKey: row.client_key, reason: row.reason, createdAt: iso(row.created_at), expiresAt: iso(row.expires_at) };
}

/** What a decision needs of a client's row (read with its active ban): { policy, state, ban }. */
function entryOf(row) {
  const banned = row.ban_created_at !== null && row.ban_created_at !== undefined;
  return {
    policy: policyOf(row),
    state: JSON.parse(row.state),
    ban: banned ? { reason: row.ban_reason, expiresAtMs: row.ban_expires_at === null ? null : Number(row.ban_expires_at) } : null,
  };
}

/**
 * Decides `costs` in order against a client's entry (held under the store's lock), at `now`,
 * updating `entry.state` in place. The outcome has `results` when the state changed.
 */
function decideEntry(entry, costs, now) {
  const { ban } = entry;
  if (ban !== null && (ban.expiresAtMs === null || ban.expiresAtMs > now)) return { found: true, banned: ban, now };
  const { policy, state } = entry;
  // Time never runs backwards for a state: a clock read before a lock wait (or another host's clock)
  // may be behind the last decision's.
  const t = Math.max(now, lastTime(policy, state));
  // A refusal's wait counts from the clock read: what it waits for comes at t + retryAfterMs.
  const results = costs.map((cost) => {
    const r = decide(policy, state, t, cost);
    if (!r.allowed) r.retryAfterMs += t - now;
    return r;
  });
  return { found: true, policy, results, now: t };
}

/**
 * Decides `costs` in order against the client's row (read under the store's lock), at `now`.
 * Returns the outcome for every check and the state to write back (null: nothing changed).
 */
function decideRow(row, costs, now) {
  if (!row) return { outcome: { found: false }, state: null };
  const entry = entryOf(row);
  const outcome = decideEntry(entry, costs, now);
  return { outcome, state: outcome.results ? JSON.stringify(entry.state) : null };
}

/**
 * Gives `units` back to the client's row (read under the store's lock) at `now`: `{ refunded, state }`
 * (the state to write back, JSON) or null when there is no such client.
 */
function refundRow(row, units, now) {
  if (!row) return null;
  const policy = policyOf(row);
  const state = JSON.parse(row.state);
  const refunded = refund(policy, state, Math.max(now, lastTime(policy, state)), units);
  return { refunded, state: JSON.stringify(state) };
}

function currentState(row, now) {
  const policy = policyOf(row);
  return { algorithm: policy.algorithm, ...describeState(policy, JSON.parse(row.state), now) };
}

const RESOLUTION_LIST = Object.values(RESOLUTIONS);

/** Activity records summed per client. */
function clientTotals(records) {
  const clients = new Map();
  for (const r of records) {
    let c = clients.get(r.clientKey);
    if (!c) clients.set(r.clientKey, (c = { clientKey: r.clientKey, total: 0, allowed: 0, denied: 0, lastAt: 0 }));
    c.total++;
    if (r.allowed) c.allowed++; else c.denied++;
    if (r.at > c.lastAt) c.lastAt = r.at;
  }
  return [...clients.values()];
}

/** Activity records summed per bucket of each resolution. */
function bucketTotals(records) {
  const buckets = [];
  // Per resolution, a Map keyed by the bucket's start (a number: no key string per record).
  const byStart = RESOLUTION_LIST.map(() => new Map());
  for (const r of records) {
    for (let i = 0; i < RESOLUTION_LIST.length; i++) {
      const resolution = RESOLUTION_LIST[i];
      const start = r.at - (r.at % resolution);
      let b = byStart[i].get(start);
      if (!b) { byStart[i].set(start, (b = { resolution, start, incoming: 0, allowed: 0, denied: 0, responseMsSum: 0 })); buckets.push(b); }
      b.incoming++;
      if (r.allowed) b.allowed++; else b.denied++;
      b.responseMsSum += r.responseMs;
    }
  }
  return buckets;
}

function activityOf(row) {
  return { clientKey: row.client_key, allowed: Boolean(row.allowed), cost: Number(row.cost), timestamp: iso(row.at), responseTimeMs: Number(row.response_ms) };
}

// Analytics ranges: span, step, and the bucket resolution read.
const RANGES = Object.freeze({
  '1m': { spanMs: 60_000, stepMs: 1000, resolution: RESOLUTIONS.second },
  '5m': { spanMs: 300_000, stepMs: 5000, resolution: RESOLUTIONS.second },
  '15m': { spanMs: 900_000, stepMs: 15_000, resolution: RESOLUTIONS.second },
  '1h': { spanMs: 3_600_000, stepMs: 60_000, resolution: RESOLUTIONS.minute },
  '24h': { spanMs: 86_400_000, stepMs: 1_800_000, resolution: RESOLUTIONS.minute },
});

/** Bucket rows of a range folded into its points (every step present, empty ones as zeros). */
function points(range, rows, now) {
  const { spanMs, stepMs } = RANGES[range];
  const end = now - (now % stepMs) + stepMs;
  const first = end - spanMs;
  const out = [];
  for (let t = first; t < end; t += stepMs) out.push({ t, incoming: 0, allowed: 0, denied: 0, sum: 0 });
  for (const r of rows) {
    const i = Math.floor((Number(r.start) - first) / stepMs);
    if (i < 0 || i >= out.length) continue;
    out[i].incoming += Number(r.incoming);
    out[i].allowed += Number(r.allowed);
    out[i].denied += Number(r.denied);
    out[i].sum += Number(r.response_ms_sum);
  }
  return {
    first,
    points: out.map((p) => ({ timestamp: iso(p.t), incoming: p.incoming, allowed: p.allowed, denied: p.denied, averageResponseTimeMs: p.incoming ? Math.round((p.sum / p.incoming) * 1000) / 1000 : 0 })),
  };
}

module.exports = { RESOLUTIONS, PRUNE_ROWS, RANGES, policyOf, clientOf, policyColumns, freshState, banOf, entryOf, decideEntry, decideRow, refundRow, currentState, clientTotals, bucketTotals, activityOf, points, iso };

'use strict';
// Cluster mode while Redis itself is away, for real (a redis-server of its own, SIGSTOPped or
// SIGKILLed; the cluster-mode fixture's processes):
//   6. bans made while Redis is SIGKILLed, then while it is SIGSTOPped (as bans-outage.test.js): ban()
//      settles 'queued' within its bound, holds at once where it was made, and is shared when Redis is
//      back: with the other process, a process started afterwards, and the hash;
//   7. Redis SIGSTOPped (or SIGKILLed and restarted empty) for longer than storeDownMs while three
//      processes load an 'open' and a 'closed' tier: no spend waits past storeTimeoutMs (plus the
//      process's timer lateness), the open tier falls back within its documented share and the closed
//      one refuses, and the cluster is exact again once Redis is back.
// Used by ./cluster.js; each row judged against docs/cluster.md (./row.js).
const { spawnSync } = require('node:child_process');
const { performance } = require('node:perf_hooks');
const { redisServer } = require('../../__test__/helpers/redis');
const { startNode, startNodes } = require('../../__test__/helpers/cluster-nodes');
const { SETTLE_MS } = require('../../lib/cluster/bans');
const { judged, within, sleep } = require('./row');

/** An IPC call with no answer after this long counts as unanswered (and is not waited for). */
const UNANSWERED_MS = 10_000;
/** The margin a spend's wait, or ban()'s settling, gets over its bound on top of the process's timer
 * lateness (as in __test__/cluster/redis.test.js and bans-outage.test.js's fixture readings). */
const WAIT_MARGIN_MS = 100;
const HASH = 'tiergate:{bans}';

function haveRedis() {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0;
}

/** Whether `target` is in the bans hash of the Redis at `port` (redis-cli, outside the library). */
function stored(port, target) {
  const out = spawnSync('redis-cli', ['-p', String(port), '--no-raw', 'HGETALL', HASH], { encoding: 'utf8' }).stdout;
  return out.split('\n').some((line) => line.includes(`\\"target\\":\\"${target}\\"`) || line.includes(`"target":"${target}"`));
}

async function untilStored(port, target, ms = 10_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (stored(port, target)) return true;
    await sleep(50);
  }
  return false;
}

/** Polls `node` until `key` is refused 403 (up to `ms`): the Unix ms it was, or null. */
const enforced = (node, key, ms) => within(node.call('until403', { key, tier: 'paid', timeoutMs: ms }), ms + UNANSWERED_MS, null);

// 6 -------------------------------------------------------------------------------------------------

/** One ban made at `nodes[0]` while Redis is away by `fault` ('SIGKILL' or 'SIGSTOP'), then shared. */
async function banDuringOutage(redis, nodes, fault, extra) {
  const target = `chaos-${fault.toLowerCase()}`;
  if (fault === 'SIGKILL') await redis.kill('SIGKILL');
  else redis.proc.kill('SIGSTOP');
  let made;
  let here;
  try {
    made = await within(nodes[0].call('bans', { op: 'ban', target, durationMs: 600_000 }), UNANSWERED_MS, null);
    here = await enforced(nodes[0], target, 2000);
  } finally {
    if (fault === 'SIGKILL') await redis.start();
    else redis.proc.kill('SIGCONT');
  }
  const backAt = Date.now();
  // A process started afterwards (SIGKILL) loads it from the hash; one started before the fault
  // (SIGSTOP: the late process of the first round) hears it on the channel.
  if (fault === 'SIGKILL') {
    const late = startNode(extra.cfg);
    nodes.push(late);
    await late.ready;
  }
  const inHash = await untilStored(redis.port, target);
  const seen = await Promise.all(nodes.slice(1).map((n) => enforced(n, target, 10_000)));
  let queued = null;
  for (let i = 0; i < 100; i++) {
    queued = (await within(nodes[0].call('stats'), UNANSWERED_MS, { bans: { queued: null } })).bans.queued;
    if (queued === 0) break;
    await sleep(50);
  }
  const { timerLatenessMs } = await nodes[0].call('stats');
  const bound = SETTLE_MS + WAIT_MARGIN_MS + timerLatenessMs;
  const everywhere = [here, ...seen].filter((x) => x !== null).length;
  const sharedMs = Math.max(0, ...seen.filter((x) => x !== null).map((x) => x - backAt));
  return judged(`6 ban made while Redis is ${fault === 'SIGKILL' ? 'SIGKILLed (restarted empty)' : 'SIGSTOPped'}`, {
    admitted: `banned in ${everywhere} / ${nodes.length} processes`,
    maxWaitMs: made === null ? null : made.ms,
    unanswered: made === null ? 1 : 0,
    targets: [
      [made !== null && made.value === 'queued', `ban() resolves 'queued' (${made === null ? 'no answer' : made.value || made.error})`],
      [made !== null && made.ms <= bound, `ban() settles within ${SETTLE_MS} ms + ${WAIT_MARGIN_MS} + timer lateness ${timerLatenessMs} (${made === null ? '-' : made.ms} ms)`],
      [here !== null, 'enforced at once where it was made'],
      [inHash, 'in the hash once Redis is back'],
      [seen.every((x) => x !== null), `enforced by the other processes${fault === 'SIGKILL' ? ', one started after the restart included' : ''} (${seen.filter((x) => x !== null).length} of ${seen.length})`],
      [queued === 0, `nothing left queued (${queued})`],
    ],
    notes: `max wait: how long ban() took to settle; shared ${sharedMs} ms after Redis was back`,
  });
}

async function bansWhileRedisAway() {
  const redis = await redisServer();
  const cfg = { url: redis.url, cluster: { storeTimeoutMs: 200, limits: [{ name: 'unused', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] } };
  let nodes = [];
  try {
    nodes = await startNodes(2, cfg);
    const killed = await banDuringOutage(redis, nodes, 'SIGKILL', { cfg });
    const stopped = await banDuringOutage(redis, nodes, 'SIGSTOP', { cfg });
    return [killed, stopped];
  } finally {
    if (redis.proc) redis.proc.kill('SIGCONT');
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  }
}

// 7 -------------------------------------------------------------------------------------------------

const PROCESSES = 3;
const OUTAGE_LIMIT = 600;
const OUTAGE_STORE_TIMEOUT_MS = 200;
const TIER_NAMES = ['open', 'closed'];
// Small leases, so that an outage outlasts them; fixed windows of an hour, so that one window spans
// the run and the bound is a count (the load spends the limit before the fault: the fault then tests
// the share at its edge). A store's "empty until" is trusted for renewalPeriodMs: 200 ms, so that a
// key asks the stopped Redis, and takes it for down, early in the fault. minHolders = the processes:
// the safe share is limit / 3 each.
const perKey = { algorithm: 'fixed-window', limit: OUTAGE_LIMIT, windowMs: 3_600_000, maxLease: 10, renewalPeriodMs: 200, retryMs: 100 };
const OUTAGE_CLUSTER = {
  storeTimeoutMs: OUTAGE_STORE_TIMEOUT_MS,
  minHolders: PROCESSES,
  tiers: {
    open: { fallback: 'open', perKey },
    closed: { fallback: 'closed', perKey },
    exact: { fallback: 'closed', perKey: { algorithm: 'fixed-window', limit: 100, windowMs: 3_600_000, retryMs: 100 } },
  },
};

/**
 * The documented bound of a tier's admissions over one window that spans the outage (docs/cluster.md):
 * Redis-funded admissions <= the limit, once per Redis life (a restart comes back empty and grants it
 * again); fail-open adds the safe share, limit / minHolders per process, so the limit in all.
 */
const outageBound = (fault, fallback) => OUTAGE_LIMIT * ((fault === 'SIGKILL' ? 2 : 1) + (fallback === 'open' ? 1 : 0));

const statsOf = (nodes) => Promise.all(nodes.map((n) => within(n.call('stats'), UNANSWERED_MS, null)));
const lateAnswers = (stats) => stats.reduce((a, s) => a + (s ? s.timeouts + s.waitTimeouts : 0), 0);

async function redisOutage(fault, { smoke }) {
  const faultAtMs = 500;
  // Longer than renewalPeriodMs + storeDownMs (1000): a key asks the stopped Redis and takes it for
  // down with time left to spend the share.
  const faultMs = 2500;
  const loadMs = faultAtMs + faultMs + (smoke ? 1000 : 2000);
  const redis = await redisServer();
  const cfg = { url: redis.url, tiers: [...TIER_NAMES, 'exact'].map((name) => ({ name, limit: 1e9, windowMs: 1000 })), cluster: OUTAGE_CLUSTER };
  let nodes = [];
  let stopped = false;
  try {
    nodes = await startNodes(PROCESSES, cfg);
    const loads = nodes.flatMap((n) => TIER_NAMES.map((tier) => within(n.call('load', { ms: loadMs, concurrency: 4, max: 30_000, key: `k-${tier}`, tier }), loadMs + UNANSWERED_MS, null)));
    await sleep(faultAtMs);
    if (fault === 'SIGSTOP') {
      redis.proc.kill('SIGSTOP');
      stopped = true;
      await sleep(faultMs);
      redis.proc.kill('SIGCONT');
      stopped = false;
    } else {
      await redis.kill('SIGKILL');
      await sleep(faultMs);
      await redis.start();
    }
    // Back on leases everywhere. A process learns the store is up from its first grant, so each round
    // sends a request of each tier from each process (counted with the loads).
    const backAt = performance.now();
    const probed = { open: 0, closed: 0 };
    let up = false;
    while (!up && performance.now() - backAt < 10_000) {
      await sleep(10);
      await Promise.all(nodes.flatMap((n) => TIER_NAMES.map(async (tier) => {
        const r = await within(n.call('burst', { n: 1, key: `k-${tier}`, tier }), UNANSWERED_MS, { statuses: {} });
        probed[tier] += r.statuses[200] || 0;
      })));
      up = (await statsOf(nodes)).every((s) => s !== null && s.storeUp);
    }
    const recoveredMs = performance.now() - backAt;
    const results = await Promise.all(loads);
    const stats = await statsOf(nodes);
    // Exact again: a new key of limit 100, 3 x 100 at once.
    const lateBefore = lateAnswers(stats);
    const again = await Promise.all(nodes.map((n) => within(n.call('burst', { n: 100, key: 'k-after', tier: 'exact' }), UNANSWERED_MS, null)));
    const lateDuring = lateAnswers(await statsOf(nodes)) - lateBefore;

    const what = fault === 'SIGSTOP' ? `Redis SIGSTOPped ${faultMs} ms` : `Redis SIGKILLed, restarted empty after ${faultMs} ms`;
    const waitBound = (s) => OUTAGE_STORE_TIMEOUT_MS + WAIT_MARGIN_MS + s.timerLatenessMs;
    const waitsHeld = stats.every((s) => s !== null && s.maxWaitMs <= waitBound(s));
    const waitText = `no spend waits past storeTimeoutMs ${OUTAGE_STORE_TIMEOUT_MS} + ${WAIT_MARGIN_MS} + the process's timer lateness (${stats.map((s) => (s ? `${Math.round(s.maxWaitMs)} <= ${Math.round(waitBound(s))}` : 'no stats')).join(', ')})`;
    const maxWaitMs = Math.max(0, ...stats.map((s) => (s ? s.maxWaitMs : UNANSWERED_MS)));
    const decided = (kind) => stats.reduce((a, s) => a + (s ? s.decisions[kind] : 0), 0);
    const rows = TIER_NAMES.map((tier, i) => {
      const rs = results.filter((_, j) => j % TIER_NAMES.length === i);
      const answered = rs.filter((r) => r !== null);
      const count = (status) => answered.reduce((a, r) => a + (r.statuses[status] || 0), 0);
      const admitted = count(200) + probed[tier];
      const bound = outageBound(fault, tier);
      const unanswered = count(0) + (rs.length - answered.length);
      const targets = [
        [admitted <= bound, `admitted <= ${bound}: the limit per Redis life${tier === 'open' ? ' + the safe share (limit / minHolders per process)' : ''} (${admitted})`],
        tier === 'open'
          ? [count(503) === 0 && decided('fallback') > 0, `falls back: admits from the share, no 503 (${decided('fallback')} fallback admissions, ${count(503)} × 503)`]
          : [count(503) > 0 && decided('storeDown') > 0, `refuses with 503 once its leases are spent (${count(503)} × 503, ${decided('storeDown')} storeDown)`],
        [waitsHeld, waitText],
        [unanswered === 0, `every request answered (${unanswered})`],
      ];
      return judged(`7 ${what} mid-load, 3 processes, '${tier}' tier`, {
        admitted: `${admitted} / ${OUTAGE_LIMIT} (bound ${bound})`,
        maxWaitMs,
        unanswered,
        targets,
        notes: `statuses ${JSON.stringify(answered.reduce((m, r) => { for (const [k, v] of Object.entries(r.statuses)) m[k] = (m[k] || 0) + v; return m; }, {}))}; slowest HTTP answer ${Math.round(Math.max(0, ...answered.map((r) => r.maxMs)))} ms`,
      });
    });
    const answered = again.filter((r) => r !== null);
    const exact = answered.reduce((a, r) => a + (r.statuses[200] || 0), 0);
    const lost = (again.length - answered.length) * 100 + answered.reduce((a, r) => a + (r.statuses[0] || 0), 0);
    rows.push(judged(`7 ${what}: exact again once Redis is back`, {
      admitted: `${exact} / 100`,
      maxWaitMs: Math.max(0, ...answered.map((r) => r.maxMs)),
      unanswered: lost,
      targets: [
        [up && recoveredMs <= 1000, `every process back on leases within 1 s of Redis's return (retryMs 100): ${up ? `${Math.round(recoveredMs)} ms` : 'not within 10 s'}`],
        [exact <= 100, `never above the limit (${exact})`],
        [exact === 100 || lateDuring > 0, `exactly 100 unless a lease answer came after storeTimeoutMs (then short by leased tokens: docs' shortfall bound): ${exact}, ${lateDuring} late answers`],
        [lost === 0, `every request answered (${lost})`],
      ],
      notes: 'max wait: the slowest HTTP answer of the 3 x 100 burst',
    }));
    return rows;
  } finally {
    if (stopped) redis.proc.kill('SIGCONT');
    await Promise.all(nodes.map((n) => n.close()));
    await redis.stop();
  }
}

module.exports = { bansWhileRedisAway, redisOutage, haveRedis, WAIT_MARGIN_MS };

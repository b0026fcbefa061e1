'use strict';
// Open-loop HTTP load generator: requests leave on a fixed schedule (constant arrival rate) whether
// or not earlier ones have been answered, so a server that falls behind shows it as latency and
// failures instead of silently slowing the generator down (no coordinated omission: the generator
// never waits for a response before sending the next request). Latency is measured from the moment
// the request was actually sent; how late the generator itself was against its schedule (its own
// CPU starvation, not the server's doing) is reported apart as genLag. Timeouts count from the
// scheduled time.
//
// Bounded: `durationMs` of sending, at most `maxOutstanding` requests in flight (a request due while
// the limit is reached is not sent and counts as 'overflow'), each request times out after
// `timeoutMs`, and the run ends at most `drainMs` after the last send.
//
//   const r = await openLoop({ port, path: '/work', rate: 600, durationMs: 5000,
//                              mix: [{ tier: 'critical', weight: 0.1 }, ...] });
//   r.tiers.critical -> { sent, ok, successPct, p50, p99, steady: { fromMs, sent, ok, p50, p99, rejections },
//                         rejections: { 503: n, timeout: n, ... } }   (steady: requests due >= 1 s in)
//   r.timeline       -> [{ t, sent: {tier: n}, goodput: {tier: req/s}, rejected: {tier: n},
//                         maxLatencyMs: {tier: ms, by scheduled time}, genLagMs }]
const http = require('node:http');
const { performance } = require('node:perf_hooks');

const nowAbs = () => performance.timeOrigin + performance.now();

/** Small deterministic PRNG (mulberry32) so every configuration sees the same tier sequence. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The generator's tier sequence: a function that returns the index into `mix` of the next request,
 * drawn with the seeded PRNG in proportion to the weights (lib/ideal.js replays the same sequence).
 */
function tierPicker(mix, seed = 42) {
  const totalWeight = mix.reduce((s, m) => s + m.weight, 0);
  checkPositive('mix weights', totalWeight);
  const cumulative = [];
  let acc = 0;
  for (const m of mix) cumulative.push((acc += m.weight / totalWeight));
  const random = prng(seed);
  return () => {
    const r = random();
    let k = 0;
    while (k < cumulative.length - 1 && r >= cumulative[k]) k++;
    return k;
  };
}

/** Percentile (0..100) of an ascending sorted array, nearest-rank. */
function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

function checkPositive(name, v) {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError(`${name} must be a positive finite number`);
}

/**
 * Makes sure `agent` holds at least `connections` idle keep-alive sockets to host:port, by sending
 * enough concurrent requests to `path` to open the missing ones (at most `batch` at a time, so the
 * server's accept queue is never overrun). Models a proxy's warm upstream connection pool.
 */
async function warmPool(agent, { host = '127.0.0.1', port, path: reqPath = '/', headers = {}, connections, batch = 256 }) {
  const idle = () => Object.values(agent.freeSockets).reduce((n, list) => n + list.length, 0);
  const held = []; // responses held open (not consumed) so each request keeps its own socket
  for (let round = 0; round < 8 && idle() + held.length < connections; round++) {
    const need = Math.min(batch, connections - idle() - held.length);
    const got = await Promise.all(
      Array.from({ length: need }, () =>
        new Promise((resolve) => {
          const req = http.request({ host, port, path: reqPath, agent, headers }, (res) => resolve(res));
          req.setTimeout(5000, () => req.destroy());
          req.on('error', () => resolve(null));
          req.end();
        }),
      ),
    );
    for (const res of got) if (res) held.push(res);
  }
  // Release them all at once: every socket returns to the pool.
  await Promise.all(held.map((res) => new Promise((resolve) => {
    res.on('end', resolve);
    res.on('error', resolve);
    res.on('close', resolve);
    res.resume();
  })));
  await new Promise((r) => setImmediate(r));
  return idle();
}

/**
 * Requests sent against a deadline: each ends in its `onEnd(status, headers)` exactly once, with its
 * status and response headers, 'error:<code>', or 'timeout' at its deadline (no headers). The deadline covers the whole exchange, connect
 * included (req.setTimeout would not start before the socket connects, and a SYN dropped by a full
 * accept queue is retried only after 1 s); a sweep every min(50, timeoutMs / 4) ms enforces it.
 */
function deadlineRequests(timeoutMs) {
  const inflight = new Set();
  const expire = (req) => {
    req.settle('timeout');
    req.destroy();
  };
  const sweeper = setInterval(() => {
    const now = nowAbs();
    for (const req of inflight) if (req.deadline <= now) expire(req);
  }, Math.min(50, timeoutMs / 4));
  return {
    /** Sends `options` (http.request's) with `deadline` (absolute ms, the nowAbs() clock). */
    send(options, deadline, onEnd) {
      let settled = false;
      const settle = (status, headers) => {
        if (settled) return;
        settled = true;
        inflight.delete(req);
        onEnd(status, headers);
      };
      const req = http.request(options, (res) => {
        res.on('error', (err) => settle(`error:${err.code || err.message}`));
        res.on('end', () => settle(res.statusCode, res.headers));
        res.resume();
      });
      req.deadline = deadline;
      req.settle = settle;
      inflight.add(req);
      req.on('error', (err) => settle(`error:${err.code || err.message}`));
      req.end();
    },
    /** Ends what is still in flight after `ms` as timeouts; returns the timer. */
    expireAllAfter(ms) {
      return setTimeout(() => {
        for (const req of inflight) expire(req);
      }, ms);
    },
    stop() {
      clearInterval(sweeper);
    },
  };
}

/**
 * Runs one open-loop load. Options:
 *   host ('127.0.0.1'), port, path ('/'), method ('GET'),
 *   rate (req/s), durationMs, mix ([{ tier, weight, headers? }], default one tier 'all'),
 *   tierHeader ('x-user-tier'; set to null to send no tier header), headers (extra, all requests),
 *   maxOutstanding (4096), timeoutMs (2000), drainMs (timeoutMs + 500), bucketMs (100), seed (42),
 *   agent (an http.Agent; default a keep-alive agent with maxOutstanding sockets, destroyed at the end),
 *   warm ({ connections, path, headers }: open that many keep-alive connections before the clock starts),
 *   startAt (absolute ms, nowAbs() clock: when the schedule starts; default a few ms from now, after
 *   the warm-up: loads that follow one another without a gap), steadyFromMs (1000: what `steady` counts from),
 *   samples (false: true keeps every success's due time and latency in tiers[tier].samples).
 */
async function openLoop(opts) {
  const host = opts.host || '127.0.0.1';
  const { port } = opts;
  const reqPath = opts.path || '/';
  const method = opts.method || 'GET';
  const { rate, durationMs } = opts;
  checkPositive('rate', rate);
  checkPositive('durationMs', durationMs);
  const maxOutstanding = opts.maxOutstanding ?? 4096;
  const timeoutMs = opts.timeoutMs ?? 2000;
  const drainMs = opts.drainMs ?? timeoutMs + 500;
  const bucketMs = opts.bucketMs ?? 100;
  checkPositive('maxOutstanding', maxOutstanding);
  checkPositive('timeoutMs', timeoutMs);
  checkPositive('bucketMs', bucketMs);
  const tierHeader = opts.tierHeader === undefined ? 'x-user-tier' : opts.tierHeader;
  const mix = opts.mix && opts.mix.length ? opts.mix : [{ tier: 'all', weight: 1 }];
  const nextTier = tierPicker(mix, opts.seed ?? 42);
  const headersFor = mix.map((m) => {
    const h = { ...(opts.headers || {}), ...(m.headers || {}) };
    if (tierHeader && m.tier !== 'all') h[tierHeader] = m.tier;
    return h;
  });
  const ownAgent = !opts.agent;
  const agent = opts.agent || new http.Agent({ keepAlive: true, maxSockets: maxOutstanding, maxFreeSockets: maxOutstanding });

  if (opts.warm) await warmPool(agent, { host, port, ...opts.warm });
  const total = Math.max(1, Math.floor((rate * durationMs) / 1000));
  const nBuckets = Math.ceil((durationMs + drainMs) / bucketMs) + 1;
  const tiers = mix.map((m) => ({
    tier: m.tier,
    sent: 0,
    ok: 0,
    latencies: new Float64Array(total),
    okScheduledAt: new Float64Array(total), // of each latency: when it was due, ms after the start
    rejections: {},
    steadySent: 0,
    steadyRejections: {}, // of requests due >= steadyFromMs
    bSent: new Uint32Array(nBuckets),
    bOk: new Uint32Array(nBuckets),
    bRej: new Uint32Array(nBuckets),
    bMaxLat: new Float64Array(nBuckets),
  }));
  const bGenLag = new Float64Array(nBuckets);
  const genLags = new Float64Array(total);
  let genN = 0;
  let outstanding = 0;
  let lastOkAt = 0;
  let maxSeenOutstanding = 0;
  let issued = 0;
  let finished = 0;
  const requests = deadlineRequests(timeoutMs);

  const start = opts.startAt ?? nowAbs() + 5; // a few ms to set up
  const steadyFromMs = opts.steadyFromMs ?? 1000;
  const bucketOf = (t) => Math.min(nBuckets - 1, Math.max(0, Math.floor((t - start) / bucketMs)));

  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  let sending = true;
  const maybeDone = () => {
    if (!sending && finished === issued) resolveDone();
  };

  function reject(t, reason, at, scheduled) {
    t.rejections[reason] = (t.rejections[reason] || 0) + 1;
    t.bRej[bucketOf(at)]++;
    if (scheduled - start >= steadyFromMs) t.steadyRejections[reason] = (t.steadyRejections[reason] || 0) + 1;
  }

  function fire(tierIdx, scheduled, now) {
    const t = tiers[tierIdx];
    t.sent++;
    if (scheduled - start >= steadyFromMs) t.steadySent++;
    t.bSent[bucketOf(scheduled)]++;
    issued++;
    const lag = now - scheduled;
    genLags[genN++] = lag;
    const b = bucketOf(scheduled);
    if (lag > bGenLag[b]) bGenLag[b] = lag;
    if (outstanding >= maxOutstanding) {
      reject(t, 'overflow', now, scheduled);
      finished++;
      return;
    }
    outstanding++;
    if (outstanding > maxSeenOutstanding) maxSeenOutstanding = outstanding;
    requests.send({ host, port, path: reqPath, method, agent, headers: headersFor[tierIdx] }, scheduled + timeoutMs, (status) => {
      outstanding--;
      finished++;
      const end = nowAbs();
      if (status >= 200 && status < 300) {
        const latency = end - now;
        lastOkAt = end;
        t.okScheduledAt[t.ok] = scheduled - start;
        t.latencies[t.ok++] = latency;
        t.bOk[bucketOf(end)]++;
        const sb = bucketOf(scheduled);
        if (latency > t.bMaxLat[sb]) t.bMaxLat[sb] = latency;
      } else {
        reject(t, String(status), end, scheduled);
      }
      maybeDone();
    });
  }

  // The schedule: request i is due at start + i / rate. A 1 ms timer sends every due request.
  const interval = 1000 / rate;
  await new Promise((resolve) => {
    function tick() {
      const now = nowAbs();
      const due = Math.min(total, Math.floor((now - start) / interval) + 1);
      while (issued < due) fire(nextTier(), start + issued * interval, now);
      if (issued >= total) return resolve();
      setTimeout(tick, 1);
    }
    setTimeout(tick, Math.max(0, start - nowAbs()));
  });
  sending = false;
  const sendEnd = nowAbs();
  maybeDone();
  const drainTimer = requests.expireAllAfter(drainMs);
  await done;
  clearTimeout(drainTimer);
  requests.stop();
  if (ownAgent) agent.destroy();

  const results = {};
  let allSent = 0;
  let allOk = 0;
  const allLat = new Float64Array(tiers.reduce((n, t) => n + t.ok, 0));
  let allN = 0;
  for (const t of tiers) {
    const lat = t.latencies.slice(0, t.ok).sort();
    const steady = t.latencies.slice(0, t.ok).filter((_, i) => t.okScheduledAt[i] >= steadyFromMs).sort();
    allLat.set(lat, allN);
    allN += lat.length;
    const rejected = t.sent - t.ok;
    allSent += t.sent;
    allOk += t.ok;
    results[t.tier] = {
      sent: t.sent,
      ok: t.ok,
      rejected,
      successPct: t.sent ? (100 * t.ok) / t.sent : NaN,
      p50: percentile(lat, 50),
      p90: percentile(lat, 90),
      p99: percentile(lat, 99),
      max: lat.length ? lat[lat.length - 1] : NaN,
      // Successes of requests due at least `steadyFromMs` after the start: the tail once a controller
      // has settled, apart from the onset of the load.
      steady: { fromMs: steadyFromMs, sent: t.steadySent, ok: steady.length, p50: percentile(steady, 50), p99: percentile(steady, 99), rejections: t.steadyRejections },
      rejections: t.rejections,
      // opts.samples: every success's due time (ms after the start) and latency, in answer order.
      samples: opts.samples ? { dueMs: t.okScheduledAt.slice(0, t.ok), latencyMs: t.latencies.slice(0, t.ok) } : undefined,
    };
  }
  const lastBucket = bucketOf(nowAbs());
  const timeline = [];
  for (let b = 0; b <= lastBucket; b++) {
    const row = { t: (b * bucketMs) / 1000, sent: {}, goodput: {}, rejected: {}, maxLatencyMs: {}, genLagMs: bGenLag[b] };
    for (const t of tiers) {
      row.sent[t.tier] = t.bSent[b];
      row.maxLatencyMs[t.tier] = t.bMaxLat[b];
      row.goodput[t.tier] = (t.bOk[b] * 1000) / bucketMs;
      row.rejected[t.tier] = t.bRej[b];
    }
    timeline.push(row);
  }
  const gl = genLags.slice(0, genN).sort();
  return {
    start,
    sendEnd,
    end: nowAbs(),
    rate,
    durationMs,
    bucketMs,
    sent: allSent,
    ok: allOk,
    // 2xx answers per second, from the first send until the last answer (a server that drains a
    // backlog after the senders stop is not credited with a shorter window than it used).
    goodputPerSec: (allOk * 1000) / Math.max(durationMs, lastOkAt - start),
    maxOutstanding: maxSeenOutstanding,
    genLag: { p50: percentile(gl, 50), p99: percentile(gl, 99), max: gl.length ? gl[gl.length - 1] : NaN },
    latency: (() => {
      allLat.sort();
      return { p50: percentile(allLat, 50), p99: percentile(allLat, 99) }; // successes of every tier
    })(),
    tiers: results,
    timeline,
  };
}

/**
 * Closed-loop probe: `concurrency` clients each send the next request as soon as the previous one is
 * answered, for `durationMs` after `warmupMs`. Returns the sustained rate of 2xx answers (req/s) —
 * the server's capacity for this route.
 */
async function closedLoop({ host = '127.0.0.1', port, path: reqPath = '/', headers = {}, concurrency = 8, durationMs = 2000, warmupMs = 500 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const t0 = nowAbs();
  const measureFrom = t0 + warmupMs;
  const until = measureFrom + durationMs;
  let ok = 0;
  let other = 0;
  const latencies = [];
  function one() {
    return new Promise((resolve) => {
      const s = nowAbs();
      const req = http.request({ host, port, path: reqPath, agent, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve([res.statusCode, s, nowAbs()]));
        res.on('error', () => resolve([0, s, nowAbs()]));
      });
      req.setTimeout(10_000, () => req.destroy());
      req.on('error', () => resolve([0, s, nowAbs()]));
      req.end();
    });
  }
  async function client() {
    while (nowAbs() < until) {
      const [status, s, e] = await one();
      if (e < measureFrom || e > until) continue; // counted by completion time
      if (status >= 200 && status < 300) {
        ok++;
        latencies.push(e - s);
      } else other++;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { reqPerSec: (ok * 1000) / durationMs, ok, other, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

module.exports = { openLoop, closedLoop, warmPool, deadlineRequests, percentile, prng, tierPicker, nowAbs };

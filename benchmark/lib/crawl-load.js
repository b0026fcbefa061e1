'use strict';
// Plays a schedule of requests (crawl-traffic.js) against a server, open loop: each request leaves
// when it is due whether or not earlier ones were answered (as lib/openloop.js does, whose rules it
// follows: latency from the actual send, timeouts from the scheduled time, bounded in count, time
// and requests in flight). The generator plays a reverse proxy on loopback: every request goes over
// its pool of keep-alive connections and carries the client's address in X-Forwarded-For, which the
// server trusts for one hop (trustProxy: 1), so one host simulates thousands of client addresses.
//
//   const r = await playSchedule({ port, events, classes, timeoutMs: 2000 });
//   r.classes[i] -> { name, sent, ok, statuses: { '429': n, timeout: n }, latencies (ms, sorted),
//                     okAt: [{ scheduled, latency }] }
//   r.timeline   -> [{ t (s), goodput: { name: req/s }, sent: { name: n }, refused: { name: n } }]
const http = require('node:http');
const { nowAbs, percentile, deadlineRequests } = require('./openloop');

async function playSchedule({ host = '127.0.0.1', port, events, classes, timeoutMs = 2000, maxOutstanding = 4096, bucketMs = 250, agent: given, headers: extra = {}, stamp = false }) {
  const agent = given || new http.Agent({ keepAlive: true, maxSockets: 512, maxFreeSockets: 512 });
  const durationMs = events.length ? events[events.length - 1].t : 0;
  const nBuckets = Math.ceil((durationMs + timeoutMs + 500) / bucketMs) + 1;
  const per = classes.map((name) => ({
    name,
    sent: 0,
    ok: 0,
    statuses: {},
    okScheduled: [],
    okLatency: [],
    bOk: new Uint32Array(nBuckets),
    bSent: new Uint32Array(nBuckets),
    bRefused: new Uint32Array(nBuckets),
  }));
  const genLags = [];
  const requests = deadlineRequests(timeoutMs);
  let outstanding = 0;
  let issued = 0;
  let finished = 0;
  let sending = true;
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const maybeDone = () => {
    if (!sending && finished === issued) resolveDone();
  };
  const start = nowAbs() + 5;
  const bucketOf = (t) => Math.min(nBuckets - 1, Math.max(0, Math.floor((t - start) / bucketMs)));

  function fire(ev, now) {
    const c = per[ev.cls];
    const scheduled = start + ev.t;
    c.sent++;
    c.bSent[bucketOf(scheduled)]++;
    issued++;
    genLags.push(now - scheduled);
    if (outstanding >= maxOutstanding) {
      c.statuses.overflow = (c.statuses.overflow || 0) + 1;
      finished++;
      return;
    }
    outstanding++;
    requests.send({ host, port, path: ev.path, agent, headers: stamp ? { ...extra, 'x-forwarded-for': ev.ip, 'x-bench-sched': scheduled.toFixed(1), 'x-bench-sent': now.toFixed(1) } : { ...extra, 'x-forwarded-for': ev.ip } }, scheduled + timeoutMs, (status) => {
      outstanding--;
      finished++;
      const end = nowAbs();
      if (status >= 200 && status < 300) {
        c.ok++;
        c.okScheduled.push(ev.t);
        c.okLatency.push(end - now);
        c.bOk[bucketOf(end)]++;
      } else {
        c.statuses[status] = (c.statuses[status] || 0) + 1;
        c.bRefused[bucketOf(end)]++;
      }
      maybeDone();
    });
  }

  await new Promise((resolve) => {
    function tick() {
      const now = nowAbs();
      while (issued < events.length && start + events[issued].t <= now) fire(events[issued], now);
      if (issued >= events.length) return resolve();
      setTimeout(tick, 1);
    }
    setTimeout(tick, Math.max(0, start - nowAbs()));
  });
  sending = false;
  maybeDone();
  const drain = requests.expireAllAfter(timeoutMs + 500);
  await done;
  clearTimeout(drain);
  requests.stop();
  if (!given) agent.destroy();

  const lastBucket = bucketOf(nowAbs());
  const timeline = [];
  for (let b = 0; b <= lastBucket; b++) {
    const row = { t: (b * bucketMs) / 1000, goodput: {}, sent: {}, refused: {} };
    for (const c of per) {
      row.goodput[c.name] = (c.bOk[b] * 1000) / bucketMs;
      row.sent[c.name] = c.bSent[b];
      row.refused[c.name] = c.bRefused[b];
    }
    timeline.push(row);
  }
  genLags.sort((a, b) => a - b);
  return {
    start,
    bucketMs,
    genLag: { p50: percentile(genLags, 50), p99: percentile(genLags, 99), max: genLags.length ? genLags[genLags.length - 1] : NaN },
    classes: per.map((c) => ({ name: c.name, sent: c.sent, ok: c.ok, statuses: c.statuses, okScheduled: c.okScheduled, okLatency: c.okLatency })),
    timeline,
  };
}

/**
 * One class's figures over requests scheduled in [fromMs, toMs): sent, served (2xx), share served,
 * p50/p99 latency of the served. `sentIn` counts from the schedule itself.
 */
function classWindow(events, cls, result, fromMs, toMs) {
  let sent = 0;
  for (const ev of events) if (ev.cls === cls && ev.t >= fromMs && ev.t < toMs) sent++;
  const c = result.classes[cls];
  const lat = [];
  for (let i = 0; i < c.okScheduled.length; i++) if (c.okScheduled[i] >= fromMs && c.okScheduled[i] < toMs) lat.push(c.okLatency[i]);
  lat.sort((a, b) => a - b);
  return { sent, ok: lat.length, servedPct: sent ? (100 * lat.length) / sent : NaN, p50: percentile(lat, 50), p99: percentile(lat, 99), perSec: (lat.length * 1000) / Math.max(1, toMs - fromMs) };
}

module.exports = { playSchedule, classWindow };

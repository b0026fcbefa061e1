'use strict';
// Closed-loop load of rate-limit checks: `connections` callers (spread over worker threads), each
// sending its next check as soon as the previous one is answered, for `durationMs`; a share `hotShare`
// of checks goes to one hot client, the rest to `coldKeys` others drawn at random. Bounded: every
// request times out after `timeoutMs`, and the run stops sending at `durationMs`.
//
//   const r = await checkLoad({ urls, connections: 550, durationMs: 5000, hotShare: 0.5, coldKeys: 10000 });
//   r -> { total, perSec, hot: { sent, allowed, denied, perSec }, errors, p50, p99 }   (latency in ms)
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');

const CHECK = '/api/v1/rate-limit/check';

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function generate({ urls, connections, durationMs, hotShare, coldKeys, timeoutMs, seed }) {
  const targets = urls.map((u) => new URL(u));
  const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: Math.ceil(connections / targets.length) }));
  let state = seed >>> 0 || 1;
  const rand = () => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) / 4294967296; };
  const out = { total: 0, errors: 0, hot: { sent: 0, allowed: 0, denied: 0 }, latencies: [] };
  const end = Date.now() + durationMs;
  const one = (i) => new Promise((resolve) => {
    const t = i % targets.length;
    const hot = rand() < hotShare;
    const key = hot ? 'hot' : `cold-${Math.floor(rand() * coldKeys)}`;
    const body = `{"clientKey":"${key}"}`;
    const started = process.hrtime.bigint();
    const req = http.request({ host: targets[t].hostname, port: targets[t].port, path: CHECK, method: 'POST', agent: agents[t], timeout: timeoutMs,
      headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      res.resume();
      res.on('end', () => {
        out.total++;
        out.latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        if (res.statusCode !== 200 && res.statusCode !== 429) out.errors++;
        if (hot) {
          out.hot.sent++;
          if (res.statusCode === 200) out.hot.allowed++;
          else if (res.statusCode === 429) out.hot.denied++;
        }
        resolve();
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => { out.errors++; resolve(); });
    req.end(body);
  });
  await Promise.all(Array.from({ length: connections }, async (_, i) => {
    while (Date.now() < end) await one(i);
  }));
  for (const a of agents) a.destroy();
  return out;
}

if (!isMainThread) {
  generate(workerData).then((r) => parentPort.postMessage(r));
}

/** Runs the load over `threads` worker threads and merges their counts. */
async function checkLoad({ urls, connections = 550, durationMs = 5000, hotShare = 0.5, coldKeys = 10_000, timeoutMs = 10_000, threads = 2 }) {
  const started = Date.now();
  const parts = await Promise.all(Array.from({ length: threads }, (_, i) => new Promise((resolve, reject) => {
    const w = new Worker(__filename, { workerData: { urls, connections: Math.ceil(connections / threads), durationMs, hotShare, coldKeys, timeoutMs, seed: 0x9e3779b9 + i } });
    w.once('message', resolve);
    w.once('error', reject);
  })));
  const seconds = (Date.now() - started) / 1000;
  const latencies = parts.flatMap((p) => p.latencies).sort((a, b) => a - b);
  const sum = (f) => parts.reduce((n, p) => n + f(p), 0);
  const hot = { sent: sum((p) => p.hot.sent), allowed: sum((p) => p.hot.allowed), denied: sum((p) => p.hot.denied) };
  return {
    seconds,
    total: sum((p) => p.total),
    perSec: sum((p) => p.total) / seconds,
    errors: sum((p) => p.errors),
    hot: { ...hot, perSec: hot.sent / seconds },
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

module.exports = { checkLoad };

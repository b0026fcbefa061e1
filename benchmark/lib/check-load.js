'use strict';
// Closed-loop load of rate-limit checks: `connections` kept-alive connections, each sending its next
// check as soon as the previous one is answered, for `durationMs`; a share `hotShare` of checks goes
// to one hot client, the rest to `coldKeys` others drawn at random. Bounded: a request unanswered
// after `timeoutMs` is an error (its connection is replaced), and no check is sent after the
// warm-up and `durationMs`.
// The load runs `warmupMs` first, not measured: a generator process is new for every run, and its
// first few hundred ms (its code not yet compiled, every connection sending at once) are slow
// against a trivial server too; counted, they were most of the checks above the p99.
//
// The generator runs in its own process(es) and speaks HTTP/1.1 over plain sockets (requests are
// byte strings, answers are read for their status and Content-Length only): node's http client
// costs several times what a server's answer does, and with it the generator, not the server, was
// the bottleneck. Against a trivial node:http server it is not: a second generator process
// (`node benchmark/service-load.js --ceiling --processes 2`) gets no more answers from it.
//
//   const r = await checkLoad({ urls, connections: 550, durationMs: 5000, warmupMs: 1000, hotShare: 0.5, coldKeys: 10000 });
//   r -> { seconds, startedAtMs, endedAtMs, total, perSec, hot: { sent, allowed, denied, perSec }, errors, p50, p99, hotP99, otherP99 }
// (latency in ms). perSec and hot.perSec count the answers that arrived within durationMs after the
// warm-up, the latencies those of the checks sent then; the counts (hot.allowed too, which is compared
// with the limit from startedAtMs) and errors take every answer, the warm-up's too.
const net = require('node:net');
const { fork } = require('node:child_process');
const { performance } = require('node:perf_hooks');

const CHECK = '/api/v1/rate-limit/check';
const HEAD_END = Buffer.from('\r\n\r\n');

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function requestBytes(host, key) {
  const body = `{"clientKey":"${key}"}`;
  return Buffer.from(`POST ${CHECK} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
}

/** Status and total length of the first answer in `buf`, or null while it is incomplete. */
function parseAnswer(buf) {
  const end = buf.indexOf(HEAD_END);
  if (end < 0) return null;
  const head = buf.latin1Slice(0, end);
  const status = Number(head.slice(9, 12));
  const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (!m) return { status, length: -1 }; // chunked or unframed: not something this service sends
  const length = end + 4 + Number(m[1]);
  return buf.length >= length ? { status, length, close: /\r\nconnection:\s*close/i.test(head) } : null;
}

/** One process's share of the load. */
function generate({ urls, connections, durationMs, warmupMs, hotShare, coldKeys, timeoutMs, seed, startAt }) {
  const targets = urls.map((u) => new URL(u));
  let state = seed >>> 0 || 1;
  const rand = () => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) / 4294967296; };
  const hotReq = targets.map((t) => requestBytes(t.host, 'hot'));
  // Cold requests are built once per key and target: building them per request costs the generator.
  const coldReq = targets.map((t) => Array.from({ length: coldKeys }, (_, i) => requestBytes(t.host, `cold-${i}`)));
  const out = { total: 0, inWindow: 0, errors: 0, hot: { sent: 0, inWindow: 0, allowed: 0, denied: 0 }, endedAtMs: 0 };
  let lat = new Float64Array(1 << 16);
  let nLat = 0;
  const t0 = performance.now() + Math.max(0, startAt - Date.now());
  const measured = t0 + warmupMs;
  const end = measured + durationMs;
  let open = 0;

  return new Promise((resolve) => {
    const conns = [];
    const finish = () => {
      clearInterval(watchdog);
      out.endedAtMs = Date.now();
      resolve({ ...out, latencies: lat.subarray(0, nLat) });
    };
    function connect(i) {
      const t = i % targets.length;
      const c = { i, t, sock: null, buf: null, sentAt: 0, hot: false, busy: false };
      conns[i] = c;
      open++;
      const sock = net.connect({ host: targets[t].hostname, port: Number(targets[t].port), noDelay: true });
      c.sock = sock;
      sock.on('connect', () => send(c));
      sock.on('data', (d) => onData(c, d));
      sock.on('error', () => { if (!c.busy) out.errors++; }); // a refused connection (busy ones count on close)
      sock.on('close', () => {
        open--;
        if (c.busy) { c.busy = false; out.errors++; }
        if (conns[i] === c && performance.now() < end) connect(i);
        else if (open === 0) finish();
      });
    }
    function send(c) {
      const now = performance.now();
      if (now < t0) { setTimeout(() => send(c), t0 - now); return; }
      if (now >= end) { c.sock.end(); return; }
      c.hot = rand() < hotShare;
      c.busy = true;
      c.sentAt = performance.now();
      c.sock.write(c.hot ? hotReq[c.t] : coldReq[c.t][Math.floor(rand() * coldKeys)]);
    }
    function onData(c, d) {
      c.buf = c.buf ? Buffer.concat([c.buf, d]) : d;
      const a = parseAnswer(c.buf);
      if (!a) return;
      const now = performance.now();
      if (a.length < 0 || !c.busy) { out.errors++; c.busy = false; c.sock.destroy(); return; }
      c.buf = c.buf.length > a.length ? c.buf.subarray(a.length) : null;
      c.busy = false;
      out.total++;
      const inWindow = now >= measured && now <= end;
      if (inWindow) out.inWindow++;
      if (c.sentAt >= measured) {
        if (nLat === lat.length) { const next = new Float64Array(lat.length * 2); next.set(lat); lat = next; }
        lat[nLat++] = c.hot ? -(now - c.sentAt) : now - c.sentAt; // the hot client's negated: split on merge
      }
      if (a.status !== 200 && a.status !== 429) out.errors++;
      if (c.hot) {
        out.hot.sent++;
        if (inWindow) out.hot.inWindow++;
        if (a.status === 200) out.hot.allowed++;
        else if (a.status === 429) out.hot.denied++;
      }
      if (a.close) c.sock.end(); // the close handler reconnects
      else send(c);
    }
    const watchdog = setInterval(() => {
      const now = performance.now();
      for (const c of conns) if (c.busy && now - c.sentAt > timeoutMs) c.sock.destroy();
    }, 100);
    for (let i = 0; i < connections; i++) connect(i);
  });
}

if (require.main === module && process.send) {
  process.once('message', (job) => {
    generate(job).then((r) => {
      // Latencies travel as a binary buffer (an IPC message of 100k numbers as JSON is slow).
      const { latencies, ...counts } = r;
      process.send({ counts, latencies: Buffer.from(latencies.buffer, latencies.byteOffset, latencies.byteLength).toString('base64') }, () => process.exit(0));
    });
  });
}

/** Runs the load over `processes` generator processes and merges their counts. */
async function checkLoad({ urls, connections = 550, durationMs = 5000, warmupMs = 1000, hotShare = 0.5, coldKeys = 10_000, timeoutMs = 10_000, processes = 1 }) {
  // Every process starts its clock at one instant, after all have connected and built their requests.
  const startAt = Date.now() + 300 + 100 * processes;
  const parts = await Promise.all(Array.from({ length: processes }, (_, i) => new Promise((resolve, reject) => {
    const child = fork(__filename, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const share = Math.floor(connections / processes) + (i < connections % processes ? 1 : 0);
    child.send({ urls, connections: share, durationMs, warmupMs, hotShare, coldKeys, timeoutMs, seed: 0x9e3779b9 + i, startAt });
    child.once('message', (m) => {
      const b = Buffer.from(m.latencies, 'base64');
      resolve({ ...m.counts, latencies: new Float64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)) });
    });
    child.once('exit', (code) => { if (code !== 0) reject(new Error(`load generator exited ${code}`)); });
  })));
  const all = new Float64Array(parts.reduce((n, p) => n + p.latencies.length, 0));
  let o = 0;
  for (const p of parts) { all.set(p.latencies, o); o += p.latencies.length; }
  const hotLat = all.filter((x) => x < 0).map((x) => -x).sort(); // the hot client's are negated
  const otherLat = all.filter((x) => x >= 0).sort();
  for (let i = 0; i < all.length; i++) all[i] = Math.abs(all[i]);
  all.sort();
  const sum = (f) => parts.reduce((n, p) => n + f(p), 0);
  const seconds = durationMs / 1000;
  const hot = { sent: sum((p) => p.hot.sent), allowed: sum((p) => p.hot.allowed), denied: sum((p) => p.hot.denied) };
  return {
    seconds,
    // No check was sent before startedAtMs; every answer came by endedAtMs (for the limit's bound).
    startedAtMs: startAt,
    endedAtMs: Math.max(...parts.map((p) => p.endedAtMs)),
    total: sum((p) => p.total),
    perSec: sum((p) => p.inWindow) / seconds,
    errors: sum((p) => p.errors),
    hot: { ...hot, perSec: sum((p) => p.hot.inWindow) / seconds },
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    // Where the tail is: the hot client's checks wait for its batch at the store, the others' do not.
    hotP99: percentile(hotLat, 99),
    otherP99: percentile(otherLat, 99),
  };
}

module.exports = { checkLoad };

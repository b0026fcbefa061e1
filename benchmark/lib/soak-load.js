'use strict';
// The soak's load mix, run by benchmark/soak.js against the server of soak-server.js on 127.0.0.1.
// Every client is a loop bounded in count (`maxOps`) and time (the run's deadline), and every single
// operation has a hard timeout; `stopAll()` destroys whatever is still open when the run ends.
//
//   normal      keep-alive clients across tiers (x-user-tier) and routes (/checkout, /reports);
//               extra clients join during surges, which overload the server (sheds, queueing, 408s)
//   disconnect  requests abandoned right after sending, after a random delay (in the queue or in the
//               handler), on the response's headers, and bursts that fill the gate and then all leave
//   pipeline    raw sockets with several requests written at once, then read, reset, half-closed or
//               destroyed
//   slowloris   request headers dribbled byte by byte (some never finish)
//   slowbody    uploads sent in slow chunks (some stop halfway)
//   slowread    large responses read slowly (some readers stall, then leave)
//   flood       pipelined requests each with a new x-api-key value (per-key quotas of a protected and
//               an unprotected tier), some keys hot
//   malformed   broken HTTP and valid-but-hostile header values, one connection each
const http = require('node:http');
const net = require('node:net');
const { setTimeout: sleep } = require('node:timers/promises');
const { performance } = require('node:perf_hooks');
const { prng } = require('./openloop');

const HOST = '127.0.0.1';
/** The longest any one operation may take before the client gives up on it (ms). */
const OP_TIMEOUT_MS = 25_000;
const TIERS = ['critical', 'standard', 'background'];

/** A small seeded PRNG (mulberry32), so a run's mix can be repeated. */
function rng(seed) {
  const next = prng(seed);
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (list) => list[Math.floor(next() * list.length)],
    /** entries: [[weight, value], ...] */
    weighted(entries) {
      let total = 0;
      for (const [w] of entries) total += w;
      let x = next() * total;
      for (const [w, v] of entries) if ((x -= w) < 0) return v;
      return entries[entries.length - 1][1];
    },
  };
}

/** The outcome of an HTTP status, as the report counts it. */
function statusOutcome(status) {
  if (status >= 200 && status < 300) return '2xx';
  if ([400, 403, 404, 408, 413, 429, 431, 500, 503].includes(status)) return String(status);
  return 'other';
}

/** Client-side errors that mean "the server (or the kernel for it) closed the connection". */
const RESET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** Finds status lines in a stream of HTTP/1.1 responses (our bodies never contain one). */
function statusScanner(onStatus) {
  let tail = '';
  const re = /HTTP\/1\.1 (\d{3}) /g;
  return (chunk) => {
    const s = tail + chunk.toString('latin1');
    re.lastIndex = 0;
    let m;
    let end = 0;
    while ((m = re.exec(s)) !== null) {
      onStatus(Number(m[1]));
      end = re.lastIndex;
    }
    tail = s.slice(Math.max(end, s.length - 15));
  };
}

/**
 * The load: `ctx` = { port, durationMs, seed, floodRate, surge: { periodMs, lengthMs } }.
 * `run()` resolves when every loop has ended; `counts` holds kind -> outcome -> n.
 */
function createLoad(ctx) {
  const r = rng(ctx.seed);
  const t0 = performance.now();
  const deadline = t0 + ctx.durationMs;
  const counts = Object.create(null);
  const unexpected = []; // generator-side errors that are not resets (kept, bounded)
  let unexpectedCount = 0;
  const sockets = new Set();
  let stopping = false;
  let keysSent = 0;
  let floodKeySeq = 0;
  const runId = (ctx.seed >>> 0).toString(36);

  const elapsed = () => performance.now() - t0;
  const timeLeft = () => !stopping && performance.now() < deadline;
  const inSurge = () => {
    const { periodMs, lengthMs } = ctx.surge;
    return elapsed() % periodMs >= periodMs - lengthMs;
  };
  const CUT = new Set(['reset', 'aborted', 'timeout', 'error']);
  function record(kind, outcome, n = 1) {
    if (stopping && CUT.has(outcome)) outcome = 'cut'; // open when the run ended: stopAll() cut it
    const k = counts[kind] || (counts[kind] = Object.create(null));
    k[outcome] = (k[outcome] || 0) + n;
  }
  function errorOutcome(kind, err) {
    if (stopping) return record(kind, 'cut');
    if (err && RESET_CODES.has(err.code)) return record(kind, 'reset');
    if (err && err.code === 'ECONNREFUSED') return record(kind, 'refused');
    unexpectedCount++;
    if (unexpected.length < 20) unexpected.push(`${kind}: ${err && (err.code || err.message)}`);
    record(kind, 'error');
  }
  function track(socket) {
    if (sockets.has(socket)) return socket; // a keep-alive socket, reused
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    return socket;
  }
  // A loop of `body()` calls while the run lasts, at most `maxOps` times.
  async function loop(maxOps, body) {
    for (let i = 0; i < maxOps && timeLeft(); i++) await body(i);
  }
  const opsFor = (perSec) => Math.ceil((ctx.durationMs / 1000) * perSec);

  // ---- node's http client: one request, its outcome recorded; `abort(req, res)` may end it early ----
  function request(kind, agent, { method = 'GET', path, headers = {}, abortAfterMs, abortOn }) {
    return new Promise((resolve) => {
      let settled = false;
      let aborter;
      const settle = () => {
        if (settled) return false;
        settled = true;
        clearTimeout(guard);
        clearTimeout(aborter);
        return true;
      };
      const done = (outcome) => {
        if (!settle()) return;
        record(kind, outcome);
        resolve(outcome);
      };
      const fail = (err) => {
        if (!settle()) return;
        errorOutcome(kind, err);
        resolve('error');
      };
      const req = http.request({ host: HOST, port: ctx.port, method, path, headers, agent });
      req.on('socket', (s) => track(s));
      const abort = () => {
        if (settled) return;
        done('aborted');
        req.destroy();
      };
      req.on('response', (res) => {
        if (abortOn === 'headers') return abort();
        res.on('data', () => {});
        res.on('end', () => done(statusOutcome(res.statusCode)));
        res.on('error', fail); // the server went mid-body (ECONNRESET: a reset)
      });
      req.on('error', fail);
      const guard = setTimeout(() => {
        done('timeout');
        req.destroy();
      }, OP_TIMEOUT_MS);
      if (abortOn === 'flushed') req.on('finish', () => setImmediate(abort));
      if (abortAfterMs !== undefined) aborter = setTimeout(abort, abortAfterMs);
      req.end();
    });
  }

  // ---- normal keep-alive clients ----
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  function normalRequest() {
    const surge = inSurge();
    const cpu = surge ? 2 : 1;
    const wait = r.int(0, 30);
    return r.weighted([
      [10, { path: `/work?cpu=${cpu}&wait=${wait}`, headers: { 'x-user-tier': 'critical' } }],
      [30, { path: `/work?cpu=${cpu}&wait=${wait}`, headers: { 'x-user-tier': 'standard' } }],
      [40, { path: `/work?cpu=${cpu}&wait=${wait}`, headers: { 'x-user-tier': 'background' } }],
      [8, { path: `/checkout/item${r.int(1, 99)}?cpu=${cpu}&wait=${wait}` }], // critical by route
      [6, { path: `/reports/r${r.int(1, 9)}?cpu=${cpu}&wait=${wait}`, headers: { 'x-user-tier': 'critical' } }], // the route wins
      [3, { path: '/hello', headers: { 'x-user-tier': r.pick(TIERS) } }],
      [1, { path: '/fail', headers: { 'x-user-tier': 'standard' } }],
      [1, { path: '/fail-async', headers: { 'x-user-tier': 'standard' } }],
      [1, { path: '/nowhere', headers: { 'x-user-tier': 'background' } }],
    ]);
  }
  function normalClient(surgeOnly) {
    return loop(opsFor(400), async () => {
      if (surgeOnly && !inSurge()) return sleep(100);
      await request(surgeOnly ? 'surge' : 'normal', agent, normalRequest());
      if (!inSurge()) await sleep(r.int(10, 60));
    });
  }

  // ---- clients that leave ----
  function disconnectClient() {
    return loop(opsFor(50), async () => {
      const tier = r.pick(TIERS);
      const mode = r.weighted([[3, 'flushed'], [4, 'delay'], [2, 'headers'], [1, 'burst']]);
      if (mode === 'flushed') {
        await request('disconnect', false, { path: `/work?wait=${r.int(0, 50)}`, headers: { 'x-user-tier': tier }, abortOn: 'flushed' });
      } else if (mode === 'delay') {
        await request('disconnect', false, { path: `/slow?ms=${r.int(50, 400)}`, headers: { 'x-user-tier': tier }, abortAfterMs: r.int(0, 400) });
      } else if (mode === 'headers') {
        await request('disconnect', false, { path: '/big?kb=1024', headers: { 'x-user-tier': tier }, abortOn: 'headers' });
      } else {
        // Enough slow requests to fill every slot and queue the rest, then they all go at once.
        const leaveAt = r.int(100, 600);
        const burst = [];
        for (let i = 0; i < 24; i++) {
          burst.push(request('disconnect', false, { path: '/slow?ms=800', headers: { 'x-user-tier': 'background' }, abortAfterMs: leaveAt }));
        }
        await Promise.all(burst);
      }
      await sleep(r.int(10, 100));
    });
  }

  // ---- raw sockets: connect, run `drive(socket, finish, refresh)` until it closes or times out ----
  function rawSocket(kind, drive) {
    return new Promise((resolve) => {
      const socket = track(net.connect({ host: HOST, port: ctx.port }));
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(guard);
        socket.destroy();
        resolve();
      };
      const guard = setTimeout(() => {
        record(kind, 'timeout');
        finish();
      }, OP_TIMEOUT_MS);
      // A reset shows as 'close' too, where each client counts what it did not get; anything else is
      // the generator's own error.
      socket.on('error', (err) => {
        if (!finished && !socket.soakAborted && !RESET_CODES.has(err.code)) errorOutcome(kind, err);
      });
      socket.on('close', finish);
      // `refresh()` restarts the timeout: a keep-alive client's operation is one exchange, not the socket's life.
      socket.once('connect', () => drive(socket, finish, () => guard.refresh()));
    });
  }

  // ---- pipelined requests, then the connection is read to the end, reset, half-closed or destroyed ----
  function pipelineRequests(n) {
    let out = '';
    for (let i = 0; i < n; i++) {
      const tier = r.pick(TIERS);
      out += r.weighted([
        [3, `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${tier}\r\n\r\n`],
        [3, `GET /work?wait=${r.int(0, 20)} HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${tier}\r\n\r\n`],
        [2, `GET /slow?ms=${r.int(10, 100)} HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${tier}\r\n\r\n`],
        [1, `HEAD /hello HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`],
        [2, `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nx-api-key: pipe-${r.int(1, 500)}\r\n\r\n`],
        [1, `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${tier}\r\nContent-Length: 5\r\n\r\nhello`],
      ]);
    }
    return out;
  }
  function pipelineClient() {
    return loop(opsFor(30), async () => {
      const n = r.int(2, 20);
      const action = r.weighted([[3, 'complete'], [3, 'reset'], [2, 'half-close'], [2, 'destroy']]);
      let got = 0;
      await rawSocket('pipeline', (socket, finish) => {
        const scan = statusScanner((status) => {
          got++;
          record('pipeline', statusOutcome(status));
          if (action === 'complete' && got === n) socket.end();
        });
        socket.on('data', scan);
        socket.on('close', () => {
          if (got < n) record('pipeline', action === 'complete' ? 'reset' : 'aborted', n - got);
        });
        socket.write(pipelineRequests(n));
        if (action === 'half-close') socket.end();
        else if (action === 'reset' || action === 'destroy') {
          setTimeout(() => {
            socket.soakAborted = true;
            if (action === 'reset') socket.resetAndDestroy();
            else socket.destroy();
            finish();
          }, r.int(0, 120));
        }
      });
      await sleep(r.int(5, 50));
    });
  }

  // ---- slowloris: headers byte by byte; some never finish them ----
  function slowlorisClient() {
    return loop(opsFor(5), async () => {
      const delay = r.weighted([[3, 5], [3, 30], [2, 150]]);
      const endless = r.next() < 0.2;
      const text = `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${r.pick(TIERS)}\r\nUser-Agent: slow\r\n` + (endless ? '' : '\r\n');
      await rawSocket('slowloris', (socket) => {
        let responded = false;
        socket.on('data', statusScanner((status) => {
          responded = true;
          record('slowloris', statusOutcome(status));
          socket.end();
        }));
        socket.on('close', () => {
          if (!responded) record('slowloris', 'reset');
        });
        let i = 0;
        const drip = () => {
          if (socket.destroyed || responded) return;
          if (i < text.length) socket.write(text[i++]);
          else if (endless) socket.write(`X-${i++ % 10}: y\r\n`); // headers without end, until the server gives up
          else return;
          setTimeout(drip, delay);
        };
        drip();
      });
    });
  }

  // ---- slow uploads: the body in small chunks; some stop halfway ----
  function slowBodyClient() {
    return loop(opsFor(5), async () => {
      const len = 8192;
      const step = 256;
      const delay = r.weighted([[3, 10], [3, 50], [1, 400]]);
      const stopAt = r.next() < 0.2 ? len / 2 : len;
      await rawSocket('slowbody', (socket) => {
        let responded = false;
        socket.on('data', statusScanner((status) => {
          responded = true;
          record('slowbody', statusOutcome(status));
          socket.end();
        }));
        socket.on('close', () => {
          if (!responded) record('slowbody', 'reset');
        });
        socket.write(`POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${r.pick(TIERS)}\r\nContent-Length: ${len}\r\nConnection: close\r\n\r\n`);
        let sent = 0;
        const drip = () => {
          if (socket.destroyed || responded || sent >= stopAt) return;
          socket.write(Buffer.alloc(step, 0x62));
          sent += step;
          setTimeout(drip, delay);
        };
        drip();
      });
    });
  }

  // ---- slow readers: a large response read in small sips; some stall, then leave ----
  function slowReadClient() {
    return loop(opsFor(5), async () => {
      const kb = r.int(1024, 4096);
      const sipMs = r.int(10, 60);
      const stallAt = r.next() < 0.3 ? r.int(64, kb / 2) * 1024 : Infinity;
      await rawSocket('slowread', (socket, finish) => {
        let status = 0;
        let bytes = 0;
        const scan = statusScanner((s) => {
          if (status === 0) status = s;
        });
        socket.on('data', (chunk) => {
          if (status === 0) scan(chunk);
          bytes += chunk.length;
          socket.pause();
          if (bytes >= stallAt) {
            // A reader that stops: the server's writes back up until the client finally leaves.
            setTimeout(() => {
              socket.soakAborted = true;
              record('slowread', 'aborted');
              finish();
            }, r.int(1000, 6000));
            return;
          }
          setTimeout(() => socket.resume(), sipMs);
        });
        socket.on('end', () => {
          if (!socket.soakAborted) record('slowread', status ? statusOutcome(status) : 'reset');
        });
        socket.write(`GET /big?kb=${kb} HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${r.pick(TIERS)}\r\nConnection: close\r\n\r\n`);
      });
    });
  }

  // ---- the key flood: a new x-api-key value per request (some hot keys that run out), pipelined ----
  const HOT_KEYS = 64;
  const floodBatch = 32;
  let floodTokens = 0;
  let floodLast = performance.now();
  async function floodPermit(n) {
    // A shared token bucket at ctx.floodRate requests/s (burst: one batch per socket).
    for (;;) {
      const now = performance.now();
      floodTokens = Math.min(floodBatch * 8, floodTokens + ((now - floodLast) / 1000) * ctx.floodRate);
      floodLast = now;
      if (floodTokens >= n) {
        floodTokens -= n;
        return;
      }
      await sleep(Math.max(1, Math.ceil(((n - floodTokens) / ctx.floodRate) * 1000)));
    }
  }
  function floodKey() {
    if (r.next() < 0.15) return `hot-${r.int(1, HOT_KEYS)}`;
    keysSent++;
    return `${runId}-${(floodKeySeq++).toString(36)}`;
  }
  function floodClient() {
    // One keep-alive socket at a time; a new one when the server closes it.
    return loop(opsFor(ctx.floodRate), async () => {
      await rawSocket('flood', (socket, finish, refresh) => {
        let expected = 0;
        let got = 0;
        const next = async () => {
          if (!timeLeft() || socket.destroyed) return finish();
          await floodPermit(floodBatch);
          if (socket.destroyed) return;
          let out = '';
          for (let i = 0; i < floodBatch; i++) out += `GET /${r.next() < 0.6 ? 'partner' : 'api'}/ping HTTP/1.1\r\nHost: ${HOST}\r\nx-api-key: ${floodKey()}\r\n\r\n`;
          expected += floodBatch;
          refresh();
          socket.write(out);
        };
        socket.on('data', statusScanner((status) => {
          got++;
          record('flood', statusOutcome(status));
          if (got === expected) next();
        }));
        socket.on('close', () => {
          if (got < expected) record('flood', 'reset', expected - got);
        });
        next();
      });
    });
  }

  // ---- malformed requests and hostile header values, one connection each ----
  const MALFORMED = [
    'GARBAGE\r\n\r\n',
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nBad Header Line\r\n\r\n`,
    `GET /hello HTTP/9.9\r\nHost: ${HOST}\r\n\r\n`,
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`,
    `GET /${'a'.repeat(20000)} HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`,
    `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello`,
    `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n`,
    `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: -1\r\n\r\n`,
    `GET /\x00 HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`,
    `GET /hello HTTP/1.1\nHost: ${HOST}\n\n`,
    '\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03' + 'x'.repeat(40),
    'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
    `GET /hello HTTP/1.1\r\nHo`, // then the client half-closes
    // Valid HTTP, hostile values for the guards:
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: t1.critical.9999999999.${'A'.repeat(43)}\r\nConnection: close\r\n\r\n`,
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: critical\r\nx-user-tier: background\r\nConnection: close\r\n\r\n`,
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: ${'z'.repeat(4096)}\r\nConnection: close\r\n\r\n`,
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nx-user-tier: crit\u00e9cal\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nx-api-key: ${'k'.repeat(10000)}\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nx-api-key: a\r\nx-api-key: b\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\n${'a:1\r\n'.repeat(2100)}x-api-key: lost\r\nConnection: close\r\n\r\n`,
    `GET /hello HTTP/1.1\r\nHost: ${HOST}\r\nX-Forwarded-For: ${'1.1.1.1, '.repeat(500)}\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nX-Forwarded-For: ${'1.1.1.1, '.repeat(500)}\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nX-Forwarded-For: not-an-ip, ${'x'.repeat(3000)}\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nX-Forwarded-For: ::ffff:10.0.0.1, [2001:db8::1]:443, 999.1.1.1\r\nConnection: close\r\n\r\n`,
    `GET /api/ping HTTP/1.1\r\nHost: ${HOST}\r\nX-Forwarded-For:\r\nX-Forwarded-For: 10.1.2.3\r\nConnection: close\r\n\r\n`,
    `GET http://example.invalid/api/ping HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    `GET //api/..%2f..%2fping HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    `GET /API/PING HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    `GET /%zz%00 HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
    `GET /checkout/%E0%A4%A HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
  ];
  // Holds a slot until the server's requestTimeout (408): rare, or these alone would fill the gate.
  const NEVER_BODY = `POST /upload HTTP/1.1\r\nHost: ${HOST}\r\nExpect: 100-continue\r\nContent-Length: 100\r\nConnection: close\r\n\r\n`;
  function malformedClient() {
    return loop(opsFor(25), async () => {
      const payload = r.next() < 0.01 ? NEVER_BODY : r.pick(MALFORMED);
      await rawSocket('malformed', (socket) => {
        let responded = false;
        socket.on('data', statusScanner((status) => {
          if (status === 100) return; // the interim answer to Expect: 100-continue
          if (!responded) record('malformed', statusOutcome(status));
          responded = true;
          socket.end();
        }));
        socket.on('close', () => {
          if (!responded) record('malformed', 'reset');
        });
        socket.write(Buffer.from(payload, 'latin1'));
        if (payload.endsWith('\r\nHo')) socket.end();
      });
      await sleep(r.int(20, 100));
    });
  }

  const loops = [];
  function run() {
    const n = ctx.clients;
    for (let i = 0; i < n.normal; i++) loops.push(normalClient(false));
    for (let i = 0; i < n.surge; i++) loops.push(normalClient(true));
    for (let i = 0; i < n.disconnect; i++) loops.push(disconnectClient());
    for (let i = 0; i < n.pipeline; i++) loops.push(pipelineClient());
    for (let i = 0; i < n.slowloris; i++) loops.push(slowlorisClient());
    for (let i = 0; i < n.slowbody; i++) loops.push(slowBodyClient());
    for (let i = 0; i < n.slowread; i++) loops.push(slowReadClient());
    for (let i = 0; i < n.flood; i++) loops.push(floodClient());
    for (let i = 0; i < n.malformed; i++) loops.push(malformedClient());
    return Promise.all(loops);
  }

  /** Ends the run now: no new operations, every open connection destroyed (clients that vanish). */
  function stopAll() {
    stopping = true;
    for (const s of sockets) s.destroy();
    agent.destroy();
  }

  return {
    run,
    stopAll,
    inSurge,
    counts,
    get openSockets() { return sockets.size; },
    get keysSent() { return keysSent; },
    get unexpected() { return { count: unexpectedCount, list: unexpected }; },
  };
}

module.exports = { createLoad, statusOutcome, rng };

'use strict';
// Runs a list of Express-style middleware (req, res, next) on real node request/response objects,
// without a network: each request is a fresh http.IncomingMessage (method, URL, headers and raw
// headers as node's parser sets them, over one object standing for the proxy's keep-alive socket)
// and a fresh http.ServerResponse, the same for every composition. A request ends when the last
// middleware calls next() (admitted) or when one answers (res.end: refused); the next request starts
// only then, as on one connection; the harness yields to the event loop every PER_TURN requests. What
// the harness itself costs is measured as the empty chain.
const http = require('node:http');
const { performance } = require('node:perf_hooks');

/** The proxy's connection (a real socket has more, none of which the middleware reads). */
const PROXY_SOCKET = Object.freeze({ remoteAddress: '127.0.0.1', remotePort: 40000, remoteFamily: 'IPv4', destroyed: false, readableHighWaterMark: 16384, server: null });

/** A ServerResponse that tells the harness when a middleware answered. */
class BenchResponse extends http.ServerResponse {
  end(...args) {
    const r = super.end(...args);
    if (this.onEnd !== undefined) this.onEnd();
    return r;
  }
}

/**
 * The requests' headers, built once: request i comes from clients.addrs[i % ips] (appended by the
 * proxy to X-Forwarded-For), as user i % users with that user's tier. `variants` distinct header
 * sets are cycled, so the same header strings come back every `variants` requests (V8 has their
 * hashes cached, for JS Maps and native key caches alike, where a parser would hand over new ones).
 */
function requestPool({ addrs, users, tierOf }, { variants = addrs.length, urls = ['/api/items', '/api/items/17'], userHeader = 'x-user-id', tierHeader = 'x-user-tier' } = {}) {
  const pool = [];
  for (let i = 0; i < variants; i++) {
    const u = i % users;
    const headers = {
      host: 'api.example.test',
      'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) bench',
      accept: 'application/json',
      'x-forwarded-for': addrs[i % addrs.length],
      [userHeader]: `u${u}`,
      [tierHeader]: tierOf[u],
    };
    const raw = [];
    for (const k of Object.keys(headers)) raw.push(k, headers[k]);
    pool.push({ url: urls[i % urls.length], headers, raw });
  }
  return pool;
}

function makeRequest(spec) {
  const req = new http.IncomingMessage(PROXY_SOCKET);
  req.method = 'GET';
  req.url = spec.url;
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  req.headers = spec.headers;
  req.rawHeaders = spec.raw;
  req.complete = true;
  return req;
}

/** Runs `chain` for one request; calls done(admitted, status). */
function runOne(chain, spec, done) {
  const req = makeRequest(spec);
  const res = new BenchResponse(req);
  let i = 0;
  let finished = false;
  const finish = (admitted) => {
    if (finished) return;
    finished = true;
    done(admitted, res.statusCode, res);
  };
  res.onEnd = () => finish(false);
  const next = (err) => {
    if (err) {
      finished = true;
      throw err;
    }
    if (i === chain.length) {
      // The handler's turn: its response is over (no socket here, so 'close' stands for it). What
      // waits for that (the gatekeeper's concurrency slot) gets it back, as on a real server: one
      // never given back holds the next requests, waiting for a slot, and the run never ends.
      res.emit('close');
      return finish(true);
    }
    chain[i++](req, res, next);
  };
  next();
}

/** One request through the chain, as a promise of { admitted, status, res }. */
function send(chain, spec) {
  return new Promise((resolve, reject) => {
    try {
      runOne(chain, spec, (admitted, status, res) => resolve({ admitted, status, res }));
    } catch (err) {
      reject(err);
    }
  });
}

/**
 * Requests run per event-loop turn before the harness yields to the loop (setImmediate), as a server
 * runs the requests that one poll for I/O brought in. A loop that never yields is a blocked loop, and
 * a gatekeeper rightly sheds on it (its in-band lag estimate and turn budget).
 */
const PER_TURN = 16;

/**
 * Times `n` requests through `chain`, one after another, cycling through `pool` from `offset`,
 * PER_TURN per event-loop turn. Returns { nsPerReq (wall time), cpuNsPerReq (this process's user +
 * system CPU time, every thread: on a shared machine it leaves out the time the process waited for
 * a CPU), admitted, refused }.
 */
function timeChain(chain, pool, n, offset = 0) {
  return new Promise((resolve, reject) => {
    let k = 0;
    let admitted = 0;
    let refused = 0;
    let turnEnds = PER_TURN;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const step = () => {
      // Synchronous chains finish inside runOne: loop without growing the stack; asynchronous ones
      // come back through `done`.
      while (k < n) {
        if (k >= turnEnds) {
          turnEnds = k + PER_TURN;
          return setImmediate(step);
        }
        let sync = true;
        let returned = false;
        try {
          runOne(chain, pool[(offset + k) % pool.length], (ok) => {
            if (ok) admitted++;
            else refused++;
            k++;
            if (!sync) step();
            else returned = true;
          });
        } catch (err) {
          return reject(err);
        }
        sync = false;
        if (!returned) return; // asynchronous: `done` will call step()
      }
      const wallMs = performance.now() - t0;
      const c = process.cpuUsage(c0);
      resolve({ nsPerReq: (wallMs * 1e6) / n, cpuNsPerReq: ((c.user + c.system) * 1e3) / n, admitted, refused });
    };
    step();
  });
}

module.exports = { requestPool, makeRequest, send, timeChain, BenchResponse, PROXY_SOCKET, PER_TURN };

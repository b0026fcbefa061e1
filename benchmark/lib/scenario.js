'use strict';
// The overload scenario's building blocks: a CPU-bound test server in a child process (so the load
// generator in this process keeps its own core and loop), its capacity, and loads run against it
// with the server's own event-loop lag recorded over the same window.
//
//   const { startServer, calibrateWork, measureCapacity, runLoad } = require('./scenario');
//   const workIters = calibrateWork(3);                        // ~3 ms of CPU per request (work.js)
//   const cap = await measureCapacity({ workIters });         // closed-loop probe, req/s
//   const srv = await startServer({ protection: 'tiergate', options: {...}, workIters, record: true });
//   const run = await runLoad(srv, { rate: 3 * cap.reqPerSec, durationMs: 5000, mix });
//   run.load.tiers, run.server.lag.p99, run.lagTimeline, run.onset(50)
//   await srv.stop();
//
// protection: 'none' | 'toobusy' (toobusy-js, Express) | 'under-pressure' (@fastify/under-pressure,
// Fastify) | 'tiergate' (this package; Express, Fastify or node:http) | 'express-rate-limit' |
// 'fastify-rate-limit' | { module: '/path/to/gate.js', export?: 'name', options? } — a module whose
// export is a factory `(options) => guard` (lib/adapters.js contract: guard.admit(req, res)) or, on
// Express, `(options) => middleware`.
const path = require('node:path');
const { fork } = require('node:child_process');
const { openLoop, closedLoop } = require('./openloop');
const { calibrate, DEFAULT_WORK_KIND } = require('./work');

const SERVER = path.join(__dirname, 'server.js');

/** Iterations of work (lib/work.js, `workKind`) per request that cost about `targetMs` of CPU here. */
function calibrateWork(targetMs = 3, workKind = DEFAULT_WORK_KIND) {
  return calibrate(targetMs, workKind);
}

/**
 * Starts the test server in a child process. Options: framework ('express' | 'express4' | 'fastify' |
 * 'http'), protection, options (JSON-serialisable options of the protection), workIters, workKind, record
 * (lag timeline + first-rejection time, for overload runs), tiergateDir (load tiergate from that package
 * directory instead of this checkout), script (another server with the same IPC commands, e.g.
 * downstream-server.js) and extra (more fields of its JSON config). Resolves to a handle with `port`,
 * `windowStart()`, `windowEnd()`, `guardStats()`, `cpuUsage()`, `profileStart()`, `profileStop(file)`, `stop()`.
 */
function startServer({ framework = 'express', protection = 'none', options = {}, workIters = 0, workKind = DEFAULT_WORK_KIND, record = false, trace = false, backlog = 511, tiergateDir, gate, heldLagMs, outsideApp, script = SERVER, extra = {} } = {}) {
  const child = fork(script, [], {
    env: { ...process.env, TG_BENCH_SERVER: JSON.stringify({ ...extra, framework, protection, options, workIters, workKind, record, trace, backlog, tiergateDir, gate, heldLagMs, outsideApp }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: [],
  });
  let nextId = 1;
  const pending = new Map();
  let exited = false;
  return new Promise((resolve, reject) => {
    const startTimer = setTimeout(() => {
      child.kill();
      reject(new Error(`server (${framework}/${JSON.stringify(protection)}) did not start in 15 s`));
    }, 15_000);
    child.on('exit', (code) => {
      exited = true;
      clearTimeout(startTimer);
      for (const { reject: rj } of pending.values()) rj(new Error(`server exited (${code})`));
      pending.clear();
      reject(new Error(`server (${framework}/${JSON.stringify(protection)}) exited with code ${code}`));
    });
    child.on('message', (msg) => {
      if (msg.error) {
        clearTimeout(startTimer);
        reject(new Error(`server failed to start: ${msg.error}`));
        return;
      }
      if (msg.ready) {
        clearTimeout(startTimer);
        resolve(handle(msg.port));
        return;
      }
      const p = pending.get(msg.id);
      if (p) {
        pending.delete(msg.id);
        p.resolve(msg.result);
      }
    });

    function request(cmd, timeoutMs = 20_000, extra = {}) {
      if (exited) return Promise.reject(new Error('server has exited'));
      const id = nextId++;
      return new Promise((res, rej) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          rej(new Error(`server did not answer ${cmd} in ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(id, {
          resolve: (v) => {
            clearTimeout(timer);
            res(v);
          },
          reject: (e) => {
            clearTimeout(timer);
            rej(e);
          },
        });
        child.send({ ...extra, id, cmd });
      });
    }

    function handle(port) {
      return {
        port,
        pid: child.pid,
        framework,
        protection,
        windowStart: () => request('window-start'),
        windowEnd: (opts = {}) => request('window-end', 20_000, opts),
        controllerEnd: () => request('controller-end'),
        guardStats: () => request('guard-stats'),
        cpuUsage: () => request('cpu'),
        workTime: () => request('work'),
        profileStart: () => request('profile-start'),
        profileStop: (file) => request('profile-stop', 20_000, { file }),
        stop() {
          if (exited) return Promise.resolve();
          return new Promise((res) => {
            const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
            child.once('exit', () => {
              clearTimeout(kill);
              res();
            });
            child.send({ cmd: 'exit' });
          });
        },
      };
    }
  });
}

/** The mean wall time (ms) of one /work request's work between two readings of srv.workTime(); NaN without any. */
function workMeanMs(w0, w1) {
  return w1.count > w0.count ? (w1.ms - w0.ms) / (w1.count - w0.count) : NaN;
}

/**
 * The server's capacity on the CPU-bound route: a closed-loop probe (each of `concurrency` clients
 * sends its next request as soon as the previous one is answered) against an unprotected server.
 * Returns { reqPerSec, p50, p99, workMeanMs }. Pass `server` to probe an already running one.
 */
async function measureCapacity({ server, framework = 'express', workIters, workKind, concurrency = 8, durationMs = 2000, warmupMs = 500, path: p = '/work' } = {}) {
  const own = !server;
  const srv = server || (await startServer({ framework, protection: 'none', workIters, workKind }));
  try {
    const w0 = await srv.workTime();
    const r = await closedLoop({ port: srv.port, path: p, concurrency, durationMs, warmupMs });
    // The mean wall time of the route's work during the probe: the pace a run is compared with.
    return { ...r, workMeanMs: workMeanMs(w0, await srv.workTime()) };
  } finally {
    if (own) await srv.stop();
  }
}

/** Per-bucket maximum of the server's lag samples, aligned with an openLoop timeline. */
function lagPerBucket(samples, start, bucketMs, nBuckets) {
  const out = new Array(nBuckets).fill(0);
  for (let i = 0; i < samples.t.length; i++) {
    const b = Math.floor((samples.t[i] - start) / bucketMs);
    if (b >= 0 && b < nBuckets && samples.v[i] > out[b]) out[b] = samples.v[i];
  }
  return out;
}

/**
 * The protection's controller samples (server.js, every 50 ms) per openLoop bucket: the last reading
 * in the bucket (pressure, per tier refill scale, capacity budget) and what was shed in it (per tier
 * sheds, turn-budget sheds, capacity sheds: differences of the cumulative counters). Null rows for
 * buckets without a sample.
 */
function controllerPerBucket(samples, start, bucketMs, nBuckets) {
  const out = new Array(nBuckets).fill(null);
  let prev = null;
  for (const s of samples || []) {
    const b = Math.floor((s.t - start) / bucketMs);
    if (prev && b >= 0 && b < nBuckets) {
      const row = out[b] || { pressure: 0, parts: null, lagMs: 0, busy: null, elu: null, capacity: null, scales: {}, shed: {}, turnShed: {}, capacityShed: {} };
      row.pressure = s.pressure;
      row.parts = s.parts ?? null;
      row.lagMs = s.lagMs;
      // JSON turns NaN (not measured yet) into null.
      row.busy = typeof s.busy === 'number' ? s.busy : null;
      row.elu = typeof s.elu === 'number' ? s.elu : null;
      row.capacity = s.capacity;
      for (const [tier, t] of Object.entries(s.tiers)) {
        const p = prev.tiers[tier] || t;
        row.scales[tier] = t.scale;
        row.shed[tier] = (row.shed[tier] || 0) + t.shed - p.shed;
        row.turnShed[tier] = (row.turnShed[tier] || 0) + t.turnShed - p.turnShed;
        row.capacityShed[tier] = (row.capacityShed[tier] || 0) + t.capacityShed - p.capacityShed;
      }
      out[b] = row;
    }
    prev = s;
  }
  return out;
}

/**
 * Runs an open-loop load (openLoop options; port filled in) against a started server and collects
 * the server's view of the same window. Returns { load, server, lagTimeline, onset(thresholdMs) }.
 * `keepController`: the server goes on sampling its controller after the window (`controllerEnd`).
 */
async function runLoad(srv, loadOpts, { keepController = false } = {}) {
  await srv.windowStart();
  const load = await openLoop({ ...loadOpts, port: srv.port });
  const server = await srv.windowEnd({ keepController });
  const lagTimeline = lagPerBucket(server.samples, load.start, load.bucketMs, load.timeline.length);
  const ctl = controllerPerBucket(server.controller, load.start, load.bucketMs, load.timeline.length);
  for (let b = 0; b < load.timeline.length; b++) {
    load.timeline[b].serverLagMs = lagTimeline[b];
    if (ctl[b]) load.timeline[b].controller = ctl[b];
  }
  return {
    load,
    server,
    lagTimeline,
    /**
     * When the server's lag (10 ms drift samples) first exceeded `thresholdMs` after the load began,
     * when the server first answered 429/503 (arrival time of that request), and the difference.
     * onsetMs < 0: shedding began before the sampler saw the lag cross.
     */
    onset(thresholdMs) {
      let crossedAt = 0;
      for (let i = 0; i < server.samples.t.length; i++) {
        if (server.samples.t[i] >= load.start && server.samples.v[i] > thresholdMs) {
          crossedAt = server.samples.t[i];
          break;
        }
      }
      const firstRejectAt = server.firstRejectAt || 0;
      return {
        crossedAtMs: crossedAt ? crossedAt - load.start : null,
        firstRejectAtMs: firstRejectAt ? firstRejectAt - load.start : null,
        onsetMs: crossedAt && firstRejectAt ? firstRejectAt - crossedAt : null,
      };
    },
  };
}

/**
 * Lets the server calm down: a trickle of light requests (20 req/s of critical GET /hello, in rounds
 * of 500 ms; a gate's controller moves on requests, so its stats stay stale on an idle server) for at
 * least `minMs`, then on until a guard reports no pressure, `maxMs` in all. { calm, pressure? }.
 */
async function settle(srv, agent, { minMs, maxMs }) {
  const ROUND_MS = 500;
  let st = null;
  for (let ms = ROUND_MS; ms <= maxMs; ms += ROUND_MS) {
    await openLoop({ port: srv.port, path: '/hello', rate: 20, durationMs: ROUND_MS, agent, mix: [{ tier: 'critical', weight: 1 }] });
    if (ms < minMs) continue;
    st = await srv.guardStats().catch(() => null);
    if (!st || typeof st.pressure !== 'number' || st.pressure === 0) return { calm: true };
  }
  return { calm: false, pressure: st.pressure };
}

module.exports = { startServer, calibrateWork, measureCapacity, runLoad, lagPerBucket, controllerPerBucket, workMeanMs, settle };

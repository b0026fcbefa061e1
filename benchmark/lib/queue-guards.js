'use strict';
// Guard factories for bench:queue, loaded by benchmark/lib/server.js in the server process
// ({ module, export, options } protections). Each resets its wait statistics when the harness opens a
// measurement window (the 'window-start' IPC command), so stats() describe that window only.
const { performance } = require('node:perf_hooks');
const { createConcurrencyGate } = require('../../lib/queue');

function onWindowStart(fn) {
  process.on('message', (msg) => {
    if (msg && msg.cmd === 'window-start') fn();
  });
}

/** The concurrency gate (this package), as the guard the harness wraps for Express. */
function concurrencyGate(options) {
  const gate = createConcurrencyGate(options);
  onWindowStart(() => gate.resetStats());
  return gate;
}

/**
 * The common alternative: every request waits in a p-queue (concurrency-limited, with p-queue's own
 * priority by tier) — unbounded, no timeout, the slot given back when the response finishes or closes.
 */
function pQueue({ concurrency = 1, tierHeader = 'x-user-tier', priorities = { critical: 2, standard: 1, background: 0 } } = {}) {
  let queue = null;
  const ready = import('p-queue').then(({ default: PQueue }) => {
    queue = new PQueue({ concurrency });
  });
  const MAX = 1 << 17;
  let waits = {};
  let maxQueued = 0;
  onWindowStart(() => {
    waits = {};
    maxQueued = 0;
  });
  function record(tier, ms) {
    const w = waits[tier] || (waits[tier] = { v: new Float64Array(MAX), n: 0 });
    if (w.n < MAX) w.v[w.n++] = ms;
  }
  function admit(req, res) {
    const t0 = performance.now();
    const tier = typeof req.headers[tierHeader] === 'string' && req.headers[tierHeader] in priorities ? req.headers[tierHeader] : 'background';
    return new Promise((admitted) => {
      const enqueue = () => {
        queue.add(() => new Promise((release) => {
          record(tier, performance.now() - t0);
          let done = false;
          const free = () => {
            if (!done) {
              done = true;
              release();
            }
          };
          res.once('finish', free);
          res.once('close', free);
          admitted(null);
        }), { priority: priorities[tier] });
        if (queue.size > maxQueued) maxQueued = queue.size;
      };
      if (queue) enqueue();
      else ready.then(enqueue);
    });
  }
  function stats() {
    const tiers = {};
    for (const [tier, { v, n }] of Object.entries(waits)) {
      const w = v.slice(0, n).sort();
      const pct = (p) => (n ? w[Math.min(n - 1, Math.ceil((p / 100) * n) - 1)] : 0);
      tiers[tier] = { admitted: n, waitMs: { p50: pct(50), p99: pct(99), max: n ? w[n - 1] : 0 } };
    }
    return { queued: queue ? queue.size : 0, inFlight: queue ? queue.pending : 0, maxQueued, tiers };
  }
  return { admit, stats };
}

module.exports = { concurrencyGate, pQueue };

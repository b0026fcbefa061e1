'use strict';
// The best latency any admission scheme can give one tier on a single event loop (or K servers), for comparison
// with what a guard measured. Model: the generator's schedule (constant rate, tiers drawn from the mix
// with the same seeded PRNG as lib/openloop.js), every request costs `serviceMs` of CPU that nothing can
// interrupt (a synchronous handler), and whenever a request ends the server starts a queued request of
// `tier` if there is one, else any other waiting request. Rejecting costs nothing, and network and
// parsing take no time: real servers can only do worse.
const { tierPicker, percentile, prng } = require('./openloop');

/** A standard normal deviate from two uniform draws (Box–Muller). */
function normal(random) {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/**
 * Latency p50/p99/max (ms, arrival to response) of `tier` under that ideal scheduler, with `servers`
 * requests served at once (1: one event loop; K: an I/O-bound route behind a pool of K connections,
 * each holding its connection `serviceMs`), and the p99 of its waits (arrival to start), sorted
 * `waits` with it. `jitterMs`: each request's service time is drawn around `serviceMs` with that
 * standard deviation (at least half of it; seeded by `jitterSeed`) — with 0, K servers that start
 * together finish together forever, and a request of `tier` can wait a whole service time.
 * `reserve`: servers kept for `tier` (another tier's request starts only while more are free), and
 * `served`: the requests of every tier started by the time the last of `tier` starts.
 */
function idealTierLatency({ rate, durationMs, serviceMs, mix, tier = 'critical', seed = 42, servers = 1, jitterMs = 0, jitterSeed = 1, reserve = 0 }) {
  if (!(reserve >= 0 && reserve < servers)) throw new RangeError(`reserve must be from 0 to servers - 1, got ${reserve}`);
  const nextTier = tierPicker(mix, seed);
  const random = prng(jitterSeed);
  const service = jitterMs > 0 ? () => Math.max(serviceMs / 2, serviceMs + jitterMs * normal(random)) : () => serviceMs;
  const gap = 1000 / rate;
  const n = Math.floor((rate * durationMs) / 1000);
  const favoured = []; // arrival times of `tier` requests
  const others = []; // arrival times of every other request
  for (let i = 0; i < n; i++) (mix[nextTier()].tier === tier ? favoured : others).push(i * gap);
  const latencies = [];
  const waits = [];
  const free = new Array(servers).fill(0); // when each server is next free
  let f = 0; // next favoured request not yet served
  let o = 0; // next other request not yet served
  while (f < favoured.length) {
    let k = 0;
    for (let j = 1; j < servers; j++) if (free[j] < free[k]) k = j;
    const now = free[k];
    if (favoured[f] <= now) {
      waits.push(now - favoured[f]);
      free[k] = now + service();
      latencies.push(free[k] - favoured[f++]);
    } else if (o < others.length && others[o] <= now && (reserve === 0 || free.filter((t) => t <= now).length > reserve)) {
      free[k] = now + service();
      o++;
    } else {
      // Idle until the next arrival, or (another tier's request held back by the reserve) until
      // another server frees.
      const held = o < others.length && others[o] <= now;
      const nextFree = Math.min(...free.filter((t) => t > now));
      free[k] = Math.min(favoured[f], held ? nextFree : o < others.length ? others[o] : Infinity);
    }
  }
  latencies.sort((a, b) => a - b);
  waits.sort((a, b) => a - b);
  return {
    serviceMs,
    servers,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1],
    waitP99: percentile(waits, 99),
    waits,
    served: f + o,
  };
}

/** One line for a target table: the ideal's p99 as a multiple of its own unloaded latency (serviceMs). */
function idealText(ideal) {
  return `ideal scheduler at this load (lib/ideal.js): p99 ${ideal.p99.toFixed(1)} ms = ${(ideal.p99 / ideal.serviceMs).toFixed(2)}x its unloaded ${ideal.serviceMs.toFixed(1)} ms`;
}

module.exports = { idealTierLatency, idealText, normal };

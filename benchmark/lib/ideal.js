'use strict';
// The best latency any admission scheme can give one tier on a single event loop (or K servers), for comparison
// with what a guard measured. Model: the generator's schedule (constant rate, tiers drawn from the mix
// with the same seeded PRNG as lib/openloop.js), every request costs `serviceMs` of CPU that nothing can
// interrupt (a synchronous handler), and whenever a request ends the server starts a queued request of
// `tier` if there is one, else any other waiting request. Rejecting costs nothing, and network and
// parsing take no time: real servers can only do worse.
const { tierPicker, percentile } = require('./openloop');

/**
 * Latency p50/p99/max (ms, arrival to response) of `tier` under that ideal scheduler, with `servers`
 * requests served at once (1: one event loop; K: an I/O-bound route behind a pool of K connections,
 * each holding its connection `serviceMs`).
 */
function idealTierLatency({ rate, durationMs, serviceMs, mix, tier = 'critical', seed = 42, servers = 1 }) {
  const nextTier = tierPicker(mix, seed);
  const gap = 1000 / rate;
  const n = Math.floor((rate * durationMs) / 1000);
  const favoured = []; // arrival times of `tier` requests
  const others = []; // arrival times of every other request
  for (let i = 0; i < n; i++) (mix[nextTier()].tier === tier ? favoured : others).push(i * gap);
  const latencies = [];
  const free = new Array(servers).fill(0); // when each server is next free
  let f = 0; // next favoured request not yet served
  let o = 0; // next other request not yet served
  while (f < favoured.length) {
    let k = 0;
    for (let j = 1; j < servers; j++) if (free[j] < free[k]) k = j;
    const now = free[k];
    if (favoured[f] <= now) {
      free[k] = now + serviceMs;
      latencies.push(free[k] - favoured[f++]);
    } else if (o < others.length && others[o] <= now) {
      free[k] = now + serviceMs;
      o++;
    } else {
      free[k] = Math.min(favoured[f], o < others.length ? others[o] : Infinity); // idle until the next arrival
    }
  }
  latencies.sort((a, b) => a - b);
  return { serviceMs, servers, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies[latencies.length - 1] };
}

/** One line for a target table: the ideal's p99 as a multiple of its own unloaded latency (serviceMs). */
function idealText(ideal) {
  return `ideal scheduler at this load (lib/ideal.js): p99 ${ideal.p99.toFixed(1)} ms = ${(ideal.p99 / ideal.serviceMs).toFixed(2)}x its unloaded ${ideal.serviceMs.toFixed(1)} ms`;
}

module.exports = { idealTierLatency, idealText };

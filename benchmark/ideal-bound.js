'use strict';
// How close bench:downstream's critical p99 target (<= 1.5x the unloaded p99) can come, worked out on a
// model instead of measured: the ideal scheduler of lib/ideal.js (critical first, work-conserving,
// nothing for network, parsing or the loop) on the step's arrivals, `--pool` servers whose service
// time jitters by `--jitter` ms (standard deviation; several values), the other tiers keeping every
// server busy (goodput) or kept off `--reserve` of them (a reservation for the critical tier). A
// critical request's latency is its wait there plus an unloaded latency drawn from a normal with the
// measured median and p99: a real server adds its own delays, so what this model gives is the least
// an admission scheme can give at that goodput.
//
//   node benchmark/ideal-bound.js --cap 192 --unloaded 22.1,25.1 [--pool 4] [--load 3] [--seconds 3] [--jitter 0,0.5,1,2] [--reserve 0,1] [--seeds 8]
//
// --cap: the route's capacity probe in req/s; --unloaded: the unloaded latency's median and p99 in ms
// (bench:downstream prints the probe's median and each configuration's p99).
const { idealTierLatency, normal } = require('./lib/ideal');
const { percentile, prng } = require('./lib/openloop');
const { medianRange } = require('./lib/stats');
const { MIX } = require('./downstream');

const TARGET = 1.5;

function parseArgs(argv) {
  const a = { cap: 0, unloaded: null, pool: 4, load: 3, seconds: 3, jitter: [0, 0.5, 1, 2], reserve: [0, 1], seeds: 8 };
  const numbers = (k, v) => {
    const xs = String(v).split(',').map(Number);
    if (xs.some((x) => !Number.isFinite(x) || x < 0)) throw new RangeError(`${k} must be numbers >= 0 separated by commas, got ${v}`);
    return xs;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[++i];
    if (k === '--unloaded') a.unloaded = numbers(k, v);
    else if (k === '--jitter') a.jitter = numbers(k, v);
    else if (k === '--reserve') a.reserve = numbers(k, v);
    else if (['--cap', '--pool', '--load', '--seconds', '--seeds'].includes(k)) {
      const [x] = numbers(k, v);
      if (x <= 0) throw new RangeError(`${k} must be a number > 0, got ${v}`);
      a[k.slice(2)] = x;
    } else throw new Error(`unknown argument ${k}`);
  }
  if (a.cap <= 0) throw new Error('--cap is required (the capacity probe, req/s)');
  if (a.unloaded === null || a.unloaded.length !== 2 || a.unloaded[1] < a.unloaded[0]) {
    throw new Error('--unloaded is required: the unloaded median and p99 in ms, e.g. 22.1,25.1');
  }
  if (a.reserve.some((r) => !Number.isInteger(r) || r >= a.pool)) throw new RangeError(`--reserve must be whole numbers below --pool, got ${a.reserve}`);
  return a;
}

/** One seed: the critical requests' waits in the ideal schedule, each plus a drawn unloaded latency. */
function criticalP99({ cap, pool, load, seconds, jitterMs, reserve, seed, median, sd }) {
  const ideal = idealTierLatency({ rate: load * cap, durationMs: seconds * 1000, serviceMs: (1000 * pool) / cap, mix: MIX, servers: pool, jitterMs, jitterSeed: seed, reserve });
  const random = prng(1000 + seed);
  const latencies = ideal.waits.map((w) => w + Math.max(0, median + sd * normal(random))).sort((x, y) => x - y);
  return { waitP99: ideal.waitP99, p99: percentile(latencies, 99), goodput: (100 * ideal.served) / (cap * seconds) };
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  const [median, p99] = a.unloaded;
  const sd = (p99 - median) / 2.326; // a normal's p99 is 2.326 standard deviations above its median
  const fmt = (xs, digits = 1) => medianRange(xs, (v) => v.toFixed(digits));
  console.log(`cap ${a.cap} req/s on ${a.pool} servers, ${a.load}x for ${a.seconds} s; unloaded median ${median} ms, p99 ${p99} ms; target ${TARGET}x = ${(TARGET * p99).toFixed(1)} ms; ${a.seeds} seeds`);
  for (const reserve of a.reserve) {
    for (const jitterMs of a.jitter) {
      const runs = Array.from({ length: a.seeds }, (_, i) => criticalP99({ ...a, jitterMs, reserve, seed: i + 1, median, sd }));
      console.log(
        `  reserve ${reserve}, service jitter ${jitterMs} ms: goodput ${fmt(runs.map((r) => r.goodput), 0)}%; critical wait p99 ${fmt(runs.map((r) => r.waitP99))} ms; ` +
          `critical p99 ${fmt(runs.map((r) => r.p99))} ms = ${fmt(runs.map((r) => r.p99 / p99), 2)}x unloaded`,
      );
    }
  }
}

main();

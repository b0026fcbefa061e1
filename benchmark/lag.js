'use strict';
// npm run bench:lag — LagMonitor side by side with perf_hooks.monitorEventLoopDelay and
// performance.eventLoopUtilization, in one run:
//   1. accuracy: induced synchronous blocks of 10, 50, 200 ms, measured by both at 1 ms and 10 ms
//      resolution (each repeat starts both tools fresh and starts the block at a random timer phase);
//   2. CPU cost of sampling an idle loop at 1 ms and 10 ms, from process.cpuUsage() over a fixed idle
//      period against a baseline with no sampler (per tick, and as a share of one core);
//   3. cost of reading the figures on a hot path.
// Options: --reps N (accuracy repeats, default 5), --idle MS (cost period, default 1000), --rounds N
// (cost rounds, default 5). Figures are medians.
const { monitorEventLoopDelay, performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const os = require('node:os');
const { LagMonitor } = require('..');
const native = require('../lib/native');
const { median } = require('./lib/stats');

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const REPS = arg('reps', 5);
const IDLE_MS = arg('idle', 1000);
const ROUNDS = arg('rounds', 5);

const fmt = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : String(x));
function block(ms) {
  const t0 = performance.now();
  const end = t0 + ms;
  let t = t0;
  while (t < end) t = performance.now();
  return t - t0;
}
function table(rows) {
  const cols = Object.keys(rows[0]);
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => String(r[c]).length)));
  const line = (vals) => `| ${vals.map((v, i) => String(v).padEnd(w[i])).join(' | ')} |`;
  console.log(line(cols));
  console.log(`|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`);
  for (const r of rows) console.log(line(cols.map((c) => r[c])));
  console.log();
}

async function accuracy() {
  const rows = [];
  for (const R of [1, 10]) {
    for (const B of [10, 50, 200]) {
      const err = { lm: [], block: [], eld: [] };
      const elu = { lm: [], perf: [] };
      let trueMs = [];
      for (let rep = 0; rep < REPS; rep++) {
        const m = new LagMonitor({ resolutionMs: R, windowMs: 1000 });
        const h = monitorEventLoopDelay({ resolution: R });
        m.start();
        h.enable();
        const elu0 = performance.eventLoopUtilization();
        await sleep(3 * R + 5 + Math.random() * R); // a few ticks, then a random phase
        const t = block(B);
        await sleep(3 * R + 5); // the late tick has run
        const s = m.stats();
        const perfElu = performance.eventLoopUtilization(elu0).utilization;
        h.disable();
        m.stop();
        trueMs.push(t);
        err.lm.push(s.maxMs - t);
        err.block.push(s.maxBlockMs - t);
        // monitorEventLoopDelay records whole intervals between ticks: drift = interval − resolution.
        err.eld.push(h.max / 1e6 - R - t);
        elu.lm.push(s.elu);
        elu.perf.push(perfElu);
      }
      const spread = (xs) => `${fmt(median(xs))} [${fmt(Math.min(...xs))}, ${fmt(Math.max(...xs))}]`;
      const row = {
        resolution: `${R} ms`,
        block: `${B} ms`,
        'LagMonitor maxMs (drift)': spread(err.lm),
        'LagMonitor maxBlockMs': spread(err.block),
        'ELD max − resolution': spread(err.eld),
        'ELU LagMonitor / perf_hooks': `${fmt(median(elu.lm), 3)} / ${fmt(median(elu.perf), 3)}`,
      };
      rows.push(row);
    }
  }
  console.log(`## 1. Accuracy: reported − true block length, ms (median [min, max] of ${REPS} repeats)\n`);
  table(rows);
}

function cpuMicros(usage) {
  return usage.user + usage.system;
}

async function cost() {
  const configs = {
    'baseline (no sampler)': { start: () => () => {} },
    'LagMonitor 1 ms': {
      start: () => {
        const m = new LagMonitor({ resolutionMs: 1 }).start();
        return () => (m.stop(), m.stats().ticks);
      },
    },
    'LagMonitor 10 ms': {
      start: () => {
        const m = new LagMonitor({ resolutionMs: 10 }).start();
        return () => (m.stop(), m.stats().ticks);
      },
    },
    'LagMonitor 10 ms + watchdog (stallMs 500)': {
      start: () => {
        const m = new LagMonitor({ resolutionMs: 10, stallMs: 500 }).start();
        return () => (m.stop(), m.stats().ticks);
      },
    },
    'monitorEventLoopDelay 1 ms': {
      start: () => {
        const h = monitorEventLoopDelay({ resolution: 1 });
        h.enable();
        return () => (h.disable(), h.count + 1);
      },
    },
    'monitorEventLoopDelay 10 ms': {
      start: () => {
        const h = monitorEventLoopDelay({ resolution: 10 });
        h.enable();
        return () => (h.disable(), h.count + 1);
      },
    },
  };
  const samples = Object.fromEntries(Object.keys(configs).map((k) => [k, { cpu: [], ticks: [], work: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, c] of Object.entries(configs)) {
      const stop = c.start();
      await sleep(20); // settle
      const w0 = native.lagSamplerWork();
      const u0 = process.cpuUsage();
      const t0 = performance.now();
      await sleep(IDLE_MS);
      const cpu = cpuMicros(process.cpuUsage(u0));
      const wall = performance.now() - t0;
      const w1 = native.lagSamplerWork();
      const ticks = stop();
      // The sampler's own work (tick + prepare callbacks, self-timed with uv_hrtime), per tick.
      if (w1[0] > w0[0]) samples[name].work.push((w1[1] - w0[1] + w1[3] - w0[3]) / (w1[0] - w0[0]));
      samples[name].cpu.push((cpu / wall) * 1000); // CPU µs per second of wall time
      samples[name].ticks.push(ticks ? (ticks / wall) * 1000 : 0);
    }
  }
  const base = median(samples['baseline (no sampler)'].cpu);
  const rows = Object.entries(samples).map(([name, s]) => {
    const cpu = median(s.cpu);
    const tps = median(s.ticks);
    const extra = cpu - base;
    return {
      sampler: name,
      'ticks/s': fmt(tps, 0),
      'CPU µs per s': fmt(cpu, 0),
      'above baseline, % of a core': name.startsWith('baseline') ? '—' : fmt(extra / 1e4, 3),
      'µs per tick': name.startsWith('baseline') || !tps ? '—' : fmt(extra / tps, 2),
      'own work per tick, µs': s.work.length ? fmt(median(s.work) / 1000, 2) : '—',
    };
  });
  console.log(`## 2. CPU cost on an idle loop (process.cpuUsage over ${IDLE_MS} ms, median of ${ROUNDS} interleaved rounds)\n`);
  table(rows);
  console.log('"µs per tick" is all extra process CPU (kernel wake-ups included) divided by ticks; "own work" is the');
  console.log('time inside LagMonitor\'s callbacks (window update, quantile, ELU, heap read every 100 ms).\n');
}

function reads() {
  const m = new LagMonitor({ resolutionMs: 10 }).start();
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  const N = 1_000_000;
  const bench = (name, fn, n = N) => {
    const out = [];
    for (let r = 0; r < 5; r++) {
      let x = 0;
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) x += fn();
      out.push(Number(process.hrtime.bigint() - t0) / n);
      if (x === -1) console.log(x);
    }
    return { read: name, 'ns/op': fmt(median(out), 1) };
  };
  const rows = [
    bench('LagMonitor#lagMs (raw N-API call)', () => m.lagMs),
    bench('LagMonitor#stalled', () => (m.stalled ? 1 : 0)),
    bench('monitorEventLoopDelay .max', () => h.max),
    bench('monitorEventLoopDelay .percentile(99)', () => h.percentile(99), N / 100),
    bench('performance.eventLoopUtilization()', () => performance.eventLoopUtilization().utilization, N / 10),
    bench('LagMonitor#stats() (one object, incl. RSS read)', () => m.stats().p99Ms, N / 100),
  ];
  h.disable();
  m.stop();
  console.log('## 3. Reading the figures (median of 5 runs)\n');
  table(rows);
}

(async () => {
  console.log(`# bench:lag — node ${process.version}, ${os.cpus()[0].model.trim()} × ${os.cpus().length}, ${os.platform()} ${os.arch()}\n`);
  await accuracy();
  await cost();
  reads();
})();

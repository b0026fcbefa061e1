'use strict';
// npm run bench:pair — a benchmark against the code before, as interleaved pairs: the same bench run
// from this checkout and from another one (its own build, benchmark files and option vocabulary),
// alternately, each after a wait for a quiet machine; per figure, each run's value, the median [range]
// of each side and the median of the per-pair ratios (this checkout ÷ the other).
//
//   node benchmark/pair.js --alt DIR [--runs 5] <bench> [-- bench args]
//   (bench: overhead | defense | ledger; DIR: a checkout with node_modules and a built addon)
//
// Figures (the lower the better, except "vs bare"):
//   overhead: each tiergate row's throughput vs bare (%) and server CPU µs/req above bare;
//   defense:  part 1a, each tiergate composition's CPU ns/req above the harness (--only cost);
//   ledger:   ns/op of each case (--json).
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { waitForQuiet } = require('./lib/quiet');
const { median } = require('./lib/stats');

const BENCHES = {
  overhead: {
    script: 'benchmark/overhead.js',
    args: ['--rounds', '1'],
    read: (dir) => {
      const { table } = JSON.parse(fs.readFileSync(path.join(dir, 'benchmark/out/overhead.json'), 'utf8'));
      const f = {};
      for (const r of table.filter((t) => t.config.includes('tiergate'))) {
        f[`${r.config} vs bare %`] = 100 * r.ratio;
        f[`${r.config} CPU µs/req above bare`] = r.cpuUsExtra;
      }
      return f;
    },
  },
  defense: {
    script: 'benchmark/defense.js',
    args: ['--only', 'cost', '--runs', '1'],
    read: (dir) => {
      const { cost } = JSON.parse(fs.readFileSync(path.join(dir, 'benchmark/out/defense.json'), 'utf8'));
      const f = {};
      for (const r of cost.table.filter((t) => t.id.startsWith('tiergate'))) f[`${r.id} CPU ns/req above harness`] = median(r.aboveHarness);
      return f;
    },
  },
  ledger: {
    script: 'benchmark/ledger.js',
    args: ['--json', '--quick'],
    read: (dir, stdout) => {
      const line = stdout.trim().split('\n').reverse().find((l) => l.startsWith('{'));
      const f = {};
      for (const r of JSON.parse(line).rows) f[`${r.label} ns/op`] = r.ns;
      return f;
    },
  },
};

function parseArgs(argv) {
  const a = { runs: 5, alt: null, bench: null, extra: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') {
      a.extra = argv.slice(i + 1);
      break;
    }
    if (argv[i] === '--runs') a.runs = Number(argv[++i]);
    else if (argv[i] === '--alt') a.alt = path.resolve(argv[++i]);
    else a.bench = argv[i];
  }
  if (!BENCHES[a.bench] || a.alt === null || !(a.runs >= 1)) {
    console.error('usage: node benchmark/pair.js --alt DIR [--runs 5] overhead|defense|ledger [-- bench args]');
    process.exit(2);
  }
  return a;
}

const fmt = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
const mr = (v) => `${fmt(median(v))} [${fmt(Math.min(...v))}–${fmt(Math.max(...v))}]`;

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const b = BENCHES[a.bench];
  const sides = [
    { name: 'now', dir: path.resolve(__dirname, '..'), runs: [] },
    { name: 'before', dir: a.alt, runs: [] },
  ];
  for (let run = 1; run <= a.runs; run++) {
    // Alternate which side goes first, so a drift in the machine's speed falls on both.
    for (const side of run % 2 ? sides : [...sides].reverse()) {
      await waitForQuiet();
      const r = spawnSync(process.execPath, [b.script, ...b.args, ...a.extra], { cwd: side.dir, encoding: 'utf8', maxBuffer: 64 << 20 });
      if (r.status !== 0) throw new Error(`${side.name} (${side.dir}) run ${run}: exit ${r.status}\n${r.stderr.slice(-2000)}`);
      const f = b.read(side.dir, r.stdout);
      side.runs.push(f);
      console.log(`run ${run} ${side.name}: ${Object.entries(f).map(([k, v]) => `${k} ${fmt(v)}`).join('; ')}`);
    }
  }
  const names = Object.keys(sides[0].runs[0]).filter((k) => sides[1].runs.every((f) => k in f));
  console.log(`\n${a.bench}: ${a.runs} interleaved pairs, now = ${sides[0].dir}, before = ${sides[1].dir}`);
  console.log(`${'figure'.padEnd(58)} ${'now: median [range]'.padStart(24)} ${'before'.padStart(24)} ${'now/before (pairs)'.padStart(20)}`);
  for (const k of names) {
    const now = sides[0].runs.map((f) => f[k]);
    const before = sides[1].runs.map((f) => f[k]);
    const ratio = now.map((v, i) => v / before[i]);
    console.log(`${k.padEnd(58)} ${mr(now).padStart(24)} ${mr(before).padStart(24)} ${median(ratio).toFixed(2).padStart(20)}`);
  }
  const only = (s, t) => Object.keys(s.runs[0]).filter((k) => !(k in t.runs[0]));
  const missing = [...only(sides[0], sides[1]), ...only(sides[1], sides[0])];
  if (missing.length) console.log(`(on one side only: ${missing.join(', ')})`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

'use strict';
// npm run demo — the overload scenario in a few seconds. A server with a CPU-bound route (~3 ms of
// hashing per request, in a child process) is driven by an open-loop generator at 3x its measured
// capacity, 10% critical / 30% standard / 60% background traffic: first unprotected, then behind
// tiergate's gatekeeper. The full benchmark, with toobusy-js and @fastify/under-pressure side by
// side and the targets checked, is `npm run bench:overload`.
const { calibrateWork, measureCapacity } = require('../benchmark/lib/scenario');
const { TIERS, configurations, runConfig } = require('../benchmark/overload');

const LOAD = 3;
const SECONDS = 3;

const f1 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(1));

async function main() {
  const t0 = Date.now();
  console.log('tiergate demo: a CPU-bound Express route under 3x overload, with and without tiergate\n');
  const workIters = calibrateWork(3);
  const cap = (await measureCapacity({ workIters, concurrency: 8, durationMs: 1200, warmupMs: 300 })).reqPerSec;
  console.log(`measured capacity: ${Math.round(cap)} req/s; now offering ${Math.round(LOAD * cap)} req/s for ${SECONDS} s to each server`);
  console.log('(open loop: requests leave on schedule whatever the server does, 2 s client timeout)\n');
  const configs = configurations(cap).filter((c) => c.id === 'none' || c.id === 'tiergate-defaults');
  const results = [];
  for (const cfg of configs) {
    process.stdout.write(`  running ${cfg.title} ... `);
    try {
      const r = await runConfig(cfg, { cap, workIters, load: LOAD, seconds: SECONDS, quick: true });
      results.push(r);
      console.log(`server lag p99 ${f1(r.over.server.lag.p99)} ms`);
    } catch (err) {
      console.log(`could not run: ${err.message.split('\n')[0]}`);
    }
  }
  if (results.length === 0) process.exit(1);
  const col = 34;
  console.log(`\n${'tier'.padEnd(12)}${results.map((r) => ('| ' + (r.cfg.id === 'none' ? 'no protection' : 'tiergate')).padEnd(col)).join('')}`);
  console.log(`${''.padEnd(12)}${results.map(() => '| success    p50 ms    p99 ms'.padEnd(col)).join('')}`);
  for (const tier of TIERS) {
    let line = tier.padEnd(12);
    for (const r of results) {
      const t = r.over.load.tiers[tier];
      line += `| ${(f1(t.successPct) + '%').padStart(7)} ${f1(t.p50).padStart(9)} ${f1(t.p99).padStart(9)}`.padEnd(col);
    }
    console.log(line);
  }
  console.log(`${'goodput'.padEnd(12)}${results.map((r) => `| ${Math.round(r.over.load.goodputPerSec)} 2xx answers per second`.padEnd(col)).join('')}`);
  console.log('\nsuccess: share of the tier\'s requests answered 2xx before the 2 s client timeout; p50, p99: how long');
  console.log('those answers took. goodput: 2xx answers per second, however late: without protection they are');
  console.log('served in socket order, so most arrive near the timeout (see p99), while tiergate refuses at once what');
  console.log('the loop cannot run (503 + Retry-After) and answers the rest, critical first, without the wait.\n');
  for (const r of results) {
    const c = r.over.load.tiers.critical;
    const rej = {};
    for (const tier of TIERS) for (const [k, v] of Object.entries(r.over.load.tiers[tier].rejections)) rej[k] = (rej[k] || 0) + v;
    const what = Object.entries(rej).map(([k, v]) => `${v} ${k === 'timeout' ? 'timed out' : k}`).join(', ') || 'none';
    console.log(`${r.cfg.id === 'none' ? 'no protection' : 'tiergate'}: critical ${f1(c.successPct)}% answered (p99 ${f1(c.p99)} ms); failures: ${what}`);
  }
  console.log(`(${((Date.now() - t0) / 1000).toFixed(0)} s)  Full comparison: npm run bench:overload.  The ledger on its own: node examples/ledger.js`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

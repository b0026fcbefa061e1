'use strict';
// `npm run chaos` (issue 35): cluster mode and the decision service while a neighbour misbehaves, with
// the faults made for real: a sliding window under 6x demand, a stalled event loop, CPU-burning
// neighbours, Redis SIGSTOPped and SIGKILLed mid-load, bans made while Redis is away
// (benchmark/chaos/cluster.js, on redis-servers of its own), a hung service instance holding row
// locks and a hung PostgreSQL (benchmark/chaos/service.js, on a PostgreSQL cluster of its own).
// Prints one table (scenario | admitted vs limit | max wait | unanswered | verdict), each row judged
// against the documented target of its scenario (docs/cluster.md, docs/service.md), then the targets
// that failed; exits 1 if any did (2 if the run itself broke). A scenario whose server is not
// installed is skipped, with a line that says so.
//
//   node benchmark/chaos.js [--smoke] [--verbose]
//     --smoke    shorter loads, one round of the CPU contention, 1.5 s service faults (under a minute)
//     --verbose  every target of every row with what was observed, and notes
// A full run takes about 40 s; every load is bounded in count and time.
const { performance } = require('node:perf_hooks');
const { runClusterChaos } = require('./chaos/cluster');
const { runServiceChaos } = require('./chaos/service');
const { table } = require('./chaos/row');

async function main() {
  const smoke = process.argv.includes('--smoke');
  const verbose = process.argv.includes('--verbose');
  const log = (line) => console.error(line);
  const t0 = performance.now();
  const rows = [...(await runClusterChaos({ smoke, log })), ...(await runServiceChaos({ faultMs: smoke ? 1500 : undefined, log }))];
  console.log(table(rows, { verbose }));
  const failed = rows.filter((r) => r.failures.length > 0).length;
  console.log(`\n${rows.length} rows, ${failed} FAIL; ${smoke ? 'smoke ' : ''}run of ${Math.round((performance.now() - t0) / 1000)} s`);
  return failed === 0 ? 0 : 1;
}

if (require.main === module) {
  main().then((code) => process.exit(code), (err) => {
    console.error(err);
    process.exit(2);
  });
}

module.exports = { main };

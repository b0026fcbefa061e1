'use strict';
// What one activity flush of `tiergate serve` costs on PostgreSQL: the store's own writeActivity,
// timed alone against a cluster of its own holding load:test's clients (one hot, 10,000 others), with
// load:test's mix of records (half the hot client's). With --alt DIR, the same store of another
// checkout is timed too, alternating round by round on one cluster each, so the two compare in one run.
// With --drop-indexes, this checkout's store is also timed without each of the activity table's
// secondary indexes and without both (what each costs a flush; the schema keeps them, for the
// per-client history and retention by age).
//   node benchmark/activity-flush.js [--records 550] [--flushes 300] [--rounds 5] [--alt DIR] [--drop-indexes]
const path = require('node:path');
const { startPostgres, pgMissing } = require('../__test__/service/helpers');
const { median, medianRange } = require('./lib/stats');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
}
const RECORDS = Number(arg('records', 550));
const FLUSHES = Number(arg('flushes', 300));
const ROUNDS = Number(arg('rounds', 5));
const ALT = arg('alt', null);
const DROP = process.argv.includes('--drop-indexes');
const COLD = 10_000;

/** Median ms per flush over FLUSHES flushes of the store in `root`, on a fresh cluster, with the
 * indexes named in `drop` dropped. */
async function round(root, drop) {
  const { PostgresStore } = require(path.join(root, 'lib/service/stores/postgres'));
  const pg = await startPostgres();
  const store = new PostgresStore({ connectionString: pg.url, poolSize: 2 });
  try {
    await store.open();
    for (const index of drop) await store.pool.query(`DROP INDEX ${index}`);
    await store.pool.query(`INSERT INTO clients (client_key, algorithm, max_requests, window_seconds, state, created_at, updated_at)
      SELECT 'cold-' || g, 'sliding_window', 100, 60, '{"entries":[]}', 0, 0 FROM generate_series(0, ${COLD - 1}) g`);
    await store.pool.query(`INSERT INTO clients (client_key, algorithm, requests_per_second, burst_size, state, created_at, updated_at)
      VALUES ('hot', 'token_bucket', 1000, 1000, '{}', 0, 0)`);
    let at = Date.now();
    const times = [];
    for (let f = 0; f < FLUSHES; f++) {
      const records = Array.from({ length: RECORDS }, (_, i) => ({
        clientKey: i % 2 ? 'hot' : `cold-${(Math.random() * COLD) | 0}`, at: at + (i % 50), allowed: Math.random() < 0.8, cost: 1, responseMs: Math.random() * 5,
      }));
      at += 50;
      const t0 = process.hrtime.bigint();
      await store.writeActivity(records);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return median(times);
  } finally {
    await store.close();
    await pg.stop();
  }
}

(async () => {
  if (pgMissing()) throw new Error('PostgreSQL is not installed (initdb, pg_ctl)');
  const here = path.join(__dirname, '..');
  const roots = [['this checkout', here, []], ...(ALT ? [['--alt', path.resolve(ALT), []]] : []),
    ...(DROP ? [['no by_time', here, ['activity_by_time']], ['no by_client', here, ['activity_by_client']],
      ['neither', here, ['activity_by_time', 'activity_by_client']]] : [])];
  const ms = roots.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < roots.length; i++) ms[i].push(await round(roots[i][1], roots[i][2]));
  }
  console.log(`ms per flush of ${RECORDS} records (median of ${FLUSHES} flushes per round; median [range] of ${ROUNDS} rounds)`);
  roots.forEach(([name], i) => {
    const xs = ms[i];
    console.log(`${name.padEnd(14)} ${medianRange(xs, (v) => v.toFixed(2))}   rounds: ${xs.map((x) => x.toFixed(2)).join(' ')}`);
  });
})().catch((err) => { console.error(err); process.exit(1); });

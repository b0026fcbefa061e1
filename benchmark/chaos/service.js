'use strict';
// The decision service's part of a chaos run, with the faults made for real on a PostgreSQL cluster
// of its own (the service tests' helpers):
//   4. hung instance: two instances on one PostgreSQL; A is SIGSTOPped while one of its batches holds
//      the row lock of a hot client (caught with a NOWAIT probe) and stays stopped; B is checked for
//      that client and for one A never touched.
//   5. hung PostgreSQL: the postmaster and all its children SIGSTOPped, then SIGCONTed; one instance is
//      checked throughout.
// One row per scenario: the 200s of its clients against their limits (never above), the longest a
// check waited for its answer, and the checks with no answer within UNANSWERED_MS.
// `node benchmark/chaos/service.js` prints the table; `runServiceChaos()` returns the rows, for a
// chaos command that assembles several such modules. Bounded: about 30 s, at most 60.
const { performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const { startService, startPostgres, pgMissing, admin, check } = require('../../__test__/service/helpers');

/** A check with no answer after this long counts as unanswered (and is not waited for further). */
const UNANSWERED_MS = 5000;
/** How long each fault lasts. */
const FAULT_MS = 3000;
const LIMIT = 300; // per client: a sliding window of LIMIT per 10 minutes

/** One check: { status, ms }, status null when unanswered within UNANSWERED_MS (or failed). */
async function timedCheck(url, key) {
  const t0 = performance.now();
  const status = await Promise.race([check(url, key).then((r) => r.status, () => null), sleep(UNANSWERED_MS, null)]);
  return { key, status, ms: status === null ? UNANSWERED_MS : performance.now() - t0 };
}

/** Waves of `perWave` checks (keys in turn) every `everyMs`, for `ms`; resolves every answer. */
async function waves(url, keys, { ms, perWave = 10, everyMs = 100 }) {
  const out = [];
  const end = performance.now() + ms;
  for (let i = 0; performance.now() < end; i++) {
    for (let j = 0; j < perWave; j++) out.push(timedCheck(url, keys[(i * perWave + j) % keys.length]));
    await sleep(everyMs);
  }
  return Promise.all(out);
}

/** The row of a scenario: `admittedOf` counts the 200s against `limit`; `answers` (the checks of the
 * instance under test) the waits, the unanswered and the statuses. */
function row(scenario, { admittedOf, answers, limit }) {
  const admitted = admittedOf.filter((a) => a.status === 200).length;
  return {
    scenario,
    admitted,
    limit,
    maxWaitMs: Math.round(Math.max(0, ...answers.map((a) => a.ms))),
    unanswered: answers.filter((a) => a.status === null).length,
    statuses: answers.reduce((m, a) => ({ ...m, [a.status ?? 'none']: (m[a.status ?? 'none'] || 0) + 1 }), {}),
  };
}

async function newClient(url, clientKey) {
  const r = await admin(url, 'POST', '/api/v1/admin/clients', { clientKey, algorithm: 'sliding_window', maxRequests: LIMIT, windowSeconds: 600 });
  if (r.status !== 201) throw new Error(`creating ${clientKey}: ${r.status} ${JSON.stringify(r.body)}`);
}

/** Whether `key`'s row is locked by another session (NOWAIT from `c`, then let go). */
async function rowIsLocked(c, key) {
  try {
    await c.query('BEGIN');
    await c.query('SELECT 1 FROM clients WHERE client_key = $1 FOR UPDATE NOWAIT', [key]);
    return false;
  } catch (err) {
    if (err.code === '55P03') return true;
    throw err;
  } finally {
    await c.query('ROLLBACK');
  }
}

async function hungInstance(pg, Client) {
  const [a, b] = await Promise.all([startService({ flags: { database: pg.url } }).ready, startService({ flags: { database: pg.url } }).ready]);
  const probe = new Client({ connectionString: pg.url });
  await probe.connect();
  let stopped = false;
  let loading = true;
  const onA = [];
  try {
    await newClient(a.url, 'chaos-hot');
    await newClient(a.url, 'chaos-cold');
    // 16 checks of the hot client in flight at A; stop A until it is caught holding the row's lock.
    const load = Array.from({ length: 16 }, async () => { while (loading && onA.length < LIMIT / 2) onA.push(await timedCheck(a.url, 'chaos-hot')); });
    let locked = false;
    for (let attempt = 0; attempt < 40 && !locked; attempt++) {
      await sleep(15 + (attempt % 5) * 7);
      a.child.kill('SIGSTOP');
      stopped = true;
      locked = await rowIsLocked(probe, 'chaos-hot');
      if (!locked) { a.child.kill('SIGCONT'); stopped = false; }
    }
    if (!locked) throw new Error('instance A was never caught holding the row lock');
    const onB = await waves(b.url, ['chaos-hot', 'chaos-cold'], { ms: FAULT_MS });
    a.child.kill('SIGCONT');
    stopped = false;
    loading = false;
    await Promise.all(load);
    // A's own checks wait while it is stopped, as they must: they count towards the admitted only.
    return row('4 hung instance (A SIGSTOPped holding a lock), checks at B', { admittedOf: [...onA, ...onB], answers: onB, limit: 2 * LIMIT });
  } finally {
    if (stopped) a.child.kill('SIGCONT');
    loading = false;
    await probe.end();
    await Promise.all([a.stop(), b.stop()]);
  }
}

async function hungPostgres(pg) {
  const svc = await startService({ flags: { database: pg.url } }).ready;
  let frozen = false;
  try {
    await newClient(svc.url, 'chaos-frozen');
    const before = await waves(svc.url, ['chaos-frozen'], { ms: 500 });
    pg.signal('SIGSTOP');
    frozen = true;
    const during = await waves(svc.url, ['chaos-frozen'], { ms: FAULT_MS });
    pg.signal('SIGCONT');
    frozen = false;
    const after = await waves(svc.url, ['chaos-frozen'], { ms: 1000 });
    const all = [...before, ...during, ...after];
    return row('5 hung PostgreSQL (every process SIGSTOPped)', { admittedOf: all, answers: all, limit: LIMIT });
  } finally {
    if (frozen) pg.signal('SIGCONT');
    await svc.stop();
  }
}

/** Runs scenarios 4 and 5; resolves their rows ([] with a reason when PostgreSQL is not installed). */
async function runServiceChaos({ log = () => {} } = {}) {
  const missing = pgMissing();
  if (missing) {
    log(`service chaos skipped: ${missing}`);
    return [];
  }
  const { Client } = require('pg');
  const pg = await startPostgres();
  try {
    const rows = [await hungInstance(pg, Client)];
    rows.push(await hungPostgres(pg));
    return rows;
  } finally {
    await pg.stop();
  }
}

function table(rows) {
  const lines = ['| scenario | admitted / limit | max wait (ms) | unanswered | answers |', '|---|---|---|---|---|'];
  for (const r of rows) lines.push(`| ${r.scenario} | ${r.admitted} / ${r.limit} | ${r.maxWaitMs} | ${r.unanswered} | ${Object.entries(r.statuses).map(([s, n]) => `${s}: ${n}`).join(', ')} |`);
  return lines.join('\n');
}

module.exports = { runServiceChaos, table, UNANSWERED_MS, FAULT_MS };

if (require.main === module) {
  const t0 = performance.now();
  runServiceChaos({ log: console.log }).then((rows) => {
    console.log(table(rows));
    console.log(`(${Math.round((performance.now() - t0) / 1000)} s; a check unanswered after ${UNANSWERED_MS} ms is counted and not waited for; each fault lasts ${FAULT_MS} ms)`);
    process.exit(0);
  }, (err) => {
    console.error(err);
    process.exit(1);
  });
}

'use strict';
// The decision service's part of a chaos run, with the faults made for real on a PostgreSQL cluster
// of its own (the service tests' helpers):
//   4. hung instance: two instances on one PostgreSQL; A is SIGSTOPped while one of its batches holds
//      the row lock of a hot client (caught with a NOWAIT probe) and stays stopped; B is checked for
//      that client and for one A never touched.
//   5. hung PostgreSQL: the postmaster and all its children SIGSTOPped, then SIGCONTed; one instance is
//      checked throughout, and its readiness probed.
// One row per scenario (./row.js): the 200s of its clients against their limits (never above), the
// longest a check waited for its answer, and the checks with no answer within UNANSWERED_MS, judged
// against docs/service.md "Bounded waits".
// `node benchmark/chaos/service.js` prints the table; `runServiceChaos()` returns the rows, for
// benchmark/chaos.js. Bounded: about 30 s, at most 60.
const { performance } = require('node:perf_hooks');
const { setTimeout: sleep } = require('node:timers/promises');
const { startService, startPostgres, pgMissing, admin, check, request, rowIsLocked } = require('../../__test__/service/helpers');
const { OPTIONS } = require('../../lib/service/config');
const { judged, table } = require('./row');

/** A check with no answer after this long counts as unanswered (and is not waited for further). */
const UNANSWERED_MS = 5000;
/** How long each fault lasts (longer than --pg-idle-in-transaction-timeout-ms, 2 s: the server ends a
 * stopped instance's transaction within it). */
const FAULT_MS = 3000;
const LIMIT = 300; // per client: a sliding window of LIMIT per 10 minutes
/** A check's bound: --store-timeout-ms (its default here) of its arrival... */
const STORE_TIMEOUT_MS = OPTIONS.storeTimeoutMs.default;
/** ...plus the HTTP round trip and the event-loop delays of both processes on a loaded 2-core machine
 * (docs: "plus this process's own event-loop delays"). */
const WAIT_MARGIN_MS = 250;

/** One check: { status, error, ms }, status null when unanswered within UNANSWERED_MS (or failed). */
async function timedCheck(url, key) {
  const t0 = performance.now();
  const answer = await Promise.race([check(url, key).then((r) => r, () => null), sleep(UNANSWERED_MS, null)]);
  return { key, status: answer && answer.status, error: answer && answer.body && answer.body.error, ms: answer === null ? UNANSWERED_MS : performance.now() - t0 };
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

/** Answers counted by status ('none' for unanswered). */
const statusesOf = (answers) => answers.reduce((m, a) => ({ ...m, [a.status ?? 'none']: (m[a.status ?? 'none'] || 0) + 1 }), {});
const maxWait = (answers) => Math.max(0, ...answers.map((a) => a.ms));
const unansweredOf = (answers) => answers.filter((a) => a.status === null).length;

/** The targets every service row shares: never above the limit, every check answered within its bound. */
function boundedTargets({ admitted, limit, answers }) {
  return [
    [admitted <= limit, `admitted <= ${limit} (${admitted})`],
    [unansweredOf(answers) === 0, `every check answered (${unansweredOf(answers)} unanswered after ${UNANSWERED_MS} ms)`],
    [maxWait(answers) <= STORE_TIMEOUT_MS + WAIT_MARGIN_MS, `every check answered within --store-timeout-ms ${STORE_TIMEOUT_MS} + ${WAIT_MARGIN_MS} (${Math.round(maxWait(answers))} ms)`],
  ];
}

async function newClient(url, clientKey) {
  const r = await admin(url, 'POST', '/api/v1/admin/clients', { clientKey, algorithm: 'sliding_window', maxRequests: LIMIT, windowSeconds: 600 });
  if (r.status !== 201) throw new Error(`creating ${clientKey}: ${r.status} ${JSON.stringify(r.body)}`);
}


async function hungInstance(pg, Client, faultMs) {
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
    // A refused check locks the row as an admitted one does, so the load runs until A is caught (on
    // a loaded machine that can take many tries: each stop lands between two batches or in one).
    const load = Array.from({ length: 16 }, async () => { while (loading) onA.push(await timedCheck(a.url, 'chaos-hot')); });
    let locked = false;
    for (let attempt = 0; attempt < 300 && !locked; attempt++) {
      await sleep(15 + (attempt % 5) * 7);
      a.child.kill('SIGSTOP');
      stopped = true;
      locked = await rowIsLocked(probe, 'chaos-hot');
      if (!locked) { a.child.kill('SIGCONT'); stopped = false; }
    }
    if (!locked) throw new Error('instance A was never caught holding the row lock');
    const onB = await waves(b.url, ['chaos-hot', 'chaos-cold'], { ms: faultMs });
    a.child.kill('SIGCONT');
    stopped = false;
    loading = false;
    await Promise.all(load);
    // A's own checks wait while it is stopped, as they must: they count towards the admitted only.
    const admitted = [...onA, ...onB].filter((a) => a.status === 200).length;
    const cold = onB.filter((a) => a.key === 'chaos-cold');
    const hot = onB.filter((a) => a.key === 'chaos-hot');
    // A's load may spend the hot client's window before A is caught holding its row (it runs until
    // then): B's denials are then the right answer.
    const hotAdmitted = [...onA, ...hot].filter((a) => a.status === 200).length;
    const spent = hotAdmitted >= LIMIT;
    const hotOk = hot.every((a) => a.status === 200 || (a.status === 503 && a.error === 'STORE_UNAVAILABLE') || (a.status === 429 && spent));
    return judged(`4 hung service instance (A SIGSTOPped ${faultMs} ms holding a row lock), checks at B`, {
      admitted: `${admitted} / ${2 * LIMIT}`,
      maxWaitMs: maxWait(onB),
      unanswered: unansweredOf(onB),
      targets: [
        ...boundedTargets({ admitted, limit: 2 * LIMIT, answers: onB }),
        [cold.length > 0 && cold.every((a) => a.status === 200), `B decides the client A never touched: all 200 (${JSON.stringify(statusesOf(cold))})`],
        [hotAdmitted <= LIMIT, `the locked client admitted <= ${LIMIT} (${hotAdmitted})`],
        [hotOk, `B answers the locked client 200, 503 STORE_UNAVAILABLE, or 429 once its ${LIMIT} are spent (${JSON.stringify(statusesOf(hot))}, ${hotAdmitted} admitted)`],
      ],
      notes: `at B: cold ${JSON.stringify(statusesOf(cold))}, hot ${JSON.stringify(statusesOf(hot))} (the server ends A's transaction after the 2 s idle timeout); ${onA.length} checks at A`,
    });
  } finally {
    if (stopped) a.child.kill('SIGCONT');
    loading = false;
    await probe.end();
    await Promise.all([a.stop(), b.stop()]);
  }
}

/** GET /health/ready: its status, null when unanswered within UNANSWERED_MS. */
const readiness = (url) => Promise.race([request(url, 'GET', '/health/ready').then((r) => r.status, () => null), sleep(UNANSWERED_MS, null)]);

async function hungPostgres(pg, faultMs) {
  const svc = await startService({ flags: { database: pg.url } }).ready;
  let frozen = false;
  try {
    await newClient(svc.url, 'chaos-frozen');
    const before = await waves(svc.url, ['chaos-frozen'], { ms: 500 });
    pg.signal('SIGSTOP');
    frozen = true;
    const duringChecks = waves(svc.url, ['chaos-frozen'], { ms: faultMs });
    // Readiness is 503 within a store timeout of the freeze: probed once that has passed.
    await sleep(Math.min(faultMs / 2, 2 * STORE_TIMEOUT_MS));
    const readyDuring = await readiness(svc.url);
    const during = await duringChecks;
    pg.signal('SIGCONT');
    frozen = false;
    const after = await waves(svc.url, ['chaos-frozen'], { ms: 1000 });
    let readyAfter = null;
    for (let i = 0; i < 40 && readyAfter !== 200; i++) {
      readyAfter = await readiness(svc.url);
      if (readyAfter !== 200) await sleep(100);
    }
    const all = [...before, ...during, ...after];
    const admitted = all.filter((a) => a.status === 200).length;
    const lastWave = after.slice(-10);
    return judged(`5 hung PostgreSQL (every process SIGSTOPped ${faultMs} ms), one instance`, {
      admitted: `${admitted} / ${LIMIT}`,
      maxWaitMs: maxWait(all),
      unanswered: unansweredOf(all),
      targets: [
        ...boundedTargets({ admitted, limit: LIMIT, answers: all }),
        [during.some((a) => a.status === 503) && during.every((a) => a.status === 200 || (a.status === 503 && a.error === 'STORE_UNAVAILABLE')), `while frozen: 503 STORE_UNAVAILABLE (a batch committed before the freeze may still answer 200): ${JSON.stringify(statusesOf(during))}`],
        [readyDuring === 503, `/health/ready 503 while frozen (${readyDuring ?? 'no answer'})`],
        [readyAfter === 200 && lastWave.every((a) => a.status === 200), `after SIGCONT: ready (${readyAfter ?? 'no answer'}) and checks decided again (last wave ${JSON.stringify(statusesOf(lastWave))})`],
      ],
      notes: `before ${JSON.stringify(statusesOf(before))}, during ${JSON.stringify(statusesOf(during))}, after ${JSON.stringify(statusesOf(after))}`,
    });
  } finally {
    if (frozen) pg.signal('SIGCONT');
    await svc.stop();
  }
}

/** Runs scenarios 4 and 5; resolves their rows ([] with a reason when PostgreSQL is not installed). */
async function runServiceChaos({ faultMs = FAULT_MS, log = () => {} } = {}) {
  const missing = pgMissing();
  if (missing) {
    log(`service chaos skipped: ${missing}`);
    return [];
  }
  const { Client } = require('pg');
  const pg = await startPostgres();
  try {
    const rows = [await hungInstance(pg, Client, faultMs)];
    rows.push(await hungPostgres(pg, faultMs));
    return rows;
  } finally {
    await pg.stop();
  }
}

module.exports = { runServiceChaos, UNANSWERED_MS, FAULT_MS };

if (require.main === module) {
  const t0 = performance.now();
  runServiceChaos({ log: console.log }).then((rows) => {
    console.log(table(rows, { verbose: true }));
    console.log(`(${Math.round((performance.now() - t0) / 1000)} s; a check unanswered after ${UNANSWERED_MS} ms is counted and not waited for; each fault lasts ${FAULT_MS} ms)`);
    process.exit(rows.some((r) => r.failures.length > 0) ? 1 : 0);
  }, (err) => {
    console.error(err);
    process.exit(1);
  });
}

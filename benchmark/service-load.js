'use strict';
// `npm run load:test`: the decision service against the reference design it replaces, side by side
// in one run. 550 concurrent callers, half the checks on one hot client (token bucket, 1000/s, burst
// 1000), the rest on 10,000 others (sliding window, 100 per 60 s), against:
//   - `tiergate serve`, embedded store (SQLite)
//   - `tiergate serve` on PostgreSQL, 1 instance and 3 instances (the callers spread over them)
//   - the reference design re-implemented (benchmark/lib/pern-reference.js): Express, one PostgreSQL
//     transaction with SELECT … FOR UPDATE and an activity insert per check
//   - a trivial node:http server that answers every check alike: the ceiling of one node:http
//     process on this machine, beside the generator, in the same runs, which says how fast the
//     machine was (that server is its bottleneck, not the generator: with --processes 2 it answers
//     no more)
// Reports decisions/s (all, and the hot client's), p50/p99 (ms) and the hot client's allowed checks
// against its limit over the run (burst + rate × elapsed): never above it. Median and range over
// --runs (default 5) of --seconds each (default 5), each after --warmup seconds of the same load that
// are not measured (default 1: see benchmark/lib/check-load.js).
// The load generator runs in --processes (default 1) processes of its own; --ceiling measures the
// trivial server alone (a single-process service's figures mean something only below it).
// --pg-stats starts the cluster with pg_stat_statements and prints, per database, the statements
// that took PostgreSQL the most time over the runs. --cpu-prof DIR writes a CPU profile of each
// service process over its life (node's --cpu-prof) to DIR, for `node benchmark/profile-split.js`;
// with one target (--only), as the targets alternate and each service idles while the others run.
//   node benchmark/service-load.js [--runs N] [--seconds S] [--warmup S] [--connections C] [--processes P] [--only name,name] [--ceiling] [--pg-stats] [--cpu-prof DIR]
const path = require('node:path');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const { Pool } = require('pg');
const { startService, startPostgres, pgMissing, admin, tmpdir } = require('../__test__/service/helpers');
const { checkLoad } = require('./lib/check-load');
const { waitForQuiet } = require('./lib/quiet');

function arg(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : def;
}
const RUNS = Number(arg('runs', 5));
const SECONDS = Number(arg('seconds', 5));
const WARMUP = Number(arg('warmup', 1));
const CONNECTIONS = Number(arg('connections', 550));
const ONLY = arg('only', null)?.split(',');
const PROCESSES = Number(arg('processes', 1));
const PG_STATS = process.argv.includes('--pg-stats');
const CPU_PROF = arg('cpu-prof', null) && path.resolve(arg('cpu-prof'));
const COLD = 10_000;
const HOT = { clientKey: 'hot', algorithm: 'token_bucket', requestsPerSecond: 1000, burstSize: 1000 };
const cold = (i) => ({ clientKey: `cold-${i}`, algorithm: 'sliding_window', maxRequests: 100, windowSeconds: 60 });

async function createViaApi(url) {
  for (let i = 0; i < COLD; i += 200) {
    await Promise.all(Array.from({ length: Math.min(200, COLD - i) }, (_, j) => admin(url, 'POST', '/api/v1/admin/clients', cold(i + j))));
  }
  const r = await admin(url, 'POST', '/api/v1/admin/clients', HOT);
  if (r.status !== 201) throw new Error(`cannot create the hot client: ${r.status}`);
}

/** A target: start(), reset() before each run (the hot client full again; returns when), stop(). */
function serviceTarget(name, { instances, database }) {
  let services = [];
  let dir;
  return {
    name,
    async start() {
      dir = database ? null : tmpdir('tiergate-load-');
      const flags = database ? { database } : { data: dir };
      const slug = name.replace(/\W+/g, '-');
      const execArgv = (i) => (CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`, `--cpu-prof-name=${slug}-${i + 1}.cpuprofile`] : []);
      services = await Promise.all(Array.from({ length: instances }, (_, i) => startService({ flags, execArgv: execArgv(i) }).ready));
      await createViaApi(services[0].url);
    },
    urls: () => services.map((s) => s.url),
    async reset() {
      const r = await admin(services[0].url, 'PUT', '/api/v1/admin/clients/hot', HOT); // replaces and resets its state
      if (r.status !== 200) throw new Error(`reset failed: ${r.status}`);
      return Date.now();
    },
    async stop() {
      await Promise.all(services.map((s) => s.stop()));
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function referenceTarget(database) {
  let child;
  let url;
  let pool;
  return {
    name: 'reference (Express + PG, FOR UPDATE per check)',
    async start() {
      child = spawn(process.execPath, [path.join(__dirname, 'lib', 'pern-reference.js')], { env: { ...process.env, DATABASE_URL: database }, stdio: ['ignore', 'pipe', 'inherit'] });
      url = await new Promise((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => { out += d; const m = /listening on (\S+)/.exec(out); if (m) resolve(m[1]); });
        child.on('exit', (code) => reject(new Error(`reference exited ${code}`)));
      });
      pool = new Pool({ connectionString: database, max: 2 });
      await pool.query(`INSERT INTO ref_clients (client_key, algorithm, max_requests, window_seconds)
        SELECT 'cold-' || i, 'sliding_window', 100, 60 FROM generate_series(0, ${COLD - 1}) AS i`);
      await pool.query("INSERT INTO ref_clients (client_key, algorithm, requests_per_second, burst_size, tokens) VALUES ('hot', 'token_bucket', $1, $2, $3)", [HOT.requestsPerSecond, HOT.burstSize, HOT.burstSize]);
    },
    urls: () => [url],
    async reset() {
      await pool.query("UPDATE ref_clients SET tokens = burst_size, last_refill = now() WHERE client_key = 'hot'");
      return Date.now();
    },
    async stop() {
      child.kill('SIGTERM');
      await pool.end();
    },
  };
}

/** Runs `fn` with a one-connection pool on `url`, then closes the pool. */
async function withPool(url, fn) {
  const db = new Pool({ connectionString: url, max: 1 });
  try {
    return await fn(db);
  } finally {
    await db.end();
  }
}

/** Prints per database its five costliest statements since pg_stat_statements was reset: calls, total
 * and mean ms, and the total against the database's seconds under load (execution time, so waits on
 * row locks count: the reference's lock exceeds 100%). */
function printPgStats(url, loadSeconds) {
  return withPool(url, async (db) => {
    const { rows } = await db.query(`SELECT d.datname AS db, s.calls, s.total_exec_time AS ms, s.mean_exec_time AS mean,
        left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90) AS query,
        row_number() OVER (PARTITION BY d.datname ORDER BY s.total_exec_time DESC) AS n
      FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname IN ('svc1', 'svc3', 'ref')`);
    console.error(`\nPostgreSQL statements over the runs (${loadSeconds} s under load per database, warm-ups included), the five costliest per database by execution time (waits on locks included):`);
    for (const r of rows.filter((x) => x.n <= 5).sort((a, b) => a.db.localeCompare(b.db) || a.n - b.n)) {
      console.error(`  ${r.db}: ${r.calls} calls, ${r.ms.toFixed(0)} ms (${((100 * r.ms) / 1000 / loadSeconds).toFixed(1)}% of its load's time), ${r.mean.toFixed(2)} ms each | ${r.query}`);
    }
  });
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const fmt = (xs, digits = 0) => `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

/** A node:http server that answers every check with a fixed 200 JSON body, in its own process. */
function trivialTarget() {
  let child;
  let url;
  const code = `const http = require('node:http'); const body = '{"allowed":true,"clientKey":"x","algorithm":"token_bucket","limit":1000,"remaining":999,"resetAt":"2026-01-01T00:00:00.000Z"}';
    const s = http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length }); res.end(body); }); });
    s.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + s.address().port));`;
  return {
    name: 'trivial node:http server (the ceiling of one node process)',
    ceiling: true,
    async start() {
      child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
      url = await new Promise((resolve) => child.stdout.on('data', (d) => { const m = /listening on (\S+)/.exec(String(d)); if (m) resolve(m[1]); }));
    },
    urls: () => [url],
    async reset() { return Date.now(); },
    async stop() { child.kill('SIGTERM'); },
  };
}

async function main() {
  if (process.argv.includes('--ceiling')) return ceiling();
  const skip = pgMissing();
  let pg = null;
  const targets = [trivialTarget(), serviceTarget('tiergate serve, embedded SQLite', { instances: 1 })];
  if (!skip) {
    pg = await startPostgres({ settings: PG_STATS ? ['shared_preload_libraries=pg_stat_statements'] : [] });
    const admin0 = new Pool({ connectionString: pg.url, max: 1 });
    for (const db of ['svc1', 'svc3', 'ref']) await admin0.query(`CREATE DATABASE ${db}`);
    if (PG_STATS) await admin0.query('CREATE EXTENSION pg_stat_statements');
    await admin0.end();
    const on = (db) => pg.url.replace(/\/postgres$/, `/${db}`);
    targets.push(serviceTarget('tiergate serve, PostgreSQL, 1 instance', { instances: 1, database: on('svc1') }));
    targets.push(serviceTarget('tiergate serve, PostgreSQL, 3 instances', { instances: 3, database: on('svc3') }));
    targets.push(referenceTarget(on('ref')));
  } else {
    console.log(`PostgreSQL targets skipped: ${skip}`);
  }
  const chosen = ONLY ? targets.filter((t) => ONLY.some((o) => t.name.includes(o))) : targets;
  const results = new Map(chosen.map((t) => [t.name, []]));
  try {
    for (const t of chosen) await t.start();
    // From here: the runs' statements, not the set-up's.
    if (PG_STATS && pg) await withPool(pg.url, (db) => db.query('SELECT pg_stat_statements_reset()'));
    // Alternate the targets run by run, so that a change in the machine's load hits them all alike.
    for (let run = 0; run < RUNS; run++) {
      for (const t of chosen) {
        const since = await t.reset();
        const quiet = await waitForQuiet();
        const r = await checkLoad({ urls: t.urls(), connections: CONNECTIONS, durationMs: SECONDS * 1000, warmupMs: WARMUP * 1000, coldKeys: COLD, processes: PROCESSES });
        // The bucket is full at the reset and no check comes before startedAtMs: nothing can be
        // allowed beyond the burst plus the refill up to the last answer.
        const elapsed = (r.endedAtMs - Math.max(since, r.startedAtMs)) / 1000;
        r.hotLimit = t.ceiling ? null : Math.floor(HOT.burstSize + HOT.requestsPerSecond * elapsed);
        results.get(t.name).push(r);
        const hot = t.ceiling ? '' : `, hot ${r.hot.perSec.toFixed(0)}/s`;
        const split = t.ceiling ? '' : ` (hot ${r.hotP99.toFixed(1)}, others ${r.otherP99.toFixed(1)}), hot allowed ${r.hot.allowed} ≤ ${r.hotLimit}`;
        const settled = quiet.busy === null ? '' : `; quiet after ${quiet.waitedMs} ms (busy ${(100 * quiet.busy).toFixed(0)}%)`;
        process.stderr.write(`run ${run + 1}/${RUNS} ${t.name}: ${r.perSec.toFixed(0)}/s${hot}, p99 ${r.p99.toFixed(1)} ms${split}, errors ${r.errors}${settled}\n`);
      }
    }
    if (PG_STATS && pg) await printPgStats(pg.url, RUNS * (SECONDS + WARMUP));
  } finally {
    for (const t of chosen) await t.stop().catch(() => {});
    if (pg) await pg.stop();
  }
  console.log(`\n${CONNECTIONS} concurrent callers, ${SECONDS} s × ${RUNS} runs after ${WARMUP} s of warm-up each, half on one hot client; median (range)\n`);
  console.log('| target | decisions/s | hot client decisions/s | p50 ms | p99 ms | p99 ms: hot client / others | hot allowed / limit | errors |');
  console.log('|---|---|---|---|---|---|---|---|');
  const isCeiling = (name) => chosen.find((t) => t.name === name).ceiling;
  for (const [name, rs] of results) {
    // The ceiling's server has no clients: its hot-client columns are empty.
    const overLimit = () => rs.some((r) => r.hot.allowed > r.hotLimit);
    const [hot, split, allowed] = isCeiling(name) ? ['—', '—', '—'] : [fmt(rs.map((r) => r.hot.perSec)),
      `${median(rs.map((r) => r.hotP99)).toFixed(1)} / ${median(rs.map((r) => r.otherP99)).toFixed(1)}`,
      `${rs.map((r) => `${r.hot.allowed}/${r.hotLimit}`).join(', ')}${overLimit() ? ' **OVER**' : ''}`];
    console.log(`| ${name} | ${fmt(rs.map((r) => r.perSec))} | ${hot} | ${fmt(rs.map((r) => r.p50), 1)} | ${fmt(rs.map((r) => r.p99), 1)} | ${split} | ${allowed} | ${rs.reduce((n, r) => n + r.errors, 0)} |`);
  }
  const ref = [...results.keys()].find((n) => n.startsWith('reference'));
  const top = [...results.keys()].find(isCeiling);
  const measured = [...results.keys()].filter((n) => n !== ref && !isCeiling(n));
  if (ref) {
    const refHot = median(results.get(ref).map((r) => r.hot.perSec));
    const refP99 = median(results.get(ref).map((r) => r.p99));
    console.log('\nagainst the reference (medians): hot decisions/s ratio, p99 ratio');
    for (const name of measured) {
      const rs = results.get(name);
      console.log(`- ${name}: ${(median(rs.map((r) => r.hot.perSec)) / refHot).toFixed(1)}× the decisions/s, p99 ${(median(rs.map((r) => r.p99)) / refP99).toFixed(2)}× the reference's`);
    }
  }
  if (top) {
    const ceil = median(results.get(top).map((r) => r.perSec));
    console.log(`\nagainst the ceiling of one node process in the same runs (${ceil.toFixed(0)} answers/s, medians):`);
    for (const name of [...measured, ...(ref ? [ref] : [])]) console.log(`- ${name}: ${((100 * median(results.get(name).map((r) => r.perSec))) / ceil).toFixed(0)}% of its decisions/s`);
  }
}

async function ceiling() {
  const t = trivialTarget();
  await t.start();
  const rs = [];
  try {
    for (let run = 0; run < RUNS; run++) {
      const r = await checkLoad({ urls: t.urls(), connections: CONNECTIONS, durationMs: SECONDS * 1000, warmupMs: WARMUP * 1000, coldKeys: COLD, processes: PROCESSES });
      rs.push(r);
      process.stderr.write(`run ${run + 1}/${RUNS}: ${r.perSec.toFixed(0)}/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, errors ${r.errors}\n`);
    }
  } finally {
    await t.stop();
  }
  console.log(`\n${t.name}, ${CONNECTIONS} connections, ${PROCESSES} generator process(es), ${SECONDS} s × ${RUNS} runs after ${WARMUP} s of warm-up each: ${fmt(rs.map((r) => r.perSec))} answers/s, p50 ${fmt(rs.map((r) => r.p50), 1)} ms, p99 ${fmt(rs.map((r) => r.p99), 1)} ms`);
}

main().catch((err) => { console.error(err); process.exit(1); });

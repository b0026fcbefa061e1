'use strict';
// The shared algorithm vectors (__test__/fixtures/algorithm-vectors.json) and what their JS runners
// share: the instant the vectors' times count from, and a PostgreSQL clock the test sets.
const fs = require('node:fs');
const path = require('node:path');

const VECTORS = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'algorithm-vectors.json'), 'utf8'));

// The vectors' t = 0 on the stores' (Unix ms) clocks: a whole hour, so every window of the vectors
// starts at t = 0 as it does for the Rust core's clock, and later than now, so a state made at
// creation time (a bucket's refill instant) is behind every step.
const HOUR = 3_600_000;
const BASE = (Math.floor(Date.now() / HOUR) + 2) * HOUR;

/** Equal to within float rounding (the JS algorithms' arithmetic is in float ms). */
function close(got, want, what) {
  if (!(Math.abs(got - want) < 1e-6)) throw new Error(`${what}: got ${got}, the vectors say ${want}`);
}

/**
 * A clock for the PostgreSQL stores, which read the time from the database (clock_timestamp(), in
 * NOW_MS of lib/service/stores/postgres.js): a `clock_timestamp()` of a schema that the stores'
 * sessions search before pg_catalog (named last in search_path, pg_catalog is searched last), read
 * from a one-row table. The stores' SQL is run as it is; only the server's clock is set.
 * `{ url, set(ms), close() }`: `url` connects with that search_path.
 */
async function pgClock(serverUrl) {
  const pg = require('pg');
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA IF NOT EXISTS vector_clock;
    CREATE TABLE IF NOT EXISTS vector_clock.now_ms (ms float8 NOT NULL);
    INSERT INTO vector_clock.now_ms SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM vector_clock.now_ms);
    CREATE OR REPLACE FUNCTION vector_clock.clock_timestamp() RETURNS timestamptz LANGUAGE sql STABLE
      AS 'SELECT to_timestamp(ms / 1000.0) FROM vector_clock.now_ms'`);
  const url = `${serverUrl}?options=${encodeURIComponent('-c search_path=public,vector_clock,pg_catalog')}`;
  // The clock must be the one the stores read: checked through a session of theirs.
  const probe = new pg.Client({ connectionString: url });
  await probe.connect();
  await admin.query('UPDATE vector_clock.now_ms SET ms = $1', [BASE]);
  const read = Number((await probe.query('SELECT floor(extract(epoch from clock_timestamp()) * 1000)::float8 AS t')).rows[0].t);
  await probe.end();
  if (read !== BASE) throw new Error(`the PostgreSQL test clock reads ${read}, not ${BASE}`);
  return {
    url,
    async set(ms) {
      await admin.query('UPDATE vector_clock.now_ms SET ms = $1', [ms]);
    },
    async close() {
      await admin.end();
    },
  };
}

/**
 * A PostgreSQL started for test `t`, its clock (pgClock) and a store `make(url)` built on it, all
 * closed after the test: `{ clock, store }`.
 */
async function pgWithClock(t, make) {
  const { startPostgres } = require('../service/helpers');
  const pg = await startPostgres();
  const held = {};
  t.after(async () => {
    if (held.store) await held.store.close();
    if (held.clock) await held.clock.close();
    await pg.stop();
  });
  held.clock = await pgClock(pg.url);
  held.store = make(held.clock.url);
  return held;
}

module.exports = { VECTORS, BASE, close, pgClock, pgWithClock };

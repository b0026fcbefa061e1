'use strict';
// The shared store: PostgreSQL, for several instances. A decision batch of one client is one
// transaction that locks the client's row (SELECT … FOR UPDATE), decides the batch in order at the
// database's clock and writes the state back before any answer goes out, so instances never
// over-admit and a crash loses no quota. Migrations run under an advisory lock, so instances that
// start together apply each version once. Every wait is bounded (docs/service.md, "Bounded waits"):
// the server ends lock waits, statements and idle transactions, and this process destroys a
// connection that does not answer by its deadline.
const { performance } = require('node:perf_hooks');
const { requireOptional } = require('../../optional');
const { migrations } = require('../migrations');
const { HttpError } = require('../http');
const rows = require('./rows');
const { OPTIONS } = require('../config');

/** PostgreSQL's lock_not_available: a lock wait ended by lock_timeout (or NOWAIT). */
const LOCK_NOT_AVAILABLE = '55P03';
/** What a batch keeps of its deadline for its round trips after a lock wait (ROLLBACK, the retry). */
const ROUND_TRIPS_MS = 50;

// The advisory lock that serialises migrations (any fixed 64-bit number; this one spells "tiergate").
const MIGRATION_LOCK = '7469657267617465';
// The advisory lock held while one instance applies retention ("tiergatf"): the others skip that
// round instead of deleting the same rows behind its row locks.
const PRUNE_LOCK = '7469657267617466';
const NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)';

/** The SET items that add a decision's counts to a client's row: `allowed`, `denied` and the
 * decision's time `at` are SQL expressions (parameters, or a batch's JSON fields). */
const addTotals = (allowed, denied, at) => `allowed_requests = allowed_requests + ${allowed}, denied_requests = denied_requests + ${denied},
    total_requests = total_requests + ${allowed} + ${denied}, last_activity_at = greatest(last_activity_at, ${at})`;
/** `s` as an SQL string literal (E'' quoting: the same whatever standard_conforming_strings is). */
const literal = (s) => `E'${s.replace(/[\\']/g, '\\$&')}'`;
/** The decision batch's two statements, prepared once per connection (decideAll). The save takes
 * [key, state, allowed, denied, at] per client; its json (not jsonb) keeps a value's text as
 * written, so (u.e->1)::text is JSON.stringify(state); its ANY(keys) lets the planner reach the rows
 * by their index (a function's rows are unknown to it). */
const PREPARE_DECIDE = `PREPARE tiergate_lock(text[]) AS SELECT c.*, b.created_at AS ban_created_at, b.reason AS ban_reason,
    b.expires_at AS ban_expires_at, floor(${NOW_MS})::float8 AS now_ms
  FROM clients c LEFT JOIN bans b ON b.client_key = c.client_key AND (b.expires_at IS NULL OR b.expires_at > ${NOW_MS})
  WHERE c.client_key = ANY($1) ORDER BY c.client_key FOR UPDATE OF c;
PREPARE tiergate_lock_free(text[]) AS SELECT c.*, b.created_at AS ban_created_at, b.reason AS ban_reason,
    b.expires_at AS ban_expires_at, floor(${NOW_MS})::float8 AS now_ms
  FROM clients c LEFT JOIN bans b ON b.client_key = c.client_key AND (b.expires_at IS NULL OR b.expires_at > ${NOW_MS})
  WHERE c.client_key = ANY($1) FOR UPDATE OF c SKIP LOCKED;
PREPARE tiergate_save(text[], json) AS UPDATE clients AS c SET state = (u.e->1)::text,
    ${addTotals('(u.e->>2)::bigint', '(u.e->>3)::bigint', '(u.e->>4)::bigint')}
  FROM json_array_elements($2) AS u(e) WHERE c.client_key = ANY($1) AND c.client_key = u.e->>0`;
/** `s` as a quoted element of an array literal. */
const arrayItem = (s) => `"${s.replace(/["\\]/g, '\\$&')}"`;
/** A text[] literal of `list`'s strings. */
const textArray = (list) => literal(`{${list.map(arrayItem).join(',')}}`);

/** [allowed, denied] of a decided client's checks (a banned client's all count as denied). */
function counts(outcome, checks) {
  if (!outcome.results) return [0, checks];
  let allowed = 0;
  for (const r of outcome.results) if (r.allowed) allowed++;
  return [allowed, checks - allowed];
}

/** What a caller sees of any database failure: no text of the database's. */
function unavailable(err) {
  const out = new HttpError(503, 'STORE_UNAVAILABLE', 'the store did not answer; try again');
  out.cause = err;
  return out;
}

/** A 503 for work that passed its deadline: the connection it held was destroyed. */
function timedOut(ms) {
  return Object.assign(new HttpError(503, 'STORE_UNAVAILABLE', `the store did not answer within ${ms} ms; try again`), { timedOut: true });
}

/** A 503 for one client whose row another instance held locked past the lock timeout. */
function rowLocked(err, ms) {
  const out = new HttpError(503, 'STORE_UNAVAILABLE', `this client's state is locked by another instance (waited ${ms} ms); try again`);
  out.cause = err;
  return out;
}

/** Applies the migrations not yet applied, under an advisory lock: instances starting together apply
 * each version once. */
async function migrate(pool) {
  let client;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new Error(`cannot connect to PostgreSQL: ${err.message}`, { cause: err });
  }
  try {
    // Unbounded here: the lock is held by an instance applying a migration, which may take long.
    await client.query('SET lock_timeout = 0; SET statement_timeout = 0');
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)');
    const done = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const m of migrations('postgres')) {
      if (done.has(m.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw new Error(`migration ${m.name} failed: ${err.message}`, { cause: err });
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
    client.release(true); // closed, not pooled: its session's timeouts are off
  }
}

/** Runs `fn(client)` in a transaction on `client`, rolled back if it throws. */
async function inTransaction(client, fn) {
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err instanceof HttpError ? err : unavailable(err);
  }
}

const defaults = (name) => OPTIONS[name].default;

class PostgresStore {
  constructor({
    connectionString, poolSize = defaults('poolSize'), storeTimeoutMs = defaults('storeTimeoutMs'), pgLockTimeoutMs = defaults('pgLockTimeoutMs'),
    pgIdleInTransactionTimeoutMs = defaults('pgIdleInTransactionTimeoutMs'), pgStatementTimeoutMs = defaults('pgStatementTimeoutMs'),
  }) {
    const pg = requireOptional('pg', 'the PostgreSQL store of `tiergate serve`');
    this.kind = 'postgres';
    this.storeTimeoutMs = storeTimeoutMs;
    this.lockTimeoutMs = pgLockTimeoutMs;
    this.statementTimeoutMs = pgStatementTimeoutMs;
    // The three timeouts are the sessions' own settings (startup parameters): the server applies
    // them even while this process is stopped. A connection not made within storeTimeoutMs (a server
    // that accepts but does not answer) fails, so a check never waits on it longer than its bound.
    this.pool = new pg.Pool({
      connectionString, max: poolSize, connectionTimeoutMillis: storeTimeoutMs, idleTimeoutMillis: 30_000,
      lock_timeout: pgLockTimeoutMs, statement_timeout: pgStatementTimeoutMs, idle_in_transaction_session_timeout: pgIdleInTransactionTimeoutMs,
    });
    // An idle client's error (the server restarting) must not crash the process: the pool drops it.
    this.pool.on('error', () => {});
    // Nor a checked-out one's: the server ending its session (the idle-in-transaction timeout of a
    // process that was stopped) is reported by the connection between two queries of a batch. The
    // batch's next query fails, and the pool drops the connection when it is released.
    this.pool.on('connect', (client) => client.on('error', () => {}));
    this.prepared = new WeakSet(); // pooled connections that have PREPARE_DECIDE's statements
  }

  /** One statement, answered within `timeoutMs` (the statement timeout: an admin read may be long). */
  async query(sql, params, timeoutMs = this.statementTimeoutMs) {
    return this.withConnection(performance.now() + timeoutMs, async (c) => {
      try {
        return await c.query(sql, params);
      } catch (err) {
        throw unavailable(err);
      }
    });
  }

  /**
   * Runs `fn(client)` on one pooled connection, until `deadline` (performance.now() ms) at the
   * latest. A query cannot be cancelled on a server that does not answer: at the deadline the
   * connection is destroyed (pg ends its socket; its query fails at once) and the pool opens a new
   * one later, never reusing it; `fn`'s failure becomes timedOut. At most poolSize connections exist.
   */
  async withConnection(deadline, fn) {
    const c = await this.connect();
    const budget = deadline - performance.now();
    if (budget <= 0) {
      c.release();
      throw timedOut(this.storeTimeoutMs);
    }
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      c.release(new Error('deadline passed'));
    }, budget);
    try {
      return await fn(c);
    } catch (err) {
      throw expired ? timedOut(Math.round(budget)) : err;
    } finally {
      clearTimeout(timer);
      if (!expired) c.release();
    }
  }

  /** One pooled connection; a store that cannot give one is unavailable (`noConnection`: nothing was sent). */
  async connect() {
    try {
      return await this.pool.connect();
    } catch (err) {
      throw Object.assign(unavailable(err), { noConnection: true });
    }
  }

  /**
   * `SET LOCAL lock_timeout = …; ` when what is left of `deadline`, shared by `waits` lock waits and
   * the round trips after them, is shorter than the lock timeout (a batch whose checks waited for
   * the batch before), else '' (the session's lock timeout; the usual case adds nothing). A lock wait
   * then always ends at the server, before the deadline: the deadline passing means a server that
   * does not answer, not a row locked elsewhere.
   */
  lockWait(deadline, waits) {
    const ms = Math.floor((deadline - performance.now() - ROUND_TRIPS_MS) / waits);
    return ms >= this.lockTimeoutMs ? '' : `SET LOCAL lock_timeout = ${Math.max(1, ms)}; `;
  }

  /** Runs `fn(client)` in a transaction on one pooled connection, until `deadline` at the latest. */
  async tx(fn, deadline = performance.now() + this.statementTimeoutMs) {
    return this.withConnection(deadline, (c) => inTransaction(c, fn));
  }

  async open() {
    await migrate(this.pool);
  }

  async decideOne(key, costs, deadline = performance.now() + this.storeTimeoutMs) {
    return this.tx(async (c) => {
      const lockWait = this.lockWait(deadline, 1);
      if (lockWait) await c.query(lockWait);
      const { rows: found } = await c.query(`SELECT c.*, b.created_at AS ban_created_at, b.reason AS ban_reason, b.expires_at AS ban_expires_at,
          floor(${NOW_MS})::float8 AS now_ms
        FROM clients c LEFT JOIN bans b ON b.client_key = c.client_key AND (b.expires_at IS NULL OR b.expires_at > ${NOW_MS})
        WHERE c.client_key = $1 FOR UPDATE OF c`, [key]);
      const row = found[0];
      const now = row ? row.now_ms : Date.now();
      const { outcome, state } = rows.decideRow(row, costs, now);
      if (outcome.found) {
        const [allowed, denied] = counts(outcome, costs.length);
        await c.query(`UPDATE clients SET state = coalesce($1, state), ${addTotals('$2::bigint', '$3::bigint', '$4::bigint')} WHERE client_key = $5`,
          [state, allowed, denied, outcome.now, key]);
      }
      return outcome;
    }, deadline).catch((err) => {
      throw err.cause && err.cause.code === LOCK_NOT_AVAILABLE ? rowLocked(err.cause, this.lockTimeoutMs) : err;
    });
  }

  /**
   * The whole batch in one transaction of two round trips: BEGIN with the SELECT … FOR UPDATE that
   * locks its clients' rows (in key order, so that instances locking overlapping batches wait for
   * each other rather than deadlock), then the one UPDATE of their states with the COMMIT. Each is a
   * simple-protocol query (a parameterised one cannot carry two statements) that EXECUTEs a statement
   * prepared once per connection, its arguments inlined as literals; a row's lock is held for one
   * round trip, not two, and the statements are not planned again for every batch.
   * `skipLocked`: rows locked elsewhere are passed over instead of waited for, and left out of the
   * answer (as are clients that do not exist: the caller decides those one by one).
   */
  async decideAll(batch, deadline = performance.now() + this.storeTimeoutMs, { skipLocked = false } = {}) {
    const keys = [...batch.keys()].sort();
    return this.withConnection(deadline, async (c) => {
      try {
        if (!this.prepared.has(c)) {
          // DEALLOCATE first: after a failure the statements may be there (or stale: a migration of
          // another instance changed the table), and are prepared again.
          await c.query(`DEALLOCATE ALL; ${PREPARE_DECIDE}`);
          this.prepared.add(c);
        }
        const keyList = textArray(keys);
        // Two lock waits at most before the deadline: this one, then a locked client's own (decideBatch).
        const lockWait = skipLocked ? '' : this.lockWait(deadline, 2);
        const results = await c.query(`BEGIN; ${lockWait}EXECUTE ${skipLocked ? 'tiergate_lock_free' : 'tiergate_lock'}(${keyList})`);
        const found = results[results.length - 1].rows;
        const byKey = new Map(found.map((r) => [r.client_key, r]));
        const out = new Map();
        const changed = []; // [[key, state, allowed, denied, at], ...]: one JSON text for the batch
        for (const key of keys) {
          const row = byKey.get(key);
          if (!row) { if (!skipLocked) out.set(key, { found: false }); continue; }
          const entry = rows.entryOf(row);
          const costs = batch.get(key);
          const outcome = rows.decideEntry(entry, costs, row.now_ms);
          changed.push([key, entry.state, ...counts(outcome, costs.length), outcome.now]);
          out.set(key, outcome);
        }
        await c.query(changed.length === 0 ? 'COMMIT' : `EXECUTE tiergate_save(${keyList}, ${literal(JSON.stringify(changed))}); COMMIT`);
        return out;
      } catch (err) {
        this.prepared.delete(c);
        await c.query('ROLLBACK').catch(() => {});
        throw err instanceof HttpError ? err : unavailable(err);
      }
    });
  }

  /**
   * One transaction for the batch, of two round trips (a batch of one client too: its own BEGIN,
   * SELECT, UPDATE and COMMIT would be four). If it fails with nothing committed — a row locked
   * elsewhere past the lock timeout (an instance stopped mid-transaction), or a proxy without
   * prepared statements — the clients whose rows are free are decided in one transaction that skips
   * locked rows, and the rest one per client (side by side, bounded by the pool): a client whose own
   * transaction fails gets its Error in the map, the others their committed outcomes. Everything
   * ends by `deadline`; a store that gives no connection or does not answer fails the whole batch.
   */
  async decideBatch(batch, deadline = performance.now() + this.storeTimeoutMs) {
    const whole = (err) => err.noConnection || err.timedOut;
    try {
      return await this.decideAll(batch, deadline);
    } catch (err) {
      if (whole(err)) throw err;
    }
    let out = new Map();
    try {
      out = await this.decideAll(batch, deadline, { skipLocked: true });
    } catch (err) {
      if (whole(err)) throw err;
    }
    const rest = [...batch.keys()].filter((k) => !out.has(k));
    const settled = await Promise.allSettled(rest.map((k) => this.decideOne(k, batch.get(k), deadline)));
    rest.forEach((k, i) => out.set(k, settled[i].status === 'fulfilled' ? settled[i].value : settled[i].reason));
    return out;
  }

  async createClient(policy) {
    const now = Date.now();
    const { rows: r } = await this.query(`INSERT INTO clients (client_key, algorithm, requests_per_second, burst_size, max_requests, window_seconds, state, created_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (client_key) DO NOTHING RETURNING *`, [policy.clientKey, ...rows.policyColumns(policy), rows.freshState(policy, now), now]);
    return r[0] ? rows.clientOf(r[0]) : null;
  }

  async replaceClient(policy) {
    const now = Date.now();
    const { rows: r } = await this.query(`UPDATE clients SET algorithm = $1, requests_per_second = $2, burst_size = $3, max_requests = $4, window_seconds = $5, state = $6, updated_at = $7
      WHERE client_key = $8 RETURNING *`, [...rows.policyColumns(policy), rows.freshState(policy, now), now, policy.clientKey]);
    return r[0] ? rows.clientOf(r[0]) : null;
  }

  async getClient(key) {
    const { rows: r } = await this.query('SELECT * FROM clients WHERE client_key = $1', [key]);
    return r[0] ? rows.clientOf(r[0]) : null;
  }

  async listClients() {
    const { rows: r } = await this.query('SELECT * FROM clients ORDER BY client_key');
    return r.map((x) => ({ ...rows.clientOf(x), totalRequests: Number(x.total_requests), lastActivityAt: rows.iso(x.last_activity_at) }));
  }

  async deleteClient(key) {
    return this.tx(async (c) => {
      const n = (await c.query('DELETE FROM clients WHERE client_key = $1', [key])).rowCount;
      await c.query('DELETE FROM activity WHERE client_key = $1', [key]);
      return n === 1;
    });
  }

  /** Gives `units` back to the client's state under its row lock: { refunded, currentState }, or null with no such client. */
  async refundClient(key, units) {
    return this.tx(async (c) => {
      const { rows: found } = await c.query(`SELECT *, floor(${NOW_MS})::float8 AS now_ms FROM clients WHERE client_key = $1 FOR UPDATE`, [key]);
      const row = found[0];
      const r = rows.refundRow(row, units, row ? row.now_ms : 0);
      if (r === null) return null;
      await c.query('UPDATE clients SET state = $1 WHERE client_key = $2', [r.state, key]);
      return { refunded: r.refunded, currentState: rows.currentState({ ...row, state: r.state }, row.now_ms) };
    });
  }

  async clientActivity(key, limit) {
    const { rows: r } = await this.query(`SELECT *, floor(${NOW_MS})::float8 AS now_ms FROM clients WHERE client_key = $1`, [key]);
    if (!r[0]) return null;
    const recent = (await this.query('SELECT * FROM activity WHERE client_key = $1 ORDER BY id DESC LIMIT $2', [key, limit])).rows;
    const c = r[0];
    return {
      currentState: rows.currentState(c, c.now_ms),
      summary: { totalRequests: Number(c.total_requests), allowedRequests: Number(c.allowed_requests), deniedRequests: Number(c.denied_requests) },
      recentActivity: recent.map(rows.activityOf),
    };
  }

  async overview(limit) {
    const t = (await this.query('SELECT count(*) AS clients, coalesce(sum(allowed_requests), 0) AS allowed, coalesce(sum(denied_requests), 0) AS denied FROM clients')).rows[0];
    const recent = (await this.query('SELECT * FROM activity ORDER BY id DESC LIMIT $1', [limit])).rows;
    return { totalClients: Number(t.clients), totalAllowed: Number(t.allowed), totalDenied: Number(t.denied), recentActivity: recent.map(rows.activityOf) };
  }

  async analytics(range) {
    const now = Date.now();
    const { spanMs, stepMs, resolution } = rows.RANGES[range];
    const { rows: r } = await this.query('SELECT * FROM activity_buckets WHERE resolution = $1 AND start >= $2 ORDER BY start', [resolution, now - spanMs - stepMs]);
    return rows.points(range, r, now).points;
  }

  /**
   * One statement (its two INSERTs as data-modifying CTEs: atomic, one round trip), the values as
   * array literals built here: pg's own array encoding of each value cost more than the write. The
   * clients' totals are not here: each decision's transaction counts them on the client's row.
   */
  async writeActivity(records) {
    if (!records.length) return;
    // One lock order for every instance, so two flushes upserting the same buckets cannot deadlock.
    const buckets = rows.bucketTotals(records).sort((a, b) => a.resolution - b.resolution || a.start - b.start);
    const col = (list, f) => `{${list.map(f).join(',')}}`;
    await this.query(`WITH a AS (INSERT INTO activity (client_key, at, allowed, cost, response_ms)
        SELECT * FROM unnest($1::text[], $2::bigint[], $3::bool[], $4::int[], $5::float8[]))
      INSERT INTO activity_buckets (resolution, start, incoming, allowed, denied, response_ms_sum)
        SELECT * FROM unnest($6::int[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::float8[])
        ON CONFLICT (resolution, start) DO UPDATE SET incoming = activity_buckets.incoming + excluded.incoming,
          allowed = activity_buckets.allowed + excluded.allowed, denied = activity_buckets.denied + excluded.denied,
          response_ms_sum = activity_buckets.response_ms_sum + excluded.response_ms_sum`, [
      col(records, (r) => arrayItem(r.clientKey)), col(records, (r) => r.at), col(records, (r) => (r.allowed ? 't' : 'f')), col(records, (r) => r.cost), col(records, (r) => r.responseMs),
      col(buckets, (b) => b.resolution), col(buckets, (b) => b.start), col(buckets, (b) => b.incoming), col(buckets, (b) => b.allowed), col(buckets, (b) => b.denied), col(buckets, (b) => b.responseMsSum),
    ]);
  }

  /**
   * Retention in steps of PRUNE_ROWS rows, each a statement of its own (see rows.PRUNE_ROWS), on one
   * connection that holds PRUNE_LOCK: instances sharing the database prune one at a time, and an
   * instance that finds the lock taken skips the round (resolves false), as the holder is deleting
   * the same rows. A session lock: an instance that dies while pruning lets it go with its connection.
   */
  async prune({ now, maxAgeMs, maxRows, bucketAgeMs }) {
    const client = await this.connect();
    let locked = false;
    try {
      locked = (await client.query('SELECT pg_try_advisory_lock($1) AS ok', [PRUNE_LOCK])).rows[0].ok;
      if (!locked) return false;
      const step = async (sql, arg) => (await client.query(sql, [arg])).rowCount;
      while (await step(`DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE at < $1 ORDER BY at LIMIT ${rows.PRUNE_ROWS})`, now - maxAgeMs) === rows.PRUNE_ROWS);
      // ids may have gaps: a step that deletes fewer than PRUNE_ROWS is not the last one
      while (await step(`DELETE FROM activity WHERE id <= least((SELECT max(id) FROM activity) - $1, (SELECT min(id) FROM activity) + ${rows.PRUNE_ROWS - 1})`, maxRows) > 0);
      await inTransaction(client, async (c) => {
        for (const [name, resolution] of Object.entries(rows.RESOLUTIONS)) {
          await c.query('DELETE FROM activity_buckets WHERE resolution = $1 AND start < $2', [resolution, now - bucketAgeMs[name]]);
        }
        await c.query('DELETE FROM bans WHERE expires_at IS NOT NULL AND expires_at <= $1', [now]);
      });
      return true;
    } catch (err) {
      throw err instanceof HttpError ? err : unavailable(err);
    } finally {
      // A connection that cannot unlock is not given back to the pool still holding the lock.
      let broken;
      if (locked) await client.query('SELECT pg_advisory_unlock($1)', [PRUNE_LOCK]).catch((err) => { broken = err; });
      client.release(broken);
    }
  }

  async activityCount() {
    return Number((await this.query('SELECT count(*) AS n FROM activity')).rows[0].n);
  }

  async listBans() {
    const { rows: r } = await this.query(`SELECT * FROM bans WHERE expires_at IS NULL OR expires_at > ${NOW_MS} ORDER BY created_at DESC`);
    return r.map(rows.banOf);
  }

  async putBan({ clientKey, durationSeconds, reason }) {
    const { rows: r } = await this.query(`INSERT INTO bans (client_key, reason, created_at, expires_at)
      VALUES ($1, $2, floor(${NOW_MS}), CASE WHEN $3::bigint IS NULL THEN NULL ELSE floor(${NOW_MS}) + $3::bigint * 1000 END)
      ON CONFLICT (client_key) DO UPDATE SET reason = excluded.reason, created_at = excluded.created_at, expires_at = excluded.expires_at
      RETURNING *`, [clientKey, reason, durationSeconds]);
    return rows.banOf(r[0]);
  }

  async deleteBan(key) {
    return (await this.query(`DELETE FROM bans WHERE client_key = $1 AND (expires_at IS NULL OR expires_at > ${NOW_MS})`, [key])).rowCount === 1;
  }

  /** Within the check's bound: readiness says whether a check could be answered now. */
  async ping() {
    await this.query('SELECT 1', undefined, this.storeTimeoutMs);
  }

  async close() {
    await this.pool.end();
  }
}

module.exports = { PostgresStore, migrate, unavailable, NOW_MS, PRUNE_LOCK };

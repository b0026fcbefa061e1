'use strict';
// The PostgreSQL lease store of cluster mode (lib/quota/store.js), for deployments that run a
// database and no Redis: `cluster({ postgres })`. Each batch of requests or returns is one call of
// one plpgsql function (./postgres-sql.js), so one round trip and one transaction per batch, atomic
// per (limit, key) under row locks. The table and functions are created on first use, in `schema`,
// named after `prefix`.
//
// Every wait is bounded by `timeoutMs` (the driver's storeDownMs), so that a hung PostgreSQL (a
// stopped host) looks to the driver exactly as a stalled Redis does: a connection not made in time
// fails; a row lock is waited for at most that long (lock_timeout); a statement runs at most that
// long on a pool of our own (statement_timeout, which the server applies even if this process
// stalls); and a call without an answer by then has its connection destroyed (not reused: its
// answer may still come), which fails the batch at once. At most `poolSize` connections exist.
const { performance } = require('node:perf_hooks');
const { requireOptional } = require('../optional');
const { isObject, onlyKnown, finite, typeName } = require('../options');
const { CLUSTER } = require('../schema/cluster');
const { lockOrder } = require('../quota/store-rules');
const { limitArgs } = require('./script');
const { names, schemaSql, readySql } = require('./postgres-sql');
const { PostgresBanClient } = require('./postgres-bans');

const STORE_OPTIONS = new Set(['postgres', 'prefix', 'timeoutMs']);
const OPTIONS = new Set(['connectionString', 'pool', 'schema', 'poolSize']);
/** A PostgreSQL name we never need to quote-escape; short enough that `<prefix>_lease_keys_forget` fits in 63 bytes. */
const PREFIX = /^[a-z_][a-z0-9_]{0,39}$/;
const SCHEMA = /^[a-z_][a-z0-9_]{0,62}$/;
const PRUNE_MS = 60_000;
/** Rows deleted per prune, at most: a prune is one short statement, never a long lock. */
const PRUNE_ROWS = 1000;
// Any fixed 64-bit number: serialises the first use of processes that start together.
const SETUP_LOCK = '7469657267617467';

/** A pg.Pool, structurally. */
function isPool(v) {
  return v !== null && typeof v === 'object' && typeof v.connect === 'function' && typeof v.query === 'function';
}

/** `{ connectionString | pool, schema, poolSize }` from the `postgres` option (a URL, a pg.Pool, or those fields). */
function postgresOptions(v, at) {
  if (typeof v === 'string') v = { connectionString: v };
  else if (isPool(v)) v = { pool: v };
  if (!isObject(v)) throw new TypeError(`${at} must be a postgres:// URL, a pg.Pool or an object { connectionString | pool, schema?, poolSize? }, got ${typeName(v)}`);
  onlyKnown(v, OPTIONS, at);
  if ((v.connectionString === undefined) === (v.pool === undefined)) throw new TypeError(`${at} needs exactly one of connectionString and pool`);
  if (v.connectionString !== undefined && (typeof v.connectionString !== 'string' || v.connectionString === '')) {
    throw new TypeError(`${at}.connectionString must be a non-empty string, got ${typeName(v.connectionString)}`);
  }
  if (v.pool !== undefined && !isPool(v.pool)) throw new TypeError(`${at}.pool must be a pg.Pool, got ${typeName(v.pool)}`);
  if (v.pool !== undefined && v.poolSize !== undefined) throw new TypeError(`${at}.poolSize sizes a pool of the store's own; your pool has its own size`);
  const schema = v.schema === undefined ? 'public' : v.schema;
  if (typeof schema !== 'string' || !SCHEMA.test(schema)) throw new TypeError(`${at}.schema must be 1-63 characters of a-z 0-9 _, not starting with a digit, got ${JSON.stringify(schema)}`);
  const poolSize = v.poolSize === undefined ? 4 : finite(v.poolSize, `${at}.poolSize`, { min: 1, max: 100, integer: true });
  return { connectionString: v.connectionString, pool: v.pool, schema, poolSize };
}

/** Settles as `promise` or rejects after `ms`; a value that comes later goes to `late`. */
function within(promise, ms, what, late) {
  let timer;
  let expired = false;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      reject(new Error(`tiergate: PostgreSQL did not ${what} within ${Math.round(ms)} ms`));
    }, ms);
  });
  promise.then((v) => expired && late(v), () => {});
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

class PostgresStore {
  #pool;
  #owned;
  #names;
  #timeoutMs;
  #ready = null;
  #prune;
  #prefix;
  #bans = null;

  /**
   * `{ postgres, prefix = 'tiergate', timeoutMs = 1000 }`: `postgres` a URL, a pg.Pool (yours to
   * end) or `{ connectionString | pool, schema = 'public', poolSize = 4 }`; `timeoutMs` bounds every wait.
   */
  constructor(options) {
    if (!isObject(options)) throw new TypeError(`PostgresStore options must be an object { postgres, prefix?, timeoutMs? }, got ${typeName(options)}`);
    onlyKnown(options, STORE_OPTIONS, 'PostgresStore options');
    const { postgres, prefix = CLUSTER.prefix.default, timeoutMs = 1000 } = options;
    const o = postgresOptions(postgres, 'PostgresStore options.postgres');
    if (typeof prefix !== 'string' || !PREFIX.test(prefix)) throw new TypeError(`PostgresStore options.prefix must be 1-40 characters of a-z 0-9 _, not starting with a digit, got ${JSON.stringify(prefix)}`);
    this.#timeoutMs = finite(timeoutMs, 'PostgresStore options.timeoutMs', { min: 1, max: 600_000 });
    this.#names = names(o.schema, prefix);
    this.#prefix = prefix;
    this.#owned = o.pool === undefined;
    if (this.#owned) {
      const pg = requireOptional('pg', 'cluster mode over PostgreSQL', 'or pass your own pg.Pool as postgres');
      const ms = Math.ceil(this.#timeoutMs);
      this.#pool = new pg.Pool({ connectionString: o.connectionString, max: o.poolSize, connectionTimeoutMillis: ms, idleTimeoutMillis: 30_000, statement_timeout: ms });
      // A connection's error (the server restarting) fails the call that uses it; unhandled, it would end the process.
      this.#pool.on('error', () => {});
      this.#pool.on('connect', (c) => c.on('error', () => {}));
    } else this.#pool = o.pool;
    this.#prune = setInterval(() => this.prune().catch(() => {}), PRUNE_MS).unref();
  }

  /** The pool the store uses (the ban channel listens on a connection of its own from it). */
  get pool() {
    return this.#pool;
  }

  get prefix() {
    return this.#prefix;
  }

  /** What the ban channel (./bans.js) sends its Redis commands to: ./postgres-bans.js on this store. */
  get client() {
    if (this.#bans === null) this.#bans = new PostgresBanClient(this);
    return this.#bans;
  }

  /** The quoted names of the table, functions, ban table and notification channel. */
  get names() {
    return this.#names;
  }

  get timeoutMs() {
    return this.#timeoutMs;
  }

  /** Creates the table and functions if they are missing (once; the first call does it too). */
  open() {
    if (this.#ready === null) {
      this.#ready = this.#setup().catch((err) => {
        this.#ready = null;
        throw err;
      });
    }
    return this.#ready;
  }

  async #setup() {
    // Unbounded by timeoutMs: another process may hold the lock while it creates the same objects.
    const c = await this.#pool.connect();
    let broken;
    try {
      // Created already (by this version): nothing to do, and nothing that needs the right to create.
      if ((await c.query(readySql(this.#names))).rows[0].ready) return;
      await c.query('BEGIN');
      await c.query('SET LOCAL statement_timeout = 0');
      await c.query('SELECT pg_advisory_xact_lock($1)', [SETUP_LOCK]);
      await c.query(schemaSql(this.#names));
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      broken = err;
      throw err;
    } finally {
      c.release(broken);
    }
  }

  async lease(batch) {
    if (batch.length === 0) return [];
    const order = lockOrder(batch);
    const args = order.map(({ r }) => [r.limit.name, r.key, ...limitArgs(r.limit), r.size, r.ttlMs, r.holder]);
    const answers = await this.#call(this.#names.grant, args);
    const out = new Array(batch.length);
    order.forEach(({ i }, j) => {
      const a = answers[j];
      if (!Array.isArray(a) || a.length !== 6) out[i] = new Error(`tiergate: the lease function answered ${typeName(a)}`);
      else {
        const [granted, ttlMs, remaining, holders, lease, retryAfterMs] = a.map(Number);
        out[i] = { granted, ttlMs, remaining, holders, lease, retryAfterMs };
      }
    });
    return out;
  }

  async release(batch) {
    if (batch.length === 0) return;
    const args = lockOrder(batch).map(({ r }) => [r.limit.name, r.key, ...limitArgs(r.limit), r.lease, r.tokens, r.reason, r.holder, r.idleMs === undefined ? null : r.idleMs]);
    await this.#call(this.#names.give, args);
  }

  /** An operator's call on one key (./postgres-sql.js's lease_admin): its answer, an array. */
  async admin(op, spec, key, args = [], cap = 0) {
    await within(this.open(), this.#timeoutMs, 'answer', () => {});
    const r = [spec.name, key, ...limitArgs(spec), ...args];
    return (await this.query(`SELECT ${this.#names.admin}($1, $2::json, $3, $4) AS out`, [op, JSON.stringify(r), Math.ceil(this.#timeoutMs), cap])).rows[0].out;
  }

  /** Sets the override of (spec, key) (`args`: [a, b] it counts with); false when `cap` others are in force. */
  async override(spec, key, args, limit, cap) {
    return Number((await this.admin('override', spec, key, [...args, limit], cap))[0]) === 1;
  }

  /** Clears the override of (spec, key): whether there was one. */
  async clearOverride(spec, key) {
    return Number((await this.admin('unoverride', spec, key))[0]) === 1;
  }

  /** `[{ name, key, limit }]`: the overrides in force. */
  async listOverrides() {
    await within(this.open(), this.#timeoutMs, 'answer', () => {});
    const res = await this.query(`SELECT limit_name, key, ov_limit FROM ${this.#names.table} WHERE ov_a IS NOT NULL ORDER BY limit_name, key`);
    return res.rows.map((r) => ({ name: r.limit_name, key: r.key, limit: Number(r.ov_limit) }));
  }

  /** One call of `fn(batch, lock_ms)`: its answer, or a failure within timeoutMs. */
  async #call(fn, args) {
    await within(this.open(), this.#timeoutMs, 'answer', () => {});
    return (await this.query(`SELECT ${fn}($1::json, $2) AS out`, [JSON.stringify(args), Math.ceil(this.#timeoutMs)])).rows[0].out;
  }

  /** One statement on a pooled connection: its result, or a failure within timeoutMs. */
  async query(sql, params) {
    const t0 = performance.now();
    const c = await within(this.#pool.connect(), this.#timeoutMs, 'give a connection', (late) => late.release());
    let expired = false;
    let broken;
    const timer = setTimeout(() => {
      expired = true;
      c.release(new Error('deadline passed')); // destroyed: its answer may still be on the way
    }, Math.max(1, this.#timeoutMs - (performance.now() - t0)));
    try {
      return await c.query(sql, params);
    } catch (err) {
      if (expired) throw new Error(`tiergate: PostgreSQL did not answer within ${Math.round(this.#timeoutMs)} ms`, { cause: err });
      // An error of the server's (it has a severity) leaves the connection usable; any other may not.
      if (err === null || typeof err !== 'object' || err.severity === undefined) broken = err;
      throw err;
    } finally {
      clearTimeout(timer);
      if (!expired) c.release(broken);
    }
  }

  /** Deletes up to PRUNE_ROWS rows a fresh state equals (bounded growth; every PRUNE_MS); how many. */
  async prune() {
    await this.open();
    const t = this.#names.table;
    const now = 'extract(epoch from clock_timestamp()) * 1000';
    // Bounded as a batch is: a prune must not hold a connection of the pool through an outage.
    const res = await this.query(`DELETE FROM ${t} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${t} WHERE forget_at <= ${now} LIMIT ${PRUNE_ROWS})) AND forget_at <= ${now}`);
    return res.rowCount;
  }

  /** Stops pruning; ends the pool if the store made it (from a connection string). */
  async close() {
    clearInterval(this.#prune);
    if (this.#owned) await this.#pool.end();
  }
}

module.exports = { PostgresStore };

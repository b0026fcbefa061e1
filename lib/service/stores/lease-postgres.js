'use strict';
// A lease store (lib/quota/store.js) on PostgreSQL, for lease drivers on several hosts. A batch is
// one transaction: each (limit, key) row is locked (SELECT … FOR UPDATE, in one lock order so that
// two batches cannot deadlock), advanced to the database's clock, granted from and written back
// before the commit, so a grant is debited before the driver sees it.
const { requireOptional } = require('../../optional');
const rules = require('../../quota/store-rules');
const { migrate, NOW_MS } = require('./postgres');
const { forgetAt } = require('./lease-sqlite');

class PostgresLeaseStore {
  #pool;
  #own;
  #ready;

  /** `{ connectionString, poolSize = 4 }` (a pool of its own) or `{ pool }` (a pg.Pool). */
  constructor({ connectionString, pool, poolSize = 4 } = {}) {
    this.#own = pool === undefined;
    if (pool === undefined) {
      const pg = requireOptional('pg', 'the PostgreSQL lease store');
      pool = new pg.Pool({ connectionString, max: poolSize, connectionTimeoutMillis: 5000 });
      pool.on('error', () => {});
    }
    this.#pool = pool;
    this.#ready = null;
  }

  /** Applies the schema once (also done by the first call). */
  open() {
    if (this.#ready === null) this.#ready = migrate(this.#pool).catch((err) => { this.#ready = null; throw err; });
    return this.#ready;
  }

  async #tx(batch, fn) {
    await this.open();
    const c = await this.#pool.connect();
    try {
      await c.query('BEGIN');
      const now = Number((await c.query(`SELECT floor(${NOW_MS})::float8 AS now`)).rows[0].now);
      const out = new Array(batch.length);
      for (const { r, i } of rules.lockOrder(batch)) {
        await c.query('INSERT INTO lease_keys (limit_name, key, state, expires_at) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING', [r.limit.name, r.key, JSON.stringify(rules.emptyState(r.limit, now))]);
        const s = JSON.parse((await c.query('SELECT state FROM lease_keys WHERE limit_name = $1 AND key = $2 FOR UPDATE', [r.limit.name, r.key])).rows[0].state);
        rules.advance(s, r.limit, now);
        out[i] = await fn(c, r, s, now);
        await c.query('UPDATE lease_keys SET state = $3, expires_at = $4 WHERE limit_name = $1 AND key = $2', [r.limit.name, r.key, JSON.stringify(s), forgetAt(s, r.limit)]);
      }
      await c.query('COMMIT');
      return out;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      c.release();
    }
  }

  async lease(batch) {
    return this.#tx(batch, async (c, r, s, now) => {
      const id = Number((await c.query("SELECT nextval('lease_ids') AS id")).rows[0].id);
      return rules.grant(s, r, now, id);
    });
  }

  async release(batch) {
    await this.#tx(batch, async (c, r, s, now) => rules.credit(s, r, now));
  }

  /** Forgets keys whose state a fresh one equals (bounded growth); returns how many. */
  async prune() {
    await this.open();
    return (await this.#pool.query(`DELETE FROM lease_keys WHERE expires_at <= floor(${NOW_MS})`)).rowCount;
  }

  async close() {
    if (this.#own) await this.#pool.end();
  }
}

module.exports = { PostgresLeaseStore };

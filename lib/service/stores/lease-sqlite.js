'use strict';
// A lease store (lib/quota/store.js) on SQLite, for the lease driver of processes on one machine
// (the file is shared; SQLite serialises writers). A batch is one synchronous transaction: nothing
// interleaves with it, and a grant is committed (debited) before the driver sees it.
const rules = require('../../quota/store-rules');
const { migrate, openDatabase } = require('./sqlite');

// A state that refills, expires or ends its window no later than this is forgotten by prune().
const FOREVER = Number.MAX_SAFE_INTEGER;

/** When a key's row holds nothing a fresh state would not: the latest expiry, refill or window end. */
function forgetAt(s, limit) {
  let t = 0;
  for (const exp of Object.values(s.holders)) t = Math.max(t, exp);
  if (limit.algorithm === 'token-bucket') t = Math.max(t, limit.limit > 0 ? s.at + ((limit.burst - s.tokens) * limit.windowMs) / limit.limit : s.tokens < limit.burst ? FOREVER : 0);
  else if (limit.algorithm === 'fixed-window') t = Math.max(t, (s.window + 1) * limit.windowMs);
  else for (const r of s.records) t = Math.max(t, r.until);
  return Math.ceil(t);
}

class SqliteLeaseStore {
  #db;
  #own;
  #now;
  #sql;

  /** `{ file }` (a database of its own) or `{ db }` (a better-sqlite3 database, e.g. the service's); `now`: the clock (ms). */
  constructor({ file, db, now = Date.now } = {}) {
    this.#own = db === undefined;
    this.#db = db === undefined ? openDatabase(file) : db;
    this.#now = now;
    migrate(this.#db);
    const q = (sql) => this.#db.prepare(sql);
    this.#sql = {
      get: q('SELECT state FROM lease_keys WHERE limit_name = ? AND key = ?').pluck(),
      put: q('INSERT INTO lease_keys (limit_name, key, state, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (limit_name, key) DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at'),
      nextId: q('UPDATE lease_ids SET next = next + 1 WHERE id = 1 RETURNING next - 1').pluck(),
      prune: q('DELETE FROM lease_keys WHERE expires_at <= ?'),
    };
    this.leaseTx = this.#db.transaction((batch, now) => batch.map((r) => {
      const s = this.#load(r, now);
      const g = rules.grant(s, r, now, this.#sql.nextId.get());
      this.#save(r, s);
      return g;
    }));
    this.releaseTx = this.#db.transaction((batch, now) => {
      for (const r of batch) {
        const s = this.#load(r, now);
        rules.credit(s, r, now);
        this.#save(r, s);
      }
    });
  }

  #load(r, now) {
    const text = this.#sql.get.get(r.limit.name, r.key);
    const s = text === undefined ? rules.emptyState(r.limit, now) : JSON.parse(text);
    rules.advance(s, r.limit, now);
    return s;
  }

  #save(r, s) {
    this.#sql.put.run(r.limit.name, r.key, JSON.stringify(s), forgetAt(s, r.limit));
  }

  async lease(batch) {
    return this.leaseTx.immediate(batch, this.#now());
  }

  async release(batch) {
    this.releaseTx.immediate(batch, this.#now());
  }

  /** Forgets keys whose state a fresh one equals (bounded growth); returns how many. */
  async prune() {
    return this.#sql.prune.run(this.#now()).changes;
  }

  async close() {
    if (this.#own && this.#db.open) this.#db.close();
  }
}

module.exports = { SqliteLeaseStore, forgetAt };

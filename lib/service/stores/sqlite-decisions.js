'use strict';
// The embedded store's decisions. A batch decides against clients held in process memory and commits
// the states it changed as ONE appended row of state_log, instead of an UPDATE of each client's row:
// the clients of a batch sit on about as many pages as there are clients, and writing those pages
// was most of a decision's cost. The log is folded into clients.state in the background, and in full
// before anything reads or replaces a state there (admin calls, another process's batch, start).
//
// The memory is the truth only while this connection is the file's only writer. Every batch reads
// PRAGMA data_version inside its write transaction: when another connection committed since, the
// batch folds the whole log and forgets what it held before deciding. A client leaves memory only
// once its latest state is folded, so a client not in memory has its state in clients.state.
const rows = require('./rows');

/** How often the background fold runs (ms), and the log rows it folds per transaction: a row holds
 * up to a batch's clients (hundreds under load), and a fold transaction holds every check meanwhile. */
const FOLD_MS = 200;
const FOLD_ROWS = 2;
/** Clients held in memory; beyond it, the longest-held ones whose state is folded are forgotten. */
const MAX_HELD = 100_000;

class SqliteDecisions {
  /** `maxHeld`: how many clients stay in memory (tests set a small one). */
  constructor(db, { maxHeld = MAX_HELD } = {}) {
    this.db = db;
    this.maxHeld = maxHeld;
    const q = (sql) => db.prepare(sql);
    this.sql = {
      version: q('PRAGMA data_version').pluck(),
      row: q(`SELECT c.*, b.created_at AS ban_created_at, b.reason AS ban_reason, b.expires_at AS ban_expires_at
        FROM clients c LEFT JOIN bans b ON b.client_key = c.client_key AND (b.expires_at IS NULL OR b.expires_at > ?)
        WHERE c.client_key = ?`),
      append: q('INSERT INTO state_log (states) VALUES (?)'),
      logged: q('SELECT id, states FROM state_log ORDER BY id LIMIT ?'),
      save: q('UPDATE clients SET state = ? WHERE client_key = ?'),
      forget: q('DELETE FROM state_log WHERE id <= ?'),
    };
    this.held = new Map(); // clientKey → { policy, state, ban, logId }
    this.folded = 0; // the last log id folded (an entry logged at or below it is in clients.state)
    this.version = null;
    this.stale = true; // the next batch folds everything and forgets `held` first
    this.folding = null;
    this.decideTx = db.transaction((batch, now) => this.#decide(batch, now));
    this.foldTx = db.transaction((limit) => this.#fold(limit));
    this.timer = setInterval(() => { this.foldSoon().catch(() => {}); }, FOLD_MS).unref();
  }

  /** Decides a batch (Map clientKey → costs) in one transaction; Map clientKey → outcome. */
  decideBatch(batch, now) {
    try {
      return this.decideTx.immediate(batch, now);
    } catch (err) {
      // Rolled back, but the held states were already moved on: start again from the file.
      this.stale = true;
      throw err;
    }
  }

  #decide(batch, now) {
    if (this.stale || this.sql.version.get() !== this.version) this.#reset();
    const out = new Map();
    const changed = [];
    const entries = [];
    for (const [key, costs] of batch) {
      let e = this.held.get(key);
      if (e === undefined) {
        const row = this.sql.row.get(now, key);
        if (!row) { out.set(key, { found: false }); continue; }
        e = rows.entryOf(row);
        e.logId = 0;
        this.held.set(key, e);
      }
      const outcome = rows.decideEntry(e, costs, now);
      if (outcome.results) { changed.push(key, e.state); entries.push(e); }
      out.set(key, outcome);
    }
    if (changed.length) {
      // One JSON text for the batch ([key, state, ...]); a state is turned into its own column's
      // text only when folded, once per client per fold rather than once per decision.
      const id = this.sql.append.run(JSON.stringify(changed)).lastInsertRowid;
      for (const e of entries) e.logId = id;
    }
    return out;
  }

  /** Inside a write transaction: the whole log into clients.state, and nothing held. (If the
   * transaction rolls back, decideBatch marks the memory stale and the next batch does this again.) */
  #reset() {
    this.#folded(this.#fold(-1));
    this.held.clear();
    this.version = this.sql.version.get();
    this.stale = false;
  }

  /** Folds the oldest `limit` log rows (-1: all) into clients.state, latest state per client:
   * { rows, last } (how many, the last id). */
  #fold(limit) {
    const logged = this.sql.logged.all(limit);
    if (logged.length === 0) return { rows: 0, last: 0 };
    const latest = new Map();
    for (const r of logged) {
      const a = JSON.parse(r.states);
      for (let i = 0; i < a.length; i += 2) latest.set(a[i], a[i + 1]);
    }
    for (const [key, state] of latest) this.sql.save.run(JSON.stringify(state), key);
    const last = logged[logged.length - 1].id;
    this.sql.forget.run(last);
    return { rows: logged.length, last };
  }

  /** Folds the whole log now, in one transaction (before an admin call reads or replaces a state). */
  foldAll() {
    this.#folded(this.foldTx.immediate(-1));
  }

  /** Records a committed fold (a rolled-back one must not let an unfolded client be forgotten). */
  #folded({ rows: n, last }) {
    if (n) this.folded = last;
    return n;
  }

  /** The background fold: FOLD_ROWS rows per transaction, the event loop free in between. */
  foldSoon() {
    if (!this.folding) {
      // Cleared in a .finally, not inside the async function: a fold that never awaits finishes
      // before `this.folding` is assigned, and would leave it set to its settled promise for good
      // (no later fold would run, and the log and memory would grow until an admin call).
      this.folding = this.#foldSteps().finally(() => { this.folding = null; });
    }
    return this.folding;
  }

  async #foldSteps() {
    // A fold that took FOLD_ROWS rows may have left more: go on after a turn of the loop.
    while (this.#folded(this.foldTx.immediate(FOLD_ROWS)) === FOLD_ROWS) await new Promise((resolve) => setImmediate(resolve));
    this.#evict();
  }

  #evict() {
    if (this.held.size <= this.maxHeld) return;
    for (const [key, e] of this.held) {
      if (this.held.size <= this.maxHeld) break;
      if (e.logId <= this.folded) this.held.delete(key);
    }
  }

  /**
   * Runs `write` (which replaces or deletes the client's row) in one transaction after folding the
   * whole log, so that no logged state of the client can land on its new row; returns what it returns.
   */
  rewrite(key, write) {
    try {
      let fold;
      const out = this.db.transaction(() => {
        fold = this.#fold(-1);
        return write();
      }).immediate();
      this.#folded(fold);
      this.held.delete(key);
      return out;
    } catch (err) {
      this.stale = true;
      throw err;
    }
  }

  /** A ban placed or lifted by this connection: held entries see it at once. */
  setBan(key, ban) {
    const e = this.held.get(key);
    if (e) e.ban = ban;
  }

  stop() {
    clearInterval(this.timer);
  }
}

module.exports = { SqliteDecisions };

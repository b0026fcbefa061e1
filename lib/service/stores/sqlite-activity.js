'use strict';
// The activity file's writes (records, per-client totals, aggregated buckets, retention, a deleted
// client's history), on a connection of their own. It runs in a worker thread
// (sqlite-activity-worker.js): on the event loop, these writes were the largest single cost of a
// decision and every check waited behind each flush. The file is not the decisions' file, so the
// two writers never wait for each other's lock, and the decisions' PRAGMA data_version (which tells
// them another connection wrote) does not move with every flush.
const rows = require('./rows');

const { PRUNE_ROWS } = rows;
// Activity rows per multi-row INSERT (5 parameters each, well under SQLite's 32,766).
const ACTIVITY_ROWS = 200;

/** Adds `n` clients' totals (5 parameters each) to client_stats. */
function addStatsSql(n) {
  return `INSERT INTO client_stats (client_key, total, allowed, denied, last_at)
    VALUES ${Array(n).fill('(?, ?, ?, ?, ?)').join(', ')}
    ON CONFLICT (client_key) DO UPDATE SET total = total + excluded.total, allowed = allowed + excluded.allowed,
    denied = denied + excluded.denied, last_at = max(last_at, excluded.last_at)`;
}

function activityValues(r, out, at) {
  out[at] = r.clientKey; out[at + 1] = r.at; out[at + 2] = r.allowed ? 1 : 0; out[at + 3] = r.cost; out[at + 4] = r.responseMs;
}

function statsValues(c, out, at) {
  out[at] = c.clientKey; out[at + 1] = c.total; out[at + 2] = c.allowed; out[at + 3] = c.denied; out[at + 4] = c.lastAt;
}

class ActivityFile {
  /** `db`: the activity file; `core`: a connection to the store's file (read here: which clients exist). */
  constructor(db, core) {
    this.db = db;
    const q = (sql) => db.prepare(sql);
    this.sql = {
      insertActivity: q('INSERT INTO activity (client_key, at, allowed, cost, response_ms) VALUES (?, ?, ?, ?, ?)'),
      insertActivityRows: q(`INSERT INTO activity (client_key, at, allowed, cost, response_ms) VALUES ${Array(ACTIVITY_ROWS).fill('(?, ?, ?, ?, ?)').join(', ')}`),
      addStats: q(addStatsSql(1)),
      addStatsRows: q(addStatsSql(ACTIVITY_ROWS)),
      addBucket: q(`INSERT INTO activity_buckets (resolution, start, incoming, allowed, denied, response_ms_sum) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (resolution, start) DO UPDATE SET incoming = incoming + excluded.incoming, allowed = allowed + excluded.allowed,
        denied = denied + excluded.denied, response_ms_sum = response_ms_sum + excluded.response_ms_sum`),
      deleteStats: q('DELETE FROM client_stats WHERE client_key = ?'),
      deleteActivity: q('DELETE FROM activity WHERE client_key = ?'),
      // Both delete at most PRUNE_ROWS rows (the oldest first); prune() repeats them until done.
      pruneActivityAge: q(`DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE at < ? ORDER BY id LIMIT ${PRUNE_ROWS})`),
      pruneActivityRows: q(`DELETE FROM activity WHERE id <= min((SELECT max(id) FROM activity) - ?, (SELECT min(id) FROM activity) + ${PRUNE_ROWS - 1})`),
      pruneBuckets: q('DELETE FROM activity_buckets WHERE resolution = ? AND start < ?'),
    };
    this.exists = core.prepare('SELECT 1 FROM clients WHERE client_key = ?').pluck();
    // Rows go ACTIVITY_ROWS at a time (5 values each), the rest one by one: one statement step per
    // row costs more than the row.
    const inRows = (list, many, one, values) => {
      let i = 0;
      const args = new Array(ACTIVITY_ROWS * 5);
      for (; i + ACTIVITY_ROWS <= list.length; i += ACTIVITY_ROWS) {
        for (let j = 0; j < ACTIVITY_ROWS; j++) values(list[i + j], args, j * 5);
        many.run(args);
      }
      const single = new Array(5);
      for (; i < list.length; i++) { values(list[i], single, 0); one.run(single); }
    };
    this.writeTx = db.transaction((records, clients, buckets) => {
      inRows(records, this.sql.insertActivityRows, this.sql.insertActivity, activityValues);
      inRows(clients, this.sql.addStatsRows, this.sql.addStats, statsValues);
      for (const b of buckets) this.sql.addBucket.run(b.resolution, b.start, b.incoming, b.allowed, b.denied, b.responseMsSum);
    });
    this.forgetTx = db.transaction((key) => {
      this.sql.deleteStats.run(key);
      this.sql.deleteActivity.run(key);
    });
  }

  /** Writes records (one transaction); totals only for clients that still exist: a client deleted
   * meanwhile had its history removed by forget(), which runs after any write that saw it. */
  write(records) {
    if (records.length === 0) return;
    const clients = rows.clientTotals(records);
    const buckets = rows.bucketTotals(records);
    const kept = clients.filter((c) => this.exists.get(c.clientKey) === 1);
    this.writeTx.immediate(records, kept, buckets);
  }

  /** Removes a deleted client's totals and records. */
  forget(key) {
    this.forgetTx.immediate(key);
  }

  /** Retention, PRUNE_ROWS activity rows per transaction (another process's writer waits at most one). */
  prune({ now, maxAgeMs, maxRows, bucketAgeMs }) {
    const chunk = (stmt, arg) => this.db.transaction(() => stmt.run(arg).changes).immediate();
    while (chunk(this.sql.pruneActivityAge, now - maxAgeMs) === PRUNE_ROWS);
    while (chunk(this.sql.pruneActivityRows, maxRows) > 0); // ids may have gaps
    this.db.transaction(() => {
      for (const [name, resolution] of Object.entries(rows.RESOLUTIONS)) this.sql.pruneBuckets.run(resolution, now - bucketAgeMs[name]);
    }).immediate();
  }
}

module.exports = { ActivityFile };

'use strict';
// The embedded store: one SQLite file in the data folder (WAL). better-sqlite3 is synchronous, so a
// decision batch is one transaction that nothing can interleave with; it commits before any of its
// answers is sent (a crash cannot give back quota that was answered as used). The batch decides
// against clients held in memory and commits its states as one appended row (sqlite-decisions.js).
// synchronous=NORMAL in WAL mode: a committed transaction survives the process being killed; an OS
// crash or power loss may lose the last transactions (docs/service.md, "Durability").
const fs = require('node:fs');
const path = require('node:path');
const { requireOptional } = require('../../optional');
const { migrations } = require('../migrations');
const rows = require('./rows');
const { SqliteDecisions } = require('./sqlite-decisions');

// Activity rows deleted per pruning transaction.
const PRUNE_ROWS = 2000;
// Activity rows per multi-row INSERT (5 parameters each, well under SQLite's 32,766).
const ACTIVITY_ROWS = 200;

/** Adds `n` clients' totals (5 parameters each) to client_stats, for clients that still exist. */
function addStatsSql(n) {
  return `INSERT INTO client_stats (client_key, total, allowed, denied, last_at)
    SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES ${Array(n).fill('(?, ?, ?, ?, ?)').join(', ')}) AS v
    WHERE EXISTS (SELECT 1 FROM clients WHERE client_key = v.column1)
    ON CONFLICT (client_key) DO UPDATE SET total = total + excluded.total, allowed = allowed + excluded.allowed,
    denied = denied + excluded.denied, last_at = max(last_at, excluded.last_at)`;
}

/** Applies the migrations not yet applied; BEGIN IMMEDIATE takes the write lock, so two processes
 * starting on one file apply each version once. */
function migrate(db) {
  db.transaction(() => {
    db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    const done = new Set(db.prepare('SELECT version FROM schema_migrations').pluck().all());
    for (const m of migrations('sqlite')) {
      if (done.has(m.version)) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }
  }).immediate();
}

/** A better-sqlite3 database on `file`, in WAL mode. */
function openDatabase(file) {
  const Database = requireOptional('better-sqlite3', 'the embedded store of `tiergate serve`');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

function activityValues(r, out, at) {
  out[at] = r.clientKey; out[at + 1] = r.at; out[at + 2] = r.allowed ? 1 : 0; out[at + 3] = r.cost; out[at + 4] = r.responseMs;
}

function statsValues(c, out, at) {
  out[at] = c.clientKey; out[at + 1] = c.total; out[at + 2] = c.allowed; out[at + 3] = c.denied; out[at + 4] = c.lastAt;
}

class SqliteStore {
  constructor({ dataDir }) {
    fs.mkdirSync(dataDir, { recursive: true });
    this.kind = 'sqlite';
    this.file = path.join(dataDir, 'tiergate.sqlite');
    this.db = openDatabase(this.file);
  }

  async open() {
    migrate(this.db);
    this.prepare();
  }

  prepare() {
    const db = this.db;
    const q = (sql) => db.prepare(sql);
    this.sql = {
      insertClient: q(`INSERT INTO clients (client_key, algorithm, requests_per_second, burst_size, max_requests, window_seconds, state, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_key) DO NOTHING`),
      replaceClient: q(`UPDATE clients SET algorithm = ?, requests_per_second = ?, burst_size = ?, max_requests = ?, window_seconds = ?, state = ?, updated_at = ?
        WHERE client_key = ?`),
      getClient: q('SELECT * FROM clients WHERE client_key = ?'),
      listClients: q(`SELECT c.*, s.total, s.last_at FROM clients c LEFT JOIN client_stats s ON s.client_key = c.client_key ORDER BY c.client_key`),
      deleteClient: q('DELETE FROM clients WHERE client_key = ?'),
      deleteStats: q('DELETE FROM client_stats WHERE client_key = ?'),
      deleteActivity: q('DELETE FROM activity WHERE client_key = ?'),
      stats: q('SELECT * FROM client_stats WHERE client_key = ?'),
      insertActivity: q('INSERT INTO activity (client_key, at, allowed, cost, response_ms) VALUES (?, ?, ?, ?, ?)'),
      insertActivityRows: q(`INSERT INTO activity (client_key, at, allowed, cost, response_ms) VALUES ${Array(ACTIVITY_ROWS).fill('(?, ?, ?, ?, ?)').join(', ')}`),
      addStats: q(addStatsSql(1)),
      addStatsRows: q(addStatsSql(ACTIVITY_ROWS)),
      addBucket: q(`INSERT INTO activity_buckets (resolution, start, incoming, allowed, denied, response_ms_sum) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (resolution, start) DO UPDATE SET incoming = incoming + excluded.incoming, allowed = allowed + excluded.allowed,
        denied = denied + excluded.denied, response_ms_sum = response_ms_sum + excluded.response_ms_sum`),
      recent: q('SELECT * FROM activity ORDER BY id DESC LIMIT ?'),
      recentOf: q('SELECT * FROM activity WHERE client_key = ? ORDER BY id DESC LIMIT ?'),
      totals: q('SELECT count(*) AS clients, coalesce(sum(s.allowed), 0) AS allowed, coalesce(sum(s.denied), 0) AS denied FROM clients c LEFT JOIN client_stats s ON s.client_key = c.client_key'),
      buckets: q('SELECT * FROM activity_buckets WHERE resolution = ? AND start >= ? ORDER BY start'),
      // Both delete at most PRUNE_ROWS rows (the oldest first); prune() repeats them until done.
      pruneActivityAge: q(`DELETE FROM activity WHERE id IN (SELECT id FROM activity WHERE at < ? ORDER BY id LIMIT ${PRUNE_ROWS})`),
      pruneActivityRows: q(`DELETE FROM activity WHERE id <= min((SELECT max(id) FROM activity) - ?, (SELECT min(id) FROM activity) + ${PRUNE_ROWS - 1})`),
      pruneBuckets: q('DELETE FROM activity_buckets WHERE resolution = ? AND start < ?'),
      pruneBans: q('DELETE FROM bans WHERE expires_at IS NOT NULL AND expires_at <= ?'),
      activityCount: q('SELECT count(*) FROM activity').pluck(),
      listBans: q('SELECT * FROM bans WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC'),
      putBan: q(`INSERT INTO bans (client_key, reason, created_at, expires_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (client_key) DO UPDATE SET reason = excluded.reason, created_at = excluded.created_at, expires_at = excluded.expires_at`),
      deleteBan: q('DELETE FROM bans WHERE client_key = ? AND (expires_at IS NULL OR expires_at > ?)'),
      ping: q('SELECT 1').pluck(),
    };
    this.decisions = new SqliteDecisions(db);
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
    this.activityTx = db.transaction((records) => {
      inRows(records, this.sql.insertActivityRows, this.sql.insertActivity, activityValues);
      const { clients, buckets } = rows.aggregate(records);
      inRows(clients, this.sql.addStatsRows, this.sql.addStats, statsValues);
      for (const b of buckets) this.sql.addBucket.run(b.resolution, b.start, b.incoming, b.allowed, b.denied, b.responseMsSum);
    });
  }

  /** Decides a batch (Map clientKey → costs) in one transaction; Map clientKey → outcome. */
  async decideBatch(batch) {
    return this.decisions.decideBatch(batch, Date.now());
  }

  async createClient(policy) {
    const now = Date.now();
    const info = this.sql.insertClient.run(policy.clientKey, ...rows.policyColumns(policy), rows.freshState(policy, now), now, now);
    return info.changes === 1 ? rows.clientOf(this.sql.getClient.get(policy.clientKey)) : null;
  }

  async replaceClient(policy) {
    const now = Date.now();
    const info = this.decisions.rewrite(policy.clientKey, () => this.sql.replaceClient.run(...rows.policyColumns(policy), rows.freshState(policy, now), now, policy.clientKey));
    return info.changes === 1 ? rows.clientOf(this.sql.getClient.get(policy.clientKey)) : null;
  }

  async getClient(key) {
    const row = this.sql.getClient.get(key);
    return row ? rows.clientOf(row) : null;
  }

  async listClients() {
    return this.sql.listClients.all().map((r) => ({ ...rows.clientOf(r), totalRequests: Number(r.total ?? 0), lastActivityAt: rows.iso(r.last_at) }));
  }

  async deleteClient(key) {
    return this.decisions.rewrite(key, () => {
      const n = this.sql.deleteClient.run(key).changes;
      this.sql.deleteStats.run(key);
      this.sql.deleteActivity.run(key);
      return n === 1;
    });
  }

  async clientActivity(key, limit) {
    this.decisions.foldAll(); // clients.state then holds every decided state
    const row = this.sql.getClient.get(key);
    if (!row) return null;
    const s = this.sql.stats.get(key);
    return {
      currentState: rows.currentState(row, Date.now()),
      summary: { totalRequests: Number(s?.total ?? 0), allowedRequests: Number(s?.allowed ?? 0), deniedRequests: Number(s?.denied ?? 0) },
      recentActivity: this.sql.recentOf.all(key, limit).map(rows.activityOf),
    };
  }

  async overview(limit) {
    const t = this.sql.totals.get();
    return { totalClients: Number(t.clients), totalAllowed: Number(t.allowed), totalDenied: Number(t.denied), recentActivity: this.sql.recent.all(limit).map(rows.activityOf) };
  }

  async analytics(range) {
    const now = Date.now();
    const { spanMs, stepMs, resolution } = rows.RANGES[range];
    return rows.points(range, this.sql.buckets.all(resolution, now - spanMs - stepMs), now).points;
  }

  async writeActivity(records) {
    if (records.length) this.activityTx.immediate(records);
  }

  async prune({ now, maxAgeMs, maxRows, bucketAgeMs }) {
    // Activity goes PRUNE_ROWS rows per transaction, the event loop free in between: one statement
    // deleting a busy service's 100,000 rows held every check for a quarter of a second.
    const chunk = (stmt, arg) => this.db.transaction(() => stmt.run(arg).changes).immediate();
    const yieldLoop = () => new Promise((resolve) => setImmediate(resolve));
    while (chunk(this.sql.pruneActivityAge, now - maxAgeMs) === PRUNE_ROWS) await yieldLoop();
    while (chunk(this.sql.pruneActivityRows, maxRows) > 0) await yieldLoop(); // ids may have gaps
    this.db.transaction(() => {
      for (const [name, resolution] of Object.entries(rows.RESOLUTIONS)) this.sql.pruneBuckets.run(resolution, now - bucketAgeMs[name]);
      this.sql.pruneBans.run(now);
    }).immediate();
  }

  async activityCount() {
    return this.sql.activityCount.get();
  }

  async listBans() {
    return this.sql.listBans.all(Date.now()).map(rows.banOf);
  }

  async putBan({ clientKey, durationSeconds, reason }) {
    const now = Date.now();
    const expires = durationSeconds === null ? null : now + durationSeconds * 1000;
    this.sql.putBan.run(clientKey, reason, now, expires);
    this.decisions.setBan(clientKey, { reason, expiresAtMs: expires });
    return rows.banOf({ client_key: clientKey, reason, created_at: now, expires_at: expires });
  }

  async deleteBan(key) {
    const lifted = this.sql.deleteBan.run(key, Date.now()).changes === 1;
    if (lifted) this.decisions.setBan(key, null);
    return lifted;
  }

  async ping() {
    this.sql.ping.get();
  }

  async close() {
    if (!this.db.open) return;
    if (this.decisions) {
      this.decisions.stop();
      this.decisions.foldAll(); // not needed for a restart (start folds), but leaves the file plain
    }
    this.db.close();
  }
}

module.exports = { SqliteStore, migrate, openDatabase };

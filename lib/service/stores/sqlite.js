'use strict';
// The embedded store: one SQLite file in the data folder (WAL). better-sqlite3 is synchronous, so a
// decision batch is one transaction that nothing can interleave with; it commits before any of its
// answers is sent (a crash cannot give back quota that was answered as used). The batch decides
// against clients held in memory and commits its states as one appended row (sqlite-decisions.js).
// synchronous=NORMAL in WAL mode: a committed transaction survives the process being killed; an OS
// crash or power loss may lose the last transactions (docs/service.md, "Durability").
// Activity (records, totals, buckets) lives in a second file, activity.sqlite, written by a worker
// thread (sqlite-activity-worker.js); this thread reads it through a read-only connection.
const fs = require('node:fs');
const path = require('node:path');
const rows = require('./rows');
const { SqliteDecisions } = require('./sqlite-decisions');
const { ActivityWorker } = require('./sqlite-activity-worker');
const { migrate, openDatabase } = require('./sqlite-open');

// How often the activity worker checkpoints the store file's WAL (ms): the WAL holds at most about
// this long's writes (a few MB under full load) before they are copied into the file.
const CHECKPOINT_MS = 100;

/**
 * Moves the activity tables of a store file from before activity.sqlite existed into the activity
 * file, in one transaction holding both files' write locks (a second process starting meanwhile
 * waits, then finds nothing to move). In WAL mode a transaction over two files is atomic per file:
 * the activity file commits first, and a crash before the store file's DROPs commits leaves copies
 * that the next start makes again (OR IGNORE / OR REPLACE of the same rows). `db`: the activity
 * file's connection (the one that migrated it).
 */
function moveLegacyActivity(db, coreFile) {
  db.prepare('ATTACH DATABASE ? AS core').run(coreFile);
  db.transaction(() => {
    const legacy = db.prepare("SELECT count(*) FROM core.sqlite_master WHERE type = 'table' AND name = 'activity'").pluck().get();
    if (!legacy) return;
    db.exec(`INSERT OR IGNORE INTO main.activity SELECT * FROM core.activity;
      INSERT OR REPLACE INTO main.client_stats SELECT * FROM core.client_stats;
      INSERT OR REPLACE INTO main.activity_buckets SELECT * FROM core.activity_buckets;
      DROP TABLE core.activity; DROP TABLE core.client_stats; DROP TABLE core.activity_buckets;`);
  }).immediate();
}

class SqliteStore {
  constructor({ dataDir }) {
    fs.mkdirSync(dataDir, { recursive: true });
    this.kind = 'sqlite';
    this.file = path.join(dataDir, 'tiergate.sqlite');
    this.activityFile = path.join(dataDir, 'activity.sqlite');
    this.db = openDatabase(this.file);
    this.activityDb = null;
    this.activity = null;
  }

  async open() {
    migrate(this.db);
    const act = openDatabase(this.activityFile);
    try {
      migrate(act, 'sqlite-activity');
      moveLegacyActivity(act, this.file);
    } finally {
      act.close();
    }
    // Reads only (admin calls): a read-only connection takes no lock a writer waits for.
    this.activityDb = openDatabase(this.activityFile, { readonly: true });
    this.activityDb.prepare('ATTACH DATABASE ? AS core').run(this.file);
    // The worker checkpoints the store file's WAL; this connection's own checkpoints would pause the checks.
    this.db.pragma('wal_autocheckpoint = 0');
    this.activity = new ActivityWorker({ file: this.activityFile, coreFile: this.file, checkpointMs: CHECKPOINT_MS });
    this.prepare();
  }

  prepare() {
    const q = (sql) => this.db.prepare(sql);
    const a = (sql) => this.activityDb.prepare(sql);
    this.sql = {
      insertClient: q(`INSERT INTO clients (client_key, algorithm, requests_per_second, burst_size, max_requests, window_seconds, state, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (client_key) DO NOTHING`),
      replaceClient: q(`UPDATE clients SET algorithm = ?, requests_per_second = ?, burst_size = ?, max_requests = ?, window_seconds = ?, state = ?, updated_at = ?
        WHERE client_key = ?`),
      getClient: q('SELECT * FROM clients WHERE client_key = ?'),
      deleteClient: q('DELETE FROM clients WHERE client_key = ?'),
      pruneBans: q('DELETE FROM bans WHERE expires_at IS NOT NULL AND expires_at <= ?'),
      listBans: q('SELECT * FROM bans WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC'),
      putBan: q(`INSERT INTO bans (client_key, reason, created_at, expires_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (client_key) DO UPDATE SET reason = excluded.reason, created_at = excluded.created_at, expires_at = excluded.expires_at`),
      deleteBan: q('DELETE FROM bans WHERE client_key = ? AND (expires_at IS NULL OR expires_at > ?)'),
      ping: q('SELECT 1').pluck(),
      // The activity file's (core: the store's file, attached to the read-only connection).
      listClients: a(`SELECT c.*, s.total, s.last_at FROM core.clients c LEFT JOIN client_stats s ON s.client_key = c.client_key ORDER BY c.client_key`),
      stats: a('SELECT * FROM client_stats WHERE client_key = ?'),
      recent: a('SELECT * FROM activity ORDER BY id DESC LIMIT ?'),
      recentOf: a('SELECT * FROM activity WHERE client_key = ? ORDER BY id DESC LIMIT ?'),
      totals: a('SELECT count(*) AS clients, coalesce(sum(s.allowed), 0) AS allowed, coalesce(sum(s.denied), 0) AS denied FROM core.clients c LEFT JOIN client_stats s ON s.client_key = c.client_key'),
      buckets: a('SELECT * FROM activity_buckets WHERE resolution = ? AND start >= ? ORDER BY start'),
      activityCount: a('SELECT count(*) FROM activity').pluck(),
    };
    this.decisions = new SqliteDecisions(this.db);
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
    const deleted = this.decisions.rewrite(key, () => this.sql.deleteClient.run(key).changes === 1);
    // Then its history, in the activity file: after every write posted before (the worker goes in
    // order), and no later write adds totals for a client that is gone. A crash between the two
    // leaves the history of a deleted client in the file (not counted in the totals).
    if (deleted) await this.activity.request('forget', key);
    return deleted;
  }

  /** Gives `units` back to the client's state: { refunded, currentState }, or null with no such client. */
  async refundClient(key, units) {
    const now = Date.now();
    // After the whole log is folded, in one transaction: no logged state of the client lands on it later.
    return this.decisions.rewrite(key, () => {
      const row = this.sql.getClient.get(key);
      const r = rows.refundRow(row, units, now);
      if (r === null) return null;
      this.decisions.sql.save.run(r.state, key);
      return { refunded: r.refunded, currentState: rows.currentState({ ...row, state: r.state }, now) };
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

  /** Resolves once the records are committed (in the worker). */
  async writeActivity(records) {
    if (records.length) await this.activity.request('write', records);
  }

  async prune({ now, maxAgeMs, maxRows, bucketAgeMs }) {
    await this.activity.request('prune', { now, maxAgeMs, maxRows, bucketAgeMs });
    this.sql.pruneBans.run(now);
    return true;
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
    if (this.activity) await this.activity.close();
    if (this.activityDb) this.activityDb.close();
    this.db.close();
  }
}

module.exports = { SqliteStore, migrate, openDatabase };

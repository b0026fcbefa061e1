'use strict';
// Opening an embedded store file: WAL, synchronous=NORMAL, a busy timeout, and its migrations.
const { requireOptional } = require('../../optional');
const { migrations } = require('../migrations');

/** Applies the migrations not yet applied; BEGIN IMMEDIATE takes the write lock, so two processes
 * starting on one file apply each version once. */
function migrate(db, dialect = 'sqlite') {
  db.transaction(() => {
    db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    const done = new Set(db.prepare('SELECT version FROM schema_migrations').pluck().all());
    for (const m of migrations(dialect)) {
      if (done.has(m.version)) continue;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }
  }).immediate();
}

/** A better-sqlite3 database on `file`, in WAL mode (`readonly`: a reader of a file that exists). */
function openDatabase(file, { readonly = false } = {}) {
  const Database = requireOptional('better-sqlite3', 'the embedded store of `tiergate serve`');
  const db = new Database(file, { readonly, fileMustExist: readonly });
  db.pragma('busy_timeout = 5000');
  if (readonly) return db;
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  return db;
}

module.exports = { migrate, openDatabase };

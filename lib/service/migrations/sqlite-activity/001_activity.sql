-- The activity file (activity.sqlite, next to the store's file): per-decision records, per-client
-- totals and the aggregated buckets. A file of its own so that its writer, a worker thread, never
-- waits for the decisions' write lock nor makes them wait for its own (SQLite has one writer per file).
-- Times are Unix milliseconds.
CREATE TABLE client_stats (
  client_key TEXT PRIMARY KEY,
  total INTEGER NOT NULL,
  allowed INTEGER NOT NULL,
  denied INTEGER NOT NULL,
  last_at INTEGER NOT NULL
);
CREATE TABLE activity (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  client_key TEXT NOT NULL,
  at INTEGER NOT NULL,
  allowed INTEGER NOT NULL,
  cost INTEGER NOT NULL,
  response_ms REAL NOT NULL
);
CREATE INDEX activity_by_client ON activity (client_key, id);
CREATE INDEX activity_by_time ON activity (at);
CREATE TABLE activity_buckets (
  resolution INTEGER NOT NULL,
  start INTEGER NOT NULL,
  incoming INTEGER NOT NULL,
  allowed INTEGER NOT NULL,
  denied INTEGER NOT NULL,
  response_ms_sum REAL NOT NULL,
  PRIMARY KEY (resolution, start)
);

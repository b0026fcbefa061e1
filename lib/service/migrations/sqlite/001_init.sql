-- Clients, their state, bans, activity and its aggregated buckets. Times are Unix milliseconds.
CREATE TABLE clients (
  client_key TEXT PRIMARY KEY,
  algorithm TEXT NOT NULL,
  requests_per_second REAL,
  burst_size INTEGER,
  max_requests INTEGER,
  window_seconds INTEGER,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
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
CREATE TABLE bans (
  client_key TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER
);

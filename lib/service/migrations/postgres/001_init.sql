-- Clients, their state, bans, activity and its aggregated buckets. Times are Unix milliseconds.
CREATE TABLE clients (
  client_key TEXT PRIMARY KEY,
  algorithm TEXT NOT NULL,
  requests_per_second DOUBLE PRECISION,
  burst_size INTEGER,
  max_requests INTEGER,
  window_seconds INTEGER,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE client_stats (
  client_key TEXT PRIMARY KEY,
  total BIGINT NOT NULL,
  allowed BIGINT NOT NULL,
  denied BIGINT NOT NULL,
  last_at BIGINT NOT NULL
);
CREATE TABLE activity (
  id BIGSERIAL PRIMARY KEY,
  client_key TEXT NOT NULL,
  at BIGINT NOT NULL,
  allowed BOOLEAN NOT NULL,
  cost INTEGER NOT NULL,
  response_ms DOUBLE PRECISION NOT NULL
);
CREATE INDEX activity_by_client ON activity (client_key, id);
CREATE INDEX activity_by_time ON activity (at);
CREATE TABLE activity_buckets (
  resolution INTEGER NOT NULL,
  start BIGINT NOT NULL,
  incoming BIGINT NOT NULL,
  allowed BIGINT NOT NULL,
  denied BIGINT NOT NULL,
  response_ms_sum DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (resolution, start)
);
CREATE TABLE bans (
  client_key TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT
);

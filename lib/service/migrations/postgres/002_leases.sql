-- The lease store (lib/quota's contract): one row per (limit, key) with its JSON state.
CREATE TABLE lease_keys (
  limit_name TEXT NOT NULL,
  key TEXT NOT NULL,
  state TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (limit_name, key)
);
CREATE INDEX lease_keys_by_expiry ON lease_keys (expires_at);
CREATE SEQUENCE lease_ids;

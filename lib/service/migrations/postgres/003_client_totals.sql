-- A client's totals live on its row and are counted by the decision's own transaction: exact and
-- durable with the decision, and the activity write no longer upserts a row per client it saw.
ALTER TABLE clients
  ADD COLUMN total_requests BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN allowed_requests BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN denied_requests BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN last_activity_at BIGINT;
UPDATE clients AS c SET total_requests = s.total, allowed_requests = s.allowed, denied_requests = s.denied, last_activity_at = s.last_at
  FROM client_stats AS s WHERE s.client_key = c.client_key;
DROP TABLE client_stats;

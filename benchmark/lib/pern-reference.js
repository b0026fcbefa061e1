'use strict';
// The reference design, re-implemented for the load test (not shipped): the PERN rate-limit service's
// check endpoint as it is built there — Express, and per check one PostgreSQL transaction that locks
// the client's row (SELECT … FOR UPDATE), decides (token bucket: refill and debit the row; sliding
// window: count the client's logged requests in the window, log this one if allowed), inserts an
// activity row and commits. Run as a child process: DATABASE_URL, prints "listening on http://…".
const express = require('express');
const { Pool } = require('pg');

const SCHEMA = `
CREATE TABLE IF NOT EXISTS ref_clients (
  client_key TEXT PRIMARY KEY, algorithm TEXT NOT NULL, requests_per_second DOUBLE PRECISION, burst_size INTEGER,
  max_requests INTEGER, window_seconds INTEGER, tokens DOUBLE PRECISION, last_refill TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ref_request_log (id BIGSERIAL PRIMARY KEY, client_key TEXT NOT NULL, ts TIMESTAMPTZ NOT NULL);
CREATE INDEX IF NOT EXISTS ref_request_log_key_ts ON ref_request_log (client_key, ts);
CREATE TABLE IF NOT EXISTS ref_activity (id BIGSERIAL PRIMARY KEY, client_key TEXT NOT NULL, allowed BOOLEAN NOT NULL,
  response_time_ms DOUBLE PRECISION NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now());`;

async function main() {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  await pool.query(SCHEMA);
  const app = express();
  app.use(express.json());

  app.post('/api/v1/rate-limit/check', async (req, res) => {
    const started = process.hrtime.bigint();
    const { clientKey } = req.body || {};
    if (typeof clientKey !== 'string') return res.status(400).json({ error: 'VALIDATION_ERROR' });
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const { rows } = await c.query('SELECT *, now() AS now FROM ref_clients WHERE client_key = $1 FOR UPDATE', [clientKey]);
      const row = rows[0];
      if (!row) {
        await c.query('ROLLBACK');
        return res.status(404).json({ error: 'CLIENT_NOT_FOUND' });
      }
      const now = row.now.getTime();
      let allowed;
      let remaining;
      let limit;
      let resetAt;
      if (row.algorithm === 'token_bucket') {
        limit = row.burst_size;
        const tokens = Math.min(row.burst_size, row.tokens + ((now - row.last_refill.getTime()) / 1000) * row.requests_per_second);
        allowed = tokens >= 1;
        const left = allowed ? tokens - 1 : tokens;
        await c.query('UPDATE ref_clients SET tokens = $2, last_refill = $3 WHERE client_key = $1', [clientKey, left, row.now]);
        remaining = Math.floor(left);
        resetAt = new Date(now + ((row.burst_size - left) / row.requests_per_second) * 1000);
      } else {
        limit = row.max_requests;
        const since = new Date(now - row.window_seconds * 1000);
        const counted = await c.query('SELECT count(*)::int AS n, min(ts) AS oldest FROM ref_request_log WHERE client_key = $1 AND ts > $2', [clientKey, since]);
        const n = counted.rows[0].n;
        allowed = n < row.max_requests;
        if (allowed) await c.query('INSERT INTO ref_request_log (client_key, ts) VALUES ($1, $2)', [clientKey, row.now]);
        remaining = row.max_requests - n - (allowed ? 1 : 0);
        const oldest = counted.rows[0].oldest ? counted.rows[0].oldest.getTime() : now;
        resetAt = new Date(oldest + row.window_seconds * 1000);
      }
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      await c.query('INSERT INTO ref_activity (client_key, allowed, response_time_ms) VALUES ($1, $2, $3)', [clientKey, allowed, ms]);
      await c.query('COMMIT');
      res.set({ 'X-RateLimit-Limit': String(limit), 'X-RateLimit-Remaining': String(remaining), 'X-RateLimit-Reset': String(Math.ceil(resetAt.getTime() / 1000)) });
      if (allowed) return res.json({ allowed, clientKey, algorithm: row.algorithm, limit, remaining, resetAt: resetAt.toISOString() });
      res.set('Retry-After', '1');
      return res.status(429).json({ allowed, clientKey, algorithm: row.algorithm, limit, remaining, resetAt: resetAt.toISOString(), message: 'Rate limit exceeded' });
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      return res.status(500).json({ error: 'INTERNAL_ERROR' });
    } finally {
      c.release();
    }
  });

  const server = app.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`));
  server.keepAliveTimeout = 5000;
  process.on('SIGTERM', () => server.close(() => pool.end().then(() => process.exit(0))));
}

main().catch((err) => { console.error(err); process.exit(1); });

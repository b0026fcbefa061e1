'use strict';
// One process of `npm run bench:cluster`: the same Express app with one rate limiter in front, keyed
// by the `x-key` header. TG_BENCH_CLUSTER (JSON): { kind, redisUrl, postgresUrl, limit, windowMs }.
//   kind: 'none' (no limiter: the ceiling any limiter's throughput is under), 'tiergate-memory' (gatekeeper, per-key bucket in this process only), 'tiergate-cluster'
//   (gatekeeper with cluster mode on Redis), 'tiergate-cluster-pg' (the same on PostgreSQL), 'rate-limiter-flexible' (RateLimiterRedis), or
//   'express-rate-limit' (with rate-limit-redis).
// Reports its port by IPC; answers { op: 'stats' } with the limiter's own counters where it has any.
const express = require('express');
const cfg = JSON.parse(process.env.TG_BENCH_CLUSTER);

const TIERS = [{ name: 'api', limit: 1e9, windowMs: 1000 }];
const keyOf = (req) => req.headers['x-key'] || 'anonymous';
let stats = () => null;
let redis = null;

function limiter() {
  const { kind, limit, windowMs } = cfg;
  if (kind === 'none') return (req, res, next) => next();
  if (kind === 'tiergate-memory') {
    const { gatekeeper } = require('../..');
    // A window of `limit` per `windowMs` as a bucket that refills it over the window (no cluster).
    return gatekeeper({ tiers: TIERS, perKey: { limit, windowMs }, key: keyOf, shed: false });
  }
  if (kind === 'tiergate-cluster' || kind === 'tiergate-cluster-pg') {
    const { gatekeeper, cluster } = require('../..');
    let store;
    if (kind === 'tiergate-cluster') {
      const Redis = require('ioredis');
      redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: 1 });
      redis.on('error', () => {});
      store = { redis };
    } else store = { postgres: cfg.postgresUrl };
    // Fail-closed: the accuracy column is about exact mode (a store answer later than storeTimeoutMs
    // refuses rather than admitting from the safe share).
    const c = cluster({ ...store, storeTimeoutMs: 200, minHolders: 4, bans: false, tiers: { api: { perKey: { algorithm: 'fixed-window', limit, windowMs, fallback: 'closed' } } } });
    // The store's calls as the driver makes them (PostgreSQL: one function call, one round trip, each).
    let storeCalls = 0;
    for (const m of ['lease', 'release']) {
      const f = c.store[m].bind(c.store);
      c.store[m] = (batch) => {
        storeCalls++;
        return f(batch);
      };
    }
    stats = () => {
      const s = c.stats();
      return { requestsSent: s.requestsSent, batches: s.batches, fallbackDecisions: s.fallbackDecisions, maxWaitMs: s.maxWaitMs, storeCalls };
    };
    return gatekeeper({ tiers: TIERS, key: keyOf, shed: false, cluster: c });
  }
  const Redis = require('ioredis');
  redis = new Redis(cfg.redisUrl, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  if (kind === 'rate-limiter-flexible') {
    const { RateLimiterRedis } = require('rate-limiter-flexible');
    const rl = new RateLimiterRedis({ storeClient: redis, points: limit, duration: Math.ceil(windowMs / 1000), keyPrefix: `rlf${cfg.run}` });
    return (req, res, next) => rl.consume(keyOf(req)).then(() => next(), () => res.status(429).end());
  }
  if (kind === 'express-rate-limit') {
    const { rateLimit } = require('express-rate-limit');
    const { RedisStore } = require('rate-limit-redis');
    return rateLimit({
      windowMs,
      limit,
      keyGenerator: keyOf,
      standardHeaders: 'draft-8',
      legacyHeaders: false,
      validate: false,
      store: new RedisStore({ sendCommand: (...args) => redis.call(...args), prefix: `erl${cfg.run}:` }),
    });
  }
  throw new Error(`unknown kind ${kind}`);
}

const app = express();
app.use(limiter());
app.get('/', (req, res) => res.send('ok'));
const server = app.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('message', (m) => {
  if (m.op === 'stats') process.send({ stats: stats() });
  if (m.op === 'stop') {
    server.close();
    if (redis) redis.disconnect();
    process.exit(0);
  }
});

'use strict';
// The Redis lease store against the store contract (lib/quota/store.js; the reference semantics of
// src/core/quota/tests/store.rs), on a real redis-server; and cluster()'s options and errors.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const Redis = require('ioredis');
const { needRedis, redisServer } = require('../helpers/redis');
const { listen, close, request } = require('../helpers/http');
const { cluster, gatekeeper } = require('../..');
const { RedisStore } = require('tiergate/cluster');
const { Quota } = require('tiergate/quota');
const { limitSpec } = require('../../lib/quota/engine');

const spec = (l) => limitSpec({ name: 'api', ...l }, 'limit');
const ask = (limit, key, size, holder = 'h1', ttlMs = 60_000) => ({ limit, key, size, ttlMs, holder });

test('the Redis store', { timeout: 60_000 }, async (t) => {
  if (!needRedis(t)) return;
  const server = await redisServer();
  const client = new Redis(server.url);
  const store = new RedisStore({ redis: client, prefix: 'ts' });
  t.after(async () => {
    client.disconnect();
    await server.stop();
  });

  await t.test('fixed window: debits at grant, ends leases with the window, credits returns of the current window only', async () => {
    const fixed = spec({ algorithm: 'fixed-window', limit: 10, windowMs: 3_600_000 });
    const [a] = await store.lease([ask(fixed, 'k', 6)]);
    assert.equal(a.granted, 6);
    assert.equal(a.remaining, 4);
    assert.equal(a.holders, 1);
    assert.ok(a.ttlMs <= 60_000 && a.ttlMs > 0);
    assert.equal(a.lease, Math.floor(Date.now() / 3_600_000), 'named by its window');
    const [b] = await store.lease([ask(fixed, 'k', 6, 'h2')]);
    assert.deepEqual([b.granted, b.remaining, b.holders], [4, 0, 2]);
    assert.ok(b.retryAfterMs > 0 && b.retryAfterMs <= 3_600_000, 'until the window ends');
    await store.release([{ limit: fixed, key: 'k', lease: a.lease, tokens: 3, reason: 'evicted', holder: 'h1' }]);
    await store.release([{ limit: fixed, key: 'k', lease: a.lease - 1, tokens: 3, reason: 'evicted', holder: 'h1' }]);
    const [c] = await store.lease([ask(fixed, 'k', 5)]);
    assert.equal(c.granted, 3, 'the return of an older window credits nothing');
    assert.deepEqual(await client.keys('ts:q:*'), ['ts:q:{3:api:k}'], 'one hash-tagged key per (limit, key)');
  });

  await t.test('limit api with key export:acme and limit api:export with key acme are two states, in one slot each', async () => {
    // Joined with ':', both would read `api:export:acme`: the one exhausting its limit would spend the other's.
    const api = spec({ name: 'api', algorithm: 'fixed-window', limit: 3, windowMs: 3_600_000 });
    const apiExport = spec({ name: 'api:export', algorithm: 'fixed-window', limit: 3, windowMs: 3_600_000 });
    const [a] = await store.lease([ask(api, 'export:acme', 3)]);
    assert.deepEqual([a.granted, a.remaining], [3, 0]);
    const [b] = await store.lease([ask(apiExport, 'acme', 3)]);
    assert.deepEqual([b.granted, b.remaining, b.holders], [3, 0, 1], 'the other limit has its whole allowance');
    const keys = (await client.keys('ts:q:*')).filter((k) => k.includes('acme')).sort();
    assert.equal(keys.length, 2, `two keys: ${keys}`);
    // Each key's hash tag is the whole (limit, key), so it stays in one slot of a Redis Cluster.
    for (const k of keys) assert.equal(k.slice(k.indexOf('{') + 1, k.indexOf('}')), k.slice(k.indexOf('{') + 1, -1));
  });

  await t.test('token bucket: grants what it holds, retry after one token, returns credited up to the burst', async () => {
    const bucket = spec({ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 });
    const [a] = await store.lease([ask(bucket, 'b', 8)]);
    assert.deepEqual([a.granted, a.remaining], [5, 0]);
    assert.ok(a.retryAfterMs > 0 && a.retryAfterMs <= 100, `${a.retryAfterMs}`);
    await store.release([{ limit: bucket, key: 'b', lease: a.lease, tokens: 9, reason: 'released', holder: 'h1' }]);
    const [b] = await store.lease([ask(bucket, 'b', 8)]);
    assert.equal(b.granted, 5, 'capped at the burst');
    assert.equal(b.holders, 1, 'a released holder is forgotten');
    const never = spec({ name: 'never', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 1 });
    await store.lease([ask(never, 'n', 1)]);
    const [z] = await store.lease([ask(never, 'n', 1, 'h1', 5000)]);
    assert.deepEqual([z.granted, z.retryAfterMs], [0, 5000], 'no refill: ask again after a lease life');
    assert.equal(await client.pttl('ts:q:{5:never:n}'), -1, 'a bucket that never refills is never forgotten');
  });

  await t.test('sliding window: a lease occupies the window until its expiry plus a window; a return shrinks it', async () => {
    const sliding = spec({ algorithm: 'sliding-window', limit: 10, windowMs: 1000 });
    const [a] = await store.lease([ask(sliding, 's', 10, 'h1', 100)]);
    assert.deepEqual([a.granted, a.remaining], [10, 0]);
    assert.ok(a.retryAfterMs > 1000 && a.retryAfterMs <= 1100, `${a.retryAfterMs}`);
    await store.release([{ limit: sliding, key: 's', lease: a.lease, tokens: 4, reason: 'expired', holder: 'h1' }]);
    const [b] = await store.lease([ask(sliding, 's', 9)]);
    assert.equal(b.granted, 4);
  });

  await t.test('sliding window: a lease spent dry leaves the window one window after its last spend, not after its TTL', async () => {
    const sliding = spec({ algorithm: 'sliding-window', limit: 10, windowMs: 1000 });
    const [a] = await store.lease([ask(sliding, 'dry', 10, 'h1', 60_000)]);
    assert.ok(a.retryAfterMs > 60_000, 'until told otherwise: TTL + window');
    // Its last spend was 990 ms before the return: the record has 10 ms or so to live.
    await store.release([{ limit: sliding, key: 'dry', lease: a.lease, tokens: 0, reason: 'spent', idleMs: 990, holder: 'h1' }]);
    const [b] = await store.lease([ask(sliding, 'dry', 1)]);
    assert.equal(b.granted, 0, 'its spends still count');
    assert.ok(b.retryAfterMs <= 10, `free within 10 ms: ${b.retryAfterMs}`);
    await new Promise((r) => setTimeout(r, 15));
    const [c] = await store.lease([ask(sliding, 'dry', 10)]);
    assert.equal(c.granted, 10);
  });

  await t.test('the script is sent by EVALSHA, and once by EVAL to a server that lost it', async () => {
    const bucket = spec({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 100 });
    await client.script('FLUSH');
    await client.config('RESETSTAT');
    const batch = Array.from({ length: 20 }, (_, i) => ask(bucket, `e${i}`, 1));
    await store.lease(batch);
    await store.lease(batch);
    const stats = await client.info('commandstats');
    const calls = (cmd) => Number((new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats) || [0, 0])[1]);
    assert.equal(calls('evalsha'), 40, 'every call by its SHA');
    assert.equal(calls('eval'), 20, 'the first batch again by EVAL after NOSCRIPT; then cached');
  });

  await t.test('a Redis that is away fails the batch instead of hanging (URL client)', async () => {
    const dead = await redisServer();
    const away = new RedisStore({ redis: dead.url });
    await away.lease([ask(spec({ algorithm: 'token-bucket', limit: 1, windowMs: 1000 }), 'x', 1)]);
    await dead.stop();
    const t0 = Date.now();
    const answers = await away.lease([ask(spec({ algorithm: 'token-bucket', limit: 1, windowMs: 1000 }), 'x', 1), ask(spec({ algorithm: 'token-bucket', limit: 1, windowMs: 1000 }), 'y', 1)]);
    assert.ok(answers.every((a) => a instanceof Error), 'an error per request');
    assert.ok(Date.now() - t0 < 5000);
    await away.close();
  });

  await t.test('through the gatekeeper: 429 for a key past its cluster limit, 503 past the tier budget, 403 for a shared ban; hooks say why', async () => {
    const c = cluster({ redis: client, prefix: 'gk', tiers: { api: { perKey: { algorithm: 'fixed-window', limit: 2, windowMs: 3_600_000 }, budget: { algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: 3 } } } });
    await c.ready;
    const rejected = [];
    const guard = gatekeeper.http({ tiers: [{ name: 'api', limit: 1e9, windowMs: 1000 }], key: { header: 'x-key' }, shed: false, cluster: c, onReject: (info) => rejected.push(info) }, (req, res) => res.end('ok'));
    const server = http.createServer(guard);
    const port = await listen(server);
    try {
      const get = (key) => request(port, { headers: { 'x-key': key } });
      assert.deepEqual([(await get('a')).status, (await get('a')).status], [200, 200]);
      const limited = await get('a');
      assert.equal(limited.status, 429);
      assert.ok(Number(limited.headers['retry-after']) >= 1);
      assert.equal(limited.json.type, 'urn:tiergate:problem:rate-limited');
      assert.equal((await get('b')).status, 200, 'the third token of the budget');
      const full = await get('b');
      assert.equal(full.status, 503);
      assert.equal(full.json.type, 'urn:tiergate:problem:tier-capacity');
      await c.bans.ban('mallory', { durationMs: 60_000 });
      const banned = await get('mallory');
      assert.equal(banned.status, 403);
      assert.equal(banned.json.type, 'urn:tiergate:problem:banned');
      assert.deepEqual(rejected.map((i) => [i.verdict, i.status, i.cause, i.cluster.limit, i.cluster.reason]), [
        ['rate-limited', 429, 'cluster', 'key', 'EXHAUSTED'],
        ['tier-full', 503, 'cluster', 'budget', 'EXHAUSTED'],
        ['banned', 403, 'cluster', 'ban', 'BANNED'],
      ]);
    } finally {
      await close(server);
      await c.close();
    }
  });

  await t.test("docs/cluster.md's example: keyed by API key, an IP ban shared through the cluster refuses that client whatever key it sends", async () => {
    const c = cluster({ redis: client, prefix: 'doc', tiers: { paid: { perKey: { algorithm: 'token-bucket', limit: 50, windowMs: 1000, burst: 200 } } } });
    await c.ready;
    const guard = gatekeeper.http({
      tiers: [{ name: 'paid', limit: 1e9, windowMs: 1000 }],
      key: { header: 'x-api-key' },
      bans: { rules: false },
      cluster: c,
    }, (req, res) => res.end('ok'));
    const server = http.createServer(guard);
    const port = await listen(server);
    try {
      const get = (key) => request(port, { headers: { 'x-api-key': key, 'x-user-tier': 'paid' } });
      assert.equal((await get('acme')).status, 200);
      assert.equal(await c.bans.ban('127.0.0.1', { durationMs: 60_000, reason: 'scraping' }), 'published');
      for (const key of ['acme', 'another-key']) assert.equal((await get(key)).status, 403, `refused with key ${key}`);
    } finally {
      await close(server);
      await c.close();
    }
  });

  await t.test('cluster() and the gatekeeper option check their options', () => {
    const bad = (o, re) => assert.throws(() => cluster(o), (e) => re.test(e.message) && /^ERR_TIERGATE_/.test(e.code));
    bad(undefined, /cluster: options must be an object/);
    bad({ redis: client }, /options.limits or options.tiers must give at least one limit/);
    const one = [{ name: 'x', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }];
    bad({ redis: client, limits: one, banKey: 'short' }, /options.banKey must be at least 16 bytes/);
    bad({ redis: client, limits: one, banKey: 42 }, /options.banKey must be a string or a Buffer/);
    bad({ redis: client, limits: one, banKey: [] }, /options.banKey must hold at least one secret/);
    bad({ redis: client, limits: one, banKey: 'k'.repeat(32), bans: false }, /banKey signs the shared bans; it needs bans: true/);
    bad({ redis: client, tiers: { free: { perKey: { algorithm: 'token-bucket', limit: 1, windowMs: 1000 } } }, fallback: 'sometimes' }, /options.fallback must be 'open' or 'closed'/);
    bad({ redis: client, tiers: { free: { perKey: { name: 'x', algorithm: 'token-bucket', limit: 1, windowMs: 1000 } } } }, /perKey.name is given by the tier/);
    bad({ redis: client, tiers: { free: { perKey: { algorithm: 'token-bucket', limit: 1, windowMs: 1000 }, burst: 3 } } }, /unknown option "burst"/);
    bad({ redis: client, tiers: { free: { perKey: { limit: -1, windowMs: 1000 } } } }, /limits\[0\].limit must be an integer from 0/);
    bad({ redis: 42, tiers: { free: { perKey: { algorithm: 'token-bucket', limit: 1, windowMs: 1000 } } } }, /must be an ioredis client \(Redis or Cluster\) or a redis:\/\/ URL/);
    bad({ redis: client, limits: [{ name: 'a', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }], prefix: 'no spaces' }, /prefix must be 1-64 characters/);
    assert.throws(() => gatekeeper({ cluster: {} }), /options.cluster must be made by tiergate.cluster\(\)/);
    const c = cluster({ redis: client, bans: false, tiers: { gold: { budget: { algorithm: 'token-bucket', limit: 10, windowMs: 1000 } } } });
    assert.throws(() => gatekeeper({ cluster: c }), /options.cluster has limits for tier "gold", which is not one of the tiers/);
    assert.throws(() => gatekeeper({ tiers: [{ name: 'gold', limit: 10, windowMs: 10000 }], cost: 0.5, cluster: c }), /options.cost must be an integer with options.cluster/);
    assert.ok(c.quota instanceof Quota);
    assert.deepEqual(c.quota.limits.map((l) => [l.name, l.fallback]), [['tier:gold:budget', 'open']]);
    return c.close();
  });
});

test('a Redis URL without ioredis installed names what to install', () => {
  // A child in which resolving 'ioredis' fails as it does where it is not installed.
  const script = `
    const Module = require('node:module');
    const resolve = Module._resolveFilename;
    Module._resolveFilename = function (request, ...rest) {
      if (request === 'ioredis') { const e = new Error("Cannot find module 'ioredis'"); e.code = 'MODULE_NOT_FOUND'; throw e; }
      return resolve.call(this, request, ...rest);
    };
    const { cluster } = require(${JSON.stringify(path.join(__dirname, '..', '..'))});
    try { cluster({ redis: 'redis://127.0.0.1:1', limits: [{ name: 'a', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] }); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
  const out = JSON.parse(r.stdout);
  assert.equal(out.code, 'ERR_TIERGATE_MISSING_DEPENDENCY');
  assert.match(out.message, /^tiergate: cluster mode over a Redis URL needs the package "ioredis": npm install ioredis \(or pass your own client as redis\)$/);
});

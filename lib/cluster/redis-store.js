'use strict';
// The Redis lease store (lib/quota/store.js): each request or return is one call of one Lua script
// (lib/cluster/script.js) on one hash-tagged key. Calls are sent by EVALSHA; a server that does not
// know the script (NOSCRIPT: first use, a restart, a failover) gets it once by EVAL, which also caches
// it there. A standalone server gets each batch as one pipeline; a Redis Cluster gets each call routed
// to its slot's master (ioredis writes them back to back; with `enableAutoPipelining` it pipelines
// them per node).
const { createHash } = require('node:crypto');
const { LUA, limitArgs } = require('./script');
const { redisClient } = require('./redis-client');
const { isObject, onlyKnown, typeName } = require('../options');

const SHA = createHash('sha1').update(LUA).digest('hex');
const OPTIONS = new Set(['redis', 'prefix']);
const PREFIX = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * The hash of (limit, key): `<prefix>:q:{<length of limit>:<limit>:<key>}`. The length makes the
 * split unambiguous (limit `api` with key `export:acme` and limit `api:export` with key `acme` would
 * otherwise share one state); the hash tag covers the whole pair, so it sits in one slot (a `}` in a
 * name ends the tag early: still one slot per pair, only shared with more pairs).
 */
function stateKey(prefix, limit, key) {
  return `${prefix}:q:{${limit.length}:${limit}:${key}}`;
}

class RedisStore {
  #client;
  #owned;
  #cluster;
  #prefix;

  /** `{ redis: ioredis client | URL, prefix = 'tiergate' }` */
  constructor(options) {
    if (!isObject(options)) throw new TypeError(`RedisStore options must be an object { redis, prefix? }, got ${typeName(options)}`);
    onlyKnown(options, OPTIONS, 'RedisStore options');
    const prefix = options.prefix === undefined ? 'tiergate' : options.prefix;
    if (typeof prefix !== 'string' || !PREFIX.test(prefix)) throw new TypeError(`RedisStore options.prefix must be 1-64 characters of A-Z a-z 0-9 _ . : -, got ${typeName(prefix)}`);
    const { client, owned, isCluster } = redisClient(options.redis, 'RedisStore options.redis');
    this.#client = client;
    this.#owned = owned;
    this.#cluster = isCluster;
    this.#prefix = prefix;
  }

  get client() {
    return this.#client;
  }

  get prefix() {
    return this.#prefix;
  }

  async lease(batch) {
    const calls = batch.map((r) => [stateKey(this.#prefix, r.limit.name, r.key), 'lease', ...limitArgs(r.limit), r.size, r.ttlMs, r.holder]);
    const out = await this.#run(calls);
    return out.map(([err, v]) => {
      if (err) return err;
      if (!Array.isArray(v) || v.length !== 6) return new Error(`tiergate: the lease script answered ${typeName(v)}`);
      const [granted, ttlMs, remaining, holders, lease, retryAfterMs] = v.map(Number);
      return { granted, ttlMs, remaining, holders, lease, retryAfterMs };
    });
  }

  async release(batch) {
    const calls = batch.map((r) => [stateKey(this.#prefix, r.limit.name, r.key), 'release', ...limitArgs(r.limit), r.lease, r.tokens, r.reason, r.holder, r.idleMs === undefined ? '' : r.idleMs]);
    const out = await this.#run(calls);
    const failed = out.find(([err]) => err);
    if (failed) throw failed[0];
  }

  /** Runs each `[key, ...argv]` through the script; `[err, value]` per call, in order. */
  async #run(calls) {
    if (calls.length === 0) return [];
    const out = await this.#send(calls.map((c) => ['evalsha', SHA, 1, ...c]));
    const missing = [];
    out.forEach(([err], i) => {
      if (err && /NOSCRIPT/.test(err.message)) missing.push(i);
    });
    if (missing.length > 0) {
      const again = await this.#send(missing.map((i) => ['eval', LUA, 1, ...calls[i]]));
      missing.forEach((i, j) => {
        out[i] = again[j];
      });
    }
    return out;
  }

  #send(commands) {
    if (!this.#cluster) return this.#client.pipeline(commands).exec().then((res) => res || commands.map(() => [new Error('tiergate: pipeline not run')]));
    return Promise.all(commands.map(([cmd, ...args]) => this.#client.call(cmd, ...args).then((v) => [null, v], (e) => [e])));
  }

  /** Closes the connection if the store made it (from a URL); a client passed in is its owner's. */
  async close() {
    if (!this.#owned) return;
    // QUIT waits for the replies still due; a server that is away would never send them.
    let timer;
    const late = new Promise((resolve) => {
      timer = setTimeout(resolve, 1000);
    });
    await Promise.race([this.#client.quit().catch(() => {}), late]);
    clearTimeout(timer);
    this.#client.disconnect();
  }
}

module.exports = { RedisStore, stateKey, SCRIPT_SHA: SHA };

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
const { CLUSTER } = require('../schema/cluster');

const SHA = createHash('sha1').update(LUA).digest('hex');
// The index of the overrides in force (field: JSON [limit, key] -> the limit): one hash, so that
// listing them and holding their cap is one call. Adds at the cap are refused inside Redis.
const OVERRIDE_ADD = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`;
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
    const prefix = options.prefix === undefined ? CLUSTER.prefix.default : options.prefix;
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

  /**
   * An operator's call on one key (./limits-admin.js): op 'peek' | 'reset' | 'refund' | 'override' |
   * 'unoverride' with `args` after the limit's numbers (./script.js). The script's answer.
   */
  async admin(op, spec, key, args = []) {
    const [[err, v]] = await this.#run([[stateKey(this.#prefix, spec.name, key), op, ...limitArgs(spec), ...args]]);
    if (err) throw err;
    return v;
  }

  #overrideIndex() {
    return `${this.#prefix}:{ov}`;
  }

  /**
   * Sets the override of (spec, key): `args` [a, b] it counts with, `limit` as given; false when
   * `cap` others are in force. The index first: a key never counts with an override it does not list.
   */
  async override(spec, key, args, limit, cap) {
    if ((await this.#client.eval(OVERRIDE_ADD, 1, this.#overrideIndex(), JSON.stringify([spec.name, key]), limit, cap)) !== 1) return false;
    await this.admin('override', spec, key, [...args, limit]);
    return true;
  }

  /** Clears the override of (spec, key): whether there was one. */
  async clearOverride(spec, key) {
    const had = Number(await this.admin('unoverride', spec, key)) === 1;
    return (await this.#client.hdel(this.#overrideIndex(), JSON.stringify([spec.name, key]))) === 1 || had;
  }

  /** `[{ name, key, limit }]`: the overrides in force. */
  async listOverrides() {
    const h = await this.#client.hgetall(this.#overrideIndex());
    return Object.entries(h).map(([f, limit]) => {
      const [name, key] = JSON.parse(f);
      return { name, key, limit: Number(limit) };
    });
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

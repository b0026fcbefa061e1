'use strict';
// Cluster mode: limits, tier budgets and bans that hold across processes, on Redis, with the hot
// path in process memory. `cluster(options)` builds one lease engine (lib/quota) funded from a Redis
// store (./redis-store.js) or a PostgreSQL one (./postgres-store.js) by a lease driver, and a ban
// channel (./bans.js); pass it to the
// gatekeeper (`gatekeeper({ cluster })`) or spend its named limits yourself (`c.spend(name, key)`).
//
// Engine limits: the named `limits` as given, then per tier `tier:<tier>:key` (its `perKey` limit,
// keyed like the gatekeeper's per-key buckets) and `tier:<tier>:budget` (its cluster-wide budget,
// one key). A tier's `fallback` ('open' | 'closed', default `options.fallback`, 'open') is what its
// limits do while Redis does not answer.
const { Quota, QUOTA_CODE, QUOTA_CODE_NAMES: CODE_NAMES } = require('../quota/engine');
const { LeaseDriver, driverOptions } = require('../quota/driver');
const { RedisStore } = require('./redis-store');
const { PostgresStore } = require('./postgres-store');
const { BanChannel, BanCache } = require('./bans');
const { DefenseTable } = require('./defense-table');
const { ClusterLimits } = require('./limits-admin');
const { typeName, isObject, onlyKnown, schemaOption } = require('../options');
const { buildingOptions } = require('../errors');
const { tierSecretOption } = require('../gatekeeper/tier-header');
const { CLUSTER, LEASE_DRIVER } = require('../schema/cluster');
const { optionNames } = require('../schema');

const OPTIONS = optionNames(CLUSTER);
const TIER_FIELDS = new Set(['perKey', 'budget', 'fallback']);
const { CLUSTER_BANNED: BANNED } = require('./gate-codes');

const { NEED_LEASE } = QUOTA_CODE;

const fallbackOption = (v, at) => schemaOption(CLUSTER.fallback, v, at);

function normalize(options) {
  if (!isObject(options)) throw new TypeError(`cluster: options must be an object { redis, ... }, got ${typeName(options)}`);
  onlyKnown(options, OPTIONS, 'cluster: options');
  // Each given option's type, range or values (lib/schema/cluster.js), checked here so that the
  // message names it as written; the lease engine and driver check them again, with their names.
  for (const e of Object.values(CLUSTER)) if (options[e.name] !== undefined) schemaOption(e, options[e.name], `cluster: options.${e.name}`);
  const fallback = options.fallback === undefined ? CLUSTER.fallback.default : options.fallback;
  const common = (l, tierFallback) => ({
    ...(options.minHolders !== undefined && l.minHolders === undefined ? { minHolders: options.minHolders } : {}),
    ...l,
    fallback: l.fallback === undefined ? tierFallback : l.fallback,
  });
  const limits = [];
  if (options.limits !== undefined) {
    if (!Array.isArray(options.limits)) throw new TypeError(`cluster: options.limits must be an array of limits, got ${typeName(options.limits)}`);
    for (const [i, l] of options.limits.entries()) {
      if (!isObject(l)) throw new TypeError(`cluster: options.limits[${i}] must be an object, got ${typeName(l)}`);
      limits.push(common(l, fallback));
    }
  }
  const tiers = new Map(); // tier name -> { key: limit index | -1, budget: limit index | -1 }
  if (options.tiers !== undefined) {
    if (!isObject(options.tiers)) throw new TypeError(`cluster: options.tiers must be an object { [tier]: { perKey?, budget?, fallback? } }, got ${typeName(options.tiers)}`);
    for (const [name, t] of Object.entries(options.tiers)) {
      const at = `cluster: options.tiers.${name}`;
      if (!isObject(t)) throw new TypeError(`${at} must be an object { perKey?, budget?, fallback? }, got ${typeName(t)}`);
      onlyKnown(t, TIER_FIELDS, at);
      const tf = t.fallback === undefined ? fallback : fallbackOption(t.fallback, `${at}.fallback`);
      const ids = { key: -1, budget: -1, fallback: tf };
      for (const [field, suffix] of [['perKey', 'key'], ['budget', 'budget']]) {
        if (t[field] === undefined) continue;
        if (!isObject(t[field])) throw new TypeError(`${at}.${field} must be an object (a limit without name), got ${typeName(t[field])}`);
        if (t[field].name !== undefined) throw new TypeError(`${at}.${field}.name is given by the tier; leave it out`);
        ids[suffix] = limits.length;
        // A tier's limits are token buckets unless they say otherwise, as the local tier buckets are.
        limits.push(common({ name: `tier:${name}:${suffix}`, algorithm: 'token-bucket', ...t[field] }, tf));
      }
      tiers.set(name, ids);
    }
  }
  if (limits.length === 0) throw new TypeError('cluster: options.limits or options.tiers must give at least one limit');
  const bans = options.bans === undefined ? CLUSTER.bans.default : options.bans;
  // One secret or several (the first signs, every one verifies), like tierSecret.
  const banKeys = tierSecretOption(options.banKey, 'cluster: options.banKey') || [];
  if (banKeys.length > 0 && !bans) throw new TypeError('cluster: options.banKey signs the shared bans; it needs bans: true');
  const driver = {};
  for (const f of Object.keys(LEASE_DRIVER)) if (options[f] !== undefined) driver[f] = options[f];
  return { limits, tiers, bans, banKeys, driver, maxKeys: options.maxKeys === undefined ? CLUSTER.maxKeys.default : options.maxKeys };
}

/** The store of `options.redis` or `options.postgres` (exactly one); PostgreSQL's waits end at storeDownMs. */
function clusterStore(options, driver) {
  if ((options.redis === undefined) === (options.postgres === undefined)) throw new TypeError('cluster: options needs exactly one of redis and postgres');
  const prefix = options.prefix === undefined ? {} : { prefix: options.prefix };
  if (options.redis !== undefined) return new RedisStore({ redis: options.redis, ...prefix });
  return new PostgresStore({ postgres: options.postgres, ...prefix, timeoutMs: driverOptions(driver).storeDownMs });
}

class Cluster {
  #tiers;
  #driver;
  #store;
  #bans;
  #limits;

  constructor(options) {
    const o = buildingOptions(() => {
      const n = normalize(options);
      const quota = new Quota({ limits: n.limits, maxKeys: n.maxKeys });
      const store = clusterStore(options, n.driver);
      return { ...n, quota, store };
    });
    this.#tiers = o.tiers;
    this.#store = o.store;
    this.#driver = new LeaseDriver(o.quota, o.store, o.driver);
    this.#bans = o.bans ? new BanChannel(o.store.client, o.store.prefix, o.banKeys) : null;
    this.#limits = new ClusterLimits(o.quota, o.store, this.#driver.storeDownMs);
    /** Resolves once the store is set up (PostgreSQL's table), the ban channel subscribed and loaded, and the overrides read. */
    const opened = Promise.resolve(typeof o.store.open === 'function' ? o.store.open() : null);
    this.ready = Promise.all([opened.then(() => this.#limits.load()), this.#bans === null ? null : this.#bans.start()]).then(() => {});
    // A Redis that is away at start must not become an unhandled rejection: `ready` reports it to those who wait.
    this.ready.catch(() => {});
  }

  get driver() {
    return this.#driver;
  }

  get quota() {
    return this.#driver.quota;
  }

  get store() {
    return this.#store;
  }

  /** One key of one limit as the store counts it: get, reset, refund, override, clearOverride, overrides (./limits-admin.js). */
  get limits() {
    return this.#limits;
  }

  /** The ban channel (null with `bans: false`): `ban(target, { durationMs, reason })`, `lift`, `setLists`. */
  get bans() {
    return this.#bans;
  }

  /**
   * Makes a gatekeeper's abuse defense this cluster's ban table (the gatekeeper calls it): its bans
   * and lists are shared, and the cluster step no longer keeps bans of its own. One defense per cluster.
   */
  useDefense(defense) {
    if (this.#bans === null) return;
    if (!(this.#bans.table instanceof BanCache)) throw new TypeError('gatekeeper: options.cluster already shares its bans with another gatekeeper\'s defense; give each gatekeeper its own cluster()');
    this.#bans.useTable(new DefenseTable(defense));
  }

  // The exact-key ban cache the cluster step reads, or null (no bans, or the defense enforces them).
  get #cache() {
    const b = this.#bans;
    return b !== null && b.table instanceof BanCache ? b.table : null;
  }

  /** The id of a named limit (for `spend` with a number: the fastest). */
  limitId(name) {
    return this.#driver.quota.limitId(name);
  }

  /** LeaseDriver.spend on a limit by name or id: a code at once, or a Promise of `{ code, retryAfterMs }`. */
  spend(limit, key, cost = 1) {
    return this.#driver.spend(typeof limit === 'number' ? limit : this.limitId(limit), key, cost);
  }

  /** LeaseDriver.check on a limit by name or id: a Promise of `{ allowed, code, reason, retryAfterMs }`. */
  check(limit, key, cost = 1) {
    return this.#driver.check(typeof limit === 'number' ? limit : this.limitId(limit), key, cost);
  }

  /** The tiers `options.tiers` gives limits to. */
  get tierNames() {
    return [...this.#tiers.keys()];
  }

  /** Whether the gatekeeper needs a request's key for this cluster. */
  get needsKey() {
    if (this.#cache !== null) return true;
    for (const t of this.#tiers.values()) if (t.key >= 0) return true;
    return false;
  }

  /**
   * The gatekeeper's cluster step for an admitted request of `tier` (a name) and `key` (or undefined):
   * the ban cache (unless the defense holds the bans: it refused banned clients already), then the
   * gatekeeper's cluster limits that apply (`named`: lib/defense's clusterStep, or null), then the tier's per-key limit, then its budget. null: admit; else `{ code, limit:
   * 'ban' | 'named' | 'key' | 'budget', retryAfterMs, quota }` (code BANNED, or a quota refusal code; 'named'
   * with `index` and `name`; `quota`: the refusing limit's `limit`), or a Promise of
   * either when a key waits for its first lease.
   */
  gate(tier, key, cost, named) {
    const cache = this.#cache;
    if (cache !== null && key !== undefined) {
      const b = cache.get(key);
      if (b !== null) return { code: BANNED, limit: 'ban', reason: 'BANNED', retryAfterMs: b.until - Date.now(), quota: 0 };
    }
    if (named !== undefined && named !== null && named.any) return this.#named(named, 0, tier, key, cost);
    return this.#tierSteps(tier, key, cost);
  }

  // The gatekeeper's cluster limits (`limits: [{ ..., cluster: true }]`), in order, then the tier's.
  // `s`: { ids, keys, costs } (lib/defense clusterStep); a key waiting for its lease copies what is
  // left, since the gatekeeper refills `s` for the next request meanwhile.
  #named(s, from, tier, key, cost) {
    for (let i = from; i < s.ids.length; i++) {
      const k = s.keys[i];
      if (k === undefined) continue;
      const r = this.#driver.spend(s.ids[i], k, s.costs[i]);
      if (typeof r === 'number') {
        if (r >= NEED_LEASE) return this.#namedRefusal(s.ids[i], i, r, this.#driver.result[0]);
        continue;
      }
      const rest = { ids: s.ids, keys: s.keys.slice(), costs: s.costs.slice() };
      return r.then((d) => (d.code >= NEED_LEASE ? this.#namedRefusal(rest.ids[i], i, d.code, d.retryAfterMs) : this.#named(rest, i + 1, tier, key, cost)));
    }
    return this.#tierSteps(tier, key, cost);
  }

  #namedRefusal(id, index, code, retryAfterMs) {
    const spec = this.#driver.quota.limits[id];
    return { code, limit: 'named', index, name: spec.name, reason: CODE_NAMES[code], retryAfterMs, quota: spec.limit };
  }

  #tierSteps(tier, key, cost) {
    const t = this.#tiers.get(tier);
    if (t === undefined) return null;
    if (t.key >= 0 && key !== undefined) return this.#step(t, t.key, key, cost, 'key');
    if (t.budget >= 0) return this.#step(t, t.budget, '', cost, 'budget');
    return null;
  }

  #step(t, limit, key, cost, which) {
    const r = this.#driver.spend(limit, key, cost);
    if (typeof r === 'number') return this.#next(t, r, this.#driver.result[0], cost, which);
    return r.then((d) => this.#next(t, d.code, d.retryAfterMs, cost, which));
  }

  #next(t, code, retryAfterMs, cost, which) {
    if (code >= NEED_LEASE) {
      const spec = this.#driver.quota.limits[which === 'key' ? t.key : t.budget];
      return { code, limit: which, reason: CODE_NAMES[code], retryAfterMs, quota: spec.limit };
    }
    if (which === 'key' && t.budget >= 0) return this.#step(t, t.budget, '', cost, 'budget');
    return null;
  }

  /** The driver's stats (lib/quota/driver.js) and the ban channel's (./bans.js) with `held`. */
  stats() {
    const bans = this.#bans === null ? null : { ...this.#bans.stats, held: this.#bans.table.size };
    return { ...this.#driver.stats(), bans, limitOverrides: this.#limits.stats() };
  }

  /** Sends unspent leases back, unsubscribes, and closes the Redis connection if it made it. */
  async close() {
    await this.#driver.close();
    if (this.#bans !== null) await this.#bans.close();
    await this.#store.close();
  }
}

/** `tiergate.cluster(options)`: see docs/cluster.md. */
function cluster(options) {
  return new Cluster(options);
}

module.exports = { cluster, Cluster, clusterOptions: normalize, RedisStore, PostgresStore, BanChannel, CLUSTER_BANNED: BANNED };

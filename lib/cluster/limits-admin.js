'use strict';
// `cluster.limits` (and `gate.limits` for a gatekeeper's cluster limits): one key of one limit of the
// cluster, as the store counts it, for operators. Every method is one call to the store (Redis:
// ./script.js; PostgreSQL: ./postgres-sql.js) and returns a Promise:
//
//   get(name, key)                 -> { name, key, limit, remaining, resetMs, overridden }; counts nothing.
//                                     Tokens leased to processes count as spent (the store debited
//                                     them when it granted them).
//   reset(name, key)               -> whether the key had counted anything (its override stays)
//   refund(name, key, units = 1)   -> the units given back (never beyond the limit)
//   override(name, key, { limit }) -> the key's limit from its next lease on, on every process
//                                     (ERR_TIERGATE_OVERRIDES_FULL at the cap)
//   clearOverride(name, key)       -> whether there was one
//   overrides()                    -> [{ name, key, limit }]
//
// Each call waits for the store at most `storeDownMs` (the driver's judge of a store that is away),
// then rejects; what the store did meanwhile, if anything, stands.
//
// What the store does takes effect in the processes at their next lease of the key: leases granted
// before a reset or an override are spent as they were granted (a lease lives at most the limit's
// leaseTtlMs), and a process that found the key empty asks the store again within renewalPeriodMs
// (docs/cluster.md "Operating on one key").
const { CODES, codedError, withCode } = require('../errors');
const { isObject, onlyKnown, finite, typeName } = require('../options');
const { MAX_KEY_BYTES } = require('../quota/engine');
const { limitArgs } = require('./script');
const { MAX_OVERRIDES } = require('../defense/admin');

const OVERRIDE_FIELDS = new Set(['limit']);
const STATS_REFRESH_MS = 1000;

/** The limit's numbers with `limit` in place of its own: a bucket's burst (its most) and its refill in proportion. */
function overriddenArgs(spec, limit) {
  if (spec.algorithm !== 'token-bucket') return limitArgs({ ...spec, limit });
  const [code, rate] = limitArgs(spec);
  return [code, (rate * limit) / spec.burst, limit];
}

/** `promise`, or a rejection after `ms` (a hung store: a frozen Redis host never answers). */
function within(promise, ms) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`tiergate: the cluster's store did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

class ClusterLimits {
  #quota;
  #store;
  /** The overrides in force as this process last read them from the store (stats()). */
  #known = null;
  #readAt = 0;

  /** `waitMs`: the longest a call waits for the store (the driver's storeDownMs). */
  constructor(quota, store, waitMs) {
    this.#quota = quota;
    // Every call the store gets from here, bounded.
    this.#store = {
      admin: (...a) => within(store.admin(...a), waitMs),
      override: (...a) => within(store.override(...a), waitMs),
      clearOverride: (...a) => within(store.clearOverride(...a), waitMs),
      listOverrides: () => within(store.listOverrides(), waitMs),
    };
  }

  #spec(name, method) {
    const id = this.#quota.ids.get(name);
    if (id === undefined) throw codedError(RangeError, CODES.INVALID_ARGUMENT, `limits.${method}: the cluster has no limit named ${JSON.stringify(name)} (limits: ${[...this.#quota.ids.keys()].join(', ')})`);
    return this.#quota.limits[id];
  }

  #key(key, method) {
    if (typeof key !== 'string' || key === '') throw codedError(TypeError, CODES.INVALID_ARGUMENT, `limits.${method}: key must be a non-empty string, got ${typeName(key)}`);
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw codedError(RangeError, CODES.INVALID_ARGUMENT, `limits.${method}: key must be at most ${MAX_KEY_BYTES} bytes`);
    return key;
  }

  // Argument errors as rejections, so that a caller awaiting the call sees them as any other.
  async #checked(fn) {
    try {
      return fn();
    } catch (err) {
      throw withCode(err, CODES.INVALID_ARGUMENT);
    }
  }

  async get(name, key) {
    const [spec, k] = await this.#checked(() => [this.#spec(name, 'get'), this.#key(key, 'get')]);
    const [limit, remaining, resetMs, overridden] = (await this.#store.admin('peek', spec, k)).map(Number);
    return { name, key: k, limit, remaining, resetMs, overridden: overridden === 1 };
  }

  async reset(name, key) {
    const [spec, k] = await this.#checked(() => [this.#spec(name, 'reset'), this.#key(key, 'reset')]);
    return Number([].concat(await this.#store.admin('reset', spec, k))[0]) === 1;
  }

  async refund(name, key, units = 1) {
    const [spec, k, n] = await this.#checked(() => [this.#spec(name, 'refund'), this.#key(key, 'refund'), finite(units, 'limits.refund: units', { max: 0xffffffff, integer: true })]);
    if (n === 0) return 0;
    return Number([].concat(await this.#store.admin('refund', spec, k, [n]))[0]);
  }

  async override(name, key, options) {
    const [spec, k, limit] = await this.#checked(() => {
      const s = this.#spec(name, 'override');
      const kk = this.#key(key, 'override');
      if (!isObject(options)) throw new TypeError(`limits.override: expected { limit }, got ${typeName(options)}`);
      onlyKnown(options, OVERRIDE_FIELDS, 'limits.override');
      return [s, kk, finite(options.limit, 'limits.override: limit', { min: 1, max: 0xffffffff, integer: true })];
    });
    const set = await this.#store.override(spec, k, overriddenArgs(spec, limit).slice(1), limit, MAX_OVERRIDES);
    await this.load();
    if (!set) throw codedError(RangeError, CODES.OVERRIDES_FULL, `limits.override: ${MAX_OVERRIDES} overrides are in force in the cluster already (the cap); clear some first`);
  }

  async clearOverride(name, key) {
    const [spec, k] = await this.#checked(() => [this.#spec(name, 'clearOverride'), this.#key(key, 'clearOverride')]);
    const had = await this.#store.clearOverride(spec, k);
    await this.load();
    return had;
  }

  async overrides() {
    const list = await this.#store.listOverrides();
    this.#known = new Map(list.map((o) => [JSON.stringify([o.name, o.key]), o.limit]));
    return list;
  }

  /**
   * `{ overrides, maxOverrides, byName }`: the cluster's overrides as last read here (null: not read
   * yet). Read at start, after each change made here, and again in the background when stats() is
   * called STATS_REFRESH_MS after the last read: another process's change shows within that.
   */
  stats() {
    const now = Date.now();
    if (now - this.#readAt >= STATS_REFRESH_MS) {
      this.#readAt = now;
      this.load();
    }
    if (this.#known === null) return { overrides: null, maxOverrides: MAX_OVERRIDES, byName: {} };
    const byName = {};
    for (const f of this.#known.keys()) {
      const [name] = JSON.parse(f);
      byName[name] = (byName[name] || 0) + 1;
    }
    return { overrides: this.#known.size, maxOverrides: MAX_OVERRIDES, byName };
  }

  /** Reads the overrides once (cluster.ready), so that stats() has them. */
  load() {
    this.#readAt = Date.now();
    return this.overrides().then(() => {}, () => {});
  }
}

module.exports = { ClusterLimits, overriddenArgs };

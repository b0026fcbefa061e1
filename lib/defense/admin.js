'use strict';
// `gate.limits`: one key of one named limit, for operators and handlers, in this process.
//
//   get(name, key)                 -> { name, key, limit, remaining, resetMs, overridden }, counts nothing
//   reset(name, key)               -> whether the key had counted anything (its override stays)
//   refund(name, key, units = 1)   -> whether the key was held
//   charge(req, name, units)       -> a weight the response reported (see ./outcome.js)
//   override(name, key, { limit }) -> the key's limit from now on (ERR_TIERGATE_OVERRIDES_FULL at the cap)
//   clearOverride(name, key)       -> whether there was one
//   overrides()                    -> [{ name, key, limit }]
//
// `key` is what the limit counts by: a client address (text, masked to the limit's prefixes as the
// requests are) for `by: 'ip'` or a prefix, else the header's value or the function's result.
// Cluster limits (`cluster: true`) are counted by the cluster's store: get, reset, refund, override,
// clearOverride and overrides go to the cluster's (lib/cluster/limits-admin.js) and return Promises
// (a `by: 'ip'` key masked as the requests' are); charge is refused for them.
const { keyArg, UNUSABLE } = require('./keys');
const { clientIp } = require('../http/client');
const { CODES, codedError, withCode } = require('../errors');
const { isObject, onlyKnown, finite, typeName } = require('../options');
const native = require('../native');

const { maxOverrides: MAX_OVERRIDES, maxPerRequest: MAX_PER_REQUEST } = native.limitAdminConstants();
const OVERRIDE_FIELDS = new Set(['limit']);

class LimitsAdmin {
  #handle;
  #limits;
  #index;
  #cluster;
  /** lib/cluster/limits-admin.js of the bound cluster, and a client address's key (the ban key). */
  #clusterAdmin = null;
  #clusterIpKey = null;
  #outcome;
  #trustProxy;
  #warn;
  #warned = new Set();
  /** name -> Map(key -> limit): the operators' overrides as given, for overrides() and stats(). */
  #overrides = new Map();

  constructor(handle, limits, clusterLimits, outcome, trustProxy, warn) {
    this.#handle = handle;
    this.#limits = limits;
    this.#index = new Map(limits.map((l, i) => [l.name, i]));
    this.#cluster = new Map(clusterLimits.map((l) => [l.name, l]));
    this.#outcome = outcome;
    this.#trustProxy = trustProxy;
    this.#warn = warn;
    /** Per limit, this request's limit where it is a function of the request (0 elsewhere); null without such limits. */
    this.requestLimits = limits.some((l) => l.limitFn !== null) ? new Float64Array(limits.length) : null;
  }

  /** Sends the cluster limits' calls to `cluster.limits`; `ipKey(address)` masks a `by: 'ip'` key. */
  bindCluster(clusterAdmin, ipKey) {
    this.#clusterAdmin = clusterAdmin;
    this.#clusterIpKey = ipKey;
  }

  // A call on a cluster limit, to the cluster (a Promise), or undefined for a local name.
  #clusterCall(method, name, key, ...rest) {
    const l = this.#cluster.get(name);
    if (l === undefined || this.#clusterAdmin === null) return undefined;
    const k = l.by.kind === 'ip' && typeof key === 'string' && key !== '' ? this.#clusterIpKey(key) : key;
    return this.#clusterAdmin[method](name, k, ...rest);
  }

  // The limit's index; a clear error for a cluster limit or an unknown name.
  #at(name, method) {
    const i = this.#index.get(name);
    if (i !== undefined) return i;
    if (this.#cluster.has(name)) {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT,
        `limits.${method}: ${JSON.stringify(name)} is a cluster limit; it is counted by the cluster, not here`,
      );
    }
    throw codedError(RangeError, CODES.INVALID_ARGUMENT,
      `limits.${method}: no local limit named ${JSON.stringify(name)} (known: ${[...this.#index.keys()].join(', ') || 'none'})`,
    );
  }

  #key(key, method) {
    if (typeof key !== 'string' || key === '') {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `limits.${method}: key must be a non-empty string, got ${typeName(key)}`);
    }
    return key;
  }

  // Runs a native call, giving its argument errors the INVALID_ARGUMENT code.
  #call(fn) {
    try {
      return fn();
    } catch (err) {
      if (err && err.code === 'InvalidArg') throw codedError(RangeError, CODES.INVALID_ARGUMENT, `limits: ${err.message}`);
      throw withCode(err, CODES.INVALID_ARGUMENT);
    }
  }

  #byIp(i) {
    return this.#limits[i].by.kind === 'ip';
  }

  get(name, key) {
    const c = this.#clusterCall('get', name, key);
    if (c !== undefined) return c;
    const i = this.#at(name, 'get');
    const k = this.#key(key, 'get');
    const s = this.#call(() => this.#handle.limitPeek(i, k, this.#byIp(i)));
    return { name, key: k, limit: s.limit, remaining: s.remaining, resetMs: s.resetMs, overridden: s.overridden };
  }

  reset(name, key) {
    const c = this.#clusterCall('reset', name, key);
    if (c !== undefined) return c;
    const i = this.#at(name, 'reset');
    const k = this.#key(key, 'reset');
    return this.#call(() => this.#handle.limitReset(i, k, this.#byIp(i)));
  }

  refund(name, key, units = 1) {
    const c = this.#clusterCall('refund', name, key, units);
    if (c !== undefined) return c;
    const i = this.#at(name, 'refund');
    const k = this.#key(key, 'refund');
    const n = this.#units(units, 'refund');
    return this.#call(() => this.#handle.limitRefund(i, k, this.#byIp(i), n, 0));
  }

  /**
   * Counts `units` more for `req` on limit `name` (a weight known once the work is done). While the
   * request's reservation is unsettled (a limit that counts by outcome) the weight is added when it
   * settles, and not at all when the outcome is skipped; otherwise it is counted now. Either way up to
   * what the key has left: a key is emptied, never put in debt.
   */
  charge(req, name, units) {
    const i = this.#at(name, 'charge');
    const n = this.#units(units, 'charge');
    if (!isObject(req) || !isObject(req.headers)) {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `limits.charge: expected a request, got ${typeName(req)}`);
    }
    if (n === 0 || this.#outcome.defer(req, i, n)) return;
    const l = this.#limits[i];
    let k = keyArg(l.by, req);
    if (k === UNUSABLE) {
      if (!this.#warned.has(l.option)) {
        this.#warned.add(l.option);
        this.#warn(`${l.option}.by`, new TypeError('returned a value that is not usable; charging the client address'));
      }
      k = true;
    }
    const byIp = k === true;
    const key = byIp ? clientIp(req, this.#trustProxy) || '' : k;
    this.#call(() => this.#handle.limitCharge(i, key, byIp, n));
  }

  override(name, key, options) {
    const c = this.#clusterCall('override', name, key, options);
    if (c !== undefined) return c;
    const i = this.#at(name, 'override');
    const k = this.#key(key, 'override');
    if (!isObject(options)) throw codedError(TypeError, CODES.INVALID_ARGUMENT, `limits.override: expected { limit }, got ${typeName(options)}`);
    this.#call(() => onlyKnown(options, OVERRIDE_FIELDS, 'limits.override'));
    const limit = this.#call(() => finite(options.limit, 'limits.override: limit', { min: 1, max: 0xffffffff, integer: true }));
    if (this.#limits[i].native.algorithm === 'sliding-window' && limit > 65536) {
      throw codedError(RangeError, CODES.INVALID_ARGUMENT, `limits.override: limit must be at most 65536 for a sliding-window limit, got ${limit}`);
    }
    if (!this.#call(() => this.#handle.limitOverride(i, k, this.#byIp(i), limit))) {
      throw codedError(RangeError, CODES.OVERRIDES_FULL, `limits.override: ${MAX_OVERRIDES} overrides are in force already (the cap); clear some first`);
    }
    let m = this.#overrides.get(name);
    if (m === undefined) this.#overrides.set(name, (m = new Map()));
    m.set(k, limit);
  }

  clearOverride(name, key) {
    const c = this.#clusterCall('clearOverride', name, key);
    if (c !== undefined) return c;
    const i = this.#at(name, 'clearOverride');
    const k = this.#key(key, 'clearOverride');
    const had = this.#call(() => this.#handle.limitClearOverride(i, k, this.#byIp(i)));
    const m = this.#overrides.get(name);
    if (m !== undefined) m.delete(k);
    return had;
  }

  /** The local overrides (an array); with cluster limits, a Promise of the local ones and the cluster's. */
  overrides() {
    const out = this.#localOverrides();
    if (this.#clusterAdmin === null || this.#cluster.size === 0) return out;
    return this.#clusterAdmin.overrides().then((all) => out.concat(all.filter((o) => this.#cluster.has(o.name))));
  }

  #localOverrides() {
    const out = [];
    for (const [name, m] of this.#overrides) for (const [key, limit] of m) out.push({ name, key, limit });
    return out;
  }

  /** Sets this request's limit of every limit given as a function (`limit: (req) => n`). */
  perRequest(req, keys, keyAt, ip) {
    const limits = this.#limits;
    const out = this.requestLimits;
    for (let i = 0; i < limits.length; i++) {
      const l = limits[i];
      const k = keys[keyAt + i];
      out[i] = 0;
      if (l.limitFn === null || k === undefined) continue;
      let v;
      try {
        v = l.limitFn(req);
      } catch (err) {
        this.#warn(`${l.option}.limit`, err);
      }
      if (!(Number.isInteger(v) && v >= 1 && v <= 0xffffffff)) {
        if (!this.#warned.has(`${l.option}.limit`)) {
          this.#warned.add(`${l.option}.limit`);
          this.#warn(`${l.option}.limit`, new TypeError(`returned ${typeName(v)}, not an integer from 1 to 4294967295; counted with a limit of 1`));
        }
        v = 1;
      }
      out[i] = v;
      this.#handle.limitPerRequest(i, k === true ? ip : k, k === true, v);
    }
  }

  /** Per limit name, the overrides in force; totals and caps. */
  stats() {
    const [overrides, perRequest] = this.#handle.limitOverrideCounts();
    const byName = {};
    for (const [name, m] of this.#overrides) if (m.size > 0) byName[name] = m.size;
    const out = { overrides, maxOverrides: MAX_OVERRIDES, perRequest, maxPerRequest: MAX_PER_REQUEST, byName };
    // The cluster's overrides (of every process) as this process last read them: lib/cluster/limits-admin.js.
    if (this.#clusterAdmin !== null && this.#cluster.size > 0) out.cluster = this.#clusterAdmin.stats();
    return out;
  }

  #units(v, method) {
    return this.#call(() => finite(v, `limits.${method}: units`, { max: 0xffffffff, integer: true }));
  }
}

module.exports = { LimitsAdmin, MAX_OVERRIDES, MAX_PER_REQUEST };

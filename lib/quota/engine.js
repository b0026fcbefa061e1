'use strict';
// The lease engine (src/core/quota, bound in src/node/quota.rs): one process's side of cluster-wide
// limits. It decides every spend from process memory (leases the store debited beforehand) and says
// what to ask of the store; it does no I/O. lib/quota/driver.js carries its requests to a store.
//
// This file checks option types, fills defaults (declared natively) and names every problem; the
// native core checks values. The hot call `trySpend(limitId, key, cost)` is a raw native callback
// defined on each Quota: it returns a code (QUOTA_CODE) and, for a refusal, writes the ms until asking
// again may succeed into `quota.result[0]`.
const native = require('../native');
const { typeName, isObject, onlyKnown, number, optionOrDefault } = require('../options');
const { QUOTA_LIMIT } = require('../schema/cluster');
const { optionNames } = require('../schema');
const { buildingOptions } = require('../errors');
const { limitNumbers, tokenBucket, bucketUnits } = require('../schema/limit');

const { codes, reasons, defaults, maxKeyBytes } = native.quotaConstants();
/** trySpend's codes: admitted (LEASE, PROVISIONAL, FALLBACK), waiting (NEED_LEASE, AWAITING), refused (the rest). */
const QUOTA_CODE = Object.freeze(codes);
/** Code names by code. */
const QUOTA_CODE_NAMES = Object.freeze(Object.keys(codes).sort((a, b) => codes[a] - codes[b]));
/** Why tokens go back to the store (StoreReturn.reason). */
const RETURN_REASONS = Object.freeze(reasons);
/** The engine's defaults, declared once natively. */
const QUOTA_DEFAULTS = Object.freeze(defaults);
const MAX_KEY_BYTES = maxKeyBytes;

/** The algorithms a limit may name; the engine sees 'bucket' or 'window', the store all three. */
const ALGORITHMS = QUOTA_LIMIT.algorithm.values;
/** A limit without `algorithm` counts in fixed windows, as a gatekeeper's named limit does. */
const DEFAULT_ALGORITHM = QUOTA_LIMIT.algorithm.default;
const TUNING_FIELDS = ['renewalPeriodMs', 'leadTimeMs', 'leaseTtlMs', 'maxLease', 'initialLease', 'retryMs', 'minHolders'];
const LIMIT_FIELDS = optionNames(QUOTA_LIMIT);
const OPTION_FIELDS = new Set(['limits', 'maxKeys', 'idleTtlMs', 'sweepPerPoll']);

/**
 * One limit's options -> its complete spec (what stores see, frozen). `at` names it in messages.
 * `unfunded`: 'wait' (default: a key without lease waits one bounded round trip; exact) or
 * 'provisional' (admits up to `provisional` tokens on credit, default 1).
 */
function limitSpec(l, at) {
  if (!isObject(l)) throw new TypeError(`${at} must be an object { name, algorithm, ... }, got ${typeName(l)}`);
  onlyKnown(l, LIMIT_FIELDS, at);
  if (typeof l.name !== 'string') throw new TypeError(`${at}.name must be a string, got ${typeName(l.name)}`);
  const algorithm = l.algorithm === undefined ? DEFAULT_ALGORITHM : l.algorithm;
  // The one check of limit, windowMs and burst (lib/schema/limit.js), as the gatekeeper's named limits.
  // A token bucket as the ledger's (limit 0 with a burst: a fixed allowance, never refilled).
  const n = algorithm === 'token-bucket' ? tokenBucket(l, at) : limitNumbers(l, at, algorithm, ALGORITHMS);
  const fallback = optionOrDefault(QUOTA_LIMIT, l, 'fallback', at);
  const unfunded = optionOrDefault(QUOTA_LIMIT, l, 'unfunded', at);
  if (l.provisional !== undefined && unfunded !== 'provisional') {
    throw new TypeError(`${at}.provisional is the allowance of unfunded: 'provisional'; set that too or leave it out`);
  }
  const spec = { name: l.name, algorithm, limit: n.limit, windowMs: n.windowMs, fallback, unfunded, provisional: 0 };
  if (algorithm === 'token-bucket') spec.burst = n.burst;
  // At least 1: the native engine takes an allowance of 0 for 'wait', which the spec would not say.
  if (unfunded === 'provisional') spec.provisional = optionOrDefault(QUOTA_LIMIT, l, 'provisional', at);
  // Each in its declared range here; the native engine checks how they relate (leadTimeMs ≤ renewalPeriodMs ...).
  for (const f of TUNING_FIELDS) spec[f] = optionOrDefault(QUOTA_LIMIT, l, f, at);
  return Object.freeze(spec);
}

/** A spec as the native constructor takes it. */
function toNative(s) {
  const win = s.algorithm !== 'token-bucket';
  return {
    name: s.name,
    algorithm: { 'token-bucket': 'bucket', 'fixed-window': 'window', 'sliding-window': 'sliding' }[s.algorithm],
    rate: win ? 0 : bucketUnits(s).refillPerSec,
    burst: win ? 0 : s.burst,
    limit: win ? s.limit : 0,
    windowMs: win ? s.windowMs : 0,
    provisional: s.provisional,
    fallback: s.fallback,
    renewalPeriodMs: s.renewalPeriodMs,
    leadTimeMs: s.leadTimeMs,
    leaseTtlMs: s.leaseTtlMs,
    maxLease: s.maxLease,
    initialLease: s.initialLease,
    retryMs: s.retryMs,
    minHolders: s.minHolders,
  };
}

function normalize(options) {
  if (!isObject(options)) throw new TypeError(`Quota options must be an object { limits, maxKeys?, idleTtlMs?, sweepPerPoll? }, got ${typeName(options)}`);
  onlyKnown(options, OPTION_FIELDS, 'options');
  if (!Array.isArray(options.limits)) throw new TypeError(`options.limits must be an array of limits, got ${typeName(options.limits)}`);
  const limits = options.limits.map((l, i) => limitSpec(l, `limits[${i}]`));
  const get = (f) => number(options[f] === undefined ? QUOTA_DEFAULTS[f] : options[f], `options.${f}`);
  return { limits, maxKeys: get('maxKeys'), idleTtlMs: get('idleTtlMs'), sweepPerPoll: get('sweepPerPoll') };
}

// Native config errors (InvalidArg) are value errors: RangeError.
function callNative(fn) {
  try {
    return fn();
  } catch (err) {
    if (err && err.code === 'InvalidArg') throw new RangeError(err.message, { cause: err });
    throw err;
  }
}

const HANDLE = Symbol('tiergate.quota.handle');

class Quota {
  /**
   * @param {{ limits: object[], maxKeys?: number, idleTtlMs?: number, sweepPerPoll?: number }} options
   */
  constructor(options) {
    const { handle, limits } = buildingOptions(() => {
      const o = normalize(options);
      const h = callNative(() => new native.QuotaHandle({ ...o, limits: o.limits.map(toNative) }));
      return { handle: h, limits: o.limits };
    });
    Object.defineProperty(this, HANDLE, { value: handle });
    /** The limits' complete specs, by id (what a store is told about each request). */
    this.limits = Object.freeze(limits);
    this.ids = new Map(limits.map((l, i) => [l.name, i]));
    // Defines this.trySpend (raw native callback) and this.result (Float64Array [retryAfterMs]).
    handle.bind(this);
  }

  /** The id of a limit name, for `trySpend`. */
  limitId(name) {
    const id = this.ids.get(name);
    if (id === undefined) throw new RangeError(`unknown limit ${JSON.stringify(String(name))} (limits: ${[...this.ids.keys()].join(', ')})`);
    return id;
  }

  /** `{ requests: [{ id, limit, key, size, ttlMs }], returns: [{ limit, key, lease, tokens, reason }] }` due now. */
  poll() {
    return this[HANDLE].poll();
  }

  /** Whether `poll` has work now. */
  wantsPoll() {
    return this[HANDLE].wantsPoll();
  }

  /**
   * The store's answer to request `id`: `{ granted, ttlMs, remaining, holders, lease, retryAfterMs }`.
   * Returns what to send back at once (`{ limit, key, lease, tokens, reason }`), or null.
   */
  grant(limit, key, id, grant) {
    return callNative(() => this[HANDLE].grant(limit, key, id, grant));
  }

  /** The store did not answer request `id` (an error, or a timeout). */
  fail(limit, key, id) {
    callNative(() => this[HANDLE].fail(limit, key, id));
  }

  /** Every unspent lease, to send back at shutdown; the engine is left empty. */
  releaseAll() {
    return this[HANDLE].releaseAll();
  }

  /** Running totals (tokens, except refused/requests/grants/failures/abandoned/returnsDropped/evicted: counts), keys, storeUp. */
  stats() {
    return this[HANDLE].stats();
  }

  /** `{ held, debt, pending }` of one key: unexpired lease tokens, provisional debt, a request in flight. */
  keyState(limit, key) {
    const [held, debt, pending] = callNative(() => this[HANDLE].keyState(limit, key));
    return { held, debt, pending: pending === 1 };
  }
}

module.exports = { Quota, QUOTA_CODE, QUOTA_CODE_NAMES, QUOTA_DEFAULTS, RETURN_REASONS, ALGORITHMS, MAX_KEY_BYTES, limitSpec };

'use strict';
// The in-memory Ledger: tiers of token buckets (highest priority first), optionally one bucket per key
// inside a tier, all state in Rust (src/core/ledger.rs). This file checks option types, fills defaults
// and names every problem; the native core checks values (ranges, duplicates).
//
// Hot path: `consume` is a raw native callback defined as an own property of each Ledger by the native
// `bind` (src/node/ledger.rs) — no JS wrapper, no object allocated per call. `tryConsume` is a small JS
// function around raw native callbacks that caches, per keyed tier, where each key's bucket sits
// (lib/ledger/key-cache.js): a string read through N-API costs more than a whole JS Map lookup.
const native = require('../native');
const { keyedTryConsume } = require('./key-cache');
const { typeName, isObject, onlyKnown, number, boolean } = require('../options');
const { tokenBucket, bucketUnits } = require('../schema/limit');
const { optionNames } = require('../schema');
const { LEDGER, LEDGER_TIER, LEDGER_PER_KEY: PK } = require('../schema/ledger');
const { CODES, codedError, buildingOptions } = require('../errors');

const argError = (Ctor, message) => codedError(Ctor, CODES.INVALID_ARGUMENT, message);

// Indices into the Float64Array that `consume` fills, and `limitedBy` names by code: declared natively.
const { result: RESULT, limitedBy: LIMITED_BY } = native.ledgerConstants();
Object.freeze(RESULT);
Object.freeze(LIMITED_BY);

/** Where a Ledger keeps its native handle, for other native components sharing the same ledger. */
const LEDGER_HANDLE = Symbol.for('tiergate.ledger.handle');

// A tier's budget and a per-key quota are token buckets in the one vocabulary of a limit
// (lib/schema/limit.js); the native ledger takes them as { capacity, refillPerSec }. Names, defaults
// and ranges: lib/schema/ledger.js.
const TIER_FIELDS = optionNames(LEDGER_TIER);
const PER_KEY_FIELDS = optionNames(PK);
const OPTION_FIELDS = optionNames(LEDGER);

/** A per-key count or duration in its schema range, with the messages the native ledger gives. */
function perKeyNumber(pk, name, at) {
  const e = PK[name];
  const v = number(pk[name] === undefined ? e.default : pk[name], `${at}.${name}`);
  if (e.type === 'integer' && !(Number.isInteger(v) && v >= e.min && v <= e.max)) {
    throw new RangeError(`${at}.${name} must be an integer from ${e.min} to ${e.max} (got ${v})`);
  }
  if (e.type === 'number' && !(Number.isFinite(v) && v > e.min)) throw new RangeError(`${at}.${name} must be a finite number > ${e.min} (got ${v})`);
  return v;
}

function perKeyOptions(pk, at) {
  if (!isObject(pk)) throw new TypeError(`${at} must be an object { limit, windowMs, burst?, maxKeys?, idleTtlMs? }, got ${typeName(pk)}`);
  onlyKnown(pk, PER_KEY_FIELDS, at);
  const b = tokenBucket(pk, at);
  return {
    words: { limit: b.limit, windowMs: b.windowMs, burst: b.burst },
    native: {
      ...bucketUnits(b),
      maxKeys: perKeyNumber(pk, 'maxKeys', at),
      idleTtlMs: perKeyNumber(pk, 'idleTtlMs', at),
    },
  };
}

// Options -> { tiers: the complete tier list the native constructor takes, config: each tier's
// budget and per-key quota in the words they were given (what snapshot() reports) }. Bucket numbers
// are checked here (lib/schema/limit.js), the rest in Rust.
function normalize(options) {
  if (!isObject(options)) throw new TypeError(`Ledger options must be an object { tiers, perKey? }, got ${typeName(options)}`);
  onlyKnown(options, OPTION_FIELDS, 'options');
  const { tiers } = options;
  if (!Array.isArray(tiers)) throw new TypeError(`options.tiers must be an array of tiers, highest priority first, got ${typeName(tiers)}`);
  const shared = options.perKey === undefined ? null : perKeyOptions(options.perKey, 'options.perKey');
  const config = [];
  const native = tiers.map((t, i) => {
    const at = `tiers[${i}]`;
    if (!isObject(t)) throw new TypeError(`${at} must be an object { name, limit, windowMs, burst?, protected?, perKey? }, got ${typeName(t)}`);
    onlyKnown(t, TIER_FIELDS, at);
    if (typeof t.name !== 'string') throw new TypeError(`${at}.name must be a string, got ${typeName(t.name)}`);
    if (t.protected !== undefined) boolean(t.protected, `${at}.protected`);
    let perKey = shared;
    if (t.perKey === null) perKey = null; // this tier opts out of options.perKey
    else if (t.perKey !== undefined) perKey = perKeyOptions(t.perKey, `${at}.perKey`);
    const budget = tokenBucket(t, at);
    config.push({ limit: budget.limit, windowMs: budget.windowMs, burst: budget.burst, perKey: perKey === null ? null : perKey.words });
    return { name: t.name, ...bucketUnits(budget), protected: t.protected === true, perKey: perKey === null ? undefined : perKey.native };
  });
  return { tiers: native, config };
}

// options.perKey is copied into every tier that does not set its own, so Rust names a bad value
// tiers[i].perKey.x; name the option that was written instead.
function namingSharedPerKey(options, fn) {
  try {
    return fn();
  } catch (err) {
    const m = /^tiers\[(\d+)\]\.perKey\./.exec(err && err.message);
    if (m && options.perKey !== undefined && options.tiers[m[1]].perKey === undefined) err.message = `options.perKey.${err.message.slice(m[0].length)}`;
    throw err;
  }
}

// Native config errors (InvalidArg) are value errors: RangeError. A GenericFailure is Ledger.shared's
// name conflict (no ledger of that name, or one with another config): an option error too, coded here
// because buildingOptions codes only TypeError and RangeError.
function callNative(fn) {
  try {
    return fn();
  } catch (err) {
    if (err && err.code === 'InvalidArg') throw new RangeError(err.message, { cause: err });
    if (err && err.code === 'GenericFailure') {
      const e = new Error(err.message, { cause: err });
      e.code = CODES.INVALID_OPTION;
      throw e;
    }
    throw err;
  }
}

class Ledger {
  /**
   * @param {{ tiers: Array<{ name: string, limit: number, windowMs: number, burst?: number, protected?: boolean,
   *   perKey?: object | null }>, perKey?: object }} options
   */
  constructor(options) {
    let config;
    attach(this, buildingOptions(() => {
      const n = normalize(options);
      config = n.config;
      return namingSharedPerKey(options, () => callNative(() => new native.LedgerHandle(n.tiers)));
    }), config);
  }

  /**
   * The ledger registered as `name` in this process — the same native state from every worker_thread.
   * Created from `options` by the first caller; later callers must pass the same options or none.
   */
  static shared(name, options) {
    const ledger = Object.create(Ledger.prototype);
    let config = null;
    attach(ledger, buildingOptions(() => {
      if (typeof name !== 'string' || name === '') throw new TypeError(`Ledger.shared: name must be a non-empty string, got ${typeName(name)}`);
      const n = options === undefined ? undefined : normalize(options);
      if (n !== undefined) config = n.config;
      return namingSharedPerKey(options, () => callNative(() => native.LedgerHandle.shared(name, n && n.tiers)));
    }), config);
    return ledger;
  }

  /** `{ allowed, remaining, limit, retryAfterMs, resetMs, limitedBy }` from a `consume` result array. */
  static readResult(array) {
    if (!(array instanceof Float64Array) || array.length < RESULT.LENGTH) {
      throw argError(TypeError, `readResult needs a Float64Array of at least ${RESULT.LENGTH} elements`);
    }
    return {
      allowed: array[RESULT.ALLOWED] === 1,
      remaining: array[RESULT.REMAINING],
      limit: array[RESULT.LIMIT],
      retryAfterMs: array[RESULT.RETRY_AFTER_MS],
      resetMs: array[RESULT.RESET_MS],
      limitedBy: LIMITED_BY[array[RESULT.LIMITED_BY]],
    };
  }

  /** Tier names, highest priority first (index = tier id). */
  get tiers() {
    return this[LEDGER_HANDLE].names;
  }

  /** The numeric id of a tier name, for the fastest `tryConsume`. */
  tierId(name) {
    if (typeof name !== 'string') throw argError(TypeError, `tierId: name must be a string, got ${typeName(name)}`);
    const id = this[LEDGER_HANDLE].ids.get(name);
    if (id === undefined) throw argError(RangeError, `unknown tier "${name}" (tiers: ${this.tiers.join(', ')})`);
    return id;
  }

  /** Scales the refill of a tier's pool from now on; 0 stops it, 1 is the configured rate. */
  setRefillScale(tier, scale) {
    const id = tierIndex(this, tier);
    if (typeof scale !== 'number') throw argError(TypeError, `setRefillScale: scale must be a number, got ${typeName(scale)}`);
    if (!(scale >= 0 && scale <= 1)) throw argError(RangeError, `setRefillScale: scale must be between 0 and 1 (got ${scale})`);
    this[LEDGER_HANDLE].native.setRefillScale(id, scale);
  }

  refillScale(tier) {
    return this[LEDGER_HANDLE].native.refillScale(tierIndex(this, tier));
  }

  /**
   * Per tier, as of now: `{ name, protected, tokens, limit, windowMs, burst, refillScale, keys }`: the
   * budget as it was configured (a `Ledger.shared(name)` attached without options reports the
   * equivalent `{ limit: burst, windowMs }` of the native rate, or `{ limit: 0, windowMs: 1000 }`
   * for a fixed allowance).
   */
  snapshot() {
    const h = this[LEDGER_HANDLE];
    return h.native.snapshot().map((t, i) => {
      const b = h.config !== null ? h.config[i] : bucketWords(t);
      return {
        name: t.name, protected: t.protected, tokens: t.tokens, limit: b.limit, windowMs: b.windowMs, burst: b.burst, refillScale: t.refillScale, keys: t.keys,
      };
    });
  }

  /**
   * `reset()`: every pool full, every key forgotten. `reset(tier)`: that tier only. `reset(tier, key)`:
   * forgets the key's bucket (it starts full again). `reset(undefined, key)`: the key in every tier.
   * Refill scales are left alone. Returns how many buckets were reset.
   */
  reset(tier, key) {
    const id = tier === undefined ? undefined : tierIndex(this, tier);
    if (key !== undefined && typeof key !== 'string') throw argError(TypeError, `reset: key must be a string or undefined, got ${typeName(key)}`);
    return this[LEDGER_HANDLE].native.reset(id, key);
  }

  /** Whether `other` is backed by the same native ledger (e.g. the same `Ledger.shared` name). */
  isSameLedger(other) {
    return other instanceof Ledger && this[LEDGER_HANDLE].native.sameAs(other[LEDGER_HANDLE].native);
  }

}

function tierIndex(ledger, tier) {
  if (typeof tier === 'string') return ledger.tierId(tier);
  if (typeof tier !== 'number') throw argError(TypeError, `tier must be a tier name (string) or id (number), got ${typeName(tier)}`);
  const n = ledger[LEDGER_HANDLE].names.length; // not `ledger.tiers`: a subclass or own property may shadow it
  if (!(Number.isInteger(tier) && tier >= 0 && tier < n)) {
    throw argError(RangeError, `tier ${tier} is not a tier id of this ledger (ids are 0 to ${n - 1})`);
  }
  return tier;
}

function attach(ledger, handle, config = null) {
  const names = Object.freeze(handle.tierNames());
  const ids = new Map(names.map((n, i) => [n, i]));
  Object.defineProperty(ledger, LEDGER_HANDLE, { value: Object.freeze({ native: handle, names, ids, config }) });
  // Defines ledger.consume (raw native callback) and ledger.result (Float64Array) on the ledger, and the
  // raw callbacks tryConsume's wrapper calls on `raw`.
  const raw = {};
  handle.bind(ledger, raw);
  ledger.tryConsume = keyedTryConsume(raw, ids, handle.maxKeys(), 2 ** handle.slotCodeBits());
}

/**
 * Per tier, its budget and per-key quota `{ limit, windowMs, burst, perKey: { limit, windowMs, burst } | null }`
 * as they were configured, or null for a `Ledger.shared(name)` attached without options.
 */
function ledgerConfig(ledger) {
  return ledger[LEDGER_HANDLE].config;
}

/** A native bucket `{ capacity, refillPerSec }` in the limit words, for a ledger attached without options. */
function bucketWords(q) {
  if (!(q.refillPerSec > 0)) return { limit: 0, windowMs: 1000, burst: q.capacity };
  return { limit: q.capacity, windowMs: (q.capacity * 1000) / q.refillPerSec, burst: q.capacity };
}

/** The native LedgerHandle behind a Ledger, for native components that share its state. */
function ledgerHandle(ledger) {
  if (!(ledger instanceof Ledger)) throw argError(TypeError, `expected a Ledger, got ${typeName(ledger)}`);
  return ledger[LEDGER_HANDLE].native;
}

module.exports = { Ledger, LEDGER_RESULT: RESULT, LEDGER_HANDLE, ledgerHandle, ledgerConfig, bucketWords, normalizeLedgerOptions: normalize };

'use strict';
// Cluster mode's options (docs/cluster.md#options): `cluster({ redis | postgres, ... })`, of which
// the lease driver's (lib/quota/driver.js) are spread from LEASE_DRIVER, and a cluster-wide limit's
// (QUOTA_LIMIT, lib/quota/engine.js). The lease engine's numbers default to its native defaults and
// have its ranges, which it checks itself (src/core/quota/config.rs); `limit`, `windowMs` and `burst`
// are the one vocabulary of a limit (lib/schema/limit.js).
const native = require('../native');
const { schema } = require('./index');
const { MAX_COUNT, MAX_WINDOW_MS } = require('./limit');

const { defaults: QUOTA_DEFAULTS } = native.quotaConstants();
const MINUTE_MS = 60_000;
const U32_MAX = 2 ** 32 - 1;
/** The engine's longest duration (a year); tokens stay exact as JS numbers. */
const MAX_MS = 365 * 86_400_000;
const MAX_TOKENS = Number.MAX_SAFE_INTEGER;

/** The lease driver's options: its bounded waits and its batching. */
const LEASE_DRIVER_ENTRIES = [
  { name: 'storeTimeoutMs', type: 'number', default: 100, min: 1, max: MINUTE_MS, doc: 'the longest a spend waits for its lease request, from when it went out' },
  { name: 'storeDownMs', type: 'number', default: 1000, min: 1, max: 10 * MINUTE_MS, docDefault: '`1000`, at least `storeTimeoutMs`', accepted: '≥ `storeTimeoutMs`', doc: 'how long a request may go unanswered before the store is taken for down' },
  { name: 'pollIntervalMs', type: 'number', default: 20, min: 1, max: MINUTE_MS, doc: 'the background tick (renewals, returns, expiry)' },
  { name: 'batchSize', type: 'integer', default: 256, min: 1, max: 100_000, doc: 'lease requests per pipeline' },
  { name: 'holder', type: 'string', docDefault: '16 random hex digits', accepted: '1–64 characters of `A-Z a-z 0-9 _ . : -`', doc: "this process's name in the store (holder counts, returns)" },
];
const LEASE_DRIVER = schema(LEASE_DRIVER_ENTRIES);

const CLUSTER = schema([
  { name: 'redis', type: 'any', docDefault: '`redis` or `postgres`', accepted: 'an ioredis `Redis` or `Cluster` client (yours to close), or a `redis://` URL' },
  { name: 'postgres', type: 'any', docDefault: '`redis` or `postgres`', accepted: 'a `postgres://` URL, your `pg.Pool` (yours to end), or `{ connectionString \\| pool, schema = \'public\', poolSize = 4 }`: [On PostgreSQL](#on-postgresql-without-redis)' },
  { name: 'prefix', type: 'string', default: 'tiergate', accepted: '1–64 characters of `A-Z a-z 0-9 _ . : -` (PostgreSQL: 1–40 of `a-z 0-9 _`, not starting with a digit)', doc: 'key and channel prefix (PostgreSQL: of the tables and functions)' },
  { name: 'tiers', type: 'object', accepted: '`{ [tier]: { perKey?, budget?, fallback? } }`: limits of a gatekeeper tier' },
  { name: 'limits', type: 'object', accepted: 'named limits for your own use: `shared.spend(name, key)` / `shared.check(name, key)`' },
  { name: 'fallback', type: 'string', default: 'open', values: ['open', 'closed'], doc: 'every limit\'s fallback unless its tier or itself says otherwise' },
  { name: 'minHolders', type: 'integer', default: QUOTA_DEFAULTS.minHolders, min: 1, max: U32_MAX, doc: 'the fewest processes the safe share assumes; set it to your process count' },
  { name: 'bans', type: 'boolean', default: true, accepted: 'boolean', doc: 'shared bans over pub/sub' },
  { name: 'banKey', type: 'any', docDefault: 'none', accepted: 'a string or Buffer of at least 16 bytes (32 random bytes recommended), or an array of them (the first signs, every one verifies)', doc: 'signs every shared ban change; give every process the same. See [Signed ban changes](#signed-ban-changes-bankey)' },
  ...LEASE_DRIVER_ENTRIES,
  { name: 'maxKeys', type: 'integer', default: QUOTA_DEFAULTS.maxKeys, min: 1, max: U32_MAX - 1, doc: 'keys tracked per process over all limits (idle keys are evicted, their leases returned)' },
]);

/** A lease option of a limit: the engine's default, its range. */
const lease = (name, type, more) => ({ name, type, default: QUOTA_DEFAULTS[name], ...(type === 'integer' ? { min: 1, max: MAX_TOKENS } : { exclusiveMin: true, max: MAX_MS }), ...more });

const QUOTA_LIMIT = schema([
  { name: 'name', type: 'string', docDefault: 'required in `limits`; a tier names its own', accepted: 'non-empty, unique: the store\'s keys are made from it' },
  { name: 'algorithm', type: 'string', default: 'fixed-window', values: Object.freeze(['token-bucket', 'fixed-window', 'sliding-window']), docDefault: "`'fixed-window'` for `limits` (as the gatekeeper's named limits); `'token-bucket'` for a tier's `perKey` and `budget` (as the local tier buckets)" },
  { name: 'limit', type: 'integer', min: 1, max: MAX_COUNT, docDefault: 'required', accepted: '(a token bucket also 0 with a `burst`: a fixed allowance, never refilled)', doc: "units per `windowMs`: a window's admissions, a token bucket's refill" },
  { name: 'windowMs', type: 'number', exclusiveMin: true, max: MAX_WINDOW_MS, docDefault: 'required', doc: 'ms' },
  { name: 'burst', type: 'integer', min: 1, max: MAX_COUNT, docDefault: '`limit`', doc: 'token bucket only: tokens when full' },
  { name: 'fallback', type: 'string', default: 'open', values: ['open', 'closed'], docDefault: "the tier's, else `options.fallback`", doc: 'while the store does not answer' },
  { name: 'unfunded', type: 'string', default: 'wait', values: ['wait', 'provisional'], doc: 'what a key without lease does: wait one bounded round trip (exact), or admit `provisional` tokens on credit' },
  { name: 'provisional', type: 'integer', default: 1, min: 1, max: MAX_TOKENS, accepted: "only with `unfunded: 'provisional'`", doc: 'the provisional allowance per key' },
  lease('renewalPeriodMs', 'number', { doc: "a lease lasts about this long at the key's rate" }),
  lease('leadTimeMs', 'number', { accepted: '≤ `renewalPeriodMs`', doc: 'renew when the lease would run out within this' }),
  lease('leaseTtlMs', 'number', { accepted: '≥ `renewalPeriodMs`', doc: "a lease's life" }),
  lease('maxLease', 'integer', { doc: 'the largest lease, tokens' }),
  lease('initialLease', 'integer', { accepted: '≤ `maxLease`', doc: "a key's first lease, tokens" }),
  lease('retryMs', 'number', { doc: 'while the store is down, each key probes it this often' }),
  lease('minHolders', 'integer', { max: U32_MAX, docDefault: '`options.minHolders`', doc: 'the fewest processes the safe share assumes' }),
]);

module.exports = { CLUSTER, LEASE_DRIVER, QUOTA_LIMIT };

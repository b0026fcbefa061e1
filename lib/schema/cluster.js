'use strict';
// Cluster mode's options (docs/cluster.md#options): `cluster({ redis | postgres, ... })`, of which
// the lease driver's (lib/quota/driver.js) are spread from LEASE_DRIVER. `minHolders` and `maxKeys`
// default to the lease engine's native defaults and have its ranges (src/core/quota/config.rs).
const native = require('../native');
const { schema } = require('./index');

const { defaults: QUOTA_DEFAULTS } = native.quotaConstants();
const MINUTE_MS = 60_000;
const U32_MAX = 2 ** 32 - 1;

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

module.exports = { CLUSTER, LEASE_DRIVER };

'use strict';
// The Ledger's options (docs/ledger.md#options): the tiers, each a token bucket in the one vocabulary
// of a limit (its ranges are lib/schema/limit.js's, checked there and natively alike), and per-key
// buckets.
const { schema } = require('./index');
const { MAX_COUNT, MAX_WINDOW_MS } = require('./limit');

// The bucket words a tier's budget and a per-key quota share (lib/schema/limit.js tokenBucket).
const BUCKET = [
  { name: 'limit', type: 'integer', max: MAX_COUNT, docDefault: 'required', accepted: '(`0`: a fixed allowance of `burst`, never refilled)', doc: 'tokens regained per `windowMs` at scale 1' },
  { name: 'windowMs', type: 'number', exclusiveMin: true, max: MAX_WINDOW_MS, docDefault: 'required', accepted: 'at least 1e-6; `limit` / `windowMs` at most 10¹⁵ tokens per second', doc: 'the window `limit` refills over' },
  { name: 'burst', type: 'integer', min: 1, max: MAX_COUNT, docDefault: '`limit` (required with `limit: 0`)', doc: 'tokens the bucket holds when full' },
  { name: 'algorithm', type: 'string', default: 'token-bucket', values: ['token-bucket'], doc: 'the only algorithm a ledger bucket has' },
];

const LEDGER = schema([
  { name: 'tiers', type: 'object', docDefault: 'required, at least one', accepted: 'tiers, highest priority first; the index is the tier id' },
  { name: 'perKey', type: 'object', docDefault: 'none', accepted: 'per-key buckets for every tier that does not set its own: a bucket in the words of a tier\'s (`limit`, `windowMs`, `burst`, `algorithm`), plus `maxKeys` and `idleTtlMs`' },
]);

const LEDGER_TIER = schema([
  { name: 'name', type: 'string', docDefault: 'required', accepted: 'non-empty, unique string' },
  ...BUCKET,
  { name: 'protected', type: 'boolean', default: false, accepted: 'boolean', doc: 'the tier the gatekeeper never scales down (the ledger itself treats it like any other)' },
  { name: 'perKey', type: 'object', docDefault: '`options.perKey`', accepted: 'per-key buckets for this tier; `null` opts out of `options.perKey`' },
]);

const LEDGER_PER_KEY = schema([
  ...BUCKET,
  { name: 'maxKeys', type: 'integer', default: 100_000, min: 1, max: MAX_COUNT, doc: 'most keys kept per tier' },
  { name: 'idleTtlMs', type: 'number', default: 60_000, min: 0, exclusiveMin: true, doc: 'a bucket untouched this long may be forgotten' },
]);

module.exports = { LEDGER, LEDGER_TIER, LEDGER_PER_KEY };

'use strict';
// The concurrency gate's options (docs/concurrency-gate.md#options), a tier's own, the adaptive
// limit's (`limit`, with maxConcurrent: 'auto') and CoDel's (`codel`).
const { schema } = require('./index');
const { DEFAULT_TIER_HEADER } = require('../gatekeeper/tier-header');

const CONCURRENCY_GATE = schema([
  { name: 'maxConcurrent', type: 'integer', min: 1, docDefault: 'required', accepted: "or `'auto'`" },
  { name: 'limit', type: 'object', docDefault: 'below', accepted: "adaptive settings, only with `'auto'`" },
  { name: 'maxQueue', type: 'integer', default: 100, doc: 'waiting requests across tiers; `0` = no queue' },
  { name: 'queueTimeoutMs', type: 'number', default: 10_000, exclusiveMin: true, doc: 'per tier: `tiers[i].queueTimeoutMs`' },
  { name: 'timeoutStatus', type: 'integer', default: 408, min: 400, max: 599, doc: 'any but `408` adds `Retry-After`' },
  { name: 'retryAfter', type: 'object', docDefault: '`{ minSec: 1, maxSec: 3 }`', accepted: 'whole seconds 0..86400, `maxSec` ≥ `minSec`' },
  { name: 'tiers', type: 'object', docDefault: 'critical (protected), standard, background', accepted: 'non-empty array of names or `{ name, protected?, maxQueue?, queueTimeoutMs? }`; gatekeeper tier fields accepted and ignored' },
  { name: 'defaultTier', type: 'string', docDefault: 'the lowest tier', accepted: "one of the tier names, exactly as written (`'STANDARD'` for `standard` throws `ERR_TIERGATE_INVALID_OPTION`)" },
  { name: 'tierHeader', type: 'string', default: DEFAULT_TIER_HEADER, orFalse: true, accepted: 'a header name, or `false`' },
  { name: 'trustTierHeader', type: 'boolean', default: false, accepted: 'boolean' },
  { name: 'tierSecret', type: 'any', accepted: "a secret (string or Buffer, ≥ 16 bytes) or an array of them: signed tier tokens in the header, as the gatekeeper's" },
  { name: 'classify', type: 'function', accepted: '`(req) => tierName \\| undefined`' },
  { name: 'routes', type: 'object', accepted: "the gatekeeper's route rules" },
  { name: 'displace', type: 'boolean', default: true, accepted: 'boolean' },
  { name: 'codel', type: 'any', default: false, accepted: '`true`, `false` or `{ targetMs, intervalMs }` ([below](#codel-options))' },
  { name: 'lifo', type: 'boolean', default: false, accepted: 'boolean' },
  { name: 'onReject', type: 'function', accepted: "`({ reason, status, tier }, req) => void`: info first, as every tiergate hook; `reason` `'queue-full'`, `'displaced'`, `'timeout'`, `'codel'` or `'closing'`" },
]);

/** A tier's own settings (`tiers[i]`); the others default to the gate's. */
const QUEUE_TIER = schema([
  { name: 'name', type: 'string', docDefault: 'required', accepted: 'a tier name' },
  { name: 'protected', type: 'boolean', default: false, accepted: 'boolean' },
  { name: 'maxQueue', type: 'integer', docDefault: "the gate's `maxQueue`" },
  { name: 'queueTimeoutMs', type: 'number', exclusiveMin: true, docDefault: "the gate's `queueTimeoutMs`" },
]);

/** A gatekeeper tier's fields, accepted (and ignored) in `tiers[i]` so one tiers array can configure both guards. */
const QUEUE_TIER_FOREIGN = Object.freeze(['algorithm', 'limit', 'windowMs', 'burst', 'perKey']);

const ADAPTIVE_LIMIT = schema([
  { name: 'min', type: 'integer', default: 1, min: 1, max: 1_000_000, doc: 'the lowest limit' },
  { name: 'max', type: 'integer', default: 1000, min: 1, max: 1_000_000, accepted: '≥ `min`', doc: 'the highest limit' },
  { name: 'initial', type: 'integer', docDefault: '`min(max, max(min, 10))`', min: 1, max: 1_000_000, accepted: '`min`..`max`', doc: 'the limit before anything is learnt' },
]);

const CODEL = schema([
  { name: 'targetMs', type: 'number', default: 5, exclusiveMin: true, doc: 'the wait unprotected tiers get while the queue is standing' },
  { name: 'intervalMs', type: 'number', default: 100, exclusiveMin: true, doc: 'how long the queue stays non-empty to count as standing' },
]);

module.exports = { CONCURRENCY_GATE, QUEUE_TIER, QUEUE_TIER_FOREIGN, ADAPTIVE_LIMIT, CODEL };

'use strict';
// The gatekeeper's options (docs/gatekeeper.md#options), its `shed` group and its `concurrency`
// group. The shed defaults are the native controller's (src/node/gate.rs), read from it, not repeated.
const native = require('../native');
const { schema } = require('./index');
const { LAG_MONITOR: LAG, MAX_TICKS_PER_WINDOW } = require('./lag');
const { DEFAULT_TIER_HEADER } = require('../gatekeeper/tier-header');
const { MODES: RATE_LIMIT_HEADER_MODES } = require('../http/rate-limit-headers');

const { shedDefaults: SHED_DEFAULTS, lagSignals: LAG_SIGNALS } = native.gateConstants();

const GATEKEEPER = schema([
  { name: 'tiers', type: 'object', docDefault: 'critical (protected), standard, background; `{ limit: 1e9, windowMs: 1000 }` each', accepted: 'non-empty array of `{ name, limit, windowMs, burst?, protected?, perKey? }` ([ledger.md](ledger.md#options)), highest first, at most 254' },
  { name: 'ledger', type: 'object', accepted: 'an existing `Ledger` (e.g. `Ledger.shared(...)`) instead of `tiers`/`perKey` (not with them)' },
  { name: 'perKey', type: 'object', accepted: '`{ limit, windowMs, burst?, maxKeys?, idleTtlMs? }` for every tier that does not set its own' },
  { name: 'routes', type: 'object', accepted: 'array of `{ method?, path, tier }`' },
  { name: 'classify', type: 'function', accepted: '`(req) => tierName \\| undefined`, or a promise of it ([async](#async-classify-and-key))' },
  { name: 'defaultTier', type: 'string', docDefault: '`standard` with the default tiers (health probes `critical`), else the lowest tier', accepted: 'a tier name' },
  { name: 'tierHeader', type: 'string', default: DEFAULT_TIER_HEADER, orFalse: true, accepted: 'a header name, or `false` (no tier header)' },
  { name: 'trustTierHeader', type: 'boolean', default: false, accepted: 'boolean' },
  { name: 'tierSecret', type: 'any', accepted: 'a string, `Buffer` or `Uint8Array` of ≥ 16 bytes, or a non-empty array of them (the first mints, all verify)' },
  { name: 'key', type: 'any', default: 'ip', accepted: "`'ip'`, `{ header: name }` or a function (it may return a promise: [async](#async-classify-and-key))" },
  { name: 'trustProxy', type: 'any', docDefault: '`false`', accepted: '`false`, `true` (left-most `X-Forwarded-For` entry) or trusted hop count 0..32' },
  { name: 'ipv4Prefix', type: 'integer', default: 32, max: 32, doc: 'the bits of an IPv4 address that key a client' },
  { name: 'ipv6Prefix', type: 'integer', default: 56, max: 128, doc: 'the bits of an IPv6 address that key a client' },
  { name: 'cost', type: 'number', default: 1, doc: 'tokens per request, at most every tier\'s `burst` and `perKey.burst`' },
  { name: 'shed', type: 'object', docDefault: 'below', orFalse: true, accepted: 'an object ([below](#shed-options)), or `false`' },
  { name: 'rateLimitHeaders', type: 'string', default: 'draft', values: [...RATE_LIMIT_HEADER_MODES, false], doc: 'per-key quotas and named limits alike ([headers.md](headers.md))' },
  { name: 'rateLimitHeadersOnSuccess', type: 'boolean', default: false, accepted: 'boolean: also on admitted responses that have a per-key quota' },
  { name: 'retryAfter', type: 'object', docDefault: '`{ minSec: 1, maxSec: 3 }`', accepted: 'whole seconds 0..86400, `maxSec` ≥ `minSec` (omitted `maxSec`: the larger of `minSec` and 3)' },
  { name: 'respond', type: 'function', accepted: '`(info, req, rejection) => { status, headers?, body? } \\| undefined` ([headers.md](headers.md#replacing-a-rejection))' },
  { name: 'onDecision', type: 'function', accepted: '`(info, req) => void` ([stats.md](stats.md#hooks)): every decision someone observes' },
  { name: 'onShed', type: 'function', accepted: '`(info, req) => void` ([stats.md](stats.md#hooks)): overload sheds' },
  { name: 'onReject', type: 'function', accepted: '`(info, req) => void` ([stats.md](stats.md#hooks)): quota refusals' },
  { name: 'cluster', type: 'object', accepted: '`tiergate.cluster({ redis, tiers })`: bans, per-key limits and tier budgets shared across processes, asked after the local decision admits ([cluster.md](cluster.md))' },
  { name: 'concurrency', type: 'object', docDefault: 'on', orFalse: true, accepted: 'an object ([the learned concurrency limit](#the-learned-concurrency-limit)), or `false`' },
  { name: 'shedStatus', type: 'integer', default: 503, values: [503, 429], doc: 'the status of a shed and of a full tier' },
  { name: 'shadow', type: 'object', default: false, orFalse: true, accepted: '`false`, `true` or `{ enforcePercent }` ([shadow mode](#shadow-mode))', doc: 'overload decisions made, counted and reported, not enforced' },
]);

const MINUTE_MS = 60_000;
/** A sampler duration of the shed group: the LagMonitor's range, the shed controller's default. */
const sampler = (name, more) => ({ name, type: 'integer', min: LAG[name].min, max: LAG[name].max, default: SHED_DEFAULTS[name], ...more });

const SHED = schema([
  { name: 'targetLagMs', type: 'number', default: SHED_DEFAULTS.targetLagMs },
  { name: 'criticalLagMs', type: 'number', default: SHED_DEFAULTS.criticalLagMs, accepted: '> `targetLagMs`' },
  { name: 'relative', type: 'boolean', default: SHED_DEFAULTS.relative, accepted: 'boolean' },
  { name: 'hysteresisMs', type: 'number', default: SHED_DEFAULTS.hysteresisMs },
  { name: 'holdMs', type: 'number', default: SHED_DEFAULTS.holdMs },
  { name: 'recoveryMs', type: 'number', default: SHED_DEFAULTS.recoveryMs },
  { name: 'integralMs', type: 'number', default: SHED_DEFAULTS.integralMs, doc: '`0` turns the integral part off' },
  { name: 'confirmMs', type: 'number', default: SHED_DEFAULTS.confirmMs, doc: '`0` turns the spike filter off' },
  { name: 'heapRatio', type: 'number', default: SHED_DEFAULTS.heapRatio, min: 0, exclusiveMin: true, max: 0.999999, orFalse: true, falseMeans: 'ignore the heap' },
  sampler('stallMs', { orFalse: true, falseMeans: 'no watchdog' }),
  { name: 'lagSignal', type: 'string', default: SHED_DEFAULTS.lagSignal, values: LAG_SIGNALS },
  sampler('resolutionMs', { doc: 'the sampler\'s tick' }),
  sampler('windowMs', { accepted: `≥ \`resolutionMs\`, at most ${MAX_TICKS_PER_WINDOW} ticks`, doc: 'the sampler\'s window (p99)' }),
  sampler('ewmaMs', { doc: 'the sampler\'s EWMA time constant' }),
  { name: 'updateIntervalMs', type: 'number', default: SHED_DEFAULTS.updateIntervalMs, max: MINUTE_MS },
  { name: 'baselineTauMs', type: 'number', default: SHED_DEFAULTS.baselineTauMs, doc: 'relative mode' },
  { name: 'maxBaselineMs', type: 'number', docDefault: '`targetLagMs`', doc: 'relative mode' },
  { name: 'idleElu', type: 'number', default: SHED_DEFAULTS.idleElu, max: 1, doc: 'relative mode' },
  { name: 'turnBudgetMs', type: 'number', default: SHED_DEFAULTS.turnBudgetMs, max: MINUTE_MS, doc: 'synchronous time per loop turn for queued unprotected requests during an episode; `0` turns the budget and the turn queue off' },
  { name: 'queueMaxWaitMs', type: 'number', default: SHED_DEFAULTS.queueMaxWaitMs, min: 1, max: MINUTE_MS, doc: 'a waiter of the turn queue older than this is shed (503) instead of run' },
  { name: 'queueMaxLength', type: 'integer', default: SHED_DEFAULTS.queueMaxLength, min: 1, max: 1_000_000, doc: 'waiters of the turn queue across tiers; beyond it a newcomer takes the place of the newest waiter of a lower tier, or is shed' },
]);

const CONCURRENCY = schema([
  { name: 'signals', type: 'function', docDefault: 'none', accepted: 'a function, or an array of them', doc: 'each returns requests waiting downstream over the downstream\'s size (0: none wait); read every 100 ms, the largest counts: above 0, the limit is at most the requests in flight ÷ (1 + signal), plus one' },
  { name: 'maxWaitMs', type: 'number', default: 500, min: 1, max: MINUTE_MS, doc: 'the longest a request waits for a slot' },
  { name: 'maxQueue', type: 'integer', default: 1000, max: 1_000_000, doc: 'requests waiting for a slot at most' },
  { name: 'minLimit', type: 'integer', default: 1, min: 1, max: 1_000_000, doc: 'the lowest the learned limit goes' },
  { name: 'maxLimit', type: 'integer', default: 10_000, min: 1, max: 1_000_000, accepted: '≥ `minLimit`', doc: 'the highest the learned limit goes' },
  { name: 'initialLimit', type: 'integer', default: 1000, docDefault: '`1000` (≤ `maxLimit`)', min: 1, max: 1_000_000, accepted: '`minLimit`..`maxLimit`', doc: 'the limit before anything is learnt' },
]);

const SHADOW = schema([
  { name: 'enforcePercent', type: 'number', default: 0, max: 100, doc: 'the share of overload decisions enforced, spread evenly (the rest only counted)' },
]);

module.exports = { GATEKEEPER, SHED, CONCURRENCY, SHADOW, SHED_DEFAULTS, LAG_SIGNALS };

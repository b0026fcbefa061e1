'use strict';
// A named limit's options (`limits[i]`, docs/defense.md#named-limits). The numbers of `limit`,
// `windowMs` and `burst` are the one vocabulary of a limit (lib/schema/limit.js, checked there);
// `maxDelayMs` and `maxKeys` are checked natively (src/core/limit/spec.rs) with these same ranges.
const native = require('../native');
const { schema } = require('./index');
const { MAX_COUNT, MAX_WINDOW_MS } = require('./limit');

const { algorithms: ALGORITHMS } = native.defenseConstants();

const NAMED_LIMIT = schema([
  { name: 'name', type: 'string', docDefault: 'required', accepted: '1–64 printable ASCII, no `"` or `\\`', doc: 'appears in the `RateLimit` fields and problem bodies' },
  { name: 'algorithm', type: 'string', default: 'fixed-window', values: ALGORITHMS },
  { name: 'limit', type: 'integer', min: 1, max: MAX_COUNT, docDefault: 'required', accepted: 'or `(req) => number` ([live limits](#live-limits-per-request-and-per-key))', doc: 'units per `windowMs`' },
  { name: 'windowMs', type: 'number', exclusiveMin: true, max: MAX_WINDOW_MS, docDefault: 'required', accepted: 'at least 1e-6' },
  { name: 'burst', type: 'integer', min: 1, max: MAX_COUNT, docDefault: '`limit`', doc: 'token bucket and GCRA: units admissible at once' },
  { name: 'maxDelayMs', type: 'number', default: 0, max: MAX_WINDOW_MS, doc: 'GCRA only: 0 meters; more makes it a shaper that delays up to this long' },
  { name: 'maxKeys', type: 'integer', default: 100_000, min: 1, max: MAX_COUNT, doc: 'keys tracked at most; idle keys are evicted first, then the least recently seen' },
  { name: 'by', type: 'any', default: 'ip', accepted: "`'ip'` (the gatekeeper's `ipv4Prefix`/`ipv6Prefix`), `{ prefix: { v4, v6 } }` (a subnet: a crawler spread over one /24), `{ header: 'x-api-key' }`, or `(req) => string \\| number \\| undefined` (or a promise of it: the limit decides when it settles, [gatekeeper.md](gatekeeper.md#async-classify-and-key))", doc: 'what it counts by; a header or function that gives nothing usable counts the request by its address' },
  { name: 'routes', type: 'object', docDefault: 'every route', accepted: "paths as the gatekeeper's route rules match them (a string prefix on whole segments, a RegExp, or `{ method?, path }`), in the framework's routing dialect" },
  { name: 'methods', type: 'any', docDefault: 'every method', accepted: "`'POST'` or `['POST', 'PUT']`" },
  { name: 'tiers', type: 'any', docDefault: 'every tier', accepted: "tier names: the limit applies to requests of these tiers only. A client's limit spans tiers unless scoped" },
  { name: 'cost', type: 'integer', default: 1, max: 0xffffffff, accepted: 'or `(req) => number`', doc: 'units a request takes' },
  { name: 'maxQueued', type: 'integer', default: 1000, min: 1, max: 1e7, doc: "a shaper's waiting requests at most; past it, 503 `shaper-full`" },
  { name: 'cluster', type: 'boolean', default: false, accepted: 'boolean', doc: "funded from cluster mode's leases when `true` ([cluster.md](cluster.md))" },
  { name: 'skipSuccessfulRequests', type: 'boolean', default: false, accepted: 'boolean', doc: "give a successful request's units back when its response closes. See [Counting by outcome](#counting-by-outcome)" },
  { name: 'skipFailedRequests', type: 'boolean', default: false, accepted: 'boolean', doc: "give a failed request's units back (a response closed before it finished is a failure)" },
  { name: 'requestWasSuccessful', type: 'function', docDefault: '`res.statusCode < 400`', accepted: '`(req, res) => boolean`', doc: 'what a success is; read only with one of the two above' },
]);

module.exports = { NAMED_LIMIT };

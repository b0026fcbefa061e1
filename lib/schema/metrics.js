'use strict';
// The options of metrics(), otel() and statusRoute() (docs/metrics.md), and the components they
// observe, which dashboard() (./dashboard.js) observes too.
const { schema } = require('./index');

/** What statusRoute() and dashboard() observe (lib/metrics/components.js reads them). */
const OBSERVED = [
  { name: 'gatekeeper', type: 'object', accepted: "`gatekeeper()`'s middleware, `gatekeeper.http`'s handler, or `fastify.tiergate` (with its abuse defense and cluster mode, when it has them)" },
  { name: 'queue', type: 'object', accepted: "`concurrencyGate()`'s middleware, its `.http` handler, or `fastify.concurrencyGate`" },
  { name: 'lag', type: 'object', docDefault: "the gatekeeper's own sampler", accepted: 'a `LagMonitor`' },
  { name: 'ledger', type: 'object', docDefault: "the gatekeeper's", accepted: 'a `Ledger`' },
];

/** metrics() and otel() also observe cluster mode. */
const OBSERVED_LEASES = [
  ...OBSERVED,
  { name: 'leases', type: 'object', docDefault: "the cluster's", accepted: "a `LeaseDriver` (cluster mode's engine, lib/quota)" },
  { name: 'cluster', type: 'object', docDefault: "the gatekeeper's", accepted: 'a `cluster()` (its ban channel and lease driver)' },
];

const WAIT_BUCKETS_ENTRY = { name: 'waitBuckets', type: 'object', docDefault: '0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30', accepted: 'seconds, finite, > 0, ascending', doc: 'the bounds of `tiergate_queue_wait_seconds`' };

const METRICS = schema([
  ...OBSERVED_LEASES,
  { name: 'registry', type: 'object', docDefault: "prom-client's default registry", accepted: 'a prom-client `Registry`' },
  WAIT_BUCKETS_ENTRY,
]);

const OTEL = schema([
  ...OBSERVED_LEASES,
  { name: 'meter', type: 'object', docDefault: "the global MeterProvider's meter `tiergate`", accepted: 'an OpenTelemetry `Meter`' },
  { name: 'spans', type: 'boolean', docDefault: '`true` when a gatekeeper is given', accepted: 'boolean', doc: 'a span event per refused request (below)' },
  { ...WAIT_BUCKETS_ENTRY, docDefault: 'as `metrics()`', doc: "the wait histogram's bounds (`advice.explicitBucketBoundaries`)" },
]);

const STATUS_ROUTE = schema([
  ...OBSERVED,
  { name: 'path', type: 'string', default: '/status', accepted: 'a path of `A-Z a-z 0-9 . _ ~ / -`, no trailing slash', doc: 'the health route; `<path>/stats` the stats' },
  { name: 'recentMs', type: 'number', default: 10_000, max: 3_600_000, doc: 'unavailable this long after a protected tier lost a request to overload' },
  { name: 'maxLagMs', type: 'number', exclusiveMin: true, docDefault: 'none', doc: 'unavailable while the lag is above it' },
  { name: 'stats', type: 'boolean', default: true, accepted: 'boolean', doc: 'serve `<path>/stats`' },
]);

module.exports = { OBSERVED, METRICS, OTEL, STATUS_ROUTE };

'use strict';
// The same families as metrics() (./index.js), through OpenTelemetry's API (@opentelemetry/api, an
// optional peer dependency like prom-client): each counter and gauge family becomes an observable
// instrument of the same name, read from the components' stats() when the application's
// MetricReader collects. Nothing runs per request for them.
//
// Two things cannot be read back from stats():
// - the queue's wait histogram (OpenTelemetry has no observable histogram): recorded per admitted
//   request through the concurrency gate's observeWaits();
// - spans: each gatekeeper refusal (from the 'tiergate:decision' channel, published synchronously
//   inside the request's admit, so in its context) adds an event to the span active then.
// Attributes are the families' own labels (tier, verdict, cause, reason, a limit's configured
// name): bounded sets, never a key, an address or anything else per client.
const diagnostics = require('node:diagnostics_channel');
const { version } = require('../../package.json');
const { requireOptional } = require('../optional');
const { buildingOptions } = require('../errors');
const { onlyKnown, typeName, isObject, schemaOption } = require('../options');
const { OTEL } = require('../schema/metrics');
const { optionNames } = require('../schema');
const { components, METRICS_FIELDS } = require('./components');
const { familiesOf, waitBuckets } = require('./index');
const { WAIT_FAMILY } = require('./queue');
const { DECISION_CHANNEL } = require('../gatekeeper');

const OPTIONS = optionNames(OTEL);
const FEATURE = 'otel()';
/** The span event of a refused request; its attributes are REFUSAL_ATTRIBUTES of the decision. */
const REFUSED_EVENT = 'tiergate.refused';
const REFUSAL_ATTRIBUTES = Object.freeze([['tiergate.tier', 'tier'], ['tiergate.outcome', 'verdict'], ['tiergate.cause', 'cause']]);

function meterOption(m) {
  if (m === undefined) return requireOptional('@opentelemetry/api', FEATURE).metrics.getMeter('tiergate', version);
  for (const fn of ['createObservableCounter', 'createObservableGauge', 'createHistogram', 'addBatchObservableCallback', 'removeBatchObservableCallback']) {
    if (!isObject(m) || typeof m[fn] !== 'function') throw new TypeError(`otel: options.meter must be an OpenTelemetry Meter, got ${typeName(m)}`);
  }
  return m;
}

// One channel subscription for the process, however many otel() bindings want spans: the channel
// carries every gatekeeper's decisions, and a refusal gets one event.
let spanUsers = 0;
let traceApi = null;
function onDecision(info) {
  if (info.verdict === 'admit') return;
  const span = traceApi.getActiveSpan();
  if (span === undefined || !span.isRecording()) return;
  const attributes = {};
  for (const [name, field] of REFUSAL_ATTRIBUTES) if (typeof info[field] === 'string') attributes[name] = info[field];
  span.setAttributes(attributes);
  span.addEvent(REFUSED_EVENT, attributes);
}

function subscribeSpans() {
  if (spanUsers++ === 0) {
    traceApi = requireOptional('@opentelemetry/api', FEATURE).trace;
    diagnostics.subscribe(DECISION_CHANNEL, onDecision);
  }
  let done = false;
  return () => {
    if (done) return;
    done = true;
    if (--spanUsers === 0) diagnostics.unsubscribe(DECISION_CHANNEL, onDecision);
  };
}

/**
 * `otel({ gatekeeper?, queue?, lag?, ledger?, leases?, cluster?, meter?, spans?, waitBuckets? })`:
 * metrics()'s families as OpenTelemetry instruments on `meter` (default: the global MeterProvider's
 * meter 'tiergate'), and with `spans` (default true when a gatekeeper is given) an event per refused
 * request on the active span. Returns `{ meter, names, unregister() }`.
 */
function otel(options) {
  const { c, o, meter, spans } = buildingOptions(() => {
    if (isObject(options)) onlyKnown(options, OPTIONS, 'otel: options');
    const comps = components(options, 'otel: options', METRICS_FIELDS);
    const s = options.spans === undefined ? comps.gatekeeper !== undefined : schemaOption(OTEL.spans, options.spans, 'otel: options.spans');
    return { c: comps, o: { waitBuckets: waitBuckets(options.waitBuckets) }, meter: meterOption(options.meter), spans: s };
  });
  const families = familiesOf(c, o);
  const observed = families.filter((f) => f.type !== 'histogram');
  const instruments = observed.map((f) => (f.type === 'counter'
    ? meter.createObservableCounter(f.name, { description: f.help })
    : meter.createObservableGauge(f.name, { description: f.help })));
  const collect = (result) => {
    for (let i = 0; i < observed.length; i++) {
      for (const row of observed[i].get().values) result.observe(instruments[i], row.value, row.labels);
    }
  };
  meter.addBatchObservableCallback(collect, instruments);
  const stops = [() => meter.removeBatchObservableCallback(collect, instruments)];
  for (const f of families.filter((x) => x.type === 'histogram')) {
    // The concurrency gate's waits, in seconds, at the same bounds; a histogram family without a
    // per-request source would be silently empty here.
    if (f.name !== WAIT_FAMILY) throw new Error(`otel: no per-request source for the histogram ${f.name}`);
    const histogram = meter.createHistogram(f.name, { description: f.help, unit: 's', advice: { explicitBucketBoundaries: [...o.waitBuckets] } });
    stops.push(c.queue.observeWaits((tier, ms) => histogram.record(ms / 1000, { tier })));
  }
  if (spans) stops.push(subscribeSpans());
  let stopped = false;
  return {
    meter,
    names: Object.freeze(families.map((f) => f.name)),
    /** Stops observing: the callbacks, the wait listener and the span events of this binding. */
    unregister() {
      if (stopped) return;
      stopped = true;
      for (const stop of stops) stop();
    },
  };
}

module.exports = { otel, REFUSED_EVENT, REFUSAL_ATTRIBUTES };

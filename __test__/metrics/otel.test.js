'use strict';
// OpenTelemetry: otel() gives metrics()'s families to an OpenTelemetry SDK (its MetricReader collects
// them after real HTTP requests, equal to stats()), the wait histogram per admitted request, and a
// span event per refused request on the span active while the gatekeeper decided.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const api = require('@opentelemetry/api');
const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics');
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const prom = require('prom-client');
const { gatekeeper, concurrencyGate, metrics, otel } = require('../..');
const { listen, close, request, serveTiers } = require('../helpers/http');
const { UNLIMITED_TIERS } = require('../helpers/tiers');

const OPTIONS = {
  tiers: [
    { name: 'critical', protected: true, limit: 1e9, windowMs: 1000 },
    { name: 'standard', limit: 1e9, windowMs: 1000 },
    { name: 'background', limit: 1e9, windowMs: 1000 },
  ],
  routes: [{ method: 'POST', path: '/checkout', tier: 'critical' }, { path: '/reports/', tier: 'background' }],
  defaultTier: 'standard',
  shed: { turnBudgetMs: 0 },
};

/** A reader the test collects from when it wants (the SDK's pull path, as a Prometheus exporter's). */
class CollectingReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** { name -> [{ attributes, value }] } of one collection. */
async function collect(reader) {
  const { resourceMetrics, errors } = await reader.collect();
  assert.deepEqual(errors, []);
  const out = new Map();
  for (const scope of resourceMetrics.scopeMetrics) for (const m of scope.metrics) out.set(m.descriptor.name, m.dataPoints.map((p) => ({ attributes: p.attributes, value: p.value })));
  return out;
}

function point(points, attributes) {
  const hit = points.find((p) => Object.keys(attributes).every((k) => p.attributes[k] === attributes[k]) && Object.keys(p.attributes).length === Object.keys(attributes).length);
  assert.ok(hit, `no point ${JSON.stringify(attributes)} in ${JSON.stringify(points.map((p) => p.attributes))}`);
  return hit.value;
}

/** gatekeeper.http in front of a concurrency gate in front of a handler; `wrap` runs around each request. */
async function startApp(t, wrap = (req, res, next) => next()) {
  const queue = concurrencyGate.http({ maxConcurrent: 4 }, (req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  const gate = gatekeeper.http(OPTIONS, queue);
  const server = http.createServer((req, res) => wrap(req, res, () => gate(req, res)));
  const port = await listen(server);
  t.after(() => close(server));
  return { gate, queue, port };
}

/** An in-memory span exporter behind the global TracerProvider, with AsyncLocalStorage contexts, for test `t`. */
function tracing(t) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.trace.setGlobalTracerProvider(provider);
  t.after(() => {
    api.trace.disable();
    api.context.disable();
  });
  return { exporter, provider, tracer: api.trace.getTracer('test') };
}

async function traffic(app) {
  const statuses = [];
  const send = async (path, method = 'GET') => statuses.push((await request(app.port, { method, path, headers: method === 'POST' ? { 'content-length': '0' } : {} })).status);
  for (let i = 0; i < 3; i++) await send('/hello');
  await send('/reports/1');
  app.gate.injectHealth({ stalled: true });
  for (let i = 0; i < 2; i++) await send('/hello');
  await send('/reports/2');
  await send('/checkout', 'POST');
  app.gate.useLiveHealth();
  return statuses;
}

test('a MetricReader collects the decision counters and the wait histogram after real requests, equal to stats()', async (t) => {
  const reader = new CollectingReader();
  api.metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  const app = await startApp(t);
  const binding = otel({ gatekeeper: app.gate, queue: app.queue }); // the global MeterProvider's meter
  t.after(() => binding.unregister());
  assert.deepEqual(await traffic(app), [200, 200, 200, 200, 503, 503, 503, 200]);

  const got = await collect(reader);
  const stats = app.gate.stats();
  const decisions = got.get('tiergate_decisions_total');
  for (const [tier, s] of Object.entries(stats.tiers)) {
    for (const [verdict, field] of [['admit', 'admitted'], ['shed', 'shed'], ['tier-full', 'tierFull'], ['rate-limited', 'rateLimited']]) {
      assert.equal(point(decisions, { tier, verdict }), s[field], `${tier} ${verdict}`);
    }
  }
  assert.deepEqual([stats.tiers.standard.shed, stats.tiers.background.shed, stats.tiers.critical.admitted], [2, 1, 1]);
  // The wait histogram: one sample per admitted request, per tier, at metrics()'s bounds.
  const waits = got.get('tiergate_queue_wait_seconds');
  const q = app.queue.stats();
  for (const [tier, s] of Object.entries(q.tiers)) {
    if (s.admitted === 0) continue;
    const h = point(waits, { tier });
    assert.equal(h.count, s.admitted, `${tier} waits`);
    assert.deepEqual(h.buckets.boundaries, [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
  }
  assert.equal(point(got.get('tiergate_queue_dispatched_total'), { tier: 'standard' }), q.tiers.standard.admitted);
  // Every attribute is one of the families' bounded labels: nothing per client.
  for (const [, points] of got) for (const p of points) for (const k of Object.keys(p.attributes)) assert.ok(['tier', 'verdict', 'reason', 'cause', 'limit'].includes(k), `attribute ${k}`);
  // The same names as the Prometheus families, declared once.
  const registry = new prom.Registry();
  assert.deepEqual([...binding.names], [...metrics({ gatekeeper: app.gate, queue: app.queue, registry }).names]);

  binding.unregister();
  assert.equal((await request(app.port, { method: 'POST', path: '/checkout', headers: { 'content-length': '0' } })).status, 200);
  const after = await collect(reader);
  // The SDK keeps reporting a cumulative point it stopped hearing about; it no longer moves.
  const criticalAdmitted = point(decisions, { tier: 'critical', verdict: 'admit' });
  assert.equal(app.gate.stats().tiers.critical.admitted, criticalAdmitted + 1);
  assert.equal(point(after.get('tiergate_decisions_total'), { tier: 'critical', verdict: 'admit' }), criticalAdmitted, 'unregistered: no longer observed');
});

test('each refused request adds a tiergate.refused event (tier, outcome, cause) to the active span; admitted ones add none', async (t) => {
  const { exporter, provider, tracer } = tracing(t);
  // What an HTTP instrumentation does: the request runs inside its server span, ended with the response.
  const app = await startApp(t, (req, res, next) => tracer.startActiveSpan(`${req.method} ${req.url}`, (span) => {
    res.on('finish', () => span.end());
    next();
  }));
  const binding = otel({ gatekeeper: app.gate, meter: new MeterProvider().getMeter('unused') });
  t.after(() => binding.unregister());
  const statuses = await traffic(app);
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  assert.equal(spans.length, statuses.length);
  const refused = spans.filter((s) => s.events.some((e) => e.name === 'tiergate.refused'));
  assert.deepEqual(refused.map((s) => s.name).sort(), ['GET /hello', 'GET /hello', 'GET /reports/2']);
  for (const s of refused) {
    const event = s.events.find((e) => e.name === 'tiergate.refused');
    const tier = s.name === 'GET /hello' ? 'standard' : 'background';
    assert.deepEqual(event.attributes, { 'tiergate.tier': tier, 'tiergate.outcome': 'shed', 'tiergate.cause': 'stall' });
    assert.equal(s.attributes['tiergate.outcome'], 'shed');
  }
  for (const s of spans) if (!refused.includes(s)) assert.equal(s.attributes['tiergate.outcome'], undefined, `${s.name} was admitted`);
  binding.unregister();
  exporter.reset();
  app.gate.injectHealth({ stalled: true });
  assert.equal((await request(app.port, { path: '/hello' })).status, 503);
  await provider.forceFlush();
  assert.deepEqual(exporter.getFinishedSpans()[0].events, [], 'unregistered: no more events');
});

test('a waiter the turn queue sheds gets its event on its own span, not on the span of the request that displaced it', async (t) => {
  // The turn queue sheds a waiter from another request's admit (displaced by a higher tier) or from
  // its own loop turn: the refusal is reported in the waiter's async context, so on its span.
  const { exporter, provider, tracer } = tracing(t);
  const busy = (ms) => {
    for (const end = performance.now() + ms; performance.now() < end;);
  };
  const shed = { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, hysteresisMs: 10, integralMs: 0, confirmMs: 0, turnBudgetMs: 5, queueMaxLength: 1 };
  const gate = gatekeeper.http({ tiers: UNLIMITED_TIERS, trustTierHeader: true, shed }, (req, res) => res.end('ok'));
  const binding = otel({ gatekeeper: gate, meter: new MeterProvider().getMeter('unused') });
  t.after(() => binding.unregister());
  const { get } = await serveTiers(t, (req, res) => tracer.startActiveSpan(req.url, (span) => {
    res.on('finish', () => span.end());
    gate(req, res);
  }), 4);
  await Promise.all(Array.from({ length: 4 }, () => get('/warm', 'critical')));
  gate.injectHealth({ lagMs: 60 }); // an episode that sheds nothing by its scales: only the queue refuses
  await get('/warm', 'critical');
  // Read in one turn: /a waits, /b (a higher tier) takes its place in the full queue.
  const both = Promise.all([get('/a', 'background'), get('/b', 'standard')]);
  busy(30);
  assert.deepEqual(await both, [503, 200]);
  assert.equal(gate.stats().tiers.background.queueShed, 1);
  await provider.forceFlush();
  const events = Object.fromEntries(exporter.getFinishedSpans().filter((s) => s.name === '/a' || s.name === '/b').map((s) => [s.name, s.events.map((e) => e.attributes)]));
  assert.deepEqual(events, { '/a': [{ 'tiergate.tier': 'background', 'tiergate.outcome': 'shed', 'tiergate.cause': 'queue' }], '/b': [] });
});

test('otel() options: unknown, wrong meter, non-boolean spans are refused with their code', () => {
  const gk = gatekeeper({ shed: false });
  const meter = new MeterProvider().getMeter('x');
  const cases = [
    [{ gatekeeper: gk, meter, colour: 1 }, 'ERR_TIERGATE_UNKNOWN_OPTION', /colour/],
    [{ gatekeeper: gk, meter: {} }, 'ERR_TIERGATE_INVALID_OPTION', /options\.meter must be an OpenTelemetry Meter/],
    [{ gatekeeper: gk, meter, spans: 1 }, 'ERR_TIERGATE_INVALID_OPTION', /options\.spans must be a boolean/],
    [{ meter }, 'ERR_TIERGATE_INVALID_OPTION', /must name at least one of/],
    [{ queue: concurrencyGate({ maxConcurrent: 1 }), meter, waitBuckets: [1, Number.NaN] }, 'ERR_TIERGATE_INVALID_OPTION', /waitBuckets\[1\]/],
  ];
  for (const [options, code, message] of cases) assert.throws(() => otel(options), (err) => err.code === code && message.test(err.message), JSON.stringify(Object.keys(options)));
});

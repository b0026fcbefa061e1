// Typed usage of metrics(), statusRoute() and dashboard() (checked with tsc --noEmit).
import * as http from 'node:http';
import { gatekeeper, concurrencyGate, LagMonitor, metrics, statusRoute, dashboard, otel, type HealthReport, type OtelMeter } from 'tiergate';
import { Quota, LeaseDriver, MemoryStore } from 'tiergate/quota';

const gate = gatekeeper();
const queue = concurrencyGate({ maxConcurrent: 8 });
const lag = new LagMonitor({ stallMs: 500 });
const registry = {
  registerMetric(_m: any) {},
  removeSingleMetric(_n: string) {},
  getSingleMetric(_n: string) { return undefined; },
  metrics: async () => '',
  contentType: 'text/plain; version=0.0.4; charset=utf-8',
};
const m = metrics({ gatekeeper: gate, queue, lag, registry, waitBuckets: [0.001, 0.01, 0.1, 1, 10] });
const names: readonly string[] = m.names;
const leases = new LeaseDriver(new Quota({ limits: [{ name: 'api', algorithm: 'token-bucket', limit: 10, windowMs: 1000 }] }), new MemoryStore());
metrics({ leases, registry }).unregister();
const status = statusRoute({ gatekeeper: gate, queue, lag, path: '/status', recentMs: 5000, maxLagMs: 200 });
const report: HealthReport = status.check();
const dash = dashboard({ gatekeeper: gate, queue, lag, token: 'a-long-random-admin-token', prefix: '/tiergate', historySec: 600 });
const server = http.createServer((req, res) => {
  if (req.url === '/metrics') return m.handler(req, res);
  if (status.handle(req, res) || dash.handle(req, res)) return;
  gate(req, res, () => res.end('ok'));
});
const ok: 'ok' | 'unavailable' = report.status;
dashboard({ token: Buffer.from('0123456789abcdef0123'), service: { apiBase: '/api/v1' } }).close();
void names; void server; void ok;

// otel(): a Meter is anything with the instrument factories (here a stand-in for @opentelemetry/api's).
const meter: OtelMeter = {
  createObservableCounter: () => ({}),
  createObservableGauge: () => ({}),
  createHistogram: () => ({ record() {} }),
  addBatchObservableCallback() {},
  removeBatchObservableCallback() {},
};
const o = otel({ gatekeeper: gate, queue, meter, spans: true, waitBuckets: [0.01, 0.1, 1] });
const otelNames: readonly string[] = o.names;
o.unregister();
const stopWaits: () => void = queue.gate.observeWaits((tier: string, ms: number) => void [tier, ms]);
stopWaits();
void otelNames;

'use strict';
// /metrics in the Prometheus text format, written by hand (no dependency): counters of decisions and
// responses, the activity writer's backlog, the store's last ping latency. No per-client labels.

class ServiceMetrics {
  constructor() {
    this.decisions = { allowed: 0, denied: 0, banned: 0, not_found: 0 };
    this.responses = new Map(); // route → Map status → count (no key string per response)
    this.startedAt = Date.now();
  }

  decision(kind) {
    this.decisions[kind]++;
  }

  response(route, status) {
    let byStatus = this.responses.get(route);
    if (!byStatus) this.responses.set(route, (byStatus = new Map()));
    byStatus.set(status, (byStatus.get(status) || 0) + 1);
  }

  render({ activity, storeKind, storeLatencyMs, inFlight }) {
    const lines = [];
    const metric = (name, type, help, samples) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) lines.push(`${name}${labels} ${v}`);
    };
    metric('tiergate_service_decisions_total', 'counter', 'Checks decided, by result.',
      Object.entries(this.decisions).map(([k, v]) => [`{result="${k}"}`, v]));
    metric('tiergate_service_http_responses_total', 'counter', 'HTTP responses, by route and status.',
      [...this.responses].flatMap(([route, byStatus]) => [...byStatus].map(([status, v]) => [`{route="${route}",status="${status}"}`, v])));
    metric('tiergate_service_requests_in_flight', 'gauge', 'HTTP requests being handled.', [['', inFlight]]);
    metric('tiergate_service_activity_buffered', 'gauge', 'Activity records waiting to be written.', [['', activity.buffer.length]]);
    metric('tiergate_service_activity_written_total', 'counter', 'Activity records written to the store.', [['', activity.written]]);
    metric('tiergate_service_activity_dropped_total', 'counter', 'Activity records dropped because the store fell behind.', [['', activity.dropped]]);
    metric('tiergate_service_store_ping_seconds', 'gauge', 'Latency of the last store health check.', [[`{store="${storeKind}"}`, storeLatencyMs === null ? 'NaN' : storeLatencyMs / 1000]]);
    metric('tiergate_service_uptime_seconds', 'gauge', 'Seconds since the service started.', [['', (Date.now() - this.startedAt) / 1000]]);
    return `${lines.join('\n')}\n`;
  }
}

module.exports = { ServiceMetrics };

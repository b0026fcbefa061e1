// Typed usage of the concurrency gate (checked with tsc --noEmit).
import * as http from 'node:http';
import { concurrencyGate, concurrencyGatePlugin, type ConcurrencyGateOptions, type ConcurrencyGateStats } from 'tiergate';
import { createConcurrencyGate, AdaptiveLimit } from '../../lib/queue'; // internal: not exported

const options: ConcurrencyGateOptions = {
  maxConcurrent: 8,
  maxQueue: 100,
  queueTimeoutMs: 2000,
  timeoutStatus: 503,
  retryAfter: { minSec: 1, maxSec: 5 },
  tiers: [{ name: 'critical', protected: true, queueTimeoutMs: 5000 }, 'standard', { name: 'background', maxQueue: 20 }],
  tierHeader: 'x-user-tier',
  trustTierHeader: false,
  classify: (req) => (req.url?.startsWith('/checkout') ? 'critical' : undefined),
  displace: true,
  codel: { targetMs: 5, intervalMs: 100 },
  lifo: true,
  onReject: (info, _req) => {
    const reason: 'queue-full' | 'displaced' | 'timeout' | 'codel' | 'closing' = info.reason;
    void reason;
  },
};

const mw = concurrencyGate(options);
const s: ConcurrencyGateStats = mw.stats();
const waitP99: number = s.tiers.critical.waitMs.p99;
const limit: number = s.limit;
void waitP99; void limit;

const handler = concurrencyGate.http({ maxConcurrent: 'auto', limit: { min: 2, max: 64 } }, (_req, res) => {
  res.end('ok');
});
http.createServer(handler);
const fastifyPlugin: typeof concurrencyGatePlugin = concurrencyGatePlugin;
void fastifyPlugin;

const gate = createConcurrencyGate({ maxConcurrent: 4 });
const verdict = gate.admit({} as http.IncomingMessage, {} as http.ServerResponse);
if (verdict !== null && !('then' in verdict)) {
  const status: number = verdict.status;
  void status;
}
gate.close();

const adaptive = new AdaptiveLimit({ min: 1, max: 10 });
const changed: boolean = adaptive.sample(5, 3, 100);
void changed;

// @ts-expect-error maxConcurrent is required
concurrencyGate({ maxQueue: 3 });
// @ts-expect-error 'fast' is not a limit
concurrencyGate({ maxConcurrent: 'fast' });

// Koa 2/3 middleware with the same controls.
const koaQueue = concurrencyGate.koa({ maxConcurrent: 4 });
koaQueue.resetStats();

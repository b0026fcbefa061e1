// Typed usage of the gatekeeper API, checked by `tsc --noEmit` (see __test__/api/types.test.js).
/// <reference types="node" />
import * as http from 'node:http';
import { gatekeeper, tiergatePlugin, mintTierToken, Gatekeeper, Ledger, DECISION_CHANNEL } from 'tiergate';
import type { DecisionInfo, GatekeeperOptions, GatekeeperStats, TierSource } from 'tiergate';

const options: GatekeeperOptions = {
  tiers: [
    { name: 'critical', protected: true, limit: 2000, windowMs: 1000 },
    { name: 'standard', limit: 1000, windowMs: 1000, perKey: { limit: 20, windowMs: 2000 } },
    { name: 'background', limit: 500, windowMs: 1000, perKey: null },
  ],
  tierHeader: 'x-user-tier',
  trustTierHeader: false,
  tierSecret: ['a-current-secret-of-32-bytes!!!!', Buffer.alloc(32, 7)],
  routes: [
    { method: 'POST', path: '/checkout', tier: 'critical' },
    { method: ['GET', 'HEAD'], path: /^\/reports\//, tier: 'background' },
  ],
  classify: (req) => (req.headers['x-internal'] === '1' ? 'critical' : undefined),
  defaultTier: 'standard',
  key: { header: 'x-user-id' },
  trustProxy: 1,
  ipv6Prefix: 56,
  shed: { targetLagMs: 50, criticalLagMs: 200, holdMs: 1000, heapRatio: 0.9, stallMs: 500, relative: false, lagSignal: 'max' },
  rateLimitHeaders: 'both',
  retryAfter: { minSec: 1, maxSec: 5 },
  respond: (info, _req, rejection) => (info.verdict === 'rate-limited' ? { ...rejection, status: 429 } : undefined),
  onDecision: (info: DecisionInfo) => void info.tier.length,
  onShed: (info) => void info.retryAfterMs,
  onReject: (info, req) => void (info.key ?? req.url),
};

// respond may return a JSON object body or bytes; a key function may return a number.
gatekeeper({ respond: () => ({ status: 503, body: { error: 'busy' } }), key: () => 42 });
// classify and key may answer later (a session or token lookup).
gatekeeper({ classify: async (req) => (req.headers.cookie ? 'critical' : undefined), key: async () => 'user-1' });
gatekeeper({ respond: () => ({ status: 503, headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(2) }) });
// @ts-expect-error 'given' is never reported (a given tier is 'classify' or 'route')
const never: TierSource = 'given';
void never;

const mw = gatekeeper(options);
const s: GatekeeperStats = mw.stats();
const admitted: number = s.tiers.critical.admitted + s.lagMs + s.elu + s.heapRatio;
mw.injectHealth({ lagMs: 120, stalled: false });
mw.useLiveHealth();
const handler = gatekeeper.http({ shed: false }, (_req, res) => res.end('ok'));
http.createServer(handler);
const gk = new Gatekeeper({ ledger: new Ledger({ tiers: [{ name: 'only', limit: 1, windowMs: 1000 }] }) });
const verdict = gk.admit({} as http.IncomingMessage, {} as http.ServerResponse);
// A promise while a shaper delays the request (docs/defense.md), a thenable while the turn queue holds it.
const status: number | undefined = verdict !== null && 'then' in verdict ? undefined : verdict?.status;
const token: string = mintTierToken('a-current-secret-of-32-bytes!!!!', 'critical', { ttlSec: 3600 });
const token2: string = mintTierToken(Buffer.alloc(32), 'critical', { expiresAt: 2_000_000_000 });
const channel: 'tiergate:decision' = DECISION_CHANNEL;
void [admitted, status, token, token2, channel, tiergatePlugin];

// Koa 2/3: middleware over the context's req/res; the controls as on the other adapters.
const koaGate = gatekeeper.koa({ shed: false });
const ctx = { req: {} as import('node:http').IncomingMessage, res: {} as import('node:http').ServerResponse, originalUrl: '/', status: 404, body: undefined as unknown, set(_f: { [name: string]: string }) {} };
const koaDone: Promise<unknown> = koaGate(ctx, async () => {});
const koaTiers: readonly string[] = koaGate.tiers;
void koaDone; void koaTiers;

// Shadow mode: on, or enforcing a share; its figures in stats(), its flag on the hooks' info.
const shadowGate = gatekeeper({ shadow: { enforcePercent: 10 }, onShed: (info) => { const served: boolean | undefined = info.shadow; void served; } });
gatekeeper({ shadow: true });
const ss = shadowGate.stats();
const wouldShed: number = ss.tiers.background.shadowShed;
const enforced: number | undefined = ss.shadow?.enforcePercent;
void wouldShed; void enforced;

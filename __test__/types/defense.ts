// Typed usage of the abuse-defense API, checked by `tsc --noEmit` (see __test__/api/types.test.js).
/// <reference types="node" />
import * as http from 'node:http';
import { gatekeeper, BAN_CHANNEL } from 'tiergate';
import type { GatekeeperOptions, Ban, BanEvent, Defense, DefenseStats, LimitOptions, Limits, LimitKeyState } from 'tiergate';

const limits: LimitOptions[] = [
  { name: 'per-ip', algorithm: 'sliding-window', limit: 100, windowMs: 60_000 },
  { name: 'per-subnet', by: { prefix: { v4: 24, v6: 48 } }, limit: 1000, windowMs: 60_000, maxKeys: 50_000 },
  { name: 'login', routes: ['/login', /^\/auth\//, { method: 'POST', path: '/session' }], methods: ['POST'], limit: 5, windowMs: 900_000 },
  { name: 'per-user', by: { header: 'x-user-id' }, algorithm: 'token-bucket', limit: 20, windowMs: 1000, burst: 40, tiers: ['standard'] },
  { name: 'by-lookup', by: async (req) => (req.headers['x-api-key'] ? 'user-1' : undefined), limit: 10, windowMs: 1000 },
  { name: 'by-fn', by: (req) => req.headers['x-api-key'] as string | undefined, cost: (req) => (req.method === 'POST' ? 2 : 1), limit: 10, windowMs: 1000 },
  { name: 'smooth', algorithm: 'gcra', limit: 50, windowMs: 1000, burst: 1, maxDelayMs: 500, maxQueued: 100 },
  { name: 'failed-logins', routes: ['/login'], limit: 5, windowMs: 900_000, skipSuccessfulRequests: true, requestWasSuccessful: (req, res) => res.statusCode < 400 },
  { name: 'per-plan', by: { header: 'x-user' }, limit: (req) => (req.headers['x-plan'] === 'pro' ? 1000 : 100), windowMs: 60_000, skipFailedRequests: true },
];

const options: GatekeeperOptions = {
  shed: false,
  allow: ['10.0.0.0/8'],
  deny: ['192.0.2.0/24', '2001:db8::/32'],
  limits,
  bans: {
    rules: [{ name: 'probe', on: 'probe', threshold: 20, windowMs: 60_000, banMs: 1_800_000 }],
    escalation: { factor: 2, maxBanMs: 86_400_000, memoryMs: 86_400_000, permanentAfter: false, jitter: 0.1 },
    maxBans: 10_000,
    maxTracked: 10_000,
    probeStatuses: [400, 404, 405],
  },
  challenge: {
    secret: ['a-current-secret-of-32-bytes!!!!', Buffer.alloc(32, 1)],
    afterStrikes: 2,
    ttlSec: 600,
    header: 'x-tiergate-pass',
    cookie: false,
    respond: (info, req) => ({ status: 302, headers: { location: `/challenge?back=${encodeURIComponent(req.url || '/')}&why=${info.pass || ''}` } }),
  },
  skip: (req) => req.url === '/healthz',
  onBan: (e: BanEvent) => void e.ban.target.length,
  rateLimitHeaders: 'draft-7',
  onReject: (info) => void (info.limitName ?? info.verdict),
  fairShare: { reserve: 0.5, windowMs: 1000, maxShare: 4, subnet: { v4: 24, v6: 48 }, slots: 4096 },
};
const fairDefaults: GatekeeperOptions = { fairShare: true };
const fairNoSubnet: GatekeeperOptions = { fairShare: { subnet: false } };
void [fairDefaults, fairNoSubnet];

const mw = gatekeeper(options);
const d: Defense | null = mw.defense;
if (d !== null) {
  const b: Ban | null = d.bans.ban('203.0.113.7', { durationMs: 60_000, reason: 'abuse' });
  void b?.until;
  d.bans.ban('198.51.100.0/24');
  const all: Ban[] = d.bans.list();
  const report: { applied: number } = d.bans.import(d.bans.export());
  void [all.length, report.applied, d.bans.lift('203.0.113.7')];
  d.setLists({ deny: ['192.0.2.0/24'] });
  const lists: { allow: string[]; deny: string[] } = d.lists();
  const s: DefenseStats = d.stats();
  const fairRefused: number = s.fairShareRefused;
  void fairRefused;
  void [lists.deny.length, s.bans, d.clientKey('2001:db8::1'), d.policies[0].quota];
}
const lim: Limits | null = mw.limits;
if (lim !== null) {
  const st: LimitKeyState = lim.get('per-ip', '203.0.113.7');
  void [st.remaining, st.resetMs, st.overridden, lim.reset('per-ip', '203.0.113.7'), lim.refund('per-ip', '203.0.113.7', 2)];
  lim.override('per-user', 'alice', { limit: 500 });
  void [lim.overrides()[0]?.limit, lim.clearOverride('per-user', 'alice')];
}
const channel: 'tiergate:ban' = BAN_CHANNEL;
void channel;

http.createServer(gatekeeper.http(options, (req, res) => {
  const rl = req.rateLimit;
  res.end(rl ? `${rl.name} ${rl.remaining}/${rl.limit} ${rl.resetTime?.toISOString()}` : 'no limit');
  if (req.url === '/solved') void mw.defense?.mintPass(req, { ttlSec: 600 });
  mw.limits?.charge(req, 'per-plan', 42);
}));

// Typed usage of cluster mode, checked by `tsc --noEmit --strict` in __test__/api/types.test.js.
import Redis from 'ioredis';
import { cluster, gatekeeper } from 'tiergate';
import type { Cluster, ClusterStats, DecisionInfo } from 'tiergate';
import { cluster as clusterToo, RedisStore, BanChannel, type BanDelivery } from 'tiergate/cluster';

const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true });
const c: Cluster = cluster({
  redis,
  storeTimeoutMs: 50,
  minHolders: 4,
  tiers: {
    free: { perKey: { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }, fallback: 'closed' },
    paid: { perKey: { algorithm: 'token-bucket', limit: 50, windowMs: 1000, burst: 100 }, budget: { algorithm: 'token-bucket', limit: 5000, windowMs: 1000, burst: 10_000 } },
  },
  limits: [{ name: 'login', algorithm: 'sliding-window', limit: 5, windowMs: 60_000, unfunded: 'provisional', provisional: 1 }],
});
const other: Cluster = cluster({ redis: 'redis://127.0.0.1:6379', limits: [{ name: 'x', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }], bans: false });
const signed: Cluster = cluster({ redis, limits: [{ name: 'y', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }], banKey: [Buffer.alloc(32, 1), 'an older key of 16+ bytes'] });
void signed.close();
const mw = gatekeeper({ tiers: [{ name: 'paid', limit: 1e9, windowMs: 1000 }, { name: 'free', limit: 1e9, windowMs: 1000 }], cluster: c, onReject: (info: DecisionInfo) => info.cluster?.reason });
void mw;
c.check('login', 'user-1').then((d) => d.allowed);
c.bans?.ban('203.0.113.9', { durationMs: 60_000, reason: 'abuse' }).then((d: BanDelivery) => d === 'queued');
void c.bans?.stats.queued;
void c.bans?.table.size;
const s: ClusterStats = c.stats();
void s.fallbackDecisions;
void s.bans?.rejected;
void c.close();
void other.close();
// A gatekeeper limit funded from the cluster's leases: the numbers are the cluster's limit of that name.
const shared = cluster({ redis, limits: [{ name: 'search', algorithm: 'sliding-window', limit: 100, windowMs: 60_000 }] });
void gatekeeper({ cluster: shared, limits: [{ name: 'search', by: 'ip', routes: ['/search'], cluster: true }], bans: {} });
void shared.close();
// 'tiergate/cluster': the same cluster() as the root's, and the parts of cluster mode.
const same: typeof cluster = clusterToo;
void same;
const store: RedisStore = new RedisStore({ redis, prefix: 'app' });
void store.close();
const channel: BanChannel | null = c.bans;
void channel;
// Cluster mode on PostgreSQL: a URL, a pool (structurally: pg has no types installed here), or the fields.
import { PostgresStore, type PgPoolLike } from 'tiergate/cluster';
declare const pool: PgPoolLike;
const onPg: Cluster = cluster({ postgres: 'postgres://127.0.0.1/app', prefix: 'app_limits', limits: [{ name: 'z', algorithm: 'fixed-window', limit: 10, windowMs: 1000 }] });
void onPg.close();
void cluster({ postgres: { pool, schema: 'limits' }, bans: false, limits: [{ name: 'z', algorithm: 'fixed-window', limit: 10, windowMs: 1000 }] });
void cluster({ postgres: pool, limits: [{ name: 'z', algorithm: 'fixed-window', limit: 10, windowMs: 1000 }] });
// @ts-expect-error one store, not two
void cluster({ redis, postgres: pool, limits: [{ name: 'z', algorithm: 'fixed-window', limit: 10, windowMs: 1000 }] });
const pgStore: PostgresStore = new PostgresStore({ postgres: { connectionString: 'postgres://127.0.0.1/app', poolSize: 2 }, timeoutMs: 500 });
void pgStore.prune().then((n: number) => n);

// One key of a cluster limit, in the store (docs/cluster.md, "Operating on one key").
async function operate(c: Cluster): Promise<void> {
  const st = await c.limits.get('search', 'k');
  const left: number = st.remaining;
  const had: boolean = await c.limits.reset('search', 'k');
  const back: number = await c.limits.refund('search', 'k', 2);
  await c.limits.override('search', 'vip', { limit: 500 });
  const list = await c.limits.overrides();
  const cleared: boolean = await c.limits.clearOverride('search', 'vip');
  const count: number | null = c.stats().limitOverrides.overrides;
  void [left, had, back, list[0]?.limit, cleared, count, st.overridden];
}
void operate;

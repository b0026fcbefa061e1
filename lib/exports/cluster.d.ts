// Types of `tiergate/cluster` (lib/exports/cluster.js).
export { cluster, Cluster, RedisStore, PostgresStore, BanChannel } from '../cluster';
export type {
  ClusterOptions, ClusterTierOptions, ClusterTierLimit, ClusterStats, ClusterLimits, ClusterLimitKeyState, ClusterBanEvent, ClusterBanTable,
  RedisLike, PgPoolLike, ClusterPostgresOptions, ClusterStoreOptions, ClusterLimitOptions, BanChannelStats, BanDelivery,
} from '../cluster';

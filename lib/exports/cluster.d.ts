// Types of `tiergate/cluster` (lib/exports/cluster.js).
export { cluster, Cluster, RedisStore, BanChannel } from '../cluster';
export type {
  ClusterOptions, ClusterTierOptions, ClusterTierLimit, ClusterStats, ClusterBanEvent, ClusterBanTable,
  RedisLike, BanChannelStats, BanDelivery,
} from '../cluster';

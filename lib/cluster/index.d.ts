import type { LeaseDriver, LeaseDriverStats, LeaseStore, Quota, QuotaCode, QuotaDecision, QuotaLimitOptions, StoreGrant, StoreRequest, StoreReturn } from '../quota';

/** A limit without its name: the tier names it. */
export type ClusterTierLimit = QuotaLimitOptions extends infer L ? (L extends QuotaLimitOptions ? Omit<L, 'name'> : never) : never;

/** A tier's limit: a token bucket unless its `algorithm` says otherwise (as the local tier buckets). */
export type ClusterTierBucket = Omit<ClusterTierLimit, 'algorithm'> & { algorithm?: 'token-bucket' | 'fixed-window' | 'sliding-window'; burst?: number };

export interface ClusterTierOptions {
  /** A cluster-wide limit per key (the gatekeeper's key: IP, header or function). */
  perKey?: ClusterTierBucket;
  /** A cluster-wide budget for the whole tier. */
  budget?: ClusterTierBucket;
  /** While Redis does not answer: 'open' (the last leases, then a safe share) or 'closed' (refuse). Default `options.fallback`. */
  fallback?: 'open' | 'closed';
}

/** The user's ioredis client (Redis or Cluster), structurally. */
export interface RedisLike {
  call(command: string, ...args: Array<string | number>): Promise<unknown>;
  duplicate(): RedisLike;
}

/** A pg.Pool, structurally (yours to end). */
export interface PgPoolLike {
  connect(): Promise<unknown>;
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/** Where cluster mode's PostgreSQL store lives. */
export interface ClusterPostgresOptions {
  /** A postgres:// URL: the store makes a pool of its own (pg must be installed). */
  connectionString?: string;
  /** Or your pg.Pool (yours to end; the ban channel holds one of its connections for LISTEN). */
  pool?: PgPoolLike;
  /** The schema of the table and functions, created on first use (default 'public'). */
  schema?: string;
  /** Connections of the store's own pool (default 4, 1..100; not with `pool`). */
  poolSize?: number;
}

/** The store: Redis or PostgreSQL, exactly one. */
export type ClusterStoreOptions =
  | {
    /** Your ioredis client (standalone or Cluster; you close it), or a redis:// URL (ioredis must be installed). */
    redis: RedisLike | string;
    postgres?: never;
  }
  | {
    /** A postgres:// URL, your pg.Pool, or `{ connectionString | pool, schema?, poolSize? }` (pg must be installed). */
    postgres: string | PgPoolLike | ClusterPostgresOptions;
    redis?: never;
  };

export type ClusterOptions = ClusterStoreOptions & ClusterLimitOptions;

export interface ClusterLimitOptions {
  /** Key and channel prefix (default 'tiergate'); with postgres, the tables' and functions' prefix (1-40 of a-z 0-9 _). */
  prefix?: string;
  /** Named limits, for `spend(name, key)`. */
  limits?: QuotaLimitOptions[];
  /** Per gatekeeper tier: a per-key limit, a budget, a fallback. */
  tiers?: Record<string, ClusterTierOptions>;
  /** Default fallback of every limit (default 'open'). */
  fallback?: 'open' | 'closed';
  /** The fewest processes the safe share assumes (set it to your process count). */
  minHolders?: number;
  /** Shared bans over pub/sub (default true). */
  bans?: boolean;
  /** Signs every shared ban change (HMAC-SHA256): at least 16 bytes; an array to rotate (the first signs, every one verifies). */
  banKey?: string | Buffer | Array<string | Buffer>;
  maxKeys?: number;
  holder?: string;
  /** No spend waits for its lease request longer than this, from when it went out (ms, default 100). */
  storeTimeoutMs?: number;
  /** A request unanswered this long means the store is down (ms, default 1000, >= storeTimeoutMs); PostgreSQL's waits end then. */
  storeDownMs?: number;
  pollIntervalMs?: number;
  batchSize?: number;
}

export interface ClusterBanEvent {
  op: 'ban' | 'lift' | 'lists';
  target?: string;
  /** A CIDR prefix (the defense's table matches it; the exact-key cache does not hold it). */
  cidr?: boolean;
  durationMs?: number | null;
  reason?: string;
  source?: 'rule' | 'operator';
  offense?: number;
  allow?: string[];
  deny?: string[];
}

/** What a process enforces: the exact-key cache, or (with the gatekeeper's defense) the defense's table. */
export interface ClusterBanTable {
  readonly size: number;
  connect(report: (event: ClusterBanEvent) => void): void;
  ban(target: string, options?: { durationMs?: number | null; reason?: string }): void;
  lift(target: string): void;
  setLists(lists: { allow?: string[]; deny?: string[] }): void;
  apply(event: ClusterBanEvent): void;
}

export interface BanChannelStats {
  /** Changes made here that Redis took. */
  published: number;
  received: number;
  /** Sends of queued changes that Redis did not take (they are sent again). */
  publishErrors: number;
  applyErrors: number;
  /** Changes made here waiting for Redis (at most 10,000). */
  queued: number;
  /** Changes not queued because 10,000 already waited: in force in their process only. */
  dropped: number;
  /** Messages and hash entries ignored: not signed with the banKey, or a message sent more than 60 s from now. */
  rejected: number;
}

/** 'published': Redis has it; 'queued': Redis did not take it within 1 s, it is shared when Redis does. */
export type BanDelivery = 'published' | 'queued';

export declare class BanChannel {
  readonly id: string;
  /** The table this process enforces (a gatekeeper with the abuse defense makes it the defense's). */
  readonly table: ClusterBanTable;
  readonly stats: BanChannelStats;
  start(): Promise<void>;
  useTable(table: ClusterBanTable): void;
  /**
   * Bans `target` here at once and in every process (durationMs null: until lifted). Settles within
   * 1 s; rejects with ERR_TIERGATE_BAN_NOT_SHARED when 10,000 changes already wait for Redis.
   */
  ban(target: string, options?: { durationMs?: number | null; reason?: string }): Promise<BanDelivery>;
  lift(target: string): Promise<BanDelivery>;
  setLists(lists: { allow?: string[]; deny?: string[] }): Promise<BanDelivery>;
  close(): Promise<void>;
}

export declare class RedisStore implements LeaseStore {
  constructor(options: { redis: RedisLike | string; prefix?: string });
  readonly client: RedisLike;
  readonly prefix: string;
  lease(batch: StoreRequest[]): Promise<Array<StoreGrant | Error>>;
  release(batch: StoreReturn[]): Promise<void>;
  close(): Promise<void>;
}

export declare class PostgresStore implements LeaseStore {
  /** `timeoutMs` (default 1000) bounds every wait: cluster() gives it storeDownMs. */
  constructor(options: { postgres: string | PgPoolLike | ClusterPostgresOptions; prefix?: string; timeoutMs?: number });
  readonly prefix: string;
  readonly timeoutMs: number;
  /** Creates the tables and functions if missing (the first call does it too). */
  open(): Promise<void>;
  lease(batch: StoreRequest[]): Promise<Array<StoreGrant | Error>>;
  release(batch: StoreReturn[]): Promise<void>;
  /** Deletes up to 1000 rows a fresh state equals (the store does it every minute); how many. */
  prune(): Promise<number>;
  /** Ends the pool if the store made it. */
  close(): Promise<void>;
}

export interface ClusterStats extends LeaseDriverStats {
  bans: (BanChannelStats & { held: number }) | null;
  /** The cluster's overrides as this process last read them (`overrides` null before the first read). */
  limitOverrides: { overrides: number | null; maxOverrides: number; byName: Record<string, number> };
}

/** One key of one cluster limit as the store counts it (`shared.limits.get`). */
export interface ClusterLimitKeyState {
  name: string;
  key: string;
  /** The key's limit in the store: an override, else the configured one (a token bucket: its burst). */
  limit: number;
  /** What the store has left; tokens leased to processes count as spent. */
  remaining: number;
  /** Milliseconds until the count frees up (0: nothing counted, or a bucket that never refills). */
  resetMs: number;
  overridden: boolean;
}

/**
 * `shared.limits` (and `gate.limits` on a `cluster: true` limit): one key of one cluster limit, in the
 * store, for every process. Each call is one round trip; argument errors reject (ERR_TIERGATE_INVALID_ARGUMENT).
 */
export interface ClusterLimits {
  get(name: string, key: string): Promise<ClusterLimitKeyState>;
  /** Clears the key's count (its override stays); other processes follow at their next lease. Whether it had counted anything. */
  reset(name: string, key: string): Promise<boolean>;
  /** Gives units (default 1) back to the store's count, never beyond the limit; the units given back. */
  refund(name: string, key: string, units?: number): Promise<number>;
  /** The key's limit for every process from its next lease; at most 10,000 in the cluster (ERR_TIERGATE_OVERRIDES_FULL). */
  override(name: string, key: string, options: { limit: number }): Promise<void>;
  clearOverride(name: string, key: string): Promise<boolean>;
  overrides(): Promise<Array<{ name: string; key: string; limit: number }>>;
}

export declare class Cluster {
  /** Resolves once the store is set up (PostgreSQL's tables), the ban channel subscribed and loaded, and the overrides read. */
  readonly ready: Promise<void>;
  readonly driver: LeaseDriver;
  readonly quota: Quota;
  readonly store: RedisStore | PostgresStore;
  readonly bans: BanChannel | null;
  /** One key of one limit in the store: get, reset, refund, override, clearOverride, overrides. */
  readonly limits: ClusterLimits;
  readonly tierNames: string[];
  readonly needsKey: boolean;
  /** A gatekeeper with both calls it: its abuse defense becomes this cluster's ban table. */
  useDefense(defense: unknown): void;
  limitId(name: string): number;
  spend(limit: string | number, key: string, cost?: number): QuotaCode | Promise<QuotaDecision>;
  check(limit: string | number, key: string, cost?: number): Promise<{ allowed: boolean; code: QuotaCode; reason: string; retryAfterMs: number }>;
  stats(): ClusterStats;
  close(): Promise<void>;
}

/** Cluster mode on Redis or PostgreSQL: pass it to `gatekeeper({ cluster })`. See docs/cluster.md. */
export declare function cluster(options: ClusterOptions): Cluster;
export declare const CLUSTER_BANNED: -1;

import type { LeaseDriver, LeaseDriverStats, LeaseStore, Quota, QuotaCode, QuotaDecision, QuotaLimitOptions, StoreGrant, StoreRequest, StoreReturn } from '../quota';

/** A limit without its name: the tier names it. */
export type ClusterTierLimit = QuotaLimitOptions extends infer L ? (L extends QuotaLimitOptions ? Omit<L, 'name'> : never) : never;

export interface ClusterTierOptions {
  /** A cluster-wide limit per key (the gatekeeper's key: IP, header or function). */
  perKey?: ClusterTierLimit;
  /** A cluster-wide budget for the whole tier. */
  budget?: ClusterTierLimit;
  /** While Redis does not answer: 'open' (the last leases, then a safe share) or 'closed' (refuse). Default `options.fallback`. */
  fallback?: 'open' | 'closed';
}

/** The user's ioredis client (Redis or Cluster), structurally. */
export interface RedisLike {
  call(command: string, ...args: Array<string | number>): Promise<unknown>;
  duplicate(): RedisLike;
}

export interface ClusterOptions {
  /** Your ioredis client (standalone or Cluster; you close it), or a redis:// URL (ioredis must be installed). */
  redis: RedisLike | string;
  /** Key and channel prefix (default 'tiergate'). */
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
  maxKeys?: number;
  holder?: string;
  /** No request waits for Redis longer than this (ms, default 100). */
  storeTimeoutMs?: number;
  pollIntervalMs?: number;
  batchSize?: number;
}

export interface ClusterBanEvent {
  op: 'ban' | 'lift' | 'lists';
  target?: string;
  durationMs?: number | null;
  reason?: string;
  allow?: string[];
  deny?: string[];
}

export declare class BanChannel {
  readonly id: string;
  /** True while remote events are handed to `onRemote` listeners (publishing is then a no-op). */
  readonly applying: boolean;
  readonly cache: { get(target: string): { until: number; reason: string } | null; readonly size: number; lists: { allow: string[]; deny: string[] } };
  readonly stats: { published: number; received: number; publishErrors: number };
  start(): Promise<void>;
  /** Bans `target` here at once and in every process (durationMs null: until lifted). */
  ban(target: string, options?: { durationMs?: number | null; reason?: string }): Promise<void>;
  lift(target: string): Promise<void>;
  setLists(lists: { allow?: string[]; deny?: string[] }): Promise<void>;
  /** Every change made by another process. */
  onRemote(fn: (event: ClusterBanEvent) => void): void;
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

export interface ClusterStats extends LeaseDriverStats {
  bans: { published: number; received: number; publishErrors: number; held: number } | null;
}

export declare class Cluster {
  /** Resolves once the ban channel is subscribed and loaded. */
  readonly ready: Promise<void>;
  readonly driver: LeaseDriver;
  readonly quota: Quota;
  readonly store: RedisStore;
  readonly bans: BanChannel | null;
  readonly tierNames: string[];
  readonly needsKey: boolean;
  limitId(name: string): number;
  spend(limit: string | number, key: string, cost?: number): QuotaCode | Promise<QuotaDecision>;
  check(limit: string | number, key: string, cost?: number): Promise<{ allowed: boolean; code: QuotaCode; reason: string; retryAfterMs: number }>;
  stats(): ClusterStats;
  close(): Promise<void>;
}

/** Cluster mode on Redis: pass it to `gatekeeper({ cluster })`. See docs/cluster.md. */
export declare function cluster(options: ClusterOptions): Cluster;
export declare const CLUSTER_BANNED: -1;

/** A cluster-wide limit, funded from leases of a store (see docs/cluster.md). */
export interface QuotaLimitCommon {
  /** Unique, non-empty: the store's keys are made from it. */
  name: string;
  /** What a key without lease does while the store answers: 'wait' (default; one bounded round trip, exact) or 'provisional' (admit up to `provisional` tokens on credit). */
  unfunded?: 'wait' | 'provisional';
  /** The provisional allowance per key (integer >= 1, default 1); only with `unfunded: 'provisional'`. */
  provisional?: number;
  /** While the store is down: 'open' (default; the last leases, then a safe share) or 'closed' (refuse past the leases). */
  fallback?: 'open' | 'closed';
  /** A lease is sized to last this long at the key's local rate (ms, default 1000). */
  renewalPeriodMs?: number;
  /** Renew when the lease would run out within this much time (ms, default 200; at most renewalPeriodMs). */
  leadTimeMs?: number;
  /** A lease's life (ms, default 10000; at least renewalPeriodMs). */
  leaseTtlMs?: number;
  /** The largest lease (tokens, default 1000). */
  maxLease?: number;
  /** A key's first lease (tokens, default 1). */
  initialLease?: number;
  /** While the store is down, a key asks again this often (ms, default 1000). */
  retryMs?: number;
  /** The fewest processes the safe share assumes (default 1; set it to your process count). */
  minHolders?: number;
}

/** A token bucket: `limit` tokens per `windowMs` refill it; it holds `burst` (default `limit`) when full. */
export interface QuotaBucketLimit extends QuotaLimitCommon {
  algorithm: 'token-bucket';
  /** Tokens per window (integer 1 to 2^32-1). */
  limit: number;
  /** ms, > 0, at most 1e12. */
  windowMs: number;
  /** Tokens when full (integer 1 to 2^32-1, default `limit`). */
  burst?: number;
}

/** A window: `limit` admissions per `windowMs`. The default algorithm is 'fixed-window', as a gatekeeper's named limit's. */
export interface QuotaWindowLimit extends QuotaLimitCommon {
  algorithm?: 'fixed-window' | 'sliding-window';
  /** Admissions per window (integer 1 to 2^32-1). */
  limit: number;
  /** ms, > 0, at most 1e12. */
  windowMs: number;
}

export type QuotaLimitOptions = QuotaBucketLimit | QuotaWindowLimit;

export interface QuotaOptions {
  limits: QuotaLimitOptions[];
  /** Keys tracked at once over all limits (default 100000). */
  maxKeys?: number;
  /** A key untouched this long is forgotten, its lease returned (ms, default 60000). */
  idleTtlMs?: number;
  sweepPerPoll?: number;
}

/** A limit's complete options, as stores receive them. */
export interface LimitSpec {
  readonly name: string;
  readonly algorithm: 'token-bucket' | 'fixed-window' | 'sliding-window';
  /** Units per `windowMs` (a token bucket refills at limit / windowMs). */
  readonly limit: number;
  readonly windowMs: number;
  /** Token bucket only: tokens when full (filled in: `limit` unless given). */
  readonly burst?: number;
  readonly fallback: 'open' | 'closed';
  readonly unfunded: 'wait' | 'provisional';
  readonly provisional: number;
  readonly renewalPeriodMs: number;
  readonly leadTimeMs: number;
  readonly leaseTtlMs: number;
  readonly maxLease: number;
  readonly initialLease: number;
  readonly retryMs: number;
  readonly minHolders: number;
}

export type QuotaReturnReason = 'released' | 'evicted' | 'expired' | 'late' | 'unusable' | 'overflow' | 'spent';

/** Store contract (lib/quota/store.js): one lease request. */
export interface StoreRequest {
  limit: LimitSpec;
  key: string;
  size: number;
  ttlMs: number;
  holder: string;
}

/** Store contract: the answer to one request. */
export interface StoreGrant {
  granted: number;
  ttlMs: number;
  remaining: number;
  holders: number;
  lease: number;
  retryAfterMs: number;
}

/** Store contract: tokens going back. */
export interface StoreReturn {
  limit: LimitSpec;
  key: string;
  lease: number;
  tokens: number;
  reason: QuotaReturnReason;
  /** Ms since the lease was last spent from, if it was: a sliding window's record ends one window after. */
  idleMs?: number;
  holder: string;
}

/** What the lease driver needs of a store (Redis, SQL, memory). */
export interface LeaseStore {
  lease(batch: StoreRequest[]): Promise<Array<StoreGrant | Error>>;
  release(batch: StoreReturn[]): Promise<void>;
  close?(): Promise<void>;
}

export declare const QUOTA_CODE: Readonly<{
  LEASE: 0; PROVISIONAL: 1; FALLBACK: 2; NEED_LEASE: 3; AWAITING: 4; EXHAUSTED: 5; STORE_DOWN: 6; SHARE: 7; FULL: 8;
  /** The driver's: waited storeTimeoutMs for a contended key while the store kept answering (a refusal). */
  WAITED: 9;
}>;
export type QuotaCode = 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9;
export type QuotaCodeName = 'LEASE' | 'PROVISIONAL' | 'FALLBACK' | 'EXHAUSTED' | 'STORE_DOWN' | 'SHARE' | 'FULL' | 'WAITED';

export declare const QUOTA_DEFAULTS: Readonly<{
  renewalPeriodMs: number; leadTimeMs: number; leaseTtlMs: number; maxLease: number; initialLease: number;
  retryMs: number; minHolders: number; maxKeys: number; idleTtlMs: number; sweepPerPoll: number;
}>;
export declare const QUOTA_RETURN_REASONS: readonly QuotaReturnReason[];
export declare const LEASE_DRIVER_DEFAULTS: Readonly<{ storeTimeoutMs: number; storeDownMs: number; pollIntervalMs: number; batchSize: number }>;

export interface QuotaStats {
  spentLease: number; spentProvisional: number; spentFallback: number; refused: number;
  requests: number; grants: number; failures: number; abandoned: number; granted: number; repaid: number;
  expired: number; returned: number; returnsDropped: number; evicted: number; keys: number; storeUp: boolean;
}

export declare class Quota {
  constructor(options: QuotaOptions);
  readonly limits: readonly LimitSpec[];
  /** `[retryAfterMs]` of the last refusal by `trySpend`. */
  readonly result: Float64Array;
  limitId(name: string): number;
  /** One spend from process memory: a QUOTA_CODE. */
  trySpend(limit: number, key: string, cost?: number): QuotaCode;
  poll(): { requests: Array<{ id: number; limit: number; key: string; size: number; ttlMs: number }>; returns: Array<{ limit: number; key: string; lease: number; tokens: number; reason: QuotaReturnReason; idleMs?: number }> };
  wantsPoll(): boolean;
  grant(limit: number, key: string, id: number, grant: StoreGrant): { limit: number; key: string; lease: number; tokens: number; reason: QuotaReturnReason; idleMs?: number } | null;
  fail(limit: number, key: string, id: number): void;
  releaseAll(): Array<{ limit: number; key: string; lease: number; tokens: number; reason: QuotaReturnReason; idleMs?: number }>;
  stats(): QuotaStats;
  keyState(limit: number, key: string): { held: number; debt: number; pending: boolean };
}

export interface LeaseDriverOptions {
  /** No spend waits for its lease request longer than this, from when it went out (ms, default 100). */
  storeTimeoutMs?: number;
  /** A request unanswered this long fails: the store is down (ms, default 1000, >= storeTimeoutMs). */
  storeDownMs?: number;
  /** The background tick (ms, default 20). */
  pollIntervalMs?: number;
  /** Requests per store call (default 256). */
  batchSize?: number;
  /** This process's name in the store (default: random). */
  holder?: string;
}

export interface QuotaDecision {
  code: QuotaCode;
  retryAfterMs: number;
}

export interface LeaseDriverStats extends QuotaStats {
  batches: number; requestsSent: number; returnsSent: number; storeErrors: number; returnErrors: number;
  timeouts: number; lateGrants: number; waits: number; waitTimeouts: number; inFlight: number;
  /** The longest a spend has waited for the store (ms). */
  maxWaitMs: number;
  decisions: { lease: number; provisional: number; fallback: number; exhausted: number; storeDown: number; share: number; full: number; waited: number };
  /** Decisions taken because the store was not answering (fallback, storeDown, share). */
  fallbackDecisions: number;
}

export declare class LeaseDriver {
  constructor(quota: Quota, store: LeaseStore, options?: LeaseDriverOptions);
  readonly holder: string;
  readonly quota: Quota;
  readonly storeTimeoutMs: number;
  readonly storeDownMs: number;
  /** `[retryAfterMs]` of the last synchronous refusal. */
  readonly result: Float64Array;
  /** A final code at once, or (a key without lease) a Promise settled within storeTimeoutMs. */
  spend(limit: number, key: string, cost?: number): QuotaCode | Promise<QuotaDecision>;
  check(limit: number, key: string, cost?: number): Promise<{ allowed: boolean; code: QuotaCode; reason: QuotaCodeName; retryAfterMs: number }>;
  flush(): void;
  stats(): LeaseDriverStats;
  close(): Promise<void>;
}

/** The store contract in this process's memory (one process; the reference for other stores). */
export declare class MemoryStore implements LeaseStore {
  constructor(options?: { maxKeys?: number; now?: () => number });
  lease(batch: StoreRequest[]): Promise<StoreGrant[]>;
  release(batch: StoreReturn[]): Promise<void>;
}

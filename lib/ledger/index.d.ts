/**
 * A token bucket in the one vocabulary of a limit: `limit` tokens per `windowMs` refill it, and it
 * holds `burst` (default `limit`) when full. The same words as a named limit's.
 */
export interface BucketOptions {
  /** Only 'token-bucket' (the default): the ledger's buckets are token buckets. */
  algorithm?: 'token-bucket';
  /** Tokens regained per `windowMs` (integer 1 to 2^32-1). */
  limit: number;
  /** The window `limit` refills over (ms, > 0, at most 1e12). */
  windowMs: number;
  /** Tokens the bucket holds when full (integer 1 to 2^32-1, default `limit`). */
  burst?: number;
}

/** Per-key buckets inside a tier: one bucket per key (user, IP, API client), bounded in number. */
export interface PerKeyOptions extends BucketOptions {
  /** Most keys kept for the tier (integer >= 1, default 100000); at the cap idle and full buckets go first. */
  maxKeys?: number;
  /** A bucket untouched this long may be forgotten (ms > 0, default 60000). */
  idleTtlMs?: number;
}

/** A tier: its pool is a token bucket (`limit` per `windowMs` at refill scale 1, `burst` when full). */
export interface TierOptions extends BucketOptions {
  /** Unique, non-empty. */
  name: string;
  /** A protected tier keeps its full refill under load (the gatekeeper never scales it down). */
  protected?: boolean;
  /** Per-key buckets for this tier; `null` opts out of `LedgerOptions.perKey`. */
  perKey?: PerKeyOptions | null;
}

export interface LedgerOptions {
  /** Highest priority first: tier id 0 is the highest. */
  tiers: TierOptions[];
  /** Per-key buckets for every tier that does not set its own. */
  perKey?: PerKeyOptions;
}

/** A tier by name or by numeric id (`ledger.tierId(name)`; the fastest). */
export type TierRef = string | number;

export interface TierSnapshot {
  name: string;
  protected: boolean;
  /** Tokens in the tier pool now. */
  tokens: number;
  /** The pool's budget as configured (a shared ledger attached without options: `{ limit: burst, windowMs }`). */
  limit: number;
  windowMs: number;
  burst: number;
  /** 0..1, set by `setRefillScale`. */
  refillScale: number;
  /** Keyed buckets held now. */
  keys: number;
}

export type LimitedBy = 'none' | 'tier' | 'key';

export interface ConsumeResult {
  allowed: boolean;
  /** Tokens left in the key's bucket (keyed debit) or the tier pool. */
  remaining: number;
  /** That bucket's `burst` (the tokens it holds when full). */
  limit: number;
  /** 0 when allowed; else ms until the refusing bucket could grant the cost (Infinity: never). */
  retryAfterMs: number;
  /** ms until that bucket is full again (Infinity without refill). */
  resetMs: number;
  limitedBy: LimitedBy;
}

/** Indices into the Float64Array written by `consume`. */
export declare const LEDGER_RESULT: Readonly<{
  ALLOWED: 0;
  REMAINING: 1;
  LIMIT: 2;
  RETRY_AFTER_MS: 3;
  RESET_MS: 4;
  /** 0 none, 1 tier, 2 key */
  LIMITED_BY: 5;
  LENGTH: 6;
}>;

/** The property under which a Ledger keeps its native handle. */
export declare const LEDGER_HANDLE: unique symbol;

/** The native handle behind a Ledger (opaque), for native components that share its state. */
export interface LedgerHandle {
  readonly __tiergateLedgerHandle?: never;
}

export declare class Ledger {
  constructor(options: LedgerOptions);
  /** The same native ledger from every worker_thread of the process (created by the first caller). */
  static shared(name: string, options?: LedgerOptions): Ledger;
  /** Decodes a `consume` result array into an object (off the hot path). */
  static readResult(array: Float64Array): ConsumeResult;

  /** Tier names, highest priority first; the index is the tier id. */
  readonly tiers: readonly string[];
  /** The array the last `consume` without `out` wrote: see LEDGER_RESULT. */
  readonly result: Float64Array;

  /**
   * Debits `cost` (default 1) from the tier pool and, with a key on a per-key tier, from the key's
   * bucket: both or neither. A key is ignored for tiers without per-key buckets.
   */
  tryConsume(tier: TierRef, key?: string, cost?: number): boolean;
  /** As `tryConsume`, writing the details into `out` (or `this.result`); no object is allocated. */
  consume(tier: TierRef, key?: string, cost?: number, out?: Float64Array): boolean;
  tierId(name: string): number;
  /** 0 stops the pool's refill, 1 is the configured rate. */
  setRefillScale(tier: TierRef, scale: number): void;
  refillScale(tier: TierRef): number;
  snapshot(): TierSnapshot[];
  /** Refills pools / forgets keys; returns how many buckets were reset. */
  reset(tier?: TierRef, key?: string): number;
  isSameLedger(other: Ledger): boolean;
}

export declare function ledgerHandle(ledger: Ledger): LedgerHandle;

/** Per-key buckets inside a tier: one bucket per key (user, IP, API client), bounded in number. */
export interface PerKeyOptions {
  /** Tokens a key's bucket holds when full (> 0). */
  capacity: number;
  /** Tokens per second a key's bucket regains (>= 0). */
  refillPerSec: number;
  /** Most keys kept for the tier (integer >= 1, default 100000); at the cap idle and full buckets go first. */
  maxKeys?: number;
  /** A bucket untouched this long may be forgotten (ms > 0, default 60000). */
  idleTtlMs?: number;
}

export interface TierOptions {
  /** Unique, non-empty. */
  name: string;
  /** Tokens the tier pool holds when full (> 0). */
  capacity: number;
  /** Tokens per second the pool regains at refill scale 1 (>= 0). */
  refillPerSec: number;
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
  capacity: number;
  refillPerSec: number;
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
  /** Capacity of that bucket. */
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

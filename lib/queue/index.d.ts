import type { IncomingMessage, ServerResponse } from 'node:http';

/** A tier of the concurrency gate: a name, or a spec. Gatekeeper tier fields are accepted and ignored. */
export type QueueTier =
  | string
  | {
      name: string;
      /** Protected tiers keep their full queueTimeoutMs under CoDel. Default false. */
      protected?: boolean;
      /** Waiters this tier may hold (default: the gate's maxQueue). */
      maxQueue?: number;
      /** This tier's queue timeout (default: the gate's queueTimeoutMs). */
      queueTimeoutMs?: number;
      algorithm?: 'token-bucket';
      limit?: number;
      windowMs?: number;
      burst?: number;
      perKey?: unknown;
    };

export interface AdaptiveLimitOptions {
  /** Lowest limit. Default 1. */
  min?: number;
  /** Highest limit. Default 1000. */
  max?: number;
  /** Starting limit. Default min(max, max(min, 10)). */
  initial?: number;
}

export interface CodelOptions {
  /** Allowed wait for unprotected tiers while the queue is standing. Default 5 ms. */
  targetMs?: number;
  /** How long the queue must stay non-empty to count as standing. Default 100 ms. */
  intervalMs?: number;
}

/** Why the gate refused: the same names in the hook, the stats and the metrics' `reason` label. */
export type QueueRejectReason = 'queue-full' | 'displaced' | 'timeout' | 'codel' | 'closing';

export interface ConcurrencyGateOptions {
  /** Requests in flight at once: a positive integer, or 'auto' for an adaptive limit. Required. */
  maxConcurrent: number | 'auto';
  /** Settings of the adaptive limit (only with maxConcurrent: 'auto'). */
  limit?: AdaptiveLimitOptions;
  /** Waiting requests across all tiers. Default 100; 0 disables queueing. */
  maxQueue?: number;
  /** Longest wait in the queue. Default 10000 ms. */
  queueTimeoutMs?: number;
  /** Status answered when a queued request waited too long (4xx/5xx; any but 408 carries Retry-After). Default 408. */
  timeoutStatus?: number;
  /** Jitter range of Retry-After (503s, and timeouts not answered 408), whole seconds. Default { minSec: 1, maxSec: 3 } (as the gatekeeper). */
  retryAfter?: { minSec?: number; maxSec?: number };
  /** Tiers, highest priority first. Default critical (protected), standard, background. */
  tiers?: QueueTier[];
  /** Tier of requests nothing else classifies (an unreadable tier header gives the lowest tier). Default: the lowest. */
  defaultTier?: string;
  /** Header carrying the tier, or false. Default 'x-user-tier'. */
  tierHeader?: string | false;
  /** Honour header tiers above the default (the header is set by an authenticating gateway). Default false. */
  trustTierHeader?: boolean;
  /** Verifies signed tier tokens in the header (the gatekeeper's `tierSecret`): one secret or several (rotation). */
  tierSecret?: string | Buffer | Array<string | Buffer>;
  /** Tier name for a request, or undefined to fall back to the header / default tier. Trusted. */
  classify?: (req: IncomingMessage) => string | undefined | null;
  /** Route rules, first match wins (the gatekeeper's): a string prefix on whole segments, or a RegExp on the path. */
  routes?: Array<{ method?: string | string[]; path: string | RegExp; tier: string }>;
  /** A higher tier displaces the newest waiter of a lower tier when the queue is full. Default true. */
  displace?: boolean;
  /** CoDel-style bounded waiting under a standing queue. Default false. */
  codel?: boolean | CodelOptions;
  /** Serve the newest waiter of a tier first while the queue is standing. Default false. */
  lifo?: boolean;
  /** Called for every rejection the gate answers: info first, as every tiergate hook. */
  onReject?: (info: { reason: QueueRejectReason; status: number; tier: string }, req: IncomingMessage) => void;
}

export interface WaitSummary {
  p50: number;
  p99: number;
  max: number;
}

export interface QueueTierStats {
  queued: number;
  admitted: number;
  queuedTotal: number;
  rejected: number;
  displaced: number;
  /** Waiters refused after the tier's whole queueTimeoutMs (reason 'timeout'). */
  timeout: number;
  /** Waiters refused after the short wait of a standing queue (reason 'codel'). */
  codel: number;
  /** Waiters whose client went away (no answer is sent). */
  abandoned: number;
  /** Waiters answered 503 by close() (reason 'closing'). */
  closing: number;
  /** Wait of admitted requests (0 for immediate admissions), ms. */
  waitMs: WaitSummary;
  /** Longest wait of a request refused for 'timeout' or 'codel' (timer lateness included), ms. */
  timeoutWaitMaxMs: number;
  /** The wait this tier's waiters are allowed right now (CoDel's target under a standing queue), ms. */
  allowedWaitMs: number;
}

export interface ConcurrencyGateStats {
  limit: number;
  adaptive: null | { min: number; max: number; estimate: number; baselineMs: number; lastWindowMs: number; throughput: number; queueing: boolean; updates: number; saturated: boolean };
  inFlight: number;
  queued: number;
  queuedByTier: Record<string, number>;
  maxQueue: number;
  standing: boolean;
  admitted: number;
  admittedImmediately: number;
  admittedFromQueue: number;
  released: number;
  rejected: number;
  displaced: number;
  timeout: number;
  codel: number;
  abandoned: number;
  closing: number;
  lifoDequeues: number;
  peakInFlight: number;
  peakQueued: number;
  tiers: Record<string, QueueTierStats>;
}

export interface QueueRejection {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The guard itself (lib/adapters/index.js contract). */
export interface ConcurrencyGate {
  admit(req: IncomingMessage, res: ServerResponse): null | QueueRejection | Promise<null | QueueRejection>;
  stats(): ConcurrencyGateStats;
  resetStats(): void;
  /** Rejects every queued request (503) and stops the timer. */
  close(): void;
  /** Calls `fn(tier, waitedMs)` for each admitted request (otel()'s wait histogram); returns the function that stops it. */
  observeWaits(fn: (tier: string, waitedMs: number) => void): () => void;
  readonly limit: number;
  readonly inFlight: number;
  readonly queued: number;
}

export interface ConcurrencyGateControls {
  gate: ConcurrencyGate;
  stats(): ConcurrencyGateStats;
  resetStats(): void;
  close(): void;
}

export type ConcurrencyGateMiddleware = ((req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void) & ConcurrencyGateControls;
export type ConcurrencyGateHttpHandler = ((req: IncomingMessage, res: ServerResponse) => void) & ConcurrencyGateControls;
export type ConcurrencyGateKoaMiddleware = ((ctx: import('../gatekeeper').KoaContextLike, next: () => Promise<unknown>) => Promise<unknown>) & ConcurrencyGateControls;

export interface ConcurrencyGateFunction {
  /** Express 4/5 middleware. */
  (options: ConcurrencyGateOptions): ConcurrencyGateMiddleware;
  /** Wraps a node:http handler; handler errors answer 500 and release the slot. */
  http(options: ConcurrencyGateOptions, handler: (req: IncomingMessage, res: ServerResponse) => unknown): ConcurrencyGateHttpHandler;
  /** Koa 2/3 middleware: `app.use(concurrencyGate.koa(options))`. */
  koa(options: ConcurrencyGateOptions): ConcurrencyGateKoaMiddleware;
}

export declare const concurrencyGate: ConcurrencyGateFunction;
/** Fastify 5 plugin; decorates the instance with `concurrencyGate` (the guard). */
export declare function concurrencyGatePlugin(fastify: any, options: ConcurrencyGateOptions, done: (err?: Error) => void): void;
export declare function createConcurrencyGate(options: ConcurrencyGateOptions): ConcurrencyGate;

export declare class AdaptiveLimit {
  /**
   * @param loopUtilization the event loop's utilization (0..1) since its previous call, read every
   * 20 ms (on samples); at 0.9 or more the limit is halved (default: unknown, never saturated).
   */
  constructor(options?: AdaptiveLimitOptions, prefix?: string, loopUtilization?: () => number);
  readonly min: number;
  readonly max: number;
  readonly limit: number;
  /** Times the limit changed. */
  readonly updates: number;
  /** Whether the event loop was saturated (utilization >= 0.9) at the last check. */
  readonly saturated: boolean;
  /** Records one latency sample; true when the limit changed. */
  sample(rttMs: number, inFlight: number, nowMs: number): boolean;
  /** The estimator's figures (the last interval's median latency as `typicalMs`). */
  stats(): { limit: number; estimate: number; baselineMs: number; typicalMs: number; throughput: number; queueing: boolean; intervals: number; probes: number };
}

// `fastify.register(concurrencyGatePlugin, options)` decorates the instance with the guard (harmless
// without Fastify installed).
declare module 'fastify' {
  interface FastifyInstance {
    concurrencyGate: ConcurrencyGate;
  }
  /** A route's own tier in the queue, or `false` to skip the gate (a health route). */
  interface FastifyContextConfig {
    concurrencyGate?: false | { tier: string };
  }
}

/// <reference types="node" />
import type { Defense, DefenseOptions, DefenseVerdict, Limits } from '../defense';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Ledger, PerKeyOptions, TierOptions } from '../ledger';
import type { Cluster } from '../cluster';

/** A route rule: the first rule that matches the request chooses its tier. */
export interface RouteRule {
  /** A method or methods (any when omitted). */
  method?: string | string[];
  /** A path prefix matched on whole segments ('/checkout' matches '/checkout/x', not '/checkouts'),
   *  compared as the framework routes (case-insensitively but on Fastify, whose router is
   *  case-sensitive by default), or a RegExp tested against the path the framework routes, without
   *  its query string (use the i flag to match as Express routes). See docs/gatekeeper.md. */
  path: string | RegExp;
  /** The tier's name. */
  tier: string;
}

/** The shed controller: how loop health turns into shedding. */
export interface ShedOptions {
  /** Lag (ms) at which the lowest tier starts to be throttled. Default 20. */
  targetLagMs?: number;
  /** Lag (ms) at which every unprotected tier is shed. Default 60. */
  criticalLagMs?: number;
  /** Thresholds are offsets above the measured idle lag baseline. Default false. */
  relative?: boolean;
  /** The lag must fall this far (ms) below the level that set the shedding before it eases (and this
   *  far below targetLagMs before the integral part drains). Default 10. */
  hysteresisMs?: number;
  /** Minimum time (ms) shedding is held after it was last justified. Default 1000. */
  holdMs?: number;
  /** Fastest recovery from full shedding to none (ms). Default 2000. */
  recoveryMs?: number;
  /** Integral part: while the lag stays above the target, shedding deepens — a lag held at
   *  criticalLagMs adds full pressure in this time (ms), a lag halfway there in twice that; it drains
   *  at the recovery rate once the lag is back below the target. 0 turns it off. Default 1000. */
  integralMs?: number;
  /** Spike filter: while nothing is shed, a lag excursion above the target starts shedding only once
   *  it has lasted this long (ms) and the lag is still rising past its highest reading so far — a loop
   *  falling behind passes, one slow tick or its backlog draining away does not. 0: the first reading
   *  above the target sheds. Heap and stall are not filtered. Default 30. */
  confirmMs?: number;
  /** Heap used / limit above which the lowest tiers are shed; false ignores the heap. Default 0.9. */
  heapRatio?: number | false;
  /** A loop that has not ticked for this long (ms) is stalled: every unprotected tier is shed at once.
   *  false disables the watchdog. Default 500. */
  stallMs?: number | false;
  /** Which lag figure drives the controller (with the in-band estimate of a loop that is late right now). Default 'ewma'. */
  lagSignal?: 'latest' | 'ewma' | 'p99' | 'max';
  /** Sampler tick interval (whole ms). Default 10. */
  resolutionMs?: number;
  /** Sampler window for p99 (whole ms). Default 1000. */
  windowMs?: number;
  /** Sampler EWMA time constant (whole ms). Default 50. */
  ewmaMs?: number;
  /** The controller moves at most this often (ms), on requests. Default 1. */
  updateIntervalMs?: number;
  /** Relative mode: time constant (ms) of the idle-baseline average. Default 10000. */
  baselineTauMs?: number;
  /** Relative mode: the highest baseline accepted (ms). Default targetLagMs. */
  maxBaselineMs?: number;
  /** Relative mode: only samples with ELU at most this teach the baseline. Default 0.5. */
  idleElu?: number;
  /** Turn budget (ms): during a shed episode, unprotected requests wait in the turn queue and each
   *  event-loop turn runs about this much of them, highest tier first, so one turn cannot run a burst of
   *  admitted work in front of everyone behind it (a protected request runs as soon as it is read).
   *  0 turns the budget and the queue off. Default 2. */
  turnBudgetMs?: number;
  /** The turn queue: a waiter that has waited longer than this (ms) is shed (503, cause 'queue')
   *  instead of run; set it below your clients' timeout. 1..60000, default 500. */
  queueMaxWaitMs?: number;
  /** The turn queue: waiters across tiers; beyond it a newcomer takes the place of the newest waiter
   *  of a lower tier, or is shed. Integer 1..1000000, default 100. */
  queueMaxLength?: number;
}

/** 'banned': a ban shared by cluster mode (`options.cluster`). */
export type Verdict = 'admit' | 'shed' | 'tier-full' | 'rate-limited' | 'banned';
export type TierSource =
  | 'classify' | 'route' | 'default' | 'header' | 'signed'
  | 'untrusted' | 'bad-signature' | 'expired' | 'invalid' | 'truncated';

/** What hooks, `respond` and the 'tiergate:decision' diagnostics channel receive. */
export interface DecisionInfo {
  verdict: Verdict | DefenseVerdict;
  /** 200 for an admit, else the status of the rejection. */
  status: number;
  /** On a defense refusal, the tier as far as it was known (the default tier if the header was not read). */
  tier: string;
  tierSource: TierSource;
  /** The refusing named limit (verdict 'rate-limited' from a named limit). */
  limitName?: string | null;
  banned?: { byCidr: boolean; permanent: boolean } | null;
  /** The per-key identity used (user id, or the client IP before normalisation), if any. */
  key: string | undefined;
  remaining: number;
  limit: number;
  retryAfterMs: number;
  resetMs: number;
  /** The tier's refill scale now (0..1). */
  refillScale: number;
  /** The controller's pressure (0..1). */
  pressure: number;
  /** The lag the controller acted on (ms). */
  lagMs: number;
  /** 'cluster': refused by cluster mode (then `cluster` says by what); 'queue': shed by the turn queue (then `queueWaitMs`); 'concurrency': shed waiting for a slot of the learned concurrency limit. */
  cause: 'none' | 'lag' | 'heap' | 'stall' | 'cluster' | 'queue' | 'concurrency';
  /** A turn-queue shed: how long the request waited (ms; 0: the queue was full when it came). */
  queueWaitMs?: number;
  /** cause 'concurrency': the limit when it was shed, and whether the wait queue was full. */
  concurrencyLimit?: number;
  queueFull?: boolean;
  /** Shadow mode served this request: the shed it reports was not enforced. */
  shadow?: boolean;
  /** A cluster-mode refusal: the ban cache, the tier's cluster-wide per-key limit, or its budget; `reason` the engine's (EXHAUSTED, SHARE, STORE_DOWN, FULL, BANNED). */
  cluster?: { limit: 'ban' | 'key' | 'budget'; reason: string };
}

export interface Rejection {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What `respond` may return: a string or Uint8Array body is sent as is, any other object as JSON. */
export interface RespondResult {
  /** 100..599; another status is warned about and the default rejection sent. */
  status: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array | object | null;
}

export interface GatekeeperOptions extends DefenseOptions {
  /** Tiers, highest priority first. Default: critical (protected), standard, background, with no rate cap (10^9/s each). */
  tiers?: TierOptions[];
  /** Use this ledger (e.g. `Ledger.shared(...)`) instead of building one from `tiers`. */
  ledger?: Ledger;
  /**
   * Per-key quota for every tier that does not set its own: a token bucket per client key, named
   * after its tier. It behaves as a named limit does: it sets `req.rateLimit` on admitted requests
   * and answers with the same rate-limit fields (`"<tier>";q=<limit>;w=<windowMs in s>`).
   */
  perKey?: PerKeyOptions;
  /** Header carrying the tier (a plain name or a signed token), or false. Default 'x-user-tier'. */
  tierHeader?: string | false;
  /** Honour plain tier names above the default tier (only behind a gateway that sets the header). Default false. */
  trustTierHeader?: boolean;
  /** Secret(s) for signed tier tokens (>= 16 bytes; the first mints, all verify). */
  tierSecret?: string | Buffer | Array<string | Buffer>;
  routes?: RouteRule[];
  /**
   * Returns a tier name, or undefined to fall through to the routes, the header, the default; or a
   * promise of one (a session lookup): the decision goes on when it settles (a rejection falls through).
   */
  classify?: (req: IncomingMessage) => string | undefined | null | PromiseLike<string | undefined | null>;
  /** Tier for requests without a usable tier. Default: 'standard' with the default tiers (health probes 'critical'), else the lowest tier. */
  defaultTier?: string;
  /** The per-key identity: 'ip' (default), a header, or a function (or its promise); falls back to the client IP. */
  key?: 'ip' | { header: string } | ((req: IncomingMessage) => string | number | undefined | null | PromiseLike<string | number | undefined | null>);
  /** false (default): the socket's peer; true: the left-most X-Forwarded-For; n: n trusted proxy hops. */
  trustProxy?: boolean | number;
  /** IPv6 clients are keyed by this prefix. Default 56. */
  ipv6Prefix?: number;
  /** IPv4 clients are keyed by this prefix. Default 32. */
  ipv4Prefix?: number;
  /** Tokens each request costs. Default 1; at most every tier's `burst` and per-key `burst`. */
  cost?: number;
  /** The shed controller, or false for no load shedding (quotas only). */
  shed?: ShedOptions | false;
  /** Rate-limit fields on 429s (named limits and per-key quotas alike). Default 'draft'. */
  rateLimitHeaders?: 'draft' | 'draft-6' | 'draft-7' | 'draft-8' | 'legacy' | 'both' | false;
  /** Also send the rate-limit fields on admitted responses that have a per-key quota. Default false. */
  rateLimitHeadersOnSuccess?: boolean;
  /** Retry-After of a 503 is drawn uniformly from [minSec, maxSec]. Default 1..3. */
  retryAfter?: { minSec?: number; maxSec?: number };
  /** Replaces a rejection: return { status, headers?, body? }, or undefined to keep the default. */
  respond?: (info: DecisionInfo, req: IncomingMessage, rejection: Rejection) => RespondResult | undefined | null;
  onDecision?: (info: DecisionInfo, req: IncomingMessage) => void;
  /** Overload sheds: the loop's health refused the request (verdict 'shed'). */
  onShed?: (info: DecisionInfo, req: IncomingMessage) => void;
  /** Quota refusals on a healthy loop too: the key's quota (429) or the tier's budget ('tier-full', 503). */
  onReject?: (info: DecisionInfo, req: IncomingMessage) => void;
  /** Cluster mode (`tiergate.cluster({ redis, tiers })`): bans, per-key limits and tier budgets that hold across processes. See docs/cluster.md. */
  cluster?: Cluster;
  /** The learned concurrency limit (on by default): overload of a pool or upstream the loop cannot see. false: off. */
  concurrency?: ConcurrencyOptions | false;
  /** The status of a shed and of a full tier: 503 (default) or 429. */
  shedStatus?: 503 | 429;
  /** Shadow mode: overload decisions (the shed controller's, the learned limit's) made, counted and reported, not enforced; `{ enforcePercent }` enforces that share (0..100). Default false. */
  shadow?: boolean | ShadowOptions;
}

export interface ShadowOptions {
  /** The share of overload decisions enforced, spread evenly (default 0). */
  enforcePercent?: number;
}

export interface ConcurrencyOptions {
  /** Requests waiting downstream over the downstream's size (0: none wait), e.g. `() => pool.waitingCount / pool.options.max`; read every 100 ms. */
  signals?: (() => number) | Array<() => number>;
  /** The longest a request waits for a slot (ms, default 500). */
  maxWaitMs?: number;
  /** Requests waiting for a slot at most (default 1000). */
  maxQueue?: number;
  minLimit?: number;
  maxLimit?: number;
  initialLimit?: number;
}

export interface ConcurrencyStats {
  enabled: boolean;
  /** The gatekeeper is in shadow mode (`shadowWaits`: requests served that would have waited). */
  shadow: boolean;
  limit: number;
  inFlight: number;
  waits: number;
  shadowWaits: number;
  baselineMs: number;
  typicalMs: number;
  throughput: number;
  queueing: boolean;
  signal: number;
  pressure: number;
  longLived: number;
  probes: number;
  waiting: number;
  waited: number;
  waitShed: number;
  fullShed: number;
  maxWaitMs: number;
}

export interface TierStats {
  protected: boolean;
  admitted: number;
  shed: number;
  /** Of `shed`: by the turn budget. */
  turnShed: number;
  /** The turn queue (absent with shed off or turnBudgetMs 0): waiting now, waited in all, of `shed`
   *  those by the queue, the longest wait of one that then ran (ms). A request the queue holds is
   *  counted in `admitted` once it runs. */
  queued?: number;
  deferred?: number;
  queueShed?: number;
  queueWaitMaxMs?: number;
  /** 503s because the tier's own pool was empty while the loop was healthy. */
  tierFull: number;
  /** 429s from per-key quotas. */
  rateLimited: number;
  refillScale: number;
  /** Shadow mode: requests served that the shed controller would have shed. */
  shadowShed: number;
}

export interface GatekeeperStats {
  tiers: Record<string, TierStats>;
  lagMs: number;
  ewmaLagMs: number;
  p99LagMs: number;
  controllerLagMs: number;
  /** Loop utilisation of the last ~100 ms the controller read (NaN: not measured). */
  busy: number;
  /** The pressure's parts; `pressure` is the largest. */
  pressureParts: { lag: number; integral: number; turn: number };
  elu: number;
  heapUsed: number;
  heapLimit: number;
  heapRatio: number;
  stalled: boolean;
  pressure: number;
  cause: 'none' | 'lag' | 'heap' | 'stall';
  episodes: number;
  baselineMs: number;
  targetLagMs: number;
  criticalLagMs: number;
  injected: boolean;
  /** The turn queue; null with shed off or turnBudgetMs 0. */
  queue: TurnQueueStats | null;
  /** The learned concurrency limit; null with options.concurrency false. */
  concurrency: ConcurrencyStats | null;
  /** Shadow mode, or null. */
  shadow: { enforcePercent: number } | null;
}

export interface TurnQueueStats {
  /** Requests of unprotected tiers wait for a later turn now (an episode, or its hold after). */
  active: boolean;
  queued: number;
  peak: number;
  /** Times the queue started. */
  episodes: number;
  deferred: number;
  shed: number;
  /** Waiters whose client went away. */
  abandoned: number;
  /** A waiter older than this is shed (ms): `shed.queueMaxWaitMs`. */
  maxWaitMs: number;
  /** Waiters across tiers at most: `shed.queueMaxLength`. */
  maxQueue: number;
}

/** A health reading for the test seam; ewma and p99 default to lagMs. */
export interface InjectedHealth {
  lagMs?: number;
  ewmaLagMs?: number;
  p99LagMs?: number;
  elu?: number;
  heapUsed?: number;
  heapLimit?: number;
  stalled?: boolean;
}

export declare class Gatekeeper {
  constructor(options?: GatekeeperOptions);
  readonly tiers: readonly string[];
  readonly ledger: Ledger;
  /** The abuse defense, or null without any of its options. */
  readonly defense: Defense | null;
  /** One key of one named limit (get, reset, refund, charge, overrides); null without the defense. */
  readonly limits: Limits | null;
  /** The cluster mode it was given (options.cluster), or null. */
  readonly cluster: Cluster | null;
  /** The guard contract: null to proceed, or the rejection to send (a promise of either while a shaper
   *  delays; a thenable of either while the turn queue holds the request). */
  admit(req: IncomingMessage, res: ServerResponse): Rejection | null | PromiseLike<Rejection | null>;
  /** 0..1: the larger of the shed controller's pressure and the concurrency limit's (also `req.tiergate.pressure`). */
  pressure(): number;
  stats(): GatekeeperStats;
  resetStats(): void;
  injectHealth(health: InjectedHealth): void;
  useLiveHealth(): void;
  updateController(): boolean;
}

export interface GateControls {
  readonly gatekeeper: Gatekeeper;
  readonly defense: Defense | null;
  /** One key of one named limit (get, reset, refund, charge, overrides); null without the defense. */
  readonly limits: Limits | null;
  readonly cluster: Cluster | null;
  readonly ledger: Ledger;
  readonly tiers: readonly string[];
  stats(): GatekeeperStats;
  resetStats(): void;
  injectHealth(health: InjectedHealth): void;
  useLiveHealth(): void;
  updateController(): boolean;
}

export type GatekeeperMiddleware = ((req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void) & GateControls;
export type GatekeeperHttpHandler = ((req: IncomingMessage, res: ServerResponse) => void) & GateControls;

/** The part of a Koa 2/3 context the Koa middleware uses (no dependency on Koa's own types). */
export interface KoaContextLike {
  req: IncomingMessage;
  res: ServerResponse;
  originalUrl: string;
  status: number;
  body: unknown;
  set(fields: { [name: string]: string }): void;
}
export type GatekeeperKoaMiddleware = ((ctx: KoaContextLike, next: () => Promise<unknown>) => Promise<unknown>) & GateControls;

export interface GatekeeperFactory {
  /** Express 4/5 middleware. */
  (options?: GatekeeperOptions): GatekeeperMiddleware;
  /** Wraps a node:http request handler. */
  http(options: GatekeeperOptions | undefined, handler: (req: IncomingMessage, res: ServerResponse) => void): GatekeeperHttpHandler;
  /** Koa 2/3 middleware: `app.use(gatekeeper.koa(options))`. */
  koa(options?: GatekeeperOptions): GatekeeperKoaMiddleware;
}

export declare const gatekeeper: GatekeeperFactory;

/** Fastify 5 plugin: `fastify.register(tiergatePlugin, options)`; the gate is `fastify.tiergate`. */
export declare function tiergatePlugin(fastify: any, options: GatekeeperOptions, done: (err?: Error) => void): void;

/** Mints a signed tier token `t1.<tier>.<expires>.<mac>` (HMAC-SHA256). Give exactly one of ttlSec / expiresAt (Unix seconds). */
export declare function mintTierToken(secret: string | Buffer, tier: string, when: { ttlSec: number } | { expiresAt: number }): string;

/** The diagnostics_channel every decision is published on: 'tiergate:decision'. */
export declare const DECISION_CHANNEL: 'tiergate:decision';

// `fastify.register(tiergatePlugin, options)` decorates the instance with the gate. Augmenting a module
// that is not installed is no error, so Express-only projects are unaffected.
declare module 'fastify' {
  interface FastifyInstance {
    tiergate: Gatekeeper;
  }
  /** A route's own settings: `{ config: { tiergate: { tier: 'critical' } } }`, or `false` to skip the gatekeeper. */
  interface FastifyContextConfig {
    tiergate?: false | { tier: string };
  }
}

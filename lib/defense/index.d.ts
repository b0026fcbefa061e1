/// <reference types="node" />
import type { IncomingMessage } from 'node:http';

/** Where a named limit applies: a path (string prefix on whole segments, or RegExp), or { method?, path }. */
export type LimitRoute = string | RegExp | { method?: string | string[]; path: string | RegExp };

/** A refusal by the defense layers (`DecisionInfo.verdict`); 'rate-limited' is a named limit's too. */
export type DefenseVerdict = 'deny-listed' | 'banned' | 'rate-limited' | 'challenged' | 'shaper-full';

export type LimitAlgorithm = 'fixed-window' | 'sliding-window' | 'sliding-counter' | 'token-bucket' | 'gcra';

/** What a limit counts by. A header or function that gives nothing usable counts by the address. */
export type LimitBy =
  | 'ip'
  | { prefix: { v4?: number; v6?: number } }
  | { header: string }
  /** A function of the request, or of a promise (a token lookup): the limit decides when it settles. */
  | ((req: IncomingMessage) => string | number | undefined | null | PromiseLike<string | number | undefined | null>);

export interface LimitOptions {
  /** Appears in the RateLimit fields and problem bodies: 1-64 printable ASCII, no `"` or `\`. */
  name: string;
  /** Default 'fixed-window'. */
  algorithm?: LimitAlgorithm;
  /**
   * Units per window (a whole number >= 1), or a function of the request (a plan's limit; not with
   * 'sliding-window', and it sets the burst too). See docs/defense.md "Live limits".
   */
  limit: number | ((req: IncomingMessage) => number);
  windowMs: number;
  /** Token bucket and GCRA: units admissible at once (default `limit`). */
  burst?: number;
  /** GCRA: 0 (default) meters; more delays a request up to this long (a shaper). */
  maxDelayMs?: number;
  /** Keys tracked at most. Default 100,000. */
  maxKeys?: number;
  /** Default 'ip'. */
  by?: LimitBy;
  routes?: LimitRoute[];
  methods?: string | string[];
  /** Tier names: the limit applies to these tiers only. */
  tiers?: string | string[];
  /** Units a request takes (whole number >= 0), or a function of the request. Default 1. */
  cost?: number | ((req: IncomingMessage) => number);
  /** A shaper's waiting requests at most. Default 1000. */
  maxQueued?: number;
  cluster?: false;
  /** Give a successful request's units back when its response closes (express-rate-limit's name). */
  skipSuccessfulRequests?: boolean;
  /** Give a failed request's units back (a response closed before it finished is a failure). */
  skipFailedRequests?: boolean;
  /** What a success is. Default: `res.statusCode < 400`. */
  requestWasSuccessful?: (req: IncomingMessage, res: import('node:http').ServerResponse) => boolean;
}

/**
 * A limit funded from cluster mode's leases: the gatekeeper's `cluster` has a limit of this name,
 * which gives the algorithm and numbers (token bucket, fixed or sliding window). See docs/cluster.md.
 */
export interface ClusterLimitOptions {
  name: string;
  cluster: true;
  /** 'ip' (the gatekeeper's prefixes), a header or a function; not a prefix of its own. */
  by?: 'ip' | { header: string } | ((req: IncomingMessage) => string | number | undefined | null);
  routes?: LimitRoute[];
  methods?: string | string[];
  tiers?: string | string[];
  /** Whole number >= 1 (or a function of the request; 0 skips the limit for that request). Default 1. */
  cost?: number | ((req: IncomingMessage) => number);
}

export interface StrikeRule {
  name: string;
  on: 'rate-limited' | 'probe';
  threshold: number;
  windowMs: number;
  banMs: number;
}

export interface BanOptions {
  /** Default: 3 refusals in a minute → 5 minutes; 20 probes in a minute → 30 minutes. false: none. */
  rules?: StrikeRule[] | false;
  escalation?: {
    /** Default 2. */
    factor?: number;
    /** Default a day. */
    maxBanMs?: number;
    /** Default a day. */
    memoryMs?: number;
    /** Default 5; false: never permanent. */
    permanentAfter?: number | false;
    /** Default 0.1. */
    jitter?: number;
  };
  /** Default 100,000. */
  maxBans?: number;
  /** Default 100,000. */
  maxTracked?: number;
  /** Default [400, 404, 405]. */
  probeStatuses?: number[];
}

export interface ChallengeInfo {
  verdict: 'challenged';
  status: number;
  key: string;
  /** Why a presented pass was refused, if one was. */
  pass?: 'malformed' | 'wrong-key' | 'bad-signature' | 'expired';
}

export interface ChallengeOptions {
  /** >= 16 bytes; an array rotates (the first mints, all verify). */
  secret: string | Buffer | Array<string | Buffer>;
  /** Live strikes at which a client is challenged. Default 2. */
  afterStrikes?: number;
  /** A pass's lifetime. Default 3600. */
  ttlSec?: number;
  /** Default 'x-tiergate-pass'; false: not read. */
  header?: string | false;
  /** Default 'tiergate_pass'; false: not read. */
  cookie?: string | false;
  respond?: (info: ChallengeInfo, req: IncomingMessage) => { status: number; headers?: Record<string, string>; body?: string | Uint8Array | object | null } | undefined;
}

export interface Ban {
  /** The banned client key (an address; IPv6 as its prefix) or CIDR prefix. */
  target: string;
  cidr: boolean;
  reason: string;
  source: 'rule' | 'operator';
  /** Which ban of the client this is within the escalation's memory (0 for an operator's). */
  offense: number;
  /** Unix ms. */
  since: number;
  /** Unix ms; null: permanent. */
  until: number | null;
}

export interface BanEvent {
  kind: 'added' | 'lifted' | 'expired' | 'evicted' | 'refused';
  ban: Ban;
}

export interface DefenseOptions {
  limits?: Array<LimitOptions | ClusterLimitOptions>;
  allow?: string[];
  deny?: string[];
  bans?: BanOptions;
  challenge?: ChallengeOptions;
  /** True: no list, ban, challenge or limit applies to this request. */
  skip?: (req: IncomingMessage) => boolean;
  onBan?: (event: BanEvent) => void;
  /** Allow-listed and skipped requests also bypass the tier pool and overload shedding. Default false. */
  exemptSkipsShedding?: boolean;
  /**
   * The fair-share backstop: when the tier pool (the global limit) runs below its reserve, the
   * heaviest clients are refused first (503, as the pool answers). true: the defaults. Default off.
   */
  fairShare?: boolean | FairShareOptions;
}

export interface FairShareOptions {
  /** The share of the pool's budget below which clients are ranked, 0 < reserve <= 1. Default 0.5. */
  reserve?: number;
  /** The window usage is counted over. Default 1000. */
  windowMs?: number;
  /** Fair shares admitted at the top of the reserve (falling to 0 at an empty pool). Default 4. */
  maxShare?: number;
  /** Prefix lengths of a subnet counted as one client, or false. Default { v4: 24, v6: 48 }. */
  subnet?: { v4: number; v6: number } | false;
  /** Cells per row of each usage sketch (a power of two, 16..1048576). Default 4096. */
  slots?: number;
  /** The loop lag (ms) above which the pool counts as short, whatever it holds; 0: the pool's level only. Default 50. */
  lagMs?: number;
}

export interface Bans {
  list(): Ban[];
  get(target: string): Ban | null;
  /** Without durationMs (or null): permanent, until lifted. The same pair as cluster mode's `bans`. */
  ban(target: string, options?: { durationMs?: number | null; reason?: string }): Ban | null;
  /** True if there was a ban to lift. */
  lift(target: string): boolean;
  export(): Ban[];
  import(records: Ban[]): { applied: number; skipped: number; refused: number };
}

export interface DefenseStats {
  bans: number;
  tracked: number;
  added: number;
  lifted: number;
  expired: number;
  evicted: number;
  refused: number;
  /** Per limit: keys held, its bound, the requests it refused (429), and operators' overrides in force. */
  limits: Array<{ name: string; keys: number; maxKeys: number; refused: number; overrides: number }>;
  /** Operators' overrides (count, cap) and per-request limits held (a limit given as a function). */
  overrides: { count: number; max: number; perRequest: number; maxPerRequest: number; cluster?: { count: number | null; max: number } };
  /** Requests refused by the deny list, by a ban, answered with a challenge, refused by a full shaper. */
  refusals: { denyListed: number; banned: number; challenged: number; shaperFull: number };
  /** Per cluster limit (`cluster: true`): the requests the cluster refused (429). */
  clusterLimits: Array<{ name: string; refused: number; overrides: number | null }>;
  shaperWaiting: number;
  /** Requests the fair-share backstop refused (0 when it is off). */
  fairShareRefused: number;
}

/** One key of one named limit as it stands (`gate.limits.get`). */
export interface LimitKeyState {
  name: string;
  key: string;
  /** The key's limit: an operator's override, its last request's (a function limit), else the configured one. */
  limit: number;
  remaining: number;
  /** Milliseconds until one more unit comes back (0: full). */
  resetMs: number;
  /** An operator's override is in force. */
  overridden: boolean;
}

/**
 * `gate.limits`: one key of one local named limit. `key` is what the limit counts by: the client
 * address (as text) for `by: 'ip'` or a prefix, else the header's value or the function's result.
 * For a cluster limit's name (`cluster: true`), get, reset, refund, override, clearOverride act in the
 * cluster's store and return Promises as `ClusterLimits` (tiergate/cluster) types them, and overrides()
 * returns a Promise when the gatekeeper has cluster limits; charge() is refused.
 */
export interface Limits {
  get(name: string, key: string): LimitKeyState;
  /** Forgets what the key has counted (an override stays). */
  reset(name: string, key: string): boolean;
  /** Gives `units` (default 1) back. */
  refund(name: string, key: string, units?: number): boolean;
  /** Counts a weight known after the fact (an LLM call's tokens), up to what the key has left. */
  charge(req: IncomingMessage, name: string, units: number): void;
  /** The key's limit from now on; at most 10,000 overrides (ERR_TIERGATE_OVERRIDES_FULL past them). */
  override(name: string, key: string, options: { limit: number }): void;
  clearOverride(name: string, key: string): boolean;
  overrides(): Array<{ name: string; key: string; limit: number }>;
}

/** `gate.defense`: the operator's side of the abuse defense. */
export interface Defense {
  readonly bans: Bans;
  readonly limits: Limits;
  readonly policies: ReadonlyArray<{ name: string; quota: number; windowMs: number }>;
  readonly challenge: { header: string | null; cookie: string | null; ttlSec: number; afterStrikes: number } | null;
  lists(): { allow: string[]; deny: string[] };
  setLists(lists: { allow?: string[]; deny?: string[] }): void;
  clientKey(reqOrIp: IncomingMessage | string): string;
  mintPass(reqOrIp: IncomingMessage | string, options?: { ttlSec?: number }): string;
  report(reqOrIp: IncomingMessage | string, kind?: 'probe' | 'rate-limited'): void;
  /** Counts requests node's parser refuses as probes (a 'clientError' listener); returns its remover. */
  watchServer(server: import('node:http').Server): () => void;
  stats(): DefenseStats;
}

/** `req.rateLimit`: the tightest limit that applied (a named limit, or the tier's per-key quota). */
export interface RateLimitInfo {
  name: string;
  limit: number;
  remaining: number;
  used: number;
  resetMs: number;
  readonly resetTime: Date | null;
}

/** The diagnostics_channel every ban event is published on: 'tiergate:ban'. */
export declare const BAN_CHANNEL: 'tiergate:ban';

declare module 'node:http' {
  interface IncomingMessage {
    /** Set by the gatekeeper when a named limit applied. */
    rateLimit?: RateLimitInfo;
  }
}

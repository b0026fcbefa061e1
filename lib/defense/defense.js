'use strict';
// The abuse defense's per-request check and its operator API (gate.defense), in the order of
// DESIGN.md: allow list / skip → deny list (403) → bans (403) → the challenge step-up (the app's
// challenge) → every named limit that applies, all or nothing (429) → on to the tier pool and the
// shed controller (lib/gatekeeper).
//
// Per request: which limits apply, their keys and costs (./limit-scope.js); then one raw native call
// (`defendAndDecide`, src/node/defense.rs) does the lists, the ban lookup, the challenge, the limits
// and the strikes, and the gate's decision when the defense lets the request on. Responses are
// watched at 'finish' for probe statuses (404/400/405 by default) when a probe rule exists.
const native = require('../native');
const { isGone, GONE } = require('../adapters');
const { settleAll } = require('./keys');
const { LimitScope } = require('./limit-scope');
const { LimitHeaders } = require('../http/rate-limit-headers');
const { DefenseResponder } = require('./respond');
const { Shaper } = require('./shaper');
const { Bans, BanEvents, listsArg, call } = require('./bans');
const { Outcome } = require('./outcome');
const { LocalDebit } = require('./local-debit');
const { LimitsAdmin } = require('./admin');
const { performance } = require('node:perf_hooks');
const { clientIp } = require('../http/client');
const { CODES, codedError } = require('../errors');
const { finite, isObject, typeName } = require('../options');
const { RateLimitInfo } = require('../http/rate-limit-info');
const { passOf, challengeResponse } = require('./challenge');
const { GATE_ARGS, callDefend, callDefendAndDecide } = require('./native-call');
const { watchResponse, watchServer } = require('./probes');

const {
  result: R, verdictNames: VERDICT_NAMES, verdictStatus: VERDICT_STATUS, passErrors: PASS_ERRORS, flags: FLAGS, args: ARGS,
} = native.defenseConstants();
const V = Object.freeze(Object.fromEntries(VERDICT_NAMES.map((n, i) => [n.toUpperCase().replace(/-/g, '_'), i])));

/** On a request a shaper delays: its cluster limits' keys and costs, as they were at check(). */
const CLUSTER_STEP = Symbol('tiergate.defense.clusterStep');

/** check()'s answer for an allow-listed or skipped request when `exemptSkipsShedding` is set: serve it. */
const EXEMPT = Object.freeze({ exempt: true });

class Defense {
  #handle;
  #defend;
  #both = null;
  #r;
  #limits;
  #args;
  #costs;
  #responder;
  #headers;
  #challenge;
  #skip;
  #scope;
  #events;
  #shaper;
  #trustProxy;
  #warn;
  /** The gate's verdict from the last combined check(), or -1 when the gate did not decide. */
  gateVerdict = -1;
  // Requests refused, counted on the refusal path only (for metrics and the dashboard): nothing per admit.
  #refused = { denyListed: 0, banned: 0, challenged: 0, shaperFull: 0 };
  #limitRefused;
  #clusterLimits;
  #clusterRefused;
  #outcome;
  // Some limit counts by outcome / is a function of the request: check() does their part.
  #watching;
  #perRequest;
  /**
   * The cluster step's part of the request check() passed (lib/cluster `gate` spends it after the
   * gate admits): per cluster limit its engine id, and this request's key (undefined: it does not
   * apply) and cost; `any`: some applies; `local`: what the local limits counted (./local-debit.js),
   * given back if the cluster refuses. Filled in place per request; null without a cluster.
   */
  clusterStep = null;

  /**
   * `cfg`: compileDefense's result; `ctx`: { routing, headers (rateLimitHeaders), headersOnSuccess,
   * trustProxy, warn(name, err) }.
   */
  constructor(cfg, ctx) {
    const o = cfg;
    const c = o.challenge;
    try {
      this.#handle = new native.DefenseHandle({
        limits: o.limits.map((l) => l.native),
        bans: o.bans.native,
        allow: o.allow,
        deny: o.deny,
        challengeSecrets: c === null ? undefined : c.secrets,
        challengeAfter: c === null ? undefined : c.afterStrikes,
        ipv4Prefix: o.ipPrefixes.v4,
        ipv6Prefix: o.ipPrefixes.v6,
        fairShare: o.fairShare ?? undefined,
      });
    } catch (err) {
      if (err && err.code === 'InvalidArg') throw new RangeError(`gatekeeper: options.${err.message}`, { cause: err });
      throw err;
    }
    const bound = {};
    this.#handle.bind(bound);
    this.#defend = bound.defend;
    this.#r = bound.result;
    this.#limits = o.limits;
    this.#limitRefused = new Array(o.limits.length).fill(0);
    this.#clusterLimits = o.clusterLimits;
    this.#clusterRefused = new Array(o.clusterLimits.length).fill(0);
    // [sel, header, key] for the gate (the combined call), then defend's own arguments.
    this.#args = new Array(GATE_ARGS + ARGS + o.limits.length).fill(undefined);
    this.#costs = o.limits.some((l) => l.costFn !== null || l.cost !== 1) ? new Float64Array(Math.max(1, o.limits.length)) : null;
    const policies = this.#handle.policies();
    this.policies = policies;
    this.#responder = new DefenseResponder([...o.limits, ...o.clusterLimits].map((l) => l.name));
    this.#headers = new LimitHeaders(ctx.headers, policies);
    this.headersOnSuccess = ctx.headersOnSuccess;
    this.#challenge = c;
    this.#skip = o.skip;
    this.#scope = new LimitScope(ctx.routing, ctx.warn);
    this.#trustProxy = ctx.trustProxy;
    this.#warn = ctx.warn;
    this.probeStatuses = o.bans.probeStatuses;
    this.exemptSkipsShedding = o.exemptSkipsShedding;
    this.#events = new BanEvents(this.#handle, o.onBan, ctx.warn);
    const shapers = o.limits.filter((l) => l.shaper);
    this.#shaper = shapers.length ? new Shaper(shapers.reduce((a, l) => a + l.maxQueued, 0)) : null;
    /** Some limit is scoped to tiers: the gatekeeper resolves the tier before calling check(). */
    this.needsTier = o.limits.some((l) => l.tiers !== null) || o.clusterLimits.some((l) => l.tiers !== null);
    this.bans = new Bans(this.#handle, this.#events);
    this.#outcome = new Outcome(this.#handle, o.limits, ctx.warn);
    this.#watching = this.#outcome.watched.length > 0;
    this.#perRequest = o.limits.some((l) => l.limitFn !== null);
    /** `gate.limits`: one key of one named limit (./admin.js). */
    this.limits = new LimitsAdmin(this.#handle, o.limits, o.clusterLimits, this.#outcome, ctx.trustProxy, ctx.warn);
  }

  /**
   * Decides the gate in the same native call from now on (src/node/defense.rs `bind_gate`): `check`
   * then takes the gate's (sel, header, key) and leaves its verdict in `gateVerdict`.
   */
  bindGate(gateHandle) {
    const bound = {};
    this.#handle.bindGate(bound, gateHandle);
    this.#both = bound.defendAndDecide;
  }

  /**
   * Funds the cluster limits (`cluster: true`) from `cluster`'s leases: each names a limit of the
   * cluster. Throws naming the limit when the cluster has none of that name. With local limits, each
   * request's debit is kept for the cluster step to give back (`giveBack`).
   */
  bindCluster(cluster) {
    const n = this.#clusterLimits.length;
    if (n === 0 && this.#limits.length === 0) return;
    const ids = new Int32Array(n);
    this.#clusterLimits.forEach((l, i) => {
      if (l.name.startsWith('tier:')) throw new RangeError(`${l.at}.name: "tier:..." names are the cluster's tier limits; give the limit another name`);
      try {
        ids[i] = cluster.limitId(l.name);
      } catch {
        throw new RangeError(`${l.at} is a cluster limit, but options.cluster has no limit named ${JSON.stringify(l.name)} (add it to cluster({ limits }))`);
      }
    });
    const local = this.#limits.length === 0 ? null : new LocalDebit(this.#limits.length);
    this.clusterStep = { ids, keys: new Array(n).fill(undefined), costs: new Float64Array(n), any: false, local };
    // gate.limits on a cluster limit: the store's count, keyed as the cluster step keys it.
    this.limits.bindCluster(cluster.limits, (ip) => this.#handle.banKey(ip));
  }

  /** The cluster refused `req` (decided with `step`): the local limits give its units back (all or nothing). */
  giveBack(req, step) {
    if (step === null || step.local === null) return;
    step.local.giveBack(req, this.#handle, (i, err) => this.#warn(`${this.#limits[i].option}.refund`, err));
  }

  /** A request that reaches the cluster step later (after a wait): its own copy of the step. */
  #holdStep(req) {
    const cs = this.clusterStep;
    if (cs !== null) {
      req[CLUSTER_STEP] = { ids: cs.ids, keys: cs.keys.slice(), costs: cs.costs.slice(), any: cs.any, local: cs.local === null ? null : cs.local.copy() };
    }
  }

  /**
   * The defense's decision for one request: null to go on, `{ verdict, info, rejection }` to refuse,
   * `EXEMPT` (`.exempt`) to serve it without the tier pool and shedding, or a Promise of null or a
   * refusal (a shaper's delay). `tier`: its id, or -1 when unknown; `ip`: the client
   * address as clientIp() gives it. With `bindGate` and the gate's (sel, header, key), the gate
   * decides in the same call when the defense lets the request on: its verdict is then in
   * `gateVerdict` (-1 when it did not decide).
   */
  check(req, res, tier, ip, sel, header, key) {
    const limits = this.#limits;
    const args = this.#args;
    const costs = this.#costs;
    const scope = this.#scope;
    scope.begin();
    for (let i = 0; i < limits.length; i++) {
      const l = limits[i];
      const k = scope.keyFor(l, req, tier);
      args[GATE_ARGS + ARGS + i] = k;
      if (costs !== null) costs[i] = k !== undefined ? scope.costOf(l, req) : 0;
    }
    if (scope.pendingBy !== null) return this.#byLater(req, res, tier, ip, header, key);
    let flags = this.exemptSkipsShedding ? FLAGS.EXEMPT_ENDS : 0;
    if (this.#skip !== null && this.#skip(req) === true) flags |= FLAGS.SKIP;
    args[3] = flags;
    args[4] = ip;
    args[5] = this.#challenge === null ? undefined : passOf(this.#challenge, req);
    args[6] = costs === null ? 1 : costs;
    if (this.#perRequest) this.limits.perRequest(req, args, GATE_ARGS + ARGS, ip);
    // Before the decision: a settlement's or a refund's age is then never short of the reservation's (./outcome.js).
    const cs = this.clusterStep;
    const t0 = this.#watching || cs !== null ? performance.now() : 0;
    let verdict;
    if (this.#both !== null && sel !== undefined) {
      args[0] = sel;
      args[1] = header;
      args[2] = key;
      const code = callDefendAndDecide(this.#both, args);
      verdict = code & 15;
      this.gateVerdict = (code >> 4) - 1;
    } else {
      verdict = callDefend(this.#defend, args);
      this.gateVerdict = -1;
    }
    const r = this.#r;
    if (r[R.EVENTS] > 0) this.#events.publish(this.#handle.takeEvents());
    if (cs !== null) {
      this.#clusterKeys(req, tier, ip, verdict === V.PASS);
      if (cs.local !== null) {
        if (verdict === V.PASS) cs.local.record(args, GATE_ARGS + ARGS, costs, ip, t0);
        else cs.local.clear();
      }
    }
    if (verdict === V.PASS) {
      if (this.#watching) this.#outcome.reserve(req, res, args, GATE_ARGS + ARGS, costs, ip, t0);
      // (A response that is not an emitter, as a harness may pass, is not watched.)
      if (this.probeStatuses !== null && typeof res.on === 'function') {
        watchResponse(res, this, ip);
      }
      const evaluated = r[R.EVALUATED];
      if (evaluated !== 0) this.#admitted(req, res, evaluated);
      const delay = r[R.DELAY_MS];
      if (delay > 0) {
        // The gate decides when the slot comes, after other requests have refilled clusterStep.
        this.#holdStep(req);
        return this.#delay(delay, res);
      }
      return null;
    }
    if (verdict === V.EXEMPT) return this.exemptSkipsShedding ? EXEMPT : null;
    return this.#refusal(verdict, req, ip);
  }

  // Some `by` returned a promise: check() again, without the gate (the gatekeeper decides it after),
  // once every one has settled (a rejection: the client address, warned once), unless the client has
  // left by then. Nothing was counted before.
  #byLater(req, res, tier, ip, header, key) {
    const list = this.#scope.pendingBy;
    this.#scope.pendingBy = null;
    return settleAll(req, list, this.#warn).then(() => {
      if (isGone(res)) return { verdict: 'gone', info: null, rejection: GONE };
      const out = this.check(req, res, tier, ip, undefined, header, key);
      if (out === null) this.#holdStep(req); // the gate decides in a later microtask: the step goes with the request
      return out;
    });
  }

  // The cluster limits that apply to this request (only when the defense lets it on), their keys and costs.
  #clusterKeys(req, tier, ip, pass) {
    const cs = this.clusterStep;
    const limits = this.#clusterLimits;
    const scope = this.#scope;
    cs.any = false;
    for (let i = 0; i < limits.length; i++) {
      const l = limits[i];
      let k = pass ? scope.keyFor(l, req, tier) : undefined;
      if (k !== undefined) {
        // The client address as bans and local limits key it (the gatekeeper's prefixes).
        if (k === true) k = typeof ip === 'string' ? this.#handle.banKey(ip) : 'unknown';
        const c = scope.costOf(l, req);
        cs.costs[i] = c;
        if (c === 0) k = undefined;
        else cs.any = true;
      }
      cs.keys[i] = k;
    }
  }

  /**
   * The 429 for cluster limit `i` refused by the cluster (`retryAfterMs`), counted as a refusal and
   * as a rate-limit strike against the client (the ban rules see it as a local limit's refusal).
   */
  clusterRefusal(i, retryAfterMs, ip, quota) {
    this.#clusterRefused[i]++;
    if (typeof ip === 'string') this.#events.publish(this.#handle.report(ip, 'rate-limited'));
    const name = this.#clusterLimits[i].name;
    const info = {
      verdict: 'rate-limited', status: 429, key: ip, limitName: name, limit: quota, remaining: 0, retryAfterMs, resetMs: retryAfterMs, banned: null,
    };
    return { verdict: 'rate-limited', info, rejection: this.#responder.rateLimited(this.#limits.length + i, retryAfterMs) };
  }

  #remainingOf = (i) => this.#r[R.LIMITS + 2 * i];

  // Limit i's limit for this request: a function limit's value, else the configured one.
  #quotaOf(i) {
    const q = this.limits.requestLimits;
    return q !== null && q[i] > 0 ? q[i] : this.policies[i].quota;
  }

  #resetOf = (i) => this.#r[R.LIMITS + 2 * i + 1];

  // The tightest limit (the one the response speaks of) is the core's answer: R.TIGHTEST and its figures.
  #admitted(req, res, evaluated) {
    const r = this.#r;
    const t = r[R.TIGHTEST];
    req.rateLimit = new RateLimitInfo(this.policies[t].name, this.#quotaOf(t), r[R.TIGHTEST_REMAINING], r[R.TIGHTEST_RESET_MS]);
    if (this.headersOnSuccess && !res.headersSent) {
      const h = this.#headers.write({}, evaluated, t, this.#remainingOf, this.#resetOf, this.limits.requestLimits);
      for (const name in h) res.setHeader(name, h[name]);
    }
  }

  #delay(delayMs, res) {
    const p = this.#shaper === null ? null : this.#shaper.delay(delayMs);
    if (p === null) {
      this.#refused.shaperFull++;
      const info = { verdict: 'shaper-full', status: 503, limitName: null, retryAfterMs: delayMs };
      return { verdict: 'shaper-full', info, rejection: this.#responder.shaperFull(delayMs) };
    }
    return p.then(() => (isGone(res) ? { verdict: 'gone', info: null, rejection: this.#responder.shaperFull(0) } : null));
  }

  #refusal(verdict, req, ip) {
    const r = this.#r;
    const name = VERDICT_NAMES[verdict];
    const info = { verdict: name, status: VERDICT_STATUS[verdict], key: ip, limitName: null, retryAfterMs: 0, banned: null };
    let rejection;
    if (verdict === V.DENY_LISTED) {
      this.#refused.denyListed++;
      rejection = this.#responder.denyListed();
    } else if (verdict === V.BANNED) {
      this.#refused.banned++;
      const left = r[R.BAN_LEFT_MS];
      info.retryAfterMs = left;
      info.banned = { byCidr: r[R.BY_CIDR] === 1, permanent: left === Infinity };
      rejection = this.#responder.bannedFor(left);
    } else if (verdict === V.RATE_LIMITED) {
      const evaluated = r[R.EVALUATED];
      const t = r[R.TIGHTEST];
      this.#limitRefused[t]++;
      info.limitName = this.policies[t].name;
      info.limit = this.#quotaOf(t);
      info.retryAfterMs = r[R.RETRY_AFTER_MS];
      info.remaining = r[R.TIGHTEST_REMAINING];
      info.resetMs = r[R.TIGHTEST_RESET_MS];
      rejection = this.#responder.rateLimited(t, info.retryAfterMs);
      this.#headers.write(rejection.headers, evaluated, t, this.#remainingOf, this.#resetOf, this.limits.requestLimits);
    } else {
      this.#refused.challenged++;
      rejection = challengeResponse(this.#challenge, info, req, this.#responder, this.#warn);
    }
    if (r[R.PASS] >= 2) info.pass = PASS_ERRORS[r[R.PASS] - 2];
    return { verdict: name, info, rejection };
  }

  reportProbe(ip) {
    this.#events.publish(this.#handle.report(ip, 'probe'));
  }

  // The operator's API (gate.defense).

  /** `{ allow, deny }` as in force. */
  lists() {
    const [allow, deny] = this.#handle.lists();
    return { allow, deny };
  }

  /** Replaces the allow and/or deny list (the other is kept), atomically; safe while requests run. */
  setLists(lists) {
    listsArg(lists);
    const cur = this.lists();
    const allow = lists.allow === undefined ? cur.allow : lists.allow.slice();
    const deny = lists.deny === undefined ? cur.deny : lists.deny.slice();
    call(() => this.#handle.setLists(allow, deny), 'setLists');
    const share = this.#events.share;
    if (share !== null) share({ kind: 'lists', ...this.lists() });
  }

  /**
   * Hands every ban event (see ./bans.js) and every lists change (`{ kind: 'lists', allow, deny }`)
   * to `fn`: cluster mode's ban channel, the one consumer (lib/cluster/defense-table.js).
   */
  share(fn) {
    if (this.#events.share !== null) throw codedError(TypeError, CODES.INVALID_OPTION, 'this abuse defense already shares its bans with a cluster');
    this.#events.share = fn;
  }

  #ipOf(reqOrIp, at) {
    if (typeof reqOrIp === 'string') return reqOrIp;
    if (isObject(reqOrIp) && isObject(reqOrIp.headers)) return clientIp(reqOrIp, this.#trustProxy);
    throw codedError(TypeError, CODES.INVALID_ARGUMENT, `${at}: expected a request or an IP address, got ${typeName(reqOrIp)}`);
  }

  /** The key bans, strikes and passes are bound to, for a request or an address. */
  clientKey(reqOrIp) {
    return this.#handle.banKey(this.#ipOf(reqOrIp, 'clientKey'));
  }

  /** A signed challenge pass for this client, valid `ttlSec` seconds (default challenge.ttlSec). */
  mintPass(reqOrIp, { ttlSec } = {}) {
    const c = this.#challenge;
    if (c === null) throw codedError(TypeError, CODES.INVALID_ARGUMENT, 'mintPass: the gatekeeper has no options.challenge');
    const ttl = ttlSec === undefined ? c.ttlSec : call(() => finite(ttlSec, 'mintPass: ttlSec', { min: 1, max: 30 * 86400, integer: true }), 'mintPass');
    return this.#handle.mintPass(this.#ipOf(reqOrIp, 'mintPass'), Math.floor(Date.now() / 1000) + ttl);
  }

  /** The challenge's pass delivery: { header, cookie } names (null when not used), and ttlSec. */
  get challenge() {
    const c = this.#challenge;
    return c === null ? null : { header: c.header, cookie: c.cookie, ttlSec: c.ttlSec, afterStrikes: c.afterStrikes };
  }

  /** Counts a strike ('probe' or 'rate-limited') against a request's client or an address. */
  report(reqOrIp, kind = 'probe') {
    const ip = this.#ipOf(reqOrIp, 'report');
    this.#events.publish(call(() => this.#handle.report(ip, kind), 'report'));
  }

  /**
   * Counts malformed requests (those node's HTTP parser refuses: they never reach a handler) as probes
   * against the peer: a 'clientError' listener on `server` that also answers them as node does by
   * default (400, or 431 for headers too large, then the socket is closed). Returns a function that
   * removes the listener. With trustProxy, the peer is a trusted proxy, and the client behind it is
   * in the X-Forwarded-For the parser never got to: nobody is charged.
   */
  watchServer(server) {
    if (server === null || typeof server !== 'object' || typeof server.on !== 'function') {
      throw codedError(TypeError, CODES.INVALID_ARGUMENT, `watchServer: expected a node:http server, got ${typeName(server)}`);
    }
    return watchServer(server, this, this.#trustProxy);
  }

  /**
   * Bans held, keys tracked, the ban table's counters, per limit its keys and the requests it refused,
   * per cluster limit (`clusterLimits`) the requests the cluster refused and its overrides in the cluster,
   * `refusals` (requests refused by the deny list, a ban, a challenge, a full shaper), shaperWaiting.
   */
  stats() {
    const s = this.#handle.stats();
    for (let i = 0; i < s.limits.length; i++) s.limits[i].refused = this.#limitRefused[i];
    const o = this.limits.stats();
    // `overrides`: the cluster's overrides of that limit, as this process last read them (null: not yet).
    const clusterOverrides = o.cluster === undefined || o.cluster.overrides === null ? null : o.cluster.byName;
    const clusterLimits = this.#clusterLimits.map((l, i) => ({
      name: l.name, refused: this.#clusterRefused[i], overrides: clusterOverrides === null ? null : clusterOverrides[l.name] || 0,
    }));
    for (const l of s.limits) l.overrides = o.byName[l.name] || 0;
    const overrides = { count: o.overrides, max: o.maxOverrides, perRequest: o.perRequest, maxPerRequest: o.maxPerRequest };
    if (o.cluster !== undefined) overrides.cluster = { count: o.cluster.overrides, max: o.cluster.maxOverrides };
    return { ...s, clusterLimits, overrides, refusals: { ...this.#refused }, shaperWaiting: this.#shaper === null ? 0 : this.#shaper.size };
  }
}

module.exports = { Defense, CLUSTER_STEP };

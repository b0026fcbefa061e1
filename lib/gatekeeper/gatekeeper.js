'use strict';
// The gatekeeper: business-aware load shedding for Express, Fastify and node:http.
//
// classify (JS, shallow)  ->  decide (Rust, one raw call)  ->  respond (JS, only when refusing)
//
// Classification picks a tier id from `classify(req)`, then the route rules; failing both the tier
// header's raw value goes to Rust, which resolves plain names (honoured above the default tier only
// when the header is trusted) and HMAC-signed tokens. The key (user id or client IP) goes along.
// `decide` reads this thread's loop health, moves the shed controller when due, debits the tier pool
// and the key's bucket, and returns a verdict; the details land in a preallocated Float64Array.
const native = require('../native');
const { ledgerHandle, ledgerConfig, bucketWords } = require('../ledger');
const { compileRouteConfig, matchRoute } = require('../http/route-rules');
const { clientIp, headersTruncated } = require('../http/client');
const { whenSettled, PENDING, NOT_SETTLED } = require('./async-inputs');
const { usableKey } = require('./key');
const { TierHeader } = require('./tier-header');
const { Defense } = require('../defense');
const { RateLimitInfo } = require('../http/rate-limit-info');
const { DIALECTS } = require('../http/routing');
const { Responder } = require('./respond');
const { TurnQueue } = require('./turn-queue');
const { Slots } = require('./slots');
const { normalize } = require('./options');
const { Hooks, decisionChannel } = require('./hooks');
const { decisionInfo } = require('./decision-info');
const { ClusterStep } = require('./cluster-step');
const { gateStats } = require('./stats');
const { checkHealth } = require('./health');
const { CODES, withCode, buildingOptions } = require('../errors');

// Verdict codes and names, the HTTP status per verdict, the indices of the Float64Array decide fills,
// tier sources, causes and the `sel` bits: declared once, in src/node/gate.rs.
const {
  verdict: VERDICT, verdictNames: VERDICT_NAMES, verdictStatus: STATUS, result: R, sources: SOURCES, causes: CAUSES, sel: SEL,
} = native.gateConstants();
const SEL_KEY_IS_IP = SEL.KEY_IS_IP;
/** R.SLOT's values: src/node/gate.rs. */
const SLOT = Object.freeze({ NONE: 0, HELD: 1, SHADOW: 2, WAIT: 3 });
const SEL_TURN_QUEUED = SEL.TURN_QUEUED;

/**
 * One gatekeeper: a guard (`admit(req, res)`, see lib/adapters/index.js) plus its stats and test seam.
 * Use `gatekeeper(options)` (Express), `gatekeeper.http(options, handler)` or `tiergatePlugin`.
 */
class Gatekeeper {
  #o;
  #handle;
  #decide;
  #result;
  #responder;
  #observe;
  #needKey;
  #defense = null;
  #tierHeader = null;
  #queue = null; // the turn queue (./turn-queue.js), null with shed off or turnBudgetMs 0
  #slots = null; // the concurrency limit's slots (./slots.js), null with options.concurrency false
  #sel = 0;
  #hooks; // ./hooks.js: onDecision, onShed, onReject, respond, the channel, the warnings
  #clusterStep = null; // ./cluster-step.js, with options.cluster
  // An async options.key: the promise it returned, then (for the one synchronous re-run of the
  // decision that follows) the key it settled to.
  #pendingKey = null;
  #settledKey = NOT_SETTLED;

  // A user id is often a number: key by its text rather than silently by IP; warn about other types.
  #fnKey(v) {
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
    if (typeof v !== 'string' && v !== undefined && v !== null) {
      if (typeof v.then === 'function') {
        this.#pendingKey = v;
        return PENDING;
      }
      this.#hooks.warnKey(v);
    }
    return usableKey(v);
  }

  /** `routing`: how the framework in front routes a target (lib/http/routing.js); node:http's by default. */
  constructor(options, routing = DIALECTS.http) {
    buildingOptions(() => this.#build(options, routing));
  }

  #build(options, routing) {
    const o = normalize(options);
    o.routing = routing;
    this.#o = o;
    this.#hooks = new Hooks(o);
    const s = o.shed;
    try {
      this.#handle = new native.GateHandle(ledgerHandle(o.ledger), {
        defaultTier: o.defaultTier,
        trustHeader: o.trustTierHeader,
        secrets: o.secrets,
        ipv4Prefix: o.ipv4Prefix,
        ipv6Prefix: o.ipv6Prefix,
        cost: o.cost,
        sampler: s.enabled,
        concurrency: o.concurrency === null ? undefined : o.concurrency,
        shadowEnforcePercent: o.shadow === false ? undefined : o.shadow,
      }, s); // the shed options go as they are: src/node/gate.rs reads them by name
    } catch (err) {
      // The ledger's native units in its message (`cost 3 exceeds tiers[0].perKey.capacity 2`): a
      // bucket's capacity is its `burst` as the options say it.
      if (err && err.code === 'InvalidArg') {
        throw new RangeError(`gatekeeper: ${err.message.replace(/(tiers\[\d+\](?:\.perKey)?)\.capacity\b/g, '$1.burst')}`, { cause: err });
      }
      throw err;
    }
    const bound = {};
    this.#handle.bind(bound);
    this.#decide = bound.decide;
    this.#result = bound.result;
    // Per tier, the per-key quota { limit, windowMs, burst } or null: as configured, or (a shared
    // ledger attached without options) the equivalent of the ledger's native units.
    const config = ledgerConfig(o.ledger);
    o.perKeyByTier = this.#handle.perKeyQuotas().map((q, i) => {
      if (!(q.capacity > 0)) return null;
      return config !== null ? config[i].perKey : bucketWords(q);
    });
    this.#responder = new Responder(o.names, o.perKeyByTier, {
      headers: o.rateLimitHeaders,
      retryMinSec: o.retryAfter.minSec,
      retryMaxSec: o.retryAfter.maxSec,
      shedStatus: o.shedStatus,
    });
    // A per-key quota sets req.rateLimit on every keyed admit, as a named limit does.
    // (In shadow mode an admit may be a shed not enforced, which onShed hears of.)
    this.#observe = o.onDecision !== null || o.rateLimitHeadersOnSuccess || o.perKeyByTier.some(Boolean) || (o.shadow !== false && o.onShed !== null);
    if (o.concurrency !== null) {
      this.#slots = new Slots(this.#handle, o.names.length, o.concurrency, {
        shed: (w, waitedMs, why) => this.#slotShed(w, waitedMs, why),
        run: (w, first) => this.#runWaiter(w, first),
        warn: (name, err) => this.#hooks.warn(name, err),
      });
    }
    // In shadow mode nothing waits for a turn: the turn budget's sheds are counted in the gate.
    if (s.enabled && s.turnBudgetMs > 0 && o.shadow === false) {
      const prot = this.#handle.stats().tiers.map((t) => t.protected);
      this.#queue = new TurnQueue(prot, s, (w, waitedMs) => this.#queueShed(w, waitedMs));
    }
    if (o.defense !== null) {
      this.#defense = new Defense(o.defense, {
        routing,
        headers: o.rateLimitHeaders,
        headersOnSuccess: o.rateLimitHeadersOnSuccess,
        trustProxy: o.trustProxy,
        warn: (name, err) => this.#hooks.warn(name, err),
      });
      this.#defense.bindGate(this.#handle);
      // Limits scoped to tiers need the tier before the defense decides: the header's rule, natively.
      if (this.#defense.needsTier && o.tierHeader !== null) this.#tierHeader = new TierHeader(o.names, o.defaultTier, o.trustTierHeader, o.secrets);
    }
    if (o.defense !== null && o.defense.clusterLimits.length > 0 && o.cluster === null) {
      throw new TypeError(
        `${o.defense.clusterLimits[0].at}.cluster: a cluster limit needs options.cluster (tiergate.cluster({ limits }) with a limit of that name)`,
      );
    }
    if (o.cluster !== null && this.#defense !== null) {
      // One ban table per process: with the defense, cluster bans are its bans (CIDR, escalation, lists).
      o.cluster.useDefense(this.#defense);
      this.#defense.bindCluster(o.cluster);
    }
    if (o.cluster !== null) {
      this.#clusterStep = new ClusterStep(o, {
        result: this.#result,
        defense: this.#defense,
        responder: this.#responder,
        hooks: this.#hooks,
        observe: this.#observe,
        admitted: (req, res, given, key, r) => this.#settle(0, req, res, given, key, r),
      });
    }
    this.#needKey = o.perKeyByTier.some(Boolean) || o.onDecision !== null || (o.cluster !== null && o.cluster.needsKey);
  }

  /** One key of one named limit: get, reset, refund, charge, overrides (lib/defense/admin.js); null without limits. */
  get limits() {
    return this.#defense === null ? null : this.#defense.limits;
  }

  /** The abuse defense (limits, lists, bans, challenge passes), or null without any of its options. */
  get defense() {
    return this.#defense;
  }

  /** The cluster mode (options.cluster), or null. */
  get cluster() {
    return this.#o.cluster;
  }

  /** Tier names, highest priority first. */
  get tiers() {
    return this.#o.names;
  }

  /** The ledger the gate debits (pass it to another gatekeeper, or `Ledger.shared`, to share). */
  get ledger() {
    return this.#o.ledger;
  }

  /** A route's own settings (Fastify route config `{ tier }`), for admit's `route`. */
  compileRoute(value, at) {
    return { tier: compileRouteConfig(value, this.#o.ids, at) };
  }

  /**
   * The guard contract of lib/adapters/index.js: null to proceed, or the rejection to send (or a
   * Promise of either: an async classify or key, a shaper's delay, a wait). `classified`: internal,
   * what an async classify settled to (null: no tier), when the decision goes on after it.
   */
  admit(req, res, route, classified) {
    const o = this.#o;
    let tier = -1;
    let given = null;
    if (o.classify !== null) {
      const name = classified === undefined ? o.classify(req) : classified;
      if (name !== undefined && name !== null) {
        const id = o.ids.get(name);
        if (id !== undefined) {
          tier = id;
          given = 'classify';
        } else if (typeof name.then === 'function') return this.#classifyLater(name, req, res, route);
        else this.#hooks.warnClassify(name);
      }
    }
    if (tier < 0 && route !== undefined) {
      tier = route.tier;
      given = 'route';
    }
    if (tier < 0 && o.routes !== null) {
      tier = matchRoute(o.routes, req.method, req.originalUrl || req.url, o.routing);
      if (tier >= 0) given = 'route';
    }
    const truncated = headersTruncated(req);
    if (tier < 0 && truncated && o.tierHeader !== null) {
      tier = o.names.length - 1; // the gateway's tier header may be among the lost ones: the lowest tier
      given = 'truncated';
    }
    let header;
    if (tier < 0 && o.tierHeader !== null) {
      const h = req.headers[o.tierHeader];
      if (typeof h === 'string') header = h;
      else if (Array.isArray(h)) header = h.join(', '); // several values: Rust refuses them as ambiguous
    }
    if (this.#defense !== null) {
      if (tier < 0 && this.#defense.needsTier) {
        if (header !== undefined && this.#tierHeader !== null) {
          const x = this.#tierHeader.resolveRaw(header);
          tier = x >> 4;
          given = SOURCES[x & 15];
        } else {
          tier = o.defaultTier;
          given = 'default';
        }
      }
      const ip = clientIp(req, o.trustProxy, truncated);
      // One native call for both: the defense, then the gate when the defense lets the request on.
      const key = this.#gateKey(req, tier, truncated, ip);
      if (key === PENDING) return this.#keyLater(() => this.admit(req, res, route, given === 'classify' ? o.names[tier] : null), res);
      const d = this.#defense;
      const out = d.check(req, res, tier, ip, this.#sel, header, key);
      if (out !== null) {
        if (out.exempt === true) return null; // allow-listed or skipped, and exemptSkipsShedding
        if (typeof out.then !== 'function') return this.#hooks.refusedByDefense(out, req, tier, given);
        // A shaper's delay, or a named limit's `by` that returned a promise: the gate decides after.
        return out.then((v) => {
          if (v === null) return this.#gate(req, res, tier, given, header, truncated, ip);
          return v.exempt === true ? null : this.#hooks.refusedByDefense(v, req, tier, given);
        });
      }
      if (d.gateVerdict >= 0) return this.#after(d.gateVerdict, req, res, given, key);
      return this.#gate(req, res, tier, given, header, truncated, ip);
    }
    return this.#gate(req, res, tier, given, header, truncated, undefined);
  }

  // The tier pool and the shed controller: one native call. `ip`: the client address if known already.
  #gate(req, res, tier, given, header, truncated, ip) {
    const key = this.#gateKey(req, tier, truncated, ip);
    if (key === PENDING) return this.#keyLater(() => this.#gate(req, res, tier, given, header, truncated, ip), res);
    return this.#after(this.#decide(this.#sel, header, key), req, res, given, key);
  }

  // options.classify returned a promise: the decision goes on as if it had returned what it settles to
  // (./async-inputs.js); a value that is no tier name is warned about once, as a synchronous one.
  #classifyLater(p, req, res, route) {
    return whenSettled(p, res, (v) => {
      if (v !== undefined && v !== null && typeof v !== 'string') this.#hooks.warnClassify(v);
      return this.admit(req, res, route, typeof v === 'string' ? v : null);
    }, (err) => this.#hooks.warnRejected('classify', err));
  }

  // options.key returned a promise: `step`, the part of the decision that asked, runs again with the
  // key it settles to (a rejection or an unusable value: the client IP, as a synchronous one).
  #keyLater(step, res) {
    const p = this.#pendingKey;
    this.#pendingKey = null;
    return whenSettled(p, res, (v) => {
      this.#settledKey = this.#fnKey(v);
      try {
        return step();
      } finally {
        this.#settledKey = NOT_SETTLED;
      }
    }, (err) => this.#hooks.warnRejected('key', err));
  }

  // The gate's per-key identity for `decide`; its `sel` goes to this.#sel (no pair allocated).
  #gateKey(req, tier, truncated, ip) {
    const o = this.#o;
    let sel = tier + 1;
    let key;
    if (this.#needKey) {
      const k = o.key;
      if (k.kind === 'header') key = truncated ? undefined : usableKey(req.headers[k.header]);
      else if (k.kind === 'fn') {
        key = this.#settledKey;
        if (key === NOT_SETTLED) key = this.#fnKey(k.fn(req));
        else this.#settledKey = NOT_SETTLED;
        if (key === PENDING) return PENDING;
      }
      if (key === undefined) {
        if (o.trustProxy === 0 && req.headers['x-forwarded-for'] !== undefined) this.#hooks.warnForwarded();
        key = ip === undefined ? clientIp(req, o.trustProxy, truncated) : ip;
        sel |= SEL_KEY_IS_IP;
      }
    }
    // The turn queue spends the turn budget itself: on while it runs or the last decision saw an episode.
    const q = this.#queue;
    if (q !== null && (q.active || this.#result[R.PRESSURE] > 0)) sel |= SEL_TURN_QUEUED;
    this.#sel = sel;
    return key;
  }

  // The gate decided `verdict`. An admitted request may wait for a later turn (the turn queue), or
  // for a slot of the concurrency limit (./slots.js).
  #after(verdict, req, res, given, key) {
    const r = this.#result;
    const sl = this.#slots;
    // The slot the decision took for an admitted request: tracked until its response finishes.
    const slot = verdict === 0 && sl !== null ? r[R.SLOT] : SLOT.NONE;
    if (slot === SLOT.HELD || slot === SLOT.SHADOW) sl.track(res, r[R.SLOT_EPOCH]);
    if (sl !== null) req.tiergate = { pressure: Math.max(r[R.PRESSURE], r[R.LOAD]) };
    let out;
    if (verdict === 0 && this.#o.cluster !== null) out = this.#clusterStep.gate(req, res, given, key);
    else if (verdict === 0 && !this.#observe && !decisionChannel.hasSubscribers) out = null;
    else out = this.#settle(verdict, req, res, given, key);
    const q = this.#queue;
    // A request that waits for a slot waits there only: the limit binds while the loop is not the
    // bottleneck, so the turn queue has nothing to do for it.
    if (out === null && slot !== SLOT.WAIT && q !== null && (q.active || !q.calm(r[R.PRESSURE], r[R.LAG_MS], r[R.INLINE_RUN_MS]))) {
      // A shed from the turn queue gives its slot back (#queueShed).
      return q.admit(req, res, r[R.TIER], r[R.PRESSURE], r[R.LAG_MS], r[R.INLINE_RUN_MS], given !== null ? given : SOURCES[r[R.SOURCE]], key);
    }
    if (slot === SLOT.NONE) return out;
    if (slot === SLOT.WAIT) {
      const tier = r[R.TIER];
      const source = given !== null ? given : SOURCES[r[R.SOURCE]];
      if (out === null) return sl.wait(req, res, tier, source, key);
      if (typeof out.then !== 'function') return out;
      return out.then((v) => (v === null ? sl.wait(req, res, tier, source, key) : v));
    }
    if (out === null) return null;
    // Refused after taking its slot (the cluster's limits): the slot goes back without a sample.
    if (typeof out.then !== 'function') {
      sl.giveBack(res);
      return out;
    }
    return out.then((v) => {
      if (v !== null) sl.giveBack(res);
      return v;
    });
  }

  // A request that waited for a slot has one now. While the loop is busy it takes its turn in the
  // turn queue as a newcomer would: started outside it, a run of them would take the turns the turn
  // budget keeps for the protected tier.
  #runWaiter(w, first) {
    const q = this.#queue;
    const r = this.#result;
    // The last decision's inline run says nothing of a batch started together (the limit rose and
    // handed several slots at once): after the first, they go through the turn queue, which runs
    // them a turn budget at a time with I/O read between, not back to back.
    const inlineRunMs = first ? r[R.INLINE_RUN_MS] : Infinity;
    if (q === null || (!q.active && q.calm(r[R.PRESSURE], r[R.LAG_MS], inlineRunMs))) return w.settle(null);
    const out = q.admit(w.req, w.res, w.tier, r[R.PRESSURE], r[R.LAG_MS], inlineRunMs, w.source, w.key);
    if (out !== null && typeof out.then === 'function') out.then((v) => w.settle(v));
    else w.settle(out);
  }

  // A request waiting for a slot of the concurrency limit was shed (./slots.js): it waited
  // `waitedMs` ('wait'), or the wait queue was full ('full'). Hooks see cause 'concurrency'.
  #slotShed(w, waitedMs, why) {
    return this.#waiterShed(w, waitedMs, 'concurrency', (info, s) => {
      info.concurrencyLimit = s.concurrency.limit;
      info.queueFull = why === 'full';
    });
  }

  // A request the turn queue sheds (./turn-queue.js): it waited too long, a higher tier took its
  // place, or the queue was full. Hooks see it as a shed with cause 'queue' and how long it waited.
  #queueShed(w, waitedMs) {
    if (this.#slots !== null) this.#slots.giveBack(w.res);
    return this.#waiterShed(w, waitedMs, 'queue');
  }

  // A waiting request shed with `cause`; `more(info, stats)` adds the cause's own fields.
  #waiterShed(w, waitedMs, cause, more) {
    const o = this.#o;
    let rejection = this.#responder.shed(w.tier);
    if (!this.#hooks.wantsInfo(VERDICT.SHED)) return rejection;
    const s = this.#handle.stats(); // off the hot path: the controller as it is now
    const info = decisionInfo('shed', rejection.status, o.names[w.tier], w.source, w.key, 0, 0, 0, 0,
      s.tiers[w.tier].refillScale, s.pressure, s.controllerLagMs, cause);
    info.queueWaitMs = waitedMs;
    if (more !== undefined) more(info, s);
    if (o.respond !== null) rejection = this.#hooks.respond(info, w.req, rejection);
    // In the waiter's own async context (that of its then()), not that of the turn or the request
    // that shed it: hooks and channel subscribers (a tracer's active span) see this request's.
    if (w.context !== null) w.context.runInAsyncScope(this.#hooks.emit, this.#hooks, info, w.req, o.onShed);
    else this.#hooks.emit(info, w.req, o.onShed);
    return rejection;
  }

  // Off the fast path: an admit someone observes, or a refusal. An admit shadow mode served (the
  // controller would have shed it, or it would have waited for a slot) is heard of as the shed it
  // would have been: info.shadow true, cause 'concurrency' for a would-be wait, else the controller's.
  #settle(verdict, req, res, given, key, r = this.#result) {
    const o = this.#o;
    const tier = r[R.TIER];
    const shadow = verdict === 0 && (r[R.SHADOW] === 1 || r[R.SLOT] === SLOT.SHADOW);
    const told = shadow ? VERDICT.SHED : verdict;
    let info = null;
    if (this.#hooks.wantsInfo(told)) {
      const cause = shadow && r[R.SHADOW] !== 1 ? 'concurrency' : CAUSES[r[R.CAUSE]];
      const status = shadow ? this.#responder.shedStatus : STATUS[verdict];
      info = decisionInfo(VERDICT_NAMES[told], status, o.names[tier], given !== null ? given : SOURCES[r[R.SOURCE]], key, r[R.REMAINING], r[R.LIMIT],
        shadow ? 0 : r[R.RETRY_AFTER_MS], shadow ? 0 : r[R.RESET_MS], r[R.SCALE], r[R.PRESSURE], r[R.LAG_MS], cause, shadow);
    }
    if (verdict === 0) {
      const pk = key !== undefined ? o.perKeyByTier[tier] : null;
      if (pk) {
        // req.rateLimit: the tightest quota that applied (a named limit's, or this one).
        const remaining = r[R.REMAINING];
        if (!(req.rateLimit instanceof RateLimitInfo) || remaining < req.rateLimit.remaining) {
          req.rateLimit = new RateLimitInfo(o.names[tier], this.#responder.perKeyQuota(tier).quota, remaining, r[R.RESET_MS]);
        }
        if (o.rateLimitHeadersOnSuccess && !res.headersSent) {
          const h = this.#responder.quotaHeaders({}, tier, remaining, r[R.RESET_MS]);
          for (const name in h) res.setHeader(name, h[name]);
        }
      }
      this.#hooks.emit(info, req, shadow ? o.onShed : null);
      return null;
    }
    let rejection;
    if (verdict === VERDICT.RATE_LIMITED) rejection = this.#responder.rateLimited(tier, r[R.REMAINING], r[R.RETRY_AFTER_MS], r[R.RESET_MS]);
    else if (verdict === VERDICT.TIER_FULL) rejection = this.#responder.tierFull(tier, r[R.RETRY_AFTER_MS]);
    else rejection = this.#responder.shed(tier);
    // The status sent (a shed and a full tier answer options.shedStatus), as the info says.
    if (info !== null) info.status = rejection.status;
    if (o.respond !== null) rejection = this.#hooks.respond(info, req, rejection);
    this.#hooks.emit(info, req, this.#hooks.hookFor(verdict));
    return rejection;
  }

  /**
   * How loaded the service is now, 0..1: the larger of the shed controller's pressure (the loop) and
   * the concurrency limit's (from 80% of it in use to all of it, or requests waiting for a slot). For
   * handlers that degrade instead of failing (skip an expensive block while it is above, say, 0.5);
   * each admitted request carries it as `req.tiergate.pressure` when the concurrency limit is on.
   */
  pressure() {
    const s = this.#handle.stats();
    return Math.max(s.pressure, s.concurrency.pressure);
  }

  /** The counters and the loop's health: ./stats.js, docs/stats.md. */
  stats() {
    return gateStats(this.#handle.stats(), this.#queue, this.#slots);
  }

  /** Zeroes the per-tier counters. */
  resetStats() {
    this.#handle.resetCounters();
    if (this.#queue !== null) this.#queue.resetStats();
  }

  /**
   * Test seam: the controller reads exactly this health from now on (no live sampler, no in-band
   * estimate) and acts on it at once. `{ lagMs, ewmaLagMs?, p99LagMs?, elu?, heapUsed?, heapLimit?,
   * stalled? }`; ewma and p99 default to lagMs.
   */
  injectHealth(health) {
    try {
      checkHealth(health);
    } catch (err) {
      throw withCode(err, CODES.INVALID_ARGUMENT);
    }
    this.#handle.injectHealth(health);
    this.#handle.update();
  }

  /** Ends `injectHealth`: the live sampler drives the controller again. */
  useLiveHealth() {
    this.#handle.useLiveHealth();
    this.#handle.update();
  }

  /** Moves the controller now (it otherwise moves at most every `shed.updateIntervalMs`, on requests). */
  updateController() {
    return this.#handle.update();
  }
}

module.exports = { Gatekeeper };

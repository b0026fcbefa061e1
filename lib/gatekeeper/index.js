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
const diagnostics = require('node:diagnostics_channel');
const native = require('../native');
const { Ledger, ledgerHandle, ledgerConfig, bucketWords } = require('../ledger');
const { MAX_TICKS_PER_WINDOW } = require('../lag'); // also registers this thread's heap source for the native sampler
const { expressMiddleware, httpHandler, fastifyPlugin } = require('../adapters');
const { koaMiddleware } = require('../adapters/koa');
const { compileRoutes, compileRouteConfig, matchRoute } = require('../adapters/route-rules');
const { checkTrustProxy, clientIp, headersTruncated } = require('../adapters/client');
const { compileKey, usableKey } = require('./key');
const { TierHeader, TIER_NAME, TIER_NAME_RULE, checkTierName, tierHeaderOption, tierSecretOption, secretBuffer } = require('./tier-header');
const { Defense, compileDefense, DEFENSE_OPTIONS, BAN_CHANNEL, CLUSTER_STEP, RateLimitInfo } = require('../defense');
const { MODES: RATE_LIMIT_HEADER_MODES } = require('../defense/headers');
const { DIALECTS } = require('../adapters/routing');
const { Responder } = require('./respond');
const { TurnQueue } = require('./turn-queue');
const { Slots, concurrencyOptions } = require('./slots');
const { typeName, isObject, unknownKey, onlyKnown, boolean, optionalFn, finite, retryAfterOptions } = require('../options');
const { CODES, withCode, buildingOptions } = require('../errors');
const { Cluster, CLUSTER_BANNED } = require('../cluster');
const { clusterRejection } = require('../cluster/respond');

// Verdict codes and names, the HTTP status per verdict, the indices of the Float64Array decide fills,
// tier sources, causes, the `sel` bits and the shed defaults: declared once, in src/node/gate.rs.
const {
  verdict: VERDICT, verdictNames: VERDICT_NAMES, verdictStatus: STATUS, result: R, sources: SOURCES, causes: CAUSES, sel: SEL,
  shedDefaults: SHED_DEFAULTS, lagSignals: LAG_SIGNALS,
} = native.gateConstants();
const SEL_KEY_IS_IP = SEL.KEY_IS_IP;
/** R.SLOT's values: src/node/gate.rs. */
const SLOT = Object.freeze({ NONE: 0, HELD: 1, SHADOW: 2, WAIT: 3 });
const SEL_TURN_QUEUED = SEL.TURN_QUEUED;
const MAX_TIERS = SEL.MAX_TIERS;

/** diagnostics_channel name; every decision is published when it has subscribers. */
const DECISION_CHANNEL = 'tiergate:decision';
const decisionChannel = diagnostics.channel(DECISION_CHANNEL);

// The default tiers' budgets: no practical cap (a billion requests per second and tier), so that
// `gatekeeper()` refuses nothing on a healthy loop; under overload their refill scales shed them
// tier by tier (a scale of 0 refuses at once), and the turn budget trims what the loop cannot run.
const UNBOUNDED = Object.freeze({ limit: 1e9, windowMs: 1000 });
const DEFAULT_TIERS = Object.freeze([
  Object.freeze({ name: 'critical', protected: true, ...UNBOUNDED }),
  Object.freeze({ name: 'standard', ...UNBOUNDED }),
  Object.freeze({ name: 'background', ...UNBOUNDED }),
]);

/** With the default tiers, after the given route rules: health probes are never shed. */
const PROBE_ROUTES = Object.freeze(['/health', '/healthz', '/ready', '/readyz', '/live', '/livez'].map((path) => Object.freeze({ method: ['GET', 'HEAD'], path, tier: 'critical' })));

const OPTIONS = new Set([
  'tiers', 'ledger', 'perKey', 'tierHeader', 'trustTierHeader', 'tierSecret', 'routes', 'classify', 'defaultTier',
  'key', 'trustProxy', 'ipv4Prefix', 'ipv6Prefix', 'cost', 'shed', 'rateLimitHeaders', 'rateLimitHeadersOnSuccess',
  'retryAfter', 'respond', 'onDecision', 'onShed', 'onReject', 'cluster', 'concurrency', 'shedStatus',
]);
for (const k of DEFENSE_OPTIONS) OPTIONS.add(k); // lib/defense/options.js reads them
const SHED_FIELDS = new Set(Object.keys(SHED_DEFAULTS));
const HEALTH_NUMBERS = ['lagMs', 'ewmaLagMs', 'p99LagMs', 'elu', 'heapUsed', 'heapLimit'];
const HEALTH_FIELDS = new Set([...HEALTH_NUMBERS, 'stalled']);

function shedOptions(shed) {
  if (shed === false) return { ...SHED_DEFAULTS, enabled: false, maxBaselineMs: SHED_DEFAULTS.targetLagMs };
  if (shed === undefined) shed = {};
  if (!isObject(shed)) throw new TypeError(`gatekeeper: options.shed must be an object or false, got ${typeName(shed)}`);
  onlyKnown(shed, SHED_FIELDS, 'gatekeeper: options.shed');
  const o = { ...SHED_DEFAULTS, ...Object.fromEntries(Object.entries(shed).filter(([, v]) => v !== undefined)), enabled: true };
  const at = (k) => `gatekeeper: options.shed.${k}`;
  finite(o.targetLagMs, at('targetLagMs'));
  finite(o.criticalLagMs, at('criticalLagMs'));
  if (o.criticalLagMs <= o.targetLagMs) throw new RangeError(`${at('criticalLagMs')} must be greater than targetLagMs (${o.targetLagMs}), got ${o.criticalLagMs}`);
  boolean(o.relative, at('relative'));
  finite(o.hysteresisMs, at('hysteresisMs'));
  finite(o.holdMs, at('holdMs'));
  finite(o.recoveryMs, at('recoveryMs'));
  finite(o.integralMs, at('integralMs'));
  finite(o.confirmMs, at('confirmMs'));
  if (o.heapRatio !== false) finite(o.heapRatio, at('heapRatio'), { min: 0, max: 0.999999, exclusiveMin: true });
  if (o.stallMs !== false) finite(o.stallMs, at('stallMs'), { min: 1, max: 3_600_000, integer: true });
  if (!LAG_SIGNALS.includes(o.lagSignal)) throw new RangeError(`${at('lagSignal')} must be one of ${LAG_SIGNALS.map((n) => `'${n}'`).join(', ')}, got ${JSON.stringify(o.lagSignal)}`);
  finite(o.resolutionMs, at('resolutionMs'), { min: 1, max: 60_000, integer: true });
  finite(o.windowMs, at('windowMs'), { min: o.resolutionMs, max: 3_600_000, integer: true });
  // The sampler's window holds at most this many ticks; a longer one would be cut silently.
  if (o.windowMs / o.resolutionMs > MAX_TICKS_PER_WINDOW) {
    throw new RangeError(`${at('windowMs')} / resolutionMs must be at most ${MAX_TICKS_PER_WINDOW} ticks, got ${o.windowMs}/${o.resolutionMs}`);
  }
  finite(o.ewmaMs, at('ewmaMs'), { min: 1, max: 3_600_000, integer: true });
  finite(o.updateIntervalMs, at('updateIntervalMs'), { max: 60_000 });
  finite(o.baselineTauMs, at('baselineTauMs'));
  if (o.maxBaselineMs === undefined) o.maxBaselineMs = o.targetLagMs;
  finite(o.maxBaselineMs, at('maxBaselineMs'));
  finite(o.idleElu, at('idleElu'), { max: 1 });
  finite(o.turnBudgetMs, at('turnBudgetMs'), { max: 60_000 });
  finite(o.queueMaxWaitMs, at('queueMaxWaitMs'), { min: 1, max: 60_000 });
  finite(o.queueMaxLength, at('queueMaxLength'), { min: 1, max: 1_000_000, integer: true });
  return o;
}

/** options.shedStatus: 503 (default) or 429 (a load balancer ejects a backend answering 5xx). */
function shedStatusOption(v) {
  if (v === undefined) return 503;
  if (v !== 503 && v !== 429) throw new RangeError(`gatekeeper: options.shedStatus must be 503 or 429, got ${JSON.stringify(v)}`);
  return v;
}

function normalize(options) {
  if (options === undefined) options = {};
  if (!isObject(options)) throw new TypeError(`gatekeeper: options must be an object, got ${typeName(options)}`);
  onlyKnown(options, OPTIONS, 'gatekeeper: options');
  // The ledger: given, or built from the tiers.
  let ledger = options.ledger;
  if (ledger !== undefined) {
    if (!(ledger instanceof Ledger)) throw new TypeError(`gatekeeper: options.ledger must be a Ledger, got ${typeName(ledger)}`);
    if (options.tiers !== undefined || options.perKey !== undefined) {
      throw new TypeError('gatekeeper: options.tiers and options.perKey configure a new ledger; leave them out when passing options.ledger');
    }
  } else {
    const tiers = options.tiers === undefined ? DEFAULT_TIERS : options.tiers;
    if (!Array.isArray(tiers) || tiers.length === 0) throw new TypeError(`gatekeeper: options.tiers must be a non-empty array of tiers, highest priority first, got ${typeName(tiers)}`);
    tiers.forEach((t, i) => {
      if (isObject(t) && typeof t.name === 'string') checkTierName(t.name, `gatekeeper: options.tiers[${i}].name`);
    });
    try {
      ledger = new Ledger({ tiers, ...(options.perKey === undefined ? {} : { perKey: options.perKey }) });
    } catch (err) {
      err.message = `gatekeeper: options.${err.message.replace(/^options\./, '')}`;
      throw err;
    }
  }
  const names = ledger.tiers;
  if (names.length > MAX_TIERS) throw new RangeError(`gatekeeper: at most ${MAX_TIERS} tiers, got ${names.length}`);
  names.forEach((n, i) => {
    if (!TIER_NAME.test(n)) throw new RangeError(`gatekeeper: tier ${i} of options.ledger is named ${JSON.stringify(n)}; gatekeeper tiers must be ${TIER_NAME_RULE}`);
  });
  const ids = new Map(names.map((n, i) => [n, i]));

  // The default tiers, given no tier: 'standard' (the lowest is for traffic someone chose to
  // shed first), and health probes 'critical' (a shed probe makes a load balancer pull the backend).
  const defaultTiers = options.tiers === undefined && options.ledger === undefined;
  let defaultTier = defaultTiers ? ids.get('standard') : names.length - 1;
  if (options.defaultTier !== undefined) {
    if (typeof options.defaultTier !== 'string') throw new TypeError(`gatekeeper: options.defaultTier must be a tier name, got ${typeName(options.defaultTier)}`);
    defaultTier = ids.get(options.defaultTier);
    if (defaultTier === undefined) throw new RangeError(`gatekeeper: options.defaultTier "${options.defaultTier}" is not one of the tiers (${names.join(', ')})`);
  }

  const tierHeader = tierHeaderOption(options.tierHeader, 'gatekeeper: options.tierHeader');
  if (options.trustTierHeader !== undefined) boolean(options.trustTierHeader, 'gatekeeper: options.trustTierHeader');
  const secrets = tierSecretOption(options.tierSecret, 'gatekeeper: options.tierSecret');
  const headersOpt = options.rateLimitHeaders === undefined ? 'draft' : options.rateLimitHeaders;
  if (headersOpt !== false && !RATE_LIMIT_HEADER_MODES.includes(headersOpt)) {
    throw new TypeError(`gatekeeper: options.rateLimitHeaders must be ${RATE_LIMIT_HEADER_MODES.map((m) => `'${m}'`).join(', ')} or false, got ${JSON.stringify(headersOpt)}`);
  }
  const ipv4Prefix = options.ipv4Prefix === undefined ? 32 : finite(options.ipv4Prefix, 'gatekeeper: options.ipv4Prefix', { max: 32, integer: true });
  const ipv6Prefix = options.ipv6Prefix === undefined ? 56 : finite(options.ipv6Prefix, 'gatekeeper: options.ipv6Prefix', { max: 128, integer: true });
  if (options.rateLimitHeadersOnSuccess !== undefined) boolean(options.rateLimitHeadersOnSuccess, 'gatekeeper: options.rateLimitHeadersOnSuccess');
  const cluster = options.cluster === undefined ? null : options.cluster;
  if (cluster !== null) {
    if (!(cluster instanceof Cluster)) throw new TypeError(`gatekeeper: options.cluster must be made by tiergate.cluster(), got ${typeName(cluster)}`);
    for (const t of cluster.tierNames) {
      if (!ids.has(t)) throw new RangeError(`gatekeeper: options.cluster has limits for tier "${t}", which is not one of the tiers (${names.join(', ')})`);
    }
    if (options.cost !== undefined && !Number.isInteger(options.cost)) throw new RangeError(`gatekeeper: options.cost must be an integer with options.cluster (leases hold whole tokens), got ${options.cost}`);
  }
  return {
    cluster,
    ledger,
    names,
    ids,
    defaultTier,
    tierHeader,
    trustTierHeader: options.trustTierHeader === true,
    secrets,
    routes: compileRoutes(defaultTiers && (options.routes === undefined || Array.isArray(options.routes)) ? [...(options.routes || []), ...PROBE_ROUTES] : options.routes, ids, 'gatekeeper: options.routes'),
    classify: optionalFn(options.classify, 'gatekeeper: options.classify'),
    key: compileKey(options.key, 'gatekeeper: options.key'),
    trustProxy: checkTrustProxy(options.trustProxy, 'gatekeeper: options.trustProxy'),
    ipv4Prefix,
    ipv6Prefix,
    defense: compileDefense(options, ids, { v4: ipv4Prefix, v6: ipv6Prefix }),
    cost: options.cost === undefined ? 1 : finite(options.cost, 'gatekeeper: options.cost'),
    shed: shedOptions(options.shed),
    concurrency: concurrencyOptions(options.concurrency),
    shedStatus: shedStatusOption(options.shedStatus),
    rateLimitHeaders: headersOpt,
    rateLimitHeadersOnSuccess: options.rateLimitHeadersOnSuccess === true,
    retryAfter: retryAfterOptions(options.retryAfter, 'gatekeeper: options.retryAfter'),
    respond: optionalFn(options.respond, 'gatekeeper: options.respond'),
    onDecision: optionalFn(options.onDecision, 'gatekeeper: options.onDecision'),
    onShed: optionalFn(options.onShed, 'gatekeeper: options.onShed'),
    onReject: optionalFn(options.onReject, 'gatekeeper: options.onReject'),
  };
}

function once(fn) {
  let done = false;
  return (...a) => {
    if (!done) {
      done = true;
      fn(...a);
    }
  };
}

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
  // Once per hook: a hook that throws on every request must not flood the log, nor hide another's.
  #hooksWarned = new Set();
  #warnHook(name, err) {
    if (this.#hooksWarned.has(name)) return;
    this.#hooksWarned.add(name);
    process.emitWarning(`tiergate: options.${name} threw: ${err && err.stack ? err.stack : err}`, 'TiergateWarning');
  }
  #warnClassify = once((v) => process.emitWarning(`tiergate: options.classify returned ${JSON.stringify(String(v))}, which is not a tier; using the route rules or the default tier`, 'TiergateWarning'));

  // As express-rate-limit does: behind a proxy with trustProxy off, every client shares the proxy's key.
  #warnForwarded = once(() => process.emitWarning(
    'tiergate: a request carries X-Forwarded-For but options.trustProxy is off, so clients are keyed by the socket peer (your proxy?): set trustProxy to the number of proxies in front',
    { type: 'TiergateWarning', code: 'ERR_TIERGATE_UNEXPECTED_X_FORWARDED_FOR' },
  ));

  #warnKey = once((v) => process.emitWarning(`tiergate: options.key returned ${typeName(v)}, not a string; keying by the client IP`, 'TiergateWarning'));

  // A user id is often a number: key by its text rather than silently by IP; warn about other types.
  #fnKey(v) {
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
    if (typeof v !== 'string' && v !== undefined && v !== null) this.#warnKey(v);
    return usableKey(v);
  }

  /** `routing`: how the framework in front routes a target (lib/adapters/routing.js); node:http's by default. */
  constructor(options, routing = DIALECTS.http) {
    buildingOptions(() => this.#build(options, routing));
  }

  #build(options, routing) {
    const o = normalize(options);
    o.routing = routing;
    this.#o = o;
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
      }, s); // the shed options go as they are: src/node/gate.rs reads them by name
    } catch (err) {
      // The ledger's native units in its message (`cost 3 exceeds tiers[0].perKey.capacity 2`): a
      // bucket's capacity is its `burst` as the options say it.
      if (err && err.code === 'InvalidArg') throw new RangeError(`gatekeeper: ${err.message.replace(/(tiers\[\d+\](?:\.perKey)?)\.capacity\b/g, '$1.burst')}`, { cause: err });
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
    this.#observe = o.onDecision !== null || o.rateLimitHeadersOnSuccess || o.perKeyByTier.some(Boolean);
    if (o.concurrency !== null) {
      this.#slots = new Slots(this.#handle, o.names.length, o.concurrency, {
        shed: (w, waitedMs, why) => this.#slotShed(w, waitedMs, why),
        run: (w) => this.#runWaiter(w),
        warn: (name, err) => this.#warnHook(name, err),
      });
    }
    if (s.enabled && s.turnBudgetMs > 0) {
      const prot = this.#handle.stats().tiers.map((t) => t.protected);
      this.#queue = new TurnQueue(prot, s, (w, waitedMs) => this.#queueShed(w, waitedMs));
    }
    if (o.defense !== null) {
      this.#defense = new Defense(o.defense, {
        routing,
        headers: o.rateLimitHeaders,
        headersOnSuccess: o.rateLimitHeadersOnSuccess,
        trustProxy: o.trustProxy,
        warn: (name, err) => this.#warnHook(name, err),
      });
      this.#defense.bindGate(this.#handle);
      // Limits scoped to tiers need the tier before the defense decides: the header's rule, natively.
      if (this.#defense.needsTier && o.tierHeader !== null) this.#tierHeader = new TierHeader(o.names, o.defaultTier, o.trustTierHeader, o.secrets);
    }
    if (o.defense !== null && o.defense.clusterLimits.length > 0 && o.cluster === null) {
      throw new TypeError(`${o.defense.clusterLimits[0].at}.cluster: a cluster limit needs options.cluster (tiergate.cluster({ limits }) with a limit of that name)`);
    }
    if (o.cluster !== null && this.#defense !== null) {
      // One ban table per process: with the defense, cluster bans are its bans (CIDR, escalation, lists).
      o.cluster.useDefense(this.#defense);
      this.#defense.bindCluster(o.cluster);
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

  /** The guard contract of lib/adapters/index.js: null to proceed, or the rejection to send. */
  admit(req, res, route) {
    const o = this.#o;
    let tier = -1;
    let given = null;
    if (o.classify !== null) {
      const name = o.classify(req);
      if (name !== undefined && name !== null) {
        const id = o.ids.get(name);
        if (id === undefined) this.#warnClassify(name);
        else {
          tier = id;
          given = 'classify';
        }
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
      const d = this.#defense;
      const out = d.check(req, res, tier, ip, this.#sel, header, key);
      if (out !== null) {
        if (out.exempt === true) return null; // allow-listed or skipped, and exemptSkipsShedding
        if (typeof out.then !== 'function') return this.#refusedByDefense(out, req, tier, given);
        // A shaper's delay: the gate decides when the slot comes (the loop's health then).
        return out.then((v) => (v === null ? this.#gate(req, res, tier, given, header, truncated, ip) : this.#refusedByDefense(v, req, tier, given)));
      }
      if (d.gateVerdict >= 0) return this.#after(d.gateVerdict, req, res, given, key);
      return this.#gate(req, res, tier, given, header, truncated, ip);
    }
    return this.#gate(req, res, tier, given, header, truncated, undefined);
  }

  // The tier pool and the shed controller: one native call. `ip`: the client address if known already.
  #gate(req, res, tier, given, header, truncated, ip) {
    const key = this.#gateKey(req, tier, truncated, ip);
    return this.#after(this.#decide(this.#sel, header, key), req, res, given, key);
  }

  // The gate's per-key identity for `decide`; its `sel` goes to this.#sel (no pair allocated).
  #gateKey(req, tier, truncated, ip) {
    const o = this.#o;
    let sel = tier + 1;
    let key;
    if (this.#needKey) {
      const k = o.key;
      if (k.kind === 'header') key = truncated ? undefined : usableKey(req.headers[k.header]);
      else if (k.kind === 'fn') key = this.#fnKey(k.fn(req));
      if (key === undefined) {
        if (o.trustProxy === 0 && req.headers['x-forwarded-for'] !== undefined) this.#warnForwarded();
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
    if (verdict === 0 && this.#o.cluster !== null) out = this.#clusterStep(req, res, given, key);
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
  #runWaiter(w) {
    const q = this.#queue;
    const r = this.#result;
    if (q === null || (!q.active && q.calm(r[R.PRESSURE], r[R.LAG_MS], r[R.INLINE_RUN_MS]))) return w.settle(null);
    const out = q.admit(w.req, w.res, w.tier, r[R.PRESSURE], r[R.LAG_MS], r[R.INLINE_RUN_MS], w.source, w.key);
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
    if (!this.#wantsInfo(VERDICT.SHED)) return rejection;
    const s = this.#handle.stats(); // off the hot path: the controller as it is now
    const info = {
      verdict: 'shed',
      status: rejection.status,
      tier: o.names[w.tier],
      tierSource: w.source,
      key: w.key,
      remaining: 0,
      limit: 0,
      retryAfterMs: 0,
      resetMs: 0,
      refillScale: s.tiers[w.tier].refillScale,
      pressure: s.pressure,
      lagMs: s.controllerLagMs,
      cause,
      queueWaitMs: waitedMs,
    };
    if (more !== undefined) more(info, s);
    if (o.respond !== null) rejection = this.#respond(info, w.req, rejection);
    // In the waiter's own async context (that of its then()), not that of the turn or the request
    // that shed it: hooks and channel subscribers (a tracer's active span) see this request's.
    if (w.context !== null) w.context.runInAsyncScope(this.#emit, this, info, w.req, o.onShed);
    else this.#emit(info, w.req, o.onShed);
    return rejection;
  }

  // Admitted here: the cluster's bans, per-key limit and tier budget decide too (lib/cluster). A key
  // waiting for its first lease makes this a Promise, settled within the cluster's storeTimeoutMs.
  #clusterStep(req, res, given, key) {
    const o = this.#o;
    const tier = this.#result[R.TIER];
    const dfn = this.#defense;
    const named = dfn === null ? null : req[CLUSTER_STEP] || dfn.clusterStep;
    const d = o.cluster.gate(o.names[tier], key, o.cost, named);
    if (d === null) return this.#observe || decisionChannel.hasSubscribers ? this.#settle(0, req, res, given, key) : null;
    if (typeof d.then !== 'function') return this.#clusterRefused(d, tier, req, given, key);
    const r = this.#result.slice(); // the result array is the next request's by the time the store answers
    return d.then((late) => {
      if (late !== null) return this.#clusterRefused(late, tier, req, given, key, r);
      return this.#observe || decisionChannel.hasSubscribers ? this.#settle(0, req, res, given, key, r) : null;
    });
  }

  #clusterRefused(d, tier, req, given, key, r = this.#result) {
    const o = this.#o;
    if (d.limit === 'named') {
      const ip = clientIp(req, o.trustProxy, headersTruncated(req));
      const out = this.#defense.clusterRefusal(d.index, d.retryAfterMs, ip, d.quota);
      out.info.cause = 'cluster';
      out.info.cluster = { limit: d.name, reason: d.reason };
      return this.#refusedByDefense(out, req, tier, given);
    }
    const rejection = clusterRejection(this.#responder, d, tier, o.names[tier]);
    const hooked = o.onReject !== null || o.onDecision !== null || decisionChannel.hasSubscribers;
    if (hooked || o.respond !== null) {
      const info = {
        verdict: d.code === CLUSTER_BANNED ? 'banned' : rejection.status === 429 ? 'rate-limited' : 'tier-full',
        status: rejection.status,
        tier: o.names[tier],
        tierSource: given !== null ? given : SOURCES[r[R.SOURCE]],
        key,
        remaining: 0,
        limit: d.quota,
        retryAfterMs: d.retryAfterMs,
        resetMs: d.retryAfterMs,
        refillScale: r[R.SCALE],
        pressure: r[R.PRESSURE],
        lagMs: r[R.LAG_MS],
        cause: 'cluster',
        cluster: { limit: d.limit, reason: d.reason },
      };
      const out = o.respond !== null ? this.#respond(info, req, rejection) : rejection;
      this.#emit(info, req, o.onReject);
      return out;
    }
    return rejection;
  }

  // Off the fast path: an admit someone observes, or a refusal.
  #settle(verdict, req, res, given, key, r = this.#result) {
    const o = this.#o;
    const tier = r[R.TIER];
    let info = null;
    if (this.#wantsInfo(verdict)) {
      info = {
        verdict: VERDICT_NAMES[verdict],
        status: STATUS[verdict],
        tier: o.names[tier],
        tierSource: given !== null ? given : SOURCES[r[R.SOURCE]],
        key,
        remaining: r[R.REMAINING],
        limit: r[R.LIMIT],
        retryAfterMs: r[R.RETRY_AFTER_MS],
        resetMs: r[R.RESET_MS],
        refillScale: r[R.SCALE],
        pressure: r[R.PRESSURE],
        lagMs: r[R.LAG_MS],
        cause: CAUSES[r[R.CAUSE]],
      };
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
      this.#emit(info, req, null);
      return null;
    }
    let rejection;
    if (verdict === VERDICT.RATE_LIMITED) rejection = this.#responder.rateLimited(tier, r[R.REMAINING], r[R.RETRY_AFTER_MS], r[R.RESET_MS]);
    else if (verdict === VERDICT.TIER_FULL) rejection = this.#responder.tierFull(tier, r[R.RETRY_AFTER_MS]);
    else rejection = this.#responder.shed(tier);
    if (o.respond !== null) rejection = this.#respond(info, req, rejection);
    this.#emit(info, req, this.#hookFor(verdict));
    return rejection;
  }

  // options.respond's answer in place of `rejection`, when it gives a valid one.
  #respond(info, req, rejection) {
    let custom;
    try {
      custom = this.#o.respond(info, req, rejection);
    } catch (err) {
      this.#warnHook('respond', err);
    }
    if (custom === undefined || custom === null) return rejection;
    // node:http throws on a status outside 100..999 inside the adapter, off any try; 100..599 are HTTP's.
    if (typeof custom !== 'object' || !Number.isInteger(custom.status) || custom.status < 100 || custom.status > 599) {
      this.#warnHook('respond', new TypeError('must return { status: 100..599, headers?, body? } or undefined'));
      return rejection;
    }
    let body = custom.body === undefined || custom.body === null ? '' : custom.body;
    const headers = { ...(custom.headers || {}) };
    if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
      body = JSON.stringify(body);
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    }
    return { status: custom.status, headers, body };
  }

  // Whether anyone reads a decision's info: onDecision, the channel, or for a refusal respond or its hook.
  #wantsInfo(verdict) {
    const o = this.#o;
    return o.onDecision !== null || decisionChannel.hasSubscribers || (verdict !== 0 && (o.respond !== null || this.#hookFor(verdict) !== null));
  }

  // onShed reports overload sheds (the loop's health refused the request); onReject reports quota
  // refusals: the key's (429) and the tier's budget (tier-full, 503), which happen on a healthy loop.
  #hookFor(verdict) {
    return verdict === VERDICT.SHED ? this.#o.onShed : this.#o.onReject;
  }

  // A refusal by the defense layers: the hooks and the channel see it as any refusal.
  #refusedByDefense(out, req, tier, given) {
    const o = this.#o;
    let rejection = out.rejection;
    const hook = o.onReject;
    if (out.info === null) return rejection;
    const needInfo = o.onDecision !== null || hook !== null || o.respond !== null || decisionChannel.hasSubscribers;
    if (!needInfo) return rejection;
    const info = out.info;
    // The tier as far as known: a refused request's tier header is not read (the default tier then).
    info.tier = o.names[tier >= 0 ? tier : o.defaultTier];
    info.tierSource = tier >= 0 && given !== null ? given : 'default';
    if (o.respond !== null && out.verdict !== 'challenged') rejection = this.#respond(info, req, rejection);
    if (o.onDecision !== null) this.#call('onDecision', o.onDecision, info, req);
    if (hook !== null) this.#call('onReject', hook, info, req);
    if (decisionChannel.hasSubscribers) decisionChannel.publish(info);
    return rejection;
  }

  #emit(info, req, hook) {
    if (info === null) return;
    const o = this.#o;
    if (o.onDecision !== null) this.#call('onDecision', o.onDecision, info, req);
    if (hook !== null) this.#call(hook === o.onReject ? 'onReject' : 'onShed', hook, info, req);
    if (decisionChannel.hasSubscribers) decisionChannel.publish(info);
  }

  #call(name, fn, info, req) {
    try {
      fn(info, req);
    } catch (err) {
      this.#warnHook(name, err);
    }
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

  /**
   * Per tier (by name): admitted, shed, tierFull, rateLimited, refillScale, protected; and the loop:
   * lagMs, ewmaLagMs, p99LagMs, elu, heapUsed, heapLimit, heapRatio, stalled; and the controller:
   * pressure (0..1), pressureParts { lag, integral, turn }, busy (utilisation of the last ~100 ms it
   * read), cause, episodes, baselineMs, targetLagMs, criticalLagMs (in force), injected.
   */
  stats() {
    const s = this.#handle.stats();
    const tiers = {};
    const q = this.#queue;
    s.tiers.forEach((t, i) => {
      tiers[t.name] = { protected: t.protected, admitted: t.admitted, shed: t.shed, turnShed: t.turnShed, tierFull: t.tierFull, rateLimited: t.rateLimited, refillScale: t.refillScale };
      if (q === null) return;
      // The decision admitted what the turn queue holds or shed: a request counts as admitted once it
      // runs, as shed once the queue sheds it, so each request is counted once (and admitted only grows).
      const qt = q.tierStats(i);
      Object.assign(tiers[t.name], qt);
      tiers[t.name].admitted = Math.max(0, t.admitted - qt.queueShed - qt.queued);
      tiers[t.name].shed = t.shed + qt.queueShed;
    });
    return {
      tiers,
      queue: q === null ? null : q.stats(),
      concurrency: this.#slots === null ? null : { ...s.concurrency, ...this.#slots.stats() },
      lagMs: s.lagMs,
      ewmaLagMs: s.ewmaLagMs,
      p99LagMs: s.p99LagMs,
      controllerLagMs: s.controllerLagMs,
      busy: s.busy,
      pressureParts: { lag: s.pressureLag, integral: s.pressureIntegral, turn: s.pressureTurn },
      elu: s.elu,
      heapUsed: s.heapUsed,
      heapLimit: s.heapLimit,
      heapRatio: s.heapLimit > 0 ? s.heapUsed / s.heapLimit : 0,
      stalled: s.stalled,
      pressure: s.pressure,
      cause: s.cause,
      episodes: s.episodes,
      baselineMs: s.baselineMs,
      targetLagMs: s.targetLagMs,
      criticalLagMs: s.criticalLagMs,
      injected: s.injected,
    };
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

/** injectHealth's argument: the fields it names, each a finite number (stalled: a boolean). */
function checkHealth(health) {
  if (!isObject(health)) throw new TypeError(`injectHealth: health must be an object, got ${typeName(health)}`);
  const unknown = unknownKey(health, HEALTH_FIELDS);
  if (unknown !== undefined) throw new TypeError(`injectHealth: unknown field "${unknown}" (known: ${[...HEALTH_FIELDS].join(', ')})`);
  for (const k of HEALTH_NUMBERS) {
    if (health[k] !== undefined) finite(health[k], `injectHealth: ${k}`);
  }
  if (health.stalled !== undefined) boolean(health.stalled, 'injectHealth: stalled');
}

const METHODS = ['stats', 'resetStats', 'injectHealth', 'useLiveHealth', 'updateController'];

function expose(target, gk) {
  for (const m of METHODS) target[m] = gk[m].bind(gk);
  Object.defineProperty(target, 'gatekeeper', { value: gk });
  Object.defineProperty(target, 'ledger', { get: () => gk.ledger });
  Object.defineProperty(target, 'tiers', { get: () => gk.tiers });
  Object.defineProperty(target, 'defense', { get: () => gk.defense });
  Object.defineProperty(target, 'limits', { get: () => gk.limits });
  Object.defineProperty(target, 'cluster', { get: () => gk.cluster });
  return target;
}

/** Express 4/5 middleware: `app.use(gatekeeper(options))`. Carries stats(), injectHealth(), ... */
function gatekeeper(options) {
  const gk = new Gatekeeper(options, DIALECTS.express);
  return expose(expressMiddleware(gk), gk);
}

/** node:http: `http.createServer(gatekeeper.http(options, handler))`. */
gatekeeper.http = function http(options, handler) {
  const gk = new Gatekeeper(options);
  return expose(httpHandler(gk, handler), gk);
};

/** Koa 2/3: `app.use(gatekeeper.koa(options))`. */
gatekeeper.koa = function koa(options) {
  const gk = new Gatekeeper(options, DIALECTS.koa);
  return expose(koaMiddleware(gk), gk);
};

/** Fastify 5: `fastify.register(tiergatePlugin, options)`; the gate is `fastify.tiergate`. */
const tiergatePlugin = fastifyPlugin((options, routing) => new Gatekeeper(options, routing), 'tiergate');

/**
 * Mints a signed tier token for the tier header: `t1.<tier>.<expires>.<mac>`, HMAC-SHA256 with
 * `secret`, valid until `expiresAt` (Unix seconds) or for `ttlSec` seconds from now.
 */
function mintTierToken(secret, tier, when) {
  try {
    return mint(secret, tier, when);
  } catch (err) {
    throw withCode(err, CODES.INVALID_ARGUMENT);
  }
}

function mint(secret, tier, { ttlSec, expiresAt } = {}) {
  const key = secretBuffer(secret, 'mintTierToken: secret');
  if (typeof tier !== 'string') throw new TypeError(`mintTierToken: tier must be a tier name, got ${typeName(tier)}`);
  if (!TIER_NAME.test(tier)) throw new RangeError(`mintTierToken: tier must be ${TIER_NAME_RULE}, got ${JSON.stringify(tier)}`);
  if ((ttlSec === undefined) === (expiresAt === undefined)) throw new TypeError('mintTierToken: give exactly one of { ttlSec, expiresAt }');
  const exp = expiresAt !== undefined
    ? finite(expiresAt, 'mintTierToken: expiresAt', { max: 999_999_999_999, integer: true })
    : Math.floor(Date.now() / 1000) + finite(ttlSec, 'mintTierToken: ttlSec', { min: 1, max: 10 * 365 * 86400, integer: true });
  return native.mintTierToken(key, tier, exp);
}

module.exports = { gatekeeper, Gatekeeper, tiergatePlugin, mintTierToken, DECISION_CHANNEL, BAN_CHANNEL };

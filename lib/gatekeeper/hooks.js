'use strict';
// Who hears about a decision: the hooks (onDecision, onShed, onReject), options.respond's custom
// answer, the 'tiergate:decision' diagnostics channel, and the warnings a misbehaving hook or option
// function gets (once each: one that throws on every request must not flood the log, nor hide another's).
const diagnostics = require('node:diagnostics_channel');
const native = require('../native');
const { typeName } = require('../options');

const { verdict: VERDICT } = native.gateConstants();

/** diagnostics_channel name; every decision is published when it has subscribers. */
const DECISION_CHANNEL = 'tiergate:decision';
const decisionChannel = diagnostics.channel(DECISION_CHANNEL);

function once(fn) {
  let done = false;
  return (...a) => {
    if (!done) {
      done = true;
      fn(...a);
    }
  };
}

/** One gatekeeper's hooks; `o`: its normalized options (./options.js). */
class Hooks {
  #o;
  #warned = new Set();

  constructor(o) {
    this.#o = o;
  }

  /** Warns once per `name` that options.<name> threw `err`. */
  warn(name, err) {
    if (this.#warned.has(name)) return;
    this.#warned.add(name);
    process.emitWarning(`tiergate: options.${name} threw: ${err && err.stack ? err.stack : err}`, 'TiergateWarning');
  }

  /** Warns once per `name` that the promise options.<name> returned was rejected with `err`. */
  warnRejected(name, err) {
    const id = `${name} (rejected)`;
    if (this.#warned.has(id)) return;
    this.#warned.add(id);
    process.emitWarning(`tiergate: the promise options.${name} returned was rejected: ${err && err.stack ? err.stack : err}`, 'TiergateWarning');
  }

  warnClassify = once((v) => process.emitWarning(
    `tiergate: options.classify returned ${JSON.stringify(String(v))}, which is not a tier; using the route rules or the default tier`,
    'TiergateWarning',
  ));

  // As express-rate-limit does: behind a proxy with trustProxy off, every client shares the proxy's key.
  warnForwarded = once(() => process.emitWarning(
    'tiergate: a request carries X-Forwarded-For but options.trustProxy is off, so clients are keyed by the socket peer (your proxy?): ' +
      'set trustProxy to the number of proxies in front',
    { type: 'TiergateWarning', code: 'ERR_TIERGATE_UNEXPECTED_X_FORWARDED_FOR' },
  ));

  warnKey = once((v) => process.emitWarning(`tiergate: options.key returned ${typeName(v)}, not a string; keying by the client IP`, 'TiergateWarning'));

  /** options.respond's answer in place of `rejection`, when it gives a valid one. */
  respond(info, req, rejection) {
    let custom;
    try {
      custom = this.#o.respond(info, req, rejection);
    } catch (err) {
      this.warn('respond', err);
    }
    if (custom === undefined || custom === null) return rejection;
    // node:http throws on a status outside 100..999 inside the adapter, off any try; 100..599 are HTTP's.
    if (typeof custom !== 'object' || !Number.isInteger(custom.status) || custom.status < 100 || custom.status > 599) {
      this.warn('respond', new TypeError('must return { status: 100..599, headers?, body? } or undefined'));
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

  /** Whether anyone reads a decision's info: onDecision, the channel, or for a refusal respond or its hook. */
  wantsInfo(verdict) {
    const o = this.#o;
    return o.onDecision !== null || decisionChannel.hasSubscribers || (verdict !== 0 && (o.respond !== null || this.hookFor(verdict) !== null));
  }

  /**
   * onShed reports overload sheds (the loop's health refused the request); onReject reports quota
   * refusals: the key's (429) and the tier's budget (tier-full, 503), which happen on a healthy loop.
   */
  hookFor(verdict) {
    return verdict === VERDICT.SHED ? this.#o.onShed : this.#o.onReject;
  }

  /** A refusal by the defense layers: the hooks and the channel see it as any refusal. */
  refusedByDefense(out, req, tier, given) {
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
    if (o.respond !== null && out.verdict !== 'challenged') rejection = this.respond(info, req, rejection);
    if (o.onDecision !== null) this.#call('onDecision', o.onDecision, info, req);
    if (hook !== null) this.#call('onReject', hook, info, req);
    if (decisionChannel.hasSubscribers) decisionChannel.publish(info);
    return rejection;
  }

  /** Hands `info` (null: nobody wanted it) to onDecision, then `hook`, then the channel. */
  emit(info, req, hook) {
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
      this.warn(name, err);
    }
  }
}

module.exports = { Hooks, DECISION_CHANNEL, decisionChannel };

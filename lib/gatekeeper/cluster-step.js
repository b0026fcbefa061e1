'use strict';
// The cluster step of a decision the local gate admitted: the cluster's bans, per-key limit and tier
// budget (lib/cluster) decide too, and the named limits marked `cluster: true`. A request it refuses
// gives back what the local named limits counted for it (lib/defense/local-debit.js).
const native = require('../native');
const { clientIp, headersTruncated } = require('../http/client');
const { CLUSTER_STEP } = require('../defense');
const { CLUSTER_BANNED } = require('../cluster');
const { clusterRejection } = require('../cluster/respond');
const { decisionInfo } = require('./decision-info');
const { decisionChannel } = require('./hooks');

const { result: R, sources: SOURCES } = native.gateConstants();

class ClusterStep {
  #o;
  #result;
  #defense;
  #responder;
  #hooks;
  #observe;
  #admitted;

  /**
   * `o`: the gatekeeper's normalized options; `result`: the Float64Array its decisions fill; `admitted
   * (req, res, given, key, r)`: the gatekeeper's settlement of an admit (for hooks and req.rateLimit),
   * called when `observe` or the channel wants it.
   */
  constructor(o, { result, defense, responder, hooks, observe, admitted }) {
    this.#o = o;
    this.#result = result;
    this.#defense = defense;
    this.#responder = responder;
    this.#hooks = hooks;
    this.#observe = observe;
    this.#admitted = admitted;
  }

  /** null to proceed, a rejection, or (a key waiting for its first lease) a Promise of either, settled within the cluster's storeTimeoutMs. */
  gate(req, res, given, key) {
    const o = this.#o;
    const tier = this.#result[R.TIER];
    const dfn = this.#defense;
    const held = req[CLUSTER_STEP];
    const named = dfn === null ? null : held || dfn.clusterStep;
    const d = o.cluster.gate(o.names[tier], key, o.cost, named);
    if (d === null) return this.#observe || decisionChannel.hasSubscribers ? this.#admitted(req, res, given, key, this.#result) : null;
    if (typeof d.then !== 'function') {
      // All or nothing: a request the cluster refuses counts in no local named limit either.
      if (named !== null) dfn.giveBack(req, named);
      return this.#refused(d, tier, req, given, key, this.#result);
    }
    // The result array and the defense's step are the next request's by the time the store answers.
    const r = this.#result.slice();
    const step = named === null || held !== undefined || named.local === null ? named : { local: named.local.copy() };
    return d.then((late) => {
      if (late !== null) {
        if (step !== null) dfn.giveBack(req, step);
        return this.#refused(late, tier, req, given, key, r);
      }
      return this.#observe || decisionChannel.hasSubscribers ? this.#admitted(req, res, given, key, r) : null;
    });
  }

  #refused(d, tier, req, given, key, r) {
    const o = this.#o;
    const hooks = this.#hooks;
    if (d.limit === 'named') {
      const ip = clientIp(req, o.trustProxy, headersTruncated(req));
      const out = this.#defense.clusterRefusal(d.index, d.retryAfterMs, ip, d.quota);
      out.info.cause = 'cluster';
      out.info.cluster = { limit: d.name, reason: d.reason };
      return hooks.refusedByDefense(out, req, tier, given);
    }
    const rejection = clusterRejection(this.#responder, d, tier, o.names[tier]);
    const hooked = o.onReject !== null || o.onDecision !== null || decisionChannel.hasSubscribers;
    if (hooked || o.respond !== null) {
      const verdict = d.code === CLUSTER_BANNED ? 'banned' : rejection.status === 429 ? 'rate-limited' : 'tier-full';
      const info = decisionInfo(verdict, rejection.status, o.names[tier], given !== null ? given : SOURCES[r[R.SOURCE]], key,
        0, d.quota, d.retryAfterMs, d.retryAfterMs, r[R.SCALE], r[R.PRESSURE], r[R.LAG_MS], 'cluster');
      info.cluster = { limit: d.limit, reason: d.reason };
      const out = o.respond !== null ? hooks.respond(info, req, rejection) : rejection;
      hooks.emit(info, req, o.onReject);
      return out;
    }
    return rejection;
  }
}

module.exports = { ClusterStep };

'use strict';
// The gatekeeper's abuse-defense ban table as the cluster's ban table (see ./bans.js): one table per
// process, so a ban the defense makes (a rule's, or an operator's through gate.defense or
// cluster.bans) reaches every process, and a remote one lands in the defense's own table, CIDR
// prefixes, escalation count and permanence kept. Expiry, eviction and refusal stay local: each
// process ends a ban by its own clock, and what it evicts is its own memory bound.

/**
 * What `bans.lift` takes for a lifted target: a CIDR ban as it is; a client key as an address in it
 * (an IPv6 client is keyed by its prefix, `2001:db8::/56`, which lift() would read as a CIDR ban).
 */
function addressOf(e) {
  if (e.cidr === true) return e.target;
  const slash = e.target.indexOf('/');
  return slash < 0 ? e.target : e.target.slice(0, slash);
}

class DefenseTable {
  #d;

  /** `defense`: lib/defense's Defense (gate.defense). */
  constructor(defense) {
    this.#d = defense;
  }

  connect(report) {
    this.#d.share((change) => {
      if (change.kind === 'added') {
        const b = change.ban;
        // A ban reported the instant it is made has all its time left; at least 1 ms crosses.
        const durationMs = b.until === null ? null : Math.max(1, b.until - Date.now());
        report({ op: 'ban', target: b.target, cidr: b.cidr, durationMs, reason: b.reason, source: b.source, offense: b.offense });
      } else if (change.kind === 'lifted') report({ op: 'lift', target: change.ban.target, cidr: change.ban.cidr });
      else if (change.kind === 'lists') report({ op: 'lists', allow: change.allow, deny: change.deny });
    });
  }

  ban(target, { durationMs = null, reason = 'operator' } = {}) {
    this.#d.bans.ban(target, { durationMs, reason });
  }

  lift(target) {
    this.#d.bans.lift(target);
  }

  setLists(lists) {
    this.#d.setLists(lists);
  }

  /**
   * A remote event: a ban as a record (the longer ban wins, as import does); a lift (of a ban that
   * began before `before`: ./bans.js); the lists.
   */
  apply(e) {
    if (e.op === 'ban') {
      const now = Date.now();
      this.#d.bans.import([{ target: e.target, cidr: e.cidr, reason: e.reason, source: e.source, offense: e.offense, since: now, until: e.durationMs === null ? null : now + e.durationMs }]);
    } else if (e.op === 'lift') {
      const target = addressOf(e);
      const b = this.#d.bans.get(target);
      if (b === null || !(b.since > e.before)) this.#d.bans.lift(target);
    }
    else this.#d.setLists({ allow: e.allow, deny: e.deny });
  }

  get size() {
    return this.#d.stats().bans;
  }
}

module.exports = { DefenseTable };

'use strict';
// The dashboard's live series: once per interval, the components' stats() become one sample (counters
// turned into per-second rates), kept in a bounded ring (the last `historySec` seconds) and pushed to
// every open stream. One unref'd timer; nothing runs per request.
//
// Each section reads one component and returns { value, raw } (raw: the counters the next sample's
// rates are taken against), or undefined when absent. `bans` (the gatekeeper's abuse defense) is
// { active, added, refused }: bans in force, bans added per second, and requests refused per second
// by a ban or the deny list; the page draws it when a sample has it.

/** Per-second rate of a counter between two readings; a counter that went down was reset. */
function rate(now, before, dt) {
  if (before === undefined) return 0;
  return (now >= before ? now - before : now) / dt;
}

const SECTIONS = {
  gatekeeper(c, prev, dt) {
    if (!c.gatekeeper) return undefined;
    const s = c.gatekeeper.stats();
    const tiers = {};
    const raw = {};
    for (const [name, t] of Object.entries(s.tiers)) {
      const p = prev && prev.raw.gatekeeper ? prev.raw.gatekeeper[name] : undefined;
      raw[name] = t;
      tiers[name] = {
        protected: t.protected,
        admitted: rate(t.admitted, p && p.admitted, dt),
        shed: rate(t.shed, p && p.shed, dt),
        tierFull: rate(t.tierFull, p && p.tierFull, dt),
        rateLimited: rate(t.rateLimited, p && p.rateLimited, dt),
        refillScale: t.refillScale,
        shadowShed: rate(t.shadowShed, p && p.shadowShed, dt),
      };
    }
    // The learned concurrency limit, as it is now.
    const k = s.concurrency;
    const concurrency = k === null ? null : { limit: k.limit, inFlight: k.inFlight, waiting: k.waiting };
    const value = { tiers, pressure: s.pressure, cause: s.cause, controllerLagMs: s.controllerLagMs, targetLagMs: s.targetLagMs, criticalLagMs: s.criticalLagMs, episodes: s.episodes, concurrency };
    return { value, raw, loop: s };
  },
  queue(c, prev, dt) {
    if (!c.queue) return undefined;
    const s = c.queue.stats();
    const tiers = {};
    const raw = {};
    for (const [name, t] of Object.entries(s.tiers)) {
      const p = prev && prev.raw.queue ? prev.raw.queue[name] : undefined;
      const refused = t.rejected + t.displaced + t.timeout + t.codel;
      raw[name] = { admitted: t.admitted, refused };
      tiers[name] = { queued: t.queued, dispatched: rate(t.admitted, p && p.admitted, dt), refused: rate(refused, p && p.refused, dt), waitP99Ms: t.waitMs.p99, waitMaxMs: t.waitMs.max };
    }
    return { value: { inFlight: s.inFlight, limit: s.limit, queued: s.queued, maxQueue: s.maxQueue, standing: s.standing, tiers }, raw };
  },
  bans(c, prev, dt) {
    const d = c.gatekeeper ? c.gatekeeper.defense : null;
    if (!d) return undefined;
    const s = d.stats();
    const p = prev && prev.raw.bans;
    const raw = { added: s.added, refused: s.refusals.banned + s.refusals.denyListed };
    // Operators' limit overrides in force (gate.limits.override): this process's, and the cluster's as last read.
    const o = s.overrides || { count: 0 };
    const overrides = { local: o.count, cluster: o.cluster ? o.cluster.count : null };
    return { value: { active: s.bans, added: rate(raw.added, p && p.added, dt), refused: rate(raw.refused, p && p.refused, dt), overrides }, raw };
  },
};

class Sampler {
  /** `c`: the components (lib/metrics/components.js); `health`: a Health (lib/metrics/status.js) or null. */
  constructor(c, { intervalMs, historySec, health }) {
    this.c = c;
    this.intervalMs = intervalMs;
    this.capacity = Math.max(2, Math.ceil((historySec * 1000) / intervalMs));
    this.ring = [];
    this.listeners = new Set();
    this.health = health;
    this.prev = null;
    this.timer = null;
  }

  start() {
    if (this.timer !== null) return;
    this.take();
    this.timer = setInterval(() => this.take(), this.intervalMs);
    this.timer.unref();
  }

  stop() {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  take() {
    const now = Date.now();
    const dt = this.prev === null ? 1 : Math.max(0.001, (now - this.prev.t) / 1000);
    const sample = { t: now };
    const raw = {};
    let loop = null;
    for (const [name, read] of Object.entries(SECTIONS)) {
      const part = read(this.c, this.prev, dt);
      if (part === undefined) continue;
      sample[name] = part.value;
      raw[name] = part.raw;
      if (part.loop) loop = part.loop;
    }
    if (this.c.lag) {
      const l = this.c.lag.stats();
      sample.loop = { lagMs: l.lagMs, p99LagMs: l.p99Ms, maxLagMs: l.maxMs, elu: l.elu, stalled: l.stalled, heapRatio: l.heapRatio };
    } else if (loop !== null) {
      sample.loop = { lagMs: loop.lagMs, p99LagMs: loop.p99LagMs, maxLagMs: loop.p99LagMs, elu: loop.elu, stalled: loop.stalled, heapRatio: loop.heapRatio };
    }
    if (this.health !== null) {
      const h = this.health.check(now);
      sample.health = { status: h.status, reasons: h.reasons };
    }
    this.prev = { t: now, raw };
    this.ring.push(sample);
    if (this.ring.length > this.capacity) this.ring.shift();
    for (const fn of this.listeners) fn(sample);
    return sample;
  }

  history() {
    return this.ring.slice();
  }

  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

module.exports = { Sampler, SECTIONS };

//! The gatekeeper's decision: one call per request that resolves the tier, reads the loop's health,
//! moves the shed controller when due, applies its scales to the ledger, and debits the tier pool and
//! the key's bucket.
//!
//! Verdicts:
//! - `Admit`;
//! - `Shed`: the loop is overloaded and the request's tier is being shed (its refill scale is zero, so
//!   it is refused at once without touching its bucket — a zero scale means "shed now", not "after
//!   the bucket has drained"; or its pool ran dry while the controller is throttling it);
//! - `TierFull`: the tier's pool is empty while the loop is healthy (the tier's configured capacity);
//! - `KeyLimited`: the key's own bucket is empty (a per-client quota: 429).
//!
//! When the controller lowers a tier's scale, the pool's tokens are clamped to `capacity × scale` as
//! well: the scale throttles the tier's budget, burst included, so a tier that recovers from zero does
//! not release a stored burst into a loop that has just recovered.
//!
//! In-band lag: the sampler's timer cannot tick while the loop is busy with a long run of requests, so
//! a health record alone would report the loop's state as of its last tick. The gate therefore also
//! notes when it first saw the current tick, and the loop's cumulative idle time then (libuv's
//! `uv_metrics_idle_time`: time spent waiting for I/O). The time since, minus the idle time since, is
//! how long the loop has been *busy* without letting the timer run; beyond the sampler's interval the
//! timer is late by at least the difference, and that lower bound feeds the controller too. This is
//! what lets shedding start within the very run of requests that is choking the loop — while a process
//! that was merely descheduled while it waited for I/O (a noisy neighbour) is not mistaken for one.
//!
//! Turn budget: the refill scales set a rate, and a bucket admits its tokens in bursts: on a
//! CPU-bound route, a burst admitted in one event-loop turn runs back to back, and every request
//! behind it — a protected one included, and those still unread in their sockets — waits for all of
//! it. So during an episode (pressure > 0) an unprotected request is also shed once the current turn
//! has run `turn_budget_ms` (`turn_age_ms`: time since the loop last came back from polling for I/O).
//! A turn then holds at most about one budget of unprotected work, the protected tiers' latency stays
//! near one request's, and the budget's sheds renew the controller's hold: they mean the loop is still
//! over capacity even though the lag they keep down no longer shows it.
//!
//! Concurrency: an admitted request also takes a slot of the learned concurrency limit
//! (`core::concurrency`): the overload the loop cannot see (a saturated database pool or upstream).
//! A protected tier's request always gets one; another waits for one (`Slot::Wait`: the caller
//! queues it in tier order, or sheds it) while the limit is in use — unless the loop itself is the
//! bottleneck (busy, lagging, or in a lag episode): then the controller above governs, the limit
//! does not bind, and a finished request's latency is no sample (it inflates from the loop). The
//! caller releases each slot when its request finishes (`release`), with the request's latency.
//!
//! Shadow mode (`shadow.rs`): the overload decisions above are made and counted, and a request they
//! would refuse or hold is admitted (`Decision::shadow`, `Slot::Shadow`), but for a share enforced.
//!
//! Files: `config.rs` (the gate's options), `tier.rs` (the tier header: names and signed tokens),
//! `burst.rs` (costly requests run back to back in one turn, for the turn queue), `debit.rs` (the
//! tier pool, the key's bucket and the slot), `slots.rs` (the concurrency limit's slots),
//! `shadow.rs` (shadow mode), `stats.rs` (the figures).
mod burst;
mod config;
mod debit;
mod options;
mod shadow;
mod slots;
mod stats;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_shadow;
mod tier;

pub use burst::InlineRuns;
pub use config::{check_cost, GateConfig};
pub use options::{OptionValue, ShedOption, ShedOptions, SHED_OPTIONS};
pub use tier::{TierHeaderRule, TierSource, MAX_HEADER_LEN};

use crate::core::concurrency::{Concurrency, ConcurrencyStats, Slot};
use crate::core::health::{HealthSample, LoopHealth};
use crate::core::ledger::{Ledger, Limit, Outcome};
use crate::core::names::named_enum;
use crate::core::net::ipkey::{ip_key, IpKeyBuf, MAX_KEY_LEN as MAX_IP_KEY_LEN};
use crate::core::shed::{Cause, ShedConfigError, ShedController, ShedInput};
use parking_lot::Mutex;
use shadow::Shadow;
use std::sync::Arc;

/// Time constant (ms) of the gate's short-window utilisation (`ShedInput::busy`).
const BUSY_TAU_MS: f64 = 100.0;
/// Above this short-window utilisation the loop is the bottleneck: the concurrency limit does not
/// bind, and a finished request's latency is no sample of the downstream's...
pub const LOOP_BUSY: f64 = 0.75;
/// ... nor from this share of the shed controller's target lag. (Not from a quarter, where the turn
/// queue starts: a mixed route's loop, ~1 ms of CPU a request, lags 5 ms at moments of a 3x step; the
/// limit stopped binding then and the downstream flooded, critical p99 0.8–1.3 s in 2 of 10 runs.)
pub const LOOP_LATE_LAG_SHARE: f64 = 0.5;
/// Leads every client-IP key in the ledger, so IP keys and given keys (user ids) are separate
/// namespaces: `x-user-id: 127.0.0.1` must not share the bucket of the client at 127.0.0.1. Given
/// keys come from JS strings as UTF-8, which never contains the byte 0xFF.
pub const IP_KEY_TAG: u8 = 0xFF;
/// `Gate::decide`'s `ranked` for a decision with no fair-share backstop.
pub const UNRANKED: Option<Ranking> = None;
/// A concrete type for `UNRANKED`: `(admits, refused)`.
type Ranking = (fn(f64, f64) -> bool, fn());

named_enum! {
    /// What the gate decided (module notes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Verdict: u8 {
        Admit = "admit",
        Shed = "shed",
        TierFull = "tier-full",
        KeyLimited = "rate-limited",
    }
}

impl Verdict {
    /// The HTTP status a refusal of this kind answers with (200 for an admit).
    pub fn http_status(self) -> u16 {
        match self {
            Verdict::Admit => 200,
            Verdict::Shed | Verdict::TierFull => 503,
            Verdict::KeyLimited => 429,
        }
    }
}

/// Everything one decision produced, for the response headers and the hooks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    pub tier: usize,
    pub source: TierSource,
    /// The debit's outcome (zeros when the request was shed before any debit).
    pub outcome: Outcome,
    pub scale: f64,
    pub pressure: f64,
    pub lag_ms: f64,
    pub cause: Cause,
    /// The admitted request's slot of the concurrency limit (`Slot::None` for a refusal).
    pub slot: Slot,
    /// The concurrency limit's pressure (0..1: from 80% of it in use to all of it).
    pub load: f64,
    /// The epoch of the slot (`Concurrency::release` takes it back).
    pub epoch: u64,
    /// Shadow mode: the controller would have shed this admitted request.
    pub shadow: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierCounters {
    pub admitted: u64,
    /// Shed by the controller, the turn budget's included.
    pub shed: u64,
    /// Of `shed`: by the turn budget.
    pub turn_shed: u64,
    pub tier_full: u64,
    pub key_limited: u64,
    /// Shadow mode: admitted, and the controller would have shed them.
    pub shadow_shed: u64,
}

/// A reading of the gate for `stats()`.
#[derive(Clone, Debug, PartialEq)]
pub struct GateStats {
    pub counters: Vec<TierCounters>,
    pub scales: Vec<f64>,
    pub health: HealthSample,
    pub injected: bool,
    pub input: ShedInput,
    pub pressure: f64,
    /// The pressure's parts: proportional, integral, turn (`ShedController::parts`).
    pub parts: (f64, f64, f64),
    pub cause: Cause,
    pub episodes: u64,
    pub baseline_ms: f64,
    pub thresholds_ms: (f64, f64),
    pub concurrency: ConcurrencyStats,
}

struct State {
    ctl: ShedController,
    health: Arc<LoopHealth>,
    injected: bool,
    /// Scales as last applied to the ledger by this gate.
    applied: Vec<f64>,
    next_update_ns: u64,
    last_ticks: u64,
    tick_seen_ns: u64,
    /// The loop's cumulative idle time when the current tick was first seen.
    idle_seen_ns: u64,
    input: ShedInput,
    /// Utilisation of the last ~100 ms (EWMA of busy time over wall time between updates), and the
    /// time and idle total it was last updated at.
    busy: f64,
    busy_seen: Option<(u64, u64)>,
    counters: Vec<TierCounters>,
    /// Per tier, its tokens as this gate's last tier-only debit left them (NaN: not known), for the
    /// ranked decision.
    levels: Vec<f64>,
    conc: Concurrency,
    /// Requests waiting for a slot, as the caller last said (`release`).
    waiting: u32,
    shadow: Option<Shadow>,
}

pub struct Gate {
    ledger: Arc<Ledger>,
    cfg: GateConfig,
    protected: Vec<bool>,
    update_interval_ns: u64,
    state: Mutex<State>,
}

const NS_PER_MS: f64 = 1e6;

impl Gate {
    pub fn new(ledger: Arc<Ledger>, cfg: GateConfig, health: Arc<LoopHealth>) -> Result<Gate, ShedConfigError> {
        let n = ledger.tier_count();
        let protected: Vec<bool> = (0..n).map(|t| ledger.is_protected(t)).collect();
        if cfg.default_tier >= n {
            return Err(ShedConfigError { field: "defaultTier", reason: "must name a tier" });
        }
        if !(cfg.cost.is_finite() && cfg.cost >= 0.0) {
            return Err(ShedConfigError { field: "cost", reason: "must be a finite number >= 0" });
        }
        for (v, field) in [(cfg.update_interval_ms, "updateIntervalMs"), (cfg.resolution_ms, "resolutionMs")] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ShedConfigError { field, reason: "must be a finite number >= 0" });
            }
        }
        cfg.concurrency.check().map_err(|reason| ShedConfigError { field: "concurrency", reason })?;
        if cfg.shadow.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
            return Err(ShedConfigError { field: "shadow.enforcePercent", reason: "must be a number from 0 to 100" });
        }
        let ctl = ShedController::new(cfg.shed.clone(), &protected)?;
        let applied = (0..n).map(|t| ledger.refill_scale(t)).collect();
        Ok(Gate {
            update_interval_ns: (cfg.update_interval_ms * NS_PER_MS) as u64,
            state: Mutex::new(State {
                ctl,
                health,
                injected: false,
                applied,
                next_update_ns: 0,
                last_ticks: 0,
                tick_seen_ns: 0,
                idle_seen_ns: 0,
                input: ShedInput::default(),
                busy: 0.0,
                busy_seen: None,
                counters: vec![TierCounters::default(); n],
                levels: vec![f64::NAN; n],
                conc: Concurrency::new(cfg.concurrency.clone()),
                waiting: 0,
                shadow: cfg.shadow.map(|p| Shadow::new(p, n)),
            }),
            ledger,
            cfg,
            protected,
        })
    }

    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    /// Replaces the live health record with fixed figures (a test seam: the controller then sees
    /// exactly these until `use_health` is called). Takes effect on the next decision.
    pub fn inject_health(&self, sample: &HealthSample) {
        let h = LoopHealth::default();
        h.record_tick(sample.latest_lag_ms, sample.ewma_lag_ms, sample.p99_lag_ms);
        h.set_elu(sample.elu);
        h.set_heap(sample.heap_used, sample.heap_limit);
        h.set_stalled(sample.stalled);
        let mut st = self.state.lock();
        st.health = Arc::new(h);
        st.injected = true;
        st.next_update_ns = 0;
    }

    /// Reads health from `health` again (ends an injection).
    pub fn use_health(&self, health: Arc<LoopHealth>) {
        let mut st = self.state.lock();
        st.health = health;
        st.injected = false;
        st.last_ticks = 0;
        st.next_update_ns = 0;
    }

    /// Moves the controller now, whatever the update interval; returns whether any scale changed.
    /// `idle_ns`: the loop's cumulative idle time (0 if unknown: then all time counts as busy).
    pub fn update_now(&self, now_ns: u64, idle_ns: u64) -> bool {
        let mut st = self.state.lock();
        self.update(&mut st, now_ns, idle_ns)
    }

    fn update(&self, st: &mut State, now_ns: u64, idle_ns: u64) -> bool {
        st.next_update_ns = now_ns.saturating_add(self.update_interval_ns);
        let sample = st.health.sample();
        let mut input = ShedInput::from_sample(&sample, self.cfg.lag_signal);
        if !st.injected && self.cfg.resolution_ms > 0.0 && sample.ticks > 0 {
            if sample.ticks != st.last_ticks {
                st.last_ticks = sample.ticks;
                st.tick_seen_ns = now_ns;
                st.idle_seen_ns = idle_ns;
            } else {
                let since = now_ns.saturating_sub(st.tick_seen_ns);
                let idle = idle_ns.saturating_sub(st.idle_seen_ns).min(since);
                let busy_ms = (since - idle) as f64 / NS_PER_MS;
                let pending = busy_ms - self.cfg.resolution_ms;
                if pending > input.lag_ms {
                    input.lag_ms = pending;
                }
            }
        }
        if let Some((t0, idle0)) = st.busy_seen {
            let dt = now_ns.saturating_sub(t0);
            if dt > 0 {
                let idle = idle_ns.saturating_sub(idle0).min(dt);
                let frac = 1.0 - idle as f64 / dt as f64;
                st.busy += (frac - st.busy) * (1.0 - (-(dt as f64) / (BUSY_TAU_MS * NS_PER_MS)).exp());
            }
        }
        st.busy_seen = Some((now_ns, idle_ns));
        if !st.injected {
            input.busy = st.busy;
        }
        st.input = input;
        let changed = st.ctl.update(&input, now_ns);
        for t in 0..self.protected.len() {
            let s = st.ctl.scale(t);
            let old = st.applied[t];
            if let Some(shadow) = st.shadow.as_mut() {
                // The ledger keeps the configured rate; the mirror throttles instead.
                if s != old {
                    let tokens = if old >= 1.0 { self.ledger.consume(t, None, 0.0, now_ns).remaining } else { 0.0 };
                    shadow.rescale(t, &self.ledger.config()[t], old, s, tokens, now_ns);
                    st.applied[t] = s;
                }
                continue;
            }
            if s == old {
                if s < 1.0 {
                    // Settle a throttled pool on every update, so that its last touch is never
                    // older than the previous update (see the rising case below).
                    self.ledger.set_refill_scale_at(t, s, now_ns);
                }
                continue;
            }
            if s > old {
                // Rising: the new scale applies from the pool's last touch (a time stamp older than
                // the pool's leaves its tokens as they are), which is the previous update. Under
                // traffic that is a millisecond ago, so no stored burst is released; after an idle
                // gap it credits the gap at the new rate, which is closer to the truth than the old
                // rate (the controller would have recovered during the gap had anyone asked).
                self.ledger.set_refill_scale_at(t, s, 0);
            } else {
                self.ledger.set_refill_scale_at(t, s, now_ns);
                // Clamp the stored burst to the new budget (see the module notes).
                let o = self.ledger.consume(t, None, 0.0, now_ns);
                let excess = o.remaining - o.limit * s;
                if excess > 0.0 {
                    self.ledger.consume(t, None, excess, now_ns);
                }
            }
            st.applied[t] = s;
        }
        changed
    }

    /// One request. `tier`: the tier already chosen by the caller (route rule or function), if any;
    /// otherwise `header` (the tier header's value) is resolved, else the default tier. `key`: the
    /// per-key identity and whether it is a client IP to normalise. `idle_ns` (the loop's cumulative
    /// idle time) is read only when the controller is due; `turn_age_ms` (how long the current loop
    /// turn has run) only for an unprotected tier during an episode; `now_sec` only for a signed token.
    ///
    /// `ranked` (or `UNRANKED`) is a backstop that ranks clients (core/defense/fair.rs): `ranked =
    /// (admits, refused)`. `admits(tokens, budget)` is asked with the tier's tokens and budget before
    /// the debit: first as the gate's last tier-only debit left them (that debit reads them anyway),
    /// and if that says no, as they are now (the pool may have refilled since). A `false` then refuses
    /// the request as the pool would (shed while the tier is throttled, else tier-full) without
    /// debiting anything, and calls `refused()`. Protected tiers are not ranked.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &self,
        tier: Option<usize>,
        header: Option<&[u8]>,
        key: Option<(&[u8], bool)>,
        now_ns: u64,
        idle_ns: impl FnOnce() -> u64,
        turn_age_ms: impl FnOnce() -> f64,
        now_sec: impl FnOnce() -> u64,
        ranked: Option<(impl FnMut(f64, f64) -> bool, impl FnOnce())>,
    ) -> Decision {
        let (tier, source) = match (tier, header) {
            (Some(t), _) if t < self.protected.len() => (t, TierSource::Given),
            (_, Some(h)) => self.header_tier(h, now_sec),
            _ => (self.cfg.default_tier, TierSource::Default),
        };
        let mut st = self.state.lock();
        if now_ns >= st.next_update_ns {
            self.update(&mut st, now_ns, idle_ns());
        }
        let scale = st.applied[tier];
        let mut d = Decision {
            verdict: Verdict::Shed,
            tier,
            source,
            outcome: Outcome { allowed: false, limited_by: Limit::Tier, remaining: 0.0, limit: 0.0, retry_after_ms: 0.0, reset_ms: 0.0 },
            scale,
            pressure: st.ctl.pressure(),
            lag_ms: st.input.lag_ms,
            cause: st.ctl.cause(),
            slot: Slot::None,
            load: st.conc.pressure(st.waiting),
            epoch: 0,
            shadow: false,
        };
        if !self.protected[tier] {
            let budget = self.cfg.shed.turn_budget_ms;
            let turn = scale > 0.0 && d.pressure > 0.0 && budget > 0.0 && turn_age_ms() >= budget;
            if turn {
                st.ctl.note_turn_shed();
            }
            // (In shadow mode the ledger is not throttled: the mirror of the throttled pool decides.)
            let throttled = scale > 0.0
                && scale < 1.0
                && !turn
                && st.shadow.as_mut().is_some_and(|sh| !sh.pays(tier, &self.ledger.config()[tier], scale, self.cfg.cost, now_ns));
            if scale == 0.0 || turn || throttled {
                if st.shadow.as_mut().is_some_and(|sh| !sh.enforce()) {
                    d.shadow = true;
                } else {
                    st.counters[tier].shed += 1;
                    st.counters[tier].turn_shed += u64::from(turn);
                    return d;
                }
            }
        }
        // In shadow mode the ledger runs at its configured rate: what it refuses, it refuses as a
        // healthy loop's budget (tier-full).
        let scale = if st.shadow.is_some() { 1.0 } else { scale };
        // A protected tier is not ranked: the shares are of every tier's traffic, and its admission
        // must not depend on the load other tiers offer.
        if let Some((mut admits, refused)) = ranked.filter(|_| !self.protected[tier]) {
            let seen = st.levels[tier];
            if !(seen >= 0.0 && admits(seen, self.ledger.config()[tier].capacity * scale)) {
                let (tokens, budget, rate) = self.ledger.level(tier, now_ns);
                st.levels[tier] = tokens;
                if admits(tokens, budget) {
                    return self.debit(st, d, key, now_ns);
                }
                refused();
                d.shadow = false;
                let c = &mut st.counters[tier];
                d.verdict = if scale < 1.0 {
                    c.shed += 1;
                    Verdict::Shed
                } else {
                    c.tier_full += 1;
                    Verdict::TierFull
                };
                // Retry once the pool has refilled by a request's cost.
                let retry = if rate > 0.0 { 1000.0 * self.cfg.cost.max(1.0) / rate } else { f64::INFINITY };
                d.outcome = Outcome {
                    allowed: false,
                    limited_by: Limit::Tier,
                    remaining: tokens,
                    limit: self.ledger.config()[tier].capacity,
                    retry_after_ms: retry,
                    reset_ms: 0.0,
                };
                return d;
            }
        }
        self.debit(st, d, key, now_ns)
    }
}

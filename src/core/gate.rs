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
use crate::core::health::{HealthSample, LoopHealth};
use crate::core::ipkey::{ip_key, IpKeyBuf, IpKeyConfig, MAX_KEY_LEN as MAX_IP_KEY_LEN};
use crate::core::ledger::{Ledger, Limit, Outcome, TierConfig};
use crate::core::shed::{Cause, LagSignal, ShedConfig, ShedConfigError, ShedController, ShedInput};
use crate::core::signature::{looks_like_token, TierSigner, VerifyError};
use parking_lot::Mutex;
use std::sync::Arc;

/// Time constant (ms) of the gate's short-window utilisation (`ShedInput::busy`).
const BUSY_TAU_MS: f64 = 100.0;
/// Header values longer than this are ignored (the default tier applies).
pub const MAX_HEADER_LEN: usize = 256;
/// Leads every client-IP key in the ledger, so IP keys and given keys (user ids) are separate
/// namespaces: `x-user-id: 127.0.0.1` must not share the bucket of the client at 127.0.0.1. Given
/// keys come from JS strings as UTF-8, which never contains the byte 0xFF.
pub const IP_KEY_TAG: u8 = 0xFF;

#[derive(Clone, Debug)]
pub struct GateConfig {
    pub shed: ShedConfig,
    pub lag_signal: LagSignal,
    /// The controller is moved at most this often (ms); 0 = on every decision.
    pub update_interval_ms: f64,
    /// The sampler's tick interval (ms), for the in-band lag estimate; 0 turns the estimate off.
    pub resolution_ms: f64,
    /// Tier for requests without a usable tier (index into the ledger's tiers).
    pub default_tier: usize,
    /// Plain tier names in the header are honoured whatever tier they name (an authenticating gateway
    /// sets the header). Otherwise only names at or below the default tier are.
    pub trust_header: bool,
    /// Verifies signed tier tokens in the header (honoured whatever tier they name).
    pub signer: Option<TierSigner>,
    pub ip: IpKeyConfig,
    pub cost: f64,
}

impl GateConfig {
    pub fn new(default_tier: usize) -> GateConfig {
        GateConfig {
            shed: ShedConfig::default(),
            lag_signal: LagSignal::Ewma,
            update_interval_ms: 1.0,
            resolution_ms: 0.0,
            default_tier,
            trust_header: false,
            signer: None,
            ip: IpKeyConfig::default(),
            cost: 1.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Verdict {
    Admit = 0,
    Shed = 1,
    TierFull = 2,
    KeyLimited = 3,
}

/// Where the request's tier came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TierSource {
    /// No usable tier: the default.
    Default = 0,
    /// Chosen by the caller (route rule or classify function).
    Given = 1,
    /// A plain tier name in the header, honoured.
    Header = 2,
    /// A valid signed token.
    Signed = 3,
    /// A plain name above the default tier in an untrusted header: not honoured.
    Untrusted = 4,
    /// A token with a bad signature (or tokens not configured): not honoured.
    BadSignature = 5,
    /// An authentic but expired token: not honoured.
    Expired = 6,
    /// Malformed token, unknown tier name, several values, or an over-long header: the lowest tier.
    Invalid = 7,
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
    pub cause: Cause,
    pub episodes: u64,
    pub baseline_ms: f64,
    pub thresholds_ms: (f64, f64),
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
}

pub struct Gate {
    ledger: Arc<Ledger>,
    cfg: GateConfig,
    protected: Vec<bool>,
    update_interval_ns: u64,
    state: Mutex<State>,
}

const NS_PER_MS: f64 = 1e6;

/// A request costs `cost` tokens; a bucket holding fewer can never pay it, so every request of that
/// tier would be refused forever (503 with a day-long Retry-After). Names the first such capacity.
pub fn check_cost(cost: f64, tiers: &[TierConfig]) -> Result<(), String> {
    for (i, t) in tiers.iter().enumerate() {
        if cost > t.capacity {
            return Err(format!("cost {cost} exceeds tiers[{i}].capacity {} (tier \"{}\"): no request could ever be admitted", t.capacity, t.name));
        }
        if let Some(pk) = &t.per_key {
            if cost > pk.capacity {
                return Err(format!("cost {cost} exceeds tiers[{i}].perKey.capacity {} (tier \"{}\"): no keyed request could ever be admitted", pk.capacity, t.name));
            }
        }
    }
    Ok(())
}

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

    /// Resolves a tier header value at Unix time `now_sec` (read only for signed tokens).
    pub fn header_tier(&self, value: &[u8], now_sec: impl FnOnce() -> u64) -> (usize, TierSource) {
        // A value that cannot be read as one tier (over-long, several values, malformed, unknown)
        // gets the LOWEST tier, not the default: behind a gateway that appends its own value
        // (`critical, background`) or after a client pads the header past the limit, the default
        // could be above what the gateway meant. Tiers are ordered highest first.
        let default = (self.protected.len() - 1, TierSource::Invalid);
        if value.len() > MAX_HEADER_LEN {
            return default;
        }
        let v = value.trim_ascii();
        if v.is_empty() {
            return (self.cfg.default_tier, TierSource::Default);
        }
        // Several values (repeated headers are joined with ", "): ambiguous, so none is honoured.
        if v.contains(&b',') {
            return default;
        }
        if looks_like_token(v) {
            let Some(signer) = &self.cfg.signer else {
                return (self.cfg.default_tier, TierSource::BadSignature);
            };
            return match signer.verify(v, now_sec()) {
                Ok(name) => match self.ledger.tier_id(name) {
                    Some(t) => (t, TierSource::Signed),
                    None => default,
                },
                Err(VerifyError::Expired) => (self.cfg.default_tier, TierSource::Expired),
                Err(VerifyError::BadSignature) => (self.cfg.default_tier, TierSource::BadSignature),
                Err(VerifyError::Malformed) => default,
            };
        }
        match self.ledger.tier_id(v) {
            // Tiers are ordered highest first: a larger id is a lower tier.
            Some(t) if self.cfg.trust_header || t >= self.cfg.default_tier => (t, TierSource::Header),
            Some(_) => (self.cfg.default_tier, TierSource::Untrusted),
            None => default,
        }
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
        };
        if !self.protected[tier] {
            if scale == 0.0 {
                st.counters[tier].shed += 1;
                return d;
            }
            let budget = self.cfg.shed.turn_budget_ms;
            if d.pressure > 0.0 && budget > 0.0 && turn_age_ms() >= budget {
                st.ctl.note_turn_shed();
                st.counters[tier].shed += 1;
                st.counters[tier].turn_shed += 1;
                return d;
            }
        }
        let mut buf = IpKeyBuf::default();
        let mut tagged = [IP_KEY_TAG; MAX_IP_KEY_LEN + 1];
        let key = match key {
            Some((k, true)) if self.ledger.has_per_key(tier) => {
                let ip = ip_key(k, &self.cfg.ip, &mut buf);
                tagged[1..=ip.len()].copy_from_slice(ip);
                Some(&tagged[..=ip.len()])
            }
            Some((k, false)) if self.ledger.has_per_key(tier) => Some(k),
            _ => None,
        };
        let o = self.ledger.consume(tier, key, self.cfg.cost, now_ns);
        d.outcome = o;
        let c = &mut st.counters[tier];
        d.verdict = if o.allowed {
            c.admitted += 1;
            Verdict::Admit
        } else if o.limited_by == Limit::Key {
            c.key_limited += 1;
            Verdict::KeyLimited
        } else if scale < 1.0 {
            c.shed += 1;
            Verdict::Shed
        } else {
            c.tier_full += 1;
            Verdict::TierFull
        };
        d
    }

    /// A reading of the gate as of `now_ns` (`idle_ns` as for `update_now`): the controller is moved
    /// first, so a gate that has seen no request for a while reports the pressure and scales its hold
    /// and recovery have brought it to by now, not those of its last request.
    pub fn stats_at(&self, now_ns: u64, idle_ns: u64) -> GateStats {
        let mut st = self.state.lock();
        self.update(&mut st, now_ns, idle_ns);
        Self::read_stats(&st)
    }

    /// A reading of the gate as of its last update.
    pub fn stats(&self) -> GateStats {
        Self::read_stats(&self.state.lock())
    }

    fn read_stats(st: &State) -> GateStats {
        GateStats {
            counters: st.counters.clone(),
            scales: st.applied.clone(),
            health: st.health.sample(),
            injected: st.injected,
            input: st.input,
            pressure: st.ctl.pressure(),
            cause: st.ctl.cause(),
            episodes: st.ctl.episodes(),
            baseline_ms: st.ctl.baseline_ms(),
            thresholds_ms: st.ctl.thresholds_ms(),
        }
    }

    /// Zeroes the counters (the controller and the ledger are left alone).
    pub fn reset_counters(&self) {
        let mut st = self.state.lock();
        st.counters.iter_mut().for_each(|c| *c = TierCounters::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ManualClock;
    use crate::core::ledger::{PerKeyConfig, TierConfig};

    const MS: u64 = 1_000_000;
    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn tier(name: &str, protected: bool, cap: f64, per_key: Option<PerKeyConfig>) -> TierConfig {
        TierConfig { name: name.into(), capacity: cap, refill_per_sec: cap, protected, per_key }
    }

    fn ledger(per_key: Option<PerKeyConfig>) -> Arc<Ledger> {
        let clock = Arc::new(ManualClock::new(0));
        Arc::new(
            Ledger::with_clock(
                vec![
                    tier("critical", true, 100.0, per_key.clone()),
                    tier("standard", false, 100.0, per_key.clone()),
                    tier("background", false, 100.0, per_key),
                ],
                clock,
            )
            .unwrap(),
        )
    }

    fn cfg() -> GateConfig {
        let mut c = GateConfig::new(2);
        c.shed = ShedConfig { target_lag_ms: 50.0, critical_lag_ms: 150.0, hold_ms: 1000.0, recovery_ms: 2000.0, confirm_ms: 0.0, ..Default::default() };
        c.update_interval_ms = 0.0;
        c
    }

    fn gate_with(cfg: GateConfig, per_key: Option<PerKeyConfig>) -> (Gate, Arc<LoopHealth>) {
        let h = Arc::new(LoopHealth::default());
        (Gate::new(ledger(per_key), cfg, h.clone()).unwrap(), h)
    }

    fn gate() -> (Gate, Arc<LoopHealth>) {
        gate_with(cfg(), None)
    }

    fn decide(g: &Gate, tier: Option<usize>, header: Option<&str>, t_ms: u64) -> Decision {
        g.decide(tier, header.map(str::as_bytes), None, t_ms * MS, || 0, || 0.0, || 1_000)
    }

    #[test]
    fn tier_comes_from_the_caller_then_the_header_then_the_default() {
        let (g, _) = gate();
        let d = decide(&g, Some(0), Some("background"), 0);
        assert_eq!((d.tier, d.source, d.verdict), (0, TierSource::Given, Verdict::Admit));
        assert_eq!(decide(&g, None, Some("background"), 0).source, TierSource::Header);
        let d = decide(&g, None, None, 0);
        assert_eq!((d.tier, d.source), (2, TierSource::Default));
        // An out-of-range tier from the caller falls through to the header.
        assert_eq!(decide(&g, Some(9), Some("background"), 0).source, TierSource::Header);
    }

    #[test]
    fn an_untrusted_header_cannot_promote_but_can_demote() {
        let mut c = cfg();
        c.default_tier = 1;
        let (g, _) = gate_with(c, None);
        assert_eq!(g.header_tier(b"critical", || 0), (1, TierSource::Untrusted));
        assert_eq!(g.header_tier(b"standard", || 0), (1, TierSource::Header));
        assert_eq!(g.header_tier(b"background", || 0), (2, TierSource::Header));
    }

    #[test]
    fn a_trusted_header_is_honoured_for_any_tier() {
        let mut c = cfg();
        c.trust_header = true;
        let (g, _) = gate_with(c, None);
        assert_eq!(g.header_tier(b"critical", || 0), (0, TierSource::Header));
        assert_eq!(g.header_tier(b"  critical ", || 0), (0, TierSource::Header));
    }

    #[test]
    fn junk_headers_fall_back_to_the_default() {
        let mut c = cfg();
        c.trust_header = true;
        let (g, _) = gate_with(c, None);
        assert_eq!(g.header_tier(b"", || 0), (2, TierSource::Default));
        assert_eq!(g.header_tier(b"gold", || 0), (2, TierSource::Invalid));
        assert_eq!(g.header_tier(b"Critical", || 0), (2, TierSource::Invalid), "names are exact");
        assert_eq!(g.header_tier(b"critical, background", || 0), (2, TierSource::Invalid));
        assert_eq!(g.header_tier(&[b'a'; 300], || 0), (2, TierSource::Invalid));
        assert_eq!(g.header_tier(&[0xff, 0xfe], || 0), (2, TierSource::Invalid));
    }

    #[test]
    fn unreadable_headers_get_the_lowest_tier_not_a_higher_default() {
        // Behind a gateway that appends its own value, `critical, background` or a client value
        // padded past the limit must not give the (higher) default tier.
        for trust in [false, true] {
            let mut c = cfg();
            c.default_tier = 1;
            c.trust_header = trust;
            let (g, _) = gate_with(c, None);
            assert_eq!(g.header_tier(b"critical, background", || 0), (2, TierSource::Invalid));
            assert_eq!(g.header_tier(b"background,background", || 0), (2, TierSource::Invalid));
            let mut padded = vec![b'x'; 300];
            padded.extend_from_slice(b", background");
            assert_eq!(g.header_tier(&padded, || 0), (2, TierSource::Invalid));
            assert_eq!(g.header_tier(&[0xff, 0xfe], || 0), (2, TierSource::Invalid));
            assert_eq!(g.header_tier(b"gold", || 0), (2, TierSource::Invalid));
            assert_eq!(g.header_tier(b"", || 0), (1, TierSource::Default), "no value keeps the default");
        }
    }

    #[test]
    fn signed_tokens_promote_until_they_expire() {
        let signer = TierSigner::new(&[SECRET]).unwrap();
        let mut c = cfg();
        c.signer = Some(signer.clone());
        let (g, _) = gate_with(c, None);
        let t = signer.sign("critical", 2_000).unwrap();
        assert_eq!(g.header_tier(t.as_bytes(), || 1_999), (0, TierSource::Signed));
        assert_eq!(g.header_tier(t.as_bytes(), || 2_000), (2, TierSource::Expired));
        let forged = TierSigner::new(&[b"not-the-secret-not-the-secret!!!"]).unwrap().sign("critical", 2_000).unwrap();
        assert_eq!(g.header_tier(forged.as_bytes(), || 0), (2, TierSource::BadSignature));
        let unknown = signer.sign("platinum", 2_000).unwrap();
        assert_eq!(g.header_tier(unknown.as_bytes(), || 0), (2, TierSource::Invalid));
        // The clock is only read for tokens.
        assert_eq!(g.header_tier(b"background", || panic!("clock read")), (2, TierSource::Header));
    }

    #[test]
    fn tokens_are_refused_when_no_secret_is_configured() {
        let (g, _) = gate();
        let t = TierSigner::new(&[SECRET]).unwrap().sign("critical", 2_000).unwrap();
        assert_eq!(g.header_tier(t.as_bytes(), || 0), (2, TierSource::BadSignature));
    }

    #[test]
    fn a_zero_scale_sheds_at_once_with_a_full_bucket() {
        let (g, h) = gate();
        h.record_tick(100.0, 100.0, 100.0); // pressure 0.5: background at zero
        let d = decide(&g, Some(2), None, 0);
        assert_eq!(d.verdict, Verdict::Shed);
        assert_eq!(d.scale, 0.0);
        assert_eq!(d.outcome.limit, 0.0, "no debit was attempted");
        assert_eq!(decide(&g, Some(1), None, 0).verdict, Verdict::Admit);
        assert_eq!(decide(&g, Some(0), None, 0).verdict, Verdict::Admit);
        let s = g.stats();
        assert_eq!(s.counters[2].shed, 1);
        assert_eq!(s.counters[1].admitted, 1);
        assert_eq!(s.scales, vec![1.0, 1.0, 0.0]);
        assert_eq!(g.ledger().refill_scale(2), 0.0, "the scale is applied to the ledger");
    }

    #[test]
    fn protected_tier_is_admitted_when_every_other_tier_is_shed() {
        let (g, h) = gate();
        h.set_stalled(true);
        for i in 0..50 {
            assert_eq!(decide(&g, Some(0), None, i).verdict, Verdict::Admit);
            assert_eq!(decide(&g, Some(1), None, i).verdict, Verdict::Shed);
            assert_eq!(decide(&g, Some(2), None, i).verdict, Verdict::Shed);
        }
        assert_eq!(g.stats().cause, Cause::Stall);
    }

    #[test]
    fn lowering_a_scale_clamps_the_stored_burst() {
        let (g, h) = gate();
        h.record_tick(125.0, 125.0, 125.0); // pressure 0.75: standard at 0.5, background 0
        decide(&g, Some(1), None, 0);
        let s = g.ledger().snapshot_at(0);
        assert_eq!(s[1].tokens, 49.0, "100 clamped to 50, then one debit");
        assert_eq!(s[1].refill_scale, 0.5);
    }

    #[test]
    fn a_drained_pool_is_a_shed_while_throttled_and_tier_full_while_healthy() {
        let (g, h) = gate();
        for _ in 0..100 {
            assert_eq!(decide(&g, Some(1), None, 0).verdict, Verdict::Admit);
        }
        let d = decide(&g, Some(1), None, 0);
        assert_eq!(d.verdict, Verdict::TierFull);
        assert_eq!(d.outcome.retry_after_ms, 10.0);
        h.record_tick(110.0, 110.0, 110.0); // standard throttled to 0.8
        let d = decide(&g, Some(1), None, 1);
        assert_eq!(d.verdict, Verdict::Shed);
        assert!(d.scale > 0.0 && d.scale < 1.0);
        assert_eq!(g.stats().counters[1], TierCounters { admitted: 100, shed: 1, turn_shed: 0, tier_full: 1, key_limited: 0 });
    }

    #[test]
    fn per_key_quota_gives_key_limited_with_the_keys_figures() {
        let pk = PerKeyConfig { capacity: 2.0, refill_per_sec: 1.0, max_keys: 100, idle_ttl_ms: 60_000.0 };
        let (g, _) = gate_with(cfg(), Some(pk));
        let k = Some((&b"user-1"[..], false));
        assert_eq!(g.decide(Some(1), None, k, 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        let d = g.decide(Some(1), None, k, 0, || 0, || 0.0, || 0);
        assert_eq!((d.verdict, d.outcome.remaining, d.outcome.limit), (Verdict::Admit, 0.0, 2.0));
        let d = g.decide(Some(1), None, k, 0, || 0, || 0.0, || 0);
        assert_eq!(d.verdict, Verdict::KeyLimited);
        assert_eq!(d.outcome.retry_after_ms, 1000.0);
        assert_eq!(d.outcome.reset_ms, 2000.0);
        // Another key is unaffected.
        assert_eq!(g.decide(Some(1), None, Some((&b"user-2"[..], false)), 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
    }

    #[test]
    fn ip_keys_are_normalised_so_one_prefix_shares_a_bucket() {
        let pk = PerKeyConfig { capacity: 1.0, refill_per_sec: 0.001, max_keys: 100, idle_ttl_ms: 60_000.0 };
        let (g, _) = gate_with(cfg(), Some(pk));
        let ip = |s: &'static str| Some((s.as_bytes(), true));
        assert_eq!(g.decide(Some(1), None, ip("2001:db8:0:ab01::1"), 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        assert_eq!(g.decide(Some(1), None, ip("2001:db8:0:abff::9"), 0, || 0, || 0.0, || 0).verdict, Verdict::KeyLimited);
        assert_eq!(g.decide(Some(1), None, ip("::ffff:10.0.0.1"), 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        assert_eq!(g.decide(Some(1), None, ip("10.0.0.1"), 0, || 0, || 0.0, || 0).verdict, Verdict::KeyLimited);
        assert_eq!(g.ledger().key_tokens(1, b"\xff2001:db8:0:ab00::/56", 0), Some(0.0));
    }

    #[test]
    fn given_keys_and_ip_keys_are_separate_namespaces() {
        // A client sending `x-user-id: 10.0.0.1` must not drain the bucket of the client at 10.0.0.1.
        let pk = PerKeyConfig { capacity: 1.0, refill_per_sec: 0.001, max_keys: 100, idle_ttl_ms: 60_000.0 };
        let (g, _) = gate_with(cfg(), Some(pk));
        let given = Some((&b"10.0.0.1"[..], false));
        let ip = Some((&b"10.0.0.1"[..], true));
        assert_eq!(g.decide(Some(1), None, given, 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        assert_eq!(g.decide(Some(1), None, given, 0, || 0, || 0.0, || 0).verdict, Verdict::KeyLimited);
        assert_eq!(g.decide(Some(1), None, ip, 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        assert_eq!(g.decide(Some(1), None, ip, 0, || 0, || 0.0, || 0).verdict, Verdict::KeyLimited);
        // Junk IPs share one key, still apart from a given key of the same text.
        assert_eq!(g.decide(Some(1), None, Some((&b"invalid-ip"[..], false)), 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
        assert_eq!(g.decide(Some(1), None, Some((&b"junk"[..], true)), 0, || 0, || 0.0, || 0).verdict, Verdict::Admit);
    }

    #[test]
    fn the_turn_budget_sheds_late_in_a_turn_only_during_an_episode_and_holds_the_episode() {
        let mut five = cfg();
        five.shed.turn_budget_ms = 5.0;
        let (g, h) = gate_with(five, None);
        let at = |tier: usize, t_ms: u64, age_ms: f64| g.decide(Some(tier), None, None, t_ms * MS, || 0, || age_ms, || 0).verdict;
        // Healthy loop: however long the turn, no episode, no turn budget.
        assert_eq!(at(1, 0, 40.0), Verdict::Admit);
        // Lag 60 on 50..150: pressure 0.1, background at scale 0.8, standard at 1.
        h.record_tick(60.0, 60.0, 60.0);
        assert_eq!(at(1, 1, 0.0), Verdict::Admit);
        assert_eq!(at(2, 1, 4.0), Verdict::Admit);
        assert_eq!(at(1, 1, 5.0), Verdict::Shed); // the budget (5 ms) is spent
        assert_eq!(at(2, 1, 7.0), Verdict::Shed);
        assert_eq!(at(0, 1, 50.0), Verdict::Admit); // protected: never
        let c = g.stats().counters;
        assert_eq!((c[1].shed, c[1].turn_shed, c[2].shed, c[2].turn_shed, c[0].shed), (1, 1, 1, 1, 0));
        assert!((g.stats().pressure - 0.1).abs() < 1e-9);
        // The lag falls (the budget keeps it down) on a saturated loop (no idle time: `idle_ns` stays
        // 0). A turn-budget shed at 500 ms raises the turn part on the next update (100 ms at 1.0 per
        // 1000 ms: 0.1) and holds it until 1600 ms, past the proportional part's own hold (1001 ms),
        // which then recovers.
        h.record_tick(0.0, 0.0, 0.0);
        assert_eq!(at(1, 500, 6.0), Verdict::Shed);
        assert_eq!(at(1, 600, 0.0), Verdict::Admit);
        assert_eq!(at(1, 1400, 0.0), Verdict::Admit);
        assert!((g.stats().pressure - 0.1).abs() < 1e-9, "{}", g.stats().pressure);
        // Nothing more to shed: the turn part recovers after its hold (0.1 takes 200 ms at 2000 ms per 1.0).
        assert_eq!(at(1, 2500, 0.0), Verdict::Admit);
        assert_eq!(g.stats().pressure, 0.0);
        assert_eq!(at(1, 2501, 40.0), Verdict::Admit); // episode over: no budget

        // With idle time on the loop (half of every interval), turn sheds only trimmed bursts: the
        // pressure does not rise from them.
        let (g, h) = gate_with(cfg(), None);
        let idle_at = |t_ms: u64| t_ms * MS / 2;
        h.record_tick(60.0, 60.0, 60.0);
        g.decide(Some(1), None, None, MS, || idle_at(1), || 0.0, || 0);
        h.record_tick(0.0, 0.0, 0.0);
        for t in 2..=400u64 {
            assert_eq!(g.decide(Some(1), None, None, t * MS, || idle_at(t), || 3.0, || 0).verdict, Verdict::Shed);
        }
        assert_eq!(g.stats().counters[1].turn_shed, 399);
        assert!((g.stats().pressure - 0.1).abs() < 1e-9, "{}", g.stats().pressure);

        // turnBudgetMs 0 turns it off.
        let mut off = cfg();
        off.shed.turn_budget_ms = 0.0;
        let (g, h) = gate_with(off, None);
        h.record_tick(60.0, 60.0, 60.0);
        assert_eq!(g.decide(Some(1), None, None, MS, || 0, || 1_000.0, || 0).verdict, Verdict::Admit);
    }

    #[test]
    fn hysteresis_and_hold_through_the_gate() {
        let (g, h) = gate();
        h.record_tick(100.0, 100.0, 100.0);
        assert_eq!(decide(&g, Some(2), None, 0).verdict, Verdict::Shed);
        // The loop is fine again, but the hold keeps background shed for 1 s.
        h.record_tick(0.0, 0.0, 0.0);
        assert_eq!(decide(&g, Some(2), None, 999).verdict, Verdict::Shed);
        // Then recovery is gradual: 500 ms after the hold, pressure 0.25 → background at 0.5, and
        // its pool (clamped to zero when it was shed) refills at half rate from the last update,
        // 999 ms: 501 ms × 50/s = 25 tokens, not a full stored burst.
        let d = decide(&g, Some(2), None, 1500);
        assert_eq!(d.verdict, Verdict::Admit);
        assert_eq!(d.scale, 0.5);
        assert!((d.outcome.remaining - 24.05).abs() < 1e-9, "{}", d.outcome.remaining);
        decide(&g, Some(2), None, 2000);
        assert_eq!(g.stats().scales, vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn stats_at_shows_the_decay_of_an_idle_gate() {
        let (g, h) = gate();
        h.record_tick(150.0, 150.0, 150.0);
        decide(&g, Some(2), None, 0);
        assert_eq!(g.stats().pressure, 1.0);
        h.record_tick(0.0, 0.0, 0.0);
        // No request since: stats() still reads the last update, stats_at moves the controller first
        // (held to 1000 ms, then 1/2000 per ms).
        assert_eq!(g.stats().pressure, 1.0);
        let s = g.stats_at(1500 * MS, 0);
        assert!((s.pressure - 0.75).abs() < 1e-9, "{}", s.pressure);
        assert_eq!(s.scales, vec![1.0, 0.5, 0.0]);
        let s = g.stats_at(3000 * MS, 0);
        assert_eq!((s.pressure, s.scales), (0.0, vec![1.0, 1.0, 1.0]));
        assert_eq!(g.ledger().refill_scale(2), 1.0, "the decay is applied to the ledger too");
    }

    #[test]
    fn updates_are_rate_limited_by_time() {
        let mut c = cfg();
        c.update_interval_ms = 5.0;
        let (g, h) = gate_with(c, None);
        decide(&g, Some(2), None, 0);
        h.record_tick(200.0, 200.0, 200.0);
        assert_eq!(decide(&g, Some(2), None, 4).verdict, Verdict::Admit, "not due yet");
        assert_eq!(decide(&g, Some(2), None, 5).verdict, Verdict::Shed);
    }

    #[test]
    fn in_band_lag_sheds_while_the_timer_cannot_tick() {
        let mut c = cfg();
        c.resolution_ms = 10.0;
        let (g, h) = gate_with(c, None);
        h.record_tick(0.5, 0.5, 0.5);
        assert_eq!(decide(&g, Some(2), None, 0).verdict, Verdict::Admit);
        // No tick for 55 ms: at least 45 ms late — not yet past the 50 ms target.
        assert_eq!(decide(&g, Some(2), None, 55).verdict, Verdict::Admit);
        // No tick for 120 ms: 110 ms late -> pressure 0.6, background at zero, mid-run.
        let d = decide(&g, Some(2), None, 120);
        assert_eq!(d.verdict, Verdict::Shed);
        assert_eq!(d.lag_ms, 110.0);
        // A new tick resets the estimate (the recorded lag then speaks for itself).
        h.record_tick(0.5, 0.5, 0.5);
        assert_eq!(decide(&g, Some(1), None, 121).lag_ms, 0.5);
    }

    #[test]
    fn time_the_loop_spent_idle_is_not_in_band_lag() {
        let mut c = cfg();
        c.resolution_ms = 10.0;
        let (g, h) = gate_with(c, None);
        h.record_tick(0.5, 0.5, 0.5);
        let at = |t_ms: u64, idle_ms: u64| g.decide(Some(2), None, None, t_ms * MS, || idle_ms * MS, || 0.0, || 0);
        assert_eq!(at(0, 1_000).verdict, Verdict::Admit);
        // 120 ms without a tick, but 100 ms of it waiting for I/O (the process was descheduled while
        // idle, say): busy 20 ms, so late by at least 10 ms only — far below the 50 ms target.
        let d = at(120, 1_100);
        assert_eq!(d.verdict, Verdict::Admit);
        assert_eq!(d.lag_ms, 10.0);
        // Then 100 ms more of pure work without a tick: busy 120 ms, late by at least 110.
        let d = at(220, 1_100);
        assert_eq!(d.verdict, Verdict::Shed);
        assert_eq!(d.lag_ms, 110.0);
    }

    #[test]
    fn injected_health_overrides_the_live_record_until_released() {
        let mut c = cfg();
        c.resolution_ms = 10.0;
        let (g, live) = gate_with(c, None);
        g.inject_health(&HealthSample { stalled: true, ..Default::default() });
        assert_eq!(decide(&g, Some(1), None, 0).verdict, Verdict::Shed);
        // No in-band estimate while injected, however long no tick comes.
        g.inject_health(&HealthSample { latest_lag_ms: 1.0, ewma_lag_ms: 1.0, ..Default::default() });
        assert_eq!(decide(&g, Some(1), None, 10_000).verdict, Verdict::Admit);
        assert!(g.stats().injected);
        g.use_health(live);
        assert!(!g.stats().injected);
    }

    #[test]
    fn a_cost_no_bucket_can_hold_is_refused() {
        let pk = PerKeyConfig { capacity: 2.0, refill_per_sec: 1.0, max_keys: 100, idle_ttl_ms: 60_000.0 };
        let tiers = ledger(Some(pk)).config().to_vec();
        assert_eq!(check_cost(1.0, &tiers), Ok(()));
        assert_eq!(check_cost(2.0, &tiers), Ok(()), "a full bucket can pay its capacity");
        let e = check_cost(2.5, &tiers).unwrap_err();
        assert!(e.contains("tiers[0].perKey.capacity 2"), "{e}");
        let tiers = ledger(None).config().to_vec();
        let e = check_cost(5000.0, &tiers).unwrap_err();
        assert!(e.starts_with("cost 5000 exceeds tiers[0].capacity 100"), "{e}");
    }

    #[test]
    fn invalid_gate_configs_name_the_field() {
        let l = ledger(None);
        let h = Arc::new(LoopHealth::default());
        let err = |c: GateConfig| Gate::new(l.clone(), c, h.clone()).err().unwrap().field;
        assert_eq!(err(GateConfig::new(3)), "defaultTier");
        assert_eq!(err(GateConfig { cost: f64::NAN, ..GateConfig::new(0) }), "cost");
        assert_eq!(err(GateConfig { update_interval_ms: -1.0, ..GateConfig::new(0) }), "updateIntervalMs");
        let mut c = GateConfig::new(0);
        c.shed.critical_lag_ms = 1.0;
        assert_eq!(err(c), "criticalLagMs");
    }
}

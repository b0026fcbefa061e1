//! The shed controller: turns loop health into a refill scale per tier.
//!
//! One number drives it, the *pressure* `p` in `0..=1`. Each health signal asks for a pressure:
//! - lag: 0 at `target_lag_ms`, rising linearly to 1 at `critical_lag_ms` (absolute, or above the
//!   measured idle baseline when `relative`);
//! - heap: once used/limit passes `heap_ratio`, at least one tier's worth, rising to 1 at a full heap;
//! - stall (the loop has not ticked for longer than the watchdog's threshold): 1 at once.
//!
//! The pressure is spread over the unprotected tiers from the lowest up: with `n` sheddable tiers the
//! lowest one goes from full refill to zero while `p` goes from 0 to `1/n`, then the next one up, and so
//! on; at `p = 1` every unprotected tier is at zero. Protected tiers always keep scale 1.
//!
//! Dynamics: the pressure is the larger of two parts.
//! - The proportional part follows the signals: a rise is applied at once (shedding must start
//!   immediately); a fall only once the signal has dropped `hysteresis_ms` below the level that set
//!   it, no earlier than `hold_ms` after it was last justified, and then gradually: at most
//!   `1 / recovery_ms` per millisecond (full shed to none in `recovery_ms`), the lowest tier last.
//!   A relapse — the pressure had brought the lag under the target, and the recovery lets it back
//!   above by more than `hysteresis_ms` — halves what the proportional part admits (multiplicative
//!   shed), holds again, and makes the rest of the episode's recovery below that level
//!   `RELAPSE_SLOWDOWN` times slower: a sustained overload settles near the pressure it needs
//!   instead of swinging between full shedding and a loop overloaded again (a ~1.7 s swing up to
//!   60-90 ms of lag in bench:overload before this).
//! - The integral part grows while the lag is above the target, by the lag's excess (as a fraction of
//!   the target..critical range) per `integral_ms`, and drains at the recovery rate while the lag is
//!   more than `hysteresis_ms` below the target. A partial throttle that does not bring the lag down
//!   (a tier whose budget is far above what it is offered, say) is pushed further until it does, so
//!   the loop does not settle above its target under sustained overload; a short spike on a healthy
//!   loop adds little, and it drains away.
//!
//! Spike filter: while nothing is being shed, the lag starts an episode (proportional or integral) only
//! once its excursion above the target has lasted `confirm_ms` and the lag is still rising past the
//! highest reading of that excursion. A loop that is falling behind (an overload: each loop iteration
//! longer than the one before, and the gate's in-band estimate growing with every request) passes at
//! once; one slow tick, or the backlog it leaves draining away on a loop that keeps up (the lag
//! falling from its peak), does not start shedding. Heap pressure and a stall are not filtered, and
//! once an episode runs every reading counts at once. Known limit: the peak is the excursion's whole
//! peak, so a lag that settles above the target but below an earlier peak of the same excursion (and
//! never dips `hysteresis_ms` below the target) does not start shedding; a peak that forgets readings
//! older than a window would close that, not measured yet.
use std::fmt;

/// Which lag figure of a health sample the controller reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LagSignal {
    /// The latest tick's drift: reacts within one tick, noisy.
    Latest,
    /// The sampler's exponentially weighted moving average.
    Ewma,
    /// The p99 over the sampler's window: slow to rise and slow to fall.
    P99,
    /// The larger of the latest tick and the EWMA: reacts at once to a choking loop, and smooths the fall.
    Max,
}

impl LagSignal {
    pub fn parse(name: &str) -> Option<LagSignal> {
        Some(match name {
            "latest" => LagSignal::Latest,
            "ewma" => LagSignal::Ewma,
            "p99" => LagSignal::P99,
            "max" => LagSignal::Max,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ShedConfig {
    /// Lag at which shedding starts (ms; above the idle baseline when `relative`).
    pub target_lag_ms: f64,
    /// Lag at which every unprotected tier is shed (ms; above the baseline when `relative`).
    pub critical_lag_ms: f64,
    /// Thresholds are offsets above the measured idle lag baseline instead of absolute values.
    pub relative: bool,
    /// How far (ms) the signal must fall below the level that set the proportional part before it
    /// may fall (and the lag below the target before the integral part drains).
    pub hysteresis_ms: f64,
    /// Minimum time (ms) the pressure is held after it was last justified by a signal.
    pub hold_ms: f64,
    /// Time (ms) a recovery from full shed to none takes at the fastest.
    pub recovery_ms: f64,
    /// Integral time (ms): a lag held at `critical_lag_ms` adds full pressure in this time, a lag
    /// halfway between target and critical half of it, and so on. 0 turns the integral term off.
    pub integral_ms: f64,
    /// Spike filter (ms): how long a lag excursion above the target must last, still rising, before it
    /// starts shedding (see the module notes). 0: the first reading above the target sheds.
    pub confirm_ms: f64,
    /// Heap used/limit above which heap pressure sheds; `None` ignores the heap.
    pub heap_ratio: Option<f64>,
    /// Time constant (ms) of the idle-baseline average (relative mode).
    pub baseline_tau_ms: f64,
    /// Highest baseline (ms) that relative mode will accept: a loop that is never idle cannot push the
    /// thresholds up without bound.
    pub max_baseline_ms: f64,
    /// The baseline only learns from samples whose event-loop utilisation is at most this.
    pub idle_elu: f64,
    /// Turn budget (ms), applied by the gate during an episode: an unprotected request that arrives
    /// once the current event-loop turn has run this long is shed. 0 turns it off.
    pub turn_budget_ms: f64,
}

impl Default for ShedConfig {
    fn default() -> Self {
        ShedConfig {
            target_lag_ms: 20.0,
            critical_lag_ms: 60.0,
            relative: false,
            hysteresis_ms: 10.0,
            hold_ms: 1000.0,
            recovery_ms: 2000.0,
            integral_ms: 1000.0,
            confirm_ms: 30.0,
            heap_ratio: Some(0.9),
            baseline_tau_ms: 10_000.0,
            max_baseline_ms: 50.0,
            idle_elu: 0.5,
            turn_budget_ms: 2.0,
        }
    }
}

/// A configuration field that is out of range; `Display` names it.
#[derive(Clone, Debug, PartialEq)]
pub struct ShedConfigError {
    pub field: &'static str,
    pub reason: &'static str,
}

impl fmt::Display for ShedConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.field, self.reason)
    }
}

impl std::error::Error for ShedConfigError {}

fn finite_non_negative(v: f64, field: &'static str) -> Result<(), ShedConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ShedConfigError { field, reason: "must be a finite number >= 0" })
    }
}

impl ShedConfig {
    pub fn validate(&self) -> Result<(), ShedConfigError> {
        finite_non_negative(self.target_lag_ms, "targetLagMs")?;
        finite_non_negative(self.critical_lag_ms, "criticalLagMs")?;
        if self.critical_lag_ms <= self.target_lag_ms {
            return Err(ShedConfigError { field: "criticalLagMs", reason: "must be greater than targetLagMs" });
        }
        finite_non_negative(self.hysteresis_ms, "hysteresisMs")?;
        finite_non_negative(self.hold_ms, "holdMs")?;
        finite_non_negative(self.recovery_ms, "recoveryMs")?;
        finite_non_negative(self.integral_ms, "integralMs")?;
        finite_non_negative(self.confirm_ms, "confirmMs")?;
        if let Some(r) = self.heap_ratio {
            if !(r.is_finite() && r > 0.0 && r < 1.0) {
                return Err(ShedConfigError { field: "heapRatio", reason: "must be a number in (0, 1)" });
            }
        }
        finite_non_negative(self.baseline_tau_ms, "baselineTauMs")?;
        finite_non_negative(self.max_baseline_ms, "maxBaselineMs")?;
        if !(self.idle_elu.is_finite() && (0.0..=1.0).contains(&self.idle_elu)) {
            return Err(ShedConfigError { field: "idleElu", reason: "must be a number in [0, 1]" });
        }
        finite_non_negative(self.turn_budget_ms, "turnBudgetMs")?;
        Ok(())
    }
}

/// What the controller reads: one plain copy of the signals, in the units of `HealthSample`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShedInput {
    pub lag_ms: f64,
    pub heap_ratio: f64,
    /// Event-loop utilisation over the sampler's window (relative mode learns its baseline from it).
    pub elu: f64,
    /// Utilisation of the last ~100 ms (the gate's own estimate; `elu` where it has none): whether
    /// turn-budget sheds mean overload (see the turn part).
    pub busy: f64,
    pub stalled: bool,
}

impl ShedInput {
    pub fn from_sample(s: &crate::core::health::HealthSample, signal: LagSignal) -> ShedInput {
        let lag_ms = match signal {
            LagSignal::Latest => s.latest_lag_ms,
            LagSignal::Ewma => s.ewma_lag_ms,
            LagSignal::P99 => s.p99_lag_ms,
            LagSignal::Max => s.latest_lag_ms.max(s.ewma_lag_ms),
        };
        ShedInput { lag_ms, heap_ratio: s.heap_ratio(), elu: s.elu, busy: s.elu, stalled: s.stalled }
    }
}

/// Why the controller holds its current pressure (for stats and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    None,
    Lag,
    Heap,
    Stall,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::None => "none",
            Cause::Lag => "lag",
            Cause::Heap => "heap",
            Cause::Stall => "stall",
        }
    }
}

#[derive(Debug)]
pub struct ShedController {
    cfg: ShedConfig,
    /// Tier ids of the unprotected tiers, lowest priority first.
    sheddable: Vec<usize>,
    scales: Vec<f64>,
    pressure: f64,
    /// The proportional part (with hold and gradual recovery), the integral part, and the turn part
    /// (driven by the gate's turn-budget sheds, see `note_turn_shed`).
    prop: f64,
    integral: f64,
    turn: f64,
    cause: Cause,
    hold_until_ns: u64,
    /// Turn-budget sheds since the last update, and until when the turn part is held.
    turn_sheds: u64,
    turn_hold_until_ns: u64,
    last_ns: Option<u64>,
    baseline_ms: Option<f64>,
    episodes: u64,
    /// The current lag excursion above the target while nothing is shed: (start, highest lag).
    excursion: Option<(u64, f64)>,
    /// The proportional level set when a recovery last let the lag back above the target in this
    /// episode: below it the recovery runs `RELAPSE_SLOWDOWN` times slower.
    relapse: Option<f64>,
    /// The lag has been under the target since the proportional part last rose.
    was_under: bool,
}

/// Time (ms) in which turn-budget sheds, one or more in every update, raise the turn part from 0 to 1.
const TURN_RISE_MS: f64 = 1000.0;
/// Share of the last ~100 ms the loop was busy from which turn-budget sheds count as overload.
const TURN_SATURATED_BUSY: f64 = 0.95;

/// How much slower a recovery goes below the level of its last relapse: near the pressure the
/// overload needs, creep rather than swing back into it.
const RELAPSE_SLOWDOWN: f64 = 4.0;

const NS_PER_MS: f64 = 1_000_000.0;

/// 0 at `lo`, 1 at `hi`, linear between, clamped. NaN reads as 0: a missing figure never sheds.
fn ramp(v: f64, lo: f64, hi: f64) -> f64 {
    let p = (v - lo) / (hi - lo);
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

impl ShedController {
    /// `protected[i]` says whether tier `i` (0 = highest priority) is protected.
    pub fn new(cfg: ShedConfig, protected: &[bool]) -> Result<ShedController, ShedConfigError> {
        cfg.validate()?;
        let sheddable = (0..protected.len()).rev().filter(|&i| !protected[i]).collect();
        Ok(ShedController {
            cfg,
            sheddable,
            scales: vec![1.0; protected.len()],
            pressure: 0.0,
            prop: 0.0,
            integral: 0.0,
            cause: Cause::None,
            turn: 0.0,
            hold_until_ns: 0,
            turn_sheds: 0,
            turn_hold_until_ns: 0,
            last_ns: None,
            baseline_ms: None,
            episodes: 0,
            excursion: None,
            relapse: None,
            was_under: false,
        })
    }

    pub fn config(&self) -> &ShedConfig {
        &self.cfg
    }

    /// Current refill scale per tier (index = tier id).
    pub fn scales(&self) -> &[f64] {
        &self.scales
    }

    pub fn scale(&self, tier: usize) -> f64 {
        self.scales[tier]
    }

    pub fn pressure(&self) -> f64 {
        self.pressure
    }

    pub fn cause(&self) -> Cause {
        self.cause
    }

    /// Number of times shedding started (pressure left zero).
    pub fn episodes(&self) -> u64 {
        self.episodes
    }

    /// The learned idle lag baseline (relative mode), 0 until learned or in absolute mode.
    pub fn baseline_ms(&self) -> f64 {
        if self.cfg.relative {
            self.baseline_ms.unwrap_or(0.0)
        } else {
            0.0
        }
    }

    /// The lag thresholds in force now (target, critical), baseline included.
    pub fn thresholds_ms(&self) -> (f64, f64) {
        let b = self.baseline_ms();
        (self.cfg.target_lag_ms + b, self.cfg.critical_lag_ms + b)
    }

    /// Pressure that one tier's worth of shedding takes (`1/n`), 1 without sheddable tiers.
    fn tier_step(&self) -> f64 {
        1.0 / self.sheddable.len().max(1) as f64
    }

    /// What the heap asks for: `(demand, release)`; release applies a 2%-of-heap hysteresis.
    fn heap(&self, ratio: f64) -> (f64, f64) {
        match self.cfg.heap_ratio {
            Some(limit) => {
                let ask = |r: f64| {
                    if r > limit {
                        let step = self.tier_step();
                        step + (1.0 - step) * ramp(r, limit, 1.0)
                    } else {
                        0.0
                    }
                };
                (ask(ratio), ask(ratio + 0.02))
            }
            None => (0.0, 0.0),
        }
    }

    fn learn_baseline(&mut self, input: &ShedInput, dt_ms: f64) {
        if !self.cfg.relative || input.stalled || self.pressure > 0.0 || input.elu > self.cfg.idle_elu {
            return;
        }
        let lag = input.lag_ms;
        if !lag.is_finite() || lag < 0.0 || lag >= self.thresholds_ms().0 {
            return;
        }
        let next = match self.baseline_ms {
            None => lag,
            Some(b) => {
                let alpha = if self.cfg.baseline_tau_ms == 0.0 { 1.0 } else { 1.0 - (-dt_ms / self.cfg.baseline_tau_ms).exp() };
                b + (lag - b) * alpha
            }
        };
        self.baseline_ms = Some(next.clamp(0.0, self.cfg.max_baseline_ms));
    }

    /// The spike filter: whether `lag` (above or below the target `t`) may start an episode now.
    fn confirmed(&mut self, lag: f64, t: f64, now_ns: u64) -> bool {
        if lag <= t {
            if lag < t - self.cfg.hysteresis_ms {
                self.excursion = None;
            }
            return false;
        }
        if self.cfg.confirm_ms == 0.0 {
            return true;
        }
        match &mut self.excursion {
            None => {
                self.excursion = Some((now_ns, lag));
                false
            }
            Some((since, peak)) => {
                let rising = lag > *peak;
                *peak = peak.max(lag);
                rising && (now_ns - *since) as f64 >= self.cfg.confirm_ms * NS_PER_MS
            }
        }
    }

    /// Feeds one health reading taken at `now_ns`; returns true when any tier's scale changed.
    pub fn update(&mut self, input: &ShedInput, now_ns: u64) -> bool {
        // A clock that goes back is read as one that stood still.
        let prev_ns = self.last_ns.unwrap_or(now_ns);
        let now_ns = now_ns.max(prev_ns);
        self.last_ns = Some(now_ns);
        let dt_ms = (now_ns.saturating_sub(prev_ns)) as f64 / NS_PER_MS;
        self.learn_baseline(input, dt_ms);

        let before = self.pressure;
        let (t, c) = self.thresholds_ms();
        let lag = if input.lag_ms.is_nan() { 0.0 } else { input.lag_ms };
        let (heap_demand, heap_release) = self.heap(input.heap_ratio);
        // While nothing is shed, only a confirmed excursion counts (the spike filter); during an
        // episode every reading does, and the filter starts afresh once it has ended.
        let lag_counts = if self.pressure > 0.0 {
            self.excursion = None;
            true
        } else {
            self.confirmed(lag, t, now_ns)
        };
        let lag_demand = if lag_counts { ramp(lag, t, c) } else { 0.0 };
        let lag_release = ramp(lag + self.cfg.hysteresis_ms, t, c);
        let demand = lag_demand.max(heap_demand);
        let release = lag_release.max(heap_release);
        let hold = |now: u64| now.saturating_add((self.cfg.hold_ms * NS_PER_MS) as u64);

        // Proportional part.
        let mut prop_cause = None;
        if self.prop > 0.0 && lag < t {
            self.was_under = true;
        }
        if input.stalled {
            self.prop = 1.0;
            self.was_under = false;
            prop_cause = Some(Cause::Stall);
            self.hold_until_ns = hold(now_ns);
        } else if demand > self.prop {
            self.prop = demand;
            self.was_under = false;
            prop_cause = Some(if heap_demand > lag_demand { Cause::Heap } else { Cause::Lag });
            self.hold_until_ns = hold(now_ns);
        } else if self.prop > 0.0 && release >= self.prop {
            // Still justified: keep holding.
            self.hold_until_ns = hold(now_ns);
        } else if self.prop > 0.0 && now_ns >= self.hold_until_ns && lag > t + self.cfg.hysteresis_ms && self.was_under {
            // The pressure had brought the lag under the target, and the recovery has let it back
            // above by more than the hysteresis: the level it reached admits too much. Halve what is
            // admitted and hold again, rather than waiting until the lag has climbed to the level
            // that set the pressure (under a sustained overload that wait was a ~1.7 s swing up to
            // 60-90 ms of lag). The hysteresis keeps a loop that merely hovers at the target (0.8x
            // of capacity) from turning a false start into a long episode.
            self.prop = 1.0 - (1.0 - self.prop) / 2.0;
            self.relapse = Some(self.prop);
            self.was_under = false;
            prop_cause = Some(Cause::Lag);
            self.hold_until_ns = hold(now_ns);
        } else if self.prop > 0.0 && now_ns >= self.hold_until_ns {
            let since_ns = prev_ns.max(self.hold_until_ns);
            let elapsed_ms = now_ns.saturating_sub(since_ns) as f64 / NS_PER_MS;
            let mut step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { elapsed_ms / self.cfg.recovery_ms };
            if self.relapse.is_some_and(|r| self.prop <= r) {
                step /= RELAPSE_SLOWDOWN;
            }
            self.prop = release.max(self.prop - step);
            if self.prop <= 1e-9 {
                self.prop = 0.0;
                self.relapse = None;
                self.was_under = false;
            } else if self.prop == release {
                prop_cause = Some(if heap_release > lag_release { Cause::Heap } else { Cause::Lag });
            }
        }

        // Integral part. A long gap between updates says nothing about the lag during the gap: count
        // at most 100 ms of it.
        if self.cfg.integral_ms > 0.0 {
            let dt = dt_ms.min(100.0);
            if lag > t && lag_counts {
                let excess = ((lag - t) / (c - t)).min(1.0);
                self.integral = (self.integral + excess * dt / self.cfg.integral_ms).min(1.0);
            } else if lag < t - self.cfg.hysteresis_ms && self.integral > 0.0 {
                let step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { dt_ms / self.cfg.recovery_ms };
                self.integral = (self.integral - step).max(0.0);
                if self.integral <= 1e-9 {
                    self.integral = 0.0;
                }
            }
        } else {
            self.integral = 0.0;
        }

        // Turn part. The turn budget keeps the lag down, so while it sheds the lag no longer shows the
        // overload: the sheds themselves do, on a saturated loop (busy >= TURN_SATURATED_BUSY over the
        // last ~100 ms; with idle time left, a turn shed only trimmed a burst). They raise this
        // part (full range in TURN_RISE_MS) and hold it; once none came for `hold_ms` it recovers at
        // the recovery rate. The refill scales follow, lowest tier first, until the tiers' budgets
        // admit about what the loop can run.
        let turn_sheds = std::mem::take(&mut self.turn_sheds);
        if turn_sheds > 0 && self.pressure > 0.0 && input.busy >= TURN_SATURATED_BUSY {
            self.turn = (self.turn + dt_ms.min(100.0) / TURN_RISE_MS).min(1.0);
            self.turn_hold_until_ns = hold(now_ns);
        } else if self.turn > 0.0 && now_ns >= self.turn_hold_until_ns {
            let step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { dt_ms / self.cfg.recovery_ms };
            self.turn = (self.turn - step).max(0.0);
            if self.turn <= 1e-9 {
                self.turn = 0.0;
            }
        }

        self.pressure = self.prop.max(self.integral).max(self.turn);
        if self.pressure == 0.0 {
            self.cause = Cause::None;
        } else if self.integral > self.prop || self.turn > self.prop {
            self.cause = Cause::Lag;
        } else if let Some(cause) = prop_cause {
            self.cause = cause;
        } else if self.cause == Cause::None {
            self.cause = Cause::Lag;
        }
        if before == 0.0 && self.pressure > 0.0 {
            self.episodes += 1;
        }
        self.apply()
    }

    /// Recomputes the scales from the pressure; true when any changed.
    fn apply(&mut self) -> bool {
        let n = self.sheddable.len() as f64;
        let mut changed = false;
        for (rank, &tier) in self.sheddable.iter().enumerate() {
            let s = (1.0 - (self.pressure * n - rank as f64)).clamp(0.0, 1.0);
            // Snap values within float noise of the ends so "zero" and "full" are exact.
            let s = if s < 1e-9 { 0.0 } else if s > 1.0 - 1e-9 { 1.0 } else { s };
            if s != self.scales[tier] {
                self.scales[tier] = s;
                changed = true;
            }
        }
        changed
    }

    /// The gate shed a request by the turn budget: the loop is still over capacity, however low the
    /// lag the budget keeps it at. Counted into the turn part on the next update.
    pub fn note_turn_shed(&mut self) {
        self.turn_sheds += 1;
    }

    /// Forgets all pressure and the learned baseline (scales back to 1).
    pub fn reset(&mut self) {
        self.pressure = 0.0;
        self.prop = 0.0;
        self.integral = 0.0;
        self.cause = Cause::None;
        self.turn = 0.0;
        self.hold_until_ns = 0;
        self.turn_sheds = 0;
        self.turn_hold_until_ns = 0;
        self.last_ns = None;
        self.baseline_ms = None;
        self.excursion = None;
        self.relapse = None;
        self.was_under = false;
        self.apply();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn lag(ms: f64) -> ShedInput {
        ShedInput { lag_ms: ms, ..Default::default() }
    }

    /// critical (protected), standard, background, as in the default gatekeeper.
    fn three_tiers(cfg: ShedConfig) -> ShedController {
        ShedController::new(cfg, &[true, false, false]).unwrap()
    }

    /// Proportional only (no integral term) unless a test turns it on.
    fn cfg() -> ShedConfig {
        ShedConfig { target_lag_ms: 50.0, critical_lag_ms: 150.0, hysteresis_ms: 10.0, hold_ms: 1000.0, recovery_ms: 2000.0, integral_ms: 0.0, confirm_ms: 0.0, ..Default::default() }
    }

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn healthy_loop_keeps_every_tier_at_full_refill() {
        let mut c = three_tiers(cfg());
        for i in 0..100 {
            assert!(!c.update(&lag(49.9), i * 10 * MS));
        }
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
        assert_eq!(c.pressure(), 0.0);
        assert_eq!(c.episodes(), 0);
    }

    #[test]
    fn lowest_tier_is_throttled_first_then_the_next_one_up() {
        let mut c = three_tiers(cfg());
        // Range 50..150 ms, two sheddable tiers: background covers 50..100, standard 100..150.
        assert!(c.update(&lag(75.0), 0));
        assert!(approx(c.scale(2), 0.5));
        assert_eq!(c.scale(1), 1.0);
        assert!(c.update(&lag(100.0), MS));
        assert_eq!(c.scale(2), 0.0);
        assert_eq!(c.scale(1), 1.0);
        assert!(c.update(&lag(125.0), 2 * MS));
        assert_eq!(c.scale(2), 0.0);
        assert!(approx(c.scale(1), 0.5));
        assert!(c.update(&lag(150.0), 3 * MS));
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        assert!(!c.update(&lag(10_000.0), 4 * MS));
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0], "the protected tier keeps full refill");
        assert_eq!(c.cause(), Cause::Lag);
        assert_eq!(c.episodes(), 1);
    }

    #[test]
    fn shedding_starts_on_the_first_reading_above_the_target() {
        let mut c = three_tiers(cfg());
        c.update(&lag(10.0), 0);
        assert!(c.update(&lag(50.5), MS));
        assert!(c.scale(2) < 1.0);
        assert!(c.update(&lag(500.0), 2 * MS), "a jump to past critical sheds every tier in one update");
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    }

    #[test]
    fn four_tiers_two_protected_order_by_priority_not_position() {
        // tiers: vip (protected), paid, internal (protected), free
        let mut c = ShedController::new(cfg(), &[true, false, true, false]).unwrap();
        c.update(&lag(100.0), 0);
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0, 0.0]);
        c.update(&lag(125.0), MS);
        assert_eq!(c.scales(), &[1.0, 0.5, 1.0, 0.0]);
        c.update(&lag(1000.0), 2 * MS);
        assert_eq!(c.scales(), &[1.0, 0.0, 1.0, 0.0]);
    }

    #[test]
    fn all_protected_never_changes() {
        let mut c = ShedController::new(cfg(), &[true, true]).unwrap();
        assert!(!c.update(&ShedInput { stalled: true, ..lag(1e6) }, 0));
        assert_eq!(c.scales(), &[1.0, 1.0]);
    }

    #[test]
    fn pressure_is_held_for_hold_ms_after_the_lag_falls() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        // Lag back to nothing: held until 1000 ms after the last justifying reading.
        for t in [1, 100, 500, 999] {
            assert!(!c.update(&lag(0.0), t * MS), "held at {t} ms");
        }
        assert_eq!(c.pressure(), 1.0);
        // From 1000 ms on, recovery at 1/2000 per ms: after 500 ms, pressure 0.75.
        c.update(&lag(0.0), 1000 * MS);
        assert!(approx(c.pressure(), 1.0));
        c.update(&lag(0.0), 1500 * MS);
        assert!(approx(c.pressure(), 0.75));
        assert!(approx(c.scale(1), 0.5));
        assert_eq!(c.scale(2), 0.0, "the lowest tier recovers last");
        c.update(&lag(0.0), 2500 * MS);
        assert!(approx(c.pressure(), 0.25));
        assert_eq!(c.scale(1), 1.0);
        assert!(approx(c.scale(2), 0.5));
        c.update(&lag(0.0), 3000 * MS);
        assert_eq!(c.pressure(), 0.0);
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
        assert_eq!(c.cause(), Cause::None);
    }

    #[test]
    fn a_reading_that_still_justifies_the_pressure_renews_the_hold() {
        let mut c = three_tiers(cfg());
        c.update(&lag(100.0), 0); // pressure 0.5
        c.update(&lag(95.0), 900 * MS); // 95 + 10 hysteresis >= 100: still justified
        c.update(&lag(0.0), 1500 * MS);
        assert!(approx(c.pressure(), 0.5), "hold renewed at 900 ms runs to 1900 ms");
        c.update(&lag(0.0), 1900 * MS);
        assert!(approx(c.pressure(), 0.5));
        c.update(&lag(0.0), 2100 * MS);
        assert!(approx(c.pressure(), 0.4));
    }

    #[test]
    fn hysteresis_band_does_not_flap_around_the_threshold() {
        let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, ..cfg() });
        c.update(&lag(100.0), 0);
        assert_eq!(c.scale(2), 0.0);
        // Oscillating within 10 ms below the level that set the pressure changes nothing.
        for i in 1..50u64 {
            let l = if i % 2 == 0 { 91.0 } else { 100.0 };
            assert!(!c.update(&lag(l), i * MS), "flapped at step {i}");
        }
        // 89 ms: release level ramp(99) = 0.49 -> falls to it at once (no hold, no recovery time).
        c.update(&lag(89.0), 60 * MS);
        assert!(approx(c.pressure(), 0.49));
        assert!(approx(c.scale(2), 0.02));
    }

    #[test]
    fn recovery_cannot_drop_below_what_the_current_lag_still_asks_for() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        // Long after the hold, lag at 80 ms (release level ramp(90) = 0.4): recovery stops at 0.4.
        c.update(&lag(80.0), 10_000 * MS);
        assert!(approx(c.pressure(), 0.4));
        c.update(&lag(80.0), 20_000 * MS);
        assert!(approx(c.pressure(), 0.4));
    }

    fn integral_cfg() -> ShedConfig {
        ShedConfig { integral_ms: 1000.0, ..cfg() }
    }

    #[test]
    fn the_integral_part_pushes_a_lag_that_stays_above_the_target() {
        let mut c = three_tiers(integral_cfg());
        // 75 ms, a quarter of the way from target to critical: 0.25 at once (proportional) ...
        c.update(&lag(75.0), 0);
        assert!(approx(c.pressure(), 0.25));
        // ... while the integral grows by 0.25 per second: it takes over after 1 s.
        for i in 1..=20 {
            c.update(&lag(75.0), i * 100 * MS);
        }
        assert!(approx(c.pressure(), 0.5), "{}", c.pressure());
        assert_eq!(c.scales(), &[1.0, 1.0, 0.0]);
        for i in 21..=40 {
            c.update(&lag(75.0), i * 100 * MS);
        }
        assert_eq!(c.pressure(), 1.0, "a throttle that does not bring the lag down is pushed to full");
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        assert_eq!(c.cause(), Cause::Lag);
        assert_eq!(c.episodes(), 1);
        // Healthy again: the proportional part is held 1 s then recovers; the integral drains at the
        // recovery rate (1/2000 per ms) from the first healthy reading.
        c.update(&lag(0.0), 4100 * MS);
        c.update(&lag(0.0), 5100 * MS);
        // integral 1 - 1100/2000 = 0.45; proportional 0.25 held to 5000, then 0.2.
        assert!(approx(c.pressure(), 0.45), "{}", c.pressure());
        c.update(&lag(0.0), 6100 * MS);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn short_spikes_on_a_healthy_loop_do_not_accumulate() {
        let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 500.0, ..integral_cfg() });
        let mut t = 0;
        let mut peak: f64 = 0.0;
        // 10 s of: 50 ms at 80 ms of lag, then 950 ms at 2 ms.
        for _ in 0..10 {
            for _ in 0..5 {
                c.update(&lag(80.0), t * MS);
                peak = peak.max(c.pressure());
                t += 10;
            }
            for _ in 0..95 {
                c.update(&lag(2.0), t * MS);
                t += 10;
            }
        }
        assert!(peak < 0.4, "peak {peak}");
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn the_integral_counts_at_most_100_ms_of_a_gap() {
        let mut c = three_tiers(integral_cfg());
        c.update(&lag(0.0), 0);
        // 10 s without an update, then a reading at 100 ms: the gap adds at most 100 ms worth of 0.5
        // per second to the integral, which stays below the proportional 0.5.
        c.update(&lag(100.0), 10_000 * MS);
        assert!(approx(c.pressure(), 0.5));
        c.update(&lag(100.0), 11_000 * MS);
        assert!(approx(c.pressure(), 0.5), "integral 0.1: still below the proportional 0.5");
        for i in 1..=10 {
            c.update(&lag(100.0), (11_000 + i * 100) * MS);
        }
        assert!(approx(c.pressure(), 0.6), "{}", c.pressure());
    }

    #[test]
    fn the_integral_does_not_run_at_or_below_the_target() {
        let mut c = three_tiers(integral_cfg());
        for i in 0..100 {
            c.update(&lag(50.0), i * 100 * MS);
        }
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn a_recovery_that_lets_the_lag_back_over_the_target_halves_what_is_admitted() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(0.0), 500 * MS); // the pressure brought the lag under the target
        c.update(&lag(0.0), 1400 * MS); // hold over at 1000 ms, 400 ms of recovery
        assert!(approx(c.pressure(), 0.8));
        // 65 ms: above target + hysteresis (60), below the release level: admitted 0.2 -> 0.1.
        assert!(c.update(&lag(65.0), 1500 * MS));
        assert!(approx(c.pressure(), 0.9));
        assert!(approx(c.scale(1), 0.2));
        assert_eq!(c.scale(2), 0.0);
        assert_eq!(c.cause(), Cause::Lag);
        assert_eq!(c.episodes(), 1);
        // Held again for hold_ms from the cut.
        c.update(&lag(0.0), 2500 * MS);
        assert!(approx(c.pressure(), 0.9));
        // Below the level of the relapse the recovery runs 4x slower: 400 ms take 0.05, not 0.2.
        c.update(&lag(0.0), 2900 * MS);
        assert!(approx(c.pressure(), 0.85));
        // Recovered fully (0.85 * 8000 ms), the relapse is forgotten: the next episode recovers at
        // the normal rate.
        c.update(&lag(0.0), 9700 * MS);
        assert_eq!(c.pressure(), 0.0);
        c.update(&lag(150.0), 10_000 * MS);
        c.update(&lag(0.0), 11_000 * MS);
        c.update(&lag(0.0), 11_400 * MS);
        assert!(approx(c.pressure(), 0.8));
        assert_eq!(c.episodes(), 2);
    }

    #[test]
    fn no_halving_within_the_hysteresis_or_for_a_lag_that_never_went_under() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(0.0), 500 * MS);
        c.update(&lag(0.0), 1400 * MS);
        // 60 ms is target + hysteresis, not above it: the recovery goes on (0.8 - 0.05).
        c.update(&lag(60.0), 1500 * MS);
        assert!(approx(c.pressure(), 0.75));
        // A lag that stayed above the target since the pressure rose: plain recovery, no halving
        // (ramp(65 + 10) = 0.25 is the floor).
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(65.0), 1400 * MS);
        assert!(approx(c.pressure(), 0.8));
        c.update(&lag(65.0), 1500 * MS);
        assert!(approx(c.pressure(), 0.75));
    }

    #[test]
    fn a_rise_after_the_lag_went_under_rearms_only_once_it_goes_under_again() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(0.0), 500 * MS);
        c.update(&lag(0.0), 1400 * MS);
        c.update(&lag(65.0), 1500 * MS); // halved: 0.9, held to 2500 ms
        // Still above the target when the hold ends: recovery, not another halving.
        c.update(&lag(65.0), 2500 * MS);
        c.update(&lag(65.0), 2900 * MS);
        assert!(approx(c.pressure(), 0.85), "0.9 - 400 ms at the slowed rate");
        // Under the target, then back above: halved again.
        c.update(&lag(40.0), 3000 * MS);
        c.update(&lag(65.0), 3100 * MS);
        assert!(approx(c.pressure(), 1.0 - (1.0 - (0.85 - 0.1 / 8.0)) / 2.0));
    }

    #[test]
    fn rising_again_during_recovery_is_immediate() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(0.0), 1000 * MS);
        c.update(&lag(0.0), 2000 * MS);
        assert!(approx(c.pressure(), 0.5));
        c.update(&lag(140.0), 2001 * MS);
        assert!(approx(c.pressure(), 0.9));
        // And the hold restarts from that reading.
        c.update(&lag(0.0), 3000 * MS);
        assert!(approx(c.pressure(), 0.9));
        c.update(&lag(0.0), 3101 * MS);
        assert!(approx(c.pressure(), 0.85));
        assert_eq!(c.episodes(), 1, "one episode: pressure never reached zero");
    }

    fn filtered() -> ShedConfig {
        ShedConfig { confirm_ms: 30.0, integral_ms: 1000.0, ..cfg() }
    }

    #[test]
    fn one_slow_tick_and_its_draining_backlog_do_not_start_shedding() {
        let mut c = three_tiers(filtered());
        c.update(&lag(2.0), 0);
        // One 120 ms tick, read for 40 ms, then the backlog drains: the lag falls from its peak.
        for (t, l) in [(10, 120.0), (20, 120.0), (50, 120.0), (60, 90.0), (100, 70.0), (130, 55.0), (150, 20.0)] {
            c.update(&lag(l), t * MS);
            assert_eq!(c.pressure(), 0.0, "at {t} ms");
        }
        assert_eq!(c.episodes(), 0);
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    }

    #[test]
    fn a_lag_still_rising_after_confirm_ms_sheds_at_once() {
        let mut c = three_tiers(filtered());
        c.update(&lag(2.0), 0);
        // A loop falling behind: the lag keeps rising past its peak (the in-band estimate grows with
        // every request of a long loop iteration).
        c.update(&lag(60.0), 10 * MS);
        c.update(&lag(70.0), 20 * MS);
        c.update(&lag(80.0), 39 * MS);
        assert_eq!(c.pressure(), 0.0, "29 ms into the excursion: not yet");
        c.update(&lag(80.0), 40 * MS);
        assert_eq!(c.pressure(), 0.0, "30 ms in, but not rising past 80");
        c.update(&lag(100.0), 41 * MS);
        assert!(approx(c.pressure(), 0.5), "{}", c.pressure());
        assert_eq!(c.episodes(), 1);
        // Once shedding, every reading counts at once (no filter): a rise is applied immediately.
        c.update(&lag(140.0), 42 * MS);
        assert!(approx(c.pressure(), 0.9));
    }

    #[test]
    fn the_excursion_ends_once_the_lag_is_below_the_target_by_the_hysteresis() {
        let mut c = three_tiers(filtered());
        c.update(&lag(60.0), 0);
        // Dips to between target - hysteresis and the target keep the excursion ...
        c.update(&lag(45.0), 20 * MS);
        c.update(&lag(61.0), 30 * MS);
        assert!(c.pressure() > 0.0, "the excursion began at 0 ms and is rising at 30 ms");
        let mut c = three_tiers(filtered());
        c.update(&lag(60.0), 0);
        // ... a drop below 40 ms ends it, and the next one starts afresh.
        c.update(&lag(39.0), 20 * MS);
        c.update(&lag(61.0), 30 * MS);
        c.update(&lag(62.0), 50 * MS);
        assert_eq!(c.pressure(), 0.0, "20 ms into the new excursion");
        c.update(&lag(63.0), 60 * MS);
        assert!(c.pressure() > 0.0);
    }

    #[test]
    fn an_unconfirmed_excursion_adds_nothing_to_the_integral() {
        let mut c = three_tiers(filtered());
        // A lag steady at 100 ms for 1 s (never rising past its first reading): the integral would
        // have reached 0.5; filtered, nothing.
        for i in 0..=100 {
            c.update(&lag(100.0), i * 10 * MS);
        }
        assert_eq!(c.pressure(), 0.0);
        // One reading past the peak, and the proportional part applies.
        c.update(&lag(100.5), 1001 * MS);
        assert!(approx(c.pressure(), 0.505));
    }

    #[test]
    fn the_filter_applies_afresh_after_an_episode_but_not_to_heap_or_stall() {
        let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, heap_ratio: Some(0.8), ..filtered() });
        c.update(&lag(60.0), 0);
        c.update(&lag(70.0), 30 * MS);
        assert!(c.pressure() > 0.0);
        c.update(&lag(0.0), 40 * MS);
        assert_eq!(c.pressure(), 0.0);
        c.update(&lag(90.0), 50 * MS);
        assert_eq!(c.pressure(), 0.0, "a new excursion is filtered again");
        c.update(&ShedInput { stalled: true, ..lag(0.0) }, 60 * MS);
        assert_eq!(c.pressure(), 1.0, "a stall is not filtered");
        c.update(&lag(0.0), 70 * MS);
        c.update(&ShedInput { heap_ratio: 0.85, ..lag(0.0) }, 80 * MS);
        assert!(c.pressure() > 0.5, "nor is the heap");
    }

    #[test]
    fn a_stall_sheds_every_unprotected_tier_at_once() {
        let mut c = three_tiers(cfg());
        c.update(&lag(0.0), 0);
        assert!(c.update(&ShedInput { stalled: true, ..lag(0.0) }, MS));
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        assert_eq!(c.cause(), Cause::Stall);
        // The stall clears: still held, then recovers like any other episode.
        c.update(&lag(0.0), 500 * MS);
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        c.update(&lag(0.0), 5000 * MS);
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    }

    #[test]
    fn heap_pressure_sheds_at_least_the_lowest_tier() {
        let mut c = three_tiers(ShedConfig { heap_ratio: Some(0.8), ..cfg() });
        c.update(&ShedInput { heap_ratio: 0.79, ..lag(0.0) }, 0);
        assert_eq!(c.pressure(), 0.0);
        c.update(&ShedInput { heap_ratio: 0.8 + 1e-12, ..lag(0.0) }, MS);
        assert_eq!(c.scale(2), 0.0);
        assert!(c.scale(1) > 0.999_999);
        assert_eq!(c.cause(), Cause::Heap);
        c.update(&ShedInput { heap_ratio: 0.9, ..lag(0.0) }, 2 * MS);
        assert!(approx(c.pressure(), 0.75));
        c.update(&ShedInput { heap_ratio: 1.0, ..lag(0.0) }, 3 * MS);
        assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
        // Heap at 0.79 is inside the 2% hysteresis band: still held after the hold time.
        c.update(&ShedInput { heap_ratio: 0.79, ..lag(0.0) }, 10_000 * MS);
        assert!(c.pressure() >= 0.5);
        c.update(&ShedInput { heap_ratio: 0.5, ..lag(0.0) }, 20_000 * MS);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn the_cause_follows_the_signal_that_holds_the_pressure() {
        let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, heap_ratio: Some(0.8), ..cfg() });
        c.update(&ShedInput { stalled: true, ..lag(0.0) }, 0);
        assert_eq!(c.cause(), Cause::Stall);
        c.update(&ShedInput { heap_ratio: 0.81, ..lag(0.0) }, MS);
        assert_eq!(c.cause(), Cause::Heap);
        assert!(c.pressure() > 0.5 && c.pressure() < 0.6);
        c.update(&ShedInput { heap_ratio: 0.0, ..lag(0.0) }, 2 * MS);
        assert_eq!(c.cause(), Cause::None);
    }

    #[test]
    fn heap_can_be_ignored() {
        let mut c = three_tiers(ShedConfig { heap_ratio: None, ..cfg() });
        c.update(&ShedInput { heap_ratio: 1.0, ..lag(0.0) }, 0);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn larger_of_lag_and_heap_wins() {
        let mut c = three_tiers(ShedConfig { heap_ratio: Some(0.9), ..cfg() });
        c.update(&ShedInput { heap_ratio: 0.95, ..lag(140.0) }, 0);
        assert!(approx(c.pressure(), 0.9));
        assert_eq!(c.cause(), Cause::Lag);
    }

    #[test]
    fn nan_lag_never_sheds() {
        let mut c = three_tiers(cfg());
        c.update(&lag(f64::NAN), 0);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn a_clock_that_goes_back_is_treated_as_no_time_passing() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 5000 * MS);
        c.update(&lag(0.0), 1000 * MS);
        assert_eq!(c.pressure(), 1.0);
    }

    #[test]
    fn a_long_quiet_gap_recovers_fully_in_one_update() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.update(&lag(0.0), 60_000 * MS);
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    }

    #[test]
    fn zero_hold_and_zero_recovery_follow_the_signal() {
        let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, hysteresis_ms: 0.0, ..cfg() });
        c.update(&lag(150.0), 0);
        c.update(&lag(75.0), MS);
        assert!(approx(c.pressure(), 0.25));
        c.update(&lag(0.0), 2 * MS);
        assert_eq!(c.pressure(), 0.0);
        c.update(&lag(100.0), 3 * MS);
        assert_eq!(c.episodes(), 2);
    }

    #[test]
    fn relative_thresholds_sit_above_the_learned_idle_baseline() {
        let mut c = three_tiers(ShedConfig { relative: true, max_baseline_ms: 50.0, baseline_tau_ms: 1000.0, ..cfg() });
        // A loop whose idle lag is 20 ms (a slow VM): absolute 50 ms would be close; relative is 70 ms.
        c.update(&lag(20.0), 0);
        assert_eq!(c.baseline_ms(), 20.0, "the first idle sample seeds the baseline");
        for i in 1..=100 {
            c.update(&lag(20.0), i * 10 * MS);
        }
        assert!(approx(c.baseline_ms(), 20.0));
        assert_eq!(c.thresholds_ms(), (70.0, 170.0));
        // A busy loop (ELU above idleElu) at 60 ms: below 20 + 50, so no shedding, and not learned from.
        c.update(&ShedInput { elu: 0.9, ..lag(60.0) }, 1010 * MS);
        assert_eq!(c.pressure(), 0.0, "60 ms is below 20 + 50");
        c.update(&lag(120.0), 1020 * MS);
        assert!(approx(c.pressure(), 0.5));
    }

    #[test]
    fn baseline_learns_slowly_and_only_from_idle_samples() {
        let mut c = three_tiers(ShedConfig { relative: true, max_baseline_ms: 30.0, baseline_tau_ms: 1000.0, ..cfg() });
        c.update(&lag(0.0), 0);
        // One time constant at 10 ms lag: baseline goes 1 - 1/e of the way.
        c.update(&lag(10.0), 1000 * MS);
        assert!(approx(c.baseline_ms(), 10.0 * (1.0 - (-1.0f64).exp())));
        // Busy samples (ELU above idle_elu) are not learned from.
        let b = c.baseline_ms();
        c.update(&ShedInput { elu: 0.9, ..lag(40.0) }, 2000 * MS);
        assert_eq!(c.baseline_ms(), b);
        // Nor samples above the current target; and the baseline is capped.
        for i in 3..200 {
            c.update(&lag(45.0), i * 1000 * MS);
        }
        assert_eq!(c.baseline_ms(), 30.0);
        assert_eq!(c.thresholds_ms(), (80.0, 180.0));
    }

    #[test]
    fn baseline_does_not_learn_while_shedding_or_stalled() {
        let mut c = three_tiers(ShedConfig { relative: true, baseline_tau_ms: 0.0, ..cfg() });
        c.update(&lag(5.0), 0);
        c.update(&lag(100.0), MS);
        assert!(c.pressure() > 0.0);
        c.update(&lag(1.0), 2 * MS);
        assert_eq!(c.baseline_ms(), 5.0);
        c.reset();
        c.update(&ShedInput { stalled: true, ..lag(3.0) }, 3 * MS);
        assert_eq!(c.baseline_ms(), 0.0);
    }

    #[test]
    fn absolute_mode_has_no_baseline() {
        let mut c = three_tiers(cfg());
        c.update(&lag(30.0), 0);
        assert_eq!(c.baseline_ms(), 0.0);
        assert_eq!(c.thresholds_ms(), (50.0, 150.0));
    }

    #[test]
    fn reset_restores_full_refill() {
        let mut c = three_tiers(cfg());
        c.update(&lag(150.0), 0);
        c.reset();
        assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn turn_budget_sheds_raise_the_turn_part_lowest_tier_first_then_it_recovers_after_the_hold() {
        let mut c = three_tiers(ShedConfig { integral_ms: 0.0, ..cfg() });
        let (t, _) = c.thresholds_ms();
        c.update(&lag(t + 1.0), 0); // an episode starts with a little pressure
        let start = c.pressure();
        assert!(start > 0.0 && start < 0.05);
        // The turn budget now holds the lag at 5 ms but sheds in every 1 ms update: +1.0 per 1000 ms.
        let busy = |ms: f64| ShedInput { busy: 1.0, ..lag(ms) };
        // With idle time left on the loop, turn sheds only trimmed bursts: nothing rises.
        for ms in 1..=100u64 {
            c.note_turn_shed();
            c.update(&ShedInput { busy: 0.9, ..lag(5.0) }, ms * MS);
        }
        assert_eq!(c.pressure(), start);
        for ms in 101..=700u64 {
            c.note_turn_shed();
            c.update(&busy(5.0), ms * MS);
        }
        assert!((c.pressure() - 0.6).abs() < 1e-6, "{}", c.pressure());
        assert_eq!(c.scales()[2], 0.0, "background (lowest) first");
        assert!(c.scales()[1] > 0.0 && c.scales()[1] < 1.0, "then standard: {:?}", c.scales());
        assert_eq!(c.scales()[0], 1.0);
        // No sheds: held for hold_ms after the last one, then down at the recovery rate.
        c.update(&busy(5.0), (700 + 999) * MS);
        assert!((c.pressure() - 0.6).abs() < 1e-6);
        c.update(&busy(5.0), (700 + 1000 + 600) * MS);
        assert!(c.pressure() < 0.6 && c.pressure() > 0.0, "{}", c.pressure());
        c.update(&busy(5.0), 10_000 * MS);
        assert_eq!(c.pressure(), 0.0);
        // Outside an episode a turn shed (there is none: the gate only sheds by turn under pressure)
        // would not start one.
        c.note_turn_shed();
        c.update(&busy(5.0), 10_001 * MS);
        assert_eq!(c.pressure(), 0.0);
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let bad = |c: ShedConfig| ShedController::new(c, &[false]).unwrap_err().field;
        assert_eq!(bad(ShedConfig { target_lag_ms: f64::NAN, ..cfg() }), "targetLagMs");
        assert_eq!(bad(ShedConfig { target_lag_ms: -1.0, ..cfg() }), "targetLagMs");
        assert_eq!(bad(ShedConfig { critical_lag_ms: 50.0, ..cfg() }), "criticalLagMs");
        assert_eq!(bad(ShedConfig { critical_lag_ms: f64::INFINITY, ..cfg() }), "criticalLagMs");
        assert_eq!(bad(ShedConfig { hold_ms: -0.5, ..cfg() }), "holdMs");
        assert_eq!(bad(ShedConfig { recovery_ms: f64::NAN, ..cfg() }), "recoveryMs");
        assert_eq!(bad(ShedConfig { hysteresis_ms: -1.0, ..cfg() }), "hysteresisMs");
        assert_eq!(bad(ShedConfig { heap_ratio: Some(1.0), ..cfg() }), "heapRatio");
        assert_eq!(bad(ShedConfig { heap_ratio: Some(0.0), ..cfg() }), "heapRatio");
        assert_eq!(bad(ShedConfig { idle_elu: 2.0, ..cfg() }), "idleElu");
        assert_eq!(bad(ShedConfig { confirm_ms: -1.0, ..cfg() }), "confirmMs");
        assert_eq!(bad(ShedConfig { turn_budget_ms: f64::NAN, ..cfg() }), "turnBudgetMs");
        assert_eq!(bad(ShedConfig { turn_budget_ms: -1.0, ..cfg() }), "turnBudgetMs");
        let e = ShedController::new(ShedConfig { critical_lag_ms: 10.0, ..cfg() }, &[false]).unwrap_err();
        assert_eq!(e.to_string(), "criticalLagMs must be greater than targetLagMs");
    }

    #[test]
    fn lag_signal_selection() {
        let s = crate::core::health::HealthSample { latest_lag_ms: 7.0, ewma_lag_ms: 3.0, p99_lag_ms: 11.0, elu: 0.25, heap_used: 1, heap_limit: 4, stalled: true, ticks: 9 };
        assert_eq!(ShedInput::from_sample(&s, LagSignal::Latest).lag_ms, 7.0);
        assert_eq!(ShedInput::from_sample(&s, LagSignal::Ewma).lag_ms, 3.0);
        assert_eq!(ShedInput::from_sample(&s, LagSignal::P99).lag_ms, 11.0);
        let m = ShedInput::from_sample(&s, LagSignal::Max);
        assert_eq!((m.lag_ms, m.heap_ratio, m.elu, m.stalled), (7.0, 0.25, 0.25, true));
        assert_eq!(LagSignal::parse("ewma"), Some(LagSignal::Ewma));
        assert_eq!(LagSignal::parse("mean"), None);
    }
}

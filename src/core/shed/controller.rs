//! The controller: health readings in, one pressure and a refill scale per tier out (module notes).
use super::{Cause, ShedConfig, ShedConfigError, ShedInput};

#[derive(Debug)]
pub struct ShedController {
    pub(super) cfg: ShedConfig,
    /// Tier ids of the unprotected tiers, lowest priority first.
    sheddable: Vec<usize>,
    scales: Vec<f64>,
    pressure: f64,
    /// The proportional part (with hold and gradual recovery), the integral part, and the turn part
    /// (driven by the gate's turn-budget sheds, see `note_turn_shed`).
    prop: f64,
    pub(super) integral: f64,
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
    pub(super) excursion: Option<(u64, f64)>,
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

/// Utilisation of the last ~100 ms below which the loop has spare time (the fast release, module notes).
const SPARE_BUSY: f64 = 0.9;
/// How much faster every part recovers during the fast release.
const SPARE_SPEEDUP: f64 = 4.0;

/// How much slower a recovery goes below the level of its last relapse: near the pressure the
/// overload needs, creep rather than swing back into it.
const RELAPSE_SLOWDOWN: f64 = 4.0;

pub(super) const NS_PER_MS: f64 = 1_000_000.0;

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

    /// The pressure's parts (proportional, integral, turn): which one holds it (stats, timelines).
    pub fn parts(&self) -> (f64, f64, f64) {
        (self.prop, self.integral, self.turn)
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
        // The fast release (module notes); a NaN `busy` (not measured) is never spare.
        let spare = input.busy < SPARE_BUSY && lag < t - self.cfg.hysteresis_ms && !input.stalled;
        let speed = if spare { SPARE_SPEEDUP } else { 1.0 };

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
        } else if self.prop > 0.0 && (now_ns >= self.hold_until_ns || spare) {
            let since_ns = if spare { prev_ns } else { prev_ns.max(self.hold_until_ns) };
            let elapsed_ms = now_ns.saturating_sub(since_ns) as f64 / NS_PER_MS;
            let mut step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { speed * elapsed_ms / self.cfg.recovery_ms };
            if !spare && self.relapse.is_some_and(|r| self.prop <= r) {
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
                let step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { speed * dt_ms / self.cfg.recovery_ms };
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
        } else if self.turn > 0.0 && (now_ns >= self.turn_hold_until_ns || spare) {
            let step = if self.cfg.recovery_ms == 0.0 { 1.0 } else { speed * dt_ms / self.cfg.recovery_ms };
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
            let s = if s < 1e-9 {
                0.0
            } else if s > 1.0 - 1e-9 {
                1.0
            } else {
                s
            };
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

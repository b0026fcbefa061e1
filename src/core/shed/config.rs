//! The shed controller's options: defaults and validation.
use crate::core::names::named_enum;
use std::fmt;

named_enum! {
    /// Which lag figure of a health sample the controller reads.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LagSignal: u8 {
        /// The latest tick's drift: reacts within one tick, noisy.
        Latest = "latest",
        /// The sampler's exponentially weighted moving average.
        Ewma = "ewma",
        /// The p99 over the sampler's window: slow to rise and slow to fall.
        P99 = "p99",
        /// The larger of the latest tick and the EWMA: reacts at once to a choking loop, and smooths the fall.
        Max = "max",
    }
}

impl LagSignal {
    /// This signal's figure of `s` (ms).
    pub fn of(self, s: &crate::core::health::HealthSample) -> f64 {
        match self {
            LagSignal::Latest => s.latest_lag_ms,
            LagSignal::Ewma => s.ewma_lag_ms,
            LagSignal::P99 => s.p99_lag_ms,
            LagSignal::Max => s.latest_lag_ms.max(s.ewma_lag_ms),
        }
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
            // As high as the target: a baseline above it would double the thresholds.
            max_baseline_ms: 20.0,
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

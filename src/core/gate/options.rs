//! The gatekeeper's `shed` options as JS names them: each option's name, its default and the field it
//! sets, declared once in `SHED_OPTIONS`. The napi layer reads a JS object through it and exports the
//! defaults to JS (lib/gatekeeper.js validates against them with its own messages); values are then
//! checked again where they land (`ShedConfig::validate`, `Gate::new`, the setters below).
use crate::core::health::sampler::{SamplerOptions, MAX_RESOLUTION_MS};
use crate::core::shed::{LagSignal, ShedConfig};

/// One option's value as JS gives it. `false` turns off an option that can be off (`heapRatio`,
/// `stallMs`); `Undefined` is "not given" (the default applies; as a default, "derived": `maxBaselineMs`
/// follows `targetLagMs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptionValue<'a> {
    Number(f64),
    Bool(bool),
    Text(&'a str),
    Undefined,
}

/// The shed part of a gatekeeper's configuration: the controller, how the gate feeds it, and the
/// gate's own sampler.
#[derive(Clone, Debug, PartialEq)]
pub struct ShedOptions {
    pub shed: ShedConfig,
    pub lag_signal: LagSignal,
    /// The controller is moved at most this often (ms); 0 = on every decision.
    pub update_interval_ms: f64,
    pub sampler: SamplerOptions,
    /// The JS turn queue's (lib/gatekeeper/turn-queue.js; lib/gatekeeper/index.js checks their
    /// ranges): the longest wait (ms) before a waiter is shed, and the waiters it holds across tiers.
    pub queue_max_wait_ms: f64,
    pub queue_max_length: f64,
    /// `maxBaselineMs` was given; otherwise it follows `targetLagMs` (`finish`).
    max_baseline_given: bool,
}

impl Default for ShedOptions {
    fn default() -> Self {
        ShedOptions {
            lag_signal: LagSignal::Ewma,
            update_interval_ms: 1.0,
            // A short EWMA, so that the controller sees a choking loop within a few ticks; stall
            // detection on.
            sampler: SamplerOptions { resolution_ms: 10, window_ms: 1000, ewma_ms: 50, stall_ms: Some(500) },
            // Past half a second a caller's own timeout or patience is near; a hundred waiters bound
            // the queue's memory (a queued Express request held about 14 KB in a heap snapshot).
            queue_max_wait_ms: 500.0,
            queue_max_length: 100.0,
            max_baseline_given: false,
            shed: ShedConfig::default(),
        }
    }
}

/// One option: its JS name, how to read it from `ShedOptions` and how to set it.
pub struct ShedOption {
    pub name: &'static str,
    pub get: fn(&ShedOptions) -> OptionValue<'static>,
    /// `Err(reason)` for a value of the wrong kind ("must be ..."); ranges are checked where the value
    /// lands.
    pub set: fn(&mut ShedOptions, OptionValue) -> Result<(), &'static str>,
}

fn number(v: OptionValue) -> Result<f64, &'static str> {
    match v {
        OptionValue::Number(n) => Ok(n),
        _ => Err("must be a number"),
    }
}

/// The sampler's durations: whole milliseconds, at least 1, at most an hour.
fn whole_ms(v: OptionValue) -> Result<u64, &'static str> {
    match v {
        OptionValue::Number(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= 3_600_000.0 => Ok(n as u64),
        _ => Err("must be a whole number of milliseconds in 1..3600000"),
    }
}

/// A number field of `ShedOptions`, by its path.
macro_rules! number_option {
    ($name:literal, $($field:ident).+) => {
        ShedOption {
            name: $name,
            get: |o| OptionValue::Number(o.$($field).+),
            set: |o, v| {
                o.$($field).+ = number(v)?;
                Ok(())
            },
        }
    };
}

/// The sampler's tick: whole milliseconds, at least 1, at most `MAX_RESOLUTION_MS` (as the LagMonitor's).
fn resolution_ms(v: OptionValue) -> Result<u64, &'static str> {
    match whole_ms(v) {
        Ok(ms) if ms <= MAX_RESOLUTION_MS => Ok(ms),
        _ => Err("must be a whole number of milliseconds in 1..60000"),
    }
}

/// A whole-milliseconds field of the gate's sampler, read by `parse` (`whole_ms` or `resolution_ms`).
macro_rules! sampler_option {
    ($name:literal, $field:ident, $parse:ident) => {
        ShedOption {
            name: $name,
            get: |o| OptionValue::Number(o.sampler.$field as f64),
            set: |o, v| {
                o.sampler.$field = $parse(v)?;
                Ok(())
            },
        }
    };
}

/// Every `shed` option of the gatekeeper, in the order its documentation lists them.
pub const SHED_OPTIONS: &[ShedOption] = &[
    number_option!("targetLagMs", shed.target_lag_ms),
    number_option!("criticalLagMs", shed.critical_lag_ms),
    ShedOption {
        name: "relative",
        get: |o| OptionValue::Bool(o.shed.relative),
        set: |o, v| match v {
            OptionValue::Bool(b) => {
                o.shed.relative = b;
                Ok(())
            }
            _ => Err("must be a boolean"),
        },
    },
    number_option!("hysteresisMs", shed.hysteresis_ms),
    number_option!("holdMs", shed.hold_ms),
    number_option!("recoveryMs", shed.recovery_ms),
    number_option!("integralMs", shed.integral_ms),
    number_option!("confirmMs", shed.confirm_ms),
    ShedOption {
        name: "heapRatio",
        get: |o| o.shed.heap_ratio.map_or(OptionValue::Bool(false), OptionValue::Number),
        set: |o, v| {
            o.shed.heap_ratio = match v {
                OptionValue::Bool(false) => None,
                v => Some(number(v).map_err(|_| "must be a number or false")?),
            };
            Ok(())
        },
    },
    ShedOption {
        name: "stallMs",
        get: |o| o.sampler.stall_ms.map_or(OptionValue::Bool(false), |s| OptionValue::Number(s as f64)),
        set: |o, v| {
            o.sampler.stall_ms = match v {
                OptionValue::Bool(false) => None,
                v => Some(whole_ms(v).map_err(|_| "must be a whole number of milliseconds in 1..3600000 or false")?),
            };
            Ok(())
        },
    },
    ShedOption {
        name: "lagSignal",
        get: |o| OptionValue::Text(o.lag_signal.as_str()),
        set: |o, v| {
            o.lag_signal = match v {
                OptionValue::Text(t) => LagSignal::from_name(t),
                _ => None,
            }
            .ok_or("must be one of latest, ewma, p99, max")?;
            Ok(())
        },
    },
    sampler_option!("resolutionMs", resolution_ms, resolution_ms),
    sampler_option!("windowMs", window_ms, whole_ms),
    sampler_option!("ewmaMs", ewma_ms, whole_ms),
    number_option!("updateIntervalMs", update_interval_ms),
    number_option!("baselineTauMs", shed.baseline_tau_ms),
    ShedOption {
        name: "maxBaselineMs",
        get: |o| if o.max_baseline_given { OptionValue::Number(o.shed.max_baseline_ms) } else { OptionValue::Undefined },
        set: |o, v| {
            o.shed.max_baseline_ms = number(v)?;
            o.max_baseline_given = true;
            Ok(())
        },
    },
    number_option!("idleElu", shed.idle_elu),
    number_option!("turnBudgetMs", shed.turn_budget_ms),
    number_option!("queueMaxWaitMs", queue_max_wait_ms),
    number_option!("queueMaxLength", queue_max_length),
];

impl ShedOptions {
    /// Sets option `name` (a JS name from `SHED_OPTIONS`); `Undefined` leaves the default. `Err` names
    /// the option and says what is wrong ("stallMs must be ...").
    pub fn set(&mut self, name: &str, v: OptionValue) -> Result<(), String> {
        let opt = SHED_OPTIONS.iter().find(|o| o.name == name).ok_or_else(|| format!("{name} is not a shed option"))?;
        if v == OptionValue::Undefined {
            return Ok(());
        }
        (opt.set)(self, v).map_err(|reason| format!("{name} {reason}"))?;
        if !self.max_baseline_given {
            self.shed.max_baseline_ms = self.shed.target_lag_ms;
        }
        Ok(())
    }

    /// Every option's default, by JS name.
    pub fn defaults() -> impl Iterator<Item = (&'static str, OptionValue<'static>)> {
        let d = ShedOptions::default();
        SHED_OPTIONS.iter().map(move |o| (o.name, (o.get)(&d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_default_reads_back_as_it_is_set() {
        let mut names: Vec<_> = SHED_OPTIONS.iter().map(|o| o.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SHED_OPTIONS.len());
        let mut o = ShedOptions::default();
        for (name, v) in ShedOptions::defaults() {
            o.set(name, v).unwrap();
        }
        assert_eq!(o, ShedOptions::default(), "setting every default changes nothing");
        assert!(o.shed.validate().is_ok(), "the defaults are a valid controller configuration");
        assert_eq!(o.shed.max_baseline_ms, o.shed.target_lag_ms, "the controller's default follows the rule too");
    }

    #[test]
    fn the_defaults_are_the_controllers_and_the_gates_own() {
        let d: std::collections::HashMap<_, _> = ShedOptions::defaults().collect();
        let c = ShedConfig::default();
        assert_eq!(d["targetLagMs"], OptionValue::Number(c.target_lag_ms));
        assert_eq!(d["criticalLagMs"], OptionValue::Number(c.critical_lag_ms));
        assert_eq!(d["heapRatio"], OptionValue::Number(0.9));
        assert_eq!(d["stallMs"], OptionValue::Number(500.0));
        assert_eq!(d["lagSignal"], OptionValue::Text("ewma"));
        assert_eq!(d["maxBaselineMs"], OptionValue::Undefined, "derived from targetLagMs");
        assert_eq!(d["relative"], OptionValue::Bool(false));
    }

    #[test]
    fn max_baseline_follows_the_target_until_given() {
        let mut o = ShedOptions::default();
        o.set("targetLagMs", OptionValue::Number(35.0)).unwrap();
        assert_eq!(o.shed.max_baseline_ms, 35.0);
        o.set("maxBaselineMs", OptionValue::Number(12.0)).unwrap();
        o.set("targetLagMs", OptionValue::Number(40.0)).unwrap();
        assert_eq!(o.shed.max_baseline_ms, 12.0);
    }

    #[test]
    fn off_and_wrong_kinds() {
        let mut o = ShedOptions::default();
        o.set("heapRatio", OptionValue::Bool(false)).unwrap();
        o.set("stallMs", OptionValue::Bool(false)).unwrap();
        assert_eq!((o.shed.heap_ratio, o.sampler.stall_ms), (None, None));
        o.set("stallMs", OptionValue::Undefined).unwrap();
        assert_eq!(o.sampler.stall_ms, None, "undefined leaves what is there");
        assert_eq!(o.set("stallMs", OptionValue::Number(1.5)).unwrap_err(), "stallMs must be a whole number of milliseconds in 1..3600000 or false");
        assert_eq!(o.set("resolutionMs", OptionValue::Number(0.0)).unwrap_err(), "resolutionMs must be a whole number of milliseconds in 1..60000");
        assert_eq!(o.set("resolutionMs", OptionValue::Number(60_001.0)).unwrap_err(), "resolutionMs must be a whole number of milliseconds in 1..60000");
        o.set("resolutionMs", OptionValue::Number(60_000.0)).unwrap();
        assert_eq!(o.sampler.resolution_ms, MAX_RESOLUTION_MS, "a minute, as the LagMonitor's");
        assert_eq!(o.set("lagSignal", OptionValue::Text("p50")).unwrap_err(), "lagSignal must be one of latest, ewma, p99, max");
        assert_eq!(o.set("relative", OptionValue::Number(1.0)).unwrap_err(), "relative must be a boolean");
        assert_eq!(o.set("holdMs", OptionValue::Text("1")).unwrap_err(), "holdMs must be a number");
        assert_eq!(o.set("nope", OptionValue::Number(1.0)).unwrap_err(), "nope is not a shed option");
    }
}

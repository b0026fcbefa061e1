//! When a client is banned, and for how long: strike rules ("N events within a window → ban for D")
//! and escalation for repeat offenders, as a JS user writes them (numbers as f64, validated with
//! errors that name the option), and the validated form the ban table runs on.
//!
//! Escalation: the n-th ban of a key within the memory period (counted from the end of its previous
//! ban) lasts `D × factor^(n−1)`, at most `maxBanMs`; once `permanentAfter` escalations have been
//! given, the next ban is permanent, until an operator lifts it. Every rule ban is then lengthened by
//! a random share of up to `jitter` (from the table's seeded generator), so that a botnet cannot
//! compute when its addresses come back and return all at once: a ban lasts between `d` and
//! `d × (1 + jitter)`.
use super::rng::SplitMix64;
use crate::core::ledger::{js_number, ConfigError};
use crate::core::names::named_enum;
use std::sync::Arc;

named_enum! {
    /// What a strike counts.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum StrikeKind: u8 {
        /// A request refused by a named limit.
        RateLimited = "rate-limited",
        /// A probe: 404, 400, 405, a malformed request (the JS side decides what it reports).
        Probe = "probe",
    }
}

const MINUTE_MS: f64 = 60_000.0;
const HOUR_MS: f64 = 60.0 * MINUTE_MS;
/// Largest threshold of a rule (a tracked key keeps up to `threshold − 1` timestamps per rule).
pub const MAX_THRESHOLD: u32 = 1000;
/// The longest duration any ban option takes (about 31.7 years).
pub const MAX_DURATION_MS: f64 = 1e12;

#[derive(Clone, Debug, PartialEq)]
pub struct StrikeRuleSpec {
    pub name: String,
    pub on: StrikeKind,
    pub threshold: f64,
    pub window_ms: f64,
    pub ban_ms: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EscalationSpec {
    pub factor: f64,
    pub max_ban_ms: f64,
    pub memory_ms: f64,
    /// `None`: never permanent.
    pub permanent_after: Option<f64>,
    pub jitter: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BanSpec {
    pub rules: Vec<StrikeRuleSpec>,
    pub escalation: EscalationSpec,
    /// Bans held at most (key and CIDR bans together).
    pub max_bans: f64,
    /// Keys whose strikes and offence history are tracked at most.
    pub max_tracked: f64,
}

impl Default for BanSpec {
    /// 3 rate-limit refusals within a minute ban for 5 minutes; 20 probes within a minute for 30;
    /// repeats within a day double the ban, up to a day, and the ban after 5 escalations is permanent.
    fn default() -> Self {
        BanSpec {
            rules: vec![
                StrikeRuleSpec { name: "rate-limit".into(), on: StrikeKind::RateLimited, threshold: 3.0, window_ms: MINUTE_MS, ban_ms: 5.0 * MINUTE_MS },
                StrikeRuleSpec { name: "probe".into(), on: StrikeKind::Probe, threshold: 20.0, window_ms: MINUTE_MS, ban_ms: 30.0 * MINUTE_MS },
            ],
            escalation: EscalationSpec { factor: 2.0, max_ban_ms: 24.0 * HOUR_MS, memory_ms: 24.0 * HOUR_MS, permanent_after: Some(5.0), jitter: 0.1 },
            max_bans: 100_000.0,
            max_tracked: 100_000.0,
        }
    }
}

/// A validated rule.
#[derive(Clone, Debug, PartialEq)]
pub struct StrikeRule {
    pub name: Arc<str>,
    pub on: StrikeKind,
    pub threshold: u32,
    pub window_ns: u64,
    pub ban_ns: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Escalation {
    pub factor: f64,
    pub max_ns: u64,
    pub memory_ns: u64,
    pub permanent_after: Option<u32>,
    pub jitter: f64,
}

/// The validated configuration of a ban table.
#[derive(Clone, Debug, PartialEq)]
pub struct BanConfig {
    pub rules: Vec<StrikeRule>,
    pub escalation: Escalation,
    pub max_bans: usize,
    pub max_tracked: usize,
}

impl Escalation {
    /// The duration of a key's `offense`-th ban (1-based) of base `base_ns`: `None` for permanent.
    pub fn duration_ns(&self, base_ns: u64, offense: u32, rng: &mut SplitMix64) -> Option<u64> {
        let escalations = offense.saturating_sub(1);
        if self.permanent_after.is_some_and(|k| escalations > k) {
            return None;
        }
        let d = (base_ns as f64 * self.factor.powi(escalations.min(1024) as i32)).min(self.max_ns as f64);
        let jittered = d * (1.0 + self.jitter * rng.next_f64());
        Some(jittered.min(u64::MAX as f64 / 2.0) as u64)
    }
}

fn whole(path: &str, v: f64, min: f64, max: f64) -> Result<u32, ConfigError> {
    if v.is_finite() && v >= min && v <= max && v.fract() == 0.0 {
        Ok(v as u32)
    } else {
        Err(ConfigError(format!("{path} must be an integer from {min} to {max} (got {})", js_number(v))))
    }
}

fn ms_to_ns(path: &str, ms: f64) -> Result<u64, ConfigError> {
    if ms.is_finite() && ms > 0.0 && ms <= MAX_DURATION_MS {
        Ok(((ms * 1e6).round() as u64).max(1))
    } else {
        Err(ConfigError(format!("{path} must be a finite number > 0 and at most {} (got {})", js_number(MAX_DURATION_MS), js_number(ms))))
    }
}

impl BanSpec {
    /// Validates the options; errors name them under `path` (`bans`).
    pub fn validate(&self, path: &str) -> Result<BanConfig, ConfigError> {
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, r) in self.rules.iter().enumerate() {
            let p = format!("{path}.rules[{i}]");
            if r.name.is_empty() {
                return Err(ConfigError(format!("{p}.name must be a non-empty string")));
            }
            rules.push(StrikeRule {
                name: r.name.as_str().into(),
                on: r.on,
                threshold: whole(&format!("{p}.threshold"), r.threshold, 1.0, f64::from(MAX_THRESHOLD))?,
                window_ns: ms_to_ns(&format!("{p}.windowMs"), r.window_ms)?,
                ban_ns: ms_to_ns(&format!("{p}.banMs"), r.ban_ms)?,
            });
        }
        if rules.len() > 16 {
            return Err(ConfigError(format!("{path}.rules must list at most 16 rules (got {})", rules.len())));
        }
        let e = &self.escalation;
        let p = format!("{path}.escalation");
        if !(e.factor.is_finite() && (1.0..=1000.0).contains(&e.factor)) {
            return Err(ConfigError(format!("{p}.factor must be a finite number from 1 to 1000 (got {})", js_number(e.factor))));
        }
        if !(e.jitter.is_finite() && (0.0..=1.0).contains(&e.jitter)) {
            return Err(ConfigError(format!("{p}.jitter must be a finite number from 0 to 1 (got {})", js_number(e.jitter))));
        }
        let escalation = Escalation {
            factor: e.factor,
            max_ns: ms_to_ns(&format!("{p}.maxBanMs"), e.max_ban_ms)?,
            memory_ns: ms_to_ns(&format!("{p}.memoryMs"), e.memory_ms)?,
            permanent_after: e.permanent_after.map(|k| whole(&format!("{p}.permanentAfter"), k, 0.0, 1000.0)).transpose()?,
            jitter: e.jitter,
        };
        let max_bans = whole(&format!("{path}.maxBans"), self.max_bans, 1.0, f64::from(u32::MAX))? as usize;
        let max_tracked = whole(&format!("{path}.maxTracked"), self.max_tracked, 1.0, f64::from(u32::MAX))? as usize;
        Ok(BanConfig { rules, escalation, max_bans, max_tracked })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;

    fn esc(permanent_after: Option<u32>, jitter: f64) -> Escalation {
        Escalation { factor: 2.0, max_ns: 60 * MIN, memory_ns: 24 * 60 * MIN, permanent_after, jitter }
    }

    #[test]
    fn bans_double_up_to_the_cap_then_turn_permanent() {
        let mut r = SplitMix64::new(1);
        let e = esc(Some(4), 0.0);
        let d: Vec<Option<u64>> = (1..=6).map(|n| e.duration_ns(5 * MIN, n, &mut r)).collect();
        assert_eq!(d, vec![Some(5 * MIN), Some(10 * MIN), Some(20 * MIN), Some(40 * MIN), Some(60 * MIN), None]);
        let never = esc(None, 0.0);
        assert_eq!(never.duration_ns(5 * MIN, 1_000_000, &mut r), Some(60 * MIN));
        // The cap applies to a rule's base too.
        assert_eq!(esc(Some(0), 0.0).duration_ns(90 * MIN, 1, &mut r), Some(60 * MIN));
        assert_eq!(esc(Some(0), 0.0).duration_ns(90 * MIN, 2, &mut r), None);
    }

    #[test]
    fn jitter_lengthens_within_its_share_and_follows_the_seed() {
        let e = esc(None, 0.2);
        let (mut a, mut b, mut c) = (SplitMix64::new(9), SplitMix64::new(9), SplitMix64::new(10));
        let xs: Vec<u64> = (0..100).map(|_| e.duration_ns(5 * MIN, 1, &mut a).unwrap()).collect();
        assert!(xs.iter().all(|&d| (5 * MIN..=6 * MIN).contains(&d)));
        assert!(xs.iter().any(|&d| d != xs[0]), "jittered");
        assert_eq!(xs, (0..100).map(|_| e.duration_ns(5 * MIN, 1, &mut b).unwrap()).collect::<Vec<_>>());
        assert_ne!(xs[0], e.duration_ns(5 * MIN, 1, &mut c).unwrap());
    }

    #[test]
    fn the_defaults_validate_and_errors_name_the_option() {
        let c = BanSpec::default().validate("bans").unwrap();
        assert_eq!((c.rules[0].threshold, c.rules[0].window_ns, c.rules[0].ban_ns), (3, MIN, 5 * MIN));
        assert_eq!((c.rules[1].on, c.rules[1].threshold, c.rules[1].ban_ns), (StrikeKind::Probe, 20, 30 * MIN));
        let err = |f: &dyn Fn(&mut BanSpec)| {
            let mut s = BanSpec::default();
            f(&mut s);
            s.validate("bans").unwrap_err().0
        };
        assert_eq!(err(&|s| s.rules[1].threshold = 0.5), "bans.rules[1].threshold must be an integer from 1 to 1000 (got 0.5)");
        assert!(err(&|s| s.rules[0].window_ms = f64::NAN).starts_with("bans.rules[0].windowMs must be a finite number > 0"));
        assert!(err(&|s| s.rules[0].ban_ms = -1.0).starts_with("bans.rules[0].banMs"));
        assert!(err(&|s| s.rules[0].name.clear()).starts_with("bans.rules[0].name"));
        assert!(err(&|s| s.escalation.factor = 0.5).starts_with("bans.escalation.factor"));
        assert!(err(&|s| s.escalation.jitter = f64::INFINITY).starts_with("bans.escalation.jitter must be a finite number from 0 to 1 (got Infinity)"));
        assert!(err(&|s| s.escalation.max_ban_ms = 0.0).starts_with("bans.escalation.maxBanMs"));
        assert!(err(&|s| s.escalation.memory_ms = f64::NAN).starts_with("bans.escalation.memoryMs"));
        assert!(err(&|s| s.escalation.permanent_after = Some(-1.0)).starts_with("bans.escalation.permanentAfter"));
        assert!(err(&|s| s.max_bans = 0.0).starts_with("bans.maxBans"));
        assert!(err(&|s| s.max_tracked = 1.5).starts_with("bans.maxTracked"));
    }
}

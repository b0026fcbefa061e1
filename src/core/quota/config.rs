//! A quota engine's configuration: the global limits it funds from leases, how each behaves without a
//! lease or without the store, and validation with messages that name the option as a JS user writes
//! it (`limits[1].renewalPeriodMs`). Times are milliseconds here, as users write them; the engine works
//! in nanoseconds.
pub use crate::core::ledger::{js_number, ConfigError};

/// The global limit's algorithm, as far as the engine needs it: only for the fallback share (the store
/// is the truth while it answers; a grant is tokens + TTL + remaining whatever the algorithm).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// `burst` tokens, refilled at `rate_per_sec`.
    TokenBucket { rate_per_sec: f64, burst: f64 },
    /// `limit` per `window_ms`, fixed or sliding: which one is the store's business.
    Window { limit: f64, window_ms: f64 },
}

/// What a spend does when its key holds too little lease and the store is answering: a key seen for
/// the first time, or one whose renewal has not come back yet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unfunded {
    /// The caller makes (or joins) one bounded round trip and asks again: exact, at the cost of a
    /// wait of one store round trip for the first request of a key.
    Wait,
    /// Admit up to `allowance` tokens on credit; the next grant pays the debt back first. A key's
    /// debt never exceeds `allowance`, so the cluster over-admits by at most `allowance` × processes
    /// per key (per window, for a window limit; in all, for a token bucket).
    Provisional { allowance: u64 },
}

/// What a spend does when its key holds too little lease and the store is not answering.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fallback {
    /// Spend the remaining leases, then a safe share of the limit: the limit ÷ the largest holder
    /// count known for it (at least `min_holders`), refilled as the algorithm says. Counted as
    /// fallback decisions.
    Open,
    /// Refuse once the leases run out.
    Closed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LimitConfig {
    /// The limit's name (what the caller's store keys are made from).
    pub name: String,
    pub algorithm: Algorithm,
    pub unfunded: Unfunded,
    pub fallback: Fallback,
    /// How long a lease should last at the key's current rate: a lease's target size is the local
    /// rate × this.
    pub renewal_period_ms: f64,
    /// How far ahead of need a renewal is asked: when the balance falls below what this much time
    /// will spend. At least one store round trip.
    pub lead_time_ms: f64,
    /// A lease's life, asked of the store (which may shorten it: a window store ends it with the
    /// window). Past it, the engine no longer spends the lease.
    pub lease_ttl_ms: f64,
    /// The largest lease asked for (a spend's own cost is always asked whole).
    pub max_lease: u64,
    /// The size of a key's first lease, before its rate is known.
    pub initial_lease: u64,
    /// After a failed request, a key asks again no sooner than this (while the store is down).
    pub retry_ms: f64,
    /// The fewest holders the fallback share assumes, before the store has said how many there are.
    pub min_holders: u32,
    /// Tell the store when a lease runs dry (`ReturnReason::Spent`): a sliding window store then
    /// stops counting its tokens one window after their last spend, not one after the lease's TTL.
    pub spent_returns: bool,
}

/// The defaults, declared once (the JS options take theirs from here).
pub const RENEWAL_PERIOD_MS: f64 = 1000.0;
pub const LEAD_TIME_MS: f64 = 200.0;
pub const LEASE_TTL_MS: f64 = 10_000.0;
pub const MAX_LEASE: u64 = 1000;
pub const INITIAL_LEASE: u64 = 1;
pub const RETRY_MS: f64 = 1000.0;
pub const MIN_HOLDERS: u32 = 1;
pub const MAX_KEYS: usize = 100_000;
pub const IDLE_TTL_MS: f64 = 60_000.0;
pub const SWEEP_PER_POLL: usize = 256;

impl LimitConfig {
    /// A limit with the default options: `Wait` for unfunded keys, fail-open.
    pub fn new(name: &str, algorithm: Algorithm) -> LimitConfig {
        LimitConfig {
            name: name.into(),
            algorithm,
            unfunded: Unfunded::Wait,
            fallback: Fallback::Open,
            renewal_period_ms: RENEWAL_PERIOD_MS,
            lead_time_ms: LEAD_TIME_MS,
            lease_ttl_ms: LEASE_TTL_MS,
            max_lease: MAX_LEASE,
            initial_lease: INITIAL_LEASE,
            retry_ms: RETRY_MS,
            min_holders: MIN_HOLDERS,
            spent_returns: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct QuotaConfig {
    pub limits: Vec<LimitConfig>,
    /// The most keys tracked at once (over all limits).
    pub max_keys: usize,
    /// A key untouched this long is evicted (its unused lease returned) when the sweep reaches it.
    pub idle_ttl_ms: f64,
    /// Keys each `poll` visits for expiry, idleness and debts: a full pass takes
    /// `max_keys / sweep_per_poll` polls.
    pub sweep_per_poll: usize,
}

impl QuotaConfig {
    pub fn new(limits: Vec<LimitConfig>) -> QuotaConfig {
        QuotaConfig { limits, max_keys: MAX_KEYS, idle_ttl_ms: IDLE_TTL_MS, sweep_per_poll: SWEEP_PER_POLL }
    }
}

fn positive(what: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number > 0 (got {})", js_number(v))))
    }
}

fn non_negative(what: &str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number >= 0 (got {})", js_number(v))))
    }
}

/// An integer option, from 1 to `max`.
fn count(what: &str, v: u64, max: u64) -> Result<(), ConfigError> {
    if (1..=max).contains(&v) {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be an integer from 1 to {max} (got {v})")))
    }
}

/// The largest millisecond option: a year, so that nanoseconds stay far from `u64::MAX`.
const MAX_MS: f64 = 365.0 * 86_400_000.0;

fn duration(what: &str, v: f64) -> Result<(), ConfigError> {
    positive(what, v)?;
    if v > MAX_MS {
        return Err(ConfigError(format!("{what} must be at most {} (got {})", js_number(MAX_MS), js_number(v))));
    }
    Ok(())
}

/// Tokens fit in 2^53 so that they convert to and from JS numbers exactly.
const MAX_TOKENS: u64 = 1 << 53;

pub(crate) fn validate(cfg: &QuotaConfig) -> Result<(), ConfigError> {
    if cfg.limits.is_empty() {
        return Err(ConfigError("limits must list at least one limit".into()));
    }
    if cfg.limits.len() > u16::MAX as usize {
        return Err(ConfigError(format!("limits must list at most {} limits", u16::MAX)));
    }
    count("maxKeys", cfg.max_keys as u64, u32::MAX as u64 - 1)?;
    duration("idleTtlMs", cfg.idle_ttl_ms)?;
    count("sweepPerPoll", cfg.sweep_per_poll as u64, u32::MAX as u64)?;
    for (i, l) in cfg.limits.iter().enumerate() {
        let at = |o: &str| format!("limits[{i}].{o}");
        if l.name.is_empty() {
            return Err(ConfigError(at("name") + " must be a non-empty string"));
        }
        if let Some(j) = cfg.limits[..i].iter().position(|o| o.name == l.name) {
            return Err(ConfigError(format!("{} {:?} is a duplicate of limits[{j}].name", at("name"), l.name)));
        }
        match l.algorithm {
            Algorithm::TokenBucket { rate_per_sec, burst } => {
                non_negative(&at("rate"), rate_per_sec)?;
                positive(&at("burst"), burst)?;
            }
            Algorithm::Window { limit, window_ms } => {
                positive(&at("limit"), limit)?;
                duration(&at("windowMs"), window_ms)?;
            }
        }
        if let Unfunded::Provisional { allowance } = l.unfunded {
            count(&at("provisional"), allowance, MAX_TOKENS)?;
        }
        duration(&at("renewalPeriodMs"), l.renewal_period_ms)?;
        duration(&at("leadTimeMs"), l.lead_time_ms)?;
        duration(&at("leaseTtlMs"), l.lease_ttl_ms)?;
        duration(&at("retryMs"), l.retry_ms)?;
        // A lease sized to last the renewal period must live that long; a lead time past the period
        // would ask for the next lease before the current one is even half spent, every time.
        if l.lease_ttl_ms < l.renewal_period_ms {
            return Err(ConfigError(format!(
                "{} must be at least {} ({} < {})",
                at("leaseTtlMs"),
                at("renewalPeriodMs"),
                js_number(l.lease_ttl_ms),
                js_number(l.renewal_period_ms)
            )));
        }
        if l.lead_time_ms > l.renewal_period_ms {
            return Err(ConfigError(format!(
                "{} must be at most {} ({} > {})",
                at("leadTimeMs"),
                at("renewalPeriodMs"),
                js_number(l.lead_time_ms),
                js_number(l.renewal_period_ms)
            )));
        }
        count(&at("maxLease"), l.max_lease, MAX_TOKENS)?;
        count(&at("initialLease"), l.initial_lease, l.max_lease)?;
        count(&at("minHolders"), l.min_holders as u64, u32::MAX as u64)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket() -> LimitConfig {
        LimitConfig::new("api", Algorithm::TokenBucket { rate_per_sec: 10.0, burst: 20.0 })
    }

    fn err(f: impl FnOnce(&mut QuotaConfig)) -> String {
        let mut c = QuotaConfig::new(vec![bucket()]);
        f(&mut c);
        validate(&c).expect_err("config should be rejected").to_string()
    }

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(validate(&QuotaConfig::new(vec![bucket()])), Ok(()));
        let w = LimitConfig::new("w", Algorithm::Window { limit: 100.0, window_ms: 60_000.0 });
        assert_eq!(validate(&QuotaConfig::new(vec![bucket(), w])), Ok(()));
    }

    #[test]
    fn invalid_options_are_named() {
        assert!(err(|c| c.limits.clear()).contains("limits must list at least one limit"));
        assert!(err(|c| c.limits.push(bucket())).contains("limits[1].name \"api\" is a duplicate of limits[0].name"));
        assert!(err(|c| c.limits[0].name.clear()).contains("limits[0].name must be a non-empty string"));
        assert!(err(|c| c.max_keys = 0).contains("maxKeys must be an integer from 1"));
        assert!(err(|c| c.idle_ttl_ms = f64::NAN).contains("idleTtlMs must be a finite number > 0 (got NaN)"));
        assert!(err(|c| c.sweep_per_poll = 0).contains("sweepPerPoll"));
        assert!(err(|c| c.limits[0].algorithm = Algorithm::TokenBucket { rate_per_sec: -1.0, burst: 1.0 })
            .contains("limits[0].rate must be a finite number >= 0 (got -1)"));
        assert!(err(|c| c.limits[0].algorithm = Algorithm::TokenBucket { rate_per_sec: 1.0, burst: f64::INFINITY })
            .contains("limits[0].burst must be a finite number > 0 (got Infinity)"));
        assert!(err(|c| c.limits[0].algorithm = Algorithm::Window { limit: 0.0, window_ms: 1.0 }).contains("limits[0].limit"));
        assert!(err(|c| c.limits[0].algorithm = Algorithm::Window { limit: 1.0, window_ms: 1e300 }).contains("limits[0].windowMs must be at most"));
        assert!(err(|c| c.limits[0].unfunded = Unfunded::Provisional { allowance: 0 }).contains("limits[0].provisional"));
        assert!(err(|c| c.limits[0].renewal_period_ms = -5.0).contains("limits[0].renewalPeriodMs"));
        assert!(err(|c| c.limits[0].lead_time_ms = 0.0).contains("limits[0].leadTimeMs"));
        assert!(err(|c| c.limits[0].retry_ms = f64::NAN).contains("limits[0].retryMs"));
        assert!(err(|c| c.limits[0].lease_ttl_ms = 500.0).contains("limits[0].leaseTtlMs must be at least limits[0].renewalPeriodMs"));
        assert!(err(|c| c.limits[0].lead_time_ms = 2000.0).contains("limits[0].leadTimeMs must be at most limits[0].renewalPeriodMs"));
        assert!(err(|c| c.limits[0].max_lease = 0).contains("limits[0].maxLease"));
        assert!(err(|c| c.limits[0].initial_lease = 1001).contains("limits[0].initialLease must be an integer from 1 to 1000"));
        assert!(err(|c| c.limits[0].min_holders = 0).contains("limits[0].minHolders"));
    }
}

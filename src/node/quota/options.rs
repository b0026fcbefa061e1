//! The engine's limits as lib/quota passes them (complete: it checks types and fills defaults; the core
//! checks values), read into the core's `QuotaConfig`.
use super::MAX_SAFE;
use crate::core::ledger::{js_number, ConfigError};
use crate::core::quota::{Algorithm, Fallback, LimitConfig, QuotaConfig, Unfunded};
use napi_derive::napi;

/// One limit, complete (lib/quota/engine.js checks types and fills defaults; the core checks values).
#[napi(object)]
pub struct QuotaLimitOptions {
    pub name: String,
    /// "bucket" (`rate`, `burst`), "window" (a fixed window: `limit`, `windowMs`) or "sliding" (a
    /// sliding window: the same, and the store is told when a lease runs dry).
    pub algorithm: String,
    pub rate: f64,
    pub burst: f64,
    pub limit: f64,
    pub window_ms: f64,
    /// The provisional allowance; 0: a key without lease waits for the store (exact).
    pub provisional: f64,
    /// "open" or "closed".
    pub fallback: String,
    pub renewal_period_ms: f64,
    pub lead_time_ms: f64,
    pub lease_ttl_ms: f64,
    pub max_lease: f64,
    pub initial_lease: f64,
    pub retry_ms: f64,
    pub min_holders: f64,
}

#[napi(object)]
pub struct QuotaOptions {
    pub limits: Vec<QuotaLimitOptions>,
    pub max_keys: f64,
    pub idle_ttl_ms: f64,
    pub sweep_per_poll: f64,
}

/// An integer option given as a JS number (the core checks its range).
pub(crate) fn integer(what: &str, v: f64) -> std::result::Result<u64, ConfigError> {
    if v.is_finite() && v.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&v) {
        Ok(v as u64)
    } else {
        Err(ConfigError(format!("{what} must be an integer >= 0 (got {})", js_number(v))))
    }
}

pub(crate) fn to_core(o: QuotaOptions) -> std::result::Result<QuotaConfig, ConfigError> {
    let mut limits = Vec::with_capacity(o.limits.len());
    for (i, l) in o.limits.into_iter().enumerate() {
        let at = |f: &str| format!("limits[{i}].{f}");
        let algorithm = match l.algorithm.as_str() {
            "bucket" => Algorithm::TokenBucket { rate_per_sec: l.rate, burst: l.burst },
            "window" | "sliding" => Algorithm::Window { limit: l.limit, window_ms: l.window_ms },
            other => return Err(ConfigError(format!("{} must be \"bucket\", \"window\" or \"sliding\" (got {other:?})", at("algorithm")))),
        };
        let spent_returns = l.algorithm == "sliding";
        let fallback = match l.fallback.as_str() {
            "open" => Fallback::Open,
            "closed" => Fallback::Closed,
            other => return Err(ConfigError(format!("{} must be \"open\" or \"closed\" (got {other:?})", at("fallback")))),
        };
        let allowance = integer(&at("provisional"), l.provisional)?;
        let min_holders = integer(&at("minHolders"), l.min_holders)?;
        limits.push(LimitConfig {
            name: l.name,
            algorithm,
            unfunded: if allowance == 0 { Unfunded::Wait } else { Unfunded::Provisional { allowance } },
            fallback,
            renewal_period_ms: l.renewal_period_ms,
            lead_time_ms: l.lead_time_ms,
            lease_ttl_ms: l.lease_ttl_ms,
            max_lease: integer(&at("maxLease"), l.max_lease)?,
            initial_lease: integer(&at("initialLease"), l.initial_lease)?,
            retry_ms: l.retry_ms,
            min_holders: u32::try_from(min_holders).map_err(|_| ConfigError(format!("{} must be at most {}", at("minHolders"), u32::MAX)))?,
            spent_returns,
        });
    }
    let mut cfg = QuotaConfig::new(limits);
    cfg.max_keys = integer("maxKeys", o.max_keys)? as usize;
    cfg.idle_ttl_ms = o.idle_ttl_ms;
    cfg.sweep_per_poll = integer("sweepPerPoll", o.sweep_per_poll)? as usize;
    Ok(cfg)
}

//! The gate's options, and the check that every tier can pay a request's cost.
use super::ShedOptions;
use crate::core::concurrency::ConcurrencyConfig;
use crate::core::ledger::TierConfig;
use crate::core::net::ipkey::IpKeyConfig;
use crate::core::shed::{LagSignal, ShedConfig};
use crate::core::token::signature::TierSigner;

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
    /// The learned concurrency limit (`core::concurrency`).
    pub concurrency: ConcurrencyConfig,
    /// Shadow mode (`shadow.rs`): `Some(p)` enforces `p` percent (0..=100) of the overload decisions.
    pub shadow: Option<f64>,
}

impl GateConfig {
    pub fn new(default_tier: usize) -> GateConfig {
        let d = ShedOptions::default();
        GateConfig {
            shed: d.shed,
            lag_signal: d.lag_signal,
            update_interval_ms: d.update_interval_ms,
            resolution_ms: 0.0,
            default_tier,
            trust_header: false,
            signer: None,
            ip: IpKeyConfig::default(),
            cost: 1.0,
            concurrency: ConcurrencyConfig::default(),
            shadow: None,
        }
    }
}

/// A request costs `cost` tokens; a bucket holding fewer can never pay it, so every request of that
/// tier would be refused forever (503 with a day-long Retry-After). Names the first such capacity.
pub fn check_cost(cost: f64, tiers: &[TierConfig]) -> Result<(), String> {
    for (i, t) in tiers.iter().enumerate() {
        if cost > t.capacity {
            return Err(format!("cost {cost} exceeds tiers[{i}].capacity {} (tier \"{}\"): no request could ever be admitted", t.capacity, t.name));
        }
        if let Some(pk) = &t.per_key {
            if cost > pk.capacity {
                return Err(format!(
                    "cost {cost} exceeds tiers[{i}].perKey.capacity {} (tier \"{}\"): no keyed request could ever be admitted",
                    pk.capacity, t.name
                ));
            }
        }
    }
    Ok(())
}

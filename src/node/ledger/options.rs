//! The ledger's tiers as lib/ledger passes them (complete: it checks types and fills defaults; the core
//! checks values), read into the core's `TierConfig`s.
use crate::core::ledger::{js_number, ConfigError, Ledger, PerKeyConfig, TierConfig};
use napi::bindgen_prelude::*;
use napi_derive::napi;

#[napi(object)]
pub struct PerKeyOptions {
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub max_keys: f64,
    pub idle_ttl_ms: f64,
}

/// One tier, complete (lib/ledger.js checks types and fills defaults; the core checks values).
#[napi(object)]
pub struct TierOptions {
    pub name: String,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub protected: bool,
    pub per_key: Option<PerKeyOptions>,
}

pub(crate) fn to_core(tiers: Vec<TierOptions>) -> std::result::Result<Vec<TierConfig>, ConfigError> {
    tiers
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let per_key = match t.per_key {
                None => None,
                Some(pk) => {
                    if !(pk.max_keys.fract() == 0.0 && pk.max_keys >= 1.0 && pk.max_keys <= u32::MAX as f64) {
                        return Err(ConfigError(format!(
                            "tiers[{i}].perKey.maxKeys must be an integer from 1 to {} (got {})",
                            u32::MAX,
                            js_number(pk.max_keys)
                        )));
                    }
                    Some(PerKeyConfig { capacity: pk.capacity, refill_per_sec: pk.refill_per_sec, max_keys: pk.max_keys as usize, idle_ttl_ms: pk.idle_ttl_ms })
                }
            };
            Ok(TierConfig { name: t.name, capacity: t.capacity, refill_per_sec: t.refill_per_sec, protected: t.protected, per_key })
        })
        .collect()
}

/// Config errors surface as `InvalidArg`; lib/ledger.js rethrows them as `RangeError`.
pub(crate) fn config_error(e: ConfigError) -> Error {
    Error::new(Status::InvalidArg, e.0)
}

pub(crate) fn build(tiers: Vec<TierOptions>) -> Result<Ledger> {
    Ledger::new(to_core(tiers).map_err(config_error)?).map_err(config_error)
}

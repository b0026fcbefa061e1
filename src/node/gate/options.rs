//! The gate's options as lib/gatekeeper passes them (validated and filled in there), read into the
//! core's `GateConfig`; the `shed` options by name through `core::gate::SHED_OPTIONS`.
use super::invalid;
use crate::core::concurrency::ConcurrencyConfig;
use crate::core::gate::{GateConfig, OptionValue, ShedOptions, SHED_OPTIONS};
use crate::core::net::ipkey::IpKeyConfig;
use crate::core::token::signature::TierSigner;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

/// Everything lib/gatekeeper.js has validated and filled in, but the `shed` options: those come as
/// their own object, read by name through `core::gate::SHED_OPTIONS`.
#[napi(object)]
pub struct GateOptions {
    pub default_tier: u32,
    pub trust_header: bool,
    /// HMAC secrets for signed tier tokens, the first one current.
    pub secrets: Option<Vec<Buffer>>,
    pub ipv4_prefix: u32,
    pub ipv6_prefix: u32,
    pub cost: f64,
    /// false: no live sampler (health stays idle unless injected): a gate that only rate-limits.
    pub sampler: bool,
    /// The learned concurrency limit; `None`: off.
    pub concurrency: Option<GateConcurrencyOptions>,
    /// Shadow mode: the share (0..100) of overload decisions enforced; `None`: not in shadow mode.
    pub shadow_enforce_percent: Option<f64>,
}

#[napi(object)]
pub struct GateConcurrencyOptions {
    pub min_limit: u32,
    pub max_limit: u32,
    pub initial_limit: u32,
}

/// A health reading to inject (the test seam). Missing figures are 0 / false.
#[napi(object)]
pub struct HealthInput {
    pub lag_ms: Option<f64>,
    pub ewma_lag_ms: Option<f64>,
    pub p99_lag_ms: Option<f64>,
    pub elu: Option<f64>,
    pub heap_used: Option<f64>,
    pub heap_limit: Option<f64>,
    pub stalled: Option<bool>,
}

pub(crate) fn config(o: &GateOptions, shed: &ShedOptions) -> Result<GateConfig> {
    let signer = match &o.secrets {
        Some(s) if !s.is_empty() => {
            let keys: Vec<&[u8]> = s.iter().map(|b| b.as_ref()).collect();
            Some(TierSigner::new(&keys).map_err(|e| invalid(e.0))?)
        }
        _ => None,
    };
    let prefix = |v: u32, max: u32, name: &str| {
        u8::try_from(v).ok().filter(|p| u32::from(*p) <= max).ok_or_else(|| invalid(format!("{name} must be an integer in 0..{max}")))
    };
    let ip = IpKeyConfig::new(prefix(o.ipv4_prefix, 32, "ipv4Prefix")?, prefix(o.ipv6_prefix, 128, "ipv6Prefix")?).map_err(invalid)?;
    Ok(GateConfig {
        shed: shed.shed.clone(),
        lag_signal: shed.lag_signal,
        update_interval_ms: shed.update_interval_ms,
        resolution_ms: if o.sampler { shed.sampler.resolution_ms as f64 } else { 0.0 },
        default_tier: o.default_tier as usize,
        trust_header: o.trust_header,
        signer,
        ip,
        cost: o.cost,
        concurrency: match &o.concurrency {
            Some(c) => ConcurrencyConfig { enabled: true, min_limit: c.min_limit, max_limit: c.max_limit, initial_limit: c.initial_limit },
            None => ConcurrencyConfig { enabled: false, ..ConcurrencyConfig::default() },
        },
        shadow: o.shadow_enforce_percent,
    })
}

/// Reads every shed option from `obj` by its JS name (absent ones keep their defaults).
pub(crate) unsafe fn shed_options(env: sys::napi_env, obj: sys::napi_value) -> Result<ShedOptions> {
    let mut o = ShedOptions::default();
    for opt in SHED_OPTIONS {
        let name = std::ffi::CString::new(opt.name).map_err(|e| invalid(e.to_string()))?;
        let mut v = std::ptr::null_mut();
        raw::check(sys::napi_get_named_property(env, obj, name.as_ptr(), &mut v))?;
        let mut stack = [0u8; 64];
        let mut heap = Vec::new();
        let value = match raw::type_of(env, v) {
            sys::ValueType::napi_undefined => OptionValue::Undefined,
            sys::ValueType::napi_number => OptionValue::Number(raw::get_f64(env, v).unwrap_or(f64::NAN)),
            sys::ValueType::napi_boolean => OptionValue::Bool(raw::get_bool(env, v).unwrap_or(false)),
            sys::ValueType::napi_string => match raw::get_str(env, v, &mut stack, &mut heap) {
                Some(t) => OptionValue::Text(std::str::from_utf8(t).unwrap_or("")),
                None => OptionValue::Undefined,
            },
            _ => return Err(invalid(format!("shed.{} must be a number, a boolean or a string", opt.name))),
        };
        o.set(opt.name, value).map_err(|e| invalid(format!("shed.{e}")))?;
    }
    Ok(o)
}

//! `quotaConstants()`: what lib/quota shares with the engine, declared once on this side.
use super::hot::Code;
use super::records::Reason;
use crate::core::quota::{
    IDLE_TTL_MS, INITIAL_LEASE, LEAD_TIME_MS, LEASE_TTL_MS, MAX_KEYS, MAX_LEASE, MIN_HOLDERS, RENEWAL_PERIOD_MS, RETRY_MS, SWEEP_PER_POLL,
};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

/// `{ codes: { LEASE: 0, ... }, reasons: [...], defaults: { renewalPeriodMs, ... }, maxKeyBytes }`:
/// what lib/quota shares with the engine, declared here only.
#[napi(js_name = "quotaConstants", catch_unwind)]
pub fn quota_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "quota_constants");
    let mut codes = Object::new(&env)?;
    for (i, name) in Code::NAMES.iter().enumerate() {
        codes.set(*name, i as u32)?;
    }
    let mut d = Object::new(&env)?;
    d.set("renewalPeriodMs", RENEWAL_PERIOD_MS)?;
    d.set("leadTimeMs", LEAD_TIME_MS)?;
    d.set("leaseTtlMs", LEASE_TTL_MS)?;
    d.set("maxLease", MAX_LEASE as f64)?;
    d.set("initialLease", INITIAL_LEASE as f64)?;
    d.set("retryMs", RETRY_MS)?;
    d.set("minHolders", MIN_HOLDERS)?;
    d.set("maxKeys", MAX_KEYS as f64)?;
    d.set("idleTtlMs", IDLE_TTL_MS)?;
    d.set("sweepPerPoll", SWEEP_PER_POLL as f64)?;
    let mut o = Object::new(&env)?;
    o.set("codes", codes)?;
    o.set("reasons", Reason::NAMES.to_vec())?;
    o.set("defaults", d)?;
    o.set("maxKeyBytes", MAX_KEY_BYTES as u32)?;
    Ok(Object::from_raw(env.raw(), o.raw()))
}

//! `gateConstants()` and `mintTierToken()`: what lib/gatekeeper shares with the hot path, declared
//! once on this side, and the tier tokens it signs.
use super::hot::{MAX_TIERS, R, RESULT_LEN, SEL_KEY_IS_IP, SEL_TURN_QUEUED};
use super::invalid;
use crate::core::gate::{OptionValue, ShedOptions, TierSource, Verdict};
use crate::core::shed::{Cause, LagSignal};
use crate::core::token::signature::TierSigner;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

/// An object of `name: number` for `names`, numbered in order.
pub(crate) fn numbered(env: &Env, names: &[&str], key: impl Fn(&str) -> String) -> Result<Object<'static>> {
    let mut o = Object::new(env)?;
    for (i, n) in names.iter().enumerate() {
        o.set(key(n), i as u32)?;
    }
    freeze(env, o)
}

/// `o[name] = v`, frozen.
pub(crate) fn set_frozen<V: ToNapiValue>(env: &Env, o: &Object, name: &std::ffi::CStr, v: V) -> Result<()> {
    unsafe {
        let v = V::to_napi_value(env.raw(), v)?;
        raw::check(sys::napi_object_freeze(env.raw(), v))?;
        raw::check(sys::napi_set_named_property(env.raw(), o.raw(), name.as_ptr(), v))
    }
}

pub(crate) fn freeze(env: &Env, o: Object) -> Result<Object<'static>> {
    unsafe {
        raw::check(sys::napi_object_freeze(env.raw(), o.raw()))?;
        Ok(Object::from_raw(env.raw(), o.raw()))
    }
}

/// What lib/gatekeeper.js shares with `decide`, declared once on this side: `result` (the indices of
/// the `result` array, and `LENGTH`), `verdict` (`ADMIT: 0`, ...), `verdictNames`, `verdictStatus`
/// (the HTTP status per verdict), `sources`, `causes`, `lagSignals` (names by code), `sel` (`KEY_IS_IP`,
/// `MAX_TIERS`), `shedDefaults` (every `shed` option by name; `false` = off, `undefined` = derived).
/// Frozen.
#[napi(js_name = "gateConstants", catch_unwind)]
pub fn gate_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "gate_constants");
    let env = &env;
    let mut result = Object::new(env)?;
    for (i, n) in R::NAMES.iter().enumerate() {
        result.set(n, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let statuses: Vec<u32> = Verdict::ALL.iter().map(|v| u32::from(v.http_status())).collect();
    let mut shed = Object::new(env)?;
    for (name, v) in ShedOptions::defaults() {
        match v {
            OptionValue::Number(n) => shed.set(name, n)?,
            OptionValue::Bool(b) => shed.set(name, b)?,
            OptionValue::Text(t) => shed.set(name, t)?,
            OptionValue::Undefined => shed.set(name, ())?,
        }
    }
    let mut sel = Object::new(env)?;
    sel.set("KEY_IS_IP", SEL_KEY_IS_IP)?;
    sel.set("TURN_QUEUED", SEL_TURN_QUEUED)?;
    sel.set("MAX_TIERS", MAX_TIERS)?;
    let mut o = Object::new(env)?;
    o.set("result", freeze(env, result)?)?;
    o.set("verdict", numbered(env, Verdict::NAMES, |n| n.to_uppercase().replace('-', "_"))?)?;
    set_frozen(env, &o, c"verdictNames", Verdict::NAMES.to_vec())?;
    set_frozen(env, &o, c"verdictStatus", statuses)?;
    set_frozen(env, &o, c"sources", TierSource::NAMES.to_vec())?;
    set_frozen(env, &o, c"causes", Cause::NAMES.to_vec())?;
    set_frozen(env, &o, c"lagSignals", LagSignal::NAMES.to_vec())?;
    o.set("sel", freeze(env, sel)?)?;
    o.set("shedDefaults", freeze(env, shed)?)?;
    freeze(env, o)
}

/// Mints a signed tier token valid until `expires_at_sec` (Unix seconds, exclusive).
#[napi(catch_unwind)]
pub fn mint_tier_token(env: Env, secret: Buffer, tier: String, expires_at_sec: f64) -> Result<String> {
    let _panic = raw::throw_on_panic(&env, "mint_tier_token");
    if !(expires_at_sec.is_finite() && expires_at_sec >= 0.0 && expires_at_sec.fract() == 0.0) {
        return Err(invalid("expiresAt must be a whole number of seconds >= 0"));
    }
    let signer = TierSigner::new(&[secret.as_ref()]).map_err(|e| invalid(e.0))?;
    signer.sign(&tier, expires_at_sec as u64).map_err(|e| invalid(e.0))
}

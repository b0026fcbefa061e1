//! `ledgerConstants()`: what lib/ledger shares with `consume`, declared once on this side.
use super::hot::{RESULT_FIELDS, RESULT_LEN};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

/// `{ result: { ALLOWED: 0, ..., LENGTH }, limitedBy: ['none', 'tier', 'key'] }`: what lib/ledger
/// shares with `consume`.
#[napi(js_name = "ledgerConstants", catch_unwind)]
pub fn ledger_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "ledger_constants");
    let mut result = Object::new(&env)?;
    for (name, i) in RESULT_FIELDS {
        result.set(name, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let mut o = Object::new(&env)?;
    o.set("result", result)?;
    o.set("limitedBy", crate::core::ledger::Limit::NAMES.to_vec())?;
    Ok(Object::from_raw(env.raw(), o.raw()))
}

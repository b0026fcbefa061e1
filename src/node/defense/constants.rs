//! `defenseConstants()`: what lib/defense shares with the hot path, declared once on this side.
use super::hot::{ARGS, FLAG_EXEMPT_ENDS, FLAG_SKIP, R, RESULT_LEN};
use crate::core::defense::{BanSpec, FairShareSpec, PassError, StrikeKind, Verdict, MAX_PASS_LEN};
use crate::core::limit::{AlgorithmKind, MAX_LIMITS};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

/// What lib/defense shares with `defend`, declared once on this side: `result` (indices; `LIMITS`
/// is where the per-limit pairs start, `LENGTH`), `verdictNames`, `verdictStatus`, `passErrors`,
/// `algorithms`, `strikeKinds`, `maxLimits`, `flags` (`SKIP`), `args` (leading arguments), and
/// `banDefaults` (the default rules and escalation, as options). Frozen.
#[napi(js_name = "defenseConstants", catch_unwind)]
pub fn defense_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "defense_constants");
    let freeze = |o: Object| -> Result<Object<'static>> {
        unsafe {
            raw::check(sys::napi_object_freeze(env.raw(), o.raw()))?;
            Ok(Object::from_raw(env.raw(), o.raw()))
        }
    };
    let mut result = Object::new(&env)?;
    for (i, n) in R::NAMES.iter().enumerate() {
        result.set(n, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let d = BanSpec::default();
    let mut rules = Vec::new();
    for r in &d.rules {
        let mut o = Object::new(&env)?;
        o.set("name", r.name.as_str())?;
        o.set("on", r.on.as_str())?;
        o.set("threshold", r.threshold)?;
        o.set("windowMs", r.window_ms)?;
        o.set("banMs", r.ban_ms)?;
        rules.push(freeze(o)?);
    }
    let mut esc = Object::new(&env)?;
    esc.set("factor", d.escalation.factor)?;
    esc.set("maxBanMs", d.escalation.max_ban_ms)?;
    esc.set("memoryMs", d.escalation.memory_ms)?;
    match d.escalation.permanent_after {
        Some(k) => esc.set("permanentAfter", k)?,
        None => esc.set("permanentAfter", false)?,
    }
    esc.set("jitter", d.escalation.jitter)?;
    let mut bans = Object::new(&env)?;
    bans.set("rules", rules)?;
    bans.set("escalation", freeze(esc)?)?;
    bans.set("maxBans", d.max_bans)?;
    bans.set("maxTracked", d.max_tracked)?;
    let f = FairShareSpec::default();
    let mut fair = Object::new(&env)?;
    fair.set("reserve", f.reserve)?;
    fair.set("windowMs", f.window_ms)?;
    fair.set("maxShare", f.max_share)?;
    if let Some((v4, v6)) = f.subnet {
        let mut sub = Object::new(&env)?;
        sub.set("v4", v4)?;
        sub.set("v6", v6)?;
        fair.set("subnet", freeze(sub)?)?;
    }
    fair.set("slots", f.slots)?;
    fair.set("lagMs", f.lag_ms)?;
    let mut flags = Object::new(&env)?;
    flags.set("SKIP", FLAG_SKIP)?;
    flags.set("EXEMPT_ENDS", FLAG_EXEMPT_ENDS)?;
    let statuses: Vec<u32> = Verdict::ALL.iter().map(|v| u32::from(v.http_status())).collect();
    let mut o = Object::new(&env)?;
    o.set("result", freeze(result)?)?;
    o.set("verdictNames", Verdict::NAMES.to_vec())?;
    o.set("verdictStatus", statuses)?;
    o.set("passErrors", PassError::NAMES.to_vec())?;
    o.set("algorithms", AlgorithmKind::NAMES.to_vec())?;
    o.set("strikeKinds", StrikeKind::NAMES.to_vec())?;
    o.set("maxLimits", MAX_LIMITS as u32)?;
    o.set("maxPassLength", MAX_PASS_LEN as u32)?;
    o.set("args", ARGS as u32)?;
    o.set("flags", freeze(flags)?)?;
    o.set("banDefaults", freeze(bans)?)?;
    o.set("fairShareDefaults", freeze(fair)?)?;
    freeze(o)
}

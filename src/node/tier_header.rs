//! `TierHeader`: the gatekeeper's tier-header rule (`core::gate::TierHeaderRule`) for guards that do
//! not decide natively (the concurrency gate), so both read `x-user-tier` the same way: exact names,
//! signed tokens, the lowest tier for anything unreadable. Construction is `#[napi]`; `resolve` is one
//! raw callback (a string read into a stack buffer, a number returned).
use crate::core::gate::{TierHeaderRule, TierSource, MAX_HEADER_LEN};
use crate::core::token::signature::TierSigner;
use crate::node::gate::{invalid, read_bounded, unix_now_sec};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::sync::Arc;

struct Rule {
    names: Vec<String>,
    default_tier: usize,
    trust_header: bool,
    signer: Option<TierSigner>,
}

impl Rule {
    fn resolve(&self, value: &[u8]) -> (usize, TierSource) {
        let lookup = |name: &[u8]| self.names.iter().position(|n| n.as_bytes() == name);
        TierHeaderRule {
            tiers: self.names.len(),
            lookup: &lookup,
            default_tier: self.default_tier,
            trust_header: self.trust_header,
            signer: self.signer.as_ref(),
        }
        .resolve(value, unix_now_sec)
    }
}

#[napi]
pub struct TierHeaderHandle {
    rule: Arc<Rule>,
}

#[napi]
impl TierHeaderHandle {
    /// `names`: the tiers, highest first (lib/ checks them); `secrets`: `tierSecret`, if any.
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, names: Vec<String>, default_tier: u32, trust_header: bool, secrets: Option<Vec<Buffer>>) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "TierHeaderHandle::new");
        if names.is_empty() || default_tier as usize >= names.len() {
            return Err(invalid("TierHeader: at least one tier, and a default tier among them"));
        }
        let signer = match &secrets {
            Some(s) if !s.is_empty() => {
                let keys: Vec<&[u8]> = s.iter().map(|b| b.as_ref()).collect();
                Some(TierSigner::new(&keys).map_err(|e| invalid(e.0))?)
            }
            _ => None,
        };
        Ok(TierHeaderHandle { rule: Arc::new(Rule { names, default_tier: default_tier as usize, trust_header, signer }) })
    }

    /// Sets `target.resolve(value) -> tier * 16 + source` (the source's code in `gateConstants().sources`).
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "TierHeaderHandle::bind");
        unsafe { raw::define_fn(env.raw(), target.raw(), "resolve", resolve, self.rule.clone()) }
    }
}

raw::guarded!(resolve = "TierHeader.resolve" => resolve_unguarded);
#[inline(always)]
unsafe fn resolve_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<1>(env, info);
    let rule = &*(data as *const Rule);
    let mut buf = [0u8; MAX_HEADER_LEN + 8];
    let Some(len) = (if argc >= 1 { read_bounded(env, argv[0], &mut buf) } else { None }) else {
        return raw::throw_type_error(env, "TierHeader.resolve: value must be a string");
    };
    let (tier, source) = rule.resolve(&buf[..len]);
    raw::int32(env, (tier * 16 + source as usize) as i32)
}

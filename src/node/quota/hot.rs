//! The hot path: `trySpend(limit, key, cost = 1)`, a raw callback over the engine, and its codes.
use super::handle::Engine;
use super::{MAX_SAFE, NS_PER_MS};
use crate::core::ledger::js_number;
use crate::core::names::named_enum;
use crate::core::quota::{Refusal, Source, Spend};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::sys;

named_enum! {
    /// What `trySpend` returns. Admitted: `Lease`, `Provisional`, `Fallback`. Waiting on the store:
    /// `NeedLease` (a request is queued for the next poll), `Awaiting` (one is in flight). The rest
    /// are refusals, with `result[0]` the ms until asking again may succeed (Infinity: not by waiting).
    #[derive(Clone, Copy)]
    pub(crate) enum Code: u8 {
        Lease = "LEASE",
        Provisional = "PROVISIONAL",
        Fallback = "FALLBACK",
        NeedLease = "NEED_LEASE",
        Awaiting = "AWAITING",
        Exhausted = "EXHAUSTED",
        StoreDown = "STORE_DOWN",
        Share = "SHARE",
        Full = "FULL",
        /// Never from `trySpend`: lib/quota/driver.js's answer to a spend that waited its whole
        /// `storeTimeoutMs` for its key while the store kept answering (a contended key near its
        /// limit, its last tokens going out one per round trip). A refusal; not a fallback.
        Waited = "WAITED",
    }
}

raw::guarded!(pub(crate) try_spend = "Quota.trySpend" => try_spend_unguarded);
/// `trySpend(limit, key, cost = 1) -> code` (`Code`): one spend, from local state only.
#[inline(always)]
pub(crate) unsafe fn try_spend_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<3>(env, info);
    let engine = &*(data as *const Engine);
    let limit = match raw::get_f64(env, argv[0]) {
        Some(n) if n >= 0.0 && n < engine.limits as f64 && (n as usize) as f64 == n => n as usize,
        Some(n) => {
            return raw::throw_range_error(env, &format!("limit {} is not a limit id of this engine (ids are 0 to {})", js_number(n), engine.limits - 1))
        }
        None => return raw::throw_type_error(env, "limit must be a limit id (number)"),
    };
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let key = match raw::get_key(env, argv[1], &mut stack, &mut heap) {
        Some(k) if k.len() <= MAX_KEY_BYTES => k,
        Some(k) => return raw::throw_range_error(env, &format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len())),
        None => return raw::throw_type_error(env, "key must be a string"),
    };
    let cost = if argc < 3 || raw::type_of(env, argv[2]) == sys::ValueType::napi_undefined {
        1
    } else {
        match raw::get_f64(env, argv[2]) {
            Some(c) if (0.0..=MAX_SAFE).contains(&c) && (c as u64) as f64 == c => c as u64,
            Some(c) => return raw::throw_range_error(env, &format!("cost must be an integer >= 0 (got {})", js_number(c))),
            None => return raw::throw_type_error(env, "cost must be a number"),
        }
    };
    let now = engine.now();
    let mut st = engine.quota.lock();
    let id = st.quota.limit_at(limit).expect("limit checked above");
    let spend = st.quota.try_spend(id, key, cost, now);
    let code = match spend {
        Spend::Spent(Source::Lease) => Code::Lease,
        Spend::Spent(Source::Provisional) => Code::Provisional,
        Spend::Spent(Source::Fallback) => Code::Fallback,
        // The engine has marked the key pending; its request goes out with the next poll.
        Spend::NeedLease(r) => {
            st.urgent.push(r);
            Code::NeedLease
        }
        Spend::Awaiting => Code::Awaiting,
        Spend::Refused { reason, retry_after_ns } => {
            (*engine.out.get())[0] = if retry_after_ns == u64::MAX { f64::INFINITY } else { retry_after_ns as f64 / NS_PER_MS };
            match reason {
                Refusal::Exhausted => Code::Exhausted,
                Refusal::StoreDown => Code::StoreDown,
                Refusal::Share => Code::Share,
                Refusal::Full => Code::Full,
            }
        }
    };
    drop(st);
    raw::int32(env, code as i32)
}

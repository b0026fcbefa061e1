//! One key of one named limit, off the hot path: what lib/defense/admin.js (`gate.limits`) and
//! lib/defense/outcome.js (counting by outcome) call. A second `#[napi] impl` of `DefenseHandle`.
//!
//! A key is given as the hot path gets it: a string (a header's value, a function's result), or, for a
//! limit that counts by the client address (`by_ip`), the address as text, masked to the limit's
//! prefixes and tagged as `defend` does (core/defense/front.rs), so both name the same entry.
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::gate::IP_KEY_TAG;
use crate::core::limit::{LimitSet, MAX_OVERRIDES, MAX_PER_REQUEST, NEVER};
use crate::core::net::ipkey::{client_addr, ip_bin_key, BIN_KEY_LEN};
use crate::node::defense::DefenseHandle;
use crate::node::gate::invalid;
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// One key of one limit as it stands.
#[napi(object)]
pub struct LimitKeyInfo {
    /// The key's limit: an operator's override, a per-request limit, else the configured one.
    pub limit: f64,
    pub remaining: f64,
    /// Milliseconds until one more unit comes back (0: the key is full; Infinity: never).
    pub reset_ms: f64,
    /// An operator's override is in force for this key.
    pub overridden: bool,
}

fn ms(ns: u64) -> f64 {
    if ns == NEVER {
        f64::INFINITY
    } else {
        ns as f64 / 1e6
    }
}

/// A count of units: a whole number 0..=u32::MAX (JS checks first; this is the last word).
fn units(v: f64, at: &str) -> Result<u32> {
    let w = v as u32;
    if f64::from(w) == v {
        Ok(w)
    } else {
        Err(invalid(format!("{at} must be an integer from 0 to 4294967295")))
    }
}

impl DefenseHandle {
    fn limit_set(&self) -> &LimitSet {
        self.shared.front.defense().limits()
    }

    fn index(&self, i: u32) -> Result<usize> {
        let i = i as usize;
        if i < self.limit_set().len() {
            Ok(i)
        } else {
            Err(invalid(format!("no limit at index {i}")))
        }
    }

    /// Runs `f` with limit `i`'s stored form of `key`.
    fn with_key<R>(&self, i: u32, key: &str, by_ip: bool, f: impl FnOnce(usize, &[u8]) -> R) -> Result<R> {
        let i = self.index(i)?;
        if by_ip {
            let mut kb = [0u8; BIN_KEY_LEN];
            let len = ip_bin_key(client_addr(key.as_bytes()), &self.shared.front.limit_prefixes()[i], IP_KEY_TAG, &mut kb);
            return Ok(f(i, &kb[..len]));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(invalid(format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", key.len())));
        }
        Ok(f(i, key.as_bytes()))
    }
}

#[napi]
impl DefenseHandle {
    /// Key `key` of limit `i` as it stands; counts nothing, inserts nothing.
    #[napi(catch_unwind)]
    pub fn limit_peek(&self, env: Env, i: u32, key: String, by_ip: bool) -> Result<LimitKeyInfo> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_peek");
        let now = MonotonicClock.now_ns();
        self.with_key(i, &key, by_ip, |i, k| {
            let s = self.limit_set().peek(i, k, now);
            LimitKeyInfo { limit: s.limit as f64, remaining: s.remaining as f64, reset_ms: ms(s.reset_ns), overridden: s.overridden }
        })
    }

    /// Gives back `units` that an admission `age_ms` ago counted (0: now); whether the key was held.
    #[napi(catch_unwind)]
    pub fn limit_refund(&self, env: Env, i: u32, key: String, by_ip: bool, units_given: f64, age_ms: f64) -> Result<bool> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_refund");
        let n = units(units_given, "units")?;
        if !(age_ms.is_finite() && age_ms >= 0.0) {
            return Err(invalid("ageMs must be a finite number >= 0"));
        }
        let now = MonotonicClock.now_ns();
        let at = now.saturating_sub((age_ms * 1e6) as u64);
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().refund(i, k, n, at, now))
    }

    /// Counts `units` now, up to what the key has left; the units counted.
    #[napi(catch_unwind)]
    pub fn limit_charge(&self, env: Env, i: u32, key: String, by_ip: bool, units_given: f64) -> Result<u32> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_charge");
        let n = units(units_given, "units")?;
        let now = MonotonicClock.now_ns();
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().charge(i, k, n, now))
    }

    /// Forgets what the key has counted (an override stays); whether it held anything.
    #[napi(catch_unwind)]
    pub fn limit_reset(&self, env: Env, i: u32, key: String, by_ip: bool) -> Result<bool> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_reset");
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().reset(i, k))
    }

    /// Sets the key's limit (an operator's override); false when the set already holds
    /// `MAX_OVERRIDES` and this would be a new one (refused, nothing evicted).
    #[napi(catch_unwind)]
    pub fn limit_override(&self, env: Env, i: u32, key: String, by_ip: bool, limit: f64) -> Result<bool> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_override");
        let l = units(limit, "limit")?;
        if l == 0 {
            return Err(invalid("limit must be an integer from 1 to 4294967295"));
        }
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().set_override(i, k, l).is_ok())
    }

    /// Removes the key's override; whether there was one.
    #[napi(catch_unwind)]
    pub fn limit_clear_override(&self, env: Env, i: u32, key: String, by_ip: bool) -> Result<bool> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_clear_override");
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().clear_override(i, k))
    }

    /// The key's limit for this request and the next (a limit given as a function of the request);
    /// `limit` 0: the configured one.
    #[napi(catch_unwind)]
    pub fn limit_per_request(&self, env: Env, i: u32, key: String, by_ip: bool, limit: f64) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_per_request");
        let l = units(limit, "limit")?;
        self.with_key(i, &key, by_ip, |i, k| self.limit_set().set_per_request(i, k, (l > 0).then_some(l)))
    }

    /// `[operator overrides, per-request entries]` held over the set.
    #[napi(catch_unwind)]
    pub fn limit_override_counts(&self, env: Env) -> Vec<u32> {
        let _panic = raw::throw_on_panic(&env, "DefenseHandle::limit_override_counts");
        let o = self.limit_set().overrides();
        vec![o.len() as u32, o.per_request_len() as u32]
    }
}

/// The caps lib/defense/admin.js documents and reports: `{ maxOverrides, maxPerRequest }`.
#[napi(js_name = "limitAdminConstants", catch_unwind)]
pub fn limit_admin_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "limit_admin_constants");
    let mut o = Object::new(&env)?;
    o.set("maxOverrides", MAX_OVERRIDES as u32)?;
    o.set("maxPerRequest", MAX_PER_REQUEST as u32)?;
    Ok(Object::from_raw(env.raw(), o.raw()))
}

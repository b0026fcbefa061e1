//! The `#[napi]` class `QuotaHandle`: construction, `poll`, `grant`, `fail`, `releaseAll`, stats and
//! binding the hot path. Each runs once per store round trip, not per request.
use super::hot::try_spend;
use super::options::{to_core, QuotaOptions};
use super::records::{give_back, request, QuotaGrant, QuotaReturn, QuotaStats, QuotaWork};
use super::{invalid, MAX_SAFE, NS_PER_MS};
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::ledger::js_number;
use crate::core::quota::{Action, Grant, LeaseId, LimitId, Quota, Request, RequestId};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use parking_lot::Mutex;
use std::cell::UnsafeCell;
use std::sync::Arc;

/// The engine and what the raw callback writes. One lock: the engine is `&mut self` throughout, and
/// every call is short (no I/O under it).
pub(crate) struct Engine {
    pub(crate) quota: Mutex<State>,
    pub(crate) clock: MonotonicClock,
    pub(crate) limits: usize,
    /// `[retryAfterMs]` of the last refusal, viewed by JS as `result`.
    pub(crate) out: Box<UnsafeCell<[f64; 1]>>,
}

// `out` is only written by the JS thread that owns the function and the array; the engine is locked.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

/// The engine, and the requests of spends that came back `NeedLease`, for the next `poll`.
pub(crate) struct State {
    pub(crate) quota: Quota,
    pub(crate) urgent: Vec<Request>,
}

impl Engine {
    pub(crate) fn now(&self) -> u64 {
        self.clock.now_ns()
    }
}

#[napi]
pub struct QuotaHandle {
    inner: Arc<Engine>,
}

#[napi]
impl QuotaHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, options: QuotaOptions) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::new");
        let cfg = to_core(options).map_err(|e| invalid(e.0))?;
        let limits = cfg.limits.len();
        let quota = Quota::new(cfg).map_err(|e| invalid(e.0))?;
        Ok(QuotaHandle {
            inner: Arc::new(Engine {
                quota: Mutex::new(State { quota, urgent: Vec::new() }),
                clock: MonotonicClock,
                limits,
                out: Box::new(UnsafeCell::new([0.0])),
            }),
        })
    }

    /// Limit names by id.
    #[napi(catch_unwind)]
    pub fn limit_names(&self, env: Env) -> Vec<String> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::limit_names");
        let st = self.inner.quota.lock();
        let q = &st.quota;
        (0..self.inner.limits).filter_map(|i| q.limit_at(i)).map(|l| q.limit_config(l).name.clone()).collect()
    }

    /// The work due now: requests to send and returns to send.
    #[napi(catch_unwind)]
    pub fn poll(&self, env: Env) -> QuotaWork {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::poll");
        let now = self.inner.now();
        let mut st = self.inner.quota.lock();
        let mut urgent = std::mem::take(&mut st.urgent);
        for r in &mut urgent {
            st.quota.top_up(r);
        }
        let mut work = QuotaWork { requests: urgent.into_iter().map(request).collect(), returns: Vec::new() };
        for a in st.quota.poll(now) {
            match a {
                Action::Request(r) => work.requests.push(request(r)),
                Action::Return(r) => work.returns.push(give_back(r)),
            }
        }
        work
    }

    /// Whether `poll` has work now.
    #[napi(catch_unwind)]
    pub fn wants_poll(&self, env: Env) -> bool {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::wants_poll");
        let st = self.inner.quota.lock();
        !st.urgent.is_empty() || st.quota.wants_poll()
    }

    /// The store's answer to request `id`; returns the tokens to send back at once, if any.
    #[napi(catch_unwind)]
    pub fn grant(&self, env: Env, limit: u32, key: String, id: f64, g: QuotaGrant) -> Result<Option<QuotaReturn>> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::grant");
        let limit = self.limit(limit)?;
        let count = |what: &str, v: f64| -> Result<u64> {
            if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_SAFE {
                Ok(v as u64)
            } else {
                Err(invalid(format!("grant: {what} must be an integer >= 0 (got {})", js_number(v))))
            }
        };
        let ms = |what: &str, v: f64| -> Result<u64> {
            if v.is_finite() && v >= 0.0 {
                // Down, never up: the engine's expiry must not be later than the store's.
                Ok((v * NS_PER_MS).floor() as u64)
            } else {
                Err(invalid(format!("grant: {what} must be a finite number >= 0 (got {})", js_number(v))))
            }
        };
        let grant = Grant {
            granted: count("granted", g.granted)?,
            ttl_ns: ms("ttlMs", g.ttl_ms)?,
            remaining: count("remaining", g.remaining)?,
            holders: u32::try_from(count("holders", g.holders)?).unwrap_or(u32::MAX),
            lease: LeaseId(count("lease", g.lease)?),
            retry_after_ns: ms("retryAfterMs", g.retry_after_ms)?,
        };
        let id = RequestId(count("id", id)?);
        let now = self.inner.now();
        Ok(self.inner.quota.lock().quota.grant(limit, key.as_bytes(), id, grant, now).map(give_back))
    }

    /// The store did not answer request `id` (an error, or the caller's timeout).
    #[napi(catch_unwind)]
    pub fn fail(&self, env: Env, limit: u32, key: String, id: f64) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::fail");
        let limit = self.limit(limit)?;
        if !(id.is_finite() && (0.0..=MAX_SAFE).contains(&id)) {
            return Err(invalid(format!("fail: id must be an integer >= 0 (got {})", js_number(id))));
        }
        let now = self.inner.now();
        self.inner.quota.lock().quota.fail(limit, key.as_bytes(), RequestId(id as u64), now);
        Ok(())
    }

    /// Every unspent lease token, to send back at shutdown; the engine is left empty.
    #[napi(catch_unwind)]
    pub fn release_all(&self, env: Env) -> Vec<QuotaReturn> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::release_all");
        let now = self.inner.now();
        let mut st = self.inner.quota.lock();
        st.urgent.clear();
        st.quota.release_all(now).into_iter().map(give_back).collect()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> QuotaStats {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::stats");
        let st = self.inner.quota.lock();
        let q = &st.quota;
        let s = q.stats();
        QuotaStats {
            spent_lease: s.spent_lease as f64,
            spent_provisional: s.spent_provisional as f64,
            spent_fallback: s.spent_fallback as f64,
            refused: s.refused as f64,
            requests: s.requests as f64,
            grants: s.grants as f64,
            failures: s.failures as f64,
            abandoned: s.abandoned as f64,
            granted: s.granted as f64,
            repaid: s.repaid as f64,
            expired: s.expired as f64,
            returned: s.returned as f64,
            returns_dropped: s.returns_dropped as f64,
            evicted: s.evicted as f64,
            keys: q.keys() as u32,
            store_up: q.store_up(),
        }
    }

    /// `[held, debt, pending]` of `key`: unexpired lease tokens, provisional debt, a request in flight.
    #[napi(catch_unwind)]
    pub fn key_state(&self, env: Env, limit: u32, key: String) -> Result<Vec<f64>> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::key_state");
        let limit = self.limit(limit)?;
        let now = self.inner.now();
        let st = self.inner.quota.lock();
        let q = &st.quota;
        let k = key.as_bytes();
        Ok(vec![q.held(limit, k, now) as f64, q.debt(limit, k) as f64, f64::from(u8::from(q.pending(limit, k)))])
    }

    /// Defines `trySpend(limit, key, cost = 1) -> code` (raw callback) and the Float64Array `result`
    /// on `target`.
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::bind");
        let (env, target) = (env.raw(), target.raw());
        unsafe {
            let out = self.inner.out.get() as *mut f64;
            raw::define_f64_view(env, target, c"result", out, 1, &self.inner)?;
            raw::define_fn(env, target, "trySpend", try_spend, self.inner.clone())
        }
    }

    /// An out-of-range limit would panic in the core: every method that takes one checks it.
    fn limit(&self, limit: u32) -> Result<LimitId> {
        let st = self.inner.quota.lock();
        let q = &st.quota;
        q.limit_at(limit as usize).ok_or_else(|| invalid(format!("limit id {limit} is out of range (the engine has {} limits)", self.inner.limits)))
    }
}

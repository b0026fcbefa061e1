//! The learned concurrency limit (`core::concurrency`) for the concurrency gate's
//! `maxConcurrent: 'auto'` (lib/queue): the gate counts its own requests in flight and hands each
//! finished one's latency over; the gatekeeper's limit is the same estimator, inside its decision.
use super::gate::invalid;
use super::raw;
use crate::core::concurrency::{Concurrency, ConcurrencyConfig};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use parking_lot::Mutex;

#[napi(object)]
pub struct ConcurrencyLimitOptions {
    pub min_limit: u32,
    pub max_limit: u32,
    pub initial_limit: u32,
}

#[napi(object)]
pub struct ConcurrencyLimitStats {
    pub limit: u32,
    pub estimate: f64,
    pub baseline_ms: f64,
    pub typical_ms: f64,
    pub throughput: f64,
    pub queueing: bool,
    pub intervals: f64,
    pub probes: f64,
}

#[napi]
pub struct ConcurrencyLimitHandle {
    inner: Mutex<Concurrency>,
}

#[napi]
impl ConcurrencyLimitHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, o: ConcurrencyLimitOptions) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "ConcurrencyLimitHandle::new");
        let cfg = ConcurrencyConfig { enabled: true, min_limit: o.min_limit, max_limit: o.max_limit, initial_limit: o.initial_limit };
        cfg.check().map_err(invalid)?;
        Ok(ConcurrencyLimitHandle { inner: Mutex::new(Concurrency::new(cfg)) })
    }

    /// One finished request: its latency (ms), the requests in flight when it finished, and the
    /// caller's monotonic clock (ms). Returns the limit.
    #[napi(catch_unwind)]
    pub fn observe(&self, env: Env, latency_ms: f64, in_flight: u32, now_ms: f64) -> u32 {
        let _panic = raw::throw_on_panic(&env, "ConcurrencyLimitHandle::observe");
        let mut c = self.inner.lock();
        if latency_ms.is_finite() && latency_ms >= 0.0 && now_ms.is_finite() && now_ms >= 0.0 {
            c.observe((latency_ms * 1e6) as u64, in_flight, (now_ms * 1e6) as u64);
        }
        c.limit()
    }

    /// Cuts the limit to `factor` of itself (a saturated loop); returns the limit.
    #[napi(catch_unwind)]
    pub fn cut(&self, env: Env, factor: f64) -> u32 {
        let _panic = raw::throw_on_panic(&env, "ConcurrencyLimitHandle::cut");
        let mut c = self.inner.lock();
        c.cut(factor);
        c.limit()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> ConcurrencyLimitStats {
        let _panic = raw::throw_on_panic(&env, "ConcurrencyLimitHandle::stats");
        let c = self.inner.lock();
        let s = c.stats();
        ConcurrencyLimitStats {
            limit: s.limit,
            estimate: c.estimate(),
            baseline_ms: s.baseline_ms,
            typical_ms: s.typical_ms,
            throughput: s.throughput,
            queueing: s.queueing,
            intervals: s.intervals as f64,
            probes: s.probes as f64,
        }
    }
}

//! The `#[napi]` classes `LagMonitorHandle` (a JS `LagMonitor`'s native half) and
//! `LoopObserverHandle` (another thread's view of a shared monitor). Off the hot path.
use super::hot::{fast_lag_ms, fast_stalled, MonitorCore};
use super::sampler::{acquire_into, thread_sampler, SamplerGuard, SamplerOptions};
use crate::core::health::histogram::LagStats;
use crate::core::health::sampler::MAX_RESOLUTION_MS;
use crate::core::health::LoopHealth;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use parking_lot::Mutex;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};

/// Health records shared with other threads by id (`LagMonitor#share()` / `LagMonitor.observe(id)`).
/// (last id handed out, live entries).
type Registry = Mutex<(u32, Vec<(u32, Weak<LoopHealth>)>)>;

pub(crate) fn registry() -> &'static Registry {
    pub(crate) static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Mutex::new((0, Vec::new())))
}

/// The native half of a JS `LagMonitor`: options, its health record, and a guard while started.
#[napi]
pub struct LagMonitorHandle {
    opts: SamplerOptions,
    core: Arc<MonitorCore>,
    guard: Option<SamplerGuard>,
    /// The last figures of a stopped monitor stay readable.
    last: LagStats,
    share_id: Option<u32>,
}

pub(crate) fn whole_ms(name: &str, v: f64, min: f64, max: f64) -> Result<u64> {
    if !v.is_finite() || v.fract() != 0.0 || v < min || v > max {
        return Err(Error::new(Status::InvalidArg, format!("{name} must be a whole number of milliseconds in {min}..={max}")));
    }
    Ok(v as u64)
}

pub(crate) fn stats_array(s: &LagStats, h: &crate::core::health::HealthSample, interval_ms: f64, lag_now: f64) -> Vec<f64> {
    vec![
        s.latest_ms,
        s.ewma_ms,
        s.mean_ms,
        s.p50_ms,
        s.p90_ms,
        s.p99_ms,
        s.max_ms,
        s.elu,
        s.count as f64,
        s.total as f64,
        h.heap_used as f64,
        h.heap_limit as f64,
        if h.stalled { 1.0 } else { 0.0 },
        interval_ms,
        lag_now,
        s.max_block_ms,
    ]
}

#[napi]
impl LagMonitorHandle {
    /// Options are validated in lib/lag.js (with named TypeError/RangeError); checked again here.
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, resolution_ms: f64, window_ms: f64, ewma_ms: f64, stall_ms: Option<f64>) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::new");
        let opts = SamplerOptions {
            resolution_ms: whole_ms("resolutionMs", resolution_ms, 1.0, MAX_RESOLUTION_MS as f64)?,
            window_ms: whole_ms("windowMs", window_ms, 1.0, 3_600_000.0)?,
            ewma_ms: whole_ms("ewmaMs", ewma_ms, 1.0, 3_600_000.0)?,
            stall_ms: stall_ms.map(|s| whole_ms("stallMs", s, 1.0, 3_600_000.0)).transpose()?,
        };
        // The thread's sampler exists from here on (its timer idle until some monitor starts).
        let sampler = unsafe { (*thread_sampler(env.raw())?).sampler.clone() };
        let core = Arc::new(MonitorCore { health: Arc::new(LoopHealth::default()), sampler, active: AtomicBool::new(false) });
        Ok(LagMonitorHandle { opts, core, guard: None, last: LagStats::default(), share_id: None })
    }

    /// `{ lagMs(), stalled() }`: raw N-API functions bound to this monitor (no wrapper, no allocation).
    #[napi(catch_unwind)]
    pub fn fast_readers(&self, env: Env) -> Result<Object<'_>> {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::fast_readers");
        let raw_env = env.raw();
        let mut obj = ptr::null_mut();
        unsafe {
            raw::check(sys::napi_create_object(raw_env, &mut obj))?;
            raw::define_fn(raw_env, obj, "lagMs", fast_lag_ms, self.core.clone())?;
            raw::define_fn(raw_env, obj, "stalled", fast_stalled, self.core.clone())?;
            Ok(Object::from_raw(raw_env, obj))
        }
    }

    /// Starts sampling (a fresh window). No-op when running.
    #[napi(catch_unwind)]
    pub fn start(&mut self, env: Env) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::start");
        if self.guard.is_none() {
            self.guard = Some(acquire_into(env.raw(), self.opts, self.core.health.clone())?);
            self.core.active.store(true, Relaxed);
        }
        Ok(())
    }

    /// Stops sampling; the last figures stay readable, `stalled` drops. No-op when stopped.
    #[napi(catch_unwind)]
    pub fn stop(&mut self, env: Env) {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::stop");
        if let Some(g) = self.guard.take() {
            self.last = g.stats();
            self.core.active.store(false, Relaxed);
            drop(g);
            self.core.health.set_stalled(false);
        }
    }

    #[napi(getter, catch_unwind)]
    pub fn running(&self, env: Env) -> bool {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::running");
        self.guard.is_some()
    }

    /// [latest, ewma, mean, p50, p90, p99, max, elu, count, total, heapUsed, heapLimit, stalled, intervalMs,
    ///  lagNow, maxBlock]
    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> Vec<f64> {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::stats");
        let h = self.core.health.sample();
        match &self.guard {
            Some(g) => stats_array(&g.stats(), &h, g.interval_ms(), self.core.lag_now_ms()),
            None => stats_array(&self.last, &h, 0.0, self.last.latest_ms),
        }
    }

    /// An id under which any thread of this process can observe this monitor's health record.
    #[napi(catch_unwind)]
    pub fn share(&mut self, env: Env) -> u32 {
        let _panic = raw::throw_on_panic(&env, "LagMonitorHandle::share");
        if let Some(id) = self.share_id {
            return id;
        }
        let mut r = registry().lock();
        r.1.retain(|(_, w)| w.strong_count() > 0);
        r.0 = r.0.wrapping_add(1).max(1);
        let id = r.0;
        r.1.push((id, Arc::downgrade(&self.core.health)));
        self.share_id = Some(id);
        id
    }
}

/// Another thread's view of a shared monitor's health record (lock-free reads).
#[napi]
pub struct LoopObserverHandle {
    health: Arc<LoopHealth>,
}

#[napi]
impl LoopObserverHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, id: u32) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "LoopObserverHandle::new");
        let r = registry().lock();
        let health = r.1.iter().find(|(i, _)| *i == id).and_then(|(_, w)| w.upgrade());
        match health {
            Some(health) => Ok(LoopObserverHandle { health }),
            None => Err(Error::new(Status::InvalidArg, format!("no live LagMonitor shared as {id}"))),
        }
    }

    #[napi(catch_unwind)]
    pub fn stalled(&self, env: Env) -> bool {
        let _panic = raw::throw_on_panic(&env, "LoopObserverHandle::stalled");
        self.health.stalled()
    }

    /// [latestLag, ewma, p99, elu, heapUsed, heapLimit, stalled, ticks]
    #[napi(catch_unwind)]
    pub fn sample(&self, env: Env) -> Vec<f64> {
        let _panic = raw::throw_on_panic(&env, "LoopObserverHandle::sample");
        let h = self.health.sample();
        vec![h.latest_lag_ms, h.ewma_lag_ms, h.p99_lag_ms, h.elu, h.heap_used as f64, h.heap_limit as f64, if h.stalled { 1.0 } else { 0.0 }, h.ticks as f64]
    }
}

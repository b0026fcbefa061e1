//! The hot path: a monitor's `lagMs()` and `stalled()`, raw no-argument callbacks over its record.
use crate::core::health::sampler::LoopSampler;
use crate::core::health::LoopHealth;
use crate::node::raw;
use crate::node::uv::uv_hrtime;
use napi::sys;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;

/// What a monitor's fast readers need: stable across stop/start.
pub(crate) struct MonitorCore {
    pub(crate) health: Arc<LoopHealth>,
    pub(crate) sampler: Arc<LoopSampler>,
    pub(crate) active: AtomicBool,
}

impl MonitorCore {
    pub(crate) fn lag_now_ms(&self) -> f64 {
        if self.active.load(Relaxed) {
            self.sampler.lag_now_ms(&self.health, unsafe { uv_hrtime() })
        } else {
            self.health.sample().latest_lag_ms
        }
    }
}

raw::guarded!(pub(crate) fast_lag_ms = "LagMonitor.lagMs" => fast_lag_ms_unguarded);
#[inline(always)]
pub(crate) unsafe fn fast_lag_ms_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (_, _, data) = raw::args::<0>(env, info);
    raw::number(env, (*(data as *const MonitorCore)).lag_now_ms())
}

raw::guarded!(pub(crate) fast_stalled = "LagMonitor.stalled" => fast_stalled_unguarded);
#[inline(always)]
pub(crate) unsafe fn fast_stalled_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (_, _, data) = raw::args::<0>(env, info);
    raw::boolean(env, (*(data as *const MonitorCore)).health.stalled())
}

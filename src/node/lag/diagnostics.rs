//! The sampler's own figures and its test seam: live samplers (worker teardown frees them), the work
//! its callbacks do (for the lag benchmark), and a panic on the next tick.
use super::sampler::{LIVE_SAMPLERS, PANIC_ON_TICK, SAMPLER};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::sync::atomic::Ordering::*;

/// Thread samplers whose memory has not been freed yet, in the whole process: proves that terminated
/// workers closed their timers.
#[napi(js_name = "lagLiveSamplers", catch_unwind)]
pub fn lag_live_samplers(env: Env) -> u32 {
    let _panic = raw::throw_on_panic(&env, "lag_live_samplers");
    LIVE_SAMPLERS.load(Relaxed) as u32
}

/// Test seam, not public API: the next tick of this thread's sampler panics (a panic in a libuv callback
/// must neither unwind into libuv nor leave the sampler unsafe; see `stop_after_panic`).
#[napi(js_name = "lagPanicOnNextTick", catch_unwind)]
pub fn lag_panic_on_next_tick(env: Env) {
    let _panic = raw::throw_on_panic(&env, "lagPanicOnNextTick");
    PANIC_ON_TICK.with(|p| p.set(true));
}

/// This thread's sampler, measuring itself: [ticks, ns inside tick callbacks, loop iterations seen by
/// the prepare handle, ns inside prepare callbacks, heap reads]. Zeros when the thread has none.
#[napi(js_name = "lagSamplerWork", catch_unwind)]
pub fn lag_sampler_work(env: Env) -> Vec<f64> {
    let _panic = raw::throw_on_panic(&env, "lag_sampler_work");
    let ts = SAMPLER.with(|c| c.get());
    if ts.is_null() {
        return vec![0.0; 5];
    }
    let ts = unsafe { &*ts };
    [ts.sampler.ticks(), ts.tick_work_ns, ts.prepares, ts.prepare_work_ns, ts.heap_reads].iter().map(|&v| v as f64).collect()
}

//! libuv's and N-API's callbacks into the sampler: the timer's tick, the prepare handle (once per loop
//! iteration, before the poll), the environment's teardown and the handles' close. Called from C: a
//! panic in one is caught, never unwound into libuv.
use super::heap::read_heap;
use super::sampler::watchdog;
use super::sampler::{reconcile, ThreadSampler, HEAP_FN, LIVE_SAMPLERS, PANIC_ON_TICK, SAMPLER, TORN_DOWN};
use crate::node::raw;
use crate::node::uv::*;
use napi::sys;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::Ordering::*;

// libuv calls the handles' callbacks from C, so a panic in one must not unwind: it is caught, and the
// sampler stops for good (`stop_after_panic`, `LoopSampler::fail`).
pub(crate) unsafe extern "C" fn on_tick(handle: *mut UvHandle) {
    if raw::no_unwind(|| on_tick_unguarded(handle)).is_none() {
        stop_after_panic(handle);
    }
}

pub(crate) unsafe extern "C" fn on_prepare(handle: *mut UvHandle) {
    if raw::no_unwind(|| on_prepare_unguarded(handle)).is_none() {
        stop_after_panic(handle);
    }
}

pub(crate) unsafe fn stop_after_panic(handle: *mut UvHandle) {
    let _ = raw::no_unwind(|| {
        let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
        ts.sampler.fail();
        reconcile(ts);
        eprintln!("tiergate: this thread's event-loop sampler panicked (above) and has stopped; its lag reads 0 from now on");
    });
}

pub(crate) unsafe fn on_tick_unguarded(handle: *mut UvHandle) {
    if PANIC_ON_TICK.with(|p| p.replace(false)) {
        panic!("deliberate panic in the sampler's tick (test seam)");
    }
    let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
    let now = uv_hrtime();
    let idle = uv_metrics_idle_time(ts.loop_);
    let heap = read_heap(ts, now, false);
    ts.sampler.tick(now, idle, heap);
    if ts.sampler.is_dirty() {
        reconcile(ts);
    }
    ts.tick_work_ns += uv_hrtime().saturating_sub(now);
}

/// Once per loop iteration, right before the loop polls: how long it ran since it last polled.
pub(crate) unsafe fn on_prepare_unguarded(handle: *mut UvHandle) {
    let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
    let now = uv_hrtime();
    let idle = uv_metrics_idle_time(ts.loop_);
    let busy = now.saturating_sub(ts.last_poll_ns).saturating_sub(idle.saturating_sub(ts.last_poll_idle_ns));
    ts.last_poll_ns = now;
    ts.last_poll_idle_ns = idle;
    ts.sampler.note_block(busy);
    ts.prepares += 1;
    ts.prepare_work_ns += uv_hrtime().saturating_sub(now);
}

/// Environment teardown: stop, close, and free in the close callback (which releases the hook). Called
/// from C: after a panic, the handles are still closed (if not closing yet), or the environment would
/// never finish tearing down.
pub(crate) unsafe extern "C" fn on_env_cleanup(handle: sys::napi_async_cleanup_hook_handle, data: *mut c_void) {
    if raw::no_unwind(|| on_env_cleanup_unguarded(handle, data)).is_none() {
        let ts = data as *mut ThreadSampler;
        let _ = raw::no_unwind(|| {
            let _ = SAMPLER.try_with(|c| {
                if c.get() == ts {
                    c.set(ptr::null_mut());
                }
            });
            for h in [(*ts).timer, (*ts).prepare] {
                if uv_is_closing(h) == 0 {
                    uv_close(h, on_close);
                }
            }
        });
    }
}

pub(crate) unsafe fn on_env_cleanup_unguarded(_handle: sys::napi_async_cleanup_hook_handle, data: *mut c_void) {
    let ts = data as *mut ThreadSampler;
    TORN_DOWN.with(|t| t.set(true));
    SAMPLER.with(|c| {
        if c.get() == ts {
            c.set(ptr::null_mut());
        }
    });
    let heap_fn = HEAP_FN.with(|c| c.replace(ptr::null_mut()));
    if !heap_fn.is_null() {
        sys::napi_delete_reference((*ts).env, heap_fn);
    }
    let sampler = &(*ts).sampler;
    sampler.clear();
    watchdog().forget(sampler);
    uv_timer_stop((*ts).timer);
    uv_prepare_stop((*ts).prepare);
    uv_close((*ts).timer, on_close);
    uv_close((*ts).prepare, on_close);
}

/// Frees the sampler once both of its handles are closed. Called from C; after a panic nothing is left
/// that is safe to do, and the sampler's memory is leaked.
pub(crate) unsafe extern "C" fn on_close(handle: *mut UvHandle) {
    let _ = raw::no_unwind(|| on_close_unguarded(handle));
}

pub(crate) unsafe fn on_close_unguarded(handle: *mut UvHandle) {
    let raw = uv_handle_get_data(handle) as *mut ThreadSampler;
    (*raw).open_handles -= 1;
    if (*raw).open_handles > 0 {
        return;
    }
    let ts = Box::from_raw(raw);
    std::alloc::dealloc(ts.timer as *mut u8, ts.handle_layouts[0]);
    std::alloc::dealloc(ts.prepare as *mut u8, ts.handle_layouts[1]);
    if !ts.cleanup.is_null() {
        sys::napi_remove_async_cleanup_hook(ts.cleanup);
        LIVE_SAMPLERS.fetch_sub(1, Relaxed);
    }
}

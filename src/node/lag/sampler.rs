//! This thread's sampler: one libuv timer and one prepare handle per JS thread, shared by every
//! user on that thread (monitors, the gate, the defense's fair share) through `SamplerGuard`s, and the
//! process's stall watchdog.
use super::callbacks::{on_close, on_env_cleanup, on_prepare, on_tick};
use super::heap::read_heap;
use crate::core::health::histogram::LagStats;
use crate::core::health::sampler::{LoopSampler, Subscriber, TimerPlan};
use crate::core::health::watchdog::Watchdog;
use crate::core::health::LoopHealth;
use crate::node::raw;
use crate::node::uv::*;
use napi::bindgen_prelude::*;
use napi::sys;
use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;

pub use crate::core::health::sampler::SamplerOptions;

pub(crate) const MS: u64 = 1_000_000;
/// Heap figures change slowly and a read costs ~12 µs from a cold tick (a call into V8 from outside any
/// JS frame, measured with `lagSamplerWork`): refresh them at most every 100 ms.
pub(crate) const HEAP_EVERY_NS: u64 = 100 * MS;

/// Owned by the loop's thread; freed in the timer's close callback.
pub(crate) struct ThreadSampler {
    pub(crate) env: sys::napi_env,
    pub(crate) loop_: *mut UvLoop,
    pub(crate) timer: *mut UvHandle,
    pub(crate) prepare: *mut UvHandle,
    pub(crate) handle_layouts: [std::alloc::Layout; 2],
    /// Handles not yet through their close callback; the sampler is freed when it reaches 0.
    pub(crate) open_handles: u8,
    pub(crate) sampler: Arc<LoopSampler>,
    /// `uv_hrtime` and cumulative idle time at the previous prepare (just before the loop polled).
    pub(crate) last_poll_ns: u64,
    pub(crate) last_poll_idle_ns: u64,
    pub(crate) last_heap_ns: u64,
    pub(crate) cleanup: sys::napi_async_cleanup_hook_handle,
    /// Time spent inside the tick / prepare callbacks (self-measured, for the benchmark).
    pub(crate) tick_work_ns: u64,
    pub(crate) prepares: u64,
    pub(crate) prepare_work_ns: u64,
    pub(crate) heap_reads: u64,
}

thread_local! {
    pub(crate) static SAMPLER: Cell<*mut ThreadSampler> = const { Cell::new(ptr::null_mut()) };
    /// Set once this thread's environment is being torn down: no new sampler after that.
    pub(crate) static TORN_DOWN: Cell<bool> = const { Cell::new(false) };
    /// `v8.getHeapStatistics`, registered by lib/lag/index.js for this thread's environment.
    pub(crate) static HEAP_FN: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
    /// Test seam (`lagPanicOnNextTick`): the next tick on this thread panics.
    pub(crate) static PANIC_ON_TICK: Cell<bool> = const { Cell::new(false) };
}

/// The process's stall watchdog, on the clock the ticks are stamped with.
pub(crate) fn watchdog() -> &'static Watchdog {
    pub(crate) static W: OnceLock<Watchdog> = OnceLock::new();
    W.get_or_init(|| Watchdog::new(Arc::new(UvClock)))
}

/// Keeps this thread's sampler running for one user; dropping it releases that user (from any thread).
pub struct SamplerGuard {
    sub: Arc<Subscriber>,
    sampler: Arc<LoopSampler>,
    owner: ThreadId,
}

#[allow(dead_code)] // API for the other native components (the gatekeeper's gate)
impl SamplerGuard {
    /// The lock-free record this user's window publishes into every tick (and the watchdog flags).
    pub fn health(&self) -> &Arc<LoopHealth> {
        self.sub.health()
    }
    /// The full window figures (mean, quantiles, max, ELU...) of this user.
    pub fn stats(&self) -> LagStats {
        self.sampler.stats(&self.sub)
    }
    /// Lag right now, ms: the latest tick's drift, or how overdue the next tick already is if that is
    /// larger (the loop is blocked at this moment, or has just been and the timer has not run yet).
    pub fn lag_now_ms(&self) -> f64 {
        self.sampler.lag_now_ms(self.sub.health(), unsafe { uv_hrtime() })
    }
    /// The interval the shared timer currently runs at (the finest requested on this thread).
    pub fn interval_ms(&self) -> f64 {
        self.sampler.interval_ms()
    }
}

impl Drop for SamplerGuard {
    fn drop(&mut self) {
        // Runs from a JS object's finalizer, called by N-API from C: a panic must not unwind into it.
        let _ = raw::no_unwind(|| self.release());
    }
}

impl SamplerGuard {
    fn release(&self) {
        self.sampler.unsubscribe(&self.sub);
        if std::thread::current().id() == self.owner {
            // A sampler torn down already (or a thread exiting) has nothing left to adjust.
            let _ = SAMPLER.try_with(|cell| {
                let ts = cell.get();
                if !ts.is_null() && Arc::ptr_eq(unsafe { &(*ts).sampler }, &self.sampler) {
                    unsafe { reconcile(&mut *ts) };
                }
            });
        } else {
            self.sampler.mark_dirty();
        }
        watchdog().wake();
    }
}

/// How long this thread's loop has been running since it last came back from polling for I/O, ms:
/// the age of the current turn, for the gate's turn budget. 0 when this thread's sampler is not
/// running (nothing marks the polls then).
pub fn current_turn_age_ms() -> f64 {
    current_turn().map_or(0.0, |(_, age_ms)| age_ms)
}

/// The current loop turn: when it began (uv_hrtime, ns: the same for every call within one turn) and
/// its age (ms). The prepare handle notes the time and the idle total just before each poll; the idle
/// time gained since is how long that poll waited. None when this thread's sampler is not running.
pub fn current_turn() -> Option<(u64, f64)> {
    let ts = SAMPLER.with(Cell::get);
    if ts.is_null() {
        return None;
    }
    // SAFETY: the sampler belongs to this thread and is only freed on it, in its close callback.
    unsafe {
        let ts = &*ts;
        if !ts.sampler.is_running() {
            return None;
        }
        let waited = uv_metrics_idle_time(ts.loop_).saturating_sub(ts.last_poll_idle_ns);
        let start = ts.last_poll_ns + waited;
        Some((start, uv_hrtime().saturating_sub(start) as f64 / MS as f64))
    }
}

/// The current thread's health record, starting this thread's single native sampler (at `resolution_ms`
/// if none is running yet, or finer if another user asks) and keeping it running while the guard
/// lives. Window 1 s, EWMA time constant 250 ms, no stall detection: see `acquire_thread_sampler_with`.
#[allow(dead_code)] // the gatekeeper's native gate builds on it
pub fn acquire_thread_sampler(env: sys::napi_env, resolution_ms: f64) -> Result<SamplerGuard> {
    if !(resolution_ms.is_finite() && resolution_ms >= 1.0 && resolution_ms.fract() == 0.0) {
        return Err(Error::new(Status::InvalidArg, "resolutionMs must be a whole number of milliseconds ≥ 1"));
    }
    acquire_thread_sampler_with(env, SamplerOptions { resolution_ms: resolution_ms as u64, ..Default::default() })
}

/// As `acquire_thread_sampler`, with every option. Must be called on the JS thread that owns `env`.
pub fn acquire_thread_sampler_with(env: sys::napi_env, opts: SamplerOptions) -> Result<SamplerGuard> {
    acquire_into(env, opts, Arc::new(LoopHealth::default()))
}

/// As `acquire_thread_sampler_with`, publishing into an existing health record (its window restarts).
pub fn acquire_into(env: sys::napi_env, opts: SamplerOptions, health: Arc<LoopHealth>) -> Result<SamplerGuard> {
    if !opts.is_valid() {
        return Err(Error::new(Status::InvalidArg, "sampler options must be positive"));
    }
    let ts = unsafe { thread_sampler(env)? };
    let ts = unsafe { &mut *ts };
    let sub = Subscriber::new(opts, health);
    let now = unsafe { uv_hrtime() };
    let idle = unsafe { uv_metrics_idle_time(ts.loop_) };
    if let Some((used, limit)) = unsafe { read_heap(ts, now, true) } {
        ts.sampler.set_heap(used, limit);
    }
    ts.sampler.subscribe(&sub, now, idle);
    unsafe { reconcile(ts) };
    if opts.stall_ms.is_some() {
        watchdog().watch(&ts.sampler);
    }
    Ok(SamplerGuard { sub, sampler: ts.sampler.clone(), owner: std::thread::current().id() })
}

/// This thread's sampler, created (timer initialised, stopped) on first use.
pub(crate) unsafe fn thread_sampler(env: sys::napi_env) -> Result<*mut ThreadSampler> {
    let existing = SAMPLER.with(|c| c.get());
    if !existing.is_null() {
        return Ok(existing);
    }
    if TORN_DOWN.with(|t| t.get()) {
        return Err(Error::new(Status::GenericFailure, "the environment is shutting down"));
    }
    let loop_ = event_loop(env);
    if loop_.is_null() {
        return Err(Error::from_reason("napi_get_uv_event_loop failed"));
    }
    let (timer, timer_layout) = alloc_handle(UV_TIMER, "timer")?;
    let (prepare, prepare_layout) = match alloc_handle(UV_PREPARE, "prepare") {
        Ok(h) => h,
        Err(e) => {
            std::alloc::dealloc(timer as *mut u8, timer_layout);
            return Err(e);
        }
    };
    // Neither init can fail in libuv (both return 0 unconditionally); if one ever did, a handle the loop
    // already knows must not be freed, so it is leaked rather than risked.
    if uv_timer_init(loop_, timer) != 0 {
        std::alloc::dealloc(timer as *mut u8, timer_layout);
        std::alloc::dealloc(prepare as *mut u8, prepare_layout);
        return Err(Error::from_reason("uv_timer_init failed"));
    }
    if uv_prepare_init(loop_, prepare) != 0 {
        uv_unref(timer);
        return Err(Error::from_reason("uv_prepare_init failed"));
    }
    uv_unref(timer);
    uv_unref(prepare);
    // Idle-time accounting (for ELU): a loop that has run with it on has idled at least once by now.
    if uv_metrics_idle_time(loop_) == 0 {
        uv_loop_configure(loop_, UV_METRICS_IDLE_TIME);
    }
    let now = uv_hrtime();
    let ts = Box::into_raw(Box::new(ThreadSampler {
        env,
        loop_,
        timer,
        prepare,
        handle_layouts: [timer_layout, prepare_layout],
        open_handles: 2,
        sampler: LoopSampler::new(),
        last_poll_ns: now,
        last_poll_idle_ns: 0,
        last_heap_ns: 0,
        cleanup: ptr::null_mut(),
        tick_work_ns: 0,
        prepares: 0,
        prepare_work_ns: 0,
        heap_reads: 0,
    }));
    uv_handle_set_data(timer, ts as *mut c_void);
    uv_handle_set_data(prepare, ts as *mut c_void);
    let status = sys::napi_add_async_cleanup_hook(env, Some(on_env_cleanup), ts as *mut c_void, &mut (*ts).cleanup);
    if status != sys::Status::napi_ok {
        // Without a cleanup hook a worker exit would abort: close and refuse.
        (*ts).cleanup = ptr::null_mut();
        uv_close(timer, on_close);
        uv_close(prepare, on_close);
        return Err(Error::from_reason("napi_add_async_cleanup_hook failed"));
    }
    SAMPLER.with(|c| c.set(ts));
    LIVE_SAMPLERS.fetch_add(1, Relaxed);
    Ok(ts)
}

/// A zeroed block of `uv_handle_size(kind)` bytes, after checking that `kind` is the handle type we
/// mean (the enum's numbering is the only thing assumed about libuv's headers).
pub(crate) unsafe fn alloc_handle(kind: c_int, expected: &str) -> Result<(*mut UvHandle, std::alloc::Layout)> {
    let name = uv_handle_type_name(kind);
    if name.is_null() || CStr::from_ptr(name).to_bytes() != expected.as_bytes() {
        return Err(Error::from_reason(format!("libuv's handle type {kind} is not `{expected}`")));
    }
    let size = uv_handle_size(kind);
    let layout = std::alloc::Layout::from_size_align(size.max(1), 16).map_err(|e| Error::from_reason(e.to_string()))?;
    let handle = std::alloc::alloc_zeroed(layout) as *mut UvHandle;
    if handle.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    Ok((handle, layout))
}

/// Starts, stops or re-times the timer as the sampler's subscribers need (`LoopSampler::plan`). Owner
/// thread only.
pub(crate) unsafe fn reconcile(ts: &mut ThreadSampler) {
    match ts.sampler.plan() {
        TimerPlan::Keep => {}
        TimerPlan::Stop => {
            uv_timer_stop(ts.timer);
            uv_prepare_stop(ts.prepare);
            ts.sampler.stopped();
        }
        TimerPlan::Run(ms) => {
            let was_running = ts.sampler.is_running();
            let now = uv_hrtime();
            uv_timer_start(ts.timer, on_tick, ms, ms);
            if !was_running {
                ts.last_poll_ns = now;
                ts.last_poll_idle_ns = uv_metrics_idle_time(ts.loop_);
                uv_prepare_start(ts.prepare, on_prepare);
            }
            ts.sampler.started(ms, now);
        }
    }
}

/// Thread samplers created and not yet freed by their close callback, process-wide (for tests).
pub(crate) static LIVE_SAMPLERS: AtomicUsize = AtomicUsize::new(0);

//! LagMonitor's native side: one libuv timer per JS thread, shared by every monitor (and by every other
//! native component, through `acquire_thread_sampler`) on that thread.
//!
//! The arithmetic, the fan-out to the users' windows and the stall watchdog are the core's
//! (`core::health::sampler`, `core::health::watchdog`); this file owns the libuv side:
//! * The timer lives on the loop of the thread that first asks for it (`napi_get_uv_event_loop`); its
//!   handle is allocated with `uv_handle_size(UV_TIMER)` — no libuv struct layout is assumed here — and
//!   `uv_unref`'d so it never keeps a process alive. Each tick hands `uv_hrtime` to the loop's
//!   `LoopSampler`, which measures the drift and feeds every subscriber.
//! * A prepare handle (same allocation rule, also unref'd) runs once per loop iteration, just before
//!   the loop polls for I/O: (time since the previous prepare) − (idle time in between) is how long the
//!   loop ran without polling — a synchronous block measured to the microsecond whatever the timer's
//!   resolution. The longest one per window is `max_block_ms`.
//! * Event-loop utilisation comes from `uv_metrics_idle_time`, which counts only once the loop was
//!   configured with UV_METRICS_IDLE_TIME. Node (20) does that when it creates the main and every worker
//!   loop (checked: the first `performance.eventLoopUtilization()` call already reports the idle time
//!   since start). A loop that reports no idle time at all when the sampler starts is configured here
//!   (`uv_loop_configure`, on the loop's own thread), so embedders that skip it still get ELU.
//! * Heap used / limit: `v8.getHeapStatistics()` (registered by lib/lag.js), read at most every 100 ms.
//! * An async env cleanup hook stops and `uv_close`s the handle when the environment (a worker) is torn
//!   down; memory is freed only in the close callback, which then releases the hook so Node may close
//!   the loop.
//! * One process-wide watchdog thread (on `uv_hrtime`, the ticks' clock) raises `LoopHealth::stalled`
//!   when a loop has been overdue for longer than a subscriber's `stall_ms`.
use super::uv::*;
use crate::core::health::histogram::LagStats;
use crate::core::health::sampler::{LoopSampler, Subscriber, TimerPlan};
use crate::core::health::watchdog::Watchdog;
use crate::core::health::LoopHealth;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use parking_lot::Mutex;
use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::ThreadId;

pub use crate::core::health::sampler::SamplerOptions;

const MS: u64 = 1_000_000;
/// Heap figures change slowly and a read costs ~12 µs from a cold tick (a call into V8 from outside any
/// JS frame, measured with `lagSamplerWork`): refresh them at most every 100 ms.
const HEAP_EVERY_NS: u64 = 100 * MS;

/// Owned by the loop's thread; freed in the timer's close callback.
struct ThreadSampler {
    env: sys::napi_env,
    loop_: *mut UvLoop,
    timer: *mut UvHandle,
    prepare: *mut UvHandle,
    handle_layouts: [std::alloc::Layout; 2],
    /// Handles not yet through their close callback; the sampler is freed when it reaches 0.
    open_handles: u8,
    sampler: Arc<LoopSampler>,
    /// `uv_hrtime` and cumulative idle time at the previous prepare (just before the loop polled).
    last_poll_ns: u64,
    last_poll_idle_ns: u64,
    last_heap_ns: u64,
    cleanup: sys::napi_async_cleanup_hook_handle,
    /// Time spent inside the tick / prepare callbacks (self-measured, for the benchmark).
    tick_work_ns: u64,
    prepares: u64,
    prepare_work_ns: u64,
    heap_reads: u64,
}

thread_local! {
    static SAMPLER: Cell<*mut ThreadSampler> = const { Cell::new(ptr::null_mut()) };
    /// Set once this thread's environment is being torn down: no new sampler after that.
    static TORN_DOWN: Cell<bool> = const { Cell::new(false) };
    /// `v8.getHeapStatistics`, registered by lib/lag/index.js for this thread's environment.
    static HEAP_FN: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
    /// Test seam (`lagPanicOnNextTick`): the next tick on this thread panics.
    static PANIC_ON_TICK: Cell<bool> = const { Cell::new(false) };
}

/// The process's stall watchdog, on the clock the ticks are stamped with.
fn watchdog() -> &'static Watchdog {
    static W: OnceLock<Watchdog> = OnceLock::new();
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
unsafe fn thread_sampler(env: sys::napi_env) -> Result<*mut ThreadSampler> {
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
unsafe fn alloc_handle(kind: c_int, expected: &str) -> Result<(*mut UvHandle, std::alloc::Layout)> {
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
unsafe fn reconcile(ts: &mut ThreadSampler) {
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

// libuv calls the handles' callbacks from C, so a panic in one must not unwind: it is caught, and the
// sampler stops for good (`stop_after_panic`, `LoopSampler::fail`).
unsafe extern "C" fn on_tick(handle: *mut UvHandle) {
    if raw::no_unwind(|| on_tick_unguarded(handle)).is_none() {
        stop_after_panic(handle);
    }
}

unsafe extern "C" fn on_prepare(handle: *mut UvHandle) {
    if raw::no_unwind(|| on_prepare_unguarded(handle)).is_none() {
        stop_after_panic(handle);
    }
}

unsafe fn stop_after_panic(handle: *mut UvHandle) {
    let _ = raw::no_unwind(|| {
        let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
        ts.sampler.fail();
        reconcile(ts);
        eprintln!("tiergate: this thread's event-loop sampler panicked (above) and has stopped; its lag reads 0 from now on");
    });
}

unsafe fn on_tick_unguarded(handle: *mut UvHandle) {
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
unsafe fn on_prepare_unguarded(handle: *mut UvHandle) {
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

/// Calls the registered `v8.getHeapStatistics` (at most every 100 ms unless forced): `(used, limit)`
/// when the figures were refreshed. Runs on the loop thread, outside any JS frame: it opens its own
/// handle scope and swallows any exception (a terminating worker cannot run JS any more).
unsafe fn read_heap(ts: &mut ThreadSampler, now: u64, force: bool) -> Option<(u64, u64)> {
    if !force && now.saturating_sub(ts.last_heap_ns) < HEAP_EVERY_NS {
        return None;
    }
    let fn_ref = HEAP_FN.with(|c| c.get());
    if fn_ref.is_null() {
        return None;
    }
    ts.last_heap_ns = now;
    let env = ts.env;
    let mut scope = ptr::null_mut();
    if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
        return None;
    }
    let mut read = None;
    let mut func = ptr::null_mut();
    let mut recv = ptr::null_mut();
    let mut out = ptr::null_mut();
    if sys::napi_get_reference_value(env, fn_ref, &mut func) == sys::Status::napi_ok
        && !func.is_null()
        && sys::napi_get_undefined(env, &mut recv) == sys::Status::napi_ok
        && sys::napi_call_function(env, recv, func, 0, ptr::null(), &mut out) == sys::Status::napi_ok
    {
        let used = get_number(env, out, c"used_heap_size");
        let limit = get_number(env, out, c"heap_size_limit");
        ts.heap_reads += 1;
        if let (Some(used), Some(limit)) = (used, limit) {
            read = Some((used as u64, limit as u64));
        }
    }
    let mut pending = false;
    if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
        let mut exc = ptr::null_mut();
        sys::napi_get_and_clear_last_exception(env, &mut exc);
    }
    sys::napi_close_handle_scope(env, scope);
    read
}

unsafe fn get_number(env: sys::napi_env, obj: sys::napi_value, key: &CStr) -> Option<f64> {
    let mut v = ptr::null_mut();
    if sys::napi_get_named_property(env, obj, key.as_ptr(), &mut v) != sys::Status::napi_ok {
        return None;
    }
    super::raw::get_f64(env, v)
}

/// Environment teardown: stop, close, and free in the close callback (which releases the hook). Called
/// from C: after a panic, the handles are still closed (if not closing yet), or the environment would
/// never finish tearing down.
unsafe extern "C" fn on_env_cleanup(handle: sys::napi_async_cleanup_hook_handle, data: *mut c_void) {
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

unsafe fn on_env_cleanup_unguarded(_handle: sys::napi_async_cleanup_hook_handle, data: *mut c_void) {
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
unsafe extern "C" fn on_close(handle: *mut UvHandle) {
    let _ = raw::no_unwind(|| on_close_unguarded(handle));
}

unsafe fn on_close_unguarded(handle: *mut UvHandle) {
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

/// Thread samplers created and not yet freed by their close callback, process-wide (for tests).
static LIVE_SAMPLERS: AtomicUsize = AtomicUsize::new(0);

// ---------------------------------------------------------------------------------------------------
// JS binding (off the hot path except `lagMs`, which is one no-argument call).

/// Registers `v8.getHeapStatistics` for this thread's environment (lib/lag.js does it on load).
#[napi(js_name = "lagSetHeapSource", catch_unwind)]
pub fn lag_set_heap_source(env: Env, func: Function<(), Object>) -> Result<()> {
    let _panic = raw::throw_on_panic(&env, "lag_set_heap_source");
    let raw_env = env.raw();
    let mut reference = ptr::null_mut();
    unsafe {
        super::raw::check(sys::napi_create_reference(raw_env, func.raw(), 1, &mut reference))?;
    }
    let old = HEAP_FN.with(|c| c.replace(reference));
    if !old.is_null() {
        unsafe { sys::napi_delete_reference(raw_env, old) };
    }
    Ok(())
}

/// Thread samplers whose memory has not been freed yet, in the whole process: proves that terminated
/// workers closed their timers.
#[napi(js_name = "lagLiveSamplers", catch_unwind)]
pub fn lag_live_samplers(env: Env) -> u32 {
    let _panic = raw::throw_on_panic(&env, "lag_live_samplers");
    LIVE_SAMPLERS.load(Relaxed) as u32
}

/// This thread's sampler, measuring itself: [ticks, ns inside tick callbacks, loop iterations seen by
/// the prepare handle, ns inside prepare callbacks, heap reads]. Zeros when the thread has none.
/// Test seam, not public API: the next tick of this thread's sampler panics (a panic in a libuv callback
/// must neither unwind into libuv nor leave the sampler unsafe; see `stop_after_panic`).
#[napi(js_name = "lagPanicOnNextTick", catch_unwind)]
pub fn lag_panic_on_next_tick(env: Env) {
    let _panic = raw::throw_on_panic(&env, "lagPanicOnNextTick");
    PANIC_ON_TICK.with(|p| p.set(true));
}

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

/// What a monitor's fast readers need: stable across stop/start.
struct MonitorCore {
    health: Arc<LoopHealth>,
    sampler: Arc<LoopSampler>,
    active: AtomicBool,
}

impl MonitorCore {
    fn lag_now_ms(&self) -> f64 {
        if self.active.load(Relaxed) {
            self.sampler.lag_now_ms(&self.health, unsafe { uv_hrtime() })
        } else {
            self.health.sample().latest_lag_ms
        }
    }
}

super::raw::guarded!(fast_lag_ms = "LagMonitor.lagMs" => fast_lag_ms_unguarded);
#[inline(always)]
unsafe fn fast_lag_ms_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (_, _, data) = super::raw::args::<0>(env, info);
    super::raw::number(env, (*(data as *const MonitorCore)).lag_now_ms())
}

super::raw::guarded!(fast_stalled = "LagMonitor.stalled" => fast_stalled_unguarded);
#[inline(always)]
unsafe fn fast_stalled_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (_, _, data) = super::raw::args::<0>(env, info);
    super::raw::boolean(env, (*(data as *const MonitorCore)).health.stalled())
}

/// Health records shared with other threads by id (`LagMonitor#share()` / `LagMonitor.observe(id)`).
/// (last id handed out, live entries).
type Registry = Mutex<(u32, Vec<(u32, Weak<LoopHealth>)>)>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
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

fn whole_ms(name: &str, v: f64, min: f64, max: f64) -> Result<u64> {
    if !v.is_finite() || v.fract() != 0.0 || v < min || v > max {
        return Err(Error::new(Status::InvalidArg, format!("{name} must be a whole number of milliseconds in {min}..={max}")));
    }
    Ok(v as u64)
}

fn stats_array(s: &LagStats, h: &crate::core::health::HealthSample, interval_ms: f64, lag_now: f64) -> Vec<f64> {
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
            resolution_ms: whole_ms("resolutionMs", resolution_ms, 1.0, 60_000.0)?,
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
            super::raw::check(sys::napi_create_object(raw_env, &mut obj))?;
            super::raw::define_fn(raw_env, obj, "lagMs", fast_lag_ms, self.core.clone())?;
            super::raw::define_fn(raw_env, obj, "stalled", fast_stalled, self.core.clone())?;
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

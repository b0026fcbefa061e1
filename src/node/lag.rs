//! LagMonitor's native side: one libuv timer per JS thread, shared by every monitor (and by every other
//! native component, through `acquire_thread_sampler`) on that thread.
//!
//! * The timer lives on the loop of the thread that first asks for it (`napi_get_uv_event_loop`); its
//!   handle is allocated with `uv_handle_size(UV_TIMER)` — no libuv struct layout is assumed here — and
//!   `uv_unref`'d so it never keeps a process alive.
//! * Each tick measures drift = (now − previous tick) − interval with `uv_hrtime` and feeds it to every
//!   subscriber's `LagWindow` (src/core/histogram.rs), which writes the subscriber's `LoopHealth`.
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
//! * One process-wide watchdog thread raises `LoopHealth::stalled` when a loop has been overdue for
//!   longer than a subscriber's `stall_ms`; the next tick of that loop decides the flag again.
use crate::core::health::LoopHealth;
use crate::core::histogram::{LagStats, LagWindow};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::ThreadId;
use std::time::Duration;

#[repr(C)]
pub struct UvLoop {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct UvHandle {
    _opaque: [u8; 0],
}
type UvCloseCb = unsafe extern "C" fn(*mut UvHandle);
type UvTimerCb = unsafe extern "C" fn(*mut UvHandle);

/// `uv_handle_type` value of UV_TIMER (UV_UNKNOWN_HANDLE = 0, then the UV_HANDLE_TYPE_MAP order);
/// checked at run time against `uv_handle_type_name`.
const UV_TIMER: c_int = 13;
const UV_PREPARE: c_int = 9;
/// `uv_loop_option` UV_METRICS_IDLE_TIME.
const UV_METRICS_IDLE_TIME: c_int = 1;

// Resolved against the node binary when the addon is loaded.
extern "C" {
    fn napi_get_uv_event_loop(env: sys::napi_env, loop_: *mut *mut UvLoop) -> sys::napi_status;
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_handle_type_name(kind: c_int) -> *const c_char;
    fn uv_timer_init(loop_: *mut UvLoop, handle: *mut UvHandle) -> c_int;
    fn uv_timer_start(handle: *mut UvHandle, cb: UvTimerCb, timeout: u64, repeat: u64) -> c_int;
    fn uv_timer_stop(handle: *mut UvHandle) -> c_int;
    fn uv_prepare_init(loop_: *mut UvLoop, handle: *mut UvHandle) -> c_int;
    fn uv_prepare_start(handle: *mut UvHandle, cb: UvTimerCb) -> c_int;
    fn uv_prepare_stop(handle: *mut UvHandle) -> c_int;
    fn uv_unref(handle: *mut UvHandle);
    fn uv_close(handle: *mut UvHandle, cb: UvCloseCb);
    fn uv_is_closing(handle: *const UvHandle) -> c_int;
    fn uv_handle_set_data(handle: *mut UvHandle, data: *mut c_void);
    fn uv_handle_get_data(handle: *const UvHandle) -> *mut c_void;
    fn uv_hrtime() -> u64;
    fn uv_metrics_idle_time(loop_: *mut UvLoop) -> u64;
    fn uv_loop_configure(loop_: *mut UvLoop, option: c_int, ...) -> c_int;
}

const MS: u64 = 1_000_000;
/// Heap figures change slowly and a read costs ~12 µs from a cold tick (a call into V8 from outside any
/// JS frame, measured with `lagSamplerWork`): refresh them at most every 100 ms.
const HEAP_EVERY_NS: u64 = 100 * MS;

/// What one user of the thread's sampler wants. The timer runs at the finest `resolution_ms` among the
/// active users; each user keeps its own window, EWMA and stall threshold.
#[derive(Clone, Copy, Debug)]
pub struct SamplerOptions {
    pub resolution_ms: u64,
    pub window_ms: u64,
    pub ewma_ms: u64,
    /// Raise `stalled` once the loop is overdue by more than this; `None`: no stall detection.
    pub stall_ms: Option<u64>,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions { resolution_ms: 10, window_ms: 1000, ewma_ms: 250, stall_ms: None }
    }
}

/// One user of a thread's sampler: its window, and the health record it publishes.
pub struct Subscriber {
    opts: SamplerOptions,
    health: Arc<LoopHealth>,
    window: Mutex<LagWindow>,
}

impl Subscriber {
    fn new(opts: SamplerOptions, health: Arc<LoopHealth>) -> Arc<Self> {
        let window = LagWindow::new(opts.window_ms * MS, opts.resolution_ms * MS, opts.ewma_ms * MS, 0, 0);
        Arc::new(Subscriber { opts, health, window: Mutex::new(window) })
    }

    fn on_tick(&self, now: u64, drift: u64, elapsed: u64, idle: u64, block: u64) {
        let mut w = self.window.lock();
        w.record(now, drift, elapsed, idle);
        if block > 0 {
            w.record_block(now, block);
        }
        self.health.record_tick(w.latest_ms(), w.ewma_ms(), w.quantile_ms(0.99));
        if let Some(elu) = w.elu() {
            self.health.set_elu(elu);
        }
        drop(w);
        // The tick that ends a stall still reports it, so the requests queued behind the block see it.
        if self.opts.stall_ms.is_some_and(|s| drift > s * MS) {
            self.health.set_stalled(true);
        }
    }
}

/// Thread-side state visible from other threads (guards, the watchdog).
struct Shared {
    owner: ThreadId,
    subs: Mutex<Vec<Arc<Subscriber>>>,
    /// `uv_hrtime` of the last tick (or of the timer's start).
    last_tick_ns: AtomicU64,
    interval_ns: AtomicU64,
    running: AtomicBool,
    /// The set of subscribers changed off the owner thread: the next tick reconciles the timer.
    dirty: AtomicBool,
    ticks: AtomicU64,
    heap_used: AtomicU64,
    heap_limit: AtomicU64,
    /// Longest no-poll stretch measured by the prepare handle since the last tick (loop thread only).
    pending_block_ns: AtomicU64,
    /// Time spent inside the tick / prepare callbacks (self-measured, for the benchmark).
    tick_work_ns: AtomicU64,
    prepares: AtomicU64,
    prepare_work_ns: AtomicU64,
    heap_reads: AtomicU64,
    /// A tick or prepare callback panicked: the sampler stopped for good (`stop_after_panic`).
    failed: AtomicBool,
}

impl Shared {
    /// `health`'s latest drift, or how overdue this thread's next tick is now if that is larger.
    fn lag_now_ms(&self, health: &LoopHealth) -> f64 {
        let latest = health.sample().latest_lag_ms;
        if !self.running.load(Acquire) {
            return latest;
        }
        let due = self.last_tick_ns.load(Acquire) + self.interval_ns.load(Relaxed);
        let overdue = unsafe { uv_hrtime() }.saturating_sub(due) as f64 / MS as f64;
        latest.max(overdue)
    }
}

/// Owned by the loop's thread; freed in the timer's close callback.
struct ThreadSampler {
    env: sys::napi_env,
    loop_: *mut UvLoop,
    timer: *mut UvHandle,
    prepare: *mut UvHandle,
    handle_layouts: [std::alloc::Layout; 2],
    /// Handles not yet through their close callback; the sampler is freed when it reaches 0.
    open_handles: u8,
    shared: Arc<Shared>,
    prev_tick_ns: u64,
    /// `uv_hrtime` and cumulative idle time at the previous prepare (just before the loop polled).
    last_poll_ns: u64,
    last_poll_idle_ns: u64,
    last_heap_ns: u64,
    cleanup: sys::napi_async_cleanup_hook_handle,
}

thread_local! {
    static SAMPLER: Cell<*mut ThreadSampler> = const { Cell::new(ptr::null_mut()) };
    /// Set once this thread's environment is being torn down: no new sampler after that.
    static TORN_DOWN: Cell<bool> = const { Cell::new(false) };
    /// `v8.getHeapStatistics`, registered by lib/lag.js for this thread's environment.
    static HEAP_FN: Cell<sys::napi_ref> = const { Cell::new(ptr::null_mut()) };
    /// Test seam (`lagPanicOnNextTick`): the next tick on this thread panics.
    static PANIC_ON_TICK: Cell<bool> = const { Cell::new(false) };
}

/// Keeps this thread's sampler running for one user; dropping it releases that user (from any thread).
pub struct SamplerGuard {
    sub: Arc<Subscriber>,
    shared: Arc<Shared>,
}

#[allow(dead_code)] // API for the other native components (the gatekeeper's gate)
impl SamplerGuard {
    /// The lock-free record this user's window publishes into every tick (and the watchdog flags).
    pub fn health(&self) -> &Arc<LoopHealth> {
        &self.sub.health
    }
    /// The full window figures (mean, quantiles, max, ELU...) of this user.
    pub fn stats(&self) -> LagStats {
        let mut s = self.sub.window.lock().stats();
        // A block measured since the last tick is not in the window yet.
        let pending = self.shared.pending_block_ns.load(Relaxed) as f64 / MS as f64;
        s.max_block_ms = s.max_block_ms.max(pending);
        s
    }
    /// Lag right now, ms: the latest tick's drift, or how overdue the next tick already is if that is
    /// larger (the loop is blocked at this moment, or has just been and the timer has not run yet).
    pub fn lag_now_ms(&self) -> f64 {
        self.shared.lag_now_ms(&self.sub.health)
    }
    /// The interval the shared timer currently runs at (the finest requested on this thread).
    pub fn interval_ms(&self) -> f64 {
        self.shared.interval_ns.load(Relaxed) as f64 / MS as f64
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
        self.shared.subs.lock().retain(|s| !Arc::ptr_eq(s, &self.sub));
        if std::thread::current().id() == self.shared.owner {
            // A sampler torn down already (or a thread exiting) has nothing left to adjust.
            let _ = SAMPLER.try_with(|cell| {
                let ts = cell.get();
                if !ts.is_null() && Arc::ptr_eq(unsafe { &(*ts).shared }, &self.shared) {
                    unsafe { reconcile(&mut *ts) };
                }
            });
        } else {
            self.shared.dirty.store(true, Release);
        }
        watchdog().wake();
    }
}

/// How long this thread's loop has been running since it last came back from polling for I/O, ms:
/// the age of the current turn, for the gate's turn budget. The prepare handle notes the time and the
/// idle total just before each poll; the idle time gained since is how long that poll waited. 0 when
/// this thread's sampler is not running (nothing marks the polls then).
pub fn current_turn_age_ms() -> f64 {
    let ts = SAMPLER.with(Cell::get);
    if ts.is_null() {
        return 0.0;
    }
    // SAFETY: the sampler belongs to this thread and is only freed on it, in its close callback.
    unsafe {
        let ts = &*ts;
        if !ts.shared.running.load(Relaxed) {
            return 0.0;
        }
        let waited = uv_metrics_idle_time(ts.loop_).saturating_sub(ts.last_poll_idle_ns);
        uv_hrtime().saturating_sub(ts.last_poll_ns + waited) as f64 / MS as f64
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
    if opts.resolution_ms == 0 || opts.window_ms == 0 || opts.ewma_ms == 0 || opts.stall_ms == Some(0) {
        return Err(Error::new(Status::InvalidArg, "sampler options must be positive"));
    }
    let ts = unsafe { thread_sampler(env)? };
    let ts = unsafe { &mut *ts };
    let sub = Subscriber::new(opts, health);
    // A timer already running finer than this user asked for: size its window for the real tick rate.
    let interval = ts.shared.interval_ns.load(Relaxed);
    if ts.shared.running.load(Relaxed) && interval < opts.resolution_ms * MS {
        sub.window.lock().set_expected_interval(interval);
    }
    let now = unsafe { uv_hrtime() };
    let idle = unsafe { uv_metrics_idle_time(ts.loop_) };
    sub.window.lock().reset(now, idle);
    unsafe { read_heap(ts, now, true) };
    sub.health.set_heap(ts.shared.heap_used.load(Relaxed), ts.shared.heap_limit.load(Relaxed));
    ts.shared.subs.lock().push(sub.clone());
    unsafe { reconcile(ts) };
    if opts.stall_ms.is_some() {
        watchdog().watch(&ts.shared);
    }
    Ok(SamplerGuard { sub, shared: ts.shared.clone() })
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
    let mut loop_ = ptr::null_mut();
    if napi_get_uv_event_loop(env, &mut loop_) != sys::Status::napi_ok || loop_.is_null() {
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
    let shared = Arc::new(Shared {
        owner: std::thread::current().id(),
        subs: Mutex::new(Vec::new()),
        last_tick_ns: AtomicU64::new(now),
        interval_ns: AtomicU64::new(0),
        running: AtomicBool::new(false),
        dirty: AtomicBool::new(false),
        ticks: AtomicU64::new(0),
        heap_used: AtomicU64::new(0),
        heap_limit: AtomicU64::new(0),
        pending_block_ns: AtomicU64::new(0),
        tick_work_ns: AtomicU64::new(0),
        prepares: AtomicU64::new(0),
        prepare_work_ns: AtomicU64::new(0),
        heap_reads: AtomicU64::new(0),
        failed: AtomicBool::new(false),
    });
    let ts = Box::into_raw(Box::new(ThreadSampler {
        env,
        loop_,
        timer,
        prepare,
        handle_layouts: [timer_layout, prepare_layout],
        open_handles: 2,
        shared,
        prev_tick_ns: now,
        last_poll_ns: now,
        last_poll_idle_ns: 0,
        last_heap_ns: 0,
        cleanup: ptr::null_mut(),
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

/// Starts, stops or re-times the timer to match its subscribers. Owner thread only.
unsafe fn reconcile(ts: &mut ThreadSampler) {
    ts.shared.dirty.store(false, Relaxed);
    if ts.shared.failed.load(Relaxed) {
        return;
    }
    let finest = ts.shared.subs.lock().iter().map(|s| s.opts.resolution_ms).min();
    let running = ts.shared.running.load(Relaxed);
    match finest {
        None if running => {
            uv_timer_stop(ts.timer);
            uv_prepare_stop(ts.prepare);
            ts.shared.running.store(false, Relaxed);
        }
        None => {}
        Some(ms) if !running || ts.shared.interval_ns.load(Relaxed) != ms * MS => {
            for sub in ts.shared.subs.lock().iter() {
                sub.window.lock().set_expected_interval(ms * MS);
            }
            let now = uv_hrtime();
            ts.prev_tick_ns = now;
            ts.shared.last_tick_ns.store(now, Relaxed);
            ts.shared.interval_ns.store(ms * MS, Relaxed);
            uv_timer_start(ts.timer, on_tick, ms, ms);
            if !running {
                ts.last_poll_ns = now;
                ts.last_poll_idle_ns = uv_metrics_idle_time(ts.loop_);
                ts.shared.pending_block_ns.store(0, Relaxed);
                uv_prepare_start(ts.prepare, on_prepare);
            }
            // Release: a thread that sees `running` also sees the `last_tick_ns` stored above (else a
            // watchdog on a weakly ordered CPU could read a stale tick and flag a false stall).
            ts.shared.running.store(true, Release);
        }
        Some(_) => {}
    }
}

// libuv calls the handles' callbacks from C, so a panic in one must not unwind: it is caught, and the
// sampler stops (`stop_after_panic`).
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

/// The safe state after a tick or prepare callback panicked. Its figures may be half-updated and a
/// panic that recurs would recur 100 times a second, so the sampler stops for good, and each user's
/// health record reads "no sample yet" (no lag, no ticks, not stalled), which every reader treats as
/// an idle loop: a frozen reading of an overloaded loop would keep the gate shedding forever, and a
/// tick count that stops moving would make its in-band estimate count the loop as blocked.
unsafe fn stop_after_panic(handle: *mut UvHandle) {
    let _ = raw::no_unwind(|| {
        let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
        uv_timer_stop(ts.timer);
        uv_prepare_stop(ts.prepare);
        ts.shared.failed.store(true, Relaxed);
        ts.shared.running.store(false, Release);
        for sub in ts.shared.subs.lock().iter() {
            sub.health.reset();
        }
        eprintln!("tiergate: this thread's event-loop sampler panicked (above) and has stopped; its lag reads 0 from now on");
    });
}

unsafe fn on_tick_unguarded(handle: *mut UvHandle) {
    if PANIC_ON_TICK.with(|p| p.replace(false)) {
        panic!("deliberate panic in the sampler's tick (test seam)");
    }
    let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
    let now = uv_hrtime();
    let elapsed = now.saturating_sub(ts.prev_tick_ns);
    ts.prev_tick_ns = now;
    let shared = &*ts.shared;
    let drift = elapsed.saturating_sub(shared.interval_ns.load(Relaxed));
    shared.last_tick_ns.store(now, Release);
    shared.ticks.fetch_add(1, Relaxed);
    let idle = uv_metrics_idle_time(ts.loop_);
    let heap = read_heap(ts, now, false);
    let shared = &*ts.shared;
    let block = shared.pending_block_ns.swap(0, Relaxed);
    for sub in shared.subs.lock().iter() {
        sub.on_tick(now, drift, elapsed, idle, block);
        if heap {
            sub.health.set_heap(shared.heap_used.load(Relaxed), shared.heap_limit.load(Relaxed));
        }
    }
    if shared.dirty.load(Acquire) {
        reconcile(ts);
    }
    let shared = &*ts.shared;
    shared.tick_work_ns.fetch_add(uv_hrtime().saturating_sub(now), Relaxed);
}

/// Once per loop iteration, right before the loop polls: how long it ran since it last polled.
unsafe fn on_prepare_unguarded(handle: *mut UvHandle) {
    let ts = &mut *(uv_handle_get_data(handle) as *mut ThreadSampler);
    let now = uv_hrtime();
    let idle = uv_metrics_idle_time(ts.loop_);
    let busy = now.saturating_sub(ts.last_poll_ns).saturating_sub(idle.saturating_sub(ts.last_poll_idle_ns));
    ts.last_poll_ns = now;
    ts.last_poll_idle_ns = idle;
    if busy > ts.shared.pending_block_ns.load(Relaxed) {
        ts.shared.pending_block_ns.store(busy, Relaxed);
    }
    ts.shared.prepares.fetch_add(1, Relaxed);
    ts.shared.prepare_work_ns.fetch_add(uv_hrtime().saturating_sub(now), Relaxed);
}

/// Calls the registered `v8.getHeapStatistics` (at most every 100 ms unless forced). Returns whether the
/// figures were refreshed. Runs on the loop thread, outside any JS frame: it opens its own handle scope
/// and swallows any exception (a terminating worker cannot run JS any more).
unsafe fn read_heap(ts: &mut ThreadSampler, now: u64, force: bool) -> bool {
    if !force && now.saturating_sub(ts.last_heap_ns) < HEAP_EVERY_NS {
        return false;
    }
    let fn_ref = HEAP_FN.with(|c| c.get());
    if fn_ref.is_null() {
        return false;
    }
    ts.last_heap_ns = now;
    let env = ts.env;
    let mut scope = ptr::null_mut();
    if sys::napi_open_handle_scope(env, &mut scope) != sys::Status::napi_ok {
        return false;
    }
    let mut ok = false;
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
        ts.shared.heap_reads.fetch_add(1, Relaxed);
        if let (Some(used), Some(limit)) = (used, limit) {
            ts.shared.heap_used.store(used as u64, Relaxed);
            ts.shared.heap_limit.store(limit as u64, Relaxed);
            ok = true;
        }
    }
    let mut pending = false;
    if sys::napi_is_exception_pending(env, &mut pending) == sys::Status::napi_ok && pending {
        let mut exc = ptr::null_mut();
        sys::napi_get_and_clear_last_exception(env, &mut exc);
    }
    sys::napi_close_handle_scope(env, scope);
    ok
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
    let shared = &(*ts).shared;
    shared.running.store(false, Relaxed);
    shared.subs.lock().clear();
    watchdog().forget(shared);
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
// Watchdog: one thread per process, parked while nobody asks for stall detection.

struct Watchdog {
    samplers: Mutex<Vec<Weak<Shared>>>,
    wake: Condvar,
    started: AtomicBool,
    /// Bumped on every change so a sleeping watchdog re-reads its list.
    generation: AtomicUsize,
}

fn watchdog() -> &'static Watchdog {
    static W: OnceLock<Watchdog> = OnceLock::new();
    W.get_or_init(|| Watchdog {
        samplers: Mutex::new(Vec::new()),
        wake: Condvar::new(),
        started: AtomicBool::new(false),
        generation: AtomicUsize::new(0),
    })
}

impl Watchdog {
    fn watch(&'static self, shared: &Arc<Shared>) {
        {
            let mut list = self.samplers.lock();
            list.retain(|w| w.strong_count() > 0);
            if !list.iter().any(|w| w.as_ptr() == Arc::as_ptr(shared)) {
                list.push(Arc::downgrade(shared));
            }
        }
        if !self.started.swap(true, AcqRel) {
            let spawned = std::thread::Builder::new().name("tiergate-watchdog".into()).spawn(move || self.run());
            if spawned.is_err() {
                self.started.store(false, Release);
            }
        }
        self.wake();
    }

    fn forget(&self, shared: &Arc<Shared>) {
        self.samplers.lock().retain(|w| w.strong_count() > 0 && w.as_ptr() != Arc::as_ptr(shared));
        self.wake();
    }

    fn wake(&self) {
        self.generation.fetch_add(1, Release);
        self.wake.notify_all();
    }

    fn run(&self) {
        let mut list = self.samplers.lock();
        loop {
            // Poll at a tenth of the smallest stall threshold (1..=50 ms); park when there is none.
            let finest = list
                .iter()
                .filter_map(Weak::upgrade)
                .flat_map(|s| s.subs.lock().iter().filter_map(|sub| sub.opts.stall_ms).min())
                .min();
            let Some(stall_ms) = finest else {
                list.retain(|w| w.strong_count() > 0);
                self.wake.wait(&mut list);
                continue;
            };
            let period = Duration::from_micros((stall_ms * 100).clamp(1_000, 50_000));
            self.wake.wait_for(&mut list, period);
            let now = unsafe { uv_hrtime() };
            for shared in list.iter().filter_map(Weak::upgrade) {
                if !shared.running.load(Acquire) {
                    continue;
                }
                let due = shared.last_tick_ns.load(Acquire) + shared.interval_ns.load(Relaxed);
                let overdue = now.saturating_sub(due);
                for sub in shared.subs.lock().iter() {
                    if sub.opts.stall_ms.is_some_and(|s| overdue > s * MS) {
                        sub.health.set_stalled(true);
                    }
                }
            }
        }
    }
}

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
    let s = unsafe { &(*ts).shared };
    [&s.ticks, &s.tick_work_ns, &s.prepares, &s.prepare_work_ns, &s.heap_reads]
        .iter()
        .map(|a| a.load(Relaxed) as f64)
        .collect()
}

/// What a monitor's fast readers need: stable across stop/start.
struct MonitorCore {
    health: Arc<LoopHealth>,
    shared: Arc<Shared>,
    active: AtomicBool,
}

impl MonitorCore {
    fn lag_now_ms(&self) -> f64 {
        if self.active.load(Relaxed) {
            self.shared.lag_now_ms(&self.health)
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
        let shared = unsafe { (*thread_sampler(env.raw())?).shared.clone() };
        let core = Arc::new(MonitorCore { health: Arc::new(LoopHealth::default()), shared, active: AtomicBool::new(false) });
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
        vec![
            h.latest_lag_ms,
            h.ewma_lag_ms,
            h.p99_lag_ms,
            h.elu,
            h.heap_used as f64,
            h.heap_limit as f64,
            if h.stalled { 1.0 } else { 0.0 },
            h.ticks as f64,
        ]
    }
}

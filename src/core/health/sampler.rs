//! One event loop's sampler state, shared by its users: the subscribers' windows and health records,
//! and what another thread (a guard being dropped, the stall watchdog) needs to read.
//!
//! The loop's thread owns the timer that drives it (src/node/lag: a libuv timer and prepare handle);
//! everything here is the arithmetic and the fan-out, on any monotonic nanosecond clock that all
//! arguments share:
//! * `tick` measures drift = (now − previous tick) − interval and feeds it to every subscriber's
//!   `LagWindow`, which writes the subscriber's `LoopHealth`; a drift over a subscriber's `stall_ms`
//!   raises its stall flag on that very tick (the requests queued behind the block see it).
//! * `note_block` keeps the longest no-poll stretch since the last tick, for the window's
//!   `max_block_ms`.
//! * `plan` says what the timer must do to match the subscribers (start, re-time, stop); the owner
//!   carries it out and reports it with `started` / `stopped`.
//! * `overdue_ns` and `lag_now_ms` read how late the next tick already is (a loop blocked right now).
use super::histogram::{LagStats, LagWindow};
use super::LoopHealth;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// The longest sampler tick (ms): a minute, for the LagMonitor and the gatekeeper's sampler alike.
pub const MAX_RESOLUTION_MS: u64 = 60_000;

/// What one user of a loop's sampler wants. The timer runs at the finest `resolution_ms` among the
/// active users; each user keeps its own window, EWMA and stall threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl SamplerOptions {
    /// Every duration must be positive (a zero would divide a window by nothing or flag every tick).
    pub fn is_valid(&self) -> bool {
        self.resolution_ms > 0 && self.window_ms > 0 && self.ewma_ms > 0 && self.stall_ms != Some(0)
    }
}

/// One user of a loop's sampler: its window, and the health record it publishes.
pub struct Subscriber {
    opts: SamplerOptions,
    health: Arc<LoopHealth>,
    window: Mutex<LagWindow>,
}

impl Subscriber {
    pub fn new(opts: SamplerOptions, health: Arc<LoopHealth>) -> Arc<Self> {
        let window = LagWindow::new(opts.window_ms * MS, opts.resolution_ms * MS, opts.ewma_ms * MS, 0, 0);
        Arc::new(Subscriber { opts, health, window: Mutex::new(window) })
    }

    pub fn opts(&self) -> &SamplerOptions {
        &self.opts
    }

    /// The lock-free record this user's window publishes into every tick (and the watchdog flags).
    pub fn health(&self) -> &Arc<LoopHealth> {
        &self.health
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
        if self.stalled_by(drift) {
            self.health.set_stalled(true);
        }
    }

    /// Whether a loop `overdue_ns` late is stalled by this user's threshold.
    fn stalled_by(&self, overdue_ns: u64) -> bool {
        self.opts.stall_ms.is_some_and(|s| overdue_ns > s * MS)
    }
}

/// What the loop's timer must do to match its subscribers (`LoopSampler::plan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerPlan {
    /// Nothing to change.
    Keep,
    /// Start (or re-time) the timer at this interval, ms.
    Run(u64),
    /// No subscriber is left: stop.
    Stop,
}

/// A loop's sampler state: written by its thread, read from any.
#[derive(Default)]
pub struct LoopSampler {
    subs: Mutex<Vec<Arc<Subscriber>>>,
    /// Clock reading of the last tick (or of the timer's start).
    last_tick_ns: AtomicU64,
    interval_ns: AtomicU64,
    running: AtomicBool,
    /// The set of subscribers changed off the owner thread: the next tick reconciles the timer.
    dirty: AtomicBool,
    heap_used: AtomicU64,
    heap_limit: AtomicU64,
    /// Longest no-poll stretch reported by `note_block` since the last tick.
    pending_block_ns: AtomicU64,
    ticks: AtomicU64,
    /// A tick or prepare callback panicked: the sampler is stopped for good (`fail`).
    failed: AtomicBool,
}

impl LoopSampler {
    pub fn new() -> Arc<LoopSampler> {
        Arc::new(LoopSampler::default())
    }

    /// Adds a user; its window starts at `now` (`idle`: the loop's cumulative idle time then). A timer
    /// already running finer than it asked for sizes its window for the real tick rate.
    pub fn subscribe(&self, sub: &Arc<Subscriber>, now: u64, idle: u64) {
        let interval = self.interval_ns.load(Relaxed);
        {
            let mut w = sub.window.lock();
            if self.running.load(Relaxed) && interval < sub.opts.resolution_ms * MS {
                w.set_expected_interval(interval);
            }
            w.reset(now, idle);
        }
        sub.health.set_heap(self.heap_used.load(Relaxed), self.heap_limit.load(Relaxed));
        self.subs.lock().push(sub.clone());
    }

    /// Removes a user. Off the owner thread, `mark_dirty` too: the owner's next tick re-plans.
    pub fn unsubscribe(&self, sub: &Arc<Subscriber>) {
        self.subs.lock().retain(|s| !Arc::ptr_eq(s, sub));
    }

    /// Forgets every user (the environment is being torn down).
    pub fn clear(&self) {
        self.subs.lock().clear();
        self.running.store(false, Relaxed);
    }

    pub fn mark_dirty(&self) {
        self.dirty.store(true, Release);
    }

    /// Whether the set of users changed off the owner thread since the last `plan`.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Acquire)
    }

    /// The smallest stall threshold among the users, ms.
    pub fn finest_stall_ms(&self) -> Option<u64> {
        self.subs.lock().iter().filter_map(|s| s.opts.stall_ms).min()
    }

    /// After a panic in the owner's callbacks its figures may be half-updated, and a panic that recurs
    /// would recur every tick: the sampler stops for good (`plan` says Stop, then Keep), and each user's
    /// health reads "no sample yet" — what every reader treats as an idle loop. A frozen reading of an
    /// overloaded loop would keep the gate shedding forever; a tick count that stops moving would make
    /// its in-band estimate count the loop as blocked.
    pub fn fail(&self) {
        self.failed.store(true, Relaxed);
        for sub in self.subs.lock().iter() {
            sub.health.reset();
        }
    }

    pub fn has_failed(&self) -> bool {
        self.failed.load(Relaxed)
    }

    /// What the timer must do for the current users.
    pub fn plan(&self) -> TimerPlan {
        self.dirty.store(false, Relaxed);
        let running = self.running.load(Relaxed);
        if self.failed.load(Relaxed) {
            return if running { TimerPlan::Stop } else { TimerPlan::Keep };
        }
        let finest = self.subs.lock().iter().map(|s| s.opts.resolution_ms).min();
        match finest {
            None if running => TimerPlan::Stop,
            None => TimerPlan::Keep,
            Some(ms) if !running || self.interval_ns.load(Relaxed) != ms * MS => TimerPlan::Run(ms),
            Some(_) => TimerPlan::Keep,
        }
    }

    /// The owner started (or re-timed) the timer at `interval_ms`, at `now`.
    pub fn started(&self, interval_ms: u64, now: u64) {
        let was_running = self.running.load(Relaxed);
        for sub in self.subs.lock().iter() {
            sub.window.lock().set_expected_interval(interval_ms * MS);
        }
        self.last_tick_ns.store(now, Relaxed);
        self.interval_ns.store(interval_ms * MS, Relaxed);
        if !was_running {
            self.pending_block_ns.store(0, Relaxed);
        }
        // Release: a thread that sees `running` also sees the `last_tick_ns` stored above (else a
        // watchdog on a weakly ordered CPU could read a stale tick and flag a false stall).
        self.running.store(true, Release);
    }

    /// The owner stopped the timer.
    pub fn stopped(&self) {
        self.running.store(false, Relaxed);
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Acquire)
    }

    /// One tick of the timer at `now` (`idle`: the loop's cumulative idle time; `heap`: fresh heap
    /// figures, if read this tick): drift into every user's window.
    pub fn tick(&self, now: u64, idle: u64, heap: Option<(u64, u64)>) {
        let elapsed = now.saturating_sub(self.last_tick_ns.load(Relaxed));
        let drift = elapsed.saturating_sub(self.interval_ns.load(Relaxed));
        self.last_tick_ns.store(now, Release);
        self.ticks.fetch_add(1, Relaxed);
        if let Some((used, limit)) = heap {
            self.set_heap(used, limit);
        }
        let block = self.pending_block_ns.swap(0, Relaxed);
        for sub in self.subs.lock().iter() {
            sub.on_tick(now, drift, elapsed, idle, block);
            if heap.is_some() {
                sub.health.set_heap(self.heap_used.load(Relaxed), self.heap_limit.load(Relaxed));
            }
        }
    }

    /// Heap figures for users that subscribe from now on (`tick` passes them to current users).
    pub fn set_heap(&self, used: u64, limit: u64) {
        self.heap_used.store(used, Relaxed);
        self.heap_limit.store(limit, Relaxed);
    }

    /// The loop ran `busy_ns` without polling for I/O (reported once per loop iteration).
    pub fn note_block(&self, busy_ns: u64) {
        if busy_ns > self.pending_block_ns.load(Relaxed) {
            self.pending_block_ns.store(busy_ns, Relaxed);
        }
    }

    /// Ticks since the sampler was created.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Relaxed)
    }

    pub fn interval_ms(&self) -> f64 {
        self.interval_ns.load(Relaxed) as f64 / MS as f64
    }

    /// How late the next tick is at `now`; `None` while the timer is not running.
    pub fn overdue_ns(&self, now: u64) -> Option<u64> {
        if !self.running.load(Acquire) {
            return None;
        }
        let due = self.last_tick_ns.load(Acquire) + self.interval_ns.load(Relaxed);
        Some(now.saturating_sub(due))
    }

    /// `health`'s latest drift, or how overdue the next tick is at `now` if that is larger (the loop
    /// is blocked at this moment, or has just been and the timer has not run yet).
    pub fn lag_now_ms(&self, health: &LoopHealth, now: u64) -> f64 {
        let latest = health.sample().latest_lag_ms;
        match self.overdue_ns(now) {
            Some(overdue) => latest.max(overdue as f64 / MS as f64),
            None => latest,
        }
    }

    /// `sub`'s full window figures; a block noted since the last tick counts, though it is not in the
    /// window yet.
    pub fn stats(&self, sub: &Subscriber) -> LagStats {
        let mut s = sub.window.lock().stats();
        let pending = self.pending_block_ns.load(Relaxed) as f64 / MS as f64;
        s.max_block_ms = s.max_block_ms.max(pending);
        s
    }

    /// Raises the stall flag of every user whose threshold a loop overdue at `now` exceeds (the
    /// watchdog's check of this loop). Returns how many it flagged.
    pub fn flag_stalls(&self, now: u64) -> usize {
        let Some(overdue) = self.overdue_ns(now) else { return 0 };
        let mut n = 0;
        for sub in self.subs.lock().iter() {
            if sub.stalled_by(overdue) {
                sub.health.set_stalled(true);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(resolution_ms: u64, stall_ms: Option<u64>) -> SamplerOptions {
        SamplerOptions { resolution_ms, window_ms: 1000, ewma_ms: 100, stall_ms }
    }

    fn sub(o: SamplerOptions) -> Arc<Subscriber> {
        Subscriber::new(o, Arc::new(LoopHealth::default()))
    }

    #[test]
    fn the_timer_follows_the_finest_subscriber_and_stops_with_the_last() {
        let s = LoopSampler::new();
        assert_eq!(s.plan(), TimerPlan::Keep, "nobody asked");
        let a = sub(opts(10, None));
        s.subscribe(&a, 0, 0);
        assert_eq!(s.plan(), TimerPlan::Run(10));
        s.started(10, 0);
        assert_eq!(s.plan(), TimerPlan::Keep);
        let b = sub(opts(2, None));
        s.subscribe(&b, 0, 0);
        assert_eq!(s.plan(), TimerPlan::Run(2), "a finer user re-times it");
        s.started(2, 0);
        s.unsubscribe(&b);
        assert_eq!(s.plan(), TimerPlan::Run(10), "and its leaving coarsens it again");
        s.started(10, 0);
        s.unsubscribe(&a);
        assert_eq!(s.plan(), TimerPlan::Stop);
        s.stopped();
        assert_eq!(s.plan(), TimerPlan::Keep);
    }

    #[test]
    fn a_tick_fans_drift_out_to_every_subscriber() {
        let s = LoopSampler::new();
        let (a, b) = (sub(opts(10, None)), sub(opts(10, Some(50))));
        s.subscribe(&a, 0, 0);
        s.subscribe(&b, 0, 0);
        s.started(10, 0);
        // 30 ms after the start, with 10 ms of idle time: the timer fired 20 ms late.
        s.note_block(18 * MS);
        s.tick(30 * MS, 10 * MS, Some((5, 100)));
        for x in [&a, &b] {
            let h = x.health().sample();
            assert_eq!((h.latest_lag_ms, h.ticks, h.heap_used, h.heap_limit), (20.0, 1, 5, 100));
            assert!((h.elu - 2.0 / 3.0).abs() < 1e-9, "{}", h.elu);
            assert!(!h.stalled);
            assert_eq!(s.stats(x).max_block_ms, 18.0);
        }
        // 60 ms late: over b's 50 ms threshold only, on the tick itself.
        s.tick(100 * MS, 10 * MS, None);
        assert!(!a.health().stalled());
        assert!(b.health().stalled());
        assert_eq!(a.health().sample().heap_used, 5, "no heap reading: the figures stay");
        // The next punctual tick clears it.
        s.tick(110 * MS, 10 * MS, None);
        assert!(!b.health().stalled());
        assert_eq!(s.ticks(), 3);
    }

    #[test]
    fn overdue_and_lag_now_read_a_loop_blocked_right_now() {
        let s = LoopSampler::new();
        let a = sub(opts(10, Some(100)));
        s.subscribe(&a, 0, 0);
        assert_eq!(s.overdue_ns(1_000 * MS), None, "not running");
        s.started(10, 0);
        s.tick(12 * MS, 0, None);
        assert_eq!(a.health().sample().latest_lag_ms, 2.0);
        assert_eq!(s.overdue_ns(20 * MS), Some(0));
        assert_eq!(s.lag_now_ms(a.health(), 20 * MS), 2.0, "the last drift while nothing is overdue");
        assert_eq!(s.lag_now_ms(a.health(), 72 * MS), 50.0, "due at 22 ms, 50 ms late at 72 ms");
        assert_eq!(s.flag_stalls(72 * MS), 0);
        assert!(!a.health().stalled());
        assert_eq!(s.flag_stalls(123 * MS), 1, "101 ms overdue");
        assert!(a.health().stalled());
        s.stopped();
        assert_eq!(s.flag_stalls(10_000 * MS), 0, "a stopped timer is never overdue");
    }

    #[test]
    fn a_subscriber_that_joins_a_finer_timer_sizes_its_window_for_it() {
        let s = LoopSampler::new();
        let fine = sub(opts(1, None));
        s.subscribe(&fine, 0, 0);
        s.started(1, 0);
        let coarse = sub(SamplerOptions { resolution_ms: 100, window_ms: 1000, ewma_ms: 100, stall_ms: None });
        s.subscribe(&coarse, 0, 0);
        assert_eq!(s.plan(), TimerPlan::Keep);
        for t in 1..=1000u64 {
            s.tick(t * MS, 0, None);
        }
        // A window sized for 100 ms ticks would hold ~36 samples; sized for 1 ms it holds the second.
        assert!(s.stats(&coarse).count > 500, "{}", s.stats(&coarse).count);
    }

    #[test]
    fn options_must_be_positive() {
        assert!(opts(1, Some(1)).is_valid());
        assert!(!opts(0, None).is_valid());
        assert!(!opts(1, Some(0)).is_valid());
        assert!(!SamplerOptions { window_ms: 0, ..opts(1, None) }.is_valid());
    }

    #[test]
    fn a_failed_sampler_stops_for_good_and_reads_as_no_sample() {
        let s = LoopSampler::new();
        let a = sub(opts(10, None));
        s.subscribe(&a, 0, 0);
        assert_eq!(s.plan(), TimerPlan::Run(10));
        s.started(10, 0);
        s.tick(40 * MS, 0, None); // 30 ms late
        assert!(a.health().sample().latest_lag_ms > 0.0);
        s.fail();
        assert_eq!(a.health().sample().latest_lag_ms, 0.0);
        assert_eq!(s.plan(), TimerPlan::Stop);
        s.stopped();
        assert_eq!(s.plan(), TimerPlan::Keep, "a new user does not restart a failed sampler");
    }
}

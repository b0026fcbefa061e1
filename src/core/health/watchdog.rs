//! The stall watchdog: one thread that raises `LoopHealth::stalled` for the users of a loop that has
//! been overdue for longer than their `stall_ms` — a loop blocked right now, which cannot report it
//! itself. The loop's next tick decides the flag again (`LoopSampler::tick`).
//!
//! The thread polls at a tenth of the smallest threshold among the loops it watches (1..=50 ms) and
//! parks while there is none. It holds the loops weakly: a loop whose sampler is gone is dropped from
//! the list. Its clock must be the one the loops' ticks are stamped with.
use super::sampler::LoopSampler;
use crate::core::clock::Clock;
use parking_lot::{Condvar, Mutex};
use std::sync::{Arc, Weak};
use std::time::Duration;

pub struct Watchdog {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    loops: Vec<Weak<LoopSampler>>,
    started: bool,
    /// Set when the `Watchdog` is dropped: the thread ends.
    stop: bool,
}

/// How often to look at loops whose smallest stall threshold is `stall_ms`.
pub fn poll_period(stall_ms: u64) -> Duration {
    Duration::from_micros(stall_ms.saturating_mul(100).clamp(1_000, 50_000))
}

impl Inner {
    /// The smallest stall threshold among the live loops (dead ones are dropped from the list).
    fn finest_stall_ms(state: &mut State) -> Option<u64> {
        state.loops.retain(|w| w.strong_count() > 0);
        state.loops.iter().filter_map(Weak::upgrade).filter_map(|s| s.finest_stall_ms()).min()
    }

    fn scan(&self, loops: &[Weak<LoopSampler>]) -> usize {
        let now = self.clock.now_ns();
        loops.iter().filter_map(Weak::upgrade).map(|s| s.flag_stalls(now)).sum()
    }

    fn run(&self) {
        let mut state = self.state.lock();
        while !state.stop {
            let Some(stall_ms) = Self::finest_stall_ms(&mut state) else {
                self.wake.wait(&mut state);
                continue;
            };
            self.wake.wait_for(&mut state, poll_period(stall_ms));
            if state.stop {
                break;
            }
            // Scanned without the list's lock: a loop's own locks are taken inside, and `watch` must
            // not wait for them.
            let loops = state.loops.clone();
            drop(state);
            self.scan(&loops);
            state = self.state.lock();
        }
    }
}

impl Watchdog {
    /// A watchdog reading `clock`; its thread starts with the first `watch`.
    pub fn new(clock: Arc<dyn Clock>) -> Watchdog {
        Watchdog { inner: Arc::new(Inner { clock, state: Mutex::new(State::default()), wake: Condvar::new() }) }
    }

    /// Watches `sampler` (once, however often it is asked). Starts the thread if it is not running; if
    /// the thread cannot be spawned, the next `watch` tries again.
    pub fn watch(&self, sampler: &Arc<LoopSampler>) {
        let mut state = self.inner.state.lock();
        state.loops.retain(|w| w.strong_count() > 0);
        if !state.loops.iter().any(|w| w.as_ptr() == Arc::as_ptr(sampler)) {
            state.loops.push(Arc::downgrade(sampler));
        }
        if !state.started {
            let inner = self.inner.clone();
            state.started = std::thread::Builder::new().name("tiergate-watchdog".into()).spawn(move || inner.run()).is_ok();
        }
        drop(state);
        self.wake();
    }

    /// Stops watching `sampler`.
    pub fn forget(&self, sampler: &Arc<LoopSampler>) {
        self.inner.state.lock().loops.retain(|w| w.strong_count() > 0 && w.as_ptr() != Arc::as_ptr(sampler));
        self.wake();
    }

    /// The users of a watched loop changed: re-read the thresholds now.
    pub fn wake(&self) {
        self.inner.wake.notify_all();
    }

    /// One check of every watched loop at the clock's time, as the thread makes it; returns how many
    /// users it flagged.
    pub fn scan(&self) -> usize {
        let loops = self.inner.state.lock().loops.clone();
        self.inner.scan(&loops)
    }

    /// Loops watched now (live ones).
    pub fn watched(&self) -> usize {
        let mut state = self.inner.state.lock();
        state.loops.retain(|w| w.strong_count() > 0);
        state.loops.len()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.inner.state.lock().stop = true;
        self.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::{ManualClock, MonotonicClock};
    use crate::core::health::sampler::{SamplerOptions, Subscriber};
    use crate::core::health::LoopHealth;

    const MS: u64 = 1_000_000;

    fn running_loop(stall_ms: Option<u64>, now: u64) -> (Arc<LoopSampler>, Arc<Subscriber>) {
        let s = LoopSampler::new();
        let sub = Subscriber::new(SamplerOptions { resolution_ms: 10, stall_ms, ..Default::default() }, Arc::new(LoopHealth::default()));
        s.subscribe(&sub, now, 0);
        s.started(10, now);
        (s, sub)
    }

    #[test]
    fn it_flags_only_users_whose_threshold_the_overdue_loop_exceeds() {
        let clock = Arc::new(ManualClock::new(0));
        let w = Watchdog::new(clock.clone());
        let (a, sa) = running_loop(Some(100), 0);
        let (b, sb) = running_loop(Some(300), 0);
        let (c, sc) = running_loop(None, 0);
        for s in [&a, &b, &c, &a] {
            w.watch(s);
        }
        assert_eq!(w.watched(), 3, "watching twice is watching once");
        // Due at 10 ms: at 200 ms, 190 ms overdue.
        clock.set_ns(200 * MS);
        assert_eq!(w.scan(), 1);
        assert!(sa.health().stalled() && !sb.health().stalled() && !sc.health().stalled());
        clock.set_ns(400 * MS);
        assert_eq!(w.scan(), 2, "a stays flagged, b now too; c never asked");
        assert!(!sc.health().stalled());
        // The tick that ends a's stall still reports it, the next punctual one clears it; forgetting
        // b stops its checks.
        a.tick(400 * MS, 0, None);
        assert!(sa.health().stalled());
        a.tick(410 * MS, 0, None);
        assert!(!sa.health().stalled());
        w.forget(&b);
        sb.health().set_stalled(false);
        assert_eq!(w.scan(), 0);
        assert!(!sb.health().stalled());
        // A loop whose sampler is gone is dropped from the list.
        drop((c, sc));
        assert_eq!(w.watched(), 1);
    }

    #[test]
    fn poll_period_is_a_tenth_of_the_threshold_within_bounds() {
        assert_eq!(poll_period(1), Duration::from_millis(1));
        assert_eq!(poll_period(100), Duration::from_millis(10));
        assert_eq!(poll_period(60_000), Duration::from_millis(50));
        assert_eq!(poll_period(u64::MAX), Duration::from_millis(50));
    }

    #[test]
    fn the_thread_flags_a_loop_that_stops_ticking() {
        // Real time: a loop that started now and never ticks is 20 ms overdue within ~30 ms; waited for
        // up to 10 s (a bound, not a timing claim).
        let w = Watchdog::new(Arc::new(MonotonicClock));
        let (quiet, sq) = running_loop(Some(1000), MonotonicClock.now_ns());
        let (s, sub) = running_loop(Some(20), MonotonicClock.now_ns());
        w.watch(&quiet);
        w.watch(&s);
        let t0 = std::time::Instant::now();
        while !sub.health().stalled() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(sub.health().stalled());
        // Nothing flags the loop with a 1 s threshold as long as it keeps ticking.
        for _ in 0..20 {
            quiet.tick(MonotonicClock.now_ns(), 0, None);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!sq.health().stalled());
    }
}

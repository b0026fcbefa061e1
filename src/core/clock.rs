//! Monotonic nanosecond time, injectable so that arithmetic over time is tested exactly.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A monotonic source of nanoseconds. Values only matter relative to each other.
pub trait Clock: Send + Sync {
    fn now_ns(&self) -> u64;
}

/// The process's monotonic clock (CLOCK_MONOTONIC via `Instant`), counted from a process-wide origin so
/// every thread and every ledger agrees on "now".
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        origin().elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to: for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(start_ns: u64) -> Self {
        ManualClock(AtomicU64::new(start_ns))
    }
    pub fn advance_ns(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::SeqCst);
    }
    pub fn advance_ms(&self, ms: u64) {
        self.advance_ns(ms * 1_000_000);
    }
    pub fn set_ns(&self, ns: u64) {
        self.0.store(ns, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_never_goes_back() {
        let c = MonotonicClock;
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(5);
        assert_eq!(c.now_ns(), 5);
        c.advance_ms(2);
        assert_eq!(c.now_ns(), 2_000_005);
        c.set_ns(1);
        assert_eq!(c.now_ns(), 1);
    }
}

/// The process's monotonic clock, read cheaply: on x86_64 Linux whose kernel itself keeps time with the
/// TSC (clocksource `tsc`: invariant and synchronised across cores), one `rdtsc` scaled by a ratio
/// calibrated once against `MonotonicClock` (~7 ns instead of ~23 ns for `clock_gettime` here);
/// elsewhere `MonotonicClock`. Same time base as `MonotonicClock`, within the calibration error (a few
/// parts in 10^5 of elapsed time).
#[derive(Clone, Copy, Debug, Default)]
pub struct FastClock;

#[derive(Debug)]
struct Tsc {
    origin_tsc: u64,
    origin_ns: u64,
    /// Nanoseconds per tick as a 32.32 fixed-point number: integer math, no float conversions.
    ns_per_tick_q32: u64,
}

fn tsc() -> Option<&'static Tsc> {
    static TSC: OnceLock<Option<Tsc>> = OnceLock::new();
    TSC.get_or_init(calibrate_tsc).as_ref()
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn calibrate_tsc() -> Option<Tsc> {
    let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").ok()?;
    if source.trim() != "tsc" || std::env::var_os("TIERGATE_NO_TSC").is_some() {
        return None;
    }
    let read = || {
        // A TSC reading bracketed by two clock readings; the pair is as tight as the bracket.
        let a = MonotonicClock.now_ns();
        let t = unsafe { std::arch::x86_64::_rdtsc() };
        let b = MonotonicClock.now_ns();
        (t, a + (b - a) / 2)
    };
    let (t0, n0) = read();
    let mut last = (t0, n0);
    while last.1 - n0 < 2_000_000 {
        last = read();
    }
    let (t1, n1) = last;
    if t1 <= t0 {
        return None;
    }
    let ns_per_tick = (n1 - n0) as f64 / (t1 - t0) as f64;
    Some(Tsc { origin_tsc: t1, origin_ns: n1, ns_per_tick_q32: (ns_per_tick * 4294967296.0) as u64 })
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn calibrate_tsc() -> Option<Tsc> {
    None
}

impl FastClock {
    /// Whether the TSC path is in use (for reports).
    pub fn uses_tsc() -> bool {
        tsc().is_some()
    }
}

impl Clock for FastClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some(c) = tsc() {
            let ticks = unsafe { std::arch::x86_64::_rdtsc() }.saturating_sub(c.origin_tsc);
            return c.origin_ns + ((ticks as u128 * c.ns_per_tick_q32 as u128) >> 32) as u64;
        }
        MonotonicClock.now_ns()
    }
}

#[cfg(test)]
mod fast_clock_tests {
    use super::*;

    #[test]
    fn fast_clock_tracks_the_monotonic_clock() {
        let f = FastClock;
        let a = f.now_ns();
        let m0 = MonotonicClock.now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = f.now_ns();
        let m1 = MonotonicClock.now_ns();
        assert!(b > a);
        // Same time base and the same rate, within a generous margin for a noisy machine.
        let (fast, mono) = ((b - a) as f64, (m1 - m0) as f64);
        assert!((fast - mono).abs() < mono * 0.05 + 2e6, "fast {fast} mono {mono}");
        assert!((b as f64 - m1 as f64).abs() < 5e6);
    }
}

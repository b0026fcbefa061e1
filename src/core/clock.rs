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

//! Monotonic nanosecond time, injectable so that arithmetic over time is tested exactly.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A monotonic source of nanoseconds. Values only matter relative to each other.
pub trait Clock: Send + Sync {
    fn now_ns(&self) -> u64;

    /// How far a reading may lag the true time (0: exact). Waits reported to users are lengthened by
    /// this much, so that retrying after them succeeds.
    fn resolution_ns(&self) -> u64 {
        0
    }
}

/// The process's monotonic clock (CLOCK_MONOTONIC via `Instant`), counted from a process-wide origin so
/// every thread and every ledger agrees on "now".
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

/// The process-wide origin, as an `Instant` and (on Linux) as the raw CLOCK_MONOTONIC reading taken
/// with it, so that `CoarseClock` counts from the same origin on the same timeline.
fn origin() -> &'static (Instant, u64) {
    static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();
    ORIGIN.get_or_init(|| {
        let i = Instant::now();
        #[cfg(target_os = "linux")]
        let raw = raw_ns(libc::CLOCK_MONOTONIC);
        #[cfg(not(target_os = "linux"))]
        let raw = 0;
        (i, raw)
    })
}

#[cfg(target_os = "linux")]
#[inline(always)]
fn raw_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // Cannot fail for these two clock ids on Linux >= 2.6.32 with a valid pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC_COARSE: the kernel's monotonic time as of its last timer tick, on the same timeline
/// and origin as `MonotonicClock`. A vDSO read of a value the kernel already stored (~3–6 ns here, against
/// 20–50 ns for CLOCK_MONOTONIC, which reads the TSC and scales it through the VM's clocksource), at the
/// cost of resolution: readings lag the true time by less than one tick (`resolution_ns`, 4 ms here with
/// HZ=250). The ledger's `try_consume_now` reads it where that lag is harmless (see `core::ledger`).
#[derive(Clone, Copy, Debug)]
pub struct CoarseClock {
    resolution_ns: u64,
}

/// The coarsest tick `CoarseClock::new` accepts (HZ=100 gives 10 ms).
pub const MAX_COARSE_RESOLUTION_NS: u64 = 10_000_000;

impl CoarseClock {
    /// The coarse clock, or `None` where it is unavailable or coarser than `MAX_COARSE_RESOLUTION_NS`.
    pub fn new() -> Option<CoarseClock> {
        static RES: OnceLock<Option<u64>> = OnceLock::new();
        let res = *RES.get_or_init(|| {
            #[cfg(target_os = "linux")]
            {
                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0;
                let ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                (ok && ns > 0 && ns <= MAX_COARSE_RESOLUTION_NS).then_some(ns)
            }
            #[cfg(not(target_os = "linux"))]
            None
        });
        res.map(|resolution_ns| CoarseClock { resolution_ns })
    }
}

impl Clock for CoarseClock {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        #[cfg(target_os = "linux")]
        {
            // Just after the origin was taken the coarse time can still be behind it: 0, not a wrap.
            raw_ns(libc::CLOCK_MONOTONIC_COARSE).saturating_sub(origin().1)
        }
        #[cfg(not(target_os = "linux"))]
        unreachable!("CoarseClock::new returns None off Linux")
    }

    fn resolution_ns(&self) -> u64 {
        self.resolution_ns
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        origin().0.elapsed().as_nanos() as u64
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
    fn resolution_ns(&self) -> u64 {
        (**self).resolution_ns()
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
    fn coarse_clock_shares_the_monotonic_timeline() {
        let Some(c) = CoarseClock::new() else { return };
        let fine = MonotonicClock;
        for _ in 0..1000 {
            let (a, b, d) = (fine.now_ns(), c.now_ns(), fine.now_ns());
            // Never ahead of a fine reading taken after it; behind by about a tick (bounded loosely
            // here: a descheduled or tickless CPU can lag longer, and timing must not flake a test).
            assert!(b <= d && b + 1_000_000_000 >= a, "{a} {b} {d}");
        }
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

//! Fixed window: at most `limit` units per window `[k·W, (k+1)·W)` of the clock's timeline. The
//! cheapest algorithm (16 bytes of state, one division per check).
//!
//! Its weakness is the boundary burst: the windows are fixed, so a client can spend a whole quota at
//! the end of one window and another at the start of the next, i.e. up to `2 × limit` within an
//! interval of any length straddling a window edge (a few nanoseconds, even). Any interval of length
//! W holds at most `2 × limit`; choose the sliding window or the sliding counter where that matters.
use super::algorithm::{counted_check, Algorithm, Check, Policy};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedWindow {
    limit: u32,
    window_ns: u64,
}

/// The window the count belongs to (`t / W`) and the units counted in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedState {
    window: u64,
    count: u32,
}

impl FixedWindow {
    /// `limit` ≥ 1, `window_ns` ≥ 1 (validated by `LimitSpec`).
    pub fn new(limit: u32, window_ns: u64) -> FixedWindow {
        assert!(limit >= 1 && window_ns >= 1);
        FixedWindow { limit, window_ns }
    }

    /// The window `now` counts in and its count. A reading older than the state's window (another
    /// thread's clock got there first) counts in the state's window: time never goes back.
    #[inline]
    fn current(&self, s: &FixedState, now_ns: u64) -> (u64, u32) {
        let w = now_ns / self.window_ns;
        if w > s.window {
            (w, 0)
        } else {
            (s.window, s.count)
        }
    }
}

impl Algorithm for FixedWindow {
    type State = FixedState;

    fn fresh(&self, now_ns: u64) -> FixedState {
        FixedState { window: now_ns / self.window_ns, count: 0 }
    }

    fn check(&self, s: &FixedState, cost: u32, now_ns: u64) -> Check {
        let (w, count) = self.current(s, now_ns);
        let end = (w + 1).saturating_mul(self.window_ns).saturating_sub(now_ns);
        let limit = u64::from(self.limit);
        // Above the limit after an override lowered it: nothing left.
        let used = u64::from(count).min(limit);
        // Within this window, units come back only when it ends.
        counted_check(limit, cost, limit - used, |pending, need| if used + u64::from(pending) + need <= limit { 0 } else { end })
    }

    fn commit(&self, s: &mut FixedState, cost: u32, now_ns: u64) {
        let (w, count) = self.current(s, now_ns);
        *s = FixedState { window: w, count: count + cost };
    }

    fn refund(&self, s: &mut FixedState, units: u32, at_ns: u64, now_ns: u64) {
        let (w, count) = self.current(s, now_ns);
        // Units counted in a window that has ended are gone already.
        if at_ns / self.window_ns == w {
            *s = FixedState { window: w, count: count.saturating_sub(units) };
        }
    }

    fn with_limit(&self, limit: u32) -> FixedWindow {
        FixedWindow::new(limit, self.window_ns)
    }

    fn is_idle(&self, s: &FixedState, now_ns: u64) -> bool {
        s.count == 0 || now_ns / self.window_ns > s.window
    }

    fn policy(&self) -> Policy {
        Policy { quota: u64::from(self.limit), window_ns: self.window_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limit::algorithm::NEVER;

    const MS: u64 = 1_000_000;

    fn take(a: &FixedWindow, s: &mut FixedState, cost: u32, t: u64) -> Check {
        let c = a.check(s, cost, t);
        if c.allowed {
            a.commit(s, cost, t);
        }
        c
    }

    #[test]
    fn counts_per_window_and_resets_at_its_end() {
        let a = FixedWindow::new(3, 1000 * MS);
        let mut s = a.fresh(0);
        assert_eq!(take(&a, &mut s, 1, 100 * MS), Check { allowed: true, remaining: 2, reset_ns: 900 * MS, retry_after_ns: 0, delay_ns: 0 });
        assert!(take(&a, &mut s, 2, 200 * MS).allowed);
        let refused = take(&a, &mut s, 1, 250 * MS);
        assert_eq!(refused, Check { allowed: false, remaining: 0, reset_ns: 750 * MS, retry_after_ns: 750 * MS, delay_ns: 0 });
        assert!(!take(&a, &mut s, 1, 1000 * MS - 1).allowed);
        let next = take(&a, &mut s, 3, 1000 * MS);
        assert_eq!((next.allowed, next.remaining, next.reset_ns), (true, 0, 1000 * MS));
        assert_eq!(take(&a, &mut s, 4, 1500 * MS).retry_after_ns, NEVER, "over the limit at once: never");
    }

    #[test]
    fn the_boundary_burst_is_up_to_twice_the_limit() {
        // The documented weakness: a full quota just before an edge and another just after it.
        let a = FixedWindow::new(10, 1000 * MS);
        let mut s = a.fresh(0);
        let mut admitted = Vec::new();
        for t in [999 * MS, 999 * MS + 1, 1000 * MS, 1000 * MS + 1] {
            for _ in 0..10 {
                if take(&a, &mut s, 1, t).allowed {
                    admitted.push(t);
                }
            }
        }
        assert_eq!(admitted.len(), 20, "2 × limit within 2 ms + 1 ns");
        // ... and never more than 2 × limit in any interval of length W.
        let mut t = 0;
        let mut all = Vec::new();
        let mut s = a.fresh(0);
        while t < 10_000 * MS {
            if take(&a, &mut s, 1, t).allowed {
                all.push(t);
            }
            t += 7 * MS;
        }
        for (i, &end) in all.iter().enumerate() {
            let n = all[..=i].iter().filter(|&&x| x + 1000 * MS > end).count();
            assert!(n <= 20);
        }
    }

    #[test]
    fn a_denied_request_is_not_counted_and_a_late_clock_counts_in_the_current_window() {
        let a = FixedWindow::new(2, 100);
        let mut s = a.fresh(0);
        assert!(take(&a, &mut s, 2, 10).allowed);
        assert!(!take(&a, &mut s, 1, 20).allowed);
        assert_eq!(s.count, 2);
        assert!(take(&a, &mut s, 1, 150).allowed);
        // A reading from the previous window: counts in the state's (later) window.
        assert!(take(&a, &mut s, 1, 90).allowed);
        assert!(!take(&a, &mut s, 1, 95).allowed);
        assert!(!a.is_idle(&s, 199));
        assert!(a.is_idle(&s, 200));
    }
}

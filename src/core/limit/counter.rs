//! Sliding window counter: two counts per key (this fixed window's and the previous one's), the
//! previous weighted by how much of it the sliding window still covers. 16 bytes per key, like the
//! fixed window, without most of its boundary burst.
//!
//! At offset `a` into window k (length W), with `P` units counted in window k−1 and `C` in window k,
//! the estimate is `P·(W−a)/W + C`, and a cost `c` is admitted iff `estimate + c <= limit`. The
//! arithmetic is exact (integers scaled by W, in u128).
//!
//! Error bound. The estimate supposes the previous window's units were spread evenly; they may have
//! come at its very end. Then, in the sliding interval `(t−W, t]` with `t` at offset `a` into its
//! window, the units admitted number at most
//!
//! ```text
//! limit + ⌊P·a/W⌋   (< 2·limit, since P <= limit)
//! ```
//!
//! Proof: let the last admission up to t be at offset a' <= a; it was admitted with
//! `P·(W−a')/W + C <= limit`, so `C <= limit − P + P·a'/W`, and the interval holds at most `P` units of
//! window k−1 plus `C`. The excess over `limit` is thus bounded by how much of the previous window's
//! count the estimate has already discounted; it is zero at the start of a window and when the
//! previous window's units were evenly spread. (The fixed window allows `2·limit` within nanoseconds
//! of an edge; here the second quota is released gradually over the window.)
use super::algorithm::{counted_check, Algorithm, Check, Policy};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingCounter {
    limit: u32,
    window_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterState {
    window: u64,
    cur: u32,
    prev: u32,
}

/// The counts as seen at a moment: window index, offset into it, previous and current counts, and
/// how far `now` is behind that moment (a reading older than the state's window; else 0).
struct At {
    window: u64,
    offset: u64,
    prev: u64,
    cur: u64,
    behind: u64,
}

impl SlidingCounter {
    pub fn new(limit: u32, window_ns: u64) -> SlidingCounter {
        assert!(limit >= 1 && window_ns >= 1);
        SlidingCounter { limit, window_ns }
    }

    /// The state rolled forward to `now` (a reading older than the state's window is taken as the start
    /// of that window: the previous count weighs fully, the conservative side).
    #[inline]
    fn at(&self, s: &CounterState, now_ns: u64) -> At {
        let w = now_ns / self.window_ns;
        let offset = now_ns % self.window_ns;
        let (cur, prev) = (u64::from(s.cur), u64::from(s.prev));
        if w == s.window {
            At { window: w, offset, prev, cur, behind: 0 }
        } else if w == s.window + 1 {
            At { window: w, offset, prev: cur, cur: 0, behind: 0 }
        } else if w > s.window {
            At { window: w, offset, prev: 0, cur: 0, behind: 0 }
        } else {
            At { window: s.window, offset: 0, prev, cur, behind: s.window * self.window_ns - now_ns }
        }
    }

    /// The estimate scaled by W: `P·(W−a) + C·W`.
    #[inline]
    fn scaled(&self, at: &At) -> u128 {
        let w = u128::from(self.window_ns);
        u128::from(at.prev) * (w - u128::from(at.offset)) + u128::from(at.cur) * w
    }

    /// Nanoseconds from `now` until `need` more units fit, with `pending` units counted at the current
    /// moment (from the counts' moment, plus how far `now` is behind it).
    fn wait(&self, at: &At, pending: u32, need: u64) -> u64 {
        self.wait_from_counts(at, pending, need).saturating_add(at.behind)
    }

    fn wait_from_counts(&self, at: &At, pending: u32, need: u64) -> u64 {
        let w = u128::from(self.window_ns);
        let cur = u128::from(at.cur) + u128::from(pending);
        let prev = u128::from(at.prev);
        let room = (u128::from(self.limit) - u128::from(need)) * w; // need <= limit
        let left = w - u128::from(at.offset); // ns to the end of this window
                                              // In this window the estimate falls by P per ns: P·(left − d) + cur·W <= room.
        if cur * w <= room {
            let over = (prev * left + cur * w).saturating_sub(room);
            let d = if over == 0 { 0 } else { over.div_ceil(prev) };
            if d < left {
                return d as u64;
            }
        }
        // In the next window the current count becomes the previous: cur·(W − d') <= room.
        let over = (cur * w).saturating_sub(room);
        let d2 = if over == 0 { 0 } else { over.div_ceil(cur) };
        u64::try_from(left + d2).unwrap_or(u64::MAX)
    }
}

impl Algorithm for SlidingCounter {
    type State = CounterState;

    fn fresh(&self, now_ns: u64) -> CounterState {
        CounterState { window: now_ns / self.window_ns, cur: 0, prev: 0 }
    }

    fn check(&self, s: &CounterState, cost: u32, now_ns: u64) -> Check {
        let at = self.at(s, now_ns);
        let w = u128::from(self.window_ns);
        let cap = u128::from(self.limit) * w;
        let avail = (cap.saturating_sub(self.scaled(&at)) / w) as u64;
        counted_check(u64::from(self.limit), cost, avail, |pending, need| self.wait(&at, pending, need))
    }

    fn commit(&self, s: &mut CounterState, cost: u32, now_ns: u64) {
        let at = self.at(s, now_ns);
        // cur <= estimate <= limit after an admission, so the counts fit a u32.
        *s = CounterState { window: at.window, cur: (at.cur + u64::from(cost)) as u32, prev: at.prev as u32 };
    }

    fn refund(&self, s: &mut CounterState, units: u32, at_ns: u64, now_ns: u64) {
        let at = self.at(s, now_ns);
        let (mut cur, mut prev) = (at.cur as u32, at.prev as u32);
        let counted_in = at_ns / self.window_ns;
        // The units sit in the window they were counted in: this one or the one before it.
        if counted_in == at.window {
            cur = cur.saturating_sub(units);
        } else if counted_in + 1 == at.window {
            prev = prev.saturating_sub(units);
        }
        *s = CounterState { window: at.window, cur, prev };
    }

    fn with_limit(&self, limit: u32) -> SlidingCounter {
        SlidingCounter::new(limit, self.window_ns)
    }

    fn is_idle(&self, s: &CounterState, now_ns: u64) -> bool {
        let at = self.at(s, now_ns);
        at.prev == 0 && at.cur == 0
    }

    fn policy(&self) -> Policy {
        Policy { quota: u64::from(self.limit), window_ns: self.window_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::defense::rng::SplitMix64;

    fn take(a: &SlidingCounter, s: &mut CounterState, cost: u32, t: u64) -> Check {
        let c = a.check(s, cost, t);
        if c.allowed {
            a.commit(s, cost, t);
        }
        c
    }

    #[test]
    fn the_previous_window_weighs_by_its_overlap() {
        let a = SlidingCounter::new(10, 1000);
        let mut s = a.fresh(0);
        for _ in 0..10 {
            assert!(take(&a, &mut s, 1, 900).allowed);
        }
        assert!(!take(&a, &mut s, 1, 999).allowed);
        // At 1250 the previous 10 weigh 7.5: two more fit (9.5), a third does not.
        assert!(take(&a, &mut s, 2, 1250).allowed);
        let c = take(&a, &mut s, 1, 1250);
        assert!(!c.allowed);
        // 7.5 + 2 + 1 <= 10 once the previous weight is <= 7: at offset 300.
        assert_eq!(c.retry_after_ns, 50);
        assert!(!take(&a, &mut s, 1, 1299).allowed);
        assert!(take(&a, &mut s, 1, 1300).allowed);
        assert!(!a.is_idle(&s, 2999));
        assert!(a.is_idle(&s, 3000));
    }

    #[test]
    fn retry_and_reset_are_exact() {
        let mut rng = SplitMix64::new(99);
        for _ in 0..300 {
            let limit = 1 + rng.below(6) as u32;
            let w = 1 + rng.below(200);
            let a = SlidingCounter::new(limit, w);
            let mut s = a.fresh(0);
            let mut t = 0;
            for _ in 0..40 {
                t += rng.below(w);
                let cost = 1 + rng.below(u64::from(limit)) as u32;
                let c = take(&a, &mut s, cost, t);
                let fits = |x: u64, n: u32| a.check(&s, n, x).allowed;
                if !c.allowed {
                    let at = t + c.retry_after_ns;
                    assert!(fits(at, cost) && !fits(at - 1, cost), "limit {limit} w {w} t {t} cost {cost}");
                }
                if c.reset_ns > 0 {
                    let before = a.check(&s, 0, t).remaining;
                    assert!(a.check(&s, 0, t + c.reset_ns).remaining > before);
                    assert_eq!(a.check(&s, 0, t + c.reset_ns - 1).remaining, before);
                }
            }
        }
    }

    /// Random arrivals, checked against the documented bound in every window ending at an admission.
    #[test]
    fn never_admits_more_than_the_bound() {
        let mut worst = 0.0f64;
        for seed in 1..=30u64 {
            let mut rng = SplitMix64::new(seed);
            let limit = 1 + rng.below(20) as u32;
            let w = 10 + rng.below(1000);
            let a = SlidingCounter::new(limit, w);
            let mut s = a.fresh(0);
            let mut log: Vec<u64> = Vec::new();
            let mut t = 0u64;
            for _ in 0..4000 {
                // Bursts late in a window are the adversarial case: favour them.
                t += match rng.below(5) {
                    0 => 0,
                    1 => rng.below(w / 8 + 1),
                    2 => w - 1 - (t % w).min(w - 1),
                    _ => rng.below(w),
                };
                if take(&a, &mut s, 1, t).allowed {
                    log.push(t);
                }
            }
            // The log is in time order: count by binary search.
            let upto = |x: u64| log.partition_point(|&y| y <= x);
            for &end in &log {
                let n = (upto(end) - log.partition_point(|&y| y + w <= end)) as u64;
                let start = end / w * w;
                let p = if start == 0 { 0 } else { (upto(start - 1) - log.partition_point(|&y| y < start - w)) as u64 };
                let bound = u64::from(limit) + p * (end % w) / w;
                assert!(n <= bound, "seed {seed}: {n} > {bound}");
                assert!(n < 2 * u64::from(limit));
                worst = worst.max(n as f64 / f64::from(limit));
            }
        }
        assert!(worst > 1.0, "the adversarial arrivals should show some excess ({worst})");
    }
}

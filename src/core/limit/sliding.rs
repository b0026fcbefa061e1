//! Exact sliding window: never more than `limit` units in any interval of length W.
//!
//! Each key keeps the times of the units it was admitted, oldest first, in a ring that never holds
//! more than `limit` of them: a unit counts while `t_unit + W > now`, and admitting `c` more needs
//! `counted + c <= limit`. Since a ring full of `limit` live units refuses everything, it never has to
//! grow further: this is the guarantee of the Redis sorted-set design (one member per request, trimmed
//! by score) without its memory growth, and a refused request takes no slot. Memory per key is
//! `8 × limit` bytes at most (the ring grows by doubling, capped at `limit`), which is why `limit` is
//! capped (`MAX_EXACT_LIMIT`); above that, the sliding counter approximates in 16 bytes.
//!
//! Reset (when a unit comes back) is when the oldest counted unit leaves the window.
use super::algorithm::{counted_check, Algorithm, Check, Policy};
use std::collections::VecDeque;

/// Largest `limit` of an exact window (8 bytes per unit per key).
pub const MAX_EXACT_LIMIT: u32 = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    limit: u32,
    window_ns: u64,
}

/// The admitted units' times, oldest first (a unit of cost `c` takes `c` slots of one time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlidingState {
    ring: VecDeque<u64>,
}

impl SlidingWindow {
    /// `1 <= limit <= MAX_EXACT_LIMIT`, `window_ns >= 1` (validated by `LimitSpec`).
    pub fn new(limit: u32, window_ns: u64) -> SlidingWindow {
        assert!((1..=MAX_EXACT_LIMIT).contains(&limit) && window_ns >= 1);
        SlidingWindow { limit, window_ns }
    }

    /// Index of the first unit still counted at `now`. The expired units are at the front and every
    /// admission drains them, so there are usually none or a few: a galloping search from the front
    /// (1, 2, 4, .. then binary within the last step) touches the ring's head only, where a binary
    /// search over the whole ring would take a cache miss per step on a long one.
    #[inline]
    fn first_live(&self, s: &SlidingState, now_ns: u64) -> usize {
        let w = self.window_ns;
        let expired = |i: usize| s.ring[i].saturating_add(w) <= now_ns;
        let n = s.ring.len();
        if n == 0 || !expired(0) {
            return 0;
        }
        // expired(lo) holds; find hi with !expired(hi) (or n), doubling the step.
        let (mut lo, mut step) = (0usize, 1usize);
        let mut hi = loop {
            let at = lo + step;
            if at >= n {
                break n;
            }
            if !expired(at) {
                break at;
            }
            lo = at;
            step *= 2;
        };
        // Binary search in (lo, hi]: the first index that is not expired.
        lo += 1;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if expired(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl Algorithm for SlidingWindow {
    type State = SlidingState;

    fn fresh(&self, _now_ns: u64) -> SlidingState {
        SlidingState::default()
    }

    fn check(&self, s: &SlidingState, cost: u32, now_ns: u64) -> Check {
        let first = self.first_live(s, now_ns);
        let counted = (s.ring.len() - first) as u64;
        let limit = u64::from(self.limit);
        let w = self.window_ns;
        // Above the limit after an override lowered it: nothing left.
        counted_check(limit, cost, limit.saturating_sub(counted), |pending, need| {
            // The k oldest of (counted units, then `pending` at now) must leave first.
            let over = counted + u64::from(pending) + need;
            if over <= limit {
                return 0;
            }
            let k = (over - limit) as usize;
            if k >= 1 && k <= counted as usize {
                s.ring[first + k - 1].saturating_add(w).saturating_sub(now_ns)
            } else {
                w
            }
        })
    }

    fn commit(&self, s: &mut SlidingState, cost: u32, now_ns: u64) {
        let first = self.first_live(s, now_ns);
        if first > 0 {
            s.ring.drain(..first);
        }
        let len = s.ring.len();
        let cost = cost as usize;
        if len + cost > s.ring.capacity() {
            let want = (s.ring.capacity() * 2).max(len + cost).max(4).min(self.limit as usize).max(len + cost);
            s.ring.reserve_exact(want - len);
        }
        // Keep the ring ordered even if this thread's reading is behind the last one stored.
        let t = s.ring.back().map_or(now_ns, |&b| b.max(now_ns));
        if cost == 1 {
            s.ring.push_back(t); // the usual cost: no iterator
        } else {
            s.ring.extend(std::iter::repeat_n(t, cost));
        }
    }

    fn refund(&self, s: &mut SlidingState, units: u32, at_ns: u64, now_ns: u64) {
        // The units stamped at the admission (the first at or after `at_ns`) leave the ring; once its
        // window has passed they are not counted any more, and later units are not given back instead.
        if at_ns.saturating_add(self.window_ns) <= now_ns {
            return;
        }
        let first = self.first_live(s, now_ns);
        let from = s.ring.partition_point(|&t| t < at_ns);
        let to = (from + units as usize).min(s.ring.len());
        if to > from.max(first) {
            s.ring.drain(from.max(first)..to);
        }
    }

    fn with_limit(&self, limit: u32) -> SlidingWindow {
        SlidingWindow::new(limit.min(MAX_EXACT_LIMIT), self.window_ns)
    }

    fn is_idle(&self, s: &SlidingState, now_ns: u64) -> bool {
        s.ring.back().is_none_or(|&t| t.saturating_add(self.window_ns) <= now_ns)
    }

    fn policy(&self) -> Policy {
        Policy { quota: u64::from(self.limit), window_ns: self.window_ns }
    }

    fn heap_bytes(&self, s: &SlidingState) -> usize {
        s.ring.capacity() * std::mem::size_of::<u64>()
    }

    fn max_heap_bytes(&self) -> usize {
        self.limit as usize * std::mem::size_of::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::defense::rng::SplitMix64;

    const MS: u64 = 1_000_000;

    fn take(a: &SlidingWindow, s: &mut SlidingState, cost: u32, t: u64) -> Check {
        let c = a.check(s, cost, t);
        if c.allowed {
            a.commit(s, cost, t);
        }
        c
    }

    #[test]
    fn reset_is_when_the_oldest_counted_unit_leaves() {
        let a = SlidingWindow::new(3, 1000 * MS);
        let mut s = a.fresh(0);
        assert_eq!(take(&a, &mut s, 1, 100 * MS).reset_ns, 1000 * MS);
        assert!(take(&a, &mut s, 1, 300 * MS).allowed);
        let c = take(&a, &mut s, 1, 600 * MS);
        assert_eq!((c.allowed, c.remaining, c.reset_ns), (true, 0, 500 * MS));
        let r = take(&a, &mut s, 2, 700 * MS);
        // Two must leave: the second oldest (300 ms) leaves at 1300 ms.
        assert_eq!((r.allowed, r.remaining, r.reset_ns, r.retry_after_ns), (false, 0, 400 * MS, 600 * MS));
        assert!(!take(&a, &mut s, 1, 1100 * MS - 1).allowed);
        assert!(take(&a, &mut s, 1, 1100 * MS).allowed, "the 100 ms unit left at 1100 ms");
        assert_eq!(take(&a, &mut s, 4, 1100 * MS).retry_after_ns, super::super::algorithm::NEVER);
        assert!(s.ring.len() <= 3);
    }

    #[test]
    fn a_pending_unit_counts_in_the_reset_of_an_admitted_request() {
        let a = SlidingWindow::new(1, 50);
        let mut s = a.fresh(0);
        let c = take(&a, &mut s, 1, 10);
        assert_eq!((c.remaining, c.reset_ns), (0, 50));
    }

    /// Random arrivals (bursts, gaps, costs 1..=3) against the log of what was admitted: in every window
    /// ending at an admission at most `limit` units, and every refusal was a full window (exact, not
    /// merely safe), with the promised retry time.
    #[test]
    fn random_arrivals_never_exceed_the_limit_in_any_window_and_refuse_only_when_full() {
        for seed in 1..=20u64 {
            let mut rng = SplitMix64::new(seed);
            let limit = 1 + rng.below(8) as u32;
            let w = 1 + rng.below(1000);
            let a = SlidingWindow::new(limit, w);
            let mut s = a.fresh(0);
            let mut log: Vec<(u64, u32)> = Vec::new();
            let mut t = 0u64;
            for _ in 0..3000 {
                t += match rng.below(4) {
                    0 => 0,
                    1 => rng.below(w / 4 + 1),
                    2 => rng.below(w + 1),
                    _ => rng.below(3 * w),
                };
                let cost = 1 + rng.below(3) as u32;
                // The log is in time order: what is counted at x is its tail from the first live unit.
                let counted = |log: &[(u64, u32)], x: u64| -> u64 { log[log.partition_point(|e| e.0 + w <= x)..].iter().map(|e| u64::from(e.1)).sum() };
                let used = counted(&log, t);
                let c = take(&a, &mut s, cost, t);
                assert_eq!(c.allowed, used + u64::from(cost) <= u64::from(limit), "seed {seed} t {t}");
                if c.allowed {
                    log.push((t, cost));
                    assert_eq!(c.remaining, u64::from(limit) - used - u64::from(cost));
                } else if cost <= limit {
                    // At t + retry the request fits; one ns earlier it does not.
                    let at = t + c.retry_after_ns;
                    let fits = |x: u64| counted(&log, x) + u64::from(cost) <= u64::from(limit);
                    assert!(fits(at) && !fits(at - 1), "seed {seed} t {t}");
                }
                assert!(s.ring.len() <= limit as usize && s.ring.capacity() <= (limit as usize).max(4));
            }
            for (i, &(end, _)) in log.iter().enumerate() {
                let first = log.partition_point(|e| e.0 + w <= end);
                let n: u64 = log[first..=i].iter().map(|e| u64::from(e.1)).sum();
                assert!(n <= u64::from(limit), "seed {seed}: {n} in the window ending {end}");
            }
        }
    }

    /// The galloping search finds what a plain partition point finds, for every split of the ring.
    #[test]
    fn first_live_matches_a_binary_search_for_every_split() {
        let a = SlidingWindow::new(64, 100);
        for len in 0..=64u64 {
            let s = SlidingState { ring: (0..len).map(|i| i * 3).collect() };
            for now in 0..(len * 3 + 200) {
                let want = s.ring.partition_point(|&t| t + 100 <= now);
                assert_eq!(a.first_live(&s, now), want, "len {len} now {now}");
            }
        }
    }

    #[test]
    fn idle_once_the_newest_unit_has_left() {
        let a = SlidingWindow::new(5, 100);
        let mut s = a.fresh(0);
        assert!(a.is_idle(&s, 0));
        take(&a, &mut s, 1, 10);
        take(&a, &mut s, 1, 40);
        assert!(!a.is_idle(&s, 139));
        assert!(a.is_idle(&s, 140));
        assert_eq!(a.max_heap_bytes(), 40);
    }
}

//! GCRA (the generic cell rate algorithm): a constant rate of `limit` units per window with a burst
//! tolerance, from one number per key, the theoretical arrival time (TAT) of the next unit.
//!
//! Each unit moves the TAT on by the emission interval `T = W / limit`; a request of cost `c` at `t`
//! would move it to `max(TAT, t) + c·T`, and is early by `max(TAT, t) + c·T − t − burst·T`.
//! - As a meter (`max_delay_ns == 0`) an early request is refused: at most `burst` units at once,
//!   then one per `T`. In any interval of length `d`, at most `burst + d/T` units are admitted.
//! - As a shaper an early request is admitted with a delay (until its slot) as long as the delay is at
//!   most `max_delay_ns`, else refused. The shaper reserves the slot it hands out (the TAT moves when
//!   the request is admitted, not when it is served), so requests served at `t + delay` follow the
//!   meter's spacing.
//!
//! Exact arithmetic: times are kept scaled by `limit` (u128), so `T` is the whole number
//! `window_ns` and no rounding accumulates however long a key lives; waits are rounded up to the
//! next nanosecond.
use super::algorithm::{to_ns, Algorithm, Check, Policy, NEVER};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gcra {
    limit: u32,
    window_ns: u64,
    burst: u32,
    max_delay_ns: u64,
}

/// The theoretical arrival time, in nanoseconds × `limit` (0: a key with no backlog).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcraState {
    tat: u128,
}

impl Gcra {
    /// A meter when `max_delay_ns` is 0, a shaper otherwise. `limit`, `burst`, `window_ns` ≥ 1.
    pub fn new(limit: u32, window_ns: u64, burst: u32, max_delay_ns: u64) -> Gcra {
        assert!(limit >= 1 && window_ns >= 1 && burst >= 1);
        Gcra { limit, window_ns, burst, max_delay_ns }
    }

    #[inline]
    fn scale(&self) -> u128 {
        u128::from(self.limit)
    }

    /// The burst tolerance, scaled: `burst · T`.
    #[inline]
    fn tolerance(&self) -> u128 {
        u128::from(self.burst) * u128::from(self.window_ns)
    }
}

impl Algorithm for Gcra {
    type State = GcraState;

    fn fresh(&self, _now_ns: u64) -> GcraState {
        GcraState::default()
    }

    fn check(&self, s: &GcraState, cost: u32, now_ns: u64) -> Check {
        let (l, t) = (self.scale(), u128::from(self.window_ns));
        let tol = self.tolerance();
        let max_delay = u128::from(self.max_delay_ns) * l;
        let backlog = s.tat.saturating_sub(u128::from(now_ns) * l);
        let step = u128::from(cost) * t;
        let need = backlog + step;
        let allowed = need <= tol + max_delay;
        let after = if allowed { need } else { backlog };
        let remaining = tol.saturating_sub(after) / t;
        // One more unit once the backlog has fallen to `tol − (remaining + 1)·T`.
        let reset_ns = if remaining >= u128::from(self.burst) { 0 } else { to_ns((after - (tol - (remaining + 1) * t)).div_ceil(l)) };
        let (retry_after_ns, delay_ns) = if allowed {
            (0, to_ns(need.saturating_sub(tol).div_ceil(l)))
        } else if step > tol + max_delay {
            (NEVER, 0)
        } else {
            (to_ns((need - tol - max_delay).div_ceil(l)), 0)
        };
        Check { allowed, remaining: remaining as u64, reset_ns, retry_after_ns, delay_ns }
    }

    fn commit(&self, s: &mut GcraState, cost: u32, now_ns: u64) {
        let now = u128::from(now_ns) * self.scale();
        s.tat = s.tat.max(now) + u128::from(cost) * u128::from(self.window_ns);
    }

    fn refund(&self, s: &mut GcraState, units: u32, _at_ns: u64, now_ns: u64) {
        // The theoretical arrival time moves back by the units' emission intervals, not before now.
        let now = u128::from(now_ns) * self.scale();
        s.tat = s.tat.saturating_sub(u128::from(units) * u128::from(self.window_ns)).max(now.min(s.tat));
    }

    fn with_limit(&self, limit: u32) -> Gcra {
        let burst = if self.burst == self.limit { limit } else { self.burst };
        Gcra::new(limit, self.window_ns, burst, self.max_delay_ns)
    }

    fn is_idle(&self, s: &GcraState, now_ns: u64) -> bool {
        s.tat <= u128::from(now_ns) * self.scale()
    }

    fn policy(&self) -> Policy {
        Policy { quota: u64::from(self.limit), window_ns: self.window_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::defense::rng::SplitMix64;

    const MS: u64 = 1_000_000;

    fn take(a: &Gcra, s: &mut GcraState, cost: u32, t: u64) -> Check {
        let c = a.check(s, cost, t);
        if c.allowed {
            a.commit(s, cost, t);
        }
        c
    }

    #[test]
    fn a_meter_spaces_requests_by_the_emission_interval() {
        // 10 per second: T = 100 ms; burst 1.
        let a = Gcra::new(10, 1000 * MS, 1, 0);
        let mut s = a.fresh(0);
        assert_eq!(take(&a, &mut s, 1, 0), Check { allowed: true, remaining: 0, reset_ns: 100 * MS, retry_after_ns: 0, delay_ns: 0 });
        let early = take(&a, &mut s, 1, 50 * MS);
        assert_eq!((early.allowed, early.retry_after_ns, early.reset_ns), (false, 50 * MS, 50 * MS));
        assert!(!take(&a, &mut s, 1, 100 * MS - 1).allowed);
        assert!(take(&a, &mut s, 1, 100 * MS).allowed);
        assert_eq!(take(&a, &mut s, 2, 500 * MS).retry_after_ns, NEVER, "cost over the burst");
        // Burst 3: three at once, then one per T.
        let b = Gcra::new(10, 1000 * MS, 3, 0);
        let mut s = b.fresh(0);
        let rem: Vec<u64> = (0..3).map(|_| take(&b, &mut s, 1, 0).remaining).collect();
        assert_eq!(rem, vec![2, 1, 0]);
        let c = take(&b, &mut s, 1, 0);
        assert_eq!((c.allowed, c.retry_after_ns), (false, 100 * MS));
        assert_eq!(b.check(&s, 0, 250 * MS).remaining, 2);
        assert!(b.is_idle(&s, 300 * MS) && !b.is_idle(&s, 300 * MS - 1));
    }

    #[test]
    fn a_shaper_delays_until_the_slot_and_reserves_it() {
        let a = Gcra::new(10, 1000 * MS, 1, 250 * MS);
        let mut s = a.fresh(0);
        let delays: Vec<(bool, u64)> = (0..5).map(|_| take(&a, &mut s, 1, 0)).map(|c| (c.allowed, c.delay_ns)).collect();
        assert_eq!(delays, vec![(true, 0), (true, 100 * MS), (true, 200 * MS), (false, 0), (false, 0)]);
        // Slots up to 300 ms are handed out; the next one (300 ms) is 300 ms away, 50 ms over the bound.
        assert_eq!(a.check(&s, 1, 0).retry_after_ns, 50 * MS);
        let c = take(&a, &mut s, 1, 50 * MS);
        assert_eq!((c.allowed, c.delay_ns), (true, 250 * MS));
        assert_eq!(c.remaining, 0);
    }

    /// Random arrivals: every refusal exact (the retry time is the first moment it fits), and the
    /// times requests are served at (arrival + delay) conform to the meter's bound: units j..=k served
    /// over `d` number at most `burst + d/T`.
    #[test]
    fn random_arrivals_conform_and_retries_are_exact() {
        for seed in 1..=20u64 {
            let mut rng = SplitMix64::new(seed);
            let limit = 1 + rng.below(10) as u32;
            let w = u64::from(limit) * (1 + rng.below(100)); // T a whole number of ns
            let burst = 1 + rng.below(4) as u32;
            let max_delay = if seed % 2 == 0 { 0 } else { rng.below(3 * w / u64::from(limit)) };
            let a = Gcra::new(limit, w, burst, max_delay);
            let t_ns = w / u64::from(limit);
            let mut s = a.fresh(0);
            let mut served = Vec::new();
            let mut t = 0;
            for _ in 0..2000 {
                t += rng.below(2 * t_ns);
                let c = take(&a, &mut s, 1, t);
                if c.allowed {
                    assert!(c.delay_ns <= max_delay);
                    served.push(t + c.delay_ns);
                } else {
                    let at = t + c.retry_after_ns;
                    assert!(a.check(&s, 1, at).allowed && !a.check(&s, 1, at - 1).allowed, "seed {seed}");
                }
            }
            let mut sorted = served.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, served, "served in arrival order");
            for i in 0..served.len() {
                for j in i + 1..served.len().min(i + 3 * burst as usize + 3) {
                    let n = (j - i + 1) as u64;
                    assert!(n <= u64::from(burst) + (served[j] - served[i]) / t_ns, "seed {seed}: {n} units in {}", served[j] - served[i]);
                }
            }
        }
    }

    #[test]
    fn an_emission_interval_that_is_not_whole_nanoseconds_stays_exact() {
        // 3 per 10 ns: T = 10/3 ns. After 3 units at 0 (burst 3), the 4th fits at 10/3 → 4 ns.
        let a = Gcra::new(3, 10, 3, 0);
        let mut s = a.fresh(0);
        for _ in 0..3 {
            assert!(take(&a, &mut s, 1, 0).allowed);
        }
        assert_eq!(a.check(&s, 1, 0).retry_after_ns, 4);
        // A million units, one per slot: the TAT is exactly a million intervals on.
        let mut s = a.fresh(0);
        for k in 0..1_000_000u64 {
            a.commit(&mut s, 1, k * 10 / 3);
        }
        assert_eq!(s.tat, 1_000_000 * 10, "no rounding accumulates");
    }
}

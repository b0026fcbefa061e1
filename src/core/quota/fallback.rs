//! The safe share: what a fail-open key may spend on its own while the store is down and its leases
//! are spent. The limit ÷ `H`, where `H` is the largest holder count known (for the key or its
//! limit, at least `min_holders`), refilled as the limit's algorithm says:
//! * token bucket: a local bucket of `burst / H`, refilled at `rate / H` (full when first used);
//! * window: `limit / H` per local window of `window_ms`.
//!
//! **Bound.** While down, `P` processes admit by fallback at most `Σ_p share_p` in all for a bucket
//! (`burst/H_p` up front plus `rate/H_p` per second each), and per store window of a window limit at most
//! `2 × limit / H_p` each: local windows are not aligned with the store's, so one store window can
//! meet the end of one local window and the start of the next. With `H ≥ P` known (set `min_holders`
//! to the deployment's process count to know it from the start) that is `burst + rate·t`, and
//! `2 × limit` per window.
//!
//! A share persists across outages, so a flapping store does not hand out a fresh burst each time;
//! a key whose share is not at rest (refilled) is not evicted, for the same reason.
use super::config::Algorithm;
use crate::core::bucket::Bucket;

const NS_PER_MS: f64 = 1e6;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Share {
    Bucket(Bucket),
    Window { index: u64, used: f64 },
}

impl Share {
    pub fn new(alg: &Algorithm, holders: u32, now_ns: u64) -> Share {
        match *alg {
            Algorithm::TokenBucket { burst, .. } => Share::Bucket(Bucket::full(burst / f64::from(holders), now_ns)),
            Algorithm::Window { window_ms, .. } => Share::Window { index: window_index(window_ms, now_ns), used: 0.0 },
        }
    }

    /// Takes `cost` from the share of `holders`, or says how long until it holds that much
    /// (`u64::MAX`: never).
    pub fn take(&mut self, alg: &Algorithm, holders: u32, cost: u64, now_ns: u64) -> Result<(), u64> {
        let h = f64::from(holders);
        let cost = cost as f64;
        match (self, *alg) {
            (Share::Bucket(b), Algorithm::TokenBucket { rate_per_sec, burst }) => {
                let (cap, rate) = (burst / h, rate_per_sec / h);
                b.refill(cap, rate, now_ns);
                // A larger `H` learnt since shrinks what is held.
                b.tokens = b.tokens.min(cap);
                if b.tokens >= cost {
                    b.tokens -= cost;
                    Ok(())
                } else {
                    Err(ms_to_ns(b.wait_ms(cost, cap, rate)))
                }
            }
            (Share::Window { index, used }, Algorithm::Window { limit, window_ms }) => {
                let now_index = window_index(window_ms, now_ns);
                if now_index != *index {
                    *index = now_index;
                    *used = 0.0;
                }
                if *used + cost <= limit / h {
                    *used += cost;
                    Ok(())
                } else if cost > limit / h {
                    Err(u64::MAX)
                } else {
                    let window_ns = window_ms * NS_PER_MS;
                    Err(((now_index + 1) as f64 * window_ns - now_ns as f64).max(1.0) as u64)
                }
            }
            // A share is made from its limit's algorithm, which never changes.
            _ => unreachable!("a share of another algorithm"),
        }
    }

    /// Whether the share is as a fresh one would be (refilled), so forgetting it loses nothing.
    pub fn at_rest(&self, alg: &Algorithm, holders: u32, now_ns: u64) -> bool {
        match (self, *alg) {
            (Share::Bucket(b), Algorithm::TokenBucket { rate_per_sec, burst }) => {
                let h = f64::from(holders);
                b.tokens_at(burst / h, rate_per_sec / h, now_ns) >= burst / h
            }
            (Share::Window { index, used }, Algorithm::Window { window_ms, .. }) => *used == 0.0 || *index != window_index(window_ms, now_ns),
            _ => unreachable!("a share of another algorithm"),
        }
    }
}

fn window_index(window_ms: f64, now_ns: u64) -> u64 {
    (now_ns as f64 / (window_ms * NS_PER_MS)) as u64
}

fn ms_to_ns(ms: f64) -> u64 {
    if ms.is_finite() {
        (ms * NS_PER_MS).ceil() as u64
    } else {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_bucket_share_is_the_bucket_divided_by_the_holders() {
        let alg = Algorithm::TokenBucket { rate_per_sec: 40.0, burst: 100.0 };
        let mut s = Share::new(&alg, 4, 0);
        for _ in 0..25 {
            assert_eq!(s.take(&alg, 4, 1, 0), Ok(()));
        }
        // 10 tokens/s each: the next token in 100 ms.
        assert_eq!(s.take(&alg, 4, 1, 0), Err(100 * MS));
        assert!(!s.at_rest(&alg, 4, 0));
        assert_eq!(s.take(&alg, 4, 1, 100 * MS), Ok(()));
        assert!(s.at_rest(&alg, 4, 100 * MS + 2500 * MS));
    }

    #[test]
    fn more_holders_learnt_shrink_what_is_held() {
        let alg = Algorithm::TokenBucket { rate_per_sec: 0.0, burst: 100.0 };
        let mut s = Share::new(&alg, 1, 0);
        assert_eq!(s.take(&alg, 10, 10, 0), Ok(()));
        assert_eq!(s.take(&alg, 10, 1, 0), Err(u64::MAX), "no refill: never");
    }

    #[test]
    fn a_window_share_resets_each_local_window() {
        let alg = Algorithm::Window { limit: 10.0, window_ms: 1000.0 };
        let mut s = Share::new(&alg, 3, 0);
        for _ in 0..3 {
            assert_eq!(s.take(&alg, 3, 1, 10 * MS), Ok(()));
        }
        assert_eq!(s.take(&alg, 3, 1, 10 * MS), Err(990 * MS), "10 / 3 holders: 3 per window");
        assert_eq!(s.take(&alg, 3, 4, 10 * MS), Err(u64::MAX), "a cost above the share never fits");
        assert!(!s.at_rest(&alg, 3, 999 * MS));
        assert!(s.at_rest(&alg, 3, 1000 * MS));
        assert_eq!(s.take(&alg, 3, 3, 1000 * MS), Ok(()));
    }
}

//! Token bucket as a named limit: `burst` tokens, refilled at `limit` per window, on the ledger's
//! bucket arithmetic (`core::bucket`), so a named limit and a ledger tier with the same numbers agree
//! exactly. Tokens are fractional; a request of cost `c` needs `c` whole tokens' worth.
use super::algorithm::{counted_check, Algorithm, Check, Policy, NEVER};
use crate::core::bucket::Bucket;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBucket {
    limit: u32,
    window_ns: u64,
    capacity: f64,
    rate_per_sec: f64,
}

impl TokenBucket {
    /// `limit` tokens per `window_ns`, holding at most `burst`. All ≥ 1.
    pub fn new(limit: u32, window_ns: u64, burst: u32) -> TokenBucket {
        assert!(limit >= 1 && window_ns >= 1 && burst >= 1);
        TokenBucket { limit, window_ns, capacity: f64::from(burst), rate_per_sec: f64::from(limit) * 1e9 / window_ns as f64 }
    }
}

impl Algorithm for TokenBucket {
    type State = Bucket;

    fn fresh(&self, now_ns: u64) -> Bucket {
        Bucket::full(self.capacity, now_ns)
    }

    fn check(&self, s: &Bucket, cost: u32, now_ns: u64) -> Check {
        let tokens = s.tokens_at(self.capacity, self.rate_per_sec, now_ns);
        let at = now_ns.max(s.last_ns);
        counted_check(self.capacity as u64, cost, tokens.max(0.0).floor() as u64, |pending, need| {
            let b = Bucket { tokens: tokens - f64::from(pending), last_ns: at };
            let ms = b.wait_ms(need as f64, self.capacity, self.rate_per_sec);
            // Rounded up, and a nanosecond on, so that retrying at the wait's end finds the tokens
            // whatever the float rounding of the refill.
            if ms.is_finite() {
                ((ms * 1e6).ceil() as u64).saturating_add(u64::from(ms > 0.0)).saturating_add(at - now_ns)
            } else {
                NEVER
            }
        })
    }

    fn commit(&self, s: &mut Bucket, cost: u32, now_ns: u64) {
        s.refill(self.capacity, self.rate_per_sec, now_ns);
        s.tokens -= f64::from(cost);
    }

    fn refund(&self, s: &mut Bucket, units: u32, _at_ns: u64, now_ns: u64) {
        // Tokens given back, up to a full bucket: what has refilled since is not given twice.
        s.refill(self.capacity, self.rate_per_sec, now_ns);
        s.tokens = (s.tokens + f64::from(units)).min(self.capacity);
    }

    fn with_limit(&self, limit: u32) -> TokenBucket {
        let burst = if self.capacity == f64::from(self.limit) { limit } else { self.capacity as u32 };
        TokenBucket::new(limit, self.window_ns, burst)
    }

    fn is_idle(&self, s: &Bucket, now_ns: u64) -> bool {
        s.tokens_at(self.capacity, self.rate_per_sec, now_ns) >= self.capacity
    }

    fn policy(&self) -> Policy {
        Policy { quota: u64::from(self.limit), window_ns: self.window_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn take(a: &TokenBucket, s: &mut Bucket, cost: u32, t: u64) -> Check {
        let c = a.check(s, cost, t);
        if c.allowed {
            a.commit(s, cost, t);
        }
        c
    }

    #[test]
    fn bursts_then_refills_at_the_rate() {
        // 2 per second, burst 4.
        let a = TokenBucket::new(2, 1000 * MS, 4);
        let mut s = a.fresh(0);
        assert!(take(&a, &mut s, 4, 0).allowed);
        let c = take(&a, &mut s, 1, 0);
        assert_eq!((c.allowed, c.remaining), (false, 0));
        assert!((500 * MS..=500 * MS + 1).contains(&c.retry_after_ns));
        assert!(!take(&a, &mut s, 1, 499 * MS).allowed);
        let ok = take(&a, &mut s, 1, c.retry_after_ns);
        assert!(ok.allowed);
        assert_eq!(take(&a, &mut s, 5, 10_000 * MS).retry_after_ns, NEVER);
        assert!(!a.is_idle(&s, 1_000 * MS));
        assert!(a.is_idle(&s, 10_000 * MS));
        assert_eq!(a.policy(), Policy { quota: 2, window_ns: 1000 * MS });
    }

    #[test]
    fn retrying_at_the_promised_time_succeeds() {
        // Rates whose ns refill is not exact in binary.
        for (limit, w) in [(3u32, 1000 * MS), (7, 333 * MS), (1, 3)] {
            let a = TokenBucket::new(limit, w, 1);
            let mut s = a.fresh(0);
            let mut t = 0;
            for _ in 0..50 {
                let c = take(&a, &mut s, 1, t);
                if !c.allowed {
                    t += c.retry_after_ns;
                    assert!(take(&a, &mut s, 1, t).allowed, "{limit}/{w} at {t}");
                }
            }
        }
    }
}

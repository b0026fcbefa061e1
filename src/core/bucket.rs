//! One token bucket: fractional tokens refilled continuously from a monotonic nanosecond clock.
//!
//! The arithmetic is kept in one place so the tier pools and the keyed buckets of the ledger (and anything
//! else that needs a bucket) agree exactly. Refill is computed as `elapsed_ns * rate_per_sec / 1e9`, so
//! values that are exact in binary (2 tokens/s over 250 ms = 0.5) come out exact.

/// The state of one bucket: its tokens as of `last_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub tokens: f64,
    /// The clock reading the tokens are valid for; also the last time the bucket was touched.
    pub last_ns: u64,
}

impl Bucket {
    /// A bucket holding `capacity` tokens at `now_ns`.
    #[inline]
    pub fn full(capacity: f64, now_ns: u64) -> Bucket {
        Bucket { tokens: capacity, last_ns: now_ns }
    }

    /// The tokens the bucket would hold at `now_ns`, without changing it. A clock reading older than
    /// `last_ns` (another thread got there first, or a clock that does not advance) adds nothing.
    #[inline]
    pub fn tokens_at(&self, capacity: f64, rate_per_sec: f64, now_ns: u64) -> f64 {
        if now_ns <= self.last_ns || self.tokens >= capacity {
            return self.tokens.min(capacity);
        }
        let add = (now_ns - self.last_ns) as f64 * rate_per_sec / 1e9;
        (self.tokens + add).min(capacity)
    }

    /// Brings the bucket up to `now_ns`, clamped to `capacity`. Never moves `last_ns` backwards.
    #[inline]
    pub fn refill(&mut self, capacity: f64, rate_per_sec: f64, now_ns: u64) {
        if now_ns > self.last_ns {
            self.tokens = self.tokens_at(capacity, rate_per_sec, now_ns);
            self.last_ns = now_ns;
        }
    }

    /// Milliseconds until the bucket holds `need` tokens at `rate_per_sec`: 0 if it already does,
    /// infinity if it never will (no refill, or `need` above `capacity`).
    #[inline]
    pub fn wait_ms(&self, need: f64, capacity: f64, rate_per_sec: f64) -> f64 {
        if need > capacity {
            f64::INFINITY
        } else if self.tokens >= need {
            0.0
        } else if rate_per_sec <= 0.0 {
            f64::INFINITY
        } else {
            (need - self.tokens) * 1000.0 / rate_per_sec
        }
    }

    /// Milliseconds until the bucket is full again (0 when it is, infinity without refill).
    #[inline]
    pub fn reset_ms(&self, capacity: f64, rate_per_sec: f64) -> f64 {
        self.wait_ms(capacity, capacity, rate_per_sec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn refills_fractionally_and_clamps() {
        let mut b = Bucket { tokens: 0.0, last_ns: 0 };
        b.refill(10.0, 2.0, 250 * MS);
        assert_eq!(b.tokens, 0.5);
        assert_eq!(b.last_ns, 250 * MS);
        b.refill(10.0, 2.0, 100_000 * MS);
        assert_eq!(b.tokens, 10.0);
    }

    #[test]
    fn time_going_backwards_adds_nothing_and_keeps_last() {
        let mut b = Bucket { tokens: 1.0, last_ns: 1_000 * MS };
        b.refill(10.0, 1000.0, 500 * MS);
        assert_eq!(b, Bucket { tokens: 1.0, last_ns: 1_000 * MS });
    }

    #[test]
    fn waits() {
        let b = Bucket { tokens: 1.0, last_ns: 0 };
        assert_eq!(b.wait_ms(1.0, 10.0, 1.0), 0.0);
        assert_eq!(b.wait_ms(3.0, 10.0, 4.0), 500.0);
        assert_eq!(b.wait_ms(11.0, 10.0, 4.0), f64::INFINITY);
        assert_eq!(b.wait_ms(2.0, 10.0, 0.0), f64::INFINITY);
        assert_eq!(b.reset_ms(10.0, 2.0), 4500.0);
        assert_eq!(Bucket::full(10.0, 0).reset_ms(10.0, 0.0), 0.0);
    }
}

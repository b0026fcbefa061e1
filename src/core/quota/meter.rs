//! A key's local demand rate: a sliding count over one period (the limit's renewal period), for
//! sizing leases. Two counters, no timestamps per spend: the previous period's count, weighted by
//! how much of it still lies within one period of now, plus the current period's.
//!
//! It counts demand (every cost asked), not only what was admitted: a key starved of lease would
//! otherwise measure only its starvation and never ask for more.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Meter {
    /// Start of the current period.
    start_ns: u64,
    cur: u64,
    prev: u64,
}

impl Meter {
    pub fn new(now_ns: u64) -> Meter {
        Meter { start_ns: now_ns, cur: 0, prev: 0 }
    }

    /// The meter as of `now_ns` (periods that have ended moved along; a reading older than the
    /// current period's start counts as its start).
    fn at(&self, now_ns: u64, period_ns: u64) -> Meter {
        let elapsed = now_ns.saturating_sub(self.start_ns);
        if elapsed < period_ns {
            *self
        } else if elapsed < 2 * period_ns {
            Meter { start_ns: self.start_ns + period_ns, cur: 0, prev: self.cur }
        } else {
            Meter { start_ns: now_ns - elapsed % period_ns, cur: 0, prev: 0 }
        }
    }

    #[inline]
    pub fn add(&mut self, tokens: u64, now_ns: u64, period_ns: u64) {
        *self = self.at(now_ns, period_ns);
        self.cur = self.cur.saturating_add(tokens);
    }

    /// Tokens asked for over the last period (the weighted sliding count).
    pub fn per_period(&self, now_ns: u64, period_ns: u64) -> f64 {
        let m = self.at(now_ns, period_ns);
        let into = now_ns.saturating_sub(m.start_ns) as f64 / period_ns as f64;
        m.prev as f64 * (1.0 - into) + m.cur as f64
    }

    /// Tokens the measured rate asks for over `span_ns`.
    pub fn expected(&self, span_ns: u64, now_ns: u64, period_ns: u64) -> f64 {
        self.per_period(now_ns, period_ns) * span_ns as f64 / period_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 1000;

    #[test]
    fn counts_the_current_period_whole_and_the_previous_by_overlap() {
        let mut m = Meter::new(0);
        m.add(10, 100, P);
        assert_eq!(m.per_period(999, P), 10.0);
        // A quarter into the next period, three quarters of the old one still overlaps.
        m.add(4, 1250, P);
        assert_eq!(m.per_period(1250, P), 10.0 * 0.75 + 4.0);
        assert_eq!(m.expected(500, 1250, P), (7.5 + 4.0) / 2.0);
    }

    #[test]
    fn forgets_after_two_idle_periods() {
        let mut m = Meter::new(0);
        m.add(10, 0, P);
        assert_eq!(m.per_period(1500, P), 5.0);
        assert_eq!(m.per_period(2000, P), 0.0);
        m.add(1, 5300, P);
        assert_eq!(m.per_period(5300, P), 1.0);
        assert_eq!(m.per_period(6300, P), 0.7);
    }

    #[test]
    fn a_reading_before_the_start_counts_as_the_start() {
        let mut m = Meter::new(500);
        m.add(3, 100, P);
        assert_eq!(m.per_period(100, P), 3.0);
    }
}

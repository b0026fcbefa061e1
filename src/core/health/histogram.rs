//! Rolling-window statistics of event-loop drift: the pure arithmetic behind LagMonitor.
//!
//! `LagWindow` receives one sample per loop tick — the tick's time, its drift (how late the timer fired)
//! and the loop's cumulative idle time — and answers, for the samples of the last `window_ns`:
//! mean, p50/p90/p99 (from a log-linear histogram), max, the latest drift, a time-weighted EWMA and the
//! event-loop utilisation. Separately it keeps the longest "block" — the longest stretch the loop ran
//! without returning to its I/O poll — reported by the caller once per loop iteration or tick (sliding
//! max over the same window). Everything is O(1) per tick (amortised) except the quantile scan over the
//! buckets (buckets.rs); memory is fixed at construction.
//!
//! Why not the `hdrhistogram` crate: a rolling window needs samples to leave the histogram as they age.
//! Keeping the exact samples in a ring (bounded) and decrementing their bucket on expiry gives exact
//! max/mean/latest and bucketed quantiles with one structure, no per-window re-allocation and no
//! subtraction of whole histograms.
use super::buckets::Buckets;
use std::collections::VecDeque;

/// Hard cap on samples kept for one window, whatever the resolution: bounds memory (24 B a sample).
pub const MAX_SAMPLES: usize = 65_536;

#[derive(Clone, Copy, Debug)]
struct Sample {
    t_ns: u64,
    drift_ns: u64,
    idle_ns: u64,
}

/// A plain copy of the window's figures, in milliseconds (sub-millisecond precision) and counts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LagStats {
    /// Drift of the most recent tick.
    pub latest_ms: f64,
    /// Time-weighted exponential moving average of drift.
    pub ewma_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Longest stretch the loop went without polling for I/O (a synchronous block), in the window.
    pub max_block_ms: f64,
    /// Event-loop utilisation over the window, 0..=1 (busy time / elapsed time).
    pub elu: f64,
    /// Samples currently in the window.
    pub count: u64,
    /// Ticks recorded since the window was created or reset.
    pub total: u64,
}

/// Rolling window of drift samples. Times are any monotonic nanosecond clock shared by all arguments.
#[derive(Debug)]
pub struct LagWindow {
    window_ns: u64,
    ewma_tau_ns: f64,
    cap: usize,
    samples: VecDeque<Sample>,
    /// (t_ns, drift_ns), drift strictly decreasing front to back: the window's max is at the front.
    maxima: VecDeque<(u64, u64)>,
    /// (t_ns, block_ns), the same sliding-max structure for `record_block`.
    blocks: VecDeque<(u64, u64)>,
    /// The drifts of `samples`, in µs buckets: the quantiles.
    buckets: Buckets,
    sum_ns: u64,
    latest_ns: u64,
    ewma_ns: f64,
    total: u64,
    /// The (time, idle) point ELU is measured from: the last sample to leave the window, or the start.
    base_t_ns: u64,
    base_idle_ns: u64,
    last_t_ns: u64,
    last_idle_ns: u64,
}

impl LagWindow {
    /// `expected_interval_ns` sizes the sample ring (`2 × window / interval`, capped at `MAX_SAMPLES`);
    /// when ticks come faster than that the oldest samples leave early. `ewma_tau_ns` is the EWMA's time
    /// constant. `start_ns`/`start_idle_ns` anchor the first ELU figure.
    pub fn new(window_ns: u64, expected_interval_ns: u64, ewma_tau_ns: u64, start_ns: u64, start_idle_ns: u64) -> Self {
        let cap = Self::capacity_for(window_ns, expected_interval_ns);
        LagWindow {
            window_ns: window_ns.max(1),
            ewma_tau_ns: ewma_tau_ns.max(1) as f64,
            cap,
            samples: VecDeque::with_capacity(cap),
            maxima: VecDeque::with_capacity(cap.min(1024)),
            blocks: VecDeque::with_capacity(64),
            buckets: Buckets::new(),
            sum_ns: 0,
            latest_ns: 0,
            ewma_ns: 0.0,
            total: 0,
            base_t_ns: start_ns,
            base_idle_ns: start_idle_ns,
            last_t_ns: start_ns,
            last_idle_ns: start_idle_ns,
        }
    }

    fn capacity_for(window_ns: u64, interval_ns: u64) -> usize {
        let per_window = window_ns / interval_ns.max(1) + 1;
        (per_window.saturating_mul(2) + 16).min(MAX_SAMPLES as u64) as usize
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Re-sizes the ring for ticks arriving every `interval_ns` (a shared timer that another user made
    /// finer or coarser), so the window keeps covering its full duration. When ticks get coarser the
    /// samples already held stay until they age out.
    pub fn set_expected_interval(&mut self, interval_ns: u64) {
        self.cap = Self::capacity_for(self.window_ns, interval_ns).max(self.samples.len());
    }

    /// Records one tick at `t_ns` whose timer fired `drift_ns` late; `elapsed_ns` is the time since the
    /// previous tick (weights the EWMA), `idle_ns` the loop's cumulative idle time at `t_ns`.
    pub fn record(&mut self, t_ns: u64, drift_ns: u64, elapsed_ns: u64, idle_ns: u64) {
        self.expire(t_ns);
        if self.samples.len() == self.cap {
            self.pop_oldest();
        }
        self.buckets.add(drift_ns / 1000);
        self.sum_ns += drift_ns;
        while self.maxima.back().is_some_and(|&(_, d)| d <= drift_ns) {
            self.maxima.pop_back();
        }
        self.maxima.push_back((t_ns, drift_ns));
        self.samples.push_back(Sample { t_ns, drift_ns, idle_ns });

        // Time-weighted EWMA: a tick that closes a long gap weighs as much as the gap lasted.
        let alpha = if self.total == 0 { 1.0 } else { 1.0 - (-(elapsed_ns as f64) / self.ewma_tau_ns).exp() };
        self.ewma_ns += alpha * (drift_ns as f64 - self.ewma_ns);
        self.latest_ns = drift_ns;
        self.total += 1;
        self.last_t_ns = t_ns;
        self.last_idle_ns = idle_ns;
    }

    /// Records that the loop ran `block_ns` without polling for I/O, ending at `t_ns`.
    pub fn record_block(&mut self, t_ns: u64, block_ns: u64) {
        self.expire(t_ns);
        while self.blocks.back().is_some_and(|&(_, b)| b <= block_ns) {
            self.blocks.pop_back();
        }
        if self.blocks.len() == self.cap {
            self.blocks.pop_front();
        }
        self.blocks.push_back((t_ns, block_ns));
    }

    pub fn max_block_ms(&self) -> f64 {
        self.blocks.front().map_or(0.0, |&(_, b)| b as f64 / 1e6)
    }

    /// Drops samples older than the window as of `now_ns`.
    pub fn expire(&mut self, now_ns: u64) {
        while self.blocks.front().is_some_and(|&(t, _)| t.saturating_add(self.window_ns) <= now_ns) {
            self.blocks.pop_front();
        }
        while let Some(s) = self.samples.front() {
            if s.t_ns.saturating_add(self.window_ns) > now_ns {
                break;
            }
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        let Some(s) = self.samples.pop_front() else { return };
        self.buckets.remove(s.drift_ns / 1000);
        self.sum_ns -= s.drift_ns;
        if self.maxima.front().is_some_and(|&(t, _)| t <= s.t_ns) {
            self.maxima.pop_front();
        }
        self.base_t_ns = s.t_ns;
        self.base_idle_ns = s.idle_ns;
    }

    pub fn count(&self) -> usize {
        self.samples.len()
    }

    pub fn latest_ms(&self) -> f64 {
        self.latest_ns as f64 / 1e6
    }

    pub fn ewma_ms(&self) -> f64 {
        self.ewma_ns / 1e6
    }

    pub fn max_ms(&self) -> f64 {
        self.maxima.front().map_or(0.0, |&(_, d)| d as f64 / 1e6)
    }

    pub fn mean_ms(&self) -> f64 {
        if self.samples.is_empty() {
            0.0
        } else {
            self.sum_ns as f64 / self.samples.len() as f64 / 1e6
        }
    }

    /// Nearest-rank quantile (`q` in 0..=1) of the window's drift, in ms, 0 when empty. Exact below
    /// 0.256 ms, within 0.4 % above, and never above the exact max.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let n = self.samples.len() as u64;
        if n == 0 {
            return 0.0;
        }
        // `rank` is 1-based from the bottom; the scan starts at the top (the `n - rank + 1`-th largest),
        // so high quantiles touch few groups.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        self.buckets.nth_largest_mid_us(n - rank + 1).map_or(0.0, |us| (us / 1000.0).min(self.max_ms()))
    }

    /// Event-loop utilisation from the oldest point of the window to the latest sample: the share of
    /// elapsed time the loop was not idle in its I/O poll. `None` before any time has passed.
    pub fn elu(&self) -> Option<f64> {
        let dt = self.last_t_ns.checked_sub(self.base_t_ns)?;
        if dt == 0 {
            return None;
        }
        let idle = self.last_idle_ns.saturating_sub(self.base_idle_ns) as f64;
        Some((1.0 - idle / dt as f64).clamp(0.0, 1.0))
    }

    pub fn stats(&self) -> LagStats {
        LagStats {
            latest_ms: self.latest_ms(),
            ewma_ms: self.ewma_ms(),
            mean_ms: self.mean_ms(),
            p50_ms: self.quantile_ms(0.50),
            p90_ms: self.quantile_ms(0.90),
            p99_ms: self.quantile_ms(0.99),
            max_ms: self.max_ms(),
            max_block_ms: self.max_block_ms(),
            elu: self.elu().unwrap_or(0.0),
            count: self.samples.len() as u64,
            total: self.total,
        }
    }

    /// Forgets every sample (keeps the configuration); ELU restarts from the given point.
    pub fn reset(&mut self, now_ns: u64, idle_ns: u64) {
        self.samples.clear();
        self.maxima.clear();
        self.blocks.clear();
        self.buckets.clear();
        self.sum_ns = 0;
        self.latest_ns = 0;
        self.ewma_ns = 0.0;
        self.total = 0;
        self.base_t_ns = now_ns;
        self.base_idle_ns = idle_ns;
        self.last_t_ns = now_ns;
        self.last_idle_ns = idle_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn window(window_ms: u64, interval_ms: u64) -> LagWindow {
        LagWindow::new(window_ms * MS, interval_ms * MS, 250 * MS, 0, 0)
    }

    #[test]
    fn exact_figures_for_a_known_series() {
        let mut w = window(1000, 10);
        // 100 ticks, drift 1..=100 µs, 10 ms apart.
        for i in 1..=100u64 {
            w.record(i * 10 * MS, i * 1000, 10 * MS, 0);
        }
        let s = w.stats();
        assert_eq!(s.count, 100);
        assert_eq!(s.latest_ms, 0.1);
        assert_eq!(s.max_ms, 0.1);
        assert!((s.mean_ms - 0.0505).abs() < 1e-12);
        assert_eq!(s.p50_ms, 0.050);
        assert_eq!(s.p90_ms, 0.090);
        assert_eq!(s.p99_ms, 0.099);
    }

    #[test]
    fn a_block_shows_in_max_and_p99_then_ages_out() {
        let mut w = window(1000, 10);
        let mut t = 0;
        for _ in 0..99 {
            t += 10 * MS;
            w.record(t, 50_000, 10 * MS, 0);
        }
        t += 10 * MS; // (times need not be consistent with the drift here: keep 100 samples in the window)
        w.record(t, 100 * MS, 110 * MS, 0);
        let s = w.stats();
        assert_eq!(s.latest_ms, 100.0);
        assert_eq!(s.max_ms, 100.0);
        assert!((s.p99_ms - 0.05).abs() < 1e-9, "p99 of 100 samples is the 99th: {}", s.p99_ms);
        assert!(s.ewma_ms > 30.0, "a 110 ms gap weighs heavily in a 250 ms EWMA: {}", s.ewma_ms);
        // 1 s later the block has left the window.
        for _ in 0..101 {
            t += 10 * MS;
            w.record(t, 20_000, 10 * MS, 0);
        }
        let s = w.stats();
        assert_eq!(s.max_ms, 0.02);
        assert_eq!(s.p99_ms, 0.02);
        assert!(s.count <= 100);
    }

    #[test]
    fn sliding_max_follows_expiry() {
        let mut w = window(100, 10);
        w.record(10 * MS, 30 * MS, 10 * MS, 0);
        w.record(20 * MS, 20 * MS, 10 * MS, 0);
        w.record(30 * MS, 10 * MS, 10 * MS, 0);
        assert_eq!(w.max_ms(), 30.0);
        w.expire(110 * MS); // first sample (t = 10) leaves
        assert_eq!(w.max_ms(), 20.0);
        w.expire(120 * MS);
        assert_eq!(w.max_ms(), 10.0);
        w.expire(1000 * MS);
        assert_eq!((w.max_ms(), w.count(), w.mean_ms(), w.quantile_ms(0.99)), (0.0, 0, 0.0, 0.0));
    }

    #[test]
    fn large_values_are_within_half_a_percent() {
        let mut w = window(1000, 10);
        w.record(MS, 200 * MS + 123_456, 10 * MS, 0);
        w.record(2 * MS, 50 * MS, 10 * MS, 0);
        let p50 = w.quantile_ms(0.5);
        assert!((p50 - 50.0).abs() <= 50.0 * 0.004, "{p50}");
        // The top quantile is capped by the exact max.
        assert!(w.quantile_ms(1.0) <= 200.123456);
        assert!((w.quantile_ms(1.0) - 200.123456).abs() < 200.0 * 0.004);
    }

    #[test]
    fn ring_is_bounded_and_evicts_the_oldest() {
        let mut w = window(1000, 100); // sized for ~10 ticks a window → capacity 2·11 + 16 = 38
        let cap = w.capacity();
        assert_eq!(cap, 38);
        for i in 0..1000u64 {
            w.record(i * MS, i * 1000, MS, 0);
        }
        assert_eq!(w.count(), cap);
        assert_eq!(w.max_ms(), 0.999);
        let oldest_kept = 1000 - cap as u64;
        assert!((w.mean_ms() - (oldest_kept + 999) as f64 / 2.0 / 1000.0).abs() < 1e-9);
        let big = LagWindow::new(3_600_000 * MS, MS, MS, 0, 0);
        assert_eq!(big.capacity(), MAX_SAMPLES);
    }

    #[test]
    fn ring_follows_the_tick_interval() {
        let mut w = window(1000, 10); // 2·101 + 16
        assert_eq!(w.capacity(), 218);
        w.set_expected_interval(MS); // a finer shared timer: 2·1001 + 16
        assert_eq!(w.capacity(), 2018);
        for i in 0..1000u64 {
            w.record(i * MS, i * 1000, MS, 0);
        }
        assert_eq!(w.count(), 1000, "the whole second is kept");
        w.set_expected_interval(100 * MS); // 2·11 + 16 = 38, but what is held stays until it ages out
        assert_eq!((w.count(), w.capacity()), (1000, 1000));
        w.record(1000 * MS, 0, MS, 0);
        assert_eq!(w.count(), 1000);
        w.record(1999 * MS, 0, 999 * MS, 0); // everything from before t = 1000 ms has left
        assert_eq!(w.count(), 2);
    }

    #[test]
    fn elu_is_busy_share_over_the_window() {
        let mut w = LagWindow::new(1000 * MS, 10 * MS, 250 * MS, 0, 0);
        assert_eq!(w.elu(), None);
        // 10 ms ticks, idle 7.5 ms of each: ELU 0.25.
        for i in 1..=50u64 {
            w.record(i * 10 * MS, 0, 10 * MS, i * 7_500_000);
        }
        assert!((w.elu().unwrap() - 0.25).abs() < 1e-12);
        // Then fully busy for 2 s: the window forgets the idle past.
        for i in 51..=250u64 {
            w.record(i * 10 * MS, 0, 10 * MS, 50 * 7_500_000);
        }
        assert_eq!(w.elu().unwrap(), 1.0);
    }

    #[test]
    fn ewma_is_time_weighted() {
        let mut w = LagWindow::new(1000 * MS, MS, 100 * MS, 0, 0);
        w.record(MS, 0, MS, 0);
        // One 100 ms tick moves the average by 1 - e^-1 of the step.
        w.record(101 * MS, 10 * MS, 100 * MS, 0);
        assert!((w.ewma_ms() - 10.0 * (1.0 - (-1.0f64).exp())).abs() < 1e-9);
        // The same step over ten 10 ms ticks moves it the same total weight.
        let mut v = LagWindow::new(1000 * MS, MS, 100 * MS, 0, 0);
        v.record(MS, 0, MS, 0);
        for i in 1..=10 {
            v.record(MS + i * 10 * MS, 10 * MS, 10 * MS, 0);
        }
        assert!((v.ewma_ms() - w.ewma_ms()).abs() < 1e-9);
    }

    #[test]
    fn longest_block_is_a_sliding_max() {
        let mut w = window(100, 10);
        w.record_block(10 * MS, 3 * MS);
        w.record_block(20 * MS, 40 * MS);
        w.record_block(30 * MS, 5 * MS);
        assert_eq!(w.max_block_ms(), 40.0);
        assert_eq!(w.stats().max_block_ms, 40.0);
        w.expire(120 * MS); // the 40 ms block (t = 20) leaves
        assert_eq!(w.max_block_ms(), 5.0);
        w.record(125 * MS, MS, 10 * MS, 0); // a tick expires too
        assert_eq!(w.max_block_ms(), 5.0);
        w.record(130 * MS, MS, 10 * MS, 0);
        assert_eq!(w.max_block_ms(), 0.0);
    }

    #[test]
    fn reset_forgets_everything() {
        let mut w = window(1000, 10);
        w.record(MS, 5 * MS, MS, 0);
        w.record_block(MS, 5 * MS);
        w.reset(2 * MS, 7);
        assert_eq!(w.stats(), LagStats { total: 0, ..Default::default() });
        w.record(3 * MS, MS, MS, 7);
        assert_eq!(w.stats().max_ms, 1.0);
        assert_eq!(w.stats().total, 1);
    }
}

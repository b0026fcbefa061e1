//! The live health of one event loop. Its LagMonitor writes it on every tick (and its watchdog sets
//! `stalled`); the shed controller reads it lock-free from any thread. Figures are in milliseconds.
//!
//! Files: `histogram.rs` (the rolling window of drift figures behind the record), `buckets.rs` (its
//! log-linear histogram, for the quantiles), `sampler.rs` (one loop's sampler: ticks fanned out to its
//! users' windows and records), `watchdog.rs` (the stall watchdog).
mod buckets;
pub mod histogram;
pub mod sampler;
pub mod watchdog;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct LoopHealth {
    latest_lag_ms: AtomicF64,
    ewma_lag_ms: AtomicF64,
    p99_lag_ms: AtomicF64,
    elu: AtomicF64,
    heap_used: AtomicU64,
    heap_limit: AtomicU64,
    stalled: AtomicBool,
    ticks: AtomicU64,
}

/// One plain copy of the figures, for a decision or for `stats()`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HealthSample {
    pub latest_lag_ms: f64,
    pub ewma_lag_ms: f64,
    pub p99_lag_ms: f64,
    pub elu: f64,
    pub heap_used: u64,
    pub heap_limit: u64,
    pub stalled: bool,
    pub ticks: u64,
}

impl HealthSample {
    /// Heap used over heap limit, 0 when the limit is unknown.
    pub fn heap_ratio(&self) -> f64 {
        if self.heap_limit == 0 {
            0.0
        } else {
            self.heap_used as f64 / self.heap_limit as f64
        }
    }
}

impl LoopHealth {
    pub fn sample(&self) -> HealthSample {
        HealthSample {
            latest_lag_ms: self.latest_lag_ms.get(),
            ewma_lag_ms: self.ewma_lag_ms.get(),
            p99_lag_ms: self.p99_lag_ms.get(),
            elu: self.elu.get(),
            heap_used: self.heap_used.load(Relaxed),
            heap_limit: self.heap_limit.load(Relaxed),
            stalled: self.stalled.load(Relaxed),
            ticks: self.ticks.load(Relaxed),
        }
    }

    /// Records one tick of the loop; a tick also ends any stall.
    pub fn record_tick(&self, latest_lag_ms: f64, ewma_lag_ms: f64, p99_lag_ms: f64) {
        self.latest_lag_ms.set(latest_lag_ms);
        self.ewma_lag_ms.set(ewma_lag_ms);
        self.p99_lag_ms.set(p99_lag_ms);
        self.stalled.store(false, Relaxed);
        self.ticks.fetch_add(1, Relaxed);
    }

    pub fn set_elu(&self, elu: f64) {
        self.elu.set(elu);
    }

    pub fn set_heap(&self, used: u64, limit: u64) {
        self.heap_used.store(used, Relaxed);
        self.heap_limit.store(limit, Relaxed);
    }

    /// Back to "no sample yet" (a sampler that has stopped for good): no lag, no ticks, not stalled.
    pub fn reset(&self) {
        self.record_tick(0.0, 0.0, 0.0);
        self.elu.set(0.0);
        self.set_heap(0, 0);
        self.ticks.store(0, Relaxed);
    }

    /// Set by the watchdog when the loop has not ticked for longer than its threshold.
    pub fn set_stalled(&self, stalled: bool) {
        self.stalled.store(stalled, Relaxed);
    }

    pub fn stalled(&self) -> bool {
        self.stalled.load(Relaxed)
    }
}

/// An f64 stored as its bits, so it can be shared without a lock.
#[derive(Debug, Default)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Relaxed))
    }
    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_clears_a_stall() {
        let h = LoopHealth::default();
        h.set_stalled(true);
        assert!(h.sample().stalled);
        h.record_tick(1.5, 1.0, 2.0);
        let s = h.sample();
        assert!(!s.stalled);
        assert_eq!((s.latest_lag_ms, s.ewma_lag_ms, s.p99_lag_ms, s.ticks), (1.5, 1.0, 2.0, 1));
    }

    #[test]
    fn reset_reads_as_no_sample_yet() {
        let h = LoopHealth::default();
        h.record_tick(80.0, 60.0, 120.0);
        h.set_elu(0.9);
        h.set_heap(50, 200);
        h.set_stalled(true);
        h.reset();
        assert_eq!(h.sample(), HealthSample::default());
    }

    #[test]
    fn heap_ratio_is_zero_without_a_limit() {
        let h = LoopHealth::default();
        assert_eq!(h.sample().heap_ratio(), 0.0);
        h.set_heap(50, 200);
        assert_eq!(h.sample().heap_ratio(), 0.25);
    }
}

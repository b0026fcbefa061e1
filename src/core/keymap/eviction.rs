//! Eviction and the idle sweep: how a shard stays within its cap and drains back without timers.
//!
//! A new key in a full shard evicts, from a small clock-hand scan, the first bucket that is idle
//! (untouched for `idle_ttl_ms`) or full (a full bucket is the same as a new one, so forgetting it
//! loses nothing); failing both, the least recently touched bucket of the scan. Each insert also
//! sweeps two entries for idleness, so memory drains back without any timer.
use super::{Entry, Shard};
use crate::core::ledger::PerKeyConfig;

/// The largest number of keyed buckets one eviction looks at.
const EVICT_SCAN: usize = 32;
/// Entries checked for idleness on every insert of a new key.
const SWEEP: usize = 2;

impl Shard {
    fn is_idle(e: &Entry, idle_ttl_ns: f64, now_ns: u64) -> bool {
        now_ns.saturating_sub(e.bucket.last_ns) as f64 >= idle_ttl_ns
    }

    /// The entry to evict for a new key: the first idle or full one in a scan from the hand, else the
    /// least recently touched one of the scan.
    pub(crate) fn victim(&mut self, cfg: &PerKeyConfig, idle_ttl_ns: f64, now_ns: u64) -> usize {
        let n = self.entries.len();
        let scan = n.min(EVICT_SCAN);
        let mut oldest = (u64::MAX, 0);
        for s in 0..scan {
            let i = (self.hand + s) % n;
            let e = &self.entries[i];
            if Self::is_idle(e, idle_ttl_ns, now_ns)
                || e.bucket.tokens_at(cfg.capacity, cfg.refill_per_sec, now_ns) >= cfg.capacity
            {
                self.hand = i + 1;
                return i;
            }
            if e.bucket.last_ns < oldest.0 {
                oldest = (e.bucket.last_ns, i);
            }
        }
        self.hand += scan;
        oldest.1
    }

    /// Drops up to `SWEEP` idle entries at the hand: how memory drains back without timers.
    pub(crate) fn sweep(&mut self, idle_ttl_ns: f64, now_ns: u64) {
        for _ in 0..SWEEP {
            let n = self.entries.len();
            if n == 0 {
                return;
            }
            let i = self.hand % n;
            if Self::is_idle(&self.entries[i], idle_ttl_ns, now_ns) {
                self.remove_at(i);
            } else {
                self.hand = i + 1;
            }
        }
    }
}

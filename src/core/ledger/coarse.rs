//! The ledger's clocks: the precise one, and the coarse one `try_consume_now` reads where its tick is
//! a small share of every bucket (see the ledger's module notes).
use super::TierConfig;
use crate::core::clock::{Clock, CoarseClock, MonotonicClock};
use std::sync::Arc;

/// The process clocks, called directly (inlined on the hot path), or an injected one.
pub(crate) enum LedgerClock {
    Monotonic,
    Coarse(CoarseClock),
    Custom(Arc<dyn Clock>),
}

impl LedgerClock {
    #[inline(always)]
    pub(crate) fn now_ns(&self) -> u64 {
        match self {
            LedgerClock::Monotonic => MonotonicClock.now_ns(),
            LedgerClock::Coarse(c) => c.now_ns(),
            LedgerClock::Custom(c) => c.now_ns(),
        }
    }

    pub(crate) fn resolution_ns(&self) -> u64 {
        match self {
            LedgerClock::Monotonic => 0,
            LedgerClock::Coarse(c) => c.resolution_ns(),
            LedgerClock::Custom(c) => c.resolution_ns(),
        }
    }
}

/// One tick's refill may be at most this fraction (1/COARSE_SHARE) of a bucket's capacity for the ledger
/// to read the coarse clock (module notes).
const COARSE_SHARE: f64 = 64.0;

/// Whether a clock lagging by up to `resolution_ns` changes every bucket of `tiers` by at most
/// 1/`COARSE_SHARE` of its capacity (module notes).
pub(crate) fn coarse_is_safe(tiers: &[TierConfig], resolution_ns: u64) -> bool {
    let tick_s = resolution_ns as f64 / 1e9;
    let ok = |capacity: f64, rate: f64| rate * tick_s <= capacity / COARSE_SHARE;
    tiers.iter().all(|t| ok(t.capacity, t.refill_per_sec) && t.per_key.as_ref().is_none_or(|k| ok(k.capacity, k.refill_per_sec)))
}

//! Per-thread lease stripes: each thread debits a small lease of a tier pool's tokens held in its own
//! cache-line-padded atomic, and only takes the pool's lock to renew it.
use super::tier::Tier;
use crate::core::sync::AtomicU64;
use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;

/// Lease stripes per tier pool; threads are spread over them round-robin. (Two in the model check:
/// as many as its threads, and every stripe a drain swaps is one more step to interleave.)
#[cfg(not(loom))]
pub(crate) const STRIPES: usize = 16;
#[cfg(loom)]
pub(crate) const STRIPES: usize = 2;

#[cfg(not(loom))]
static NEXT_STRIPE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(not(loom))]
thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[cfg(loom)]
loom::lazy_static! {
    static ref NEXT_STRIPE: loom::sync::atomic::AtomicUsize = loom::sync::atomic::AtomicUsize::new(0);
}

#[cfg(loom)]
loom::thread_local! {
    static STRIPE: Cell<usize> = Cell::new(usize::MAX);
}

/// This thread's stripe.
#[inline]
pub(crate) fn my_stripe() -> usize {
    STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
        s.set(v);
        v
    })
}

pub(crate) fn add_f64(a: &AtomicU64, v: f64) {
    let mut cur = a.load(Relaxed);
    while let Err(seen) = a.compare_exchange_weak(cur, (f64::from_bits(cur) + v).to_bits(), Relaxed, Relaxed) {
        cur = seen;
    }
}

impl Tier {
    pub(crate) fn leased(&self) -> f64 {
        self.stripes.iter().map(|s| f64::from_bits(s.0.load(Relaxed))).sum()
    }

    pub(crate) fn drain(&self) -> f64 {
        self.stripes.iter().map(|s| f64::from_bits(s.0.swap(0f64.to_bits(), Relaxed))).sum()
    }
}

//! One tier: its pool (a bucket behind a lock), the per-thread stripes that lease from it, and the
//! per-key buckets inside it.
use super::stripes::{add_f64, my_stripe};
use crate::core::bucket::Bucket;
use crate::core::keymap::KeyMap;
use crate::core::padded::Padded;
use crate::core::sync::{AtomicU64, Mutex};
use std::sync::atomic::Ordering::Relaxed;

pub(crate) struct Pool {
    /// The tokens not leased out to a stripe.
    pub(crate) bucket: Bucket,
    pub(crate) scale: f64,
    /// An upper bound of the tokens held by the stripes (leases granted minus leases drained; threads
    /// spend from their stripes without telling the pool). Read exactly only when the pool nears full.
    pub(crate) leased_out: f64,
}

/// A lease is this fraction of the tier's capacity (or whatever the pool holds, if less).
pub(crate) const LEASE_FRACTION: f64 = 1.0 / 64.0;

pub(crate) struct Tier {
    pub(crate) name: String,
    pub(crate) capacity: f64,
    pub(crate) refill_per_sec: f64,
    pub(crate) protected: bool,
    pub(crate) pool: Padded<Mutex<Pool>>,
    /// Leased tokens, as f64 bits, one stripe per group of threads.
    pub(crate) stripes: Box<[Padded<AtomicU64>]>,
    pub(crate) lease: f64,
    pub(crate) keys: Option<KeyMap>,
}

impl Tier {
    #[inline]
    pub(crate) fn rate(&self, pool: &Pool) -> f64 {
        self.refill_per_sec * pool.scale
    }

    /// Debits `cost` from the tier: `Err(retry_after_ms)` if the tier does not hold it.
    #[inline]
    pub(crate) fn debit(&self, cost: f64, now: impl Fn() -> u64) -> Result<(), f64> {
        self.debit_from::<true>(cost, now)
    }

    /// `debit`; with `SHARED` false, for a ledger no other thread can reach (the caller's promise,
    /// `Ledger::try_consume_slot_exclusive`): the stripe read and written without a read-modify-write,
    /// since nothing can change it in between.
    #[inline]
    pub(crate) fn debit_from<const SHARED: bool>(&self, cost: f64, now: impl Fn() -> u64) -> Result<(), f64> {
        if cost > self.capacity {
            return Err(f64::INFINITY);
        }
        let stripe = &self.stripes[my_stripe()].0;
        if !SHARED {
            let held = f64::from_bits(stripe.load(Relaxed));
            if held < cost {
                return self.debit_slow(stripe, cost, now);
            }
            stripe.store((held - cost).to_bits(), Relaxed);
            return Ok(());
        }
        let mut cur = stripe.load(Relaxed);
        loop {
            let held = f64::from_bits(cur);
            if held < cost {
                return self.debit_slow(stripe, cost, now);
            }
            match stripe.compare_exchange_weak(cur, (held - cost).to_bits(), Relaxed, Relaxed) {
                Ok(_) => return Ok(()),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The lease does not cover `cost`: debit the pool under its lock and renew the lease (`take`
    /// pulls the stripes' leases back first if it must).
    #[inline(never)]
    pub(crate) fn debit_slow(&self, stripe: &AtomicU64, cost: f64, now: impl Fn() -> u64) -> Result<(), f64> {
        let mut pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        self.refill(&mut pool, rate, now());
        self.take(&mut pool, cost, rate)?;
        let lease = pool.bucket.tokens.min(self.lease);
        if lease > 0.0 {
            pool.bucket.tokens -= lease;
            pool.leased_out += lease;
            add_f64(stripe, lease);
        }
        Ok(())
    }

    /// Brings the pool up to `now_ns`; pool plus leases never exceed the capacity.
    pub(crate) fn refill(&self, pool: &mut Pool, rate: f64, now_ns: u64) {
        if now_ns <= pool.bucket.last_ns {
            return;
        }
        let mut cap = self.capacity - pool.leased_out;
        if pool.leased_out > 0.0 && pool.bucket.tokens_at(self.capacity, rate, now_ns) > cap {
            pool.leased_out = self.leased();
            cap = self.capacity - pool.leased_out;
        }
        pool.bucket.refill(cap.max(0.0), rate, now_ns);
    }

    /// The tier's tokens now (pool and leases) and its current refill rate.
    pub(crate) fn view(&self, now_ns: u64) -> (f64, f64) {
        let (tokens, _, rate) = self.level(now_ns);
        (tokens, rate)
    }

    /// The tier's tokens now (as `view`), its budget (capacity × the refill scale) and its rate.
    pub(crate) fn level(&self, now_ns: u64) -> (f64, f64, f64) {
        let pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        let leased = self.leased();
        let cap = (self.capacity - leased).max(0.0);
        (pool.bucket.tokens_at(cap, rate, now_ns).min(cap) + leased, self.capacity * pool.scale, rate)
    }
}

//! The lease/drain protocol: how the tokens leased out to stripes and key shards come back before a
//! tier refuses, so that "refused iff the tier holds less than `cost`" stays exact.
//!
//! The steps, for a debit the pool cannot pay (`Tier::take`, under the pool's lock):
//! 1. pull every stripe's lease back (atomic swaps: no lock but the pool's is needed);
//! 2. still short while shards hold leases: `take` raises the tier's `draining` count and returns a
//!    `DrainGuard`, which the caller must hold while it drains the shards (`DrainGuard::drain`: shard
//!    lock, then pool lock, the keyed debit's lock order) and asks `take` again with it;
//! 3. while any guard lives no shard lease is granted, so the second asking sees every token the tier
//!    holds: refused then means the tier holds less than `cost`.
//!
//! The guard is the only way to raise the count, and dropping it is the only way to lower it (an
//! atomic decrement: it never takes a lock, so it cannot deadlock whatever its holder holds).
use super::tier::{Pool, Tier};
use crate::core::sync::AtomicU64;
use std::sync::atomic::Ordering::*;

/// Why the pool could not pay: a wait (ms), or shard leases that must be drained first, with the guard
/// that keeps new ones from being granted meanwhile (`Tier::take`).
#[must_use]
pub(crate) enum Short<'a> {
    Wait(f64),
    Drain(DrainGuard<'a>),
}

/// Held by a debit (or a reset) that drains the shards' leases: while any is held, no shard lease is
/// granted. Made only by `Tier::hold_shard_leases`.
#[must_use = "drain the shards with it (`DrainGuard::drain`) and ask `take` again with it"]
pub(crate) struct DrainGuard<'a>(&'a Tier);

impl DrainGuard<'_> {
    /// Moves every shard's lease back into the pool (`Tier::drain_shards`).
    pub(crate) fn drain(&self) {
        self.0.drain_shards();
    }
}

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        self.0.draining.fetch_sub(1, Release);
    }
}

impl Tier {
    /// A keyed debit, under the lock of the key's shard, whose `lease` does not cover `cost`: give
    /// back what is left of the lease, debit the pool, and take a new lease if the pool is well
    /// above empty and nobody is draining.
    #[inline(never)]
    pub(crate) fn debit_keyed_slow(&self, lease: &AtomicU64, cost: f64, now_ns: u64, drained: Option<&DrainGuard>) -> Result<(), Short<'_>> {
        let mut pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        self.refill(&mut pool, rate, now_ns);
        let held = f64::from_bits(lease.swap(0f64.to_bits(), Relaxed));
        pool.bucket.tokens += held;
        pool.shard_leased = (pool.shard_leased - held).max(0.0);
        self.take(&mut pool, cost, rate, drained)?;
        if !self.shard_leases_held() && pool.bucket.tokens >= 2.0 * self.lease {
            pool.bucket.tokens -= self.lease;
            pool.shard_leased += self.lease;
            lease.store(self.lease.to_bits(), Relaxed);
        }
        Ok(())
    }

    /// Under the pool's lock: takes `cost` from the pool, pulling the stripes' leases back first if it
    /// is short. Still short while shards may hold leases and `drained` is `None`: `Short::Drain` with
    /// a guard, which the caller drains with and asks again with (module notes). Only then is the tier
    /// short: "refused iff the tier holds less than `cost`" stays exact, since nothing can be leased out
    /// between the drain and the second asking.
    pub(crate) fn take(&self, pool: &mut Pool, cost: f64, rate: f64, drained: Option<&DrainGuard>) -> Result<(), Short<'_>> {
        if pool.bucket.tokens < cost {
            pool.bucket.tokens += self.drain();
            pool.leased_out = 0.0;
        }
        if pool.bucket.tokens < cost {
            if pool.shard_leased > 0.0 {
                pool.shard_leased = self.shard_leases();
            }
            if pool.shard_leased > 0.0 && drained.is_none() {
                return Err(Short::Drain(self.hold_shard_leases()));
            }
            return Err(Short::Wait(pool.bucket.wait_ms(cost, self.capacity, rate)));
        }
        pool.bucket.tokens -= cost;
        Ok(())
    }

    /// A guard under which no shard lease is granted. The count is raised before the drain takes any
    /// shard's lock, and a lease is granted only under its shard's lock: a grant after the drain has
    /// passed that shard sees the count (the shard lock orders them), and one before is found by it.
    pub(crate) fn hold_shard_leases(&self) -> DrainGuard<'_> {
        self.draining.fetch_add(1, Relaxed);
        DrainGuard(self)
    }

    /// Whether some debit or reset holds a `DrainGuard` now (read under the pool's lock).
    fn shard_leases_held(&self) -> bool {
        self.draining.load(Acquire) != 0
    }

    /// Moves every shard's lease back into the pool, one shard at a time, taking its lock and then the
    /// pool's (a keyed debit's lock order). Only through a `DrainGuard`.
    fn drain_shards(&self) {
        let Some(map) = &self.keys else { return };
        for cell in map.shards.iter() {
            let _shard = cell.0.lock.lock();
            let held = f64::from_bits(cell.0.lease.load(Relaxed));
            if held > 0.0 {
                let mut pool = self.pool.0.lock();
                pool.bucket.tokens += held;
                pool.shard_leased = (pool.shard_leased - held).max(0.0);
                cell.0.lease.store(0f64.to_bits(), Relaxed);
            }
        }
    }

    /// The tokens the shards' leases hold. Read under the pool's lock it is an upper bound: no lease
    /// grows or is returned without that lock, and debits only spend from them.
    pub(crate) fn shard_leases(&self) -> f64 {
        self.keys.as_ref().map_or(0.0, |m| m.shards.iter().map(|c| f64::from_bits(c.0.lease.load(Relaxed))).sum())
    }
}

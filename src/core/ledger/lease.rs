//! The lease/drain protocol: how the tokens leased out to stripes and key shards come back before a
//! tier refuses, so that "refused iff the tier holds less than `cost`" stays exact.
use super::tier::{Pool, Tier};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why the pool could not pay: a wait (ms), or shard leases that must be drained first (`Tier::take`).
pub(crate) enum Short {
    Wait(f64),
    Drain,
}

/// Lowers `draining` again when a debit that raised it is done.
pub(crate) struct DrainGuard<'a>(pub(crate) &'a Tier);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        self.0.pool.0.lock().draining -= 1;
    }
}

impl Tier {
    /// A keyed debit, under the lock of the key's shard, whose `lease` does not cover `cost`: give
    /// back what is left of the lease, debit the pool, and take a new lease if the pool is well
    /// above empty and nobody is draining.
    #[inline(never)]
    pub(crate) fn debit_keyed_slow(&self, lease: &AtomicU64, cost: f64, now_ns: u64, drained: bool) -> Result<(), Short> {
        let mut pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        self.refill(&mut pool, rate, now_ns);
        let held = f64::from_bits(lease.swap(0f64.to_bits(), Relaxed));
        pool.bucket.tokens += held;
        pool.shard_leased = (pool.shard_leased - held).max(0.0);
        self.take(&mut pool, cost, rate, drained)?;
        if pool.draining == 0 && pool.bucket.tokens >= 2.0 * self.lease {
            pool.bucket.tokens -= self.lease;
            pool.shard_leased += self.lease;
            lease.store(self.lease.to_bits(), Relaxed);
        }
        Ok(())
    }

    /// Under the pool's lock: takes `cost` from the pool, pulling the stripes' leases back first if it
    /// is short. Still short while shards may hold leases: `Short::Drain` (with `draining` raised: the
    /// caller drains them with `drain_shards`, lowers it with a `DrainGuard` and asks again with
    /// `drained`). Only then is the tier short: "refused iff the tier holds less than `cost`" stays
    /// exact, since nothing can be leased out between the drain and the second asking.
    pub(crate) fn take(&self, pool: &mut Pool, cost: f64, rate: f64, drained: bool) -> Result<(), Short> {
        if pool.bucket.tokens < cost {
            pool.bucket.tokens += self.drain();
            pool.leased_out = 0.0;
        }
        if pool.bucket.tokens < cost {
            if pool.shard_leased > 0.0 {
                pool.shard_leased = self.shard_leases();
            }
            if pool.shard_leased > 0.0 && !drained {
                pool.draining += 1;
                return Err(Short::Drain);
            }
            return Err(Short::Wait(pool.bucket.wait_ms(cost, self.capacity, rate)));
        }
        pool.bucket.tokens -= cost;
        Ok(())
    }

    /// Moves every shard's lease back into the pool, one shard at a time, taking its lock and then the
    /// pool's (a keyed debit's lock order). The caller has raised `draining`.
    pub(crate) fn drain_shards(&self) {
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

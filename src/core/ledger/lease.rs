//! The lease protocol: how the tokens leased out to the threads' stripes come back before a tier
//! refuses, so that "refused iff the tier holds less than `cost`" stays exact.
//!
//! A stripe's lease is granted only under the pool's lock, and spent without any lock (a
//! compare-exchange on the stripe). A debit the pool cannot pay, under the pool's lock, swaps every
//! stripe to zero and adds what they held (`Tier::take`): a spend that came first is in the sum, one
//! that comes after finds its stripe empty and waits for the pool's lock. Nothing can be leased out
//! between the swap and the decision, so a refusal then means the tier holds less than `cost`. Keyed
//! and tier-only debits lease alike: a keyed one pays the tier from its thread's stripe under its
//! key's entry lock (lock order: entry, then pool; the pool's holders take no other lock).
//!
//! Model-checked with loom (`model.rs`).
use super::tier::{Pool, Tier};

impl Tier {
    /// Under the pool's lock: takes `cost` from the pool, pulling the stripes' leases back first if it
    /// is short. `Err(retry_after_ms)` when the tier does not hold `cost`.
    pub(crate) fn take(&self, pool: &mut Pool, cost: f64, rate: f64) -> Result<(), f64> {
        if pool.bucket.tokens < cost {
            pool.bucket.tokens += self.drain();
            pool.leased_out = 0.0;
        }
        if pool.bucket.tokens < cost {
            return Err(pool.bucket.wait_ms(cost, self.capacity, rate));
        }
        pool.bucket.tokens -= cost;
        Ok(())
    }
}

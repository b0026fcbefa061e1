//! Bounded sharded key state: the per-key buckets of one ledger tier.
//!
//! The keys of a tier live in `shards` hash tables whose capacities add up to `max_keys`; bits of a
//! key's keyed hash (`hash.rs`) pick its shard, each shard behind its own lock on its own cache line. A key's entry
//! can also be named by position (`Slot`), for callers that look a key up once and debit it again
//! without hashing. Eviction and the idle sweep (`eviction.rs`) keep every shard within its cap.
mod eviction;
mod hash;
mod key;
mod shard;
mod slot;

pub use slot::Slot;
pub(crate) use key::INLINE_KEY;
pub(crate) use shard::{Entry, Shard};

use crate::core::ledger::PerKeyConfig;
use crate::core::padded::Padded;
use crate::core::sync::{AtomicU64, Mutex};
pub(crate) use hash::{shard_index, KeyHasher};
use hashbrown::HashTable;

/// Most shards per tier; fewer when `max_keys` is small, so that every shard holds at least
/// `MIN_PER_SHARD` keys and the per-shard caps add up to `max_keys` exactly.
pub(crate) const MAX_SHARDS: usize = 64;
const MIN_PER_SHARD: usize = 256;

/// A shard and its lease of the tier pool. A keyed debit holds the shard's lock anyway, so it pays the
/// tier from this lease with a plain store instead of a second atomic read-modify-write (a thread
/// stripe's compare-exchange, ~2.5 ns of a ~50 ns call). The lease is written only under the shard's
/// lock; others read it (atomically, without the lock) to count the tier's tokens. Like the stripes'
/// leases these are the pool's tokens moved, never created, and a debit is refused for want of tier
/// tokens only once every shard's lease has been drained back (`Tier::take`).
pub(crate) struct ShardCell {
    pub(crate) lock: Mutex<Shard>,
    /// Tokens, as f64 bits.
    pub(crate) lease: AtomicU64,
}

pub(crate) struct KeyMap {
    pub(crate) cfg: PerKeyConfig,
    pub(crate) idle_ttl_ns: f64,
    pub(crate) hasher: KeyHasher,
    pub(crate) shards: Box<[Padded<ShardCell>]>,
}

impl KeyMap {
    pub(crate) fn new(cfg: PerKeyConfig) -> KeyMap {
        let mut n = 1;
        while n < MAX_SHARDS && cfg.max_keys / (n * 2) >= MIN_PER_SHARD {
            n *= 2;
        }
        let (base, extra) = (cfg.max_keys / n, cfg.max_keys % n);
        let shards = (0..n)
            .map(|i| {
                Padded(ShardCell {
                    lock: Mutex::new(Shard {
                        table: HashTable::new(),
                        entries: Vec::new(),
                        cap: base + usize::from(i < extra),
                        hand: 0,
                        next_gen: 0,
                    }),
                    lease: AtomicU64::new(0f64.to_bits()),
                })
            })
            .collect();
        KeyMap {
            idle_ttl_ns: cfg.idle_ttl_ms * 1e6,
            cfg,
            hasher: KeyHasher::process(),
            shards,
        }
    }

    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> &ShardCell {
        &self.shards[shard_index(hash, self.shards.len())].0
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock.lock().entries.len()).sum()
    }

    pub(crate) fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.0.lock.lock();
            s.table = HashTable::new();
            s.entries = Vec::new();
            s.hand = 0;
        }
    }

    pub(crate) fn remove(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock.lock();
        match shard.find(hash, key) {
            Some(i) => {
                shard.remove_at(i);
                true
            }
            None => false,
        }
    }

    pub(crate) fn tokens(&self, key: &[u8], now_ns: u64) -> Option<f64> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock.lock();
        shard
            .find(hash, key)
            .map(|i| shard.entries[i].bucket.tokens_at(self.cfg.capacity, self.cfg.refill_per_sec, now_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 256, 513, 10_000, 1_000_000, 1_000_003] {
            let m = KeyMap::new(PerKeyConfig { capacity: 1.0, refill_per_sec: 1.0, max_keys: max, idle_ttl_ms: 1.0 });
            let total: usize = m.shards.iter().map(|s| s.0.lock.lock().cap).sum();
            assert_eq!(total, max);
            assert!(m.shards.len().is_power_of_two() && m.shards.len() <= MAX_SHARDS);
        }
    }

    #[test]
    fn an_entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }
}

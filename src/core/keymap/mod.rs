//! Bounded sharded key state: the per-key buckets of one ledger tier.
//!
//! The keys of a tier live in `shards` indexes (`keystore::KeyIndex`) whose capacities add up to
//! `max_keys`; bits of a key's keyed hash (`keystore::KeyHasher`) pick its shard, each shard behind its
//! own lock on its own cache line.
//! Each key's entry has a lock of its own and a stable address (`entries.rs`), so a key's entry can
//! also be named by position (`Slot`) and debited again without hashing and without the shard's lock.
//! Eviction and the idle sweep (the keystore's clock hand, under `eviction.rs`'s preference) keep every
//! shard within its cap.
mod entries;
mod entry;
mod eviction;
mod shard;
mod slot;

pub(crate) use entry::INLINE_KEY;
/// Bytes of one entry (one cache line).
pub(crate) const ENTRY_BYTES: usize = std::mem::size_of::<entry::Entry>();
pub(crate) use crate::core::keystore::{shard_index, KeyHasher};
pub(crate) use entry::EntryData;
pub(crate) use shard::{EntryGuard, ShardCell};
pub use slot::Slot;

use crate::core::keystore::shard_caps;
use crate::core::ledger::PerKeyConfig;
use crate::core::padded::Padded;
use crate::core::sync::Mutex;
use entries::Entries;
use shard::Shard;

pub(crate) struct KeyMap {
    pub(crate) cfg: PerKeyConfig,
    pub(crate) idle_ttl_ns: f64,
    pub(crate) hasher: KeyHasher,
    pub(crate) shards: Box<[Padded<ShardCell>]>,
}

impl KeyMap {
    pub(crate) fn new(cfg: PerKeyConfig) -> KeyMap {
        let shards = shard_caps(cfg.max_keys).map(|cap| Padded(ShardCell { lock: Mutex::new(Shard::new(cap)), entries: Entries::new(cap) })).collect();
        KeyMap { idle_ttl_ns: cfg.idle_ttl_ms * 1e6, cfg, hasher: KeyHasher::process(), shards }
    }

    #[inline]
    pub(crate) fn shard(&self, hash: u64) -> &ShardCell {
        &self.shards[shard_index(hash, self.shards.len())].0
    }

    /// `key`'s entry, locked (inserted with a full bucket if it is new), and its slot; `now_ns` is read
    /// once the shard is locked. The shard's lock is released before this returns.
    #[inline]
    pub(crate) fn entry(&self, hash: u64, key: &[u8], now: impl FnOnce() -> u64) -> (EntryGuard<'_>, Slot, u64) {
        let cell = self.shard(hash);
        let mut shard = cell.lock.lock();
        let now_ns = now();
        let (e, slot) = shard.get_or_insert(self, &cell.entries, hash, key, now_ns);
        (e, slot, now_ns)
    }

    /// The entry `slot` names, locked, if it still holds the key it held then (no shard lock taken).
    #[inline]
    pub(crate) fn at(&self, slot: &Slot) -> Option<EntryGuard<'_>> {
        self.shard(slot.hash).at(slot)
    }

    /// `at` without the entry's lock.
    ///
    /// # Safety
    /// As `ShardCell::at_unlocked`: no other thread uses the map meanwhile.
    #[cfg(not(loom))]
    #[inline]
    #[allow(clippy::mut_from_ref)] // exclusive by the caller's promise, as a lock would make it
    pub(crate) unsafe fn at_unlocked(&self, slot: &Slot) -> Option<&mut EntryData> {
        self.shard(slot.hash).at_unlocked(slot)
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock.lock().index.live()).sum()
    }

    pub(crate) fn clear(&self) {
        for s in self.shards.iter() {
            s.0.lock.lock().clear(&s.0.entries);
        }
    }

    pub(crate) fn remove(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let cell = self.shard(hash);
        let mut shard = cell.lock.lock();
        match shard.find(&cell.entries, hash, key) {
            Some((i, mut e)) => {
                shard.remove(i, &mut e, hash);
                true
            }
            None => false,
        }
    }

    pub(crate) fn tokens(&self, key: &[u8], now_ns: u64) -> Option<f64> {
        let hash = self.hasher.hash_one(key);
        let cell = self.shard(hash);
        let shard = cell.lock.lock();
        shard.find(&cell.entries, hash, key).map(|(_, e)| e.bucket.tokens_at(self.cfg.capacity, self.cfg.refill_per_sec, now_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 256, 513, 10_000, 1_000_000, 1_000_003] {
            let m = KeyMap::new(PerKeyConfig { capacity: 1.0, refill_per_sec: 1.0, max_keys: max, idle_ttl_ms: 1.0 });
            let total: usize = m.shards.iter().map(|s| s.0.lock.lock().index.cap()).sum();
            assert_eq!(total, max);
        }
    }

    #[test]
    fn an_entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<entry::Entry>(), 64);
        assert_eq!(std::mem::align_of::<entry::Entry>(), 64);
    }
}

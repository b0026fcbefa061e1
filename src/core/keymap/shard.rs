//! One shard of a key map: a hash table of indices into a vector of entries, capped at `cap`.
use super::key::{Probe, StoredKey};
use super::KeyMap;
use crate::core::bucket::Bucket;
use hashbrown::HashTable;

pub(crate) struct Entry {
    pub(crate) hash: u64,
    pub(crate) bucket: Bucket,
    pub(crate) key: StoredKey,
}

pub(crate) struct Shard {
    pub(crate) table: HashTable<u32>,
    pub(crate) entries: Vec<Entry>,
    pub(crate) cap: usize,
    pub(crate) hand: usize,
    /// The generation the next entry placed at an index gets (wrapping; never reset).
    pub(crate) next_gen: u32,
}

impl Shard {
    #[inline]
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let probe = Probe::new(key);
        let entries = &self.entries;
        self.table
            .find(hash, |&i| {
                let e = &entries[i as usize];
                e.hash == hash && e.key.matches(&probe)
            })
            .map(|&i| i as usize)
    }

    pub(crate) fn remove_at(&mut self, idx: usize) {
        let hash = self.entries[idx].hash;
        if let Ok(slot) = self.table.find_entry(hash, |&i| i as usize == idx) {
            slot.remove();
        }
        let last = self.entries.len() - 1;
        if idx != last {
            let moved = self.entries[last].hash;
            if let Some(slot) = self.table.find_mut(moved, |&i| i as usize == last) {
                *slot = idx as u32;
            }
            // The moved entry is at a new index: slots that knew it at `last` go stale.
            self.entries[last].key.gen = self.new_gen();
        }
        self.entries.swap_remove(idx);
    }

    #[inline]
    pub(crate) fn new_gen(&mut self) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1);
        self.next_gen
    }

    /// The index of `key`'s bucket, inserting a full one (evicting if the shard is at its cap).
    #[inline]
    pub(crate) fn get_or_insert(&mut self, map: &KeyMap, hash: u64, key: &[u8], now_ns: u64) -> usize {
        if let Some(i) = self.find(hash, key) {
            return i;
        }
        self.sweep(map.idle_ttl_ns, now_ns);
        if self.entries.len() >= self.cap {
            let v = self.victim(&map.cfg, map.idle_ttl_ns, now_ns);
            self.remove_at(v);
        }
        let idx = self.entries.len();
        if idx == self.entries.capacity() {
            // Grow by doubling, but never past the shard's cap.
            self.entries.reserve_exact(idx.max(8).min(self.cap - idx));
        }
        let mut stored = StoredKey::new(key);
        stored.gen = self.new_gen();
        self.entries.push(Entry { hash, key: stored, bucket: Bucket::full(map.cfg.capacity, now_ns) });
        let entries = &self.entries;
        self.table.insert_unique(hash, idx as u32, |&i| entries[i as usize].hash);
        idx
    }
}

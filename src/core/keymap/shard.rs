//! One shard of a key map: a `KeyIndex` from key to entry position, over entries at stable addresses.
//!
//! Lock order: the shard's lock, then an entry's (a lookup, an insert, eviction), then the tier pool's
//! (the debit). A debit by slot takes the entry's lock alone; so an entry is placed, moved out of or
//! emptied only while both its shard's lock and its own are held.
use super::entries::Entries;
use super::entry::{EntryData, Probe};
use super::{KeyMap, Slot};
use crate::core::bucket::Bucket;
use crate::core::keystore::{Clock, KeyIndex};
use crate::core::sync::{Mutex, MutexGuard};

/// A shard: its lock and index, and the entries the index points into.
pub(crate) struct ShardCell {
    pub(crate) lock: Mutex<Shard>,
    pub(crate) entries: Entries,
}

pub(crate) struct Shard {
    pub(crate) index: KeyIndex,
    /// Where eviction and the sweep look next.
    pub(crate) clock: Clock,
}

/// A key's entry, locked.
pub(crate) type EntryGuard<'a> = MutexGuard<'a, EntryData>;

impl Shard {
    pub(crate) fn new(cap: usize) -> Shard {
        Shard { index: KeyIndex::new(cap), clock: Clock::default() }
    }

    /// The index of `key`'s entry and the entry, locked; `None` if the shard does not hold the key.
    #[inline]
    pub(crate) fn find<'e>(&self, entries: &'e Entries, hash: u64, key: &[u8]) -> Option<(usize, EntryGuard<'e>)> {
        let probe = Probe::new(key);
        for i in self.index.candidates(hash) {
            let e = entries.get(i)?.0.lock();
            if e.matches(&probe) {
                return Some((i, e));
            }
        }
        None
    }

    /// Empties entry `idx` (whose lock the caller holds as `e`) and frees its index.
    pub(crate) fn remove(&mut self, idx: usize, e: &mut EntryData, hash: u64) {
        let gen = self.index.unlink(hash, idx);
        e.clear(gen);
    }

    /// Forgets every key (slots naming them go stale).
    pub(crate) fn clear(&mut self, entries: &Entries) {
        for idx in 0..self.index.high() {
            if let Some(e) = entries.get(idx) {
                let mut e = e.0.lock();
                if !e.is_free() {
                    let gen = self.index.new_gen();
                    e.clear(gen);
                }
            }
        }
        self.index.reset();
        self.clock = Clock::default();
    }

    /// `key`'s entry, locked, inserting a full one if the shard does not hold it (evicting if the shard
    /// is at its cap), and the slot that names it.
    #[inline]
    pub(crate) fn get_or_insert<'e>(&mut self, map: &KeyMap, entries: &'e Entries, hash: u64, key: &[u8], now_ns: u64) -> (EntryGuard<'e>, Slot) {
        if let Some((idx, e)) = self.find(entries, hash, key) {
            let slot = Slot { hash, idx: idx as u32, gen: e.gen };
            return (e, slot);
        }
        self.sweep(map, entries, now_ns);
        if self.index.is_full() {
            self.evict(map, entries, now_ns);
        }
        let (idx, gen) = self.index.claim();
        let mut e = entries.get_or_alloc(idx).0.lock();
        e.place(key, hash, gen, Bucket::full(map.cfg.capacity, now_ns));
        self.index.link(hash, idx, |&(h, _)| h);
        (e, Slot { hash, idx: idx as u32, gen })
    }
}

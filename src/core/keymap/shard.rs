//! One shard of a key map: a hash table from key to entry index, over entries at stable addresses.
//!
//! Lock order: the shard's lock, then an entry's (a lookup, an insert, eviction), then the tier pool's
//! (the debit). A debit by slot takes the entry's lock alone; so an entry is placed, moved out of or
//! emptied only while both its shard's lock and its own are held.
use super::entries::Entries;
use super::entry::{EntryData, Probe};
use super::{KeyMap, Slot};
use crate::core::bucket::Bucket;
use crate::core::sync::{Mutex, MutexGuard};
use hashbrown::HashTable;

/// A shard: its lock and table, and the entries the table points into.
pub(crate) struct ShardCell {
    pub(crate) lock: Mutex<Shard>,
    pub(crate) entries: Entries,
}

pub(crate) struct Shard {
    /// (hash, entry index) of every key held.
    table: HashTable<(u64, u32)>,
    pub(crate) cap: usize,
    /// Keys held.
    pub(crate) live: usize,
    /// Indices handed out so far (live or free); a new key takes a free one first.
    pub(crate) high: usize,
    free: Vec<u32>,
    /// Where eviction and the sweep look next.
    pub(crate) hand: usize,
    /// The generation the next entry placed at an index gets (wrapping; never reset).
    next_gen: u32,
}

/// A key's entry, locked.
pub(crate) type EntryGuard<'a> = MutexGuard<'a, EntryData>;

impl Shard {
    pub(crate) fn new(cap: usize) -> Shard {
        Shard { table: HashTable::new(), cap, live: 0, high: 0, free: Vec::new(), hand: 0, next_gen: 0 }
    }

    #[inline]
    fn new_gen(&mut self) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1);
        self.next_gen
    }

    /// The index of `key`'s entry and the entry, locked; `None` if the shard does not hold the key.
    #[inline]
    pub(crate) fn find<'e>(&self, entries: &'e Entries, hash: u64, key: &[u8]) -> Option<(usize, EntryGuard<'e>)> {
        let probe = Probe::new(key);
        for &(h, i) in self.table.iter_hash(hash) {
            if h != hash {
                continue;
            }
            let e = entries.get(i as usize)?.0.lock();
            if e.matches(&probe) {
                return Some((i as usize, e));
            }
        }
        None
    }

    /// Empties entry `idx` (whose lock the caller holds as `e`) and frees its index.
    pub(crate) fn remove(&mut self, idx: usize, e: &mut EntryData, hash: u64) {
        if let Ok(found) = self.table.find_entry(hash, |&(_, i)| i as usize == idx) {
            found.remove();
        }
        e.clear(self.new_gen());
        self.free.push(idx as u32);
        self.live -= 1;
    }

    /// Forgets every key (slots naming them go stale).
    pub(crate) fn clear(&mut self, entries: &Entries) {
        for idx in 0..self.high {
            if let Some(e) = entries.get(idx) {
                let mut e = e.0.lock();
                if !e.is_free() {
                    let gen = self.new_gen();
                    e.clear(gen);
                }
            }
        }
        self.table = HashTable::new();
        self.free = (0..self.high as u32).rev().collect();
        self.live = 0;
        self.hand = 0;
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
        if self.live >= self.cap {
            self.evict(map, entries, now_ns);
        }
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.high += 1;
                self.high - 1
            }
        };
        let gen = self.new_gen();
        let mut e = entries.get_or_alloc(idx).0.lock();
        e.place(key, hash, gen, Bucket::full(map.cfg.capacity, now_ns));
        self.table.insert_unique(hash, (hash, idx as u32), |&(h, _)| h);
        self.live += 1;
        (e, Slot { hash, idx: idx as u32, gen })
    }
}

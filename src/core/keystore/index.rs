//! The index of a bounded store: key hashes to positions, over values kept elsewhere (a slab under
//! the same lock, or the key map's entries at stable addresses).
//!
//! A bucket is a position, with or without its key's hash beside it (`Bucket`). The key map's buckets
//! carry the hash: its values are behind their own locks, and the table must grow without reading
//! them. A slab's are bare positions (4 bytes, not 16, per bucket): its slots keep the hash, under the
//! same lock as the table. Positions are `u32`, handed out from 0 up to the cap, freed
//! ones first; every placement takes a fresh generation (per index, wrapping), which the owner stamps
//! on the value so that a position named earlier (a `Slot`, a `Handle`) can be told stale.
use hashbrown::HashTable;

/// What the index keeps per key.
pub(crate) trait Bucket: Copy {
    fn new(hash: u64, idx: u32) -> Self;
    fn idx(self) -> usize;
    /// The key's hash, if the bucket keeps it (else the owner compares hashes).
    fn hash(self) -> Option<u64>;
}

impl Bucket for (u64, u32) {
    #[inline]
    fn new(hash: u64, idx: u32) -> Self {
        (hash, idx)
    }
    #[inline]
    fn idx(self) -> usize {
        self.1 as usize
    }
    #[inline]
    fn hash(self) -> Option<u64> {
        Some(self.0)
    }
}

impl Bucket for u32 {
    #[inline]
    fn new(_: u64, idx: u32) -> Self {
        idx
    }
    #[inline]
    fn idx(self) -> usize {
        self as usize
    }
    #[inline]
    fn hash(self) -> Option<u64> {
        None
    }
}

pub(crate) struct KeyIndex<B: Bucket = (u64, u32)> {
    /// A bucket for every key held.
    table: HashTable<B>,
    cap: usize,
    /// Keys held.
    live: usize,
    /// Positions handed out so far (held or free).
    high: usize,
    free: Vec<u32>,
    /// The generation the next placement gets (wrapping; never reset).
    next_gen: u32,
}

impl<B: Bucket> KeyIndex<B> {
    /// An index of at most `cap` keys (`cap` ≤ 2^32).
    pub(crate) fn new(cap: usize) -> KeyIndex<B> {
        debug_assert!(cap <= u32::MAX as usize + 1);
        KeyIndex { table: HashTable::new(), cap, live: 0, high: 0, free: Vec::new(), next_gen: 0 }
    }

    /// The positions whose key may have `hash`: exactly `hash` when buckets keep it, else as far as the
    /// table's 7-bit tag tells (the caller compares the keys, and then the hashes).
    #[inline]
    pub(crate) fn candidates(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        self.table.iter_hash(hash).filter(move |b| b.hash().is_none_or(|h| h == hash)).map(|b| b.idx())
    }

    /// A free position for a new key (the index must not be full), and the generation to stamp on it.
    /// The key is held once `link` is called.
    #[inline]
    pub(crate) fn claim(&mut self) -> (usize, u32) {
        debug_assert!(!self.is_full());
        let idx = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.high += 1;
                self.high - 1
            }
        };
        (idx, self.new_gen())
    }

    /// Holds the key of `hash` at `idx` (from `claim`); `rehash` gives a bucket's hash when the table
    /// grows.
    #[inline]
    pub(crate) fn link(&mut self, hash: u64, idx: usize, rehash: impl Fn(&B) -> u64) {
        self.table.insert_unique(hash, B::new(hash, idx as u32), rehash);
        self.live += 1;
    }

    /// Forgets the key of `hash` at `idx` and frees the position; returns a fresh generation for the
    /// owner to stamp on the emptied value (so that names of the old key go stale).
    pub(crate) fn unlink(&mut self, hash: u64, idx: usize) -> u32 {
        if let Ok(found) = self.table.find_entry(hash, |b| b.idx() == idx) {
            found.remove();
        }
        self.free.push(idx as u32);
        self.live -= 1;
        self.new_gen()
    }

    #[inline]
    pub(crate) fn new_gen(&mut self) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1);
        self.next_gen
    }

    /// Forgets every key (the owner empties the values, with `new_gen`); positions stay allocated.
    pub(crate) fn reset(&mut self) {
        self.table = HashTable::new();
        self.free = (0..self.high as u32).rev().collect();
        self.live = 0;
    }

    #[inline]
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    #[inline]
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.live >= self.cap
    }

    /// Positions handed out so far: every held position is below.
    #[inline]
    pub(crate) fn high(&self) -> usize {
        self.high
    }

    /// Table buckets allocated (for memory figures).
    pub(crate) fn table_capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Bytes the table holds now: a bucket and a control byte per slot, about 8/7 slots per key of
    /// capacity.
    pub(crate) fn table_bytes(&self) -> usize {
        self.table.capacity() * 8 / 7 * (std::mem::size_of::<B>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_reused_and_generations_move_on() {
        let mut x: KeyIndex = KeyIndex::new(2);
        let (a, ga) = x.claim();
        x.link(7, a, |&(h, _)| h);
        let (b, _) = x.claim();
        x.link(7, b, |&(h, _)| h);
        assert!(x.is_full());
        assert_eq!(x.candidates(7).collect::<Vec<_>>().len(), 2, "equal hashes, both candidates");
        assert_eq!(x.candidates(8).count(), 0);
        let g = x.unlink(7, a);
        assert_ne!(g, ga);
        assert_eq!(x.candidates(7).collect::<Vec<_>>(), vec![b]);
        let (c, gc) = x.claim();
        assert_eq!((c, x.high()), (a, 2), "the freed position first");
        assert_ne!(gc, ga);
        x.link(9, c, |&(h, _)| h);
        x.reset();
        assert_eq!((x.live(), x.candidates(9).count()), (0, 0));
        let (d, _) = x.claim();
        assert_eq!(d, 0, "after a reset, positions from the bottom");
    }
}

//! Slots: a key's entry named by position.
use super::entry::tag_of;
#[cfg(not(loom))]
use super::entry::EntryData;
use super::shard::{EntryGuard, ShardCell};

/// Where a key's bucket was found: for a caller that looks a key up once and then debits it by
/// position (`try_consume_slot_now`), skipping the key's hashing, the table lookup and the shard's
/// lock. A slot goes stale when its entry is emptied (eviction, sweep, reset); it is then refused,
/// never misread: the entry at `idx` must carry both `gen` (a per-shard counter stamped on every
/// placement of a key) and the top 16 bits of the key's 64-bit `hash` (whose other bits picked the
/// shard). A wrong match needs the counter to wrap at that very index (2^32 placements in the shard)
/// onto a key whose hash agrees in those bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub(crate) hash: u64,
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

impl ShardCell {
    /// The entry a slot names, locked, if it still holds the key it held then.
    #[inline]
    pub(crate) fn at(&self, slot: &Slot) -> Option<EntryGuard<'_>> {
        let e = self.entries.get(slot.idx as usize)?.0.lock();
        (e.gen == slot.gen && e.tag == tag_of(slot.hash) && !e.is_free()).then_some(e)
    }

    /// `at` without taking the entry's lock.
    ///
    /// # Safety
    /// No other thread may use the map while the returned reference lives (`Ledger::try_consume_slot_exclusive`).
    #[cfg(not(loom))]
    #[inline]
    #[allow(clippy::mut_from_ref)] // exclusive by the caller's promise, as a lock would make it
    pub(crate) unsafe fn at_unlocked(&self, slot: &Slot) -> Option<&mut EntryData> {
        let e = &mut *self.entries.get(slot.idx as usize)?.0.data_ptr();
        (e.gen == slot.gen && e.tag == tag_of(slot.hash) && !e.is_free()).then_some(e)
    }
}

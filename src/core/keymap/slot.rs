//! Slots: a key's entry named by position.
use super::Shard;

/// Where a key's bucket was found: for a caller that looks a key up once and then debits it by
/// position (`try_consume_slot_now`), skipping the key's hashing and table lookup. A slot goes stale
/// when its entry is removed or moved (eviction, sweep, reset); it is then refused, never misread:
/// the entry at `idx` must carry both `gen` (a per-shard counter stamped on every entry placed at an
/// index) and the key's 64-bit `hash` (which also picks the shard). A wrong match needs the counter
/// to wrap at that very index (2^32 placements in the shard) onto a key of the same 64-bit hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub(crate) hash: u64,
    pub(crate) idx: u32,
    pub(crate) gen: u32,
}

impl Shard {
    /// The index a slot names, if its entry is still there.
    #[inline]
    pub(crate) fn at(&self, slot: &Slot) -> Option<usize> {
        let i = slot.idx as usize;
        let e = self.entries.get(i)?;
        (e.key.gen == slot.gen && e.hash == slot.hash).then_some(i)
    }
}

//! A shard's entries at stable addresses: chunks allocated as the shard grows and never moved or freed
//! while the map lives, so a debit by slot can reach its entry without the shard's lock. Chunk `c` holds
//! `FIRST << c` entries (the first 16, then 32, ...), so a shard allocates at most about twice what it
//! has used, never more than its cap, and the chunk of an index is one `leading_zeros` away.
use super::entry::Entry;
use std::sync::OnceLock;

const FIRST: usize = 16;
/// Enough chunks for a shard of 2^32 entries.
const CHUNKS: usize = 29;

pub(crate) struct Entries {
    chunks: [OnceLock<Box<[Entry]>>; CHUNKS],
    cap: usize,
}

/// The chunk of `idx` and its index inside it.
#[inline]
fn locate(idx: usize) -> (usize, usize) {
    let c = (usize::BITS - 1 - (idx / FIRST + 1).leading_zeros()) as usize;
    (c, idx - FIRST * ((1 << c) - 1))
}

impl Entries {
    pub(crate) fn new(cap: usize) -> Entries {
        Entries { chunks: std::array::from_fn(|_| OnceLock::new()), cap }
    }

    /// The entry at `idx`, if its chunk has been allocated.
    #[inline]
    pub(crate) fn get(&self, idx: usize) -> Option<&Entry> {
        let (c, i) = locate(idx);
        self.chunks.get(c)?.get()?.get(i)
    }

    /// The entry at `idx` (`< cap`), allocating its chunk if needed (under the shard's lock: one
    /// allocator call per chunk, chunks doubling).
    pub(crate) fn get_or_alloc(&self, idx: usize) -> &Entry {
        let (c, i) = locate(idx);
        let start = FIRST * ((1 << c) - 1);
        let len = (FIRST << c).min(self.cap - start);
        &self.chunks[c].get_or_init(|| (0..len).map(|_| Entry::free()).collect())[i]
    }

    /// Entries allocated.
    #[cfg(test)]
    fn allocated(&self) -> usize {
        self.chunks.iter().filter_map(OnceLock::get).map(|c| c.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_map_to_chunks_without_gaps() {
        let mut expect = (0, 0);
        for idx in 0..10_000 {
            assert_eq!(locate(idx), expect, "{idx}");
            expect.1 += 1;
            if expect.1 == FIRST << expect.0 {
                expect = (expect.0 + 1, 0);
            }
        }
        assert!(locate(u32::MAX as usize).0 < CHUNKS);
    }

    #[test]
    fn chunks_are_allocated_on_demand_and_stop_at_the_cap() {
        let e = Entries::new(100);
        assert!(e.get(0).is_none());
        let p = e.get_or_alloc(0) as *const Entry;
        assert_eq!(e.allocated(), 16);
        assert_eq!(e.get(0).map(|x| x as *const Entry), Some(p), "a stable address");
        e.get_or_alloc(99);
        assert!(e.get(47).is_none(), "chunk 1 (16..48) was never asked for");
        assert_eq!(e.allocated(), 16 + 100 - 48, "the last chunk is cut at the cap");
        assert!(e.get(100).is_none());
    }
}

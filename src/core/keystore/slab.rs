//! A bounded keyed store whose values sit under the same lock as its index: a slab of positions
//! (stable while a key is held, so an owner can name a value without hashing: `Handle`) behind a
//! `KeyIndex`, evicted and swept with a `Clock`. The owner hashes keys (`KeyHasher`) and compares
//! them (`find`'s closure): what a key is (bytes, a (limit, key) pair, a ban target) is the value's.
#[cfg(test)]
use super::clock::Look;
use super::clock::{Clock, Eviction};
use super::index::KeyIndex;

/// A position and the generation of the value placed there, so a stale name never reaches a newer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    idx: u32,
    gen: u32,
}

/// The generation a slot keeps: `u32` for a store that hands out `Handle`s, `()` for one that does
/// not (the named limits' store: 8 bytes less per slot, a tenth of a small state's cost per key).
pub(crate) trait Generation: Copy {
    fn stamp(gen: u32) -> Self;
}

impl Generation for u32 {
    #[inline]
    fn stamp(gen: u32) -> u32 {
        gen
    }
}

impl Generation for () {
    #[inline]
    fn stamp(_: u32) {}
}

struct Slot<V, G> {
    hash: u64,
    gen: G,
    val: Option<V>,
}

pub(crate) struct Slab<V, G: Generation = u32> {
    /// Bare positions: the slots keep the hashes.
    index: KeyIndex<u32>,
    slots: Vec<Slot<V, G>>,
    /// Where eviction and the sweep look next.
    clock: Clock,
}

impl<V, G: Generation> Slab<V, G> {
    /// A store of at most `cap` keys; nothing is allocated until a key is inserted.
    pub(crate) fn new(cap: usize) -> Slab<V, G> {
        Slab { index: KeyIndex::new(cap), slots: Vec::new(), clock: Clock::default() }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.index.live()
    }

    #[cfg(test)]
    pub(crate) fn cap(&self) -> usize {
        self.index.cap()
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.index.is_full()
    }

    /// The position of the value of `hash` that `eq` accepts.
    #[inline]
    pub(crate) fn find(&self, hash: u64, eq: impl Fn(&V) -> bool) -> Option<u32> {
        let slots = &self.slots;
        self.index.candidates(hash).find(|&i| slots[i].hash == hash && slots[i].val.as_ref().is_some_and(&eq)).map(|i| i as u32)
    }

    #[inline]
    pub(crate) fn get(&self, idx: u32) -> &V {
        self.slots[idx as usize].val.as_ref().expect("a held position")
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, idx: u32) -> &mut V {
        self.slots[idx as usize].val.as_mut().expect("a held position")
    }

    /// Places `val` (the store must not be full); its position.
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, val: V) -> u32 {
        let (idx, gen) = self.index.claim();
        let gen = G::stamp(gen);
        if idx == self.slots.len() {
            if idx == self.slots.capacity() {
                // Grow by doubling, never past the cap.
                self.slots.reserve_exact(idx.max(8).min(self.index.cap() - idx));
            }
            self.slots.push(Slot { hash, gen, val: Some(val) });
        } else {
            self.slots[idx] = Slot { hash, gen, val: Some(val) };
        }
        let slots = &self.slots;
        self.index.link(hash, idx, |&i| slots[i as usize].hash);
        idx as u32
    }

    pub(crate) fn remove(&mut self, idx: u32) -> V {
        let s = &mut self.slots[idx as usize];
        let val = s.val.take().expect("a held position");
        s.gen = G::stamp(self.index.unlink(s.hash, idx as usize));
        val
    }

    /// The value to evict for a new key (`Clock::victim` under `policy`).
    pub(crate) fn victim(&mut self, policy: &impl Eviction<V>) -> Option<u32> {
        let slots = &self.slots;
        self.clock.victim(slots.len(), |i| slots[i].val.as_ref().map(|v| policy.look(v))).map(|i| i as u32)
    }

    /// Makes room for one new key: evicts the victim if the store is full; whether there is room.
    #[inline]
    pub(crate) fn make_room(&mut self, policy: &impl Eviction<V>) -> bool {
        if !self.is_full() {
            return true;
        }
        match self.victim(policy) {
            Some(v) => {
                self.remove(v);
                true
            }
            None => false,
        }
    }

    /// Drops up to `clock::SWEEP` values at the hand that `policy` finds sweepable.
    #[inline]
    pub(crate) fn sweep(&mut self, policy: &impl Eviction<V>) {
        let (slots, index) = (&mut self.slots, &mut self.index);
        self.clock.sweep(slots.len(), |i| {
            let s = &mut slots[i];
            let Some(v) = s.val.as_ref() else { return false };
            if policy.sweepable(v) {
                s.val = None;
                s.gen = G::stamp(index.unlink(s.hash, i));
            }
            true
        });
    }

    /// The next held position for a sweep the owner drives with its own `clock`.
    pub(crate) fn next_held(&self, clock: &mut Clock) -> Option<u32> {
        clock.next_held(self.slots.len(), |i| self.slots[i].val.is_some()).map(|i| i as u32)
    }

    /// The values held, with their positions.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.val.as_ref().map(|v| (i as u32, v)))
    }

    /// Removes every value, passing each to `out`, and frees what the store allocated.
    pub(crate) fn drain(&mut self, mut out: impl FnMut(V)) {
        for s in &mut self.slots {
            if let Some(v) = s.val.take() {
                out(v);
            }
        }
        *self = Slab::new(self.index.cap());
    }

    /// Positions handed out so far (held or free): the most values held at once.
    #[cfg(test)]
    pub(crate) fn positions(&self) -> usize {
        self.slots.len()
    }

    /// (value slots, table buckets) allocated.
    pub(crate) fn allocated(&self) -> (usize, usize) {
        (self.slots.capacity(), self.index.table_capacity())
    }

    /// Bytes the store holds now (slots allocated, not just used, and the index's table), plus
    /// `heap` of each value held.
    pub(crate) fn memory_bytes(&self, heap: impl Fn(&V) -> usize) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot<V, G>>() + self.index.table_bytes() + self.iter().map(|(_, v)| heap(v)).sum::<usize>()
    }
}

/// Names by position, for a store that keeps generations.
impl<V> Slab<V, u32> {
    pub(crate) fn handle(&self, idx: u32) -> Handle {
        Handle { idx, gen: self.slots[idx as usize].gen }
    }

    /// The position a handle names, if its value is still there.
    pub(crate) fn resolve(&self, h: Handle) -> Option<u32> {
        let s = self.slots.get(h.idx as usize)?;
        (s.gen == h.gen && s.val.is_some()).then_some(h.idx)
    }
}

/// `Look` and `sweepable` from two closures, for tests.
#[cfg(test)]
pub(crate) struct ByFn<L, S>(pub L, pub S);

#[cfg(test)]
impl<V, L: Fn(&V) -> Look, S: Fn(&V) -> bool> Eviction<V> for ByFn<L, S> {
    fn look(&self, v: &V) -> Look {
        (self.0)(v)
    }
    fn sweepable(&self, v: &V) -> bool {
        (self.1)(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(s: &mut Slab<(&'static str, u64)>, key: &'static str, used: u64) -> u32 {
        s.insert(key.len() as u64, (key, used))
    }

    fn find(s: &Slab<(&'static str, u64)>, key: &str) -> Option<u32> {
        s.find(key.len() as u64, |v| v.0 == key)
    }

    #[test]
    fn keys_are_found_removed_and_their_positions_reused_with_stale_handles() {
        // Hashes collide on purpose (the key's length): `find` still tells keys apart.
        let mut s = Slab::new(3);
        let a = add(&mut s, "a", 0);
        let b = add(&mut s, "b", 0);
        assert_eq!((find(&s, "a"), find(&s, "b"), find(&s, "c")), (Some(a), Some(b), None));
        let h = s.handle(a);
        assert_eq!(s.resolve(h), Some(a));
        assert_eq!(s.remove(a).0, "a");
        assert_eq!((s.resolve(h), find(&s, "a"), s.len()), (None, None, 1));
        let c = add(&mut s, "c", 0);
        assert_eq!((c, s.resolve(h)), (a, None), "the position is reused under a newer generation");
        let mut out = vec![];
        s.drain(|v| out.push(v.0));
        out.sort();
        assert_eq!((out, s.len(), s.allocated()), (vec!["b", "c"], 0, (0, 0)));
    }

    #[test]
    fn a_full_slab_evicts_by_its_owners_preference_and_sweeps_a_few_at_a_time() {
        let mut s = Slab::new(3);
        add(&mut s, "old", 10);
        add(&mut s, "older", 5);
        add(&mut s, "new", 30);
        let lru = ByFn(|v: &(&str, u64)| Look::Keep(v.1), |_: &(&str, u64)| false);
        assert!(s.make_room(&lru));
        assert_eq!((find(&s, "older"), s.len()), (None, 2), "the least recently used");
        add(&mut s, "newer", 40);
        let never = ByFn(|_: &(&str, u64)| Look::Pass, |_: &(&str, u64)| false);
        assert!(!s.make_room(&never) && s.len() == 3, "nothing evictable: no room");
        let all = ByFn(|_: &(&str, u64)| Look::Pass, |_: &(&str, u64)| true);
        s.sweep(&all);
        assert_eq!(s.len(), 1, "two a sweep");
        let mut c = Clock::default();
        let left = s.next_held(&mut c).unwrap();
        assert_eq!((s.next_held(&mut c), s.iter().count()), (Some(left), 1));
    }
}

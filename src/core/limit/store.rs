//! A bounded map from keys to limit state. Keys are chosen by clients (IPs, user ids), so by attackers:
//! - the table is hashed with the key map's keyed SipHash (`core::keymap::KeyHasher`), so collisions
//!   cannot be aimed at;
//! - the number of keys is capped (`max_keys`, split exactly over up to 64 shards, each behind its own
//!   lock on its own cache line): a flood of unique keys replaces entries, it never grows memory;
//! - a new key in a full shard evicts, from a scan of up to `EVICT_SCAN` entries at a clock hand, the
//!   first idle one (its state back to fresh, so forgetting it loses nothing), else the least recently
//!   touched one of the scan. Each insert also sweeps `SWEEP` entries for idleness (idle and untouched
//!   for `SWEEP_AFTER_NS`), so memory drains
//!   back after a flood without any timer.
//!
//! Layout: each shard is one open-addressing table (linear probing, at most 7/8 full) whose slots
//! hold the entries themselves, one cache line each (key inline, the time touched, the state), beside
//! a byte per slot (empty, or 7 bits of the hash) that probes read first. A lookup of a key on cold
//! memory reads the tag bytes (small, 1 byte a slot) and the key's own line: no index to follow into
//! a separate vector of entries. Removal shifts the following entries back (no tombstones).
//!
//! What eviction costs: a flood of unique keys larger than the cap makes busy keys forget their
//! counts (a fresh state admits more). Size `max_keys` above the number of clients that are active at
//! once; the sweep keeps idle ones from taking room.
use crate::core::keymap::{shard_caps, shard_index, KeyHasher};
use crate::core::padded::Padded;
use parking_lot::Mutex;

/// The largest number of entries one eviction looks at.
const EVICT_SCAN: usize = 32;
/// Slots (held or empty) one eviction passes at most: bounded work whatever the table's load.
const EVICT_REACH: usize = 4 * EVICT_SCAN;
/// Entries checked for idleness on every insert of a new key.
const SWEEP: usize = 2;
/// Slots (held or empty) the sweep passes at most.
const SWEEP_REACH: usize = 8;
/// The sweep leaves an idle entry alone until it has not been touched for this long: a token bucket
/// of a light client is full (idle) again between its requests, and sweeping it at once made each
/// of them look its key up, insert it and sweep again. Eviction of a full shard still takes idle
/// entries first, whatever their age.
const SWEEP_AFTER_NS: u64 = 1_000_000_000;
/// A table's first size, in slots.
const FIRST_SLOTS: usize = 16;

/// Keys up to this long live in the entry itself (an address key is 7 or 19 bytes; many user ids
/// fit): comparing a probed key then reads the entry's own cache line, not a second allocation.
const INLINE_KEY: usize = 22;

/// A stored key: inline when short, else on the heap. 24 bytes either way.
enum StoredKey {
    Inline { len: u8, buf: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl StoredKey {
    fn new(key: &[u8]) -> StoredKey {
        if key.len() <= INLINE_KEY {
            let mut buf = [0u8; INLINE_KEY];
            buf[..key.len()].copy_from_slice(key);
            StoredKey::Inline { len: key.len() as u8, buf }
        } else {
            StoredKey::Heap(key.into())
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            StoredKey::Inline { len, buf } => &buf[..*len as usize],
            StoredKey::Heap(b) => b,
        }
    }

    /// Heap bytes held (for `memory_bytes`).
    fn heap_len(&self) -> usize {
        match self {
            StoredKey::Inline { .. } => 0,
            StoredKey::Heap(b) => b.len(),
        }
    }
}

/// One key's entry: a cache line of its own when the state is small (24 bytes or less).
#[repr(align(64))]
pub(crate) struct Entry<S> {
    touched_ns: u64,
    key: StoredKey,
    /// The low 32 bits of the key's hash: its home slot in any table (a shard has fewer than 2^32
    /// slots), so growing and removing never hash a key again.
    hash: u32,
    state: S,
}

/// A slot's tag: 0 when empty, else the high bit and 7 bits of the hash that the home slot does
/// not use (in tables of up to 2^25 slots).
#[inline]
fn tag_of(hash: u32) -> u8 {
    0x80 | (hash >> 25) as u8
}

struct Shard<S> {
    /// One per slot: 0 (empty) or the entry's `tag_of`.
    tags: Box<[u8]>,
    slots: Box<[Option<Entry<S>>]>,
    len: usize,
    cap: usize,
    /// The most slots this shard's table grows to: room for `cap` keys at 7/8 full.
    max_slots: usize,
    hand: usize,
}

pub struct Store<S> {
    hasher: KeyHasher,
    shards: Box<[Padded<Mutex<Shard<S>>>]>,
    max_keys: usize,
}

/// Where a probe for a key ended: at its entry, or at an empty slot (the key is not held).
enum Probe {
    Found(usize),
    Vacant,
}

fn empty_slots<S>(n: usize) -> Box<[Option<Entry<S>>]> {
    (0..n).map(|_| None).collect()
}

impl<S> Shard<S> {
    fn new(cap: usize) -> Shard<S> {
        // Slots for `cap` keys at most 7/8 full, a power of two.
        let max_slots = (cap + cap.div_ceil(7)).next_power_of_two().max(FIRST_SLOTS);
        Shard { tags: Box::new([]), slots: Box::new([]), len: 0, cap, max_slots, hand: 0 }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The one probe of a lookup: the key's slot, or the first empty slot of its run (an insert
    /// looks for that one again after its sweep, which may have moved entries).
    #[inline]
    fn probe(&self, hash: u32, key: &[u8]) -> Probe {
        let mask = self.mask();
        let tag = tag_of(hash);
        let mut i = hash as usize & mask;
        loop {
            let t = self.tags[i];
            if t == 0 {
                return Probe::Vacant;
            }
            if t == tag {
                if let Some(e) = &self.slots[i] {
                    if e.hash == hash && e.key.bytes() == key {
                        return Probe::Found(i);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    fn find(&self, hash: u32, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        match self.probe(hash, key) {
            Probe::Found(i) => Some(i),
            Probe::Vacant => None,
        }
    }

    /// The first empty slot of `hash`'s run (the table has one: it is at most 7/8 full).
    fn vacant(&self, hash: u32) -> usize {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.tags[i] != 0 {
            i = (i + 1) & mask;
        }
        i
    }

    /// Empties slot `i` and shifts the entries after it back, so every probe still finds its key
    /// before the first empty slot (no tombstones).
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.mask();
        self.slots[i] = None;
        self.tags[i] = 0;
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            if self.tags[j] == 0 {
                return;
            }
            let home = self.slots[j].as_ref().map_or(j, |e| e.hash as usize & mask);
            // The entry at j may move to i if i lies on its probe path: from home to j, cyclically.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = self.slots[j].take();
                self.tags[i] = self.tags[j];
                self.tags[j] = 0;
                i = j;
            }
        }
    }

    /// Doubles the table (or makes its first one), placing every entry again, except the idle ones
    /// the sweep would take (growth visits every entry: the sweep's hand starts over on the new table).
    fn grow(&mut self, idle: &impl Fn(&S) -> bool, now_ns: u64) {
        let n = (self.slots.len() * 2).max(FIRST_SLOTS).min(self.max_slots);
        let old = std::mem::replace(&mut self.slots, empty_slots(n));
        self.tags = vec![0u8; n].into_boxed_slice();
        self.hand = 0;
        for e in old.into_vec().into_iter().flatten() {
            if now_ns.saturating_sub(e.touched_ns) >= SWEEP_AFTER_NS && idle(&e.state) {
                self.len -= 1;
                continue;
            }
            let i = self.vacant(e.hash);
            self.tags[i] = tag_of(e.hash);
            self.slots[i] = Some(e);
        }
    }

    /// The slot to evict: the first idle entry from the hand, else the least recently touched of
    /// the scan. The shard holds at least one entry.
    fn victim(&mut self, idle: &impl Fn(&S) -> bool) -> usize {
        let n = self.slots.len();
        let mut oldest = (u64::MAX, usize::MAX);
        let mut seen = 0;
        for k in 0..n.min(EVICT_REACH) {
            let i = (self.hand + k) & (n - 1);
            let Some(e) = &self.slots[i] else { continue };
            if idle(&e.state) {
                self.hand = i + 1;
                return i;
            }
            if e.touched_ns < oldest.0 {
                oldest = (e.touched_ns, i);
            }
            seen += 1;
            if seen == EVICT_SCAN {
                self.hand = i + 1;
                return oldest.1;
            }
        }
        self.hand += n.min(EVICT_REACH);
        if oldest.1 != usize::MAX {
            return oldest.1;
        }
        // Nothing held within reach (a sparse stretch): the first entry after it.
        (0..n).map(|k| (self.hand + k) & (n - 1)).find(|&i| self.slots[i].is_some()).expect("the shard holds an entry")
    }

    fn sweep(&mut self, idle: &impl Fn(&S) -> bool, now_ns: u64) {
        let n = self.slots.len();
        if self.len == 0 {
            return;
        }
        let mut looked = 0;
        for _ in 0..n.min(SWEEP_REACH) {
            if looked == SWEEP {
                return;
            }
            let i = self.hand & (n - 1);
            let Some(e) = &self.slots[i] else {
                self.hand = i + 1;
                continue;
            };
            looked += 1;
            if now_ns.saturating_sub(e.touched_ns) >= SWEEP_AFTER_NS && idle(&e.state) {
                // The hand stays: an entry may have shifted back into this slot.
                self.remove_at(i);
            } else {
                self.hand = i + 1;
            }
        }
    }

    /// Inserts a new key (the caller's probe did not find it); returns its slot.
    fn insert(&mut self, hash: u32, key: &[u8], state: S, now_ns: u64, idle: &impl Fn(&S) -> bool) -> usize {
        self.sweep(idle, now_ns);
        if self.len >= self.cap {
            let v = self.victim(idle);
            self.remove_at(v);
        }
        if (self.len + 1) * 8 > self.slots.len() * 7 && self.slots.len() < self.max_slots {
            self.grow(idle, now_ns);
        }
        // Sweeping, evicting or growing moved entries: find the empty slot again.
        let i = self.vacant(hash);
        self.tags[i] = tag_of(hash);
        self.slots[i] = Some(Entry { touched_ns: now_ns, key: StoredKey::new(key), hash, state });
        self.len += 1;
        i
    }
}

impl<S> Store<S> {
    /// A store of at most `max_keys` keys (≥ 1; `LimitSpec` validates the option).
    pub fn new(max_keys: usize) -> Store<S> {
        assert!(max_keys >= 1 && max_keys <= u32::MAX as usize);
        let shards = shard_caps(max_keys).map(|cap| Padded(Mutex::new(Shard::new(cap)))).collect();
        Store { hasher: KeyHasher::process(), shards, max_keys }
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard<S>> {
        &self.shards[shard_index(hash, self.shards.len())].0
    }

    /// Runs `f` on `key`'s state under its shard's lock, inserting `fresh()` for a new key (evicting if
    /// the shard is full; `idle` tells which states can go for free). `f` may lock other stores: the
    /// lock is held until it returns, which is what makes a check-then-commit atomic.
    pub fn with<R>(
        &self,
        key: &[u8],
        now_ns: u64,
        idle: impl Fn(&S) -> bool,
        fresh: impl FnOnce() -> S,
        f: impl FnOnce(&mut S) -> R,
    ) -> R {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let h = hash as u32;
        // One probe finds the key or tells it is new.
        let i = match shard.find(h, key) {
            Some(i) => i,
            None => shard.insert(h, key, fresh(), now_ns, &idle),
        };
        let e = shard.slots[i].as_mut().expect("a held slot");
        e.touched_ns = e.touched_ns.max(now_ns);
        f(&mut e.state)
    }

    /// Reads `key`'s state without inserting or touching it.
    pub fn get<R>(&self, key: &[u8], f: impl FnOnce(Option<&S>) -> R) -> R {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        f(shard.find(hash as u32, key).and_then(|i| shard.slots[i].as_ref()).map(|e| &e.state))
    }

    pub fn remove(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        match shard.find(hash as u32, key) {
            Some(i) => {
                shard.remove_at(i);
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.0.lock();
            s.tags = Box::new([]);
            s.slots = Box::new([]);
            s.len = 0;
            s.hand = 0;
        }
    }

    /// Slots allocated: (entry slots, the most keys they are sized for), summed over shards. For
    /// memory tests.
    pub fn allocated(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(e, m), s| {
            let s = s.0.lock();
            (e + s.slots.len(), m + s.cap)
        })
    }

    /// Bytes the store holds now: its tables (allocated, not just used: an entry and a tag byte per
    /// slot), the heap copies of keys too long to sit inline, and the states' heap (`state_heap`).
    /// Divided by `len()`, the "bytes per key" a benchmark reports.
    pub fn memory_bytes(&self, state_heap: impl Fn(&S) -> usize) -> usize {
        let mut total = std::mem::size_of::<Self>();
        for s in self.shards.iter() {
            let s = s.0.lock();
            total += std::mem::size_of::<Padded<Mutex<Shard<S>>>>();
            total += s.slots.len() * (std::mem::size_of::<Option<Entry<S>>>() + 1);
            total += s.slots.iter().flatten().map(|e| e.key.heap_len() + state_heap(&e.state)).sum::<usize>();
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state that is idle when it is 0.
    fn bump(s: &Store<u32>, key: &[u8], now: u64) -> u32 {
        s.with(key, now, |&v| v == 0, || 0, |v| {
            *v += 1;
            *v
        })
    }

    /// Keys around the inline size, and long ones, are told apart exactly (no prefix or padding match).
    #[test]
    fn short_and_long_keys_are_distinct() {
        let s: Store<u32> = Store::new(1000);
        let keys: Vec<Vec<u8>> = (0..=3 * INLINE_KEY).map(|n| vec![b'k'; n]).collect();
        for (i, k) in keys.iter().enumerate() {
            for _ in 0..=i {
                bump(&s, k, 0);
            }
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.get(k, |v| v.copied()), Some(i as u32 + 1), "len {i}");
        }
        assert_eq!(std::mem::size_of::<StoredKey>(), 24);
    }

    /// The exact window's entry (key, time touched, ring) and the small states' are one cache line.
    #[test]
    fn an_entry_is_one_cache_line() {
        use crate::core::limit::{CounterState, FixedState, GcraState, SlidingState};
        assert_eq!(std::mem::size_of::<Option<Entry<SlidingState>>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Entry<FixedState>>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Entry<CounterState>>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Entry<GcraState>>>(), 64);
    }

    /// Removal shifts entries back: after removing keys in any order, every other key is still found.
    #[test]
    fn removals_keep_every_other_key_reachable() {
        let s: Store<u32> = Store::new(300);
        let keys: Vec<[u8; 4]> = (0..250u32).map(|i| i.to_le_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            for _ in 0..=i % 3 {
                bump(&s, k, 0);
            }
        }
        for (n, k) in keys.iter().enumerate().filter(|(i, _)| i % 7 == 3 || i % 5 == 1) {
            assert!(s.remove(k), "{n}");
        }
        for (i, k) in keys.iter().enumerate() {
            let want = if i % 7 == 3 || i % 5 == 1 { None } else { Some(i as u32 % 3 + 1) };
            assert_eq!(s.get(k, |v| v.copied()), want, "{i}");
        }
    }

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 513, 10_000, 1_000_003] {
            let s: Store<u32> = Store::new(max);
            let total: usize = s.shards.iter().map(|x| x.0.lock().cap).sum();
            assert_eq!(total, max);
        }
    }

    #[test]
    fn keys_keep_their_state_and_can_be_removed() {
        let s: Store<u32> = Store::new(100);
        assert_eq!(bump(&s, b"a", 0), 1);
        assert_eq!(bump(&s, b"a", 1), 2);
        assert_eq!(bump(&s, b"b", 1), 1);
        assert_eq!(s.get(b"a", |v| v.copied()), Some(2));
        assert_eq!(s.get(b"zz", |v| v.copied()), None);
        assert!(s.remove(b"a") && !s.remove(b"a"));
        assert_eq!((s.len(), s.get(b"b", |v| v.copied())), (1, Some(1)));
        s.clear();
        assert!(s.is_empty());
    }

    #[test]
    fn a_full_store_evicts_idle_entries_first_then_the_least_recently_touched() {
        let s: Store<u32> = Store::new(3);
        bump(&s, b"old", 1);
        bump(&s, b"mid", 2);
        s.with(b"idle", 3, |&v| v == 0, || 0, |_| ()); // stays 0: idle
        bump(&s, b"new", 4);
        assert_eq!(s.get(b"idle", |v| v.copied()), None, "the idle entry goes first");
        bump(&s, b"newer", 5);
        assert_eq!(s.get(b"old", |v| v.copied()), None, "then the least recently touched");
        assert!(s.get(b"mid", |v| v.is_some()) && s.get(b"new", |v| v.is_some()));
        assert_eq!(s.len(), 3);
    }

    /// A million unique keys, all busy (none idle), into a store of 10,000: it stays at its cap, and
    /// so does what it has allocated.
    #[test]
    fn a_flood_of_unique_keys_stays_at_the_cap() {
        let s: Store<u32> = Store::new(10_000);
        let mut key = Vec::with_capacity(16);
        for i in 0..1_000_000u32 {
            key.clear();
            key.extend_from_slice(b"ip-");
            key.extend_from_slice(&i.to_le_bytes());
            bump(&s, &key, u64::from(i));
        }
        assert_eq!(s.len(), 10_000);
        let (slots, sized_for) = s.allocated();
        assert_eq!(sized_for, 10_000);
        // Each shard's table stops at room for its cap at 7/8 full (a power of two): under 2.3 x.
        assert!(slots <= 23 * 10_000 / 10, "{slots}");
        // The latest keys are there; the earliest were evicted.
        key.clear();
        key.extend_from_slice(b"ip-");
        key.extend_from_slice(&999_999u32.to_le_bytes());
        assert_eq!(s.get(&key, |v| v.copied()), Some(1));
    }

    #[test]
    fn idle_entries_drain_back_without_timers() {
        // The store is far from full: only the sweep on each insert can remove the idle entries.
        let s: Store<u32> = Store::new(2000);
        for i in 0..256u32 {
            s.with(&i.to_le_bytes(), 0, |&v| v == 0, || 0, |_| ());
        }
        // Within SWEEP_AFTER_NS of their last touch, idle entries stay (a light client's bucket, full
        // again between its requests, keeps its entry).
        for i in 0..500u32 {
            bump(&s, &(10_000 + i).to_le_bytes(), 1);
        }
        assert_eq!(s.len(), 756);
        // Once they are that old, the inserts sweep them.
        for i in 500..1500u32 {
            bump(&s, &(10_000 + i).to_le_bytes(), SWEEP_AFTER_NS);
        }
        assert_eq!(s.len(), 1500, "every idle entry was swept");
        assert!((0..1500u32).all(|i| s.get(&(10_000 + i).to_le_bytes(), |v| v == Some(&1))));
    }
}

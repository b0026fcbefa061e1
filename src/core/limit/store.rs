//! A bounded map from keys to limit state, on the keystore (`core::keystore`). Keys are chosen by
//! clients (IPs, user ids), so by attackers:
//! - the table is hashed with the keyed SipHash (`keystore::KeyHasher`), so collisions cannot be
//!   aimed at;
//! - the number of keys is capped (`max_keys`, split exactly over up to 64 shards, each a
//!   `keystore::Slab` behind its own lock on its own cache line): a flood of unique keys replaces
//!   entries, it never grows memory;
//! - a new key in a full shard evicts, from a scan of up to 32 entries at a clock hand
//!   (`keystore::Clock`), the first idle one (its state back to fresh, so forgetting it loses
//!   nothing), else the least recently touched one of the scan. Each insert also sweeps two entries
//!   for idleness (idle and untouched for `SWEEP_AFTER_NS`), so memory drains back after a flood
//!   without any timer.
//!
//! What eviction costs: a flood of unique keys larger than the cap makes busy keys forget their
//! counts (a fresh state admits more). Size `max_keys` above the number of clients that are active at
//! once; the sweep keeps idle ones from taking room.
use crate::core::keystore::{shard_caps, shard_index, Eviction, KeyHasher, Look, Slab, StoredKey};
use crate::core::padded::Padded;
use parking_lot::Mutex;

/// The sweep leaves an idle entry alone until it has not been touched for this long: a token bucket
/// of a light client is full (idle) again between its requests, and sweeping it at once made each
/// of them look its key up, insert it and sweep again. Eviction of a full shard still takes idle
/// entries first, whatever their age.
const SWEEP_AFTER_NS: u64 = 1_000_000_000;

pub(crate) struct Entry<S> {
    touched_ns: u64,
    key: StoredKey,
    state: S,
}

/// The store's eviction preference: idle states (`idle`, the algorithm's "back to fresh") go first,
/// else the least recently touched; the sweep takes idle states untouched for `SWEEP_AFTER_NS`.
struct Idle<F> {
    idle: F,
    now_ns: u64,
}

impl<S, F: Fn(&S) -> bool> Eviction<Entry<S>> for Idle<F> {
    fn look(&self, e: &Entry<S>) -> Look {
        if (self.idle)(&e.state) {
            Look::Take
        } else {
            Look::Keep(e.touched_ns)
        }
    }

    fn sweepable(&self, e: &Entry<S>) -> bool {
        self.now_ns.saturating_sub(e.touched_ns) >= SWEEP_AFTER_NS && (self.idle)(&e.state)
    }
}

/// A shard: no handles, so no generations (`keystore::Generation`).
type Shard<S> = Slab<Entry<S>, ()>;

pub struct Store<S> {
    hasher: KeyHasher,
    shards: Box<[Padded<Mutex<Shard<S>>>]>,
    max_keys: usize,
}

#[inline]
fn find<S>(shard: &Shard<S>, hash: u64, key: &[u8]) -> Option<u32> {
    shard.find(hash, |e| e.key.bytes() == key)
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
    pub fn with<R>(&self, key: &[u8], now_ns: u64, idle: impl Fn(&S) -> bool, fresh: impl FnOnce() -> S, f: impl FnOnce(&mut S) -> R) -> R {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        let idx = match find(&shard, hash, key) {
            Some(i) => i,
            None => {
                let policy = Idle { idle, now_ns };
                shard.sweep(&policy);
                shard.make_room(&policy);
                shard.insert(hash, Entry { touched_ns: now_ns, key: StoredKey::new(key), state: fresh() })
            }
        };
        let e = shard.get_mut(idx);
        e.touched_ns = e.touched_ns.max(now_ns);
        f(&mut e.state)
    }

    /// Reads `key`'s state without inserting or touching it.
    pub fn get<R>(&self, key: &[u8], f: impl FnOnce(Option<&S>) -> R) -> R {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock();
        f(find(&shard, hash, key).map(|i| &shard.get(i).state))
    }

    /// Runs `f` on `key`'s state if it is held (nothing inserted); whether it was.
    pub fn update(&self, key: &[u8], f: impl FnOnce(&mut S)) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        match find(&shard, hash, key) {
            Some(i) => {
                f(&mut shard.get_mut(i).state);
                true
            }
            None => false,
        }
    }

    pub fn remove(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock();
        match find(&shard, hash, key) {
            Some(i) => {
                shard.remove(i);
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.0.lock().drain(drop);
        }
    }

    /// Slots allocated: (entries, table slots), summed over shards. For memory tests.
    pub fn allocated(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(e, t), s| {
            let (se, st) = s.0.lock().allocated();
            (e + se, t + st)
        })
    }

    /// Bytes the store holds now: its shards' slots (allocated, not just used) and index tables, the
    /// heap copies of keys too long to sit inline, and the states' heap (`state_heap`). Divided by
    /// `len()`, the "bytes per key" a benchmark reports.
    pub fn memory_bytes(&self, state_heap: impl Fn(&S) -> usize) -> usize {
        let mut total = std::mem::size_of::<Self>();
        for s in self.shards.iter() {
            total += std::mem::size_of::<Padded<Mutex<Shard<S>>>>();
            total += s.0.lock().memory_bytes(|e| e.key.heap_len() + state_heap(&e.state));
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state that is idle when it is 0.
    fn bump(s: &Store<u32>, key: &[u8], now: u64) -> u32 {
        s.with(
            key,
            now,
            |&v| v == 0,
            || 0,
            |v| {
                *v += 1;
                *v
            },
        )
    }

    /// Keys around the inline size, and long ones, are told apart exactly (no prefix or padding match).
    #[test]
    fn short_and_long_keys_are_distinct() {
        let s: Store<u32> = Store::new(1000);
        let keys: Vec<Vec<u8>> = (0..=66).map(|n| vec![b'k'; n]).collect();
        for (i, k) in keys.iter().enumerate() {
            for _ in 0..=i {
                bump(&s, k, 0);
            }
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(s.get(k, |v| v.copied()), Some(i as u32 + 1), "len {i}");
        }
    }

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 513, 10_000, 1_000_003] {
            let s: Store<u32> = Store::new(max);
            let total: usize = s.shards.iter().map(|x| x.0.lock().cap()).sum();
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
        let (entries, buckets) = s.allocated();
        assert!(entries <= 10_000, "{entries}");
        // Churn leaves tombstones: a shard's table may grow once (to the next power of two), never more.
        assert!(buckets <= 3 * 10_000, "{buckets}");
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

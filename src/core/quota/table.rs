//! The bounded table of accounts, on the keystore (`core::keystore::Slab`): stable positions (so the
//! due list and the sweep can name an account without hashing, `Handle` telling a stale name) indexed
//! by the keyed hash of (limit, key), capped at `max_keys`.
//!
//! No timer per key: eviction and the idle sweep walk the slab with clock hands. A new key in a full
//! table takes the place of the first evictable idle account of a short scan, else of the least
//! recently used evictable one of the scan; failing both (every candidate owes or awaits the store)
//! the new key is not tracked (`Refusal::Full`).
use super::account::Account;
use super::wire::LimitId;
use crate::core::keystore::{Clock, Eviction, KeyHasher, Look, Slab};

pub(crate) use crate::core::keystore::Handle;

/// The engine's eviction preference: never an account that cannot be forgotten (`evictable`: it owes,
/// awaits or holds a share not yet at rest), idle ones first, else the least recently used. The sweep
/// is the engine's own (`poll.rs`), so the slab's never drops an account.
struct Accounts<E, I> {
    evictable: E,
    idle: I,
}

impl<E: Fn(&Account) -> bool, I: Fn(&Account) -> bool> Eviction<Account> for Accounts<E, I> {
    fn look(&self, a: &Account) -> Look {
        if !(self.evictable)(a) {
            Look::Pass
        } else if (self.idle)(a) {
            Look::Take
        } else {
            Look::Keep(a.last_used_ns)
        }
    }

    fn sweepable(&self, _: &Account) -> bool {
        false
    }
}

pub(crate) struct Table {
    slab: Slab<Account>,
    hasher: KeyHasher,
    /// The engine's sweep hand (eviction has the slab's own).
    sweep: Clock,
}

impl Table {
    pub fn new(cap: usize) -> Table {
        Table { slab: Slab::new(cap), hasher: KeyHasher::process(), sweep: Clock::default() }
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn is_full(&self) -> bool {
        self.slab.is_full()
    }

    pub fn hash(&self, limit: LimitId, key: &[u8]) -> u64 {
        self.hasher.hash_tagged(u32::from(limit.0), key)
    }

    pub fn find(&self, hash: u64, limit: LimitId, key: &[u8]) -> Option<u32> {
        self.slab.find(hash, |a| a.limit == limit && *a.key == *key)
    }

    pub fn get(&self, slot: u32) -> &Account {
        self.slab.get(slot)
    }

    pub fn get_mut(&mut self, slot: u32) -> &mut Account {
        self.slab.get_mut(slot)
    }

    pub fn handle(&self, slot: u32) -> Handle {
        self.slab.handle(slot)
    }

    /// The slot a handle names, if its account is still there.
    pub fn resolve(&self, h: Handle) -> Option<u32> {
        self.slab.resolve(h)
    }

    /// Places an account under `hash` (`Table::hash` of its limit and key); the table must not be full.
    pub fn insert(&mut self, hash: u64, acc: Account) -> u32 {
        self.slab.insert(hash, acc)
    }

    pub fn remove(&mut self, slot: u32) -> Account {
        self.slab.remove(slot)
    }

    /// The account to evict for a new key (the table is full): the first evictable idle one of a scan
    /// from the hand, else the least recently used evictable one of it.
    pub fn victim(&mut self, evictable: impl Fn(&Account) -> bool, idle: impl Fn(&Account) -> bool) -> Option<u32> {
        self.slab.victim(&Accounts { evictable, idle })
    }

    /// The next live slot for the sweep, going round the slab (`None` when the table is empty).
    pub fn next_sweep(&mut self) -> Option<u32> {
        self.slab.next_held(&mut self.sweep)
    }

    /// Removes every account, passing each to `out`.
    pub fn drain(&mut self, out: impl FnMut(Account)) {
        self.slab.drain(out);
        self.sweep = Clock::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(t: &mut Table, key: &str, now: u64) -> u32 {
        let l = LimitId(0);
        let h = t.hash(l, key.as_bytes());
        t.insert(h, Account::new(l, key.as_bytes(), now))
    }

    fn find(t: &Table, key: &str) -> Option<u32> {
        let l = LimitId(0);
        t.find(t.hash(l, key.as_bytes()), l, key.as_bytes())
    }

    #[test]
    fn keys_are_found_by_limit_and_name() {
        let mut t = Table::new(4);
        let a = add(&mut t, "a", 0);
        let b = add(&mut t, "b", 0);
        assert_eq!((find(&t, "a"), find(&t, "b"), find(&t, "c")), (Some(a), Some(b), None));
        let other = LimitId(1);
        assert_eq!(t.find(t.hash(other, b"a"), other, b"a"), None, "the same name under another limit");
        assert_eq!(&*t.get(a).key, b"a");
    }

    #[test]
    fn a_removed_slot_is_reused_and_old_handles_go_stale() {
        let mut t = Table::new(2);
        let a = add(&mut t, "a", 0);
        let h = t.handle(a);
        assert_eq!(t.resolve(h), Some(a));
        t.remove(a);
        assert_eq!((t.resolve(h), find(&t, "a"), t.len()), (None, None, 0));
        let c = add(&mut t, "c", 0);
        assert_eq!(c, a, "the slot is reused");
        assert_eq!(t.resolve(h), None, "by a newer generation");
        assert_eq!(find(&t, "c"), Some(c));
    }

    #[test]
    fn the_victim_is_idle_first_then_least_recently_used_and_never_unevictable() {
        let mut t = Table::new(3);
        add(&mut t, "old", 10);
        add(&mut t, "older", 5);
        add(&mut t, "new", 30);
        assert!(t.is_full());
        let v = t.victim(|_| true, |a| a.last_used_ns < 20);
        assert_eq!(&*t.get(v.unwrap()).key, b"old", "the first idle one");
        let v = t.victim(|_| true, |_| false);
        assert_eq!(&*t.get(v.unwrap()).key, b"older", "else the least recently used");
        let v = t.victim(|a| &*a.key == b"new", |_| false);
        assert_eq!(&*t.get(v.unwrap()).key, b"new", "only evictable ones");
        assert_eq!(t.victim(|_| false, |_| true), None);
    }

    #[test]
    fn the_sweep_goes_round_the_live_slots() {
        let mut t = Table::new(4);
        let a = add(&mut t, "a", 0);
        let b = add(&mut t, "b", 0);
        let c = add(&mut t, "c", 0);
        t.remove(b);
        let seen: Vec<_> = (0..4).map(|_| t.next_sweep().unwrap()).collect();
        assert_eq!(seen, vec![a, c, a, c]);
        let mut keys = vec![];
        t.drain(|acc| keys.push(acc.key));
        assert_eq!((keys.len(), t.len(), t.next_sweep()), (2, 0, None));
    }
}

//! The bounded table of accounts: a slab of slots (stable positions, so the due list and the sweep
//! can name an account without hashing) indexed by a hash table over (limit, key), capped at
//! `max_keys`.
//!
//! No timer per key: eviction and the idle sweep walk the slab with clock hands. A new key in a full
//! table takes the place of the first evictable idle account of a short scan, else of the least
//! recently used evictable one of the scan; failing both (every candidate owes or awaits the store)
//! the new key is not tracked (`Refusal::Full`).
use super::account::Account;
use super::wire::LimitId;
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// The most accounts one eviction looks at.
const EVICT_SCAN: usize = 32;

/// A slot and the generation of its occupant, so a stale name never reaches a newer account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle {
    slot: u32,
    gen: u32,
}

struct Slot {
    gen: u32,
    acc: Option<Account>,
}

pub(crate) struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: std::hash::RandomState,
    len: usize,
    cap: usize,
    evict_hand: usize,
    sweep_hand: usize,
}

impl Table {
    pub fn new(cap: usize) -> Table {
        Table { slots: Vec::new(), free: Vec::new(), index: HashTable::new(), hasher: std::hash::RandomState::new(), len: 0, cap, evict_hand: 0, sweep_hand: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_full(&self) -> bool {
        self.len >= self.cap
    }

    pub fn hash(&self, limit: LimitId, key: &[u8]) -> u64 {
        self.hasher.hash_one((limit.0, key))
    }

    pub fn find(&self, hash: u64, limit: LimitId, key: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.index.find(hash, |&s| slots[s as usize].acc.as_ref().is_some_and(|a| a.limit == limit && *a.key == *key)).copied()
    }

    pub fn get(&self, slot: u32) -> &Account {
        self.slots[slot as usize].acc.as_ref().expect("a live slot")
    }

    pub fn get_mut(&mut self, slot: u32) -> &mut Account {
        self.slots[slot as usize].acc.as_mut().expect("a live slot")
    }

    pub fn handle(&self, slot: u32) -> Handle {
        Handle { slot, gen: self.slots[slot as usize].gen }
    }

    /// The slot a handle names, if its account is still there.
    pub fn resolve(&self, h: Handle) -> Option<u32> {
        let s = self.slots.get(h.slot as usize)?;
        (s.gen == h.gen && s.acc.is_some()).then_some(h.slot)
    }

    /// Places an account; the table must not be full.
    pub fn insert(&mut self, acc: Account) -> u32 {
        debug_assert!(!self.is_full());
        let hash = acc.hash;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize].acc = Some(acc);
                s
            }
            None => {
                self.slots.push(Slot { gen: 0, acc: Some(acc) });
                (self.slots.len() - 1) as u32
            }
        };
        let slots = &self.slots;
        self.index.insert_unique(hash, slot, |&s| slots[s as usize].acc.as_ref().map_or(0, |a| a.hash));
        self.len += 1;
        slot
    }

    pub fn remove(&mut self, slot: u32) -> Account {
        let s = &mut self.slots[slot as usize];
        let acc = s.acc.take().expect("a live slot");
        s.gen = s.gen.wrapping_add(1);
        if let Ok(e) = self.index.find_entry(acc.hash, |&x| x == slot) {
            e.remove();
        }
        self.free.push(slot);
        self.len -= 1;
        acc
    }

    /// The account to evict for a new key (the table is full, so every slot is live): the first
    /// evictable idle one of a scan from the hand, else the least recently used evictable one of it.
    pub fn victim(&mut self, evictable: impl Fn(&Account) -> bool, idle: impl Fn(&Account) -> bool) -> Option<u32> {
        let n = self.slots.len();
        let mut best: Option<(u64, u32)> = None;
        for i in 0..n.min(EVICT_SCAN) {
            let slot = ((self.evict_hand + i) % n) as u32;
            let Some(a) = self.slots[slot as usize].acc.as_ref() else { continue };
            if !evictable(a) {
                continue;
            }
            if idle(a) {
                self.evict_hand = slot as usize + 1;
                return Some(slot);
            }
            if best.is_none_or(|(used, _)| a.last_used_ns < used) {
                best = Some((a.last_used_ns, slot));
            }
        }
        self.evict_hand += n.min(EVICT_SCAN);
        best.map(|(_, s)| s)
    }

    /// The next live slot for the sweep, going round the slab (`None` when the table is empty).
    pub fn next_sweep(&mut self) -> Option<u32> {
        let n = self.slots.len();
        for _ in 0..n {
            let slot = self.sweep_hand % n;
            self.sweep_hand = slot + 1;
            if self.slots[slot].acc.is_some() {
                return Some(slot as u32);
            }
        }
        None
    }

    /// Removes every account, passing each to `out`.
    pub fn drain(&mut self, mut out: impl FnMut(Account)) {
        for s in &mut self.slots {
            if let Some(a) = s.acc.take() {
                out(a);
            }
        }
        *self = Table { hasher: std::mem::take(&mut self.hasher), ..Table::new(self.cap) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(t: &mut Table, key: &str, now: u64) -> u32 {
        let l = LimitId(0);
        let h = t.hash(l, key.as_bytes());
        t.insert(Account::new(l, key.as_bytes(), h, now))
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

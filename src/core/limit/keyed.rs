//! One named limit over many keys: an algorithm and its bounded store of per-key state.
//!
//! `LimitSet` holds limits of different algorithms side by side, so it sees them through `Keyed`, whose
//! `nest` is the all-or-nothing step: it locks the key's state, checks, hands the check to the rest of
//! the decision (`inner`, which may lock further limits' keys) and commits only if the whole decision
//! admits, while still holding the lock. No other request of that key can slip in between.
use super::algorithm::{Algorithm, Check, Policy};
use super::store::Store;

pub struct KeyedLimit<A: Algorithm> {
    algo: A,
    store: Store<A::State>,
}

impl<A: Algorithm> KeyedLimit<A> {
    pub fn new(algo: A, max_keys: usize) -> KeyedLimit<A> {
        KeyedLimit { algo, store: Store::new(max_keys) }
    }

    pub fn algorithm(&self) -> &A {
        &self.algo
    }

    /// Would `key` be admitted at cost `cost`? Changes nothing (an unknown key is not inserted).
    pub fn check(&self, key: &[u8], cost: u32, now_ns: u64) -> Check {
        self.store.get(key, |s| match s {
            Some(s) => self.algo.check(s, cost, now_ns),
            None => self.algo.check(&self.algo.fresh(now_ns), cost, now_ns),
        })
    }

    /// Checks and, when admitted, counts: one limit on its own.
    pub fn take(&self, key: &[u8], cost: u32, now_ns: u64) -> Check {
        self.nest(key, cost, now_ns, &mut |_| true).1
    }

    pub fn store(&self) -> &Store<A::State> {
        &self.store
    }
}

/// A limit whatever its algorithm (object-safe), as `LimitSet` uses it.
pub trait Keyed: Send + Sync {
    /// Checks `key` at `cost`, calls `inner` with the check (under the key's lock) and commits iff the
    /// check allowed and `inner` returned true. Returns whether it committed, and the check to report:
    /// the check itself, or, when this limit allowed but the decision refused, the state as it stands
    /// (nothing counted).
    fn nest(&self, key: &[u8], cost: u32, now_ns: u64, inner: &mut dyn FnMut(&Check) -> bool) -> (bool, Check) {
        self.nest_as(key, None, cost, now_ns, inner)
    }
    /// As `nest`, with `limit` in place of the configured one when given (a key's override).
    fn nest_as(&self, key: &[u8], limit: Option<u32>, cost: u32, now_ns: u64, inner: &mut dyn FnMut(&Check) -> bool) -> (bool, Check);
    fn check(&self, key: &[u8], cost: u32, now_ns: u64) -> Check;
    /// `key`'s check at cost 0 under `limit` (or the configured one): what it has left. Changes nothing.
    fn peek(&self, key: &[u8], limit: Option<u32>, now_ns: u64) -> Check;
    /// Gives back `units` counted at `at_ns` (see `Algorithm::refund`); false when the key is not held.
    fn refund(&self, key: &[u8], limit: Option<u32>, units: u32, at_ns: u64, now_ns: u64) -> bool;
    /// Counts `units` after the fact, up to what is left (see `Algorithm::charge`); the units counted.
    fn charge(&self, key: &[u8], limit: Option<u32>, units: u32, now_ns: u64) -> u32;
    /// The policy under `limit` (a key's override).
    fn policy_as(&self, limit: u32) -> Policy;
    fn policy(&self) -> Policy;
    /// Keys tracked now.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn max_keys(&self) -> usize;
    fn remove(&self, key: &[u8]) -> bool;
    fn clear(&self);
    /// What the store holds now, in bytes (see `Store::memory_bytes`).
    fn memory_bytes(&self) -> usize;
    /// The most heap one key's state can hold.
    fn max_state_heap_bytes(&self) -> usize;
}

impl<A: Algorithm> Keyed for KeyedLimit<A> {
    fn nest_as(&self, key: &[u8], limit: Option<u32>, cost: u32, now_ns: u64, inner: &mut dyn FnMut(&Check) -> bool) -> (bool, Check) {
        let own;
        let algo = match limit {
            Some(l) => {
                own = self.algo.with_limit(l);
                &own
            }
            None => &self.algo,
        };
        self.store.with(
            key,
            now_ns,
            |s| algo.is_idle(s, now_ns),
            || algo.fresh(now_ns),
            |s| {
                let c = algo.check(s, cost, now_ns);
                let go = inner(&c);
                if c.allowed && go {
                    algo.commit(s, cost, now_ns);
                    (true, c)
                } else if c.allowed {
                    let now = algo.check(s, 0, now_ns);
                    (false, Check { delay_ns: 0, retry_after_ns: 0, ..now })
                } else {
                    (false, c)
                }
            },
        )
    }

    fn check(&self, key: &[u8], cost: u32, now_ns: u64) -> Check {
        KeyedLimit::check(self, key, cost, now_ns)
    }

    fn peek(&self, key: &[u8], limit: Option<u32>, now_ns: u64) -> Check {
        let algo = limit.map(|l| self.algo.with_limit(l));
        let algo = algo.as_ref().unwrap_or(&self.algo);
        self.store.get(key, |s| match s {
            Some(s) => algo.check(s, 0, now_ns),
            None => algo.check(&algo.fresh(now_ns), 0, now_ns),
        })
    }

    fn refund(&self, key: &[u8], limit: Option<u32>, units: u32, at_ns: u64, now_ns: u64) -> bool {
        let algo = limit.map(|l| self.algo.with_limit(l));
        let algo = algo.as_ref().unwrap_or(&self.algo);
        // Not inserted: a key the store forgot (idle, evicted) has nothing counted to give back.
        self.store.update(key, |s| algo.refund(s, units, at_ns, now_ns))
    }

    fn charge(&self, key: &[u8], limit: Option<u32>, units: u32, now_ns: u64) -> u32 {
        let algo = limit.map(|l| self.algo.with_limit(l));
        let algo = algo.as_ref().unwrap_or(&self.algo);
        self.store.with(key, now_ns, |s| algo.is_idle(s, now_ns), || algo.fresh(now_ns), |s| algo.charge(s, units, now_ns))
    }

    fn policy_as(&self, limit: u32) -> Policy {
        self.algo.with_limit(limit).policy()
    }

    fn policy(&self) -> Policy {
        self.algo.policy()
    }

    fn len(&self) -> usize {
        self.store.len()
    }

    fn max_keys(&self) -> usize {
        self.store.max_keys()
    }

    fn remove(&self, key: &[u8]) -> bool {
        self.store.remove(key)
    }

    fn clear(&self) {
        self.store.clear()
    }

    fn memory_bytes(&self) -> usize {
        self.store.memory_bytes(|s| self.algo.heap_bytes(s))
    }

    fn max_state_heap_bytes(&self) -> usize {
        self.algo.max_heap_bytes()
    }
}

//! Operators' per-key limits: "key K of limit `name` may have N" (a customer's raised quota, an
//! abuser's lowered one), set and cleared at run time, consulted by every decision of that limit.
//!
//! Bounded: at most `MAX_OVERRIDES` over a set's limits. A new override past the cap is refused
//! (`Full`), never evicts: an operator's decision does not vanish because another was made. An
//! override keeps the key's counted state: raising 5 to 100 after 5 were used leaves 95.
//!
//! A limit given as a function of the request (`limit: (req) => n`) sets its key's limit before each
//! decision (`set_per_request`): a second table, below the operators' (an operator's override wins),
//! capped at `MAX_PER_REQUEST` entries per limit; a new key in a full table replaces an arbitrary
//! entry, which loses nothing (the next request of that key sets it again before its decision).
//!
//! The hot path pays one relaxed load while neither table holds anything, and a read lock and one
//! hash lookup per table on the limits that have some.
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Overrides a limit set holds at most, over all its limits.
pub const MAX_OVERRIDES: usize = 10_000;

/// Per-request limits a limit's table holds at most (`limit` as a function of the request).
pub const MAX_PER_REQUEST: usize = 100_000;

/// The set already holds `MAX_OVERRIDES` overrides.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

pub struct Overrides {
    per_limit: Vec<RwLock<HashMap<Box<[u8]>, u32>>>,
    count: AtomicUsize,
    per_request: Vec<RwLock<HashMap<Box<[u8]>, u32>>>,
    /// Entries in `per_request`, over the limits (for the hot path's skip).
    per_request_count: AtomicUsize,
}

impl Overrides {
    pub fn new(limits: usize) -> Overrides {
        let maps = || (0..limits).map(|_| RwLock::new(HashMap::new())).collect();
        Overrides { per_limit: maps(), count: AtomicUsize::new(0), per_request: maps(), per_request_count: AtomicUsize::new(0) }
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Limit `i`'s limit for `key` when it is not the configured one: the operator's override, else
    /// the request's (`set_per_request`).
    #[inline]
    pub fn get(&self, i: usize, key: &[u8]) -> Option<u32> {
        if !self.is_empty() {
            let m = self.per_limit[i].read();
            if let Some(&l) = m.get(key) {
                return Some(l);
            }
        }
        if self.per_request_count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.per_request[i].read().get(key).copied()
    }

    /// The operator's override alone.
    pub fn operator(&self, i: usize, key: &[u8]) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        self.per_limit[i].read().get(key).copied()
    }

    /// Limit `i`'s limit for `key` as this request's function gave it; `None`: the configured one.
    pub fn set_per_request(&self, i: usize, key: &[u8], limit: Option<u32>) {
        let mut m = self.per_request[i].write();
        let before = m.len();
        match limit {
            None => {
                m.remove(key);
            }
            Some(l) => {
                if let Some(v) = m.get_mut(key) {
                    *v = l;
                } else {
                    if m.len() >= MAX_PER_REQUEST {
                        let victim = m.keys().next().cloned();
                        if let Some(k) = victim {
                            m.remove(&k);
                        }
                    }
                    m.insert(key.into(), l);
                }
            }
        }
        let after = m.len();
        if after > before {
            self.per_request_count.fetch_add(after - before, Ordering::AcqRel);
        } else if before > after {
            self.per_request_count.fetch_sub(before - after, Ordering::AcqRel);
        }
    }

    /// Entries the per-request tables hold.
    pub fn per_request_len(&self) -> usize {
        self.per_request_count.load(Ordering::Relaxed)
    }

    /// Sets (or replaces) limit `i`'s override for `key`; `Full` when a new one would pass the cap.
    pub fn set(&self, i: usize, key: &[u8], limit: u32) -> Result<(), Full> {
        let mut m = self.per_limit[i].write();
        if let Some(v) = m.get_mut(key) {
            *v = limit;
            return Ok(());
        }
        // Counted under the limit's write lock; another limit's may race: fetch_update keeps the cap.
        self.count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_OVERRIDES).then_some(n + 1)).map_err(|_| Full)?;
        m.insert(key.into(), limit);
        Ok(())
    }

    /// Removes limit `i`'s override for `key`; whether there was one.
    pub fn clear(&self, i: usize, key: &[u8]) -> bool {
        let removed = self.per_limit[i].write().remove(key).is_some();
        if removed {
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
        removed
    }

    /// Every override as (limit index, key, limit), by limit.
    pub fn list(&self) -> Vec<(usize, Vec<u8>, u32)> {
        let mut out = Vec::with_capacity(self.len());
        for (i, m) in self.per_limit.iter().enumerate() {
            out.extend(m.read().iter().map(|(k, &v)| (i, k.to_vec(), v)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_replace_clear_and_the_cap_refuses() {
        let o = Overrides::new(2);
        assert_eq!(o.get(0, b"k"), None);
        o.set(0, b"k", 100).unwrap();
        o.set(0, b"k", 7).unwrap();
        assert_eq!((o.get(0, b"k"), o.get(1, b"k"), o.len()), (Some(7), None, 1));
        for i in 1..MAX_OVERRIDES {
            o.set(1, format!("u{i}").as_bytes(), 1).unwrap();
        }
        assert_eq!(o.set(1, b"one-more", 1), Err(Full), "full: refused, nothing evicted");
        assert_eq!(o.get(0, b"k"), Some(7));
        o.set(0, b"k", 8).unwrap(); // replacing takes no room
        assert!(o.clear(0, b"k") && !o.clear(0, b"k"));
        o.set(1, b"one-more", 1).unwrap();
        assert_eq!(o.list().len(), MAX_OVERRIDES);
    }

    #[test]
    fn per_request_limits_sit_below_the_operators_and_stay_bounded() {
        let o = Overrides::new(1);
        o.set_per_request(0, b"k", Some(50));
        assert_eq!((o.get(0, b"k"), o.operator(0, b"k")), (Some(50), None));
        o.set(0, b"k", 9).unwrap();
        assert_eq!(o.get(0, b"k"), Some(9), "the operator's wins");
        assert!(o.clear(0, b"k"));
        o.set_per_request(0, b"k", None);
        assert_eq!((o.get(0, b"k"), o.per_request_len()), (None, 0));
        for i in 0..MAX_PER_REQUEST + 10 {
            o.set_per_request(0, format!("u{i}").as_bytes(), Some(2));
        }
        assert_eq!(o.per_request_len(), MAX_PER_REQUEST);
        assert_eq!(o.get(0, format!("u{}", MAX_PER_REQUEST + 9).as_bytes()), Some(2), "the newest is there");
    }
}

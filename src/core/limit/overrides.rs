//! Operators' per-key limits: "key K of limit `name` may have N" (a customer's raised quota, an
//! abuser's lowered one), set and cleared at run time, consulted by every decision of that limit.
//!
//! Bounded: at most `MAX_OVERRIDES` over a set's limits. A new override past the cap is refused
//! (`Full`), never evicts: an operator's decision does not vanish because another was made. An
//! override keeps the key's counted state: raising 5 to 100 after 5 were used leaves 95.
//!
//! The hot path pays one relaxed load while no override exists, and a read lock and one hash lookup on
//! the limits that have some.
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Overrides a limit set holds at most, over all its limits.
pub const MAX_OVERRIDES: usize = 10_000;

/// The set already holds `MAX_OVERRIDES` overrides.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

pub struct Overrides {
    per_limit: Vec<RwLock<HashMap<Box<[u8]>, u32>>>,
    count: AtomicUsize,
}

impl Overrides {
    pub fn new(limits: usize) -> Overrides {
        Overrides { per_limit: (0..limits).map(|_| RwLock::new(HashMap::new())).collect(), count: AtomicUsize::new(0) }
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Limit `i`'s override for `key`, if any.
    #[inline]
    pub fn get(&self, i: usize, key: &[u8]) -> Option<u32> {
        if self.is_empty() {
            return None;
        }
        let m = self.per_limit[i].read();
        if m.is_empty() {
            return None;
        }
        m.get(key).copied()
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
}

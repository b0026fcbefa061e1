//! The bounded keyed store every per-key table of the core sits on: the ledger's key map
//! (`core::keymap`), the named limits' store (`core::limit::Store`), the cluster lease engine's table
//! of accounts (`core::quota`) and the ban table (`core::defense`).
//!
//! What they share, here once:
//! - the keyed hash (`hash.rs`): keys are chosen by clients, so by attackers; SipHash under a secret
//!   key keeps them from aiming collisions;
//! - an index from hash to position (`index.rs`) with a hard cap, free positions reused first, and a
//!   generation stamped on every placement, so a position named earlier can be told stale;
//! - the split of a cap over shards (`shard_caps`) for the stores behind per-shard locks;
//! - the clock hand (`clock.rs`): a new key in a full store evicts, from a scan of a few entries, the
//!   first that forgetting loses nothing, else the least recently used of the scan; and the idle
//!   sweep that drains memory back without timers. Each owner says what "loses nothing" and "least
//!   recently used" mean for its values (`Eviction`, a small trait impl);
//! - a slab of values behind the index (`slab.rs`), for the stores whose values sit under the same
//!   lock as the index (the ledger's key map keeps its entries apart, each behind its own lock at a
//!   stable address, and uses the index and the clock directly);
//! - key bytes stored inline when short (`key.rs`).
mod clock;
mod hash;
mod index;
mod key;
mod slab;

pub(crate) use clock::{Clock, Eviction, Look};
pub(crate) use hash::{shard_index, KeyHasher};
pub(crate) use index::KeyIndex;
pub(crate) use key::StoredKey;
pub(crate) use slab::{Handle, Slab};

/// Most shards per store; fewer when `max_keys` is small, so that every shard holds at least
/// `MIN_PER_SHARD` keys and the per-shard caps add up to `max_keys` exactly.
pub(crate) const MAX_SHARDS: usize = 64;
const MIN_PER_SHARD: usize = 256;

/// The shard caps for `max_keys` keys: a power of two of shards (at most `MAX_SHARDS`, each with at
/// least `MIN_PER_SHARD` keys when there are enough), caps adding up to `max_keys` exactly.
pub(crate) fn shard_caps(max_keys: usize) -> impl Iterator<Item = usize> {
    let mut n = 1;
    while n < MAX_SHARDS && max_keys / (n * 2) >= MIN_PER_SHARD {
        n *= 2;
    }
    let (base, extra) = (max_keys / n, max_keys % n);
    (0..n).map(move |i| base + usize::from(i < extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 256, 513, 10_000, 1_000_000, 1_000_003] {
            let caps: Vec<usize> = shard_caps(max).collect();
            assert_eq!(caps.iter().sum::<usize>(), max);
            assert!(caps.len().is_power_of_two() && caps.len() <= MAX_SHARDS);
            assert!(caps.len() == 1 || caps.iter().all(|&c| c >= MIN_PER_SHARD));
        }
    }
}

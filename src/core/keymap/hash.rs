//! The key map's hash: keys are chosen by clients, so by attackers. A table whose hash an attacker can
//! predict is flooded with keys of one bucket and every lookup in it turns into a scan.
//!
//! SipHash-1-3 under a random 128-bit key (std's `RandomState`, which draws the key from the OS once
//! per process and thread), one key for the whole process. Of the candidates it is the one that is a
//! keyed PRF by design and analysis: without the key an attacker cannot tell which keys collide, not
//! even from timing a few lookups, which is what hash flooding needs. foldhash (hashbrown's default,
//! also seeded at random) and aHash are fast multiply-and-fold mixers whose authors make no such claim
//! (foldhash: "minimally DoS-resistant"); their seeds are only as good as the mixing that hides them.
//! The cost is paid once per key lookup (the slot path does not hash): see benchmark/RESULTS.md.
//!
//! Bit use: the table (hashbrown) takes its bucket from the low bits and its 7-bit tag from the top
//! ones, so the shard is picked from bits 32.. (`shard_index`). Picking it from the top bits, as before,
//! left the keys of one shard sharing most of their tag, and every probe then compared entries that a
//! tag would have told apart.
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

#[derive(Clone, Debug)]
pub(crate) struct KeyHasher(RandomState);

impl KeyHasher {
    /// The process's hasher (one random key per process).
    pub(crate) fn process() -> KeyHasher {
        static STATE: OnceLock<RandomState> = OnceLock::new();
        KeyHasher(STATE.get_or_init(RandomState::new).clone())
    }

    #[inline]
    pub(crate) fn hash_one(&self, key: &[u8]) -> u64 {
        self.0.hash_one(key)
    }

    /// The hash of a 128-bit key (two words, no length: cheaper than the same bytes as a slice).
    #[inline]
    pub(crate) fn hash_u128(&self, key: u128) -> u64 {
        self.0.hash_one(key)
    }
}

/// The shard of `hash` among `shards` (a power of two, at most 2^32): bits the table does not use.
#[inline]
pub(crate) fn shard_index(hash: u64, shards: usize) -> usize {
    (hash >> 32) as usize & (shards - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_per_process_and_different_keys_hash_apart() {
        let (a, b) = (KeyHasher::process(), KeyHasher::process());
        assert_eq!(a.hash_one(b"user-1"), b.hash_one(b"user-1"));
        assert_ne!(a.hash_one(b"user-1"), a.hash_one(b"user-2"));
        assert_ne!(a.hash_one(b""), a.hash_one(b"\0"), "the length is hashed too");
    }

    #[test]
    fn shards_spread_evenly_and_independently_of_the_tag() {
        let h = KeyHasher::process();
        let mut per_shard = [0u32; 64];
        let mut tags = [[false; 128]; 64];
        for i in 0..64_000u32 {
            let x = h.hash_one(format!("k{i}").as_bytes());
            let s = shard_index(x, 64);
            per_shard[s] += 1;
            tags[s][(x >> 57) as usize] = true;
        }
        // 1,000 expected per shard; a real skew would be far outside this.
        assert!(per_shard.iter().all(|&n| (800..1200).contains(&n)), "{per_shard:?}");
        // Within one shard the table's 7-bit tags still take (nearly) all 128 values.
        assert!(tags.iter().all(|t| t.iter().filter(|&&b| b).count() > 120));
        assert_eq!(shard_index(u64::MAX, 1), 0);
    }
}

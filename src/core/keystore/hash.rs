//! Every keyed store's hash: keys are chosen by clients, so by attackers. A table whose hash an attacker can
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
//!
//! Byte keys are hashed one-shot (`sip13`): the same SipHash-1-3, under a key of the process's own,
//! without std's streaming `Hasher` (its length prefix, its tail buffering and calls): about a third of
//! the instructions for the short keys requests carry (an address key, a user id).
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

#[derive(Clone, Debug)]
pub(crate) struct KeyHasher {
    state: RandomState,
    /// The SipHash key of `hash_one` (drawn from `state`, so as secret as its own key).
    k0: u64,
    k1: u64,
}

impl KeyHasher {
    /// The process's hasher (one random key per process).
    pub(crate) fn process() -> KeyHasher {
        static STATE: OnceLock<KeyHasher> = OnceLock::new();
        STATE
            .get_or_init(|| {
                let state = RandomState::new();
                // SipHash outputs under `state`'s secret key: unpredictable without it.
                let (k0, k1) = (state.hash_one(0x6b30_u64), state.hash_one(0x6b31_u64));
                KeyHasher { state, k0, k1 }
            })
            .clone()
    }

    #[inline]
    pub(crate) fn hash_one(&self, key: &[u8]) -> u64 {
        sip13(self.k0, self.k1, key)
    }

    /// The hash of `key` under a numeric tag (the quota engine's (limit, key) pairs): std's streaming
    /// SipHash-1-3 under the same secret key, so a key's hash differs from one tag to another.
    #[inline]
    pub(crate) fn hash_tagged(&self, tag: u32, key: &[u8]) -> u64 {
        self.state.hash_one((tag, key))
    }

    /// The hash of a 128-bit key (two words, no length: cheaper than the same bytes as a slice).
    #[inline]
    pub(crate) fn hash_u128(&self, key: u128) -> u64 {
        self.state.hash_one(key)
    }
}

/// SipHash-1-3 of `data` under the key (k0, k1): one compression round per 8-byte word, the last
/// word carrying the length in its top byte, three finalization rounds.
#[inline]
fn sip13(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [k0 ^ 0x736f_6d65_7073_6575, k1 ^ 0x646f_7261_6e64_6f6d, k0 ^ 0x6c79_6765_6e65_7261, k1 ^ 0x7465_6462_7974_6573];
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let words = data.chunks_exact(8);
    let tail = words.remainder();
    for w in words {
        let m = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        v[3] ^= m;
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = (data.len() as u64) << 56;
    for (i, &b) in tail.iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    v[3] ^= last;
    round(&mut v);
    v[0] ^= last;
    v[2] ^= 0xff;
    round(&mut v);
    round(&mut v);
    round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
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

    /// `sip13` is SipHash-1-3: the same values as std's (whose `DefaultHasher::new()` is SipHash-1-3
    /// under the key (0, 0), fed the raw bytes), for every length around the word boundaries.
    #[test]
    #[allow(deprecated)]
    fn sip13_is_siphash_1_3() {
        use std::hash::Hasher;
        let data: Vec<u8> = (0..80u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..=data.len() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            h.write(&data[..len]);
            assert_eq!(sip13(0, 0, &data[..len]), h.finish(), "len {len}");
        }
        // The key matters, in both halves.
        assert_ne!(sip13(1, 0, b"user-1"), sip13(0, 0, b"user-1"));
        assert_ne!(sip13(0, 1, b"user-1"), sip13(0, 0, b"user-1"));
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

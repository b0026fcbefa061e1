//! A small seeded generator (SplitMix64) for ban jitter, and for the core's randomized tests.
//!
//! Ban jitter only has to keep an attacker from computing the unban time from the ban's start; it is
//! not key material. It is seeded once (at random by the binding, `random_seed`; by a constant in
//! tests, which makes every jittered duration reproducible).
use std::hash::{BuildHasher, RandomState};

#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n) (n ≥ 1); the modulo bias is below 2^-32 for the n used here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A seed from the OS's randomness (std's `RandomState` keys are drawn from it once per process).
pub fn random_seed() -> u64 {
    RandomState::new().hash_one(0x7469_6572_6761_7465u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_one_sequence_and_values_in_range() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..8).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(SplitMix64::new(8).next_u64(), xs[0]);
        let mut r = SplitMix64::new(1);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            sum += f;
            assert!(r.below(3) < 3);
        }
        assert!((4_500.0..5_500.0).contains(&sum), "{sum}");
    }
}

//! The simulation's draws, on the core's SplitMix64 (`defense::rng`): a seed names a run exactly.
use crate::core::defense::rng::SplitMix64;

pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0.next_f64()
    }

    /// Uniform in [lo, hi].
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// An exponential gap with the given mean (Poisson arrivals), at least 1.
    pub fn exp(&mut self, mean: f64) -> u64 {
        ((-(1.0 - self.unit()).ln()) * mean).max(1.0) as u64
    }
}

//! Named limits: counting algorithms with bounded memory per key and exact arithmetic over an
//! injected nanosecond clock (every call takes `now_ns`; the caller reads its `Clock` once per decision).
//!
//! - `fixed.rs`: fixed window (cheapest; up to 2 × limit across a window edge);
//! - `sliding.rs`: exact sliding window (a ring of at most `limit` timestamps per key);
//! - `counter.rs`: sliding window counter (two counts; error bound in its notes);
//! - `gcra.rs`: GCRA meter and shaper (constant rate, burst tolerance, delays up to `max_delay_ns`);
//! - `token.rs`: token bucket on `core::bucket`'s arithmetic;
//! - `algorithm.rs`: what they share (`Check`, `Policy`, `Algorithm`: check, then commit);
//! - `store.rs`: the bounded keyed store (keyed hash, `max_keys`, idle-first eviction);
//! - `keyed.rs`: one limit over many keys; `overrides.rs`: operators' per-key limits; `spec.rs`: options and validation;
//! - `set.rs`: several named limits decided all or nothing (`LimitSet`, `Decision`).
mod algorithm;
mod counter;
mod fixed;
mod gcra;
mod keyed;
mod overrides;
mod set;
mod sliding;
mod spec;
mod store;
mod token;

pub use algorithm::{Algorithm, Check, Policy, NEVER};
pub use counter::{CounterState, SlidingCounter};
pub use fixed::{FixedState, FixedWindow};
pub use gcra::{Gcra, GcraState};
pub use keyed::{Keyed, KeyedLimit};
pub use overrides::{Full, Overrides, MAX_OVERRIDES, MAX_PER_REQUEST};
pub use set::{Decision, KeyState, LimitSet, Tightest, MAX_LIMITS};
pub use sliding::{SlidingState, SlidingWindow, MAX_EXACT_LIMIT};
pub use spec::{AlgorithmKind, LimitSpec, DEFAULT_MAX_KEYS, MAX_EXACT_BYTES, MAX_WINDOW_MS};
pub use store::Store;
pub use token::TokenBucket;

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes per key for each algorithm, measured on a store holding 10,000 busy IPv4 keys (entries,
    /// table, key copies, ring heap). Printed for the benchmark report (`--nocapture`); bounded here.
    #[test]
    fn bytes_per_key_for_each_algorithm() {
        const N: u32 = 10_000;
        let mut report = Vec::new();
        for kind in AlgorithmKind::ALL.iter().copied() {
            let mut spec = LimitSpec::new("m", kind, 10.0, 60_000.0);
            // Room to spare: the cap is split over shards and keys do not spread over them exactly.
            spec.max_keys = Some(f64::from(2 * N));
            let l = spec.build("limits[0]").unwrap();
            for i in 0..N {
                let ip = format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255);
                // Ten units each: the exact window's ring is full.
                for _ in 0..10 {
                    let mut d = |_: &Check| true;
                    assert!(l.nest(ip.as_bytes(), 1, u64::from(i), &mut d).0);
                }
            }
            assert_eq!(l.len(), N as usize);
            let per_key = l.memory_bytes() / N as usize;
            println!("bytes per key: {:<16} {per_key:>4} (state heap at most {})", kind.as_str(), l.max_state_heap_bytes());
            report.push((kind, per_key));
            let ring = l.max_state_heap_bytes();
            assert!(per_key <= 160 + ring, "{} {per_key}", kind.as_str());
        }
        let fixed = report.iter().find(|r| r.0 == AlgorithmKind::FixedWindow).unwrap().1;
        let exact = report.iter().find(|r| r.0 == AlgorithmKind::SlidingWindow).unwrap().1;
        assert!(exact >= fixed + 80, "the ring holds 10 timestamps");
    }
}

#[cfg(test)]
mod outcome_tests;

#[cfg(test)]
mod vectors_tests;

//! Model check of the lease protocol with loom: every interleaving of the ledger's own code, its locks
//! and atomics swapped for loom's (src/core/sync.rs): entry locks, shard locks, the pool's lock, the
//! stripes. No preemption bound: the search is exhaustive, and takes about a second. `npm run test:model`, which is
//! `RUSTFLAGS="--cfg loom" cargo test --release --no-default-features --lib ledger::model`.
//!
//! That the check can fail: with a stripe's new lease stored after the pool's lock is released
//! (`Tier::debit_slow`), three of these four tests fail.
//!
//! The property: "refused iff the tier holds less than `cost`", with no refill so that a tier's tokens
//! only go down. Three debits of 1 against a tier of 3 must all be admitted, whichever thread's
//! stripe holds a lease of the tokens at the time (a refusal of any of them would be one with tokens left);
//! a fourth must be refused, and the tier ends empty (nothing created, nothing stranded).
use super::{Ledger, PerKeyConfig, TierConfig};
use crate::core::clock::ManualClock;
use crate::core::keymap::{shard_index, KeyHasher};
use loom::{model, thread};
use std::sync::Arc;

fn ledger() -> Ledger {
    // maxKeys 512: two shards. Leases are 3/64 of a token: small enough that each debit but the
    // first finds its stripe short and goes to the pool.
    let tier = TierConfig {
        name: "t".into(),
        capacity: 3.0,
        refill_per_sec: 0.0,
        protected: false,
        per_key: Some(PerKeyConfig { capacity: 10.0, refill_per_sec: 0.0, max_keys: 512, idle_ttl_ms: 60_000.0 }),
    };
    Ledger::with_clock(vec![tier], Arc::new(ManualClock::new(0))).unwrap()
}

/// Two keys in different shards of the model ledger's two (the hash key is the process's: the same in
/// every execution of the model).
fn two_shards() -> (Vec<u8>, Vec<u8>) {
    let h = KeyHasher::process();
    let shard = |k: &[u8]| shard_index(h.hash_one(k), 2);
    let a = b"a".to_vec();
    let b = (0..1000).map(|i| format!("b{i}").into_bytes()).find(|k| shard(k) != shard(&a)).unwrap();
    (a, b)
}

#[test]
fn the_model_ledger_has_two_shards() {
    model(|| assert_eq!(ledger().tiers[0].keys.as_ref().unwrap().shards.len(), 2));
}

#[test]
fn keyed_debits_in_two_shards_and_a_tier_only_one_take_every_token() {
    let (a, b) = two_shards();
    model(move || {
        let l = Arc::new(ledger());
        let (l1, a1) = (l.clone(), a.clone());
        let t1 = thread::spawn(move || l1.try_consume(0, Some(&a1), 1.0, 0));
        let (l2, b2) = (l.clone(), b.clone());
        let t2 = thread::spawn(move || l2.try_consume(0, Some(&b2), 1.0, 0));
        let here = l.try_consume(0, None, 1.0, 0);
        let (one, two) = (t1.join().unwrap(), t2.join().unwrap());
        assert!(one && two && here, "refused with tokens left: {one} {two} {here}");
        assert!(!l.try_consume(0, None, 1e-9, 0), "nothing was created");
        assert_eq!(l.snapshot_at(0)[0].tokens, 0.0);
    });
}

#[test]
fn a_fourth_debit_is_refused_and_nothing_is_stranded() {
    let (a, b) = two_shards();
    model(move || {
        let l = Arc::new(ledger());
        let (l1, a1) = (l.clone(), a.clone());
        let t1 = thread::spawn(move || u32::from(l1.try_consume(0, Some(&a1), 1.0, 0)) + u32::from(l1.try_consume(0, None, 1.0, 0)));
        let granted = u32::from(l.try_consume(0, Some(&b), 1.0, 0)) + u32::from(l.try_consume(0, Some(&b), 1.0, 0));
        let granted = granted + t1.join().unwrap();
        assert_eq!(granted, 3, "exactly the tier's tokens");
        assert_eq!(l.snapshot_at(0)[0].tokens, 0.0);
    });
}

#[test]
fn a_lease_pulled_back_mid_debit_is_never_lost() {
    // Key a's first debit leaves a lease of 3/64 in its thread's stripe; the tier-only debit of 2.47
    // is then short until it has pulled that lease back, and a's second debit (paid from that stripe,
    // or from the pool once the stripe is swapped) may run at any point of it. The three costs add up
    // to 2.99 of 3: each must be admitted in every interleaving.
    let (a, _) = two_shards();
    model(move || {
        let l = Arc::new(ledger());
        let (l1, a1) = (l.clone(), a.clone());
        let t1 = thread::spawn(move || (l1.try_consume(0, Some(&a1), 0.5, 0), l1.try_consume(0, Some(&a1), 0.02, 0)));
        let big = l.try_consume(0, None, 2.47, 0);
        let (first, second) = t1.join().unwrap();
        assert!(first && second && big, "refused with tokens left: {first} {second} {big}");
        assert!((l.snapshot_at(0)[0].tokens - 0.01).abs() < 1e-9);
    });
}

//! Debits, evictions, snapshots and scale changes from several threads at once, and slots.
use super::tests::{coarse_ledger, keyed, ledger, tier, SEC};
use super::*;
use crate::core::clock::ManualClock;
use crate::core::keymap::ShardCell;
use std::sync::atomic::Ordering::Relaxed;

#[test]
fn concurrent_debits_evictions_snapshots_and_scale_changes_keep_exact_totals() {
    // 4 threads debit 64 keys (each with 50 tokens, no refill) through a tier pool of 2,000 while
    // a fifth thread snapshots and moves the refill scale (no refill to scale: totals stay exact).
    // maxKeys 64 holds every key, so no key is ever forgotten: each grants at most 50.
    let l = Arc::new(Ledger::new(vec![keyed("t", 2000.0, 0.0, 50.0, 0.0, 64)]).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let noise = {
        let (l, stop) = (l.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Relaxed) {
                let s = l.snapshot();
                assert!(s[0].tokens >= 0.0 && s[0].tokens <= 2000.0 && s[0].keys <= 64);
                l.set_refill_scale(0, f64::from(n % 3) / 2.0);
                n += 1;
            }
        })
    };
    let per_key: Vec<Vec<u32>> = (0..4u64)
        .map(|w| {
            let l = l.clone();
            std::thread::spawn(move || {
                let mut granted = vec![0u32; 64];
                let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..20_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = (x % 64) as usize;
                    if l.try_consume_now(0, Some(format!("key-{k}").as_bytes()), 1.0) {
                        granted[k] += 1;
                    }
                }
                granted
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    stop.store(true, Relaxed);
    noise.join().unwrap();
    let totals: Vec<u32> = (0..64).map(|k| per_key.iter().map(|g| g[k]).sum()).collect();
    assert!(totals.iter().all(|&t| t <= 50), "{totals:?}");
    assert_eq!(totals.iter().sum::<u32>(), 2000);
    assert_eq!(l.snapshot()[0].tokens, 0.0);
}

/// Two keys whose buckets live in different shards of tier `tier`.
fn keys_in_two_shards(l: &Ledger, tier: usize) -> (Vec<u8>, Vec<u8>) {
    let map = l.tiers[tier].keys.as_ref().unwrap();
    let shard_of = |k: &[u8]| map.shard(map.hasher.hash_one(k)) as *const ShardCell;
    let a = b"key-0".to_vec();
    let b = (1..1000).map(|i| format!("key-{i}").into_bytes()).find(|k| shard_of(k) != shard_of(&a)).unwrap();
    (a, b)
}

#[test]
fn a_keyed_debits_stripe_lease_is_pulled_back_before_the_tier_refuses() {
    // A pool of 640: a keyed debit on another thread also takes a lease of 10 into that thread's stripe.
    let l = Arc::new(Ledger::new(vec![keyed("t", 640.0, 0.0, 1e9, 0.0, 1024)]).unwrap());
    let (a, b) = keys_in_two_shards(&l, 0);
    let other = l.clone();
    assert!(std::thread::spawn(move || other.try_consume(0, Some(&a), 1.0, 0)).join().unwrap());
    assert_eq!(l.snapshot_at(0)[0].tokens, 639.0, "leases count as the tier's tokens");
    // b, in another shard and on this thread, can take everything that is left, the lease included.
    assert!(l.consume(0, Some(&b), 639.0, 0).allowed);
    let o = l.consume(0, Some(&b), 0.5, 0);
    assert_eq!((o.allowed, o.limited_by), (false, Limit::Tier));
    assert_eq!(l.snapshot_at(0)[0].tokens, 0.0);
}

#[test]
fn refill_counts_keyed_leases_so_the_tier_never_exceeds_its_capacity() {
    let l = Arc::new(Ledger::with_clock(vec![keyed("t", 640.0, 1000.0, 1e9, 0.0, 1024)], Arc::new(ManualClock::new(0))).unwrap());
    let other = l.clone();
    assert!(std::thread::spawn(move || other.try_consume(0, Some(b"a"), 1.0, 0)).join().unwrap());
    // A minute later the pool is full again: pool plus the other thread's lease, never more than 640.
    assert_eq!(l.snapshot_at(60 * SEC)[0].tokens, 640.0);
    assert!(l.consume(0, None, 640.0, 60 * SEC).allowed);
    assert!(!l.consume(0, None, 0.001, 60 * SEC).allowed);
}

#[test]
fn keyed_and_tier_only_debits_keep_exact_totals_across_threads() {
    // 4 threads, keyed debits over many shards mixed with tier-only ones, through a pool of 5,000
    // (leases of 78): exactly the pool is granted, whichever thread's stripe held the tokens.
    for _ in 0..5 {
        let l = Arc::new(Ledger::new(vec![keyed("t", 5000.0, 0.0, 1e9, 0.0, 16_384)]).unwrap());
        let granted: u32 = (0..4u64)
            .map(|w| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut granted = 0u32;
                    for i in 0..20_000u64 {
                        let key = format!("k{}", (i * 31 + w * 7) % 3000);
                        let keyed = i % 3 != 0;
                        let cost = if i % 5 == 0 { 2.5 } else { 1.0 };
                        granted += u32::from(l.try_consume_now(0, keyed.then_some(key.as_bytes()), cost)) * if cost == 1.0 { 2 } else { 5 };
                    }
                    granted
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        // Granted is counted in half tokens; the pool ends empty (no cost is left unpaid at 5,000).
        assert_eq!(l.snapshot()[0].tokens, 5000.0 - f64::from(granted) / 2.0);
        assert!(l.snapshot()[0].tokens < 1.0, "{}", l.snapshot()[0].tokens);
    }
}

#[test]
fn a_slot_debits_its_key_as_the_key_itself_would() {
    let (l, _) = ledger(vec![tier("plain", 10.0, 0.0), keyed("k", 100.0, 0.0, 3.0, 0.0, 10)]);
    assert_eq!(l.try_consume_now_slot(0, b"u", 1.0), (true, None), "no per-key buckets: no slot");
    let (allowed, slot) = l.try_consume_now_slot(1, b"u", 1.0);
    let slot = slot.expect("a keyed tier gives a slot");
    assert!(allowed);
    assert_eq!(l.try_consume_slot_now(1, slot, 1.5), Some(true));
    assert_eq!(l.key_tokens(1, b"u", 0), Some(0.5));
    assert_eq!(l.try_consume_slot_now(1, slot, 1.0), Some(false), "the key's quota refuses");
    assert_eq!(l.try_consume_slot_now(1, slot, 0.5), Some(true));
    assert_eq!(l.snapshot_at(0)[1].tokens, 97.0, "the pool paid what the key granted");
    assert_eq!(l.try_consume_now_slot(1, b"u", 0.0), (true, Some(slot)), "the same key, the same slot");
    assert_eq!(l.try_consume_slot_now(0, slot, 1.0), None, "a tier without keys has no slots");
}

#[test]
fn a_slot_goes_stale_when_its_entry_is_forgotten_or_reused() {
    let (l, clock) = ledger(vec![keyed("k", 1e9, 0.0, 5.0, 0.0, 2)]);
    let slot = |k: &[u8]| l.try_consume_now_slot(0, k, 1.0).1.unwrap();
    // Forgotten by reset(key); the key comes back as a new entry with a new slot.
    let a = slot(b"a");
    assert_eq!(l.reset(Some(0), Some(b"a")), 1);
    assert_eq!(l.try_consume_slot_now(0, a, 1.0), None);
    let a = slot(b"a");
    assert_ne!(l.try_consume_slot_now(0, a, 1.0), None);
    // Entries do not move: removing another key leaves b's slot good, and the index it frees goes to
    // the next new key, under a new generation, so a's old slot stays stale.
    let b = slot(b"b");
    let old_a = a;
    assert_eq!(l.reset(Some(0), Some(b"a")), 1);
    assert_eq!(l.try_consume_slot_now(0, b, 1.0), Some(true), "b did not move");
    let d = slot(b"d");
    assert_eq!(d.idx, old_a.idx, "d took a's index");
    assert_eq!(l.try_consume_slot_now(0, old_a, 1.0), None, "and a's slot does not debit d");
    assert_eq!(l.key_tokens(0, b"d", 0), Some(4.0));
    assert_eq!(l.reset(Some(0), Some(b"d")), 1);
    let b = slot(b"b");
    assert_eq!(l.key_tokens(0, b"b", 0), Some(2.0));
    // Reused: with maxKeys 2, newer keys evict b (the least recently touched), and whatever then
    // sits at b's index is not b.
    clock.set_ns(SEC);
    let mut others = Vec::new();
    for i in 0..10u8 {
        others.push([b'x', i]);
        slot(&others[others.len() - 1]);
        if l.key_tokens(0, b"b", 0).is_none() {
            break;
        }
    }
    assert_eq!(l.key_tokens(0, b"b", 0), None, "b was evicted");
    assert_eq!(l.try_consume_slot_now(0, b, 1.0), None);
    for k in &others {
        assert!(matches!(l.key_tokens(0, k, SEC), None | Some(4.0)), "nobody else paid for b");
    }
    // Cleared: reset(tier) forgets every key.
    let c = slot(b"c");
    l.reset(Some(0), None);
    assert_eq!(l.try_consume_slot_now(0, c, 1.0), None);
}

#[test]
fn a_slot_on_the_coarse_clock_refuses_nothing_the_precise_one_admits() {
    // As the key test above: one token per 4 ms tick, asked for every 125 µs, by slot.
    let k = || vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)];
    let precise = Arc::new(ManualClock::new(0));
    let lp = Ledger::with_clock(k(), precise.clone()).unwrap();
    let (lc, clock) = coarse_ledger(k());
    let slot = lc.try_consume_now_slot(0, b"k", 0.0).1.unwrap();
    let (mut gp, mut gc) = (0u64, 0u64);
    for step in 0..80_000u64 {
        let t = step * 125_000;
        precise.set_ns(t);
        clock.set_ns(t);
        gp += u64::from(lp.try_consume_now(0, Some(b"k"), 1.0));
        gc += u64::from(lc.try_consume_slot_now(0, slot, 1.0).unwrap());
        assert_eq!(gc, gp, "at {t} ns");
    }
    assert_eq!(gp, 64 + 2499);
}

#[test]
fn an_exclusive_slot_debit_is_the_locked_one_exactly() {
    // Two ledgers, one debited by locked slots and one by exclusive ones, through the same calls: a
    // pool small enough that the stripes' leases run out and renew, keys that refill, tier-only debits
    // on the same thread's own stripe, and a key reset that makes a slot stale.
    let cfg = || vec![keyed("k", 500.0, 200.0, 7.0, 3.0, 16)];
    let (locked, lc) = ledger(cfg());
    let (exclusive, ec) = ledger(cfg());
    let keys: Vec<Vec<u8>> = (0..12).map(|k| format!("key-{k}").into_bytes()).collect();
    let (mut ls, mut es) = (vec![None; 12], vec![None; 12]);
    for step in 0..20_000u64 {
        let t = step * 1_000_000 / 7;
        lc.set_ns(t);
        ec.set_ns(t);
        let k = ((step * 5 + step / 3) % 12) as usize;
        let cost = [1.0, 0.5, 2.0][(step % 3) as usize];
        if step % 997 == 0 {
            assert_eq!(locked.reset(Some(0), Some(&keys[k])), exclusive.reset(Some(0), Some(&keys[k])));
        }
        if step % 13 == 0 {
            assert_eq!(locked.try_consume_now(0, None, 1.0), exclusive.try_consume_now(0, None, 1.0), "step {step}");
        }
        let a = ls[k].and_then(|s| locked.try_consume_slot_now(0, s, cost));
        // Safety: this test's thread is the only one using `exclusive`.
        let b = es[k].and_then(|s| unsafe { exclusive.try_consume_slot_exclusive(0, s, cost) });
        assert_eq!(a, b, "step {step}");
        if a.is_none() {
            let (a, s) = locked.try_consume_now_slot(0, &keys[k], cost);
            let (b, r) = exclusive.try_consume_now_slot(0, &keys[k], cost);
            assert_eq!(a, b, "step {step}");
            (ls[k], es[k]) = (s, r);
        }
        assert_eq!(locked.snapshot_at(t)[0].tokens, exclusive.snapshot_at(t)[0].tokens, "step {step}");
    }
    for k in &keys {
        assert_eq!(locked.key_tokens(0, k, 3 * SEC), exclusive.key_tokens(0, k, 3 * SEC));
    }
}

#[test]
fn slots_keep_exact_totals_across_threads() {
    // 4 threads debit 64 keys by slot (each key 50 tokens, no refill) through a pool of 2,000,
    // while a fifth resets keys, so slots go stale and are looked up again.
    let l = Arc::new(Ledger::new(vec![keyed("t", 2000.0, 0.0, 50.0, 0.0, 64)]).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let resetter = {
        let (l, stop) = (l.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut resets = 0u32;
            while !stop.load(Relaxed) || resets == 0 {
                resets += l.reset(Some(0), Some(format!("key-{}", resets % 64).as_bytes())) as u32;
                std::thread::yield_now();
            }
            resets
        })
    };
    let granted: u32 = (0..4u64)
        .map(|w| {
            let l = l.clone();
            std::thread::spawn(move || {
                let keys: Vec<Vec<u8>> = (0..64).map(|k| format!("key-{k}").into_bytes()).collect();
                let mut slots: Vec<Option<Slot>> = vec![None; 64];
                let mut granted = 0u32;
                for i in 0..20_000u64 {
                    let k = ((i * 7 + w * 13) % 64) as usize;
                    let allowed = match slots[k].and_then(|s| l.try_consume_slot_now(0, s, 1.0)) {
                        Some(a) => a,
                        None => {
                            let (a, s) = l.try_consume_now_slot(0, &keys[k], 1.0);
                            slots[k] = s;
                            a
                        }
                    };
                    granted += u32::from(allowed);
                }
                granted
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    stop.store(true, Relaxed);
    assert!(resetter.join().unwrap() > 0);
    assert_eq!(granted, 2000, "keys reset to full never lift the pool");
    assert_eq!(l.snapshot()[0].tokens, 0.0);
}

#[test]
fn concurrent_floods_stay_within_max_keys() {
    let l = Arc::new(Ledger::new(vec![keyed("t", 1e12, 0.0, 5.0, 0.0, 1000)]).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let l = l.clone();
            std::thread::spawn(move || {
                for i in 0..50_000 {
                    assert!(l.try_consume_now(0, Some(format!("w{w}-{i}").as_bytes()), 1.0));
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let s = l.snapshot()[0].clone();
    assert!(s.keys <= 1000 && s.keys > 900, "{}", s.keys);
    assert_eq!(s.tokens, 1e12 - 200_000.0);
}

#[test]
fn exact_accounting_across_threads() {
    // Half the attempts on one key (300 tokens), half on unique keys; the pool holds 1000.
    let l = Arc::new(Ledger::new(vec![keyed("t", 1000.0, 0.0, 300.0, 0.0, 100_000)]).unwrap());
    let (granted, shared) = (0..4)
        .map(|w| {
            let l = l.clone();
            std::thread::spawn(move || {
                let (mut all, mut shared) = (0, 0);
                for i in 0..10_000 {
                    let key = if i % 2 == 0 { b"shared".to_vec() } else { format!("w{w}-{i}").into_bytes() };
                    if l.consume(0, Some(&key), 1.0, l.now_ns()).allowed {
                        all += 1;
                        shared += usize::from(i % 2 == 0);
                    }
                }
                (all, shared)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(granted, 1000);
    assert_eq!(shared, 300);
}

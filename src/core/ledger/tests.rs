use super::*;
use crate::core::clock::ManualClock;
use crate::core::keymap::ShardCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

fn tier(name: &str, capacity: f64, refill: f64) -> TierConfig {
    TierConfig { name: name.into(), capacity, refill_per_sec: refill, protected: false, per_key: None }
}

fn keyed(name: &str, capacity: f64, refill: f64, key_cap: f64, key_refill: f64, max_keys: usize) -> TierConfig {
    TierConfig {
        per_key: Some(PerKeyConfig { capacity: key_cap, refill_per_sec: key_refill, max_keys, idle_ttl_ms: 60_000.0 }),
        ..tier(name, capacity, refill)
    }
}

fn ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    (Ledger::with_clock(tiers, clock.clone()).unwrap(), clock)
}

fn err(tiers: Vec<TierConfig>) -> String {
    Ledger::new(tiers).err().expect("config should be rejected").to_string()
}

#[test]
fn ledger_is_send_and_sync() {
    fn is<T: Send + Sync>() {}
    is::<Ledger>();
}

#[test]
fn names_and_ids() {
    let (l, _) = ledger(vec![tier("gold", 1.0, 1.0), TierConfig { protected: true, ..tier("free", 1.0, 1.0) }]);
    assert_eq!(l.tier_count(), 2);
    assert_eq!(l.tier_id(b"free"), Some(1));
    assert_eq!(l.tier_id(b"nope"), None);
    assert_eq!(l.tier_name(0), "gold");
    assert!(l.is_protected(1) && !l.is_protected(0));
}

#[test]
fn invalid_configs_name_the_option() {
    assert!(err(vec![]).contains("tiers must list at least one tier"));
    assert!(err(vec![tier("", 1.0, 1.0)]).contains("tiers[0].name"));
    assert!(err(vec![tier("a", 1.0, 1.0), tier("a", 1.0, 1.0)]).contains("tiers[1].name \"a\" is a duplicate"));
    assert!(err(vec![tier("a", 0.0, 1.0)]).contains("tiers[0].capacity must be a finite number > 0"));
    assert!(err(vec![tier("a", f64::NAN, 1.0)]).contains("tiers[0].capacity"));
    assert!(err(vec![tier("a", f64::INFINITY, 1.0)]).contains("tiers[0].capacity"));
    assert!(err(vec![tier("a", 1.0, -1.0)]).contains("tiers[0].refillPerSec must be a finite number >= 0"));
    assert!(err(vec![keyed("a", 1.0, 1.0, -1.0, 1.0, 1)]).contains("tiers[0].perKey.capacity"));
    assert!(err(vec![keyed("a", 1.0, 1.0, 1.0, f64::NAN, 1)]).contains("tiers[0].perKey.refillPerSec"));
    assert!(err(vec![keyed("a", 1.0, 1.0, 1.0, 1.0, 0)]).contains("tiers[0].perKey.maxKeys"));
    let mut t = keyed("a", 1.0, 1.0, 1.0, 1.0, 1);
    t.per_key.as_mut().unwrap().idle_ttl_ms = 0.0;
    assert!(err(vec![t]).contains("tiers[0].perKey.idleTtlMs"));
    // Zero refill is allowed: a fixed allowance.
    assert!(Ledger::new(vec![tier("a", 1.0, 0.0)]).is_ok());
}

#[test]
fn refill_over_time_and_clamp() {
    let (l, _) = ledger(vec![tier("t", 10.0, 100.0)]);
    for _ in 0..10 {
        assert!(l.consume(0, None, 1.0, 0).allowed);
    }
    let o = l.consume(0, None, 1.0, 0);
    assert!(!o.allowed);
    assert_eq!(o.limited_by, Limit::Tier);
    assert_eq!(o.retry_after_ms, 10.0);
    assert_eq!(o.reset_ms, 100.0);
    // 50 ms at 100/s = 5 tokens.
    let o = l.consume(0, None, 1.0, 50 * MS);
    assert!(o.allowed);
    assert_eq!(o.remaining, 4.0);
    // A long pause clamps at capacity.
    let o = l.consume(0, None, 0.0, 3600 * SEC);
    assert_eq!((o.remaining, o.reset_ms), (10.0, 0.0));
}

#[test]
fn fractional_refill() {
    let (l, _) = ledger(vec![tier("t", 2.0, 2.0)]);
    assert!(l.consume(0, None, 2.0, 0).allowed);
    // 250 ms at 2/s is half a token: not enough for 1, enough for 0.5.
    let o = l.consume(0, None, 1.0, 250 * MS);
    assert!(!o.allowed);
    assert_eq!(o.remaining, 0.5);
    assert_eq!(o.retry_after_ms, 250.0);
    let o = l.consume(0, None, 0.5, 250 * MS);
    assert!(o.allowed);
    assert_eq!(o.remaining, 0.0);
    let o = l.consume(0, None, 0.25, 375 * MS);
    assert!(o.allowed);
    assert_eq!(o.remaining, 0.0);
}

#[test]
fn cost_above_capacity_never_succeeds() {
    let (l, _) = ledger(vec![tier("t", 5.0, 1000.0), keyed("k", 100.0, 0.0, 3.0, 1.0, 10)]);
    let o = l.consume(0, None, 5.5, 10 * SEC);
    assert!(!o.allowed);
    assert_eq!(o.retry_after_ms, f64::INFINITY);
    assert_eq!(o.remaining, 5.0, "a refused debit takes nothing");
    assert!(l.consume(0, None, 5.0, 10 * SEC).allowed);
    let o = l.consume(1, Some(b"u"), 4.0, 0);
    assert!(!o.allowed);
    assert_eq!((o.limited_by, o.retry_after_ms), (Limit::Key, f64::INFINITY));
    assert_eq!(l.snapshot_at(0)[1].tokens, 100.0);
}

#[test]
fn clock_that_does_not_advance() {
    let (l, _) = ledger(vec![tier("t", 3.0, 1e9)]);
    let granted = (0..100).filter(|_| l.consume(0, None, 1.0, 7 * SEC).allowed).count();
    assert_eq!(granted, 3);
    // An older reading (another thread's, taken before ours) adds nothing either.
    assert!(!l.consume(0, None, 1.0, 6 * SEC).allowed);
}

#[test]
fn refill_scale_zero_stops_refill_and_one_restores_it() {
    let (l, clock) = ledger(vec![tier("t", 10.0, 10.0)]);
    assert!(l.consume(0, None, 10.0, 0).allowed);
    l.set_refill_scale(0, 0.0);
    assert_eq!(l.refill_scale(0), 0.0);
    clock.set_ns(10 * SEC);
    let o = l.consume(0, None, 1.0, 10 * SEC);
    assert!(!o.allowed);
    assert_eq!((o.remaining, o.retry_after_ms, o.reset_ms), (0.0, f64::INFINITY, f64::INFINITY));
    l.set_refill_scale(0, 1.0);
    // The ten seconds at scale 0 are not credited afterwards.
    let o = l.consume(0, None, 0.0, 10 * SEC + 500 * MS);
    assert_eq!(o.remaining, 5.0);
    // Half scale: half the rate.
    clock.set_ns(10 * SEC + 500 * MS);
    l.set_refill_scale(0, 0.5);
    let o = l.consume(0, None, 0.0, 11 * SEC + 500 * MS);
    assert_eq!(o.remaining, 10.0);
    assert!(l.consume(0, None, 10.0, 11 * SEC + 500 * MS).allowed);
    assert_eq!(l.consume(0, None, 0.0, 12 * SEC + 500 * MS).remaining, 5.0);
}

#[test]
fn set_refill_scale_credits_the_time_before_it() {
    let (l, clock) = ledger(vec![tier("t", 10.0, 10.0)]);
    assert!(l.consume(0, None, 10.0, 0).allowed);
    clock.set_ns(300 * MS);
    l.set_refill_scale(0, 0.0);
    assert_eq!(l.consume(0, None, 0.0, 5 * SEC).remaining, 3.0);
}

#[test]
fn keyed_debit_is_both_or_neither() {
    let (l, _) = ledger(vec![keyed("t", 3.0, 0.0, 2.0, 0.0, 100)]);
    assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
    assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
    // The key is empty: refused by the key, and the pool keeps its token.
    let o = l.consume(0, Some(b"a"), 1.0, 0);
    assert_eq!((o.allowed, o.limited_by, o.remaining, o.limit), (false, Limit::Key, 0.0, 2.0));
    assert_eq!(l.snapshot_at(0)[0].tokens, 1.0);
    assert!(l.consume(0, Some(b"b"), 1.0, 0).allowed);
    // The pool is empty: refused by the tier, and b keeps its token.
    let o = l.consume(0, Some(b"b"), 1.0, 0);
    assert_eq!((o.allowed, o.limited_by, o.remaining), (false, Limit::Tier, 1.0));
    assert_eq!(o.retry_after_ms, f64::INFINITY);
    assert_eq!(l.key_tokens(0, b"b", 0), Some(1.0));
    assert_eq!(l.key_tokens(0, b"c", 0), None);
}

#[test]
fn keyed_outcome_describes_the_key() {
    let (l, _) = ledger(vec![keyed("t", 1000.0, 1000.0, 10.0, 2.0, 100)]);
    let o = l.consume(0, Some(b"u"), 4.0, 0);
    assert_eq!((o.allowed, o.remaining, o.limit, o.retry_after_ms, o.reset_ms), (true, 6.0, 10.0, 0.0, 2000.0));
    assert!(l.consume(0, Some(b"u"), 6.0, 0).allowed);
    let o = l.consume(0, Some(b"u"), 3.0, 500 * MS);
    assert_eq!((o.allowed, o.remaining, o.retry_after_ms, o.reset_ms), (false, 1.0, 1000.0, 4500.0));
}

#[test]
fn key_ignored_for_a_tier_without_per_key() {
    let (l, _) = ledger(vec![tier("t", 2.0, 0.0)]);
    assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
    assert!(l.consume(0, Some(b"b"), 1.0, 0).allowed);
    assert!(!l.consume(0, Some(b"c"), 1.0, 0).allowed);
    assert_eq!(l.snapshot_at(0)[0].keys, 0);
}

#[test]
fn eviction_prefers_full_buckets() {
    let (l, _) = ledger(vec![keyed("t", 1e9, 0.0, 10.0, 1.0, 3)]);
    // c: drained at 2 s, a: drained at 0, b: drained at 1 s. By 10 s only a is full again; c is
    // the first entry of the shard, b the least recently touched.
    l.consume(0, Some(b"c"), 10.0, 2 * SEC);
    l.consume(0, Some(b"a"), 10.0, 0);
    l.consume(0, Some(b"b"), 10.0, SEC);
    l.consume(0, Some(b"d"), 1.0, 10 * SEC);
    assert_eq!(l.key_tokens(0, b"a", 10 * SEC), None, "the full bucket goes first");
    assert_eq!(l.key_tokens(0, b"b", 10 * SEC), Some(9.0));
    assert_eq!(l.key_tokens(0, b"c", 10 * SEC), Some(8.0));
    assert_eq!(l.key_tokens(0, b"d", 10 * SEC), Some(9.0));
    assert_eq!(l.snapshot_at(10 * SEC)[0].keys, 3);
}

#[test]
fn eviction_prefers_idle_buckets_then_least_recent() {
    let mut t = keyed("t", 1e9, 0.0, 10.0, 0.0, 3);
    t.per_key.as_mut().unwrap().idle_ttl_ms = 5_000.0;
    let (l, _) = ledger(vec![t]);
    // No refill: nobody is ever full again. b is touched last at 0 s, a at 3 s, c at 4 s.
    l.consume(0, Some(b"b"), 1.0, 0);
    l.consume(0, Some(b"a"), 1.0, SEC);
    l.consume(0, Some(b"c"), 1.0, 2 * SEC);
    l.consume(0, Some(b"a"), 1.0, 3 * SEC);
    l.consume(0, Some(b"c"), 1.0, 4 * SEC);
    // At 4.5 s nobody is idle: the least recently touched (b) goes.
    l.consume(0, Some(b"d"), 1.0, 4 * SEC + 500 * MS);
    assert_eq!(l.key_tokens(0, b"b", 5 * SEC), None);
    assert_eq!(l.key_tokens(0, b"a", 5 * SEC), Some(8.0));
    // By 9 s a (touched at 3 s) and c (4 s) are idle; d, touched again at 8.5 s, is not. New keys
    // sweep the idle ones out and d stays, though it is the oldest entry of the shard.
    l.consume(0, Some(b"d"), 1.0, 8 * SEC + 500 * MS);
    l.consume(0, Some(b"e"), 1.0, 9 * SEC);
    l.consume(0, Some(b"f"), 1.0, 9 * SEC);
    assert_eq!(l.key_tokens(0, b"d", 9 * SEC), Some(8.0));
    assert_eq!(l.key_tokens(0, b"e", 9 * SEC), Some(9.0));
    assert_eq!(l.key_tokens(0, b"f", 9 * SEC), Some(9.0));
    assert_eq!(l.key_tokens(0, b"a", 9 * SEC), None);
    assert_eq!(l.key_tokens(0, b"c", 9 * SEC), None);
}

#[test]
fn idle_keys_drain_without_reaching_the_cap() {
    let mut t = keyed("t", 1e9, 0.0, 10.0, 0.0, 1000);
    t.per_key.as_mut().unwrap().idle_ttl_ms = 1_000.0;
    let (l, _) = ledger(vec![t]);
    for i in 0..500u32 {
        l.consume(0, Some(&i.to_le_bytes()), 1.0, 0);
    }
    assert_eq!(l.snapshot_at(0)[0].keys, 500);
    // Later, fresh keys sweep the old ones out as they arrive.
    for i in 1000..1300u32 {
        l.consume(0, Some(&i.to_le_bytes()), 1.0, 10 * SEC);
    }
    assert!(l.snapshot_at(10 * SEC)[0].keys < 500, "idle keys were swept");
}

#[test]
fn max_keys_holds_under_a_flood_of_unique_keys() {
    let (l, _) = ledger(vec![keyed("t", 1e12, 0.0, 5.0, 0.0, 5000)]);
    for i in 0..200_000u64 {
        let o = l.consume(0, Some(format!("user-{i}").as_bytes()), 1.0, i * MS);
        assert!(o.allowed);
    }
    let keys = l.snapshot_at(200 * SEC)[0].keys;
    assert!((4900..=5000).contains(&keys), "{keys}");
}

#[test]
fn inline_and_heap_keys_are_told_apart() {
    let (l, _) = ledger(vec![keyed("t", 1e9, 0.0, 5.0, 0.0, 100)]);
    let long_a = [b'a'; 40];
    let mut long_b = long_a;
    long_b[39] = b'b';
    let keys: [&[u8]; 8] = [b"", b"a", b"a\0", &[b'x'; 24], &[b'x'; 25], &long_a, &long_b, &long_a[..39]];
    for (i, k) in keys.iter().enumerate() {
        assert!(l.consume(0, Some(k), (i + 1) as f64 * 0.5, 0).allowed);
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(l.key_tokens(0, k, 0), Some(5.0 - (i + 1) as f64 * 0.5), "key {i}");
    }
    assert_eq!(l.snapshot_at(0)[0].keys, keys.len());
}

#[test]
fn snapshot_and_reset() {
    let (l, clock) = ledger(vec![tier("a", 10.0, 1.0), keyed("b", 10.0, 0.0, 2.0, 0.0, 10)]);
    l.consume(0, None, 4.0, 0);
    l.consume(1, Some(b"x"), 2.0, 0);
    l.consume(1, Some(b"y"), 1.0, 0);
    l.set_refill_scale(0, 0.5);
    clock.set_ns(2 * SEC);
    let s = l.snapshot();
    assert_eq!(s[0], TierSnapshot { name: "a".into(), protected: false, tokens: 7.0, capacity: 10.0, refill_per_sec: 1.0, refill_scale: 0.5, keys: 0 });
    assert_eq!((s[1].tokens, s[1].keys), (7.0, 2));
    assert_eq!(l.reset(Some(1), Some(b"x")), 1);
    assert_eq!(l.key_tokens(1, b"x", 0), None);
    assert_eq!(l.key_tokens(1, b"y", 0), Some(1.0));
    assert_eq!(l.snapshot()[1].tokens, 7.0, "forgetting a key leaves the pool alone");
    assert_eq!(l.reset(Some(1), None), 2);
    assert_eq!(l.snapshot()[1], TierSnapshot { tokens: 10.0, keys: 0, ..s[1].clone() });
    assert_eq!(l.snapshot()[0].tokens, 7.0);
    l.reset(None, None);
    assert_eq!(l.snapshot()[0].tokens, 10.0);
    assert_eq!(l.refill_scale(0), 0.5, "reset leaves the shed controller's scale alone");
}

#[test]
fn a_lease_held_by_another_thread_is_pulled_back_before_refusing() {
    let l = Arc::new(Ledger::new(vec![tier("t", 640.0, 0.0)]).unwrap());
    // Another thread takes one token and with it a lease of 10 (capacity / 64).
    let other = l.clone();
    assert!(std::thread::spawn(move || other.try_consume(0, None, 1.0, 0)).join().unwrap());
    assert_eq!(l.snapshot_at(0)[0].tokens, 639.0, "leases count as the tier's tokens");
    // This thread can still take every remaining token, then nothing more.
    assert!(l.consume(0, None, 639.0, 0).allowed);
    let o = l.consume(0, None, 0.5, 0);
    assert_eq!((o.allowed, o.remaining), (false, 0.0));
}

#[test]
fn leases_do_not_lift_the_pool_above_capacity() {
    let l = Arc::new(Ledger::with_clock(vec![tier("t", 64.0, 1000.0)], Arc::new(ManualClock::new(0))).unwrap());
    let other = l.clone();
    assert!(std::thread::spawn(move || other.try_consume(0, None, 1.0, 0)).join().unwrap());
    assert!(l.consume(0, None, 1.0, 0).allowed);
    // After a long pause the pool refills to capacity minus the leases, never above.
    assert_eq!(l.snapshot_at(60 * SEC)[0].tokens, 64.0);
    let o = l.consume(0, None, 64.0, 60 * SEC);
    assert!(o.allowed, "all 64 tokens, leases included");
    assert!(!l.consume(0, None, 0.001, 60 * SEC).allowed);
}

#[test]
fn try_consume_now_reads_the_clock_only_when_the_debit_needs_it() {
    struct Counting(AtomicU64);
    impl Clock for Counting {
        fn now_ns(&self) -> u64 {
            self.0.fetch_add(1, Relaxed);
            0
        }
    }
    let clock = Arc::new(Counting(AtomicU64::new(0)));
    let l = Ledger::with_clock(vec![tier("t", 6400.0, 1.0), keyed("k", 100.0, 1.0, 10.0, 1.0, 10)], clock.clone()).unwrap();
    let reads = || clock.0.load(Relaxed);
    let base = reads();
    assert!(l.try_consume_now(0, None, 1.0)); // takes a lease of 100: one read, to refill the pool
    assert_eq!(reads(), base + 1);
    for _ in 0..99 {
        assert!(l.try_consume_now(0, None, 1.0));
    }
    assert_eq!(reads(), base + 1, "debits from the lease never read the clock");
    assert!(l.try_consume_now(1, Some(b"u"), 1.0));
    assert_eq!(reads(), base + 2, "a keyed debit reads it once");
}

/// A clock that reads the true time (set by the test) rounded down to its 4 ms tick, as
/// CLOCK_MONOTONIC_COARSE does.
struct Ticking(Arc<ManualClock>);
const TICK: u64 = 4 * MS;
impl Clock for Ticking {
    fn now_ns(&self) -> u64 {
        self.0.now_ns() / TICK * TICK
    }
    fn resolution_ns(&self) -> u64 {
        TICK
    }
}

/// A ledger with a precise and a ticking clock over one true time.
fn coarse_ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    let l = Ledger::with_clocks(tiers, clock.clone(), Arc::new(Ticking(clock.clone()))).unwrap();
    (l, clock)
}

#[test]
fn coarse_clock_only_where_one_tick_is_a_small_share() {
    // 250 tokens/s for 4 ms is one token: at most capacity / 64.
    assert!(coarse_is_safe(&[tier("t", 64.0, 250.0)], TICK));
    assert!(!coarse_is_safe(&[tier("t", 63.0, 250.0)], TICK));
    assert!(!coarse_is_safe(&[tier("a", 1e6, 1.0), keyed("b", 1e6, 1.0, 10.0, 1000.0, 10)], TICK));
    assert_eq!(coarse_ledger(vec![tier("t", 64.0, 250.0)]).0.coarse_tick_ns(), TICK);
    assert_eq!(coarse_ledger(vec![tier("t", 63.0, 250.0)]).0.coarse_tick_ns(), 0);
    let l = Ledger::new(vec![keyed("t", 1e15, 1e15, 1e15, 1e15, 10)]).unwrap();
    assert_eq!(l.coarse_tick_ns(), CoarseClock::new().map_or(0, |c| c.resolution_ns()));
    assert_eq!(Ledger::new(vec![tier("smooth", 1.0, 1000.0)]).unwrap().coarse_tick_ns(), 0, "1 ms of burst");
}

#[test]
fn the_coarse_clock_loses_no_token_and_refuses_nothing_the_precise_one_admits() {
    // A key of 64 tokens refilled at 250/s (one token per 4 ms tick), asked for one token every
    // 125 µs (32 asks per token: always short) for 10 s; the same on a precise-only ledger.
    let k = || vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)];
    let precise = Arc::new(ManualClock::new(0));
    let lp = Ledger::with_clock(k(), precise.clone()).unwrap();
    let (lc, clock) = coarse_ledger(k());
    let (mut gp, mut gc) = (0u64, 0u64);
    for step in 0..80_000u64 {
        let t = step * 125_000;
        precise.set_ns(t);
        clock.set_ns(t);
        gp += u64::from(lp.try_consume_now(0, Some(b"k"), 1.0));
        gc += u64::from(lc.try_consume_now(0, Some(b"k"), 1.0));
        assert_eq!(gc, gp, "at {t} ns");
    }
    // The burst plus every whole token of refill (the last ask is at 9.999875 s).
    assert_eq!(gp, 64 + 2499);
    assert_eq!(lc.key_tokens(0, b"k", 10 * SEC), lp.key_tokens(0, b"k", 10 * SEC));
}

#[test]
fn the_coarse_clock_stamps_an_admitted_debit_at_most_a_tick_early() {
    // The bound the module notes state: a full bucket debited 3 ms into a tick is stamped at the
    // tick, so it is credited those 3 ms again: 0.75 tokens at 250/s, under one tick's refill.
    let (l, clock) = coarse_ledger(vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)]);
    clock.set_ns(3 * MS);
    assert!(l.try_consume_now(0, Some(b"k"), 64.0));
    assert_eq!(l.key_tokens(0, b"k", 3 * MS), Some(0.75));
    // Just before the next tick the coarse reading says 0 tokens, the precise one just under 1: a
    // whole token is refused by both, 0.9 admitted at the precise reading.
    clock.set_ns(TICK - 1);
    assert!(!l.try_consume_now(0, Some(b"k"), 1.0));
    assert!(l.try_consume_now(0, Some(b"k"), 0.9));
}

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

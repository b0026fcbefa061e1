use super::*;
use crate::core::clock::ManualClock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub(super) const MS: u64 = 1_000_000;
pub(super) const SEC: u64 = 1_000_000_000;

pub(super) fn tier(name: &str, capacity: f64, refill: f64) -> TierConfig {
    TierConfig { name: name.into(), capacity, refill_per_sec: refill, protected: false, per_key: None }
}

pub(super) fn keyed(name: &str, capacity: f64, refill: f64, key_cap: f64, key_refill: f64, max_keys: usize) -> TierConfig {
    TierConfig {
        per_key: Some(PerKeyConfig { capacity: key_cap, refill_per_sec: key_refill, max_keys, idle_ttl_ms: 60_000.0 }),
        ..tier(name, capacity, refill)
    }
}

pub(super) fn ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(0));
    (Ledger::with_clock(tiers, clock.clone()).unwrap(), clock)
}

pub(super) fn err(tiers: Vec<TierConfig>) -> String {
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
pub(super) fn coarse_ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
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

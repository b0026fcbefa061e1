//! The engine's flows one at a time, on a hand-driven clock and hand-written grants.
use crate::core::quota::*;

const MS: u64 = 1_000_000;
const K: &[u8] = b"user:1";

fn limit() -> LimitConfig {
    LimitConfig {
        renewal_period_ms: 1000.0,
        lead_time_ms: 200.0,
        lease_ttl_ms: 5000.0,
        max_lease: 1000,
        initial_lease: 10,
        retry_ms: 500.0,
        ..LimitConfig::new("api", Algorithm::TokenBucket { rate_per_sec: 100.0, burst: 200.0 })
    }
}

fn engine_with(l: LimitConfig, max_keys: usize) -> (Quota, LimitId) {
    let q = Quota::new(QuotaConfig { max_keys, idle_ttl_ms: 10_000.0, ..QuotaConfig::new(vec![l]) }).unwrap();
    let id = q.limit("api").unwrap();
    (q, id)
}

fn engine() -> (Quota, LimitId) {
    engine_with(limit(), 100)
}

fn grant(granted: u64, remaining: u64, holders: u32) -> Grant {
    Grant { granted, ttl_ns: 5000 * MS, remaining, holders, lease: LeaseId(7), retry_after_ns: 0 }
}

fn need(s: Spend) -> Request {
    match s {
        Spend::NeedLease(r) => r,
        other => panic!("expected NeedLease, got {other:?}"),
    }
}

fn requests(a: &[Action]) -> Vec<&Request> {
    a.iter().filter_map(|a| if let Action::Request(r) = a { Some(r) } else { None }).collect()
}

fn returns(a: &[Action]) -> Vec<&Return> {
    a.iter().filter_map(|a| if let Action::Return(r) = a { Some(r) } else { None }).collect()
}

/// Spends `n` tokens one at a time, spread evenly over [from, to).
fn spend_evenly(q: &mut Quota, l: LimitId, n: u64, from: u64, to: u64) {
    for i in 0..n {
        assert_eq!(q.try_spend(l, K, 1, from + (to - from) * i / n), Spend::Spent(Source::Lease));
    }
}

#[test]
fn an_engine_can_move_to_the_thread_that_holds_its_lock() {
    fn is<T: Send>() {}
    is::<Quota>();
}

#[test]
fn a_cost_past_any_allowance_or_lease_neither_overflows_nor_spends() {
    let (mut q, l) = engine_with(LimitConfig { unfunded: Unfunded::Provisional { allowance: 3 }, ..limit() }, 10);
    assert_eq!(q.try_spend(l, K, 1, 0), Spend::Spent(Source::Provisional));
    let r = need(q.try_spend(l, K, u64::MAX, 0));
    assert_eq!(r.size, u64::MAX, "the cost is asked whole; the store grants what it has");
    assert_eq!(q.debt(l, K), 1);
}

#[test]
fn a_new_key_waits_for_one_lease_then_spends_locally() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    assert_eq!((r.size, r.ttl_ns, &*r.key, r.limit), (10, 5000 * MS, K, l), "the initial lease");
    assert_eq!(q.try_spend(l, K, 1, MS), Spend::Awaiting, "one request in flight per key");
    assert!(q.poll(MS).is_empty());
    assert_eq!(q.grant(l, K, r.id, grant(10, 190, 1), 2 * MS), None);
    assert_eq!(q.held(l, K, 2 * MS), 10);
    for _ in 0..10 {
        assert_eq!(q.try_spend(l, K, 1, 3 * MS), Spend::Spent(Source::Lease));
    }
    assert_eq!(q.held(l, K, 3 * MS), 0);
    let s = q.stats();
    assert_eq!((s.spent_lease, s.requests, s.grants, s.granted), (10, 1, 1, 10));
}

#[test]
fn renewals_are_asked_ahead_of_need_sized_to_the_rate() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    assert!(q.grant(l, K, r.id, grant(r.size, 1_000_000, 1), 0).is_none());
    // 100 spends a second for 3 s, the store answering 5 ms after each request.
    let mut in_flight: Option<(Request, u64)> = None;
    let mut sizes = vec![];
    for t in 0..3000u64 {
        let now = t * MS;
        if t % 10 == 0 {
            assert_eq!(q.try_spend(l, K, 1, now), Spend::Spent(Source::Lease), "at {t} ms: renewed ahead of need");
        }
        if let Some((r, at)) = in_flight.take_if(|(_, at)| *at <= now) {
            assert!(q.grant(l, K, r.id, grant(r.size, 1_000_000, 1), at).is_none());
        }
        for r in requests(&q.poll(now)) {
            assert!(in_flight.is_none(), "at {t} ms: a second request while one is in flight");
            sizes.push(r.size);
            in_flight = Some((r.clone(), now + 5 * MS));
        }
    }
    // Once the rate is known, each lease is about a renewal period (1 s) of it: 100 tokens.
    let last = *sizes.last().unwrap();
    assert!((95..=105).contains(&last), "{sizes:?}");
    assert!(sizes.len() < 60, "few renewals: {}", sizes.len());
}

#[test]
fn the_lease_shrinks_near_the_limit() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    // 60 left among 3 holders: at most 10 per lease.
    q.grant(l, K, r.id, grant(10, 60, 3), MS);
    for _ in 0..10 {
        let _ = q.try_spend(l, K, 1, 2 * MS);
    }
    let r = need(q.try_spend(l, K, 1, 3 * MS));
    assert_eq!(r.size, 10);
    q.grant(l, K, r.id, grant(10, 3, 3), 4 * MS);
    spend_evenly(&mut q, l, 10, 4 * MS, 5 * MS);
    assert_eq!(need(q.try_spend(l, K, 2, 6 * MS)).size, 2, "one token a lease, or the waiting spend's cost");
}

#[test]
fn an_exhausted_limit_refuses_without_asking_until_its_retry_time() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 5, 0));
    let g = Grant { granted: 3, remaining: 0, retry_after_ns: 100 * MS, ..grant(3, 0, 1) };
    assert!(q.grant(l, K, r.id, g, MS).is_none());
    assert_eq!(q.held(l, K, MS), 3);
    assert_eq!(q.try_spend(l, K, 5, 2 * MS), Spend::Refused { reason: Refusal::Exhausted, retry_after_ns: 99 * MS });
    assert_eq!(q.try_spend(l, K, 3, 2 * MS), Spend::Spent(Source::Lease), "what was granted is spent");
    assert!(requests(&q.poll(50 * MS)).is_empty(), "no request while the store has nothing");
    assert!(matches!(q.try_spend(l, K, 1, 101 * MS), Spend::NeedLease(_)));
}

#[test]
fn provisional_admits_on_credit_and_the_grant_pays_it_back_first() {
    let (mut q, l) = engine_with(LimitConfig { unfunded: Unfunded::Provisional { allowance: 3 }, ..limit() }, 100);
    assert_eq!(q.try_spend(l, K, 2, 0), Spend::Spent(Source::Provisional));
    assert_eq!(q.try_spend(l, K, 1, 0), Spend::Spent(Source::Provisional));
    assert_eq!(q.debt(l, K), 3);
    // The allowance is used up: one round trip, joining the reconciliation if it is in flight.
    let a = q.poll(MS);
    let r = requests(&a)[0].clone();
    assert!(r.size >= 10, "initial lease, at least the debt");
    assert_eq!(q.try_spend(l, K, 1, MS), Spend::Awaiting);
    assert!(q.grant(l, K, r.id, grant(10, 1000, 1), 2 * MS).is_none());
    assert_eq!((q.debt(l, K), q.held(l, K, 2 * MS)), (0, 7));
    assert_eq!(q.stats().repaid, 3);
    // A grant smaller than the debt leaves the rest owed and asks again.
    let (mut q, l) = engine_with(LimitConfig { unfunded: Unfunded::Provisional { allowance: 5 }, ..limit() }, 100);
    assert_eq!(q.try_spend(l, K, 5, 0), Spend::Spent(Source::Provisional));
    let r = requests(&q.poll(0))[0].clone();
    assert!(q.grant(l, K, r.id, grant(2, 100, 1), MS).is_none());
    assert_eq!((q.debt(l, K), q.held(l, K, MS)), (3, 0));
    assert_eq!(requests(&q.poll(MS)).len(), 1, "the debt asks again");
    assert!(matches!(q.try_spend(l, K, 3, MS), Spend::Awaiting), "3 + 3 is past the allowance");
}

#[test]
fn a_lease_expires_at_its_ttl_counted_from_when_it_was_asked() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    // Answered 30 ms later: the lease lives until 0 + 5000 ms, not 30 + 5000.
    q.grant(l, K, r.id, grant(50, 1000, 1), 30 * MS);
    assert_eq!(q.held(l, K, 4999 * MS), 50);
    assert_eq!(q.held(l, K, 5000 * MS), 0);
    assert!(matches!(q.try_spend(l, K, 1, 5000 * MS), Spend::NeedLease(_)), "expired tokens are not spent");
    let a = q.poll(5000 * MS);
    let back = returns(&a);
    assert_eq!(back.len(), 1);
    assert_eq!((back[0].tokens, back[0].reason, back[0].lease), (50, ReturnReason::Expired, LeaseId(7)));
    assert_eq!(q.stats().expired, 50);
    // A grant that arrives after its lease's TTL is handed straight back.
    let r = q.try_spend(l, K, 1, 5001 * MS);
    assert_eq!(r, Spend::Awaiting);
    let id = RequestId(q.stats().requests);
    let back = q.grant(l, K, id, grant(9, 1000, 1), 10_001 * MS).unwrap();
    assert_eq!((back.tokens, back.reason), (9, ReturnReason::Unusable));
}

#[test]
fn answers_to_no_request_in_flight_are_handed_back() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    q.fail(l, K, r.id, 10 * MS);
    assert!(!q.pending(l, K));
    let late = q.grant(l, K, r.id, grant(10, 100, 1), 20 * MS).unwrap();
    assert_eq!((late.tokens, late.reason, &*late.key), (10, ReturnReason::Late, K));
    assert_eq!(q.held(l, K, 20 * MS), 0);
    assert!(q.grant(l, b"never-seen", RequestId(99), grant(4, 100, 1), 20 * MS).is_some_and(|r| r.tokens == 4));
    assert_eq!(q.grant(l, b"never-seen", RequestId(99), grant(0, 100, 1), 20 * MS), None, "nothing to hand back");
}

#[test]
fn a_store_that_is_down_makes_keys_fall_back_and_recovery_is_automatic() {
    for fallback in [Fallback::Open, Fallback::Closed] {
        let cfg = LimitConfig { fallback, min_holders: 2, algorithm: Algorithm::Window { limit: 10.0, window_ms: 1000.0 }, ..limit() };
        let (mut q, l) = engine_with(cfg, 100);
        let r = need(q.try_spend(l, K, 1, 0));
        q.grant(l, K, r.id, grant(2, 100, 1), MS);
        assert_eq!(q.try_spend(l, K, 2, MS), Spend::Spent(Source::Lease));
        let r = need(q.try_spend(l, K, 1, 2 * MS));
        q.fail(l, K, r.id, 3 * MS);
        assert!(!q.store_up());
        // A new key does not wait on a store that is not answering.
        let other = q.try_spend(l, b"new", 1, 4 * MS);
        match fallback {
            Fallback::Open => {
                assert_eq!(other, Spend::Spent(Source::Fallback));
                // 10 per window ÷ 2 holders (minHolders): 5 per local window.
                for _ in 0..5 {
                    assert_eq!(q.try_spend(l, K, 1, 5 * MS), Spend::Spent(Source::Fallback));
                }
                assert_eq!(q.try_spend(l, K, 1, 5 * MS), Spend::Refused { reason: Refusal::Share, retry_after_ns: 995 * MS });
                assert_eq!(q.stats().spent_fallback, 6);
            }
            Fallback::Closed => {
                assert_eq!(other, Spend::Refused { reason: Refusal::StoreDown, retry_after_ns: 500 * MS });
                assert_eq!(q.try_spend(l, K, 1, 5 * MS), Spend::Refused { reason: Refusal::StoreDown, retry_after_ns: 500 * MS });
            }
        }
        // Probes: the new key's at once, this key's after retryMs.
        let a = q.poll(6 * MS);
        assert_eq!(requests(&a).iter().map(|r| &*r.key).collect::<Vec<_>>(), vec![b"new" as &[u8]]);
        let probe = requests(&a)[0].clone();
        let _ = q.try_spend(l, K, 1, 503 * MS);
        let a = q.poll(504 * MS);
        assert_eq!(requests(&a).iter().map(|r| &*r.key).collect::<Vec<_>>(), vec![K]);
        let r = requests(&a)[0].clone();
        // The store answers again: leases, not fallback.
        q.grant(l, b"new", probe.id, grant(1, 100, 1), 505 * MS);
        assert!(q.store_up());
        q.grant(l, K, r.id, grant(3, 100, 1), 505 * MS);
        assert_eq!(q.try_spend(l, K, 3, 506 * MS), Spend::Spent(Source::Lease));
    }
}

#[test]
fn the_fallback_share_divides_by_the_most_holders_known() {
    let cfg = LimitConfig { algorithm: Algorithm::TokenBucket { rate_per_sec: 0.0, burst: 100.0 }, ..limit() };
    let (mut q, l) = engine_with(cfg, 100);
    let r = need(q.try_spend(l, b"a", 1, 0));
    q.grant(l, b"a", r.id, grant(1, 50, 4), MS);
    let r = need(q.try_spend(l, K, 1, 0));
    q.fail(l, K, r.id, MS);
    // K has never had a grant; the limit has seen 4 holders: 100 / 4 = 25.
    for _ in 0..25 {
        assert_eq!(q.try_spend(l, K, 1, 2 * MS), Spend::Spent(Source::Fallback));
    }
    assert!(matches!(q.try_spend(l, K, 1, 2 * MS), Spend::Refused { reason: Refusal::Share, .. }));
}

#[test]
fn idle_keys_are_evicted_by_the_sweep_returning_their_leases() {
    let (mut q, l) = engine_with(LimitConfig { lease_ttl_ms: 60_000.0, ..limit() }, 100);
    let r = need(q.try_spend(l, K, 1, 0));
    q.grant(l, K, r.id, Grant { ttl_ns: 60_000 * MS, ..grant(10, 100, 1) }, MS);
    assert_eq!(q.try_spend(l, K, 4, MS), Spend::Spent(Source::Lease));
    assert!(returns(&q.poll(10_000 * MS)).is_empty());
    assert_eq!(q.keys(), 1);
    // Untouched for the idle TTL (10 s): evicted, its six tokens handed back.
    let a = q.poll(10_001 * MS);
    let back = returns(&a);
    assert_eq!((q.keys(), back.len(), back[0].tokens, back[0].reason), (0, 1, 6, ReturnReason::Evicted));
    assert_eq!(q.stats().evicted, 1);
}

#[test]
fn a_full_table_evicts_an_evictable_key_and_never_one_that_owes() {
    let (mut q, l) = engine_with(LimitConfig { unfunded: Unfunded::Provisional { allowance: 1 }, lease_ttl_ms: 60_000.0, ..limit() }, 2);
    let r = need(q.try_spend(l, b"a", 2, 0));
    q.grant(l, b"a", r.id, grant(10, 100, 1), MS);
    assert_eq!(q.try_spend(l, b"a", 2, MS), Spend::Spent(Source::Lease));
    assert_eq!(q.try_spend(l, b"b", 1, 2 * MS), Spend::Spent(Source::Provisional));
    // "b" owes a debt and awaits nothing yet; "a" holds a lease: "a" goes, its lease handed back.
    assert_eq!(q.try_spend(l, b"c", 1, 3 * MS), Spend::Spent(Source::Provisional));
    assert_eq!((q.held(l, b"a", 3 * MS), q.debt(l, b"b")), (0, 1));
    let a = q.poll(3 * MS);
    let back = returns(&a);
    assert_eq!((back[0].tokens, back[0].reason, &*back[0].key), (8, ReturnReason::Evicted, b"a" as &[u8]));
    // Both owe now: a fourth key is not tracked.
    assert_eq!(q.try_spend(l, b"d", 1, 4 * MS), Spend::Refused { reason: Refusal::Full, retry_after_ns: 500 * MS });
    assert_eq!(q.keys(), 2);
}

#[test]
fn release_all_hands_back_every_unspent_token() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, b"a", 1, 0));
    q.grant(l, b"a", r.id, grant(10, 100, 1), MS);
    let _ = q.try_spend(l, b"a", 3, 2 * MS);
    let r = need(q.try_spend(l, b"b", 1, 0));
    q.grant(l, b"b", r.id, grant(5, 100, 1), MS);
    let pending = need(q.try_spend(l, b"c", 1, 3 * MS));
    let mut back: Vec<_> = q.release_all(4 * MS).into_iter().map(|r| (r.key, r.tokens, r.reason)).collect();
    back.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(back, vec![(b"a"[..].into(), 7, ReturnReason::Released), (b"b"[..].into(), 5, ReturnReason::Released)]);
    assert_eq!(q.keys(), 0);
    assert!(q.grant(l, b"c", pending.id, grant(4, 100, 1), 5 * MS).is_some_and(|r| r.reason == ReturnReason::Late));
    assert_eq!(q.stats().returned, 16);
}

#[test]
fn a_grant_past_the_lease_cap_hands_the_smallest_back() {
    let (mut q, l) = engine();
    let mut held = 0;
    for i in 0..=MAX_LEASES as u64 {
        let r = need(q.try_spend(l, K, held + 1, i * MS));
        let g = Grant { lease: LeaseId(i), ..grant(held + 1, 10_000, 1) };
        let back = q.grant(l, K, r.id, g, i * MS);
        if i < MAX_LEASES as u64 {
            assert!(back.is_none());
            held = 2 * held + 1;
        } else {
            let back = back.unwrap();
            assert_eq!((back.reason, back.lease, back.tokens), (ReturnReason::Overflow, LeaseId(0), 1));
        }
    }
}

#[test]
fn an_unanswered_request_is_abandoned_at_the_lease_ttl() {
    let (mut q, l) = engine();
    let _ = need(q.try_spend(l, K, 1, 0));
    assert!(q.poll(4999 * MS).is_empty() && q.pending(l, K));
    assert!(q.pending(l, K));
    let _ = q.poll(5000 * MS);
    assert!(!q.pending(l, K));
    assert_eq!(q.stats().abandoned, 1);
    assert!(q.store_up(), "one key's lost answer does not mark the store down");
}

#[test]
fn returns_beyond_the_outbox_are_dropped_and_counted() {
    let (mut q, l) = engine_with(limit(), MAX_OUTBOX + 10);
    for i in 0..MAX_OUTBOX + 10 {
        let key = format!("k{i}");
        let r = need(q.try_spend(l, key.as_bytes(), 1, 0));
        q.grant(l, key.as_bytes(), r.id, grant(2, 100, 1), 0);
    }
    // Every lease expires at once, the sweep reaches all keys only over several polls but the
    // spends below expire them directly, with no poll in between.
    for i in 0..MAX_OUTBOX + 10 {
        let _ = q.try_spend(l, format!("k{i}").as_bytes(), 1, 6000 * MS);
    }
    assert_eq!(q.stats().returns_dropped, 10);
    assert_eq!(q.stats().returned, 2 * MAX_OUTBOX as u64, "dropped returns are not counted as returned");
    let n = returns(&q.poll(6000 * MS)).len();
    assert_eq!(n, MAX_OUTBOX);
}

#[test]
fn spends_that_join_a_request_before_it_is_sent_are_asked_for_with_it() {
    let (mut q, l) = engine();
    let mut r = need(q.try_spend(l, K, 1, 0));
    assert_eq!(r.size, 10, "the first lease: initial_lease");
    for _ in 0..39 {
        assert_eq!(q.try_spend(l, K, 1, MS), Spend::Awaiting);
    }
    q.top_up(&mut r);
    assert_eq!(r.size, 40, "every waiting spend in one round trip");
    // Nearly empty: the store has 25 left. The waiting spends are retried after the answer; the
    // first one left over asks again, and the others join it before it is sent.
    assert!(q.grant(l, K, r.id, Grant { remaining: 0, ..grant(25, 0, 3) }, 2 * MS).is_none());
    for _ in 0..25 {
        assert_eq!(q.try_spend(l, K, 1, 2 * MS), Spend::Spent(Source::Lease));
    }
    let mut again = need(q.try_spend(l, K, 1, 2 * MS));
    for _ in 0..14 {
        assert_eq!(q.try_spend(l, K, 1, 2 * MS), Spend::Awaiting);
    }
    q.top_up(&mut again);
    assert_eq!(again.size, 15, "the answer started the count afresh: the 15 still waiting");
}

#[test]
fn a_store_that_said_empty_is_asked_again_within_a_renewal_period() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    // Empty for 30 s by the store's reckoning; other holders may hand tokens back before that.
    q.grant(l, K, r.id, Grant { retry_after_ns: 30_000 * MS, ..grant(1, 0, 2) }, MS);
    assert_eq!(q.try_spend(l, K, 1, 2 * MS), Spend::Spent(Source::Lease));
    assert!(matches!(q.try_spend(l, K, 1, 3 * MS), Spend::Refused { reason: Refusal::Exhausted, retry_after_ns } if retry_after_ns <= 1000 * MS));
    assert!(matches!(q.try_spend(l, K, 1, 1001 * MS), Spend::NeedLease(_)), "asks again after one renewal period");
}

#[test]
fn a_token_buckets_fallback_admissions_are_owed_to_the_store_and_repaid_first() {
    let (mut q, l) = engine();
    let r = need(q.try_spend(l, K, 1, 0));
    q.fail(l, K, r.id, MS);
    for i in 0..5 {
        assert_eq!(q.try_spend(l, K, 1, 2 * MS + i), Spend::Spent(Source::Fallback));
    }
    assert_eq!(q.debt(l, K), 5, "the store's bucket refills meanwhile: the share's admissions are owed to it");
    // Past retry_ms the key probes the store; the store answers with 8: 5 repay the debt, 3 are spendable.
    let probe = requests(&q.poll(600 * MS)).into_iter().next().cloned().expect("a probe");
    assert!(probe.size >= 5, "the probe asks for the debt at least");
    assert!(q.grant(l, K, probe.id, grant(8, 100, 1), 601 * MS).is_none());
    assert_eq!((q.debt(l, K), q.held(l, K, 601 * MS)), (0, 3));
}

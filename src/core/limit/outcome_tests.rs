//! Counting by outcome and by operator, on the injected clock: refunds, after-the-fact charges and
//! per-key overrides, for every algorithm.
use super::spec::{AlgorithmKind, LimitSpec};
use super::{Decision, LimitSet, MAX_OVERRIDES};

const MS: u64 = 1_000_000;

fn one(kind: AlgorithmKind, limit: f64) -> LimitSet {
    LimitSet::new(&[LimitSpec::new("l", kind, limit, 1000.0)]).unwrap()
}

fn admit(s: &LimitSet, key: &[u8], cost: u32, now: u64) -> bool {
    let mut d = Decision::default();
    s.decide(&[Some(key)], cost, now, &mut d)
}

/// Every algorithm: a refund gives back exactly what the admission counted, and only once.
#[test]
fn a_refund_gives_back_what_the_admission_counted() {
    for kind in AlgorithmKind::ALL.iter().copied() {
        let s = one(kind, 5.0);
        let at = 10 * MS;
        for _ in 0..5 {
            assert!(admit(&s, b"k", 1, at), "{kind:?}");
        }
        assert!(!admit(&s, b"k", 1, at + 1));
        assert_eq!(s.peek(0, b"k", at + 1).remaining, 0, "{kind:?}");
        assert!(s.refund(0, b"k", 2, at, at + 2));
        assert_eq!(s.peek(0, b"k", at + 2).remaining, 2, "{kind:?}");
        assert!(admit(&s, b"k", 2, at + 3) && !admit(&s, b"k", 1, at + 3), "{kind:?}: exactly 2 back");
        assert!(!s.refund(0, b"never-seen", 1, at, at), "{kind:?}: nothing counted, nothing inserted");
        assert_eq!(s.limit(0).len(), 1);
    }
}

/// Units whose window has passed are not given back again (fixed window: a new window is full).
#[test]
fn a_late_refund_does_not_give_back_a_window_that_has_passed() {
    let s = one(AlgorithmKind::FixedWindow, 5.0);
    assert!(admit(&s, b"k", 1, 999 * MS));
    for _ in 0..5 {
        assert!(admit(&s, b"k", 1, 1000 * MS));
    }
    assert!(s.refund(0, b"k", 1, 999 * MS, 1001 * MS));
    assert_eq!(s.peek(0, b"k", 1001 * MS).remaining, 0, "the refunded unit was counted in the window before");
    let w = one(AlgorithmKind::SlidingWindow, 2.0);
    assert!(admit(&w, b"k", 1, 0) && admit(&w, b"k", 1, 600 * MS));
    // The unit of t=0 has left the window at t=1000 ms: refunding it must not free the unit of 600 ms.
    w.refund(0, b"k", 1, 0, 1100 * MS);
    assert_eq!(w.peek(0, b"k", 1100 * MS).remaining, 1);
}

/// The failed-login bound: every admission holds its unit until its outcome is known; a success
/// refunds it. A burst of 50 failures against 5 admits exactly 5, however many are in flight.
#[test]
fn reservations_bound_a_burst_of_failures_to_the_limit() {
    for kind in AlgorithmKind::ALL.iter().copied() {
        let s = one(kind, 5.0);
        // 50 arrive before any finishes (all in flight): only 5 hold a unit.
        let admitted = (0..50).filter(|_| admit(&s, b"ip", 1, MS)).count();
        assert_eq!(admitted, 5, "{kind:?}");
        // Successes between failures are free: 5 successes refund, then 5 failures fill it again.
        let s = one(kind, 5.0);
        for _ in 0..5 {
            assert!(admit(&s, b"ip", 1, MS));
            assert!(s.refund(0, b"ip", 1, MS, 2 * MS));
        }
        let failures = (0..50).filter(|_| admit(&s, b"ip", 1, 3 * MS)).count();
        assert_eq!(failures, 5, "{kind:?}");
    }
}

/// A weight reported after the response: counted up to what is left, never into debt.
#[test]
fn a_charge_counts_up_to_what_is_left() {
    for kind in AlgorithmKind::ALL.iter().copied() {
        let s = one(kind, 100.0);
        assert!(admit(&s, b"u", 1, 0));
        assert_eq!(s.charge(0, b"u", 30, 0), 30, "{kind:?}");
        assert_eq!(s.peek(0, b"u", 0).remaining, 69, "{kind:?}");
        assert_eq!(s.charge(0, b"u", 500, 0), 69, "{kind:?}: emptied, not in debt");
        assert!(!admit(&s, b"u", 1, 0), "{kind:?}");
    }
}

/// An override replaces the key's limit and keeps what it has counted; clearing it restores the
/// configured limit; other keys are not affected.
#[test]
fn an_override_changes_one_keys_limit_and_keeps_its_count() {
    for kind in AlgorithmKind::ALL.iter().copied() {
        let s = one(kind, 5.0);
        for _ in 0..5 {
            assert!(admit(&s, b"vip", 1, 0));
        }
        assert!(!admit(&s, b"vip", 1, 0));
        s.set_override(0, b"vip", 20).unwrap();
        let st = s.peek(0, b"vip", 0);
        // A bucket keeps the tokens it holds (none) and refills at the new rate; the others count.
        let left = if kind == AlgorithmKind::TokenBucket { 0 } else { 15 };
        assert_eq!((st.limit, st.remaining, st.overridden), (20, left, true), "{kind:?}");
        assert_eq!((0..100).filter(|_| admit(&s, b"vip", 1, 0)).count(), left as usize, "{kind:?}");
        assert_eq!((0..100).filter(|_| admit(&s, b"other", 1, 0)).count(), 5, "{kind:?}");
        // Lowered below what is counted: nothing left, no underflow.
        s.set_override(0, b"vip", 2).unwrap();
        assert_eq!(s.peek(0, b"vip", 0).remaining, 0, "{kind:?}");
        assert!(!admit(&s, b"vip", 1, 0));
        assert!(s.clear_override(0, b"vip"));
        assert_eq!(s.peek(0, b"vip", 0).limit, 5);
        // A reset forgets the count, not the override.
        s.set_override(0, b"vip", 3).unwrap();
        assert!(s.reset(0, b"vip"));
        let st = s.peek(0, b"vip", 0);
        assert_eq!((st.limit, st.remaining), (3, 3), "{kind:?}");
    }
}

#[test]
fn overrides_are_capped_over_the_set() {
    let s = LimitSet::new(&[LimitSpec::new("a", AlgorithmKind::FixedWindow, 1.0, 1.0), LimitSpec::new("b", AlgorithmKind::Gcra, 1.0, 1.0)]).unwrap();
    for i in 0..MAX_OVERRIDES {
        s.set_override(i % 2, format!("k{i}").as_bytes(), 2).unwrap();
    }
    assert!(s.set_override(0, b"new", 2).is_err());
    assert_eq!(s.overrides().len(), MAX_OVERRIDES);
}

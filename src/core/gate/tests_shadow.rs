//! Shadow mode through the gate: every overload decision made and counted, none enforced but the
//! share asked for; budgets and quotas enforced as always.
use super::tests::{cfg, decide, gate_with, MS};
use super::*;
use crate::core::concurrency::ConcurrencyConfig;

fn shadow_gate(enforce_percent: f64) -> (Gate, Arc<LoopHealth>) {
    let mut c = cfg();
    c.shadow = Some(enforce_percent);
    gate_with(c, None)
}

#[test]
fn what_the_controller_would_shed_is_admitted_and_counted() {
    let (g, h) = shadow_gate(0.0);
    h.record_tick(100.0, 100.0, 100.0); // pressure 0.5: background at zero
    let d = decide(&g, Some(2), None, 0);
    assert_eq!((d.verdict, d.shadow, d.scale), (Verdict::Admit, true, 0.0));
    let d = decide(&g, Some(1), None, 0);
    assert_eq!((d.verdict, d.shadow), (Verdict::Admit, false));
    let s = g.stats();
    assert_eq!((s.counters[2].admitted, s.counters[2].shed, s.counters[2].shadow_shed), (1, 0, 1));
    assert_eq!(s.scales, vec![1.0, 1.0, 0.0], "the scales the controller would apply are reported");
    assert_eq!(g.ledger().refill_scale(2), 1.0, "and not applied to the ledger");
}

#[test]
fn a_share_of_the_decisions_is_enforced_evenly() {
    let (g, h) = shadow_gate(25.0);
    h.record_tick(100.0, 100.0, 100.0);
    let verdicts: Vec<Verdict> = (0..8).map(|i| decide(&g, Some(2), None, i).verdict).collect();
    let shed = verdicts.iter().filter(|v| **v == Verdict::Shed).count();
    assert_eq!((shed, verdicts[3], verdicts[7]), (2, Verdict::Shed, Verdict::Shed));
    let c = g.stats().counters[2];
    assert_eq!((c.admitted, c.shed, c.shadow_shed), (6, 2, 6));
    let (g, h) = shadow_gate(100.0);
    h.record_tick(100.0, 100.0, 100.0);
    assert!((0..5).all(|i| decide(&g, Some(2), None, i).verdict == Verdict::Shed));
}

#[test]
fn a_throttled_pool_is_mirrored_and_the_budget_still_binds() {
    // Standard throttled to half: a pool of 100 clamped to 50. The enforcing gate sheds from the
    // 51st request; the shadow gate admits those and flags them, until the real pool (100) is empty.
    let (real, hr) = gate_with(cfg(), None);
    let (shadow, hs) = shadow_gate(0.0);
    hr.record_tick(125.0, 125.0, 125.0);
    hs.record_tick(125.0, 125.0, 125.0);
    for i in 0..120 {
        let (a, b) = (decide(&real, Some(1), None, 0), decide(&shadow, Some(1), None, 0));
        match (i, a.verdict, b.verdict) {
            (0..=49, Verdict::Admit, Verdict::Admit) => assert!(!b.shadow),
            (50..=99, Verdict::Shed, Verdict::Admit) => assert!(b.shadow),
            (100.., Verdict::Shed, Verdict::TierFull) => {}
            other => panic!("request {i}: {other:?}"),
        }
    }
    let c = shadow.stats().counters[1];
    assert_eq!((c.admitted, c.shed, c.shadow_shed, c.tier_full), (100, 0, 50, 20));
    // 100 ms later the mirror has refilled at half the rate (5 tokens), the ledger at the full rate.
    let flagged = (0..20).filter(|_| decide(&shadow, Some(1), None, 100).shadow).count();
    assert_eq!(flagged, 5);
}

#[test]
fn the_turn_budget_is_counted_not_enforced() {
    let mut c = cfg();
    c.shed.turn_budget_ms = 5.0;
    c.shadow = Some(0.0);
    let (g, h) = gate_with(c, None);
    h.record_tick(60.0, 60.0, 60.0);
    let d = g.decide(Some(1), None, None, MS, || 0, || 9.0, || 0, UNRANKED);
    assert_eq!((d.verdict, d.shadow), (Verdict::Admit, true));
    let c = g.stats().counters[1];
    assert_eq!((c.shed, c.turn_shed, c.shadow_shed), (0, 0, 1));
}

#[test]
fn a_wait_for_a_slot_becomes_a_shadow_slot() {
    for (pct, second) in [(0.0, Slot::Shadow), (100.0, Slot::Wait)] {
        let mut c = cfg();
        c.concurrency = ConcurrencyConfig { initial_limit: 1, ..ConcurrencyConfig::default() };
        c.shadow = Some(pct);
        let (g, _) = gate_with(c, None);
        assert_eq!(decide(&g, Some(1), None, 0).slot, Slot::Held);
        assert_eq!(decide(&g, Some(1), None, 0).slot, second);
        let s = g.stats().concurrency;
        assert_eq!((s.waits, s.shadow_waits), (1, u64::from(second == Slot::Shadow)));
    }
}

#[test]
fn the_enforced_share_must_be_a_percentage() {
    for bad in [-1.0, 100.5, f64::NAN, f64::INFINITY] {
        let mut c = cfg();
        c.shadow = Some(bad);
        let h = Arc::new(LoopHealth::default());
        let e = Gate::new(super::tests::ledger(None), c, h).err().expect("refused");
        assert_eq!(e.field, "shadow.enforcePercent", "{bad}");
    }
}

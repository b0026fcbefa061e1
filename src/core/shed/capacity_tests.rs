//! The capacity budget on a simulated loop whose every admitted request costs exactly 0.5 ms of busy
//! time: the cost, the budget and every token are exact binary fractions.
use super::capacity::{CapacityBudget, ENGAGE_HOLD_MS};

const MS: u64 = 1_000_000;
/// Loop time one admitted request costs in the simulation.
const COST_NS: u64 = MS / 2;
const P: Option<usize> = None; // protected
const S: Option<usize> = Some(0); // standard: the highest unprotected tier
const B: Option<usize> = Some(1); // background

struct Sim {
    b: CapacityBudget,
    t_ms: u64,
    idle_ns: u64,
    last_admitted: u64,
}

impl Sim {
    /// target 0.375 at 0.5 ms per admission: a budget of 0.75 per ms, 3 tokens per 4 ms step; the
    /// bucket holds 10 ms of it, 7.5 tokens.
    fn new() -> Sim {
        Sim { b: CapacityBudget::new(0.375, 2), t_ms: 0, idle_ns: 0, last_admitted: 0 }
    }

    /// `dt_ms` later (busy for what the last step admitted, idle otherwise), one update, then the
    /// decisions in order; returns which were admitted.
    fn step(&mut self, dt_ms: u64, decisions: &[Option<usize>], episode: bool) -> Vec<bool> {
        self.t_ms += dt_ms;
        let busy = self.last_admitted * COST_NS;
        assert!(busy <= dt_ms * MS, "the simulated loop cannot be busier than the time");
        self.idle_ns += dt_ms * MS - busy;
        let now = self.t_ms * MS;
        self.b.observe(now, self.idle_ns, episode);
        let mut out = Vec::new();
        for &d in decisions {
            self.b.note_arrival();
            let ok = self.b.take(now, d);
            if ok {
                self.b.note_admitted();
            }
            out.push(ok);
        }
        self.last_admitted = out.iter().filter(|&&ok| ok).count() as u64;
        out
    }

    fn engaged(&self) -> bool {
        self.b.engaged(self.t_ms * MS)
    }
}

/// 0.75 per ms (one protected and two standard per 4 ms), just above the budget but far below the
/// loop's full speed (2 per ms): learns the cost, never engages.
fn learned() -> Sim {
    let mut s = Sim::new();
    for _ in 0..100 {
        assert_eq!(s.step(4, &[P, S, S], false), vec![true, true, true]);
        assert!(!s.engaged());
    }
    s
}

#[test]
fn it_learns_the_cost_and_a_loop_that_keeps_up_never_engages_it() {
    let s = learned();
    let r = s.b.reading(s.t_ms * MS);
    assert_eq!((r.cost_ms, r.budget_per_sec, r.engaged), (0.5, 750.0, false));
    assert!(r.arrivals_per_sec > 740.0 && r.arrivals_per_sec < 780.0, "{}", r.arrivals_per_sec);
    // Down to 0.5 per ms, then a lag episode (the loop is late for another reason: a neighbour took
    // the CPU, say) with the decisions under the budget: not engaged.
    let mut s = s;
    for _ in 0..75 {
        s.step(4, &[P, S], false);
    }
    for _ in 0..50 {
        assert_eq!(s.step(4, &[P, S], true), vec![true, true]);
        assert!(!s.engaged());
    }
    // A stall of 1 s busy (the idle time does not move) counts as a 100 ms window: the cost roughly
    // doubles instead of growing fifty-fold.
    let mut b = s.b.clone();
    b.observe((s.t_ms + 1000) * MS, s.idle_ns, false);
    let c = b.reading((s.t_ms + 1000) * MS).cost_ms;
    assert!(c > 0.6 && c < 1.2, "{c}");
    // Nothing learned yet: no budget, everything admitted, even during an episode.
    let mut fresh = Sim::new();
    assert_eq!(fresh.step(4, &[S, B, B, B, B, B, B, B, B], true), vec![true; 9]);
    assert!(!fresh.engaged());
    // Off (target 0): never engaged, whatever comes.
    let mut off = CapacityBudget::new(0.0, 2);
    off.observe(0, 0, true);
    assert!(!off.engaged(0) && off.take(0, Some(1)));
}

#[test]
fn engaged_it_admits_the_budget_highest_unprotected_tier_first_and_never_refuses_a_protected_one() {
    let mut s = learned();
    let mix = [P, S, B, B, S, B, B, S, B, B]; // 2.5 per ms
    // A lag episode engages it with a full bucket (7.5 tokens): first come, first served until
    // standard is refused a token (0.5 left); from then on background waits.
    let r = s.step(4, &mix, true);
    assert_eq!(r, vec![true, true, true, true, true, true, true, false, false, false]);
    assert_eq!(s.b.level(), 0.5);
    // +3 tokens per step: the protected request and two of the three standard ones; background
    // gets none while standard is short.
    for _ in 0..20 {
        assert_eq!(s.step(4, &mix, false), vec![true, true, false, false, true, false, false, false, false, false]);
        assert_eq!(s.b.level(), 0.5);
        assert!(s.engaged(), "decided at 2.5 per ms, faster than the loop's 2: engaged without an episode");
    }
    // Less standard offered: it is no longer refused, and 100 ms after its last refusal background
    // gets what it leaves (the bucket, full by then, and one token per step after that).
    let fewer = [P, S, B, B, B, B, B, B, B, B];
    for _ in 1..25 {
        assert_eq!(s.step(4, &fewer, false), vec![true, true, false, false, false, false, false, false, false, false]);
    }
    assert_eq!(s.step(4, &fewer, false), vec![true, true, true, true, true, true, true, false, false, false]);
    for _ in 0..5 {
        assert_eq!(s.step(4, &fewer, false), vec![true, true, true, false, false, false, false, false, false, false]);
    }
    // Protected requests beyond the budget: all admitted, into a debt bounded by the bucket's size,
    // and the unprotected wait until it is paid. (0.5 + 3 = 3.5, six taken: -2.5; then -5.5, then
    // -8.5 held at -7.5.)
    let protected = [P, P, P, P, P, P, S, S];
    assert_eq!(s.step(4, &protected, false), vec![true, true, true, true, true, true, false, false]);
    assert_eq!(s.b.level(), -2.5);
    assert_eq!(s.step(4, &protected, false), vec![true, true, true, true, true, true, false, false]);
    assert_eq!(s.step(4, &protected, false), vec![true, true, true, true, true, true, false, false]);
    assert_eq!(s.b.level(), -7.5, "the debt is bounded");
    assert_eq!(s.step(4, &protected, false), vec![true, true, true, true, true, true, false, false]);
    assert_eq!(s.b.level(), -7.5);
}

#[test]
fn it_disengages_once_decisions_slow_below_the_loops_speed_for_the_hold() {
    let mut s = learned();
    let mix = [P, S, B, B, S, B, B, S, B, B];
    s.step(4, &mix, true);
    for _ in 0..50 {
        s.step(4, &mix, false);
    }
    assert!(s.engaged());
    // Back to 0.75 per ms: the decayed rate (100 ms) falls under 1.05 x 2 per ms within ~20 ms,
    // then the hold (250 ms) runs out; meanwhile the bucket admits all of it (3 tokens per 3 asked).
    let mut last_engaged_ms = 0;
    for _ in 0..100 {
        assert_eq!(s.step(4, &[P, S, S], false), vec![true, true, true]);
        if s.engaged() {
            last_engaged_ms = s.t_ms;
        }
    }
    let after = last_engaged_ms - 51 * 4 - 400;
    assert!(after as f64 >= ENGAGE_HOLD_MS && (after as f64) < ENGAGE_HOLD_MS + 60.0, "engaged for {after} ms after the overload");
    assert!(!s.engaged());
}

#[test]
fn the_backlog_of_one_slow_tick_does_not_engage_it() {
    let mut s = learned();
    // 50 ms without a turn (a slow tick), then its backlog is decided at the loop's own speed (one
    // per 0.5 ms busy): never faster than the loop runs them.
    s.step(50, &[], false);
    for _ in 0..25 {
        assert_eq!(s.step(2, &[S, S, S, S], false), vec![true; 4]);
        assert!(!s.engaged());
    }
}

//! Costly requests admitted inline back to back in one loop turn: what starts the JS turn queue
//! (lib/gatekeeper/turn-queue.js) before the lag shows a saturated loop. Each unprotected request
//! admitted with the queue off is noted with its turn (when the turn began) and how long the turn had
//! run; a request whose two runs before it in the same turn (the time between one such request and the
//! next) each lasted at least the turn budget is a burst. The shorter of those two runs is what the
//! gate reports, so one pause between cheap requests (a collection) never reaches the budget.
use super::{Decision, Gate, Verdict};
use std::cell::Cell;

impl Gate {
    /// Whether `d` is a request `InlineRuns` notes: an unprotected one admitted inline while a turn
    /// budget is set. Not while the turn queue runs (`queued`): it spends the budget itself.
    pub fn notes_inline(&self, d: &Decision, queued: bool) -> bool {
        !queued && self.config().shed.turn_budget_ms > 0.0 && d.verdict == Verdict::Admit && !self.ledger().is_protected(d.tier)
    }
}

/// The last noted request: its turn, the turn's age then (ms), and the run before it (ms, 0 if none).
/// Cells: the gate's binding notes through a shared reference, on the one thread that owns it.
#[derive(Debug, Default)]
pub struct InlineRuns {
    turn_ns: Cell<u64>,
    age_ms: Cell<f64>,
    run_ms: Cell<f64>,
}

impl InlineRuns {
    /// Notes a request admitted inline `age_ms` into the turn that began at `turn_ns`. Returns the
    /// shorter of the last two runs of this turn up to it (0 when fewer than two came before it).
    pub fn note(&self, turn_ns: u64, age_ms: f64) -> f64 {
        let same_turn = self.turn_ns.replace(turn_ns) == turn_ns;
        let before = self.age_ms.replace(age_ms);
        let run = if same_turn { age_ms - before } else { 0.0 };
        run.min(self.run_ms.replace(run))
    }
}

#[cfg(test)]
mod tests {
    use super::InlineRuns;

    #[test]
    fn two_long_runs_in_one_turn_are_a_burst_and_a_new_turn_starts_over() {
        let r = InlineRuns::default();
        assert_eq!(r.note(100, 0.25), 0.0, "the first of a turn");
        assert_eq!(r.note(100, 3.25), 0.0, "one run before it: not yet");
        assert_eq!(r.note(100, 6.25), 3.0, "two runs of 3 ms");
        assert_eq!(r.note(200, 9.0), 0.0, "a new turn, however old");
        assert_eq!(r.note(200, 9.5), 0.0);
        assert_eq!(r.note(200, 12.5), 0.5, "the shorter of the two");
    }

    #[test]
    fn one_pause_between_cheap_requests_stays_short() {
        let r = InlineRuns::default();
        let mut age = 0.0;
        let mut longest = 0.0f64;
        for i in 0..100 {
            age += if i == 50 { 4.0 } else { 0.02 }; // a 4 ms collection once
            longest = longest.max(r.note(7, age));
        }
        assert!(longest < 0.1, "{longest}");
    }
}

//! The capacity budget: admit unprotected work up to what the loop can still run.
//!
//! The gate tells it, on every controller update, the loop's cumulative idle time (libuv's
//! `uv_metrics_idle_time`), and on every decision whether a request arrived and was admitted. Busy
//! time per admitted request — the cost of the refusals made meanwhile included — is what one more
//! admission costs the loop at the current mix; `target_elu / cost` admissions per millisecond keep
//! the loop busy `target_elu` of the time: the *budget*. Both figures are decayed sums
//! (`COST_TAU_MS`), so the estimate follows a route whose cost changes and holds through the gaps;
//! one update counts as at most `MAX_WINDOW_MS` long (its busy time and the decay both), so a long
//! stall (a process that waited for the CPU, one long task) does not make every admission look
//! expensive for a second after, and an idle gap does not wipe out what was learned.
//!
//! While the gate decides requests faster than the loop could run them all (`ENGAGE_ABOVE` times
//! `1 / cost`: more arrive than it can serve, the refusals are what makes them come that fast), or
//! faster than the budget while a lag episode runs (an onset, before refusals speed the decisions
//! up), the budget is *engaged*, for at least `ENGAGE_HOLD_MS` after the last time that held: a token
//! bucket refilled at the budget rate. A protected request always takes a token (into debt, never refused: it must not
//! depend on what the others offer, and its work still uses the loop); an unprotected one needs one,
//! and none is given to a tier while a higher unprotected tier has been refused one in the last
//! `PRIORITY_WINDOW_MS`: a lower tier gets only what the higher ones leave (strict priority by their
//! demand, which a bucket's burst after a slow turn would otherwise hand to whoever came first).
//! Refused requests cost little, so the loop settles at `target_elu` with the admitted work
//! what it can run: goodput near its capacity, and no queue of admitted work for a protected request
//! to wait behind. A loop that keeps up never engages it: at 0.8x of capacity the decisions come
//! slower than the loop runs them, and the backlog a single slow tick leaves is decided no faster
//! than the loop runs it (the spike filter keeps such a tick from starting a lag episode).
use super::controller::NS_PER_MS;

/// Time constant (ms) of the busy-time and admission sums the cost per admission comes from.
pub const COST_TAU_MS: f64 = 500.0;
/// Time constant (ms) of the decision rate that engages the budget.
pub const ARRIVAL_TAU_MS: f64 = 100.0;
/// Decisions faster than this many times the loop's full speed (`1 / cost`) engage the budget; the
/// margin covers the decayed rate's bias (`dt / 2 ARRIVAL_TAU_MS`) and a loop that only catches up.
pub const ENGAGE_ABOVE: f64 = 1.05;
/// The budget stays engaged this long (ms) after decisions last came faster than it.
pub const ENGAGE_HOLD_MS: f64 = 250.0;
/// A tier gets no token while a higher unprotected tier was refused one this recently (ms).
pub const PRIORITY_WINDOW_MS: f64 = 100.0;
/// The bucket's size (as ms of budget, at least two tokens).
pub const BURST_MS: f64 = 10.0;
/// Time (ms) one update counts as at most (busy time and decay).
pub const MAX_WINDOW_MS: f64 = 100.0;
/// Decayed admissions below which the cost is not estimated (nothing to learn from yet).
pub const MIN_ADMITTED: f64 = 8.0;

#[derive(Clone, Debug, PartialEq)]
pub struct CapacityBudget {
    /// Utilisation the budget aims at (0: off).
    target_elu: f64,
    /// Unprotected tiers, i.e. ranks 0..ranks.
    ranks: usize,
    busy_ms: f64,
    admitted: f64,
    arrivals: f64,
    cost_ms: Option<f64>,
    /// Decisions and admissions since the last update.
    new_arrivals: u64,
    new_admitted: u64,
    /// (time, cumulative idle ns) of the last update.
    seen: Option<(u64, u64)>,
    engaged_until_ns: u64,
    level: f64,
    filled_ns: u64,
    /// Per rank, when the budget last refused it a token (`None`: not since it engaged).
    refused_ns: Vec<Option<u64>>,
}

/// What the budget reports (stats, the benchmark's timeline).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CapacityReading {
    pub engaged: bool,
    /// Admissions per second the budget allows (0 until the cost is known).
    pub budget_per_sec: f64,
    /// Loop time (ms) one admission costs, refusals meanwhile included (0 until known).
    pub cost_ms: f64,
    /// Decisions per second (the decayed rate compared with the budget).
    pub arrivals_per_sec: f64,
}

impl CapacityBudget {
    pub fn new(target_elu: f64, ranks: usize) -> CapacityBudget {
        CapacityBudget {
            target_elu,
            ranks,
            busy_ms: 0.0,
            admitted: 0.0,
            arrivals: 0.0,
            cost_ms: None,
            new_arrivals: 0,
            new_admitted: 0,
            seen: None,
            engaged_until_ns: 0,
            level: 0.0,
            filled_ns: 0,
            refused_ns: vec![None; ranks],
        }
    }

    /// Admissions per ms the budget allows, once the cost is known.
    fn rate_per_ms(&self) -> Option<f64> {
        match self.cost_ms {
            Some(c) if self.target_elu > 0.0 && c > 0.0 => Some(self.target_elu / c),
            _ => None,
        }
    }

    fn cap(rate: f64) -> f64 {
        (rate * BURST_MS).max(2.0)
    }

    fn refill(&mut self, now_ns: u64) {
        if let Some(rate) = self.rate_per_ms() {
            let dt = now_ns.saturating_sub(self.filled_ns) as f64 / NS_PER_MS;
            self.level = (self.level + rate * dt).min(Self::cap(rate));
        }
        self.filled_ns = self.filled_ns.max(now_ns);
    }

    /// A controller update at `now_ns` with the loop's cumulative idle time `idle_ns`; `episode`: a
    /// lag episode runs (the controller's pressure is above zero).
    pub fn observe(&mut self, now_ns: u64, idle_ns: u64, episode: bool) {
        if self.target_elu == 0.0 {
            return;
        }
        let (arrived, admitted) = (std::mem::take(&mut self.new_arrivals) as f64, std::mem::take(&mut self.new_admitted) as f64);
        if let Some((t0, idle0)) = self.seen {
            let dt_ns = now_ns.saturating_sub(t0);
            let dt = dt_ns as f64 / NS_PER_MS;
            let busy = ((dt_ns - idle_ns.saturating_sub(idle0).min(dt_ns)) as f64 / NS_PER_MS).min(MAX_WINDOW_MS);
            // The bucket fills at the old rate up to now, before the rate moves.
            self.refill(now_ns);
            let keep = (-dt.min(MAX_WINDOW_MS) / COST_TAU_MS).exp();
            self.busy_ms = self.busy_ms * keep + busy;
            self.admitted = self.admitted * keep + admitted;
            self.arrivals = self.arrivals * (-dt / ARRIVAL_TAU_MS).exp() + arrived;
            if self.admitted >= MIN_ADMITTED && self.busy_ms > 0.0 {
                self.cost_ms = Some(self.busy_ms / self.admitted);
            }
        } else {
            self.arrivals += arrived;
        }
        self.seen = Some((now_ns.max(self.seen.map_or(0, |s| s.0)), idle_ns));
        let Some(rate) = self.rate_per_ms() else { return };
        let arriving = self.arrivals / ARRIVAL_TAU_MS;
        if arriving > ENGAGE_ABOVE * rate / self.target_elu || (episode && arriving > rate) {
            if !self.engaged(now_ns) {
                // A fresh engagement starts with a full bucket and no refusals.
                self.level = Self::cap(rate);
                self.filled_ns = now_ns;
                self.refused_ns.iter_mut().for_each(|r| *r = None);
            }
            self.engaged_until_ns = now_ns.saturating_add((ENGAGE_HOLD_MS * NS_PER_MS) as u64);
        }
    }

    pub fn engaged(&self, now_ns: u64) -> bool {
        self.target_elu > 0.0 && now_ns < self.engaged_until_ns
    }

    /// One decision arrived (whatever it becomes).
    pub fn note_arrival(&mut self) {
        self.new_arrivals += 1;
    }

    /// One request was admitted.
    pub fn note_admitted(&mut self) {
        self.new_admitted += 1;
    }

    /// Whether a request may use the loop now: `rank` is its place among the unprotected tiers (0 =
    /// the highest), `None` for a protected tier (always yes, and it takes its token all the same).
    /// Always yes while the budget is not engaged.
    pub fn take(&mut self, now_ns: u64, rank: Option<usize>) -> bool {
        if !self.engaged(now_ns) {
            return true;
        }
        self.refill(now_ns);
        let Some(rate) = self.rate_per_ms() else { return true };
        match rank {
            None => {
                self.level = (self.level - 1.0).max(-Self::cap(rate));
                true
            }
            Some(r) => {
                let window = (PRIORITY_WINDOW_MS * NS_PER_MS) as u64;
                let higher_short = self.refused_ns[..r.min(self.ranks)].iter().any(|t| t.is_some_and(|t| now_ns.saturating_sub(t) < window));
                if higher_short {
                    return false;
                }
                if self.level >= 1.0 {
                    self.level -= 1.0;
                    return true;
                }
                if let Some(slot) = self.refused_ns.get_mut(r) {
                    *slot = Some(now_ns);
                }
                false
            }
        }
    }

    pub fn reading(&self, now_ns: u64) -> CapacityReading {
        let rate = self.rate_per_ms().unwrap_or(0.0);
        CapacityReading {
            engaged: self.engaged(now_ns) && rate > 0.0,
            budget_per_sec: rate * 1000.0,
            cost_ms: self.cost_ms.unwrap_or(0.0),
            arrivals_per_sec: self.arrivals / ARRIVAL_TAU_MS * 1000.0,
        }
    }

    /// The bucket's tokens now (tests).
    #[cfg(test)]
    pub fn level(&self) -> f64 {
        self.level
    }
}

//! Requests per client over the last window, in fixed memory: a count-min sketch (two rows of
//! cells, a client's estimate the smaller of its two cells) whose cells are two-epoch sliding
//! counters, and the totals the fair share is made of.
//!
//! A cell holds its epoch and the counts of that epoch and the one before. At a fraction `f` into
//! epoch `E`, a cell last written in `E` estimates `cur + prev × (1 − f)`, one written in `E − 1`
//! `cur × (1 − f)`, an older one 0: the requests of the last window, weighted as the sliding window
//! counter does. A cell shared by several clients over-counts (never under-counts); with two rows a
//! light client is only taken for a heavy one when both of its cells are shared with heavy clients.
//!
//! The totals: the demand (every request noted, weighted the same way) and the active clients,
//! counted by the first row's cells as they turn over into the current epoch; a cell that was
//! already active in the previous epoch is counted in both, so it is `carried` and the previous
//! epoch's active count is weighted without it. The fair share is demand / active clients.
//!
//! Cells and totals are relaxed atomics read and written without read-modify-write: exact on one
//! thread (the gatekeeper's), an estimate that may lose a count when threads write the same cell.
//! Epochs are kept modulo 2^20: a cell untouched for exactly 2^20 epochs reads as current.
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

const EPOCH_BITS: u32 = 20;
const COUNT_BITS: u32 = 22;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const ROWS: usize = 2;

#[inline(always)]
fn pack(epoch: u64, cur: u64, prev: u64) -> u64 {
    (epoch & EPOCH_MASK) << (2 * COUNT_BITS) | cur.min(COUNT_MAX) << COUNT_BITS | prev.min(COUNT_MAX)
}

#[inline(always)]
fn unpack(v: u64) -> (u64, u64, u64) {
    (v >> (2 * COUNT_BITS), (v >> COUNT_BITS) & COUNT_MAX, v & COUNT_MAX)
}

/// Where a cell stands against the current epoch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Age {
    Current,
    Previous,
    Older,
}

#[inline(always)]
fn age(cell_epoch: u64, epoch: u64) -> Age {
    if cell_epoch == epoch & EPOCH_MASK {
        Age::Current
    } else if cell_epoch == epoch.wrapping_sub(1) & EPOCH_MASK {
        Age::Previous
    } else {
        Age::Older
    }
}

/// What `note` saw: the client's requests in the last window before this one, and the fair share
/// (the window's demand per active client, this request included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Usage {
    pub before: f64,
    pub fair: f64,
}

impl Usage {
    /// The client's usage in fair shares.
    #[inline]
    pub fn share(&self) -> f64 {
        self.before / self.fair
    }
}

#[derive(Default)]
struct Totals {
    epoch: AtomicU64,
    demand: AtomicU64,
    demand_prev: AtomicU64,
    active: AtomicU64,
    active_prev: AtomicU64,
    carried: AtomicU64,
}

pub struct UsageSketch {
    /// `ROWS` rows of `mask + 1` cells.
    cells: Box<[AtomicU64]>,
    mask: usize,
    totals: Totals,
}

impl UsageSketch {
    /// `slots` cells per row (a power of two).
    pub fn new(slots: usize) -> UsageSketch {
        debug_assert!(slots.is_power_of_two());
        // An empty cell (a count of 0, which a written cell never has) is of no epoch.
        UsageSketch {
            cells: (0..ROWS * slots).map(|_| AtomicU64::new(0)).collect(),
            mask: slots - 1,
            totals: Totals { epoch: AtomicU64::new(u64::MAX), ..Totals::default() },
        }
    }

    /// Bytes held (fixed at construction).
    pub fn bytes(&self) -> usize {
        self.cells.len() * std::mem::size_of::<AtomicU64>() + std::mem::size_of::<Self>()
    }

    /// Counts one request of the client whose keyed hash is `hash`, at `epoch` and `weight` (1 − the
    /// fraction of the epoch gone).
    #[inline]
    pub fn note(&self, hash: u64, epoch: u64, weight: f64) -> Usage {
        let t = &self.totals;
        if t.epoch.load(Relaxed) != epoch {
            self.turn(epoch);
        }
        let mut before = f64::INFINITY;
        for row in 0..ROWS {
            // Row 0 indexes by the hash's low half, row 1 by its high half.
            let i = row * (self.mask + 1) + ((hash >> (32 * row)) as usize & self.mask);
            let (e, cur, prev) = unpack(self.cells[i].load(Relaxed));
            let a = if cur == 0 { Age::Older } else { age(e, epoch) };
            let (est, next) = match a {
                Age::Current => (cur as f64 + prev as f64 * weight, pack(epoch, cur + 1, prev)),
                Age::Previous => (cur as f64 * weight, pack(epoch, 1, cur)),
                Age::Older => (0.0, pack(epoch, 1, 0)),
            };
            self.cells[i].store(next, Relaxed);
            before = before.min(est);
            if row == 0 && a != Age::Current {
                bump(&t.active);
                if a == Age::Previous {
                    bump(&t.carried);
                }
            }
        }
        bump(&t.demand);
        let demand = t.demand.load(Relaxed) as f64 + t.demand_prev.load(Relaxed) as f64 * weight;
        let gone = t.active_prev.load(Relaxed).saturating_sub(t.carried.load(Relaxed));
        let active = t.active.load(Relaxed) as f64 + gone as f64 * weight;
        Usage { before, fair: demand / active.max(1.0) }
    }

    /// The totals move to `epoch`: the current ones become the previous ones if `epoch` follows.
    #[cold]
    fn turn(&self, epoch: u64) {
        let t = &self.totals;
        let follows = t.epoch.load(Relaxed).wrapping_add(1) == epoch;
        let (d, a) = if follows { (t.demand.load(Relaxed), t.active.load(Relaxed)) } else { (0, 0) };
        t.demand_prev.store(d, Relaxed);
        t.active_prev.store(a, Relaxed);
        t.demand.store(0, Relaxed);
        t.active.store(0, Relaxed);
        t.carried.store(0, Relaxed);
        t.epoch.store(epoch, Relaxed);
    }
}

#[inline(always)]
fn bump(a: &AtomicU64) {
    a.store(a.load(Relaxed) + 1, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_counts_its_window_and_the_fair_share_is_demand_per_active_client() {
        let s = UsageSketch::new(64);
        // Client 1 sends 4 in epoch 0, client 2 one.
        let u: Vec<f64> = (0..4).map(|_| s.note(1, 0, 1.0).before).collect();
        assert_eq!(u, vec![0.0, 1.0, 2.0, 3.0]);
        let u2 = s.note(2 << 32 | 2, 0, 1.0);
        assert_eq!(u2, Usage { before: 0.0, fair: 2.5 });
        // Halfway into epoch 1 (weight 0.5): client 1's 4 count as 2; it is active in both epochs, so
        // it is carried and client 2 (active in epoch 0 only) counts as half a client.
        let u = s.note(1, 1, 0.5);
        assert_eq!(u.before, 2.0);
        // demand 1 + 5 × 0.5 = 3.5; active 1 + (2 − 1) × 0.5 = 1.5.
        assert_eq!(u.fair, 3.5 / 1.5);
        assert_eq!(u.share(), 2.0 / (3.5 / 1.5));
        // Epoch 1's counts (1) and epoch 0's (4) at weight 0.25 for client 1.
        assert_eq!(s.note(1, 1, 0.25).before, 1.0 + 4.0 * 0.25);
        // Two epochs on, client 1's previous epoch is epoch 2's: nothing; epoch 1's two at weight 1.
        assert_eq!(s.note(1, 2, 1.0).before, 2.0);
        // After a gap, everything is forgotten (the totals too).
        let u = s.note(1, 9, 1.0);
        assert_eq!(u, Usage { before: 0.0, fair: 1.0 });
    }

    #[test]
    fn a_shared_cell_over_counts_and_the_smaller_row_wins() {
        let s = UsageSketch::new(16);
        // Keys 1 and 17 share row 0's cell 1 but not row 1's (high halves 0 and 1).
        for _ in 0..10 {
            s.note(1, 0, 1.0);
        }
        assert_eq!(s.note(1 << 32 | 17, 0, 1.0).before, 0.0, "row 1 tells them apart");
        // Sharing both cells, a light key reads as the heavy one.
        assert_eq!(s.note(17, 0, 1.0).before, 10.0);
    }

    #[test]
    fn counts_saturate_and_epochs_wrap() {
        assert_eq!(unpack(pack(5, COUNT_MAX + 9, 3)), (5, COUNT_MAX, 3));
        assert_eq!(unpack(pack(EPOCH_MASK + 7, 1, 2)).0, 6);
        assert!(age(EPOCH_MASK, 1 << EPOCH_BITS) == Age::Previous);
        let s = UsageSketch::new(4);
        assert_eq!(s.bytes(), 8 * 8 + std::mem::size_of::<UsageSketch>());
        // A fresh sketch's cells are of no epoch: its first client is a new active one, at any epoch.
        assert_eq!(s.note(3, 1, 1.0), Usage { before: 0.0, fair: 1.0 });
        let s = UsageSketch::new(4);
        assert_eq!(s.note(3, 0, 1.0), Usage { before: 0.0, fair: 1.0 });
        assert_eq!(s.note(2 << 32 | 2, 0, 1.0), Usage { before: 0.0, fair: 1.0 });
    }
}

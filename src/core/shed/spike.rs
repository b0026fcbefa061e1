//! Spike filter: while nothing is being shed, the lag starts an episode (proportional or integral) only
//! once its excursion above the target has lasted `confirm_ms` and the lag is still rising past the
//! highest reading of that excursion. A loop that is falling behind (an overload: each loop iteration
//! longer than the one before, and the gate's in-band estimate growing with every request) passes at
//! once; one slow tick, or the backlog it leaves draining away on a loop that keeps up (the lag
//! falling from its peak), does not start shedding. Heap pressure and a stall are not filtered, and
//! once an episode runs every reading counts at once. Known limit: the peak is the excursion's whole
//! peak, so a lag that settles above the target but below an earlier peak of the same excursion (and
//! never dips `hysteresis_ms` below the target) does not start shedding; a peak that forgets readings
//! older than a window would close that, not measured yet.
//!
//! A confirmed excursion that stays in the lower half of the range (below halfway from the target to
//! the critical lag) also needs a loop that has been saturated: utilisation over the sampler's window
//! (`elu`, a second by default) of at least `SATURATED_ELU`. A loop below its capacity (0.8x in
//! bench:overload: about 80% busy) can still show such an excursion — a descheduled process, a burst,
//! and the backlog they leave, which the loop works off at 100% busy for a while — and each one used
//! to start an episode whose turn budget shed the requests of every turn that held two of them. An
//! overload saturates the loop within the window, or drives the lag past halfway at once (its onset).
use super::controller::{ShedController, NS_PER_MS};

/// Utilisation over the sampler's window from which a small excursion may start an episode.
pub(super) const SATURATED_ELU: f64 = 0.9;

impl ShedController {
    /// The spike filter: whether `lag` (above or below the target of `range` = (target, critical))
    /// may start an episode now, on a loop that was busy `elu` of the sampler's window (NaN: not
    /// measured, which does not hold an excursion back).
    pub(super) fn confirmed(&mut self, lag: f64, range: (f64, f64), elu: f64, now_ns: u64) -> bool {
        let (t, c) = range;
        if lag <= t {
            if lag < t - self.cfg.hysteresis_ms {
                self.excursion = None;
            }
            return false;
        }
        if self.cfg.confirm_ms == 0.0 {
            return true;
        }
        match &mut self.excursion {
            None => {
                self.excursion = Some((now_ns, lag));
                false
            }
            Some((since, peak)) => {
                let rising = lag > *peak;
                *peak = peak.max(lag);
                let saturated = !(elu < SATURATED_ELU) || lag >= t + (c - t) / 2.0;
                rising && saturated && (now_ns - *since) as f64 >= self.cfg.confirm_ms * NS_PER_MS
            }
        }
    }
}

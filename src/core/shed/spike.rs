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
use super::controller::{ShedController, NS_PER_MS};

impl ShedController {
    /// The spike filter: whether `lag` (above or below the target `t`) may start an episode now.
    pub(super) fn confirmed(&mut self, lag: f64, t: f64, now_ns: u64) -> bool {
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
                rising && (now_ns - *since) as f64 >= self.cfg.confirm_ms * NS_PER_MS
            }
        }
    }
}

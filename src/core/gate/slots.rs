//! The gate's side of the learned concurrency limit: slots back, hand-overs, when the loop is the
//! bottleneck.
use super::*;

impl Gate {
    /// A slot taken in `epoch` comes back: its request finished after `latency_ns` (`None`: refused
    /// or abandoned after taking it, which says nothing of the service). `waiting`: requests waiting
    /// for a slot; returns how many of them may start now (their slots are taken).
    /// Their slots are taken in the epoch `slot_epoch` says.
    /// While the loop is the bottleneck a request's latency is the loop's queue, not the
    /// downstream's: no sample (the limit would learn the loop's knee, and hold it after the loop's
    /// overload ends).
    pub fn release(&self, epoch: u64, latency_ns: Option<u64>, waiting: u32, now_ns: u64) -> u32 {
        let mut st = self.state.lock();
        let latency_ns = if Self::loop_bound(&st) { None } else { latency_ns };
        st.conc.release(epoch, latency_ns, now_ns);
        let n = st.conc.hand_over(waiting, now_ns);
        st.waiting = waiting - n;
        n
    }

    /// Whether the loop is the bottleneck: busy, in a lag episode, or lagging half the way to the
    /// target already (an overload's onset, before the utilisation's average shows it). On
    /// a machine where the process waits for a CPU it reads busy and late too, and the limit then
    /// lets through what the lag controller admits (bench:overload: binding during a CPU overload's
    /// onset put critical p99 at 1.8x the ideal scheduler's, against 1.35x without).
    pub(super) fn loop_bound(st: &State) -> bool {
        st.busy > LOOP_BUSY || st.ctl.pressure() > 0.0 || st.input.lag_ms >= LOOP_LATE_LAG_SHARE * st.ctl.thresholds_ms().0
    }

    /// Slots for up to `waiting` requests waiting for one, without a release (the limit rose).
    /// (Not every waiter while the loop is the bottleneck: one burst of all of them would flood the
    /// downstream the limit protects — bench:downstream's mixed route, whose loop reads busy at 3x.)
    pub fn hand_over(&self, waiting: u32, now_ns: u64) -> u32 {
        let mut st = self.state.lock();
        let n = st.conc.hand_over(waiting, now_ns);
        st.waiting = waiting - n;
        n
    }

    /// The epoch slots are taken in now (`release`, `hand_over`).
    pub fn slot_epoch(&self) -> u64 {
        self.state.lock().conc.epoch()
    }

    /// A user signal: requests waiting downstream over its size (0: none wait).
    pub fn set_concurrency_signal(&self, v: f64) {
        self.state.lock().conc.set_signal(v);
    }
}

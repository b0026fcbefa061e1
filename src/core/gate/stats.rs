//! The gate's figures: `stats()` and its counters.
use super::*;

impl Gate {
    /// A reading of the gate as of `now_ns` (`idle_ns` as for `update_now`): the controller is moved
    /// first, so a gate that has seen no request for a while reports the pressure and scales its hold
    /// and recovery have brought it to by now, not those of its last request.
    pub fn stats_at(&self, now_ns: u64, idle_ns: u64) -> GateStats {
        let mut st = self.state.lock();
        self.update(&mut st, now_ns, idle_ns);
        Self::read_stats(&st)
    }

    /// A reading of the gate as of its last update.
    pub fn stats(&self) -> GateStats {
        Self::read_stats(&self.state.lock())
    }

    pub(super) fn read_stats(st: &State) -> GateStats {
        GateStats {
            counters: st.counters.clone(),
            scales: st.applied.clone(),
            health: st.health.sample(),
            injected: st.injected,
            input: st.input,
            pressure: st.ctl.pressure(),
            parts: st.ctl.parts(),
            cause: st.ctl.cause(),
            episodes: st.ctl.episodes(),
            baseline_ms: st.ctl.baseline_ms(),
            thresholds_ms: st.ctl.thresholds_ms(),
            concurrency: ConcurrencyStats { pressure: st.conc.pressure(st.waiting), ..st.conc.stats() },
        }
    }

    /// Zeroes the counters (the controller and the ledger are left alone).
    pub fn reset_counters(&self) {
        let mut st = self.state.lock();
        st.counters.iter_mut().for_each(|c| *c = TierCounters::default());
    }
}

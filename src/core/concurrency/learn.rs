//! The interval's learning: the knee, the queue, the probes (the module notes say how).
use super::*;

impl Concurrency {
    pub(super) fn record(&mut self, latency_ns: u64, now_ns: u64) {
        if self.count == 0 && self.start_ns == 0 {
            self.start_ns = now_ns;
        }
        self.count += 1;
        self.sum_ns += latency_ns as f64;
        self.earliest_admit_ns = self.earliest_admit_ns.min(now_ns.saturating_sub(latency_ns));
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(latency_ns);
        }
        if self.count >= MIN_SAMPLES && now_ns.saturating_sub(self.start_ns) >= self.interval_ns {
            self.learn(now_ns);
        }
    }

    /// The limit for a knee: the knee and `HEADROOM` of it, each rounded to whole requests. Below a
    /// knee of 5 no headroom: a request more would sit queued downstream ahead of a protected one,
    /// a wait of a quarter of the service time or more; above, the headroom absorbs the estimate's
    /// noise (a few per cent of the knee) for a wait of a tenth or less.
    pub(super) fn knee_limit(&self, knee: f64) -> f64 {
        (knee.round() + (HEADROOM * knee).round()).max(1.0)
    }

    pub(super) fn learn(&mut self, now_ns: u64) {
        let elapsed_s = now_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let mid = self.samples.len() / 2;
        let typical = *self.samples.select_nth_unstable(mid).1;
        match self.probe {
            Probe::Drain(n) => {
                // Until every request of the interval was admitted after the probe began: those
                // admitted above its limit have finished, their queue downstream with them (at most
                // `MAX_DRAIN` intervals).
                let drained = self.earliest_admit_ns >= self.probe_started_ns || n + 1 >= MAX_DRAIN;
                self.probe = if drained { Probe::Measure } else { Probe::Drain(n + 1) };
                return self.next_interval(now_ns);
            }
            Probe::Measure => {
                // A probe whose median is much lower than the last probe's (the first: than the
                // interval's that started it) found a queue and may have met some of it still: probe
                // again soon, lower (a process that started under overload converges in a few), else
                // in 5 s; the first is followed by another soon, lower, in any case (a saturated
                // downstream looks the same at any concurrency over its knee but for the latency).
                // (The first one always: the lowest interval median it replaces may have been an
                // interval of fast requests alone, or of the queue the process started under.)
                let first = self.probed.0 == u64::MAX;
                let before = if first { self.probe_from } else { self.probed.0 };
                let lower = (typical as f64) < PROBE_AGAIN_BELOW * before as f64;
                self.probed = (typical, (self.sum_ns / f64::from(self.count)) as u64);
                self.probe = Probe::Off;
                self.next_probe_ns = now_ns.saturating_add(if first || lower { PROBE_SOON_NS } else { PROBE_EVERY_NS });
                self.searching = first || lower;
                self.stats.probes += 1;
                return self.next_interval(now_ns);
            }
            Probe::Off => {}
        }
        let mean = (self.sum_ns / f64::from(self.count)) as u64;
        self.medians[self.next] = typical;
        self.means[self.next] = mean;
        self.next = (self.next + 1) % BASELINE_INTERVALS;
        let (baseline, baseline_mean) = self.baseline();
        let (baseline_ns, baseline_mean_ns) = (baseline as f64, baseline_mean as f64);
        let typical_ns = typical as f64;
        let throughput = f64::from(self.count) / elapsed_s;
        let (min, max) = (f64::from(self.cfg.min_limit), f64::from(self.cfg.max_limit));
        let peak = f64::from(self.peak);
        let reached = peak >= self.limit.floor();
        // Little's law counts means: the requests the downstream serves at once without a queue
        // (the knee), and those that waited there on average.
        let knee = throughput * baseline_mean_ns / 1e9;
        let queued = throughput * (mean as f64 - baseline_mean_ns).max(0.0) / 1e9;
        // Only against a probed baseline: before the first probe the lowest interval median may be
        // an interval of fast requests alone (health checks, a pool's warm-up), and a knee from it
        // would be no concurrency at all.
        let probed = self.probed.0 != u64::MAX;
        let measured = probed
            && reached
            && queued > (QUEUE_SHARE * knee).max(QUEUE_MIN)
            && mean as f64 > (QUEUE_LATENCY * baseline_mean_ns).max(baseline_mean_ns + QUEUE_MIN_NS);
        // A knee is at least the concurrency served without a queue measured: an interval at the
        // limit without one raises a knee measured too low (a probe's baseline a few per cent short,
        // an interval across an overload's onset, a stall read as a queue), which the once-a-second
        // growth past it would otherwise keep for seconds.
        if probed && reached && !measured && self.knee >= 1.0 {
            self.knee = self.knee.max(knee);
        }
        let queueing = measured || self.signal > 0.0;
        if measured {
            self.knee = knee;
        }
        if queueing {
            // The knee and its headroom: the rest of the queue goes (a protected tier's requests come
            // on top).
            // (Never above the limit: a queue is no reason to let more in, whatever the figures say.)
            let mut target = if measured { self.knee_limit(knee).min(self.limit) } else { self.limit };
            // A queue `signal` times the downstream's size waits there: of the requests in flight,
            // the downstream serves one in (1 + signal).
            if self.signal > 0.0 {
                target = target.min(peak / (1.0 + self.signal) + 1.0);
            }
            // Down at once (each interval over the knee is a queue to drain), up half-way.
            let next = if target < self.limit { target } else { self.limit + (target - self.limit) * SMOOTHING };
            self.limit = next.clamp(min, max);
        } else if reached {
            // More than the limit asked, and nothing queued downstream: grow by what waited, up to
            // half the limit an interval (a ramp after a lull catches up in a few), else by a little.
            // (Not past a knee measured before: at the knee a queue of one shows in few samples.)
            // (Nor in the first interval of a wait: an overload's onset shows in the next one's latency.)
            let calm = probed && self.waited_before && typical_ns <= RAMP_CALM * baseline_ns && queued < QUEUE_MIN;
            // Past a measured knee, at most one step every `GROW_PAST_KNEE_NS`: a step too far is a
            // queue downstream until the next interval measures it.
            let room = if self.knee >= 1.0 { (self.knee_limit(self.knee) - self.limit).max(0.0) } else { f64::INFINITY };
            let waited = if calm { f64::from(self.waiting_peak).min(RAMP * self.limit).min(room) } else { 0.0 };
            let past_knee = room == 0.0;
            if !past_knee || now_ns >= self.next_grow_ns {
                if past_knee {
                    self.next_grow_ns = now_ns.saturating_add(GROW_PAST_KNEE_NS);
                }
                self.limit = (self.limit + (self.limit * GROWTH).max(1.0).max(waited)).clamp(min, max);
            }
        } else {
            // Unused headroom is no evidence: keep room for a burst of a few more than the use, no
            // more, so an overload's onset does not first fill the downstream's queue up to a limit
            // nothing has tested.
            self.limit = self.limit.min(peak + peak.sqrt().max(SPARE_MIN)).clamp(min, max);
        }
        self.interval_ns = ((INTERVAL_BASELINES * baseline_ns) as u64).clamp(INTERVAL_NS, MAX_INTERVAL_NS);
        self.stats.baseline_ms = baseline_ns / 1e6;
        self.stats.typical_ms = typical_ns / 1e6;
        self.stats.throughput = throughput;
        self.stats.queueing = queueing;
        self.stats.intervals += 1;
        // A limit reached is probed every `PROBE_EVERY_NS` (the first time at once): under a standing
        // queue every request waits, and no interval's median is the service's own latency.
        if reached && now_ns >= self.next_probe_ns {
            let at = if self.searching || self.knee < 1.0 { (self.limit * PROBE_SEARCH_FACTOR).ceil() } else { self.knee.floor().min(self.limit) };
            self.probe_limit = at.clamp(min, max);
            self.probe_from = typical;
            self.probe_started_ns = now_ns;
            self.probe = Probe::Drain(0);
        }
        self.next_interval(now_ns);
    }

    /// The service without a queue, median and mean: the last probe's; before any probe, the lowest
    /// interval median (and mean) of the horizon. A probe's, once there is one, because an interval's
    /// requests are whatever mix of routes came then: a burst of fast ones would pass for the
    /// service's own latency for the whole horizon.
    pub(super) fn baseline(&self) -> (u64, u64) {
        if self.probed.0 != u64::MAX {
            self.probed
        } else {
            (*self.medians.iter().min().unwrap(), *self.means.iter().min().unwrap())
        }
    }

    pub(super) fn next_interval(&mut self, now_ns: u64) {
        self.start_ns = now_ns;
        self.count = 0;
        self.samples.clear();
        self.sum_ns = 0.0;
        self.earliest_admit_ns = u64::MAX;
        self.peak = self.in_flight;
        self.waited_before = self.waiting_peak > 0;
        self.waiting_peak = 0;
    }
}

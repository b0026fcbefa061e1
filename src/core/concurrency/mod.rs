//! The concurrency the service can carry, learned from what the gatekeeper observes: requests in
//! flight, each one's latency from admission to finish, and the throughput they make (Little's law).
//! It is how the gatekeeper sees an overload the event loop cannot: a saturated database pool or
//! upstream, where the loop idles while requests queue downstream.
//!
//! Every interval (at least `INTERVAL_NS`, four baselines, and `MIN_SAMPLES` finished requests):
//! - `typical`: the interval's median latency, and its mean;
//! - `baseline`: the service's latency without a queue, median and mean, as the last **probe**
//!   measured it: the limit held low until the queue it found has drained, then one interval. A
//!   reached limit is probed at once, then every `PROBE_EVERY_NS`; a probe holds the limit at the
//!   last measured knee (a queue its headroom or a step past it left drains, the downstream stays
//!   busy), or at `PROBE_SEARCH_FACTOR` of it while searching: after the first probe, and after one
//!   that found a much lower baseline (a limit far above the knee looks the same as one just over
//!   it, but for the latency). Intervals' medians are no baseline: one of fast requests alone
//!   (health checks, a pool's warm-up) would pass for the service.
//! - `knee`: `throughput × baseline mean`, the requests the downstream serves at once without a
//!   queue (Little's law: a pool of 4 at 20 ms makes 200/s × 20 ms = 4), and `queued`:
//!   `throughput × (mean − baseline mean)`, the requests that waited there on average. Means, not
//!   medians: a queue shorter than the pool leaves the median untouched, and each request in it is a
//!   wait for the protected tier.
//! - a queue (the limit reached, more than `QUEUE_SHARE` of the knee and `QUEUE_MIN` queued, against
//!   a probed baseline), or a user signal above 0 (requests waiting downstream over its size: a
//!   pool's `waitingCount / max`): the limit goes down to the knee plus `HEADROOM` of it, each in
//!   whole requests (none below a knee of 5: a request queued at a pool of 4 is a quarter of a
//!   service time more for the protected tier); with a signal `v`, to at most the most requests in
//!   flight ÷ (1 + v), plus one. The first waiter starts in the callback of the response that freed
//!   its slot, so a limit at the knee keeps the downstream busy.
//! - reached without a queue: it grows by `GROWTH` (at least one request) an interval — or, when
//!   requests waited two intervals running and the latency shows nothing, by as many as waited (up
//!   to `RAMP` of it, and not past a knee measured before), so a ramp after a lull catches up; past
//!   a measured knee by one step every `GROW_PAST_KNEE_NS` (a step too far is a queue downstream),
//!   and an interval at the limit without a queue raises a knee measured too low.
//! - not reached: it keeps room for a burst of the square root of the most requests in flight (at
//!   least `SPARE_MIN`) and no more, so an overload's onset does not first fill the downstream's
//!   queue up to a limit nothing has tested (the protected tier would wait behind it).
//!
//! A request of a protected tier always gets a slot (it is counted in flight, so the others have
//! fewer); one of another tier gets one while fewer than the limit are in flight, else it waits (the
//! caller queues it in tier order or sheds it) — unless the loop itself is the bottleneck
//! (`loop_bound`): then its latency inflates from the loop, the lag controller governs, and the
//! limit does not bind. A gate in shadow mode (core/gate) gives a request that would have waited a
//! slot all the same (`take_shadow`), and it is counted.
//!
//! A slot is counted for at most `EPOCHS × EPOCH_NS` (10 s): a request in flight longer (a stream,
//! a long poll, a response that never finishes) stops counting, so long-lived requests cannot fill
//! the limit, and its latency is no sample.
//!
//! Anchors: Netflix concurrency-limits (Gradient2, Vegas), Envoy's adaptive concurrency filter
//! (a measured minimum latency, periodic re-measurement), BBR's bottleneck bandwidth × min RTT.
mod learn;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

/// An interval is at least this long (ns)...
pub const INTERVAL_NS: u64 = 100_000_000;
/// ... and at least this many baselines (a slow downstream's requests finish in rounds)...
pub const INTERVAL_BASELINES: f64 = 4.0;
/// ... and has at least this many finished requests.
pub const MIN_SAMPLES: u32 = 10;
/// The baseline is the lowest interval median over this many intervals.
pub const BASELINE_INTERVALS: usize = 30;
/// A probe waits at most this many intervals for the queue it found to drain.
pub const MAX_DRAIN: u32 = 20;
/// An interval is at most this long (ns), whatever the baseline.
pub const MAX_INTERVAL_NS: u64 = 1_000_000_000;
/// Headroom above a measured knee, as a share of it, in whole requests (rounded: none below a knee
/// of 5, one to 15, ...).
pub const HEADROOM: f64 = 0.1;
/// Growth past a measured knee: at most one step this often (ns).
pub const GROW_PAST_KNEE_NS: u64 = 1_000_000_000;
/// A queue downstream: on average more requests waiting there than this share of the knee...
pub const QUEUE_SHARE: f64 = 0.1;
/// ... and than this many, with a mean latency over this multiple of the baseline's (a loop's own
/// overhead at a high rate is a fraction of a millisecond that Little's law would count as requests).
pub const QUEUE_MIN: f64 = 0.5;
pub const QUEUE_LATENCY: f64 = 1.1;
/// ... and at least this much over it (ns): a few-millisecond service's timers and the loop's own
/// turns stretch its latency by more than a tenth with nothing queued.
pub const QUEUE_MIN_NS: f64 = 1_000_000.0;
/// Growth per interval while the limit is reached without queueing, as a share of it (at least
/// one request): additive, so the limit probes above the knee by little at a time.
pub const GROWTH: f64 = 0.02;
/// ... or, when requests waited for a slot and the latency shows nothing (the median within
/// `RAMP_CALM` of the baseline, less than `QUEUE_MIN` queued), by as many as waited, up to this
/// share of it.
pub const RAMP: f64 = 0.5;
pub const RAMP_CALM: f64 = 1.1;
/// A limit in use is probed this often (ns): two intervals at a low concurrency, the second's median
/// the baseline.
pub const PROBE_EVERY_NS: u64 = 5_000_000_000;
/// A probe holds the limit at the last measured knee (a queue its headroom or a step past it left
/// drains, and the downstream stays busy), or at this share of it (rounded up) while it searches:
/// no knee measured yet, or the last probe found a much lower baseline (a limit far above the knee,
/// as in a process that started under overload).
pub const PROBE_SEARCH_FACTOR: f64 = 0.5;
/// A probe whose median is under this share of the baseline before it is followed by another
/// after `PROBE_SOON_NS`.
pub const PROBE_AGAIN_BELOW: f64 = 0.8;
pub const PROBE_SOON_NS: u64 = 500_000_000;
/// Latencies kept per interval for its median.
pub const MAX_SAMPLES: usize = 1024;
/// The weight of a higher target (the limit rises this share of the way per interval).
pub const SMOOTHING: f64 = 0.5;
/// Slots are counted by the epoch they were taken in (this long, ns)...
pub const EPOCH_NS: u64 = 1_000_000_000;
/// ... over this many epochs: a request in flight longer (a stream, a long poll, a response that
/// never finishes) stops counting, and says nothing of the service's latency.
pub const EPOCHS: usize = 10;
/// A limit that was not reached falls to the most requests in flight plus their square root (a
/// load's own fluctuation), at least this many.
pub const SPARE_MIN: f64 = 2.0;

#[derive(Clone, Debug, PartialEq)]
pub struct ConcurrencyConfig {
    /// Off: every request gets a slot and nothing is counted.
    pub enabled: bool,
    pub min_limit: u32,
    pub max_limit: u32,
    /// The limit a gate starts with, before anything is learnt.
    pub initial_limit: u32,
}

impl Default for ConcurrencyConfig {
    fn default() -> Self {
        ConcurrencyConfig { enabled: true, min_limit: 1, max_limit: 10_000, initial_limit: 1000 }
    }
}

impl ConcurrencyConfig {
    pub fn check(&self) -> Result<(), &'static str> {
        if self.min_limit < 1 {
            return Err("minLimit must be at least 1");
        }
        if self.max_limit < self.min_limit {
            return Err("maxLimit must be at least minLimit");
        }
        if !(self.min_limit..=self.max_limit).contains(&self.initial_limit) {
            return Err("initialLimit must be from minLimit to maxLimit");
        }
        Ok(())
    }
}

/// What a request gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Slot {
    /// Not counted (the estimator is off, or the request was refused before it).
    #[default]
    None,
    /// A slot: the caller releases it when the request finishes.
    Held,
    /// A slot in shadow mode, where the request would have waited (`take_shadow`).
    Shadow,
    /// No slot: wait for one (in tier order) or be shed.
    Wait,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConcurrencyStats {
    pub limit: u32,
    pub in_flight: u32,
    /// Requests that found every slot in use (in shadow mode, those given one all the same included).
    pub waits: u64,
    /// Of `waits`: given a slot all the same, in shadow mode.
    pub shadow_waits: u64,
    /// The last interval's figures (ms, requests per second).
    pub baseline_ms: f64,
    /// The last interval's median latency.
    pub typical_ms: f64,
    pub throughput: f64,
    pub queueing: bool,
    pub signal: f64,
    pub intervals: u64,
    /// Slots held past `EPOCHS` epochs, no longer counted.
    pub long_lived: u64,
    /// Baselines measured at a low concurrency.
    pub probes: u64,
    /// `pressure` with the waiting count the caller last gave.
    pub pressure: f64,
}

pub struct Concurrency {
    cfg: ConcurrencyConfig,
    limit: f64,
    in_flight: u32,
    start_ns: u64,
    count: u32,
    /// The interval's latencies (at most `MAX_SAMPLES`: the median of the first ones).
    samples: Vec<u64>,
    /// The interval's latencies added up (its mean: Little's law counts means).
    sum_ns: f64,
    /// When the interval's earliest-admitted request was admitted.
    earliest_admit_ns: u64,
    /// The most requests in flight during the interval.
    peak: u32,
    medians: [u64; BASELINE_INTERVALS],
    means: [u64; BASELINE_INTERVALS],
    /// `INTERVAL_NS`, or `INTERVAL_BASELINES` × the baseline when longer (at most `MAX_INTERVAL_NS`):
    /// an interval's throughput then counts several rounds of requests, not one wave of a slow
    /// downstream.
    interval_ns: u64,
    next: usize,
    signal: f64,
    /// Per epoch (by its number modulo `EPOCHS`), the slots taken then and not yet released.
    held: [u32; EPOCHS],
    /// The latest epoch seen.
    epoch: u64,
    probe: Probe,
    /// The limit while probing, and when the probe began.
    probe_limit: f64,
    probe_started_ns: u64,
    /// The median and the mean latency the last probe measured (`u64::MAX`: none yet).
    probed: (u64, u64),
    next_probe_ns: u64,
    /// No load under the limit measured the baseline before the first probe, or the last probe found
    /// a much lower one: the next probe holds the limit lower.
    searching: bool,
    /// The median of the interval that started the probe.
    probe_from: u64,
    /// The knee the last queue measured (0: none yet): routine probes hold the limit there.
    knee: f64,
    /// The limit grows past that knee no sooner than this.
    next_grow_ns: u64,
    /// The most requests waiting for a slot during the interval (as the caller said), and whether
    /// any waited in the interval before.
    waiting_peak: u32,
    waited_before: bool,
    stats: ConcurrencyStats,
}

/// Measuring the baseline at a low concurrency (Envoy's minimum-RTT recalculation): under a
/// standing queue every request waits, and no interval's median is the service's own latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    Off,
    /// Intervals at the probe's limit (their count) while the queue downstream drains.
    Drain(u32),
    /// One more, whose median is the baseline.
    Measure,
}

impl Concurrency {
    pub fn new(cfg: ConcurrencyConfig) -> Concurrency {
        let limit = f64::from(cfg.initial_limit);
        Concurrency {
            cfg,
            limit,
            in_flight: 0,
            start_ns: 0,
            count: 0,
            samples: Vec::with_capacity(MAX_SAMPLES),
            sum_ns: 0.0,
            earliest_admit_ns: u64::MAX,
            peak: 0,
            medians: [u64::MAX; BASELINE_INTERVALS],
            means: [u64::MAX; BASELINE_INTERVALS],
            interval_ns: INTERVAL_NS,
            next: 0,
            signal: 0.0,
            held: [0; EPOCHS],
            epoch: 0,
            probe: Probe::Off,
            probe_limit: 0.0,
            probe_started_ns: 0,
            probed: (u64::MAX, u64::MAX),
            next_probe_ns: 0,
            searching: true,
            probe_from: u64::MAX,
            knee: 0.0,
            next_grow_ns: 0,
            waiting_peak: 0,
            waited_before: false,
            stats: ConcurrencyStats::default(),
        }
    }

    /// Moves to the epoch of `now_ns`: the slots of epochs that fall out of the ring stop counting.
    fn rotate(&mut self, now_ns: u64) {
        let e = now_ns / EPOCH_NS;
        if e <= self.epoch {
            return;
        }
        let steps = (e - self.epoch).min(EPOCHS as u64);
        for i in 1..=steps {
            let at = ((self.epoch + i) % EPOCHS as u64) as usize;
            let stale = std::mem::take(&mut self.held[at]);
            self.in_flight -= stale;
            self.stats.long_lived += u64::from(stale);
        }
        self.epoch = e;
    }

    /// The epoch a slot taken now belongs to (the caller gives it back with `release`).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The limit now (whole requests): the probe's while it measures the baseline.
    pub fn limit(&self) -> u32 {
        if self.probe == Probe::Off {
            self.limit as u32
        } else {
            self.probe_limit as u32
        }
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// A slot for a request of a `protected` tier or not; `loop_bound`: the event loop is the
    /// bottleneck now (the limit does not bind).
    pub fn try_acquire(&mut self, protected: bool, loop_bound: bool, now_ns: u64) -> Slot {
        if !self.cfg.enabled {
            return Slot::None;
        }
        self.rotate(now_ns);
        let free = self.in_flight < self.limit();
        if !(free || protected || loop_bound) {
            self.stats.waits += 1;
            return Slot::Wait;
        }
        self.take();
        Slot::Held
    }

    /// A slot for a request `try_acquire` told to wait, in shadow mode: the decision is counted and
    /// not enforced.
    pub fn take_shadow(&mut self) -> Slot {
        self.stats.shadow_waits += 1;
        self.take();
        Slot::Shadow
    }

    fn take(&mut self) {
        self.in_flight += 1;
        self.held[(self.epoch % EPOCHS as u64) as usize] += 1;
        self.peak = self.peak.max(self.in_flight);
    }

    /// Up to `waiting` slots for requests that waited, while fewer than the limit are in flight:
    /// how many the caller may start now (counted in flight).
    pub fn hand_over(&mut self, waiting: u32, now_ns: u64) -> u32 {
        self.rotate(now_ns);
        self.waiting_peak = self.waiting_peak.max(waiting);
        let n = self.limit().saturating_sub(self.in_flight).min(waiting);
        for _ in 0..n {
            self.take();
        }
        n
    }

    /// A slot taken in `epoch` comes back at `now_ns`; `latency_ns`: the request's, from its slot to
    /// its finish (`None`: it says nothing of the service, as a refusal written after the slot was
    /// taken). A slot of an epoch out of the ring no longer counts: nothing to give back, no sample.
    pub fn release(&mut self, epoch: u64, latency_ns: Option<u64>, now_ns: u64) {
        self.rotate(now_ns);
        if self.epoch.saturating_sub(epoch) >= EPOCHS as u64 || epoch > self.epoch {
            return;
        }
        let at = (epoch % EPOCHS as u64) as usize;
        if self.held[at] == 0 {
            return;
        }
        self.held[at] -= 1;
        self.in_flight -= 1;
        if let Some(l) = latency_ns {
            self.record(l, now_ns);
        }
    }

    /// For a caller that counts its own requests in flight (the concurrency gate's `'auto'`): one
    /// finished request's latency, and the requests in flight when it finished (itself included).
    pub fn observe(&mut self, latency_ns: u64, in_flight: u32, now_ns: u64) {
        self.peak = self.peak.max(in_flight);
        self.record(latency_ns, now_ns);
    }

    /// Cuts the limit to `factor` of itself at once (at least `min_limit`): the concurrency gate's
    /// answer to a saturated event loop, which can run no more requests at once, only longer turns.
    pub fn cut(&mut self, factor: f64) {
        if factor.is_finite() && factor > 0.0 {
            self.limit = (self.limit * factor).clamp(f64::from(self.cfg.min_limit), f64::from(self.cfg.max_limit));
        }
    }

    /// The limit before rounding down (the concurrency gate reports it).
    pub fn estimate(&self) -> f64 {
        self.limit
    }

    /// A user signal: requests waiting downstream over the downstream's size (a pool's
    /// `waitingCount / max`), 0 when none wait; read at each interval's end.
    pub fn set_signal(&mut self, v: f64) {
        self.signal = if v.is_finite() && v > 0.0 { v } else { 0.0 };
    }

    /// 0 below 80% of the limit in use, rising to 1 at the limit (and with requests waiting).
    pub fn pressure(&self, waiting: u32) -> f64 {
        if !self.cfg.enabled {
            return 0.0;
        }
        let used = f64::from(self.in_flight + waiting) / self.limit.max(1.0);
        ((used - 0.8) * 5.0).clamp(0.0, 1.0)
    }

    pub fn stats(&self) -> ConcurrencyStats {
        ConcurrencyStats { limit: self.limit(), in_flight: self.in_flight, signal: self.signal, ..self.stats }
    }
}

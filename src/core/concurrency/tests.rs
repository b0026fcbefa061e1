//! The estimator against a simulated downstream: `k` servers of a fixed service time behind a FIFO
//! queue (a database pool), open-loop arrivals, an injected clock.
use super::*;
use std::collections::VecDeque;

const MS: u64 = 1_000_000;

struct Downstream {
    k: usize,
    service_ns: u64,
    /// The requests being served: (finish, admitted at, slot epoch).
    busy: Vec<(u64, u64, u64)>,
    /// The requests waiting for a server: (admitted at, slot epoch).
    queue: VecDeque<(u64, u64)>,
}

impl Downstream {
    fn new(k: usize, service_ns: u64) -> Downstream {
        Downstream { k, service_ns, busy: Vec::new(), queue: VecDeque::new() }
    }

    fn submit(&mut self, now: u64, epoch: u64) {
        if self.busy.len() < self.k {
            self.busy.push((now + self.service_ns, now, epoch));
        } else {
            self.queue.push_back((now, epoch));
        }
    }

    /// The earliest request finished by `now`: (finished at, latency from admission, slot epoch);
    /// the next one queued takes its server then.
    fn finish_next(&mut self, now: u64) -> Option<(u64, u64, u64)> {
        let i = (0..self.busy.len()).filter(|&i| self.busy[i].0 <= now).min_by_key(|&i| self.busy[i].0)?;
        let (f, at, e) = self.busy.swap_remove(i);
        if let Some((q, qe)) = self.queue.pop_front() {
            self.busy.push((f + self.service_ns, q, qe));
        }
        Some((f, f - at, e))
    }
}

struct Run {
    admitted: u64,
    waited: u64,
    latencies: Vec<u64>,
    limits: Vec<u32>,
}

/// `rate_per_s` arrivals from `from_ms` to `to_ms`, one in ten protected, through the estimator into
/// the downstream. A request without a slot waits, as the gatekeeper's do: oldest first, handed the
/// slot of the next release at once, shed after `MAX_WAIT_NS`. Samples from 3 s in only (the onset's
/// queue, built before the first interval ends, drained).
fn run(c: &mut Concurrency, d: &mut Downstream, rate_per_s: u64, from_ms: u64, to_ms: u64) -> Run {
    const MAX_WAIT_NS: u64 = 500 * MS;
    let step = 1_000_000_000 / rate_per_s;
    let mut r = Run { admitted: 0, waited: 0, latencies: Vec::new(), limits: Vec::new() };
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut t = from_ms * MS + MS;
    let sampled = |at: u64| at > from_ms * MS + 3000 * MS;
    let mut i = 0u64;
    while t < to_ms * MS {
        while let Some((f, l, e)) = d.finish_next(t) {
            c.release(e, Some(l), f);
            if sampled(f) {
                r.latencies.push(l);
            }
            while waiting.front().is_some_and(|&at| f - at >= MAX_WAIT_NS) {
                waiting.pop_front();
            }
            for _ in 0..c.hand_over(waiting.len() as u32, f) {
                waiting.pop_front();
                d.submit(f, c.epoch());
                if sampled(f) {
                    r.admitted += 1;
                }
            }
        }
        match c.try_acquire(i.is_multiple_of(10), false, t) {
            Slot::Held | Slot::Shadow => {
                d.submit(t, c.epoch());
                if sampled(t) {
                    r.admitted += 1;
                }
            }
            Slot::Wait => {
                r.waited += 1;
                waiting.push_back(t);
            }
            Slot::None => unreachable!(),
        }
        if i.is_multiple_of(100) {
            r.limits.push(c.limit());
        }
        t += step;
        i += 1;
    }
    r
}

fn mean_ms(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6
}

#[test]
fn the_limit_converges_on_the_knee_of_a_saturated_pool() {
    for (k, service_ms) in [(4, 20), (16, 20), (4, 5), (32, 50)] {
        let capacity = k as u64 * 1000 / service_ms;
        let mut c = Concurrency::new(ConcurrencyConfig::default());
        let mut d = Downstream::new(k, service_ms * MS);
        run(&mut c, &mut d, capacity / 2, 0, 1000); // half the capacity first, as a service starts
        let r = run(&mut c, &mut d, 3 * capacity, 1000, 7000);
        let settled = &r.limits[r.limits.len() / 2..];
        let (lo, hi) = (*settled.iter().min().unwrap(), *settled.iter().max().unwrap());
        let served = r.admitted as f64 / 3.0;
        let m = mean_ms(&r.latencies);
        eprintln!("k {k} service {service_ms} ms: limit {lo}..{hi}, {served:.0}/s of {capacity}/s, mean {m:.1} ms");
        // Around the knee: a sawtooth of growth while nothing queues and a cut back to it, and a
        // probe at half of it every 5 s.
        assert!(lo as f64 >= 0.4 * k as f64 && (hi as f64) <= 1.4 * k as f64 + 2.0, "k {k}: the limit settles at the knee: {lo}..{hi}");
        assert!(served >= 0.95 * capacity as f64, "k {k}: {served}/s of {capacity}/s");
        // A request or two queued per pool, with the protected tier's on top: near the knee.
        assert!(m <= 1.45 * service_ms as f64, "k {k}: mean latency {m} ms for a service of {service_ms} ms");
        // Below a knee of 5 no headroom: the limit at the pool, next to no queue (the protected
        // tier's own requests on top).
        if k < 5 {
            assert!(lo == k as u32 && m <= 1.1 * service_ms as f64, "k {k}: limit {lo}..{hi}, mean {m} ms");
        }
    }
}

#[test]
fn below_capacity_nothing_waits_and_the_limit_follows_a_larger_downstream() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 2, ..ConcurrencyConfig::default() });
    let mut d = Downstream::new(8, 20 * MS);
    // Half the capacity (4 in flight on average): the limit grows out of the way from 2 (it is
    // reached without queueing), keeping room for a burst.
    let r = run(&mut c, &mut d, 200, 0, 4000);
    assert!(c.limit() >= 5, "grew to {}", c.limit());
    assert_eq!(r.latencies.iter().filter(|&&l| l > 20 * MS).count(), 0, "no queue downstream");
    let after_growth = run(&mut c, &mut d, 200, 4000, 6000);
    assert_eq!(after_growth.waited, 0);
}

#[test]
fn protected_requests_always_get_a_slot_and_count_against_the_others() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 2, ..ConcurrencyConfig::default() });
    assert_eq!(c.try_acquire(true, false, 0), Slot::Held);
    assert_eq!(c.try_acquire(true, false, 0), Slot::Held);
    assert_eq!(c.try_acquire(true, false, 0), Slot::Held, "over the limit: still a slot");
    assert_eq!(c.try_acquire(false, false, 0), Slot::Wait);
    assert_eq!(c.try_acquire(false, true, 0), Slot::Held, "the loop is the bottleneck: the limit does not bind");
    assert_eq!(c.in_flight(), 4);
    c.release(0, None, MS);
    c.release(0, None, MS);
    c.release(0, None, MS);
    assert_eq!(c.hand_over(5, MS), 1, "one free slot for five waiting");
    assert_eq!((c.in_flight(), c.stats().waits), (2, 1));
}

#[test]
fn a_shadow_slot_is_taken_and_counted_where_the_request_would_have_waited() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 1, ..ConcurrencyConfig::default() });
    assert_eq!(c.try_acquire(false, false, 0), Slot::Held);
    assert_eq!(c.try_acquire(false, false, 0), Slot::Wait);
    assert_eq!(c.take_shadow(), Slot::Shadow);
    assert_eq!(c.try_acquire(false, false, 0), Slot::Wait);
    assert_eq!(c.take_shadow(), Slot::Shadow);
    let s = c.stats();
    assert_eq!((s.in_flight, s.waits, s.shadow_waits), (3, 2, 2));
    assert!(c.pressure(0) > 0.99);
}

#[test]
fn a_user_signal_above_zero_is_a_queue_downstream() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 100, ..ConcurrencyConfig::default() });
    // 50 requests in flight for 20 ms each, with no latency inflation: nothing to learn but growth...
    c.set_signal(1.5);
    for _ in 0..50 {
        c.try_acquire(false, false, 0);
    }
    for i in 0..50u64 {
        c.release(0, Some(20 * MS), MS + i * 3 * MS);
    }
    // ... but the pool says 1.5 times its size wait in it: of the 50, it serves 50 / 2.5 = 20.
    assert!(c.stats().queueing);
    assert_eq!(c.limit(), 21, "{}", c.limit());
    c.set_signal(f64::NAN);
    assert_eq!(c.stats().signal, 0.0, "NaN reads as no signal");
}

#[test]
fn off_it_counts_nothing() {
    let mut c = Concurrency::new(ConcurrencyConfig { enabled: false, ..ConcurrencyConfig::default() });
    assert_eq!(c.try_acquire(false, false, 0), Slot::None);
    assert_eq!((c.in_flight(), c.pressure(10)), (0, 0.0));
}

#[test]
fn options_are_checked() {
    let bad = |f: fn(&mut ConcurrencyConfig)| {
        let mut c = ConcurrencyConfig::default();
        f(&mut c);
        c.check().unwrap_err()
    };
    assert!(bad(|c| c.min_limit = 0).contains("minLimit"));
    assert!(bad(|c| c.max_limit = 0).contains("maxLimit"));
    assert!(bad(|c| c.initial_limit = 20_000).contains("initialLimit"));
}

#[test]
fn a_slot_held_past_the_epochs_stops_counting_and_its_late_release_is_ignored() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 3, ..ConcurrencyConfig::default() });
    for _ in 0..3 {
        assert_eq!(c.try_acquire(false, false, 0), Slot::Held); // three streams that never end
    }
    assert_eq!(c.try_acquire(false, false, MS), Slot::Wait);
    let later = EPOCHS as u64 * EPOCH_NS;
    assert_eq!(c.try_acquire(false, false, later), Slot::Held, "the streams no longer count");
    assert_eq!((c.in_flight(), c.stats().long_lived), (1, 3));
    c.release(0, Some(later), later + MS);
    assert_eq!(c.in_flight(), 1, "a release of a forgotten epoch gives nothing back");
    c.release(c.epoch(), None, later + MS);
    assert_eq!(c.in_flight(), 0);
}

#[test]
fn an_observer_counts_in_flight_itself_and_can_cut_the_limit() {
    let mut c = Concurrency::new(ConcurrencyConfig { initial_limit: 10, max_limit: 40, ..ConcurrencyConfig::default() });
    // Steady latency with the limit in use: it grows, up to the maximum.
    for i in 1..=6000u64 {
        c.observe(5 * MS, c.limit(), i * MS);
    }
    assert_eq!(c.limit(), 40);
    c.cut(0.5);
    assert_eq!(c.limit(), 20);
    c.cut(0.01);
    assert_eq!(c.limit(), 1, "never below min_limit");
    assert_eq!(c.in_flight(), 0, "an observer's requests are its own to count");
}

#[test]
fn a_process_that_starts_under_overload_finds_the_knee_within_seconds() {
    let mut c = Concurrency::new(ConcurrencyConfig::default());
    let mut d = Downstream::new(4, 20 * MS);
    // 3x from the first request: the first intervals' medians are queued already; probes at half
    // the limit, repeated while they find a lower baseline, bring it down.
    let r = run(&mut c, &mut d, 600, 0, 15_000);
    let settled = &r.limits[r.limits.len() * 2 / 3..];
    let hi = *settled.iter().max().unwrap();
    assert!(hi <= 8, "the limit near the pool of 4 after 10 s: up to {hi}");
    assert!(c.stats().probes >= 2);
}

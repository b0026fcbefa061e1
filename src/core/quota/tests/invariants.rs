//! The accounting invariants, over simulated clusters (`sim.rs`) with random arrivals, latency,
//! timeouts, outages, restarts and deaths; each a few seeds, each seed a deterministic run.
use super::sim::{limit_config, run, Admit, Run, Scenario, MS, SEC};
use super::store::StoreAlg;
use crate::core::quota::*;
use std::collections::HashMap;

const SEEDS: [u64; 3] = [1, 2, 3];
const L: u64 = 300;
const W: u64 = SEC;
const FIXED: StoreAlg = StoreAlg::Fixed { limit: L, window_ns: W };

fn window_limit(l: LimitConfig) -> LimitConfig {
    LimitConfig { algorithm: Algorithm::Window { limit: L as f64, window_ms: (W / MS) as f64 }, ..l }
}

/// Exact mode: wait for leases, refuse without the store.
fn exact() -> LimitConfig {
    window_limit(LimitConfig { fallback: Fallback::Closed, ..limit_config() })
}

/// Tokens admitted per (key, fixed window), of the admissions `f` selects.
fn per_window(r: &Run, f: impl Fn(&Admit) -> bool) -> HashMap<(usize, u64), u64> {
    let mut m = HashMap::new();
    for a in r.admits.iter().filter(|a| f(a)) {
        *m.entry((a.key, a.t / W)).or_default() += a.cost;
    }
    m
}

/// How `covered_by_debits` counts.
#[derive(Clone, Copy)]
struct Cover {
    /// Admissions may exceed the debits by this much.
    extra: u64,
    /// Counted afresh each fixed window of this length: a token leased in one window is never
    /// spent in the next.
    window: Option<u64>,
    /// Each process against its own grants, not the cluster against all of them.
    by_process: bool,
}

const OVERALL: Cover = Cover { extra: 0, window: None, by_process: false };
const EACH_PROCESS: Cover = Cover { by_process: true, ..OVERALL };
/// Fixed windows, each process: what a process spends in a window, the store granted it in that window.
const EACH_WINDOW: Cover = Cover { extra: 0, window: Some(W), by_process: true };

/// At every admission (of those `f` selects), the tokens admitted so far are at most what the store
/// has debited so far, net of credited returns (plus `c.extra`): nothing spent that was not leased.
fn covered_by_debits(r: &Run, c: Cover, f: impl Fn(&Admit) -> bool) {
    let span = |t: u64| c.window.map_or(0, |w| t / w);
    let group = |key: usize, p: usize| (key, c.by_process.then_some(p));
    // Each group's debits `(t, net)` and admissions, in time order.
    type Group<'a> = (Vec<(u64, i64)>, Vec<&'a Admit>);
    let mut groups: HashMap<(usize, Option<usize>), Group> = HashMap::new();
    for &(t, key, p, n) in &r.debits {
        groups.entry(group(key, p)).or_default().0.push((t, n));
    }
    for a in r.admits.iter().filter(|a| f(a)) {
        groups.entry(group(a.key, a.p)).or_default().1.push(a);
    }
    for ((key, p), (debits, admits)) in groups {
        let (mut i, mut net, mut admitted, mut current) = (0, 0i64, 0i64, 0);
        for a in admits {
            if span(a.t) != current {
                (current, net, admitted) = (span(a.t), 0, 0);
            }
            while i < debits.len() && debits[i].0 <= a.t {
                if span(debits[i].0) == current {
                    net += debits[i].1;
                }
                i += 1;
            }
            admitted += a.cost as i64;
            assert!(admitted <= net + c.extra as i64, "key {key} process {p:?} at {} ms: admitted {admitted} > debited {net} + {}", a.t / MS, c.extra);
        }
    }
}

/// `L − admitted` in every window the store ran dry in is within the tokens outstanding at its end:
/// `P · 2·max(M, C + A)` (sizing's bound), plus the grants that came back too late to spend and
/// what dead processes held. Returns the largest shortfall seen and how many dry windows there were.
fn shortfall_within_outstanding(r: &Run, sc: &Scenario, allowance: u64) -> (u64, usize) {
    let m = sc.limit.max_lease.max(sc.max_cost + allowance);
    let admitted = per_window(r, |_| true);
    let (mut worst, mut dry) = (0, 0);
    let last = sc.duration_ns / W;
    for ((name, w), &used) in &r.store.closed {
        let key: usize = std::str::from_utf8(&name[3..]).unwrap().parse().unwrap();
        if used < L || *w == 0 || *w >= last {
            continue;
        }
        dry += 1;
        let got = admitted.get(&(key, *w)).copied().unwrap_or(0);
        let lost = r.lost_grants.get(&(key, *w)).copied().unwrap_or(0);
        let dead: u64 = r.killed.iter().filter(|k| k.2 == key && k.0 / W == *w).map(|k| k.3).sum();
        let bound = sc.processes as u64 * 2 * m + lost + dead;
        assert!(L.saturating_sub(got) <= bound, "key {key} window {w}: admitted {got} of {L}, bound {bound} (lost {lost}, dead {dead})");
        worst = worst.max(L.saturating_sub(got));
    }
    (worst, dry)
}

fn outstanding_within_sizing_bound(r: &Run, sc: &Scenario, allowance: u64) {
    let m = sc.limit.max_lease.max(sc.max_cost + allowance);
    assert!(r.max_outstanding < 2 * m, "one process held {} of one key (bound {})", r.max_outstanding, 2 * m);
}

#[test]
fn exact_mode_never_exceeds_a_fixed_window_and_falls_short_only_by_outstanding_leases() {
    // Steady demand, and demand that moves between processes (leases left over at window ends).
    for (seed, phase_ns) in SEEDS.into_iter().flat_map(|s| [(s, None), (s, Some(700 * MS))]) {
        let sc = Scenario { phase_ns, ..Scenario::new(seed, FIXED, exact()) };
        let r = run(&sc);
        assert!(r.admits.iter().all(|a| a.source == Source::Lease));
        for (&(key, w), &n) in &per_window(&r, |_| true) {
            assert!(n <= L, "seed {seed} key {key} window {w}: {n} > {L}");
        }
        covered_by_debits(&r, EACH_WINDOW, |_| true);
        outstanding_within_sizing_bound(&r, &sc, 0);
        let (worst, dry) = shortfall_within_outstanding(&r, &sc, 0);
        // The hot keys' demand exceeds the limit, the coolest key's does not; timeouts happened.
        assert!(dry >= 15, "seed {seed}: only {dry} dry windows");
        assert!(r.stats.iter().map(|s| s.failures).sum::<u64>() > 0);
        eprintln!(
            "exact fixed seed {seed} phases {phase_ns:?}: {} admitted, worst shortfall {worst} of {L} (bound {}), max outstanding {}",
            r.admits.len(),
            sc.processes * 2 * 50,
            r.max_outstanding
        );
    }
}

#[test]
fn exact_mode_never_exceeds_a_sliding_window_anywhere() {
    for seed in SEEDS {
        let sc = Scenario::new(seed, StoreAlg::Sliding { limit: L, window_ns: W }, LimitConfig { spent_returns: true, ..exact() });
        let r = run(&sc);
        covered_by_debits(&r, EACH_PROCESS, |_| true);
        let mut max_span = 0;
        for key in 0..sc.keys {
            let a: Vec<_> = r.admits.iter().filter(|a| a.key == key).collect();
            let (mut lo, mut sum) = (0, 0);
            for hi in 0..a.len() {
                sum += a[hi].cost;
                while a[lo].t + W < a[hi].t {
                    sum -= a[lo].cost;
                    lo += 1;
                }
                // Every span [t − W, t] ending at an admission (the fullest spans end at one).
                assert!(sum <= L, "seed {seed} key {key}: {sum} in the window ending at {} ms", a[hi].t / MS);
                max_span = max_span.max(sum);
            }
        }
        assert!(max_span > L * 9 / 10, "seed {seed}: the limit was approached ({max_span})");
        // Spent leases leave the window one window after their last spend, not one after their TTL
        // (2 s here, which would let the hot key have at most a third of its windows' worth).
        let hot: u64 = r.admits.iter().filter(|a| a.key == 0).map(|a| a.cost).sum();
        let ideal = L * sc.duration_ns / W;
        assert!(hot * 10 >= ideal * 7, "seed {seed}: the hot key got {hot} of {ideal}");
        eprintln!("exact sliding seed {seed}: hot key {hot} of {ideal}");
    }
}

#[test]
fn exact_mode_never_overdraws_a_token_bucket() {
    let (rate, burst) = (300.0, 100.0);
    for seed in SEEDS {
        let store = StoreAlg::Bucket { rate_per_sec: rate, burst };
        let limit = LimitConfig { algorithm: Algorithm::TokenBucket { rate_per_sec: rate, burst }, ..exact() };
        let sc = Scenario::new(seed, store, limit);
        let r = run(&sc);
        covered_by_debits(&r, EACH_PROCESS, |_| true);
        for key in 0..sc.keys {
            let mut total = 0;
            for a in r.admits.iter().filter(|a| a.key == key) {
                total += a.cost;
                assert!(total as f64 <= burst + rate * a.t as f64 / 1e9, "seed {seed} key {key} at {} ms", a.t / MS);
            }
            if key == 0 {
                let ideal = burst + rate * sc.duration_ns as f64 / 1e9;
                assert!(total as f64 > 0.9 * ideal, "seed {seed}: the hot key got {total} of {ideal}");
            }
        }
    }
}

#[test]
fn provisional_mode_over_admits_at_most_the_allowance_per_process() {
    let a = 5;
    for seed in SEEDS {
        let limit = LimitConfig { unfunded: Unfunded::Provisional { allowance: a }, ..exact() };
        let sc = Scenario::new(seed, FIXED, limit);
        let r = run(&sc);
        let bound = L + sc.processes as u64 * a;
        let windows = per_window(&r, |_| true);
        let over = windows.values().filter(|&&n| n > L).count();
        for (&(key, w), &n) in &windows {
            assert!(n <= bound, "seed {seed} key {key} window {w}: {n} > {bound}");
        }
        covered_by_debits(&r, Cover { extra: sc.processes as u64 * a, ..OVERALL }, |_| true);
        covered_by_debits(&r, EACH_WINDOW, |a| a.source == Source::Lease);
        outstanding_within_sizing_bound(&r, &sc, a);
        shortfall_within_outstanding(&r, &sc, a);
        let provisional: u64 = r.stats.iter().map(|s| s.spent_provisional).sum();
        assert!(provisional > 0 && over > 0, "seed {seed}: the allowance was used ({provisional}) and showed ({over} windows)");
        eprintln!("provisional seed {seed}: {over} windows over {L}, the most {}", windows.values().max().unwrap());
    }
}

/// Store outages at 5–8 s and 12.3–12.6 s, and a restart (empty) at 15.5 s.
fn troubled(seed: u64, fallback: Fallback) -> Scenario {
    let limit = window_limit(LimitConfig { fallback, min_holders: 6, ..limit_config() });
    Scenario {
        outages: vec![(5 * SEC, 8 * SEC), (12_300 * MS, 12_600 * MS)],
        restarts: vec![15_500 * MS],
        // No latency spikes: here the store is down only when it is down.
        spike_chance: 0.0,
        ..Scenario::new(seed, FIXED, limit)
    }
}

/// Lease admissions per window are within the limit, but for the restart's window: there, what the
/// empty store grants (`L`) + what was admitted before it restarted + what was outstanding then.
fn leases_within_limit_and_restart_bound(r: &Run, seed: u64) {
    let restart = r.restarted.first().map(|x| x.0);
    let lease = per_window(r, |a| a.source == Source::Lease);
    for (&(key, w), &n) in &lease {
        let bound = match restart {
            Some(t) if t / W == w => {
                let before: u64 = r.admits.iter().filter(|a| a.key == key && a.t / W == w && a.t < t).map(|a| a.cost).sum();
                let outstanding: u64 = r.restarted.iter().filter(|x| x.1 == key).map(|x| x.2).sum();
                L + before + outstanding
            }
            _ => L,
        };
        assert!(n <= bound, "seed {seed} key {key} window {w}: {n} from leases > {bound}");
    }
}

#[test]
fn fail_open_spends_leases_then_the_safe_share_and_recovers() {
    for seed in SEEDS {
        let sc = troubled(seed, Fallback::Open);
        let r = run(&sc);
        leases_within_limit_and_restart_bound(&r, seed);
        covered_by_debits(&r, EACH_WINDOW, |a| a.source == Source::Lease);
        // The share: L / H per local window, H = minHolders = P; two local windows meet one store window.
        let share = 2 * L / sc.processes as u64;
        let mut fallback: HashMap<(usize, usize, u64), u64> = HashMap::new();
        for a in r.admits.iter().filter(|a| a.source == Source::Fallback) {
            *fallback.entry((a.p, a.key, a.t / W)).or_default() += a.cost;
        }
        for (&(p, key, w), &n) in &fallback {
            assert!(n <= share, "seed {seed} process {p} key {key} window {w}: {n} by fallback > {share}");
        }
        let during: u64 = fallback.iter().filter(|(k, _)| (5..8).contains(&k.2)).map(|(_, n)| n).sum();
        assert!(during > 0, "seed {seed}: the outage was served from the share");
        // Recovery: once probes (every retryMs) get answers, decisions come from leases again.
        let recovered = 12_600 * MS + 500 * MS;
        assert!(r.admits.iter().filter(|a| a.t > recovered).all(|a| a.source == Source::Lease), "seed {seed}");
        let after: u64 = r.admits.iter().filter(|a| a.t / W == 9 && a.key == 0).map(|a| a.cost).sum();
        assert!(after > L * 9 / 10, "seed {seed}: the hot key got {after} in the window after the outage");
    }
}

#[test]
fn fail_closed_refuses_once_the_leases_run_out() {
    for seed in SEEDS {
        let sc = troubled(seed, Fallback::Closed);
        let r = run(&sc);
        assert!(r.admits.iter().all(|a| a.source == Source::Lease));
        leases_within_limit_and_restart_bound(&r, seed);
        covered_by_debits(&r, EACH_WINDOW, |_| true);
        let during = r.admits.iter().filter(|a| (5 * SEC..8 * SEC).contains(&a.t)).count();
        assert_eq!(during, 0, "seed {seed}: leases end with their window; nothing after it while the store is down");
    }
}

#[test]
fn a_dead_process_strands_at_most_its_leases_until_their_ttl() {
    for seed in SEEDS {
        let sc = Scenario { kills: vec![(3_500 * MS, 0), (7_200 * MS, 1), (7_250 * MS, 2)], ..Scenario::new(seed, FIXED, exact()) };
        let mut r = run(&sc);
        for (&(key, w), &n) in &per_window(&r, |_| true) {
            assert!(n <= L, "seed {seed} key {key} window {w}: {n} > {L}");
        }
        covered_by_debits(&r, OVERALL, |_| true);
        // The dead held something, and only their own windows fall short by it.
        assert!(r.killed.iter().any(|k| k.3 > 0), "seed {seed}");
        covered_by_debits(&r, EACH_WINDOW, |_| true);
        shortfall_within_outstanding(&r, &sc, 0);
        // The store forgets a dead holder at its leases' TTL (here: the end of the window).
        let end = sc.duration_ns;
        for key in 0..sc.keys {
            let holders = r.store.holders(format!("key{key}").as_bytes(), end);
            assert!(!holders.iter().any(|h| [0, 1000, 2000].contains(h)), "seed {seed} key {key}: {holders:?}");
        }
    }
}

#[test]
fn key_churn_stays_within_max_keys_and_exact() {
    for seed in SEEDS {
        let sc = Scenario { keys: 400, max_keys: 40, duration_ns: 5 * SEC, ..Scenario::new(seed, FIXED, exact()) };
        let r = run(&sc);
        assert!(r.max_keys <= 40, "seed {seed}: {} keys", r.max_keys);
        assert!(r.stats.iter().map(|s| s.evicted).sum::<u64>() > 0);
        for (&(key, w), &n) in &per_window(&r, |_| true) {
            assert!(n <= L, "seed {seed} key {key} window {w}: {n} > {L}");
        }
        covered_by_debits(&r, EACH_WINDOW, |_| true);
    }
}

use super::*;

const MS: u64 = 1_000_000;

fn lag(ms: f64) -> ShedInput {
    ShedInput { lag_ms: ms, ..Default::default() }
}

/// critical (protected), standard, background, as in the default gatekeeper.
fn three_tiers(cfg: ShedConfig) -> ShedController {
    ShedController::new(cfg, &[true, false, false]).unwrap()
}

/// Proportional only (no integral term) unless a test turns it on.
fn cfg() -> ShedConfig {
    ShedConfig {
        target_lag_ms: 50.0,
        critical_lag_ms: 150.0,
        hysteresis_ms: 10.0,
        hold_ms: 1000.0,
        recovery_ms: 2000.0,
        integral_ms: 0.0,
        confirm_ms: 0.0,
        ..Default::default()
    }
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn healthy_loop_keeps_every_tier_at_full_refill() {
    let mut c = three_tiers(cfg());
    for i in 0..100 {
        assert!(!c.update(&lag(49.9), i * 10 * MS));
    }
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    assert_eq!(c.pressure(), 0.0);
    assert_eq!(c.episodes(), 0);
}

#[test]
fn lowest_tier_is_throttled_first_then_the_next_one_up() {
    let mut c = three_tiers(cfg());
    // Range 50..150 ms, two sheddable tiers: background covers 50..100, standard 100..150.
    assert!(c.update(&lag(75.0), 0));
    assert!(approx(c.scale(2), 0.5));
    assert_eq!(c.scale(1), 1.0);
    assert!(c.update(&lag(100.0), MS));
    assert_eq!(c.scale(2), 0.0);
    assert_eq!(c.scale(1), 1.0);
    assert!(c.update(&lag(125.0), 2 * MS));
    assert_eq!(c.scale(2), 0.0);
    assert!(approx(c.scale(1), 0.5));
    assert!(c.update(&lag(150.0), 3 * MS));
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    assert!(!c.update(&lag(10_000.0), 4 * MS));
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0], "the protected tier keeps full refill");
    assert_eq!(c.cause(), Cause::Lag);
    assert_eq!(c.episodes(), 1);
}

#[test]
fn shedding_starts_on_the_first_reading_above_the_target() {
    let mut c = three_tiers(cfg());
    c.update(&lag(10.0), 0);
    assert!(c.update(&lag(50.5), MS));
    assert!(c.scale(2) < 1.0);
    assert!(c.update(&lag(500.0), 2 * MS), "a jump to past critical sheds every tier in one update");
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
}

#[test]
fn four_tiers_two_protected_order_by_priority_not_position() {
    // tiers: vip (protected), paid, internal (protected), free
    let mut c = ShedController::new(cfg(), &[true, false, true, false]).unwrap();
    c.update(&lag(100.0), 0);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0, 0.0]);
    c.update(&lag(125.0), MS);
    assert_eq!(c.scales(), &[1.0, 0.5, 1.0, 0.0]);
    c.update(&lag(1000.0), 2 * MS);
    assert_eq!(c.scales(), &[1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn all_protected_never_changes() {
    let mut c = ShedController::new(cfg(), &[true, true]).unwrap();
    assert!(!c.update(&ShedInput { stalled: true, ..lag(1e6) }, 0));
    assert_eq!(c.scales(), &[1.0, 1.0]);
}

#[test]
fn pressure_is_held_for_hold_ms_after_the_lag_falls() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    // Lag back to nothing: held until 1000 ms after the last justifying reading.
    for t in [1, 100, 500, 999] {
        assert!(!c.update(&lag(0.0), t * MS), "held at {t} ms");
    }
    assert_eq!(c.pressure(), 1.0);
    // From 1000 ms on, recovery at 1/2000 per ms: after 500 ms, pressure 0.75.
    c.update(&lag(0.0), 1000 * MS);
    assert!(approx(c.pressure(), 1.0));
    c.update(&lag(0.0), 1500 * MS);
    assert!(approx(c.pressure(), 0.75));
    assert!(approx(c.scale(1), 0.5));
    assert_eq!(c.scale(2), 0.0, "the lowest tier recovers last");
    c.update(&lag(0.0), 2500 * MS);
    assert!(approx(c.pressure(), 0.25));
    assert_eq!(c.scale(1), 1.0);
    assert!(approx(c.scale(2), 0.5));
    c.update(&lag(0.0), 3000 * MS);
    assert_eq!(c.pressure(), 0.0);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    assert_eq!(c.cause(), Cause::None);
}

#[test]
fn a_reading_that_still_justifies_the_pressure_renews_the_hold() {
    let mut c = three_tiers(cfg());
    c.update(&lag(100.0), 0); // pressure 0.5
    c.update(&lag(95.0), 900 * MS); // 95 + 10 hysteresis >= 100: still justified
    c.update(&lag(0.0), 1500 * MS);
    assert!(approx(c.pressure(), 0.5), "hold renewed at 900 ms runs to 1900 ms");
    c.update(&lag(0.0), 1900 * MS);
    assert!(approx(c.pressure(), 0.5));
    c.update(&lag(0.0), 2100 * MS);
    assert!(approx(c.pressure(), 0.4));
}

#[test]
fn hysteresis_band_does_not_flap_around_the_threshold() {
    let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, ..cfg() });
    c.update(&lag(100.0), 0);
    assert_eq!(c.scale(2), 0.0);
    // Oscillating within 10 ms below the level that set the pressure changes nothing.
    for i in 1..50u64 {
        let l = if i % 2 == 0 { 91.0 } else { 100.0 };
        assert!(!c.update(&lag(l), i * MS), "flapped at step {i}");
    }
    // 89 ms: release level ramp(99) = 0.49 -> falls to it at once (no hold, no recovery time).
    c.update(&lag(89.0), 60 * MS);
    assert!(approx(c.pressure(), 0.49));
    assert!(approx(c.scale(2), 0.02));
}

#[test]
fn recovery_cannot_drop_below_what_the_current_lag_still_asks_for() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    // Long after the hold, lag at 80 ms (release level ramp(90) = 0.4): recovery stops at 0.4.
    c.update(&lag(80.0), 10_000 * MS);
    assert!(approx(c.pressure(), 0.4));
    c.update(&lag(80.0), 20_000 * MS);
    assert!(approx(c.pressure(), 0.4));
}

fn integral_cfg() -> ShedConfig {
    ShedConfig { integral_ms: 1000.0, ..cfg() }
}

#[test]
fn the_integral_part_pushes_a_lag_that_stays_above_the_target() {
    let mut c = three_tiers(integral_cfg());
    // 75 ms, a quarter of the way from target to critical: 0.25 at once (proportional) ...
    c.update(&lag(75.0), 0);
    assert!(approx(c.pressure(), 0.25));
    // ... while the integral grows by 0.25 per second: it takes over after 1 s.
    for i in 1..=20 {
        c.update(&lag(75.0), i * 100 * MS);
    }
    assert!(approx(c.pressure(), 0.5), "{}", c.pressure());
    assert_eq!(c.scales(), &[1.0, 1.0, 0.0]);
    for i in 21..=40 {
        c.update(&lag(75.0), i * 100 * MS);
    }
    assert_eq!(c.pressure(), 1.0, "a throttle that does not bring the lag down is pushed to full");
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    assert_eq!(c.cause(), Cause::Lag);
    assert_eq!(c.episodes(), 1);
    // Healthy again: the proportional part is held 1 s then recovers; the integral drains at the
    // recovery rate (1/2000 per ms) from the first healthy reading.
    c.update(&lag(0.0), 4100 * MS);
    c.update(&lag(0.0), 5100 * MS);
    // integral 1 - 1100/2000 = 0.45; proportional 0.25 held to 5000, then 0.2.
    assert!(approx(c.pressure(), 0.45), "{}", c.pressure());
    c.update(&lag(0.0), 6100 * MS);
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn short_spikes_on_a_healthy_loop_do_not_accumulate() {
    let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 500.0, ..integral_cfg() });
    let mut t = 0;
    let mut peak: f64 = 0.0;
    // 10 s of: 50 ms at 80 ms of lag, then 950 ms at 2 ms.
    for _ in 0..10 {
        for _ in 0..5 {
            c.update(&lag(80.0), t * MS);
            peak = peak.max(c.pressure());
            t += 10;
        }
        for _ in 0..95 {
            c.update(&lag(2.0), t * MS);
            t += 10;
        }
    }
    assert!(peak < 0.4, "peak {peak}");
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn the_integral_counts_at_most_100_ms_of_a_gap() {
    let mut c = three_tiers(integral_cfg());
    c.update(&lag(0.0), 0);
    // 10 s without an update, then a reading at 100 ms: the gap adds at most 100 ms worth of 0.5
    // per second to the integral, which stays below the proportional 0.5.
    c.update(&lag(100.0), 10_000 * MS);
    assert!(approx(c.pressure(), 0.5));
    c.update(&lag(100.0), 11_000 * MS);
    assert!(approx(c.pressure(), 0.5), "integral 0.1: still below the proportional 0.5");
    for i in 1..=10 {
        c.update(&lag(100.0), (11_000 + i * 100) * MS);
    }
    assert!(approx(c.pressure(), 0.6), "{}", c.pressure());
}

#[test]
fn the_integral_does_not_run_at_or_below_the_target() {
    let mut c = three_tiers(integral_cfg());
    for i in 0..100 {
        c.update(&lag(50.0), i * 100 * MS);
    }
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn a_recovery_that_lets_the_lag_back_over_the_target_halves_what_is_admitted() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(0.0), 500 * MS); // the pressure brought the lag under the target
    c.update(&lag(0.0), 1400 * MS); // hold over at 1000 ms, 400 ms of recovery
    assert!(approx(c.pressure(), 0.8));
    // 65 ms: above target + hysteresis (60), below the release level: admitted 0.2 -> 0.1.
    assert!(c.update(&lag(65.0), 1500 * MS));
    assert!(approx(c.pressure(), 0.9));
    assert!(approx(c.scale(1), 0.2));
    assert_eq!(c.scale(2), 0.0);
    assert_eq!(c.cause(), Cause::Lag);
    assert_eq!(c.episodes(), 1);
    // Held again for hold_ms from the cut.
    c.update(&lag(0.0), 2500 * MS);
    assert!(approx(c.pressure(), 0.9));
    // Below the level of the relapse the recovery runs 4x slower: 400 ms take 0.05, not 0.2.
    c.update(&lag(0.0), 2900 * MS);
    assert!(approx(c.pressure(), 0.85));
    // Recovered fully (0.85 * 8000 ms), the relapse is forgotten: the next episode recovers at
    // the normal rate.
    c.update(&lag(0.0), 9700 * MS);
    assert_eq!(c.pressure(), 0.0);
    c.update(&lag(150.0), 10_000 * MS);
    c.update(&lag(0.0), 11_000 * MS);
    c.update(&lag(0.0), 11_400 * MS);
    assert!(approx(c.pressure(), 0.8));
    assert_eq!(c.episodes(), 2);
}

#[test]
fn no_halving_within_the_hysteresis_or_for_a_lag_that_never_went_under() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(0.0), 500 * MS);
    c.update(&lag(0.0), 1400 * MS);
    // 60 ms is target + hysteresis, not above it: the recovery goes on (0.8 - 0.05).
    c.update(&lag(60.0), 1500 * MS);
    assert!(approx(c.pressure(), 0.75));
    // A lag that stayed above the target since the pressure rose: plain recovery, no halving
    // (ramp(65 + 10) = 0.25 is the floor).
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(65.0), 1400 * MS);
    assert!(approx(c.pressure(), 0.8));
    c.update(&lag(65.0), 1500 * MS);
    assert!(approx(c.pressure(), 0.75));
}

#[test]
fn a_rise_after_the_lag_went_under_rearms_only_once_it_goes_under_again() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(0.0), 500 * MS);
    c.update(&lag(0.0), 1400 * MS);
    c.update(&lag(65.0), 1500 * MS); // halved: 0.9, held to 2500 ms
                                     // Still above the target when the hold ends: recovery, not another halving.
    c.update(&lag(65.0), 2500 * MS);
    c.update(&lag(65.0), 2900 * MS);
    assert!(approx(c.pressure(), 0.85), "0.9 - 400 ms at the slowed rate");
    // Under the target, then back above: halved again.
    c.update(&lag(40.0), 3000 * MS);
    c.update(&lag(65.0), 3100 * MS);
    assert!(approx(c.pressure(), 1.0 - (1.0 - (0.85 - 0.1 / 8.0)) / 2.0));
}

#[test]
fn rising_again_during_recovery_is_immediate() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(0.0), 1000 * MS);
    c.update(&lag(0.0), 2000 * MS);
    assert!(approx(c.pressure(), 0.5));
    c.update(&lag(140.0), 2001 * MS);
    assert!(approx(c.pressure(), 0.9));
    // And the hold restarts from that reading.
    c.update(&lag(0.0), 3000 * MS);
    assert!(approx(c.pressure(), 0.9));
    c.update(&lag(0.0), 3101 * MS);
    assert!(approx(c.pressure(), 0.85));
    assert_eq!(c.episodes(), 1, "one episode: pressure never reached zero");
}

fn filtered() -> ShedConfig {
    ShedConfig { confirm_ms: 30.0, integral_ms: 1000.0, ..cfg() }
}

#[test]
fn one_slow_tick_and_its_draining_backlog_do_not_start_shedding() {
    let mut c = three_tiers(filtered());
    c.update(&lag(2.0), 0);
    // One 120 ms tick, read for 40 ms, then the backlog drains: the lag falls from its peak.
    for (t, l) in [(10, 120.0), (20, 120.0), (50, 120.0), (60, 90.0), (100, 70.0), (130, 55.0), (150, 20.0)] {
        c.update(&lag(l), t * MS);
        assert_eq!(c.pressure(), 0.0, "at {t} ms");
    }
    assert_eq!(c.episodes(), 0);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
}

#[test]
fn a_lag_still_rising_after_confirm_ms_sheds_at_once() {
    let mut c = three_tiers(filtered());
    c.update(&lag(2.0), 0);
    // A loop falling behind: the lag keeps rising past its peak (the in-band estimate grows with
    // every request of a long loop iteration).
    c.update(&lag(60.0), 10 * MS);
    c.update(&lag(70.0), 20 * MS);
    c.update(&lag(80.0), 39 * MS);
    assert_eq!(c.pressure(), 0.0, "29 ms into the excursion: not yet");
    c.update(&lag(80.0), 40 * MS);
    assert_eq!(c.pressure(), 0.0, "30 ms in, but not rising past 80");
    c.update(&lag(100.0), 41 * MS);
    assert!(approx(c.pressure(), 0.5), "{}", c.pressure());
    assert_eq!(c.episodes(), 1);
    // Once shedding, every reading counts at once (no filter): a rise is applied immediately.
    c.update(&lag(140.0), 42 * MS);
    assert!(approx(c.pressure(), 0.9));
}

#[test]
fn the_excursion_ends_once_the_lag_is_below_the_target_by_the_hysteresis() {
    let mut c = three_tiers(filtered());
    c.update(&lag(60.0), 0);
    // Dips to between target - hysteresis and the target keep the excursion ...
    c.update(&lag(45.0), 20 * MS);
    c.update(&lag(61.0), 30 * MS);
    assert!(c.pressure() > 0.0, "the excursion began at 0 ms and is rising at 30 ms");
    let mut c = three_tiers(filtered());
    c.update(&lag(60.0), 0);
    // ... a drop below 40 ms ends it, and the next one starts afresh.
    c.update(&lag(39.0), 20 * MS);
    c.update(&lag(61.0), 30 * MS);
    c.update(&lag(62.0), 50 * MS);
    assert_eq!(c.pressure(), 0.0, "20 ms into the new excursion");
    c.update(&lag(63.0), 60 * MS);
    assert!(c.pressure() > 0.0);
}

#[test]
fn an_unconfirmed_excursion_adds_nothing_to_the_integral() {
    let mut c = three_tiers(filtered());
    // A lag steady at 100 ms for 1 s (never rising past its first reading): the integral would
    // have reached 0.5; filtered, nothing.
    for i in 0..=100 {
        c.update(&lag(100.0), i * 10 * MS);
    }
    assert_eq!(c.pressure(), 0.0);
    // One reading past the peak, and the proportional part applies.
    c.update(&lag(100.5), 1001 * MS);
    assert!(approx(c.pressure(), 0.505));
}

#[test]
fn the_filter_applies_afresh_after_an_episode_but_not_to_heap_or_stall() {
    let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, heap_ratio: Some(0.8), ..filtered() });
    c.update(&lag(60.0), 0);
    c.update(&lag(70.0), 30 * MS);
    assert!(c.pressure() > 0.0);
    c.update(&lag(0.0), 40 * MS);
    assert_eq!(c.pressure(), 0.0);
    c.update(&lag(90.0), 50 * MS);
    assert_eq!(c.pressure(), 0.0, "a new excursion is filtered again");
    c.update(&ShedInput { stalled: true, ..lag(0.0) }, 60 * MS);
    assert_eq!(c.pressure(), 1.0, "a stall is not filtered");
    c.update(&lag(0.0), 70 * MS);
    c.update(&ShedInput { heap_ratio: 0.85, ..lag(0.0) }, 80 * MS);
    assert!(c.pressure() > 0.5, "nor is the heap");
}

#[test]
fn a_stall_sheds_every_unprotected_tier_at_once() {
    let mut c = three_tiers(cfg());
    c.update(&lag(0.0), 0);
    assert!(c.update(&ShedInput { stalled: true, ..lag(0.0) }, MS));
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    assert_eq!(c.cause(), Cause::Stall);
    // The stall clears: still held, then recovers like any other episode.
    c.update(&lag(0.0), 500 * MS);
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    c.update(&lag(0.0), 5000 * MS);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
}

#[test]
fn heap_pressure_sheds_at_least_the_lowest_tier() {
    let mut c = three_tiers(ShedConfig { heap_ratio: Some(0.8), ..cfg() });
    c.update(&ShedInput { heap_ratio: 0.79, ..lag(0.0) }, 0);
    assert_eq!(c.pressure(), 0.0);
    c.update(&ShedInput { heap_ratio: 0.8 + 1e-12, ..lag(0.0) }, MS);
    assert_eq!(c.scale(2), 0.0);
    assert!(c.scale(1) > 0.999_999);
    assert_eq!(c.cause(), Cause::Heap);
    c.update(&ShedInput { heap_ratio: 0.9, ..lag(0.0) }, 2 * MS);
    assert!(approx(c.pressure(), 0.75));
    c.update(&ShedInput { heap_ratio: 1.0, ..lag(0.0) }, 3 * MS);
    assert_eq!(c.scales(), &[1.0, 0.0, 0.0]);
    // Heap at 0.79 is inside the 2% hysteresis band: still held after the hold time.
    c.update(&ShedInput { heap_ratio: 0.79, ..lag(0.0) }, 10_000 * MS);
    assert!(c.pressure() >= 0.5);
    c.update(&ShedInput { heap_ratio: 0.5, ..lag(0.0) }, 20_000 * MS);
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn the_cause_follows_the_signal_that_holds_the_pressure() {
    let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, heap_ratio: Some(0.8), ..cfg() });
    c.update(&ShedInput { stalled: true, ..lag(0.0) }, 0);
    assert_eq!(c.cause(), Cause::Stall);
    c.update(&ShedInput { heap_ratio: 0.81, ..lag(0.0) }, MS);
    assert_eq!(c.cause(), Cause::Heap);
    assert!(c.pressure() > 0.5 && c.pressure() < 0.6);
    c.update(&ShedInput { heap_ratio: 0.0, ..lag(0.0) }, 2 * MS);
    assert_eq!(c.cause(), Cause::None);
}

#[test]
fn heap_can_be_ignored() {
    let mut c = three_tiers(ShedConfig { heap_ratio: None, ..cfg() });
    c.update(&ShedInput { heap_ratio: 1.0, ..lag(0.0) }, 0);
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn larger_of_lag_and_heap_wins() {
    let mut c = three_tiers(ShedConfig { heap_ratio: Some(0.9), ..cfg() });
    c.update(&ShedInput { heap_ratio: 0.95, ..lag(140.0) }, 0);
    assert!(approx(c.pressure(), 0.9));
    assert_eq!(c.cause(), Cause::Lag);
}

#[test]
fn nan_lag_never_sheds() {
    let mut c = three_tiers(cfg());
    c.update(&lag(f64::NAN), 0);
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn a_clock_that_goes_back_is_treated_as_no_time_passing() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 5000 * MS);
    c.update(&lag(0.0), 1000 * MS);
    assert_eq!(c.pressure(), 1.0);
}

#[test]
fn a_long_quiet_gap_recovers_fully_in_one_update() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.update(&lag(0.0), 60_000 * MS);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
}

#[test]
fn zero_hold_and_zero_recovery_follow_the_signal() {
    let mut c = three_tiers(ShedConfig { hold_ms: 0.0, recovery_ms: 0.0, hysteresis_ms: 0.0, ..cfg() });
    c.update(&lag(150.0), 0);
    c.update(&lag(75.0), MS);
    assert!(approx(c.pressure(), 0.25));
    c.update(&lag(0.0), 2 * MS);
    assert_eq!(c.pressure(), 0.0);
    c.update(&lag(100.0), 3 * MS);
    assert_eq!(c.episodes(), 2);
}

#[test]
fn relative_thresholds_sit_above_the_learned_idle_baseline() {
    let mut c = three_tiers(ShedConfig { relative: true, max_baseline_ms: 50.0, baseline_tau_ms: 1000.0, ..cfg() });
    // A loop whose idle lag is 20 ms (a slow VM): absolute 50 ms would be close; relative is 70 ms.
    c.update(&lag(20.0), 0);
    assert_eq!(c.baseline_ms(), 20.0, "the first idle sample seeds the baseline");
    for i in 1..=100 {
        c.update(&lag(20.0), i * 10 * MS);
    }
    assert!(approx(c.baseline_ms(), 20.0));
    assert_eq!(c.thresholds_ms(), (70.0, 170.0));
    // A busy loop (ELU above idleElu) at 60 ms: below 20 + 50, so no shedding, and not learned from.
    c.update(&ShedInput { elu: 0.9, ..lag(60.0) }, 1010 * MS);
    assert_eq!(c.pressure(), 0.0, "60 ms is below 20 + 50");
    c.update(&lag(120.0), 1020 * MS);
    assert!(approx(c.pressure(), 0.5));
}

#[test]
fn baseline_learns_slowly_and_only_from_idle_samples() {
    let mut c = three_tiers(ShedConfig { relative: true, max_baseline_ms: 30.0, baseline_tau_ms: 1000.0, ..cfg() });
    c.update(&lag(0.0), 0);
    // One time constant at 10 ms lag: baseline goes 1 - 1/e of the way.
    c.update(&lag(10.0), 1000 * MS);
    assert!(approx(c.baseline_ms(), 10.0 * (1.0 - (-1.0f64).exp())));
    // Busy samples (ELU above idle_elu) are not learned from.
    let b = c.baseline_ms();
    c.update(&ShedInput { elu: 0.9, ..lag(40.0) }, 2000 * MS);
    assert_eq!(c.baseline_ms(), b);
    // Nor samples above the current target; and the baseline is capped.
    for i in 3..200 {
        c.update(&lag(45.0), i * 1000 * MS);
    }
    assert_eq!(c.baseline_ms(), 30.0);
    assert_eq!(c.thresholds_ms(), (80.0, 180.0));
}

#[test]
fn baseline_does_not_learn_while_shedding_or_stalled() {
    let mut c = three_tiers(ShedConfig { relative: true, baseline_tau_ms: 0.0, ..cfg() });
    c.update(&lag(5.0), 0);
    c.update(&lag(100.0), MS);
    assert!(c.pressure() > 0.0);
    c.update(&lag(1.0), 2 * MS);
    assert_eq!(c.baseline_ms(), 5.0);
    c.reset();
    c.update(&ShedInput { stalled: true, ..lag(3.0) }, 3 * MS);
    assert_eq!(c.baseline_ms(), 0.0);
}

#[test]
fn absolute_mode_has_no_baseline() {
    let mut c = three_tiers(cfg());
    c.update(&lag(30.0), 0);
    assert_eq!(c.baseline_ms(), 0.0);
    assert_eq!(c.thresholds_ms(), (50.0, 150.0));
}

#[test]
fn reset_restores_full_refill() {
    let mut c = three_tiers(cfg());
    c.update(&lag(150.0), 0);
    c.reset();
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);
    assert_eq!(c.pressure(), 0.0);
}

#[test]
fn turn_budget_sheds_raise_the_turn_part_lowest_tier_first_then_it_recovers_after_the_hold() {
    let mut c = three_tiers(ShedConfig { integral_ms: 0.0, ..cfg() });
    let (t, _) = c.thresholds_ms();
    c.update(&lag(t + 1.0), 0); // an episode starts with a little pressure
    let start = c.pressure();
    assert!(start > 0.0 && start < 0.05);
    // The turn budget now holds the lag at 5 ms but sheds in every 1 ms update: +1.0 per 1000 ms.
    let busy = |ms: f64| ShedInput { busy: 1.0, ..lag(ms) };
    // With idle time left on the loop, turn sheds only trimmed bursts: nothing rises.
    for ms in 1..=100u64 {
        c.note_turn_shed();
        c.update(&ShedInput { busy: 0.9, ..lag(5.0) }, ms * MS);
    }
    assert_eq!(c.pressure(), start);
    for ms in 101..=700u64 {
        c.note_turn_shed();
        c.update(&busy(5.0), ms * MS);
    }
    assert!((c.pressure() - 0.6).abs() < 1e-6, "{}", c.pressure());
    assert_eq!(c.scales()[2], 0.0, "background (lowest) first");
    assert!(c.scales()[1] > 0.0 && c.scales()[1] < 1.0, "then standard: {:?}", c.scales());
    assert_eq!(c.scales()[0], 1.0);
    // No sheds: held for hold_ms after the last one, then down at the recovery rate.
    c.update(&busy(5.0), (700 + 999) * MS);
    assert!((c.pressure() - 0.6).abs() < 1e-6);
    c.update(&busy(5.0), (700 + 1000 + 600) * MS);
    assert!(c.pressure() < 0.6 && c.pressure() > 0.0, "{}", c.pressure());
    c.update(&busy(5.0), 10_000 * MS);
    assert_eq!(c.pressure(), 0.0);
    // Outside an episode a turn shed (there is none: the gate only sheds by turn under pressure)
    // would not start one.
    c.note_turn_shed();
    c.update(&busy(5.0), 10_001 * MS);
    assert_eq!(c.pressure(), 0.0);
}

/// The lag at `ms` on a loop that was busy `busy` of the last ~100 ms.
fn busy_lag(busy: f64, ms: f64) -> ShedInput {
    ShedInput { busy, ..lag(ms) }
}

#[test]
fn spare_time_under_the_target_releases_every_part_four_times_faster_without_its_hold() {
    // Proportional: lag 100 on 50..150 asks for 0.5 (background at zero).
    let mut c = three_tiers(cfg());
    c.update(&busy_lag(1.0, 100.0), 0);
    assert!(approx(c.pressure(), 0.5));
    // The lag falls to 5 ms (more than the 10 ms hysteresis under the target) and the loop was idle
    // half the time: no hold, down at 4 / 2000 ms per ms: 0.1 per 50 ms, from the last update on.
    c.update(&busy_lag(0.5, 5.0), 100 * MS);
    assert!(approx(c.pressure(), 0.3), "{}", c.pressure());
    c.update(&busy_lag(0.5, 5.0), 200 * MS);
    assert!(approx(c.pressure(), 0.1), "{}", c.pressure());
    c.update(&busy_lag(0.5, 5.0), 250 * MS);
    assert_eq!(c.pressure(), 0.0);
    assert_eq!(c.scales(), &[1.0, 1.0, 1.0]);

    // Not spare: a loop at 0.9 busy or more, a lag within the hysteresis under the target, or no
    // figure for busy (NaN) keep the hold (1000 ms) and the recovery rate.
    for input in [busy_lag(0.9, 5.0), busy_lag(0.5, 41.0), lag(5.0)] {
        let mut c = three_tiers(cfg());
        c.update(&busy_lag(1.0, 100.0), 0);
        c.update(&input, 999 * MS);
        assert!(approx(c.pressure(), 0.5), "{input:?}: {}", c.pressure());
        c.update(&input, 1100 * MS);
        assert!(approx(c.pressure(), 0.45), "{input:?}: {}", c.pressure());
    }

    // Integral: 60 ms (a tenth of the range) for 100 ms at integral_ms 1000 adds 0.01; it drains at
    // 10 ms / 2000 ms per update of 10 ms without spare time, four times that with.
    let run = |busy: f64| {
        let mut c = three_tiers(ShedConfig { integral_ms: 1000.0, ..cfg() });
        c.update(&busy_lag(1.0, 60.0), 0);
        c.update(&busy_lag(1.0, 60.0), 100 * MS); // integral +0.01, proportional 0.1
        let integral = c.integral;
        c.update(&busy_lag(busy, 5.0), 110 * MS);
        (integral, c.integral)
    };
    let (before, slow) = run(1.0);
    assert!(approx(before, 0.01), "{before}");
    assert!(approx(slow, 0.01 - 10.0 / 2000.0), "{slow}");
    let (_, fast) = run(0.5);
    assert_eq!(fast, 0.0, "drained at 4 x 10 / 2000 = 0.02 > 0.01");

    // Turn part: raised by turn sheds on a saturated loop, then spare time releases it at once
    // instead of holding it for hold_ms.
    let mut c = three_tiers(cfg());
    c.update(&busy_lag(1.0, 51.0), 0);
    for ms in 1..=500u64 {
        c.note_turn_shed();
        c.update(&busy_lag(1.0, 5.0), ms * MS);
    }
    assert!(approx(c.pressure(), 0.5), "{}", c.pressure());
    c.update(&busy_lag(0.5, 5.0), 600 * MS);
    assert!(approx(c.pressure(), 0.3), "{}", c.pressure());
}

#[test]
fn invalid_configs_name_the_field() {
    let bad = |c: ShedConfig| ShedController::new(c, &[false]).unwrap_err().field;
    assert_eq!(bad(ShedConfig { target_lag_ms: f64::NAN, ..cfg() }), "targetLagMs");
    assert_eq!(bad(ShedConfig { target_lag_ms: -1.0, ..cfg() }), "targetLagMs");
    assert_eq!(bad(ShedConfig { critical_lag_ms: 50.0, ..cfg() }), "criticalLagMs");
    assert_eq!(bad(ShedConfig { critical_lag_ms: f64::INFINITY, ..cfg() }), "criticalLagMs");
    assert_eq!(bad(ShedConfig { hold_ms: -0.5, ..cfg() }), "holdMs");
    assert_eq!(bad(ShedConfig { recovery_ms: f64::NAN, ..cfg() }), "recoveryMs");
    assert_eq!(bad(ShedConfig { hysteresis_ms: -1.0, ..cfg() }), "hysteresisMs");
    assert_eq!(bad(ShedConfig { heap_ratio: Some(1.0), ..cfg() }), "heapRatio");
    assert_eq!(bad(ShedConfig { heap_ratio: Some(0.0), ..cfg() }), "heapRatio");
    assert_eq!(bad(ShedConfig { idle_elu: 2.0, ..cfg() }), "idleElu");
    assert_eq!(bad(ShedConfig { confirm_ms: -1.0, ..cfg() }), "confirmMs");
    assert_eq!(bad(ShedConfig { turn_budget_ms: f64::NAN, ..cfg() }), "turnBudgetMs");
    assert_eq!(bad(ShedConfig { turn_budget_ms: -1.0, ..cfg() }), "turnBudgetMs");
    let e = ShedController::new(ShedConfig { critical_lag_ms: 10.0, ..cfg() }, &[false]).unwrap_err();
    assert_eq!(e.to_string(), "criticalLagMs must be greater than targetLagMs");
}

#[test]
fn lag_signal_selection() {
    let s = crate::core::health::HealthSample {
        latest_lag_ms: 7.0,
        ewma_lag_ms: 3.0,
        p99_lag_ms: 11.0,
        elu: 0.25,
        heap_used: 1,
        heap_limit: 4,
        stalled: true,
        ticks: 9,
    };
    assert_eq!(ShedInput::from_sample(&s, LagSignal::Latest).lag_ms, 7.0);
    assert_eq!(ShedInput::from_sample(&s, LagSignal::Ewma).lag_ms, 3.0);
    assert_eq!(ShedInput::from_sample(&s, LagSignal::P99).lag_ms, 11.0);
    let m = ShedInput::from_sample(&s, LagSignal::Max);
    assert_eq!((m.lag_ms, m.heap_ratio, m.elu, m.stalled), (7.0, 0.25, 0.25, true));
    assert_eq!(LagSignal::parse("ewma"), Some(LagSignal::Ewma));
    assert_eq!(LagSignal::parse("mean"), None);
}

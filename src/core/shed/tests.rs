use super::*;

pub(super) const MS: u64 = 1_000_000;

pub(super) fn lag(ms: f64) -> ShedInput {
    ShedInput { lag_ms: ms, ..Default::default() }
}

/// critical (protected), standard, background, as in the default gatekeeper.
pub(super) fn three_tiers(cfg: ShedConfig) -> ShedController {
    ShedController::new(cfg, &[true, false, false]).unwrap()
}

/// Proportional only (no integral term) unless a test turns it on.
pub(super) fn cfg() -> ShedConfig {
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

pub(super) fn approx(a: f64, b: f64) -> bool {
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

//! The spike filter, the stall and heap signals, and which signal is the cause.
use super::tests::{approx, cfg, lag, three_tiers, MS};
use super::*;

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
    assert_eq!(LagSignal::from_name("ewma"), Some(LagSignal::Ewma));
    assert_eq!(LagSignal::from_name("mean"), None);
}

//! The shed controller: turns loop health into a refill scale per tier.
//!
//! One number drives it, the *pressure* `p` in `0..=1`. Each health signal asks for a pressure:
//! - lag: 0 at `target_lag_ms`, rising linearly to 1 at `critical_lag_ms` (absolute, or above the
//!   measured idle baseline when `relative`);
//! - heap: once used/limit passes `heap_ratio`, at least one tier's worth, rising to 1 at a full heap;
//! - stall (the loop has not ticked for longer than the watchdog's threshold): 1 at once.
//!
//! The pressure is spread over the unprotected tiers from the lowest up: with `n` sheddable tiers the
//! lowest one goes from full refill to zero while `p` goes from 0 to `1/n`, then the next one up, and so
//! on; at `p = 1` every unprotected tier is at zero. Protected tiers always keep scale 1.
//!
//! Dynamics: the pressure is the larger of two parts.
//! - The proportional part follows the signals: a rise is applied at once (shedding must start
//!   immediately); a fall only once the signal has dropped `hysteresis_ms` below the level that set
//!   it, no earlier than `hold_ms` after it was last justified, and then gradually: at most
//!   `1 / recovery_ms` per millisecond (full shed to none in `recovery_ms`), the lowest tier last.
//!   A relapse — the pressure had brought the lag under the target, and the recovery lets it back
//!   above by more than `hysteresis_ms` — halves what the proportional part admits (multiplicative
//!   shed), holds again, and makes the rest of the episode's recovery below that level
//!   `RELAPSE_SLOWDOWN` times slower: a sustained overload settles near the pressure it needs
//!   instead of swinging between full shedding and a loop overloaded again (a ~1.7 s swing up to
//!   60-90 ms of lag in bench:overload before this).
//! - The integral part grows while the lag is above the target, by the lag's excess (as a fraction of
//!   the target..critical range) per `integral_ms`, and drains at the recovery rate while the lag is
//!   more than `hysteresis_ms` below the target. A partial throttle that does not bring the lag down
//!   (a tier whose budget is far above what it is offered, say) is pushed further until it does, so
//!   the loop does not settle above its target under sustained overload; a short spike on a healthy
//!   loop adds little, and it drains away.
//! - The turn part follows the gate's turn-budget sheds on a saturated loop (see `controller.rs`).
//!
//! Fast release: while the lag is more than `hysteresis_ms` under the target and the loop had spare
//! time over the last ~100 ms (`busy` below `SPARE_BUSY`), the pressure is too high for the load, so
//! every part recovers `SPARE_SPEEDUP` times faster and without waiting for its hold. Without it the
//! onset's lag spike (pressure 1, both unprotected tiers at zero) held for a full `hold_ms` and then
//! took the recovery time to come down while the loop ran the critical tier alone (about a third of
//! its capacity); and the end of an overload kept shedding well into the load after it.
//!
//! Files: `config.rs` (options, defaults, validation), `controller.rs` (the pressure and its parts),
//! `spike.rs` (the spike filter).
mod config;
mod controller;
#[cfg(test)]
mod signal_tests;
mod spike;
#[cfg(test)]
mod tests;

pub use config::{LagSignal, ShedConfig, ShedConfigError};
pub use controller::ShedController;

use crate::core::names::named_enum;

/// What the controller reads: one plain copy of the signals, in the units of `HealthSample`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShedInput {
    pub lag_ms: f64,
    pub heap_ratio: f64,
    /// Event-loop utilisation over the sampler's window (relative mode learns its baseline from it).
    pub elu: f64,
    /// Utilisation of the last ~100 ms (the gate's own estimate; `elu` where it has none): whether
    /// turn-budget sheds mean overload (see the turn part), and whether the loop has spare time (the
    /// fast release). NaN: not measured (neither then).
    pub busy: f64,
    pub stalled: bool,
}

impl Default for ShedInput {
    fn default() -> Self {
        ShedInput { lag_ms: 0.0, heap_ratio: 0.0, elu: 0.0, busy: f64::NAN, stalled: false }
    }
}

impl ShedInput {
    pub fn from_sample(s: &crate::core::health::HealthSample, signal: LagSignal) -> ShedInput {
        ShedInput { lag_ms: signal.of(s), heap_ratio: s.heap_ratio(), elu: s.elu, busy: s.elu, stalled: s.stalled }
    }
}

named_enum! {
    /// Why the controller holds its current pressure (for stats and diagnostics).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Cause: u8 {
        None = "none",
        Lag = "lag",
        Heap = "heap",
        Stall = "stall",
    }
}

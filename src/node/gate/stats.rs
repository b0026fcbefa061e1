//! The gate's figures as JS reads them (`GateHandle::stats`, `perKeyQuotas`).
use napi_derive::napi;

#[napi(object)]
pub struct GateConcurrencyStats {
    pub enabled: bool,
    pub shadow: bool,
    pub limit: u32,
    pub in_flight: u32,
    pub waits: f64,
    pub shadow_waits: f64,
    pub baseline_ms: f64,
    pub typical_ms: f64,
    pub throughput: f64,
    pub queueing: bool,
    pub signal: f64,
    /// 0..1: from 80% of the limit in use (waiting requests included) to all of it.
    pub pressure: f64,
    /// Slots held past the count's horizon (10 s), no longer counted.
    pub long_lived: f64,
    /// Baselines measured at a low concurrency.
    pub probes: f64,
}

#[napi(object)]
pub struct GateTierStats {
    pub name: String,
    pub protected: bool,
    pub admitted: f64,
    pub shed: f64,
    /// Of `shed`: by the turn budget.
    pub turn_shed: f64,
    /// Refused because the tier's pool was empty while the loop was healthy (503).
    pub tier_full: f64,
    /// Refused by the key's own quota (429).
    pub rate_limited: f64,
    pub refill_scale: f64,
    /// Shadow mode: admitted, and the controller would have shed them.
    pub shadow_shed: f64,
}

#[napi(object)]
pub struct GateStats {
    pub tiers: Vec<GateTierStats>,
    pub lag_ms: f64,
    pub ewma_lag_ms: f64,
    pub p99_lag_ms: f64,
    /// The lag the controller last acted on (signal, or the in-band estimate when larger).
    pub controller_lag_ms: f64,
    /// The loop's utilisation of the last ~100 ms the controller last acted on (NaN: not measured).
    pub busy: f64,
    /// The pressure's parts: proportional (lag, heap, stall), integral (lag held above the target),
    /// turn (turn-budget sheds on a saturated loop); `pressure` is the largest.
    pub pressure_lag: f64,
    pub pressure_integral: f64,
    pub pressure_turn: f64,
    pub elu: f64,
    pub heap_used: f64,
    pub heap_limit: f64,
    pub stalled: bool,
    pub pressure: f64,
    pub cause: String,
    pub episodes: f64,
    pub baseline_ms: f64,
    pub target_lag_ms: f64,
    pub critical_lag_ms: f64,
    pub injected: bool,
    pub concurrency: GateConcurrencyStats,
    /// Shadow mode, and the share of its overload decisions enforced.
    pub shadow: bool,
    pub shadow_enforce_percent: f64,
}

/// A tier's per-key quota (capacity 0: the tier keeps no per-key buckets).
#[napi(object)]
pub struct KeyQuota {
    pub capacity: f64,
    pub refill_per_sec: f64,
}

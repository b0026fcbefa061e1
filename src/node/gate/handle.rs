//! The `#[napi]` class `GateHandle`: construction, binding the hot path, stats, the concurrency
//! limit's slots, and the health test seam. Off the hot path.
use super::hot::{decide, gate_now_ns, Bound, RESULT_LEN};
use super::invalid;
use super::options::{config, shed_options, GateOptions, HealthInput};
use super::stats::{GateConcurrencyStats, GateStats, GateTierStats, KeyQuota};
use crate::core::gate::{check_cost, Gate, InlineRuns};
use crate::core::health::{HealthSample, LoopHealth};
use crate::node::lag::{acquire_thread_sampler_with, SamplerGuard};
use crate::node::ledger::LedgerHandle;
use crate::node::raw;
use crate::node::uv::{event_loop, idle_ns, UvLoop};
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use std::cell::UnsafeCell;
use std::sync::Arc;

#[napi]
pub struct GateHandle {
    pub(crate) gate: Arc<Gate>,
    pub(crate) loop_: *mut UvLoop,
    /// Keeps this thread's sampler running while the gate lives; `None` without a live sampler.
    pub(crate) guard: Option<SamplerGuard>,
    /// What `bind` gave `decide`, for a defense that decides in the same call (`DefenseHandle::bind_gate`).
    pub(crate) bound: parking_lot::Mutex<Option<Arc<Bound>>>,
}

#[napi]
impl GateHandle {
    /// `shed`: the gatekeeper's `shed` options (`gateConstants().shedDefaults` names them); `false`
    /// for `heapRatio` or `stallMs` turns that part off.
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, ledger: &LedgerHandle, options: GateOptions, shed: Object) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::new");
        let shed = unsafe { shed_options(env.raw(), shed.raw())? };
        let cfg = config(&options, &shed)?;
        check_cost(cfg.cost, ledger.inner.config()).map_err(invalid)?;
        let (guard, health) = if options.sampler {
            let guard = acquire_thread_sampler_with(env.raw(), shed.sampler)?;
            let health = guard.health().clone();
            (Some(guard), health)
        } else {
            (None, Arc::new(LoopHealth::default()))
        };
        let gate = Gate::new(ledger.inner.clone(), cfg, health).map_err(|e| invalid(format!("shed.{e}")))?;
        let loop_ = unsafe { event_loop(env.raw()) };
        Ok(GateHandle { gate: Arc::new(gate), loop_, guard, bound: parking_lot::Mutex::new(None) })
    }

    /// Defines the hot-path function `decide` and the Float64Array `result` on `target`.
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::bind");
        let bound =
            Arc::new(Bound { gate: self.gate.clone(), out: Box::new(UnsafeCell::new([0.0; RESULT_LEN])), loop_: self.loop_, inline: InlineRuns::default() });
        let (env, target) = (env.raw(), target.raw());
        unsafe {
            let out = bound.out.get() as *mut f64;
            raw::define_f64_view(env, target, c"result", out, RESULT_LEN, &bound)?;
            raw::define_fn(env, target, "decide", decide, bound.clone())?;
        }
        *self.bound.lock() = Some(bound);
        Ok(())
    }

    /// The state `decide` runs on (after `bind`).
    pub(crate) fn bound(&self) -> Option<Arc<Bound>> {
        self.bound.lock().clone()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> GateStats {
        let _panic = raw::throw_on_panic(&env, "GateHandle::stats");
        // Moved first: on an idle server no request moves the controller, and stats() must show the
        // decay its hold and recovery have made since the last request.
        let s = self.gate.stats_at(gate_now_ns(), unsafe { idle_ns(self.loop_) });
        let ledger = self.gate.ledger();
        let tiers = s
            .counters
            .iter()
            .enumerate()
            .map(|(t, c)| GateTierStats {
                name: ledger.tier_name(t).to_string(),
                protected: ledger.is_protected(t),
                admitted: c.admitted as f64,
                shed: c.shed as f64,
                turn_shed: c.turn_shed as f64,
                tier_full: c.tier_full as f64,
                rate_limited: c.key_limited as f64,
                refill_scale: s.scales[t],
                shadow_shed: c.shadow_shed as f64,
            })
            .collect();
        GateStats {
            tiers,
            lag_ms: s.health.latest_lag_ms,
            ewma_lag_ms: s.health.ewma_lag_ms,
            p99_lag_ms: s.health.p99_lag_ms,
            controller_lag_ms: s.input.lag_ms,
            busy: s.input.busy,
            pressure_lag: s.parts.0,
            pressure_integral: s.parts.1,
            pressure_turn: s.parts.2,
            elu: s.health.elu,
            heap_used: s.health.heap_used as f64,
            heap_limit: s.health.heap_limit as f64,
            stalled: s.health.stalled,
            pressure: s.pressure,
            cause: s.cause.as_str().to_string(),
            episodes: s.episodes as f64,
            baseline_ms: s.baseline_ms,
            target_lag_ms: s.thresholds_ms.0,
            critical_lag_ms: s.thresholds_ms.1,
            injected: s.injected,
            concurrency: {
                let (c, cfg) = (s.concurrency, &self.gate.config().concurrency);
                GateConcurrencyStats {
                    enabled: cfg.enabled,
                    shadow: self.gate.config().shadow.is_some(),
                    limit: c.limit,
                    in_flight: c.in_flight,
                    waits: c.waits as f64,
                    shadow_waits: c.shadow_waits as f64,
                    baseline_ms: c.baseline_ms,
                    typical_ms: c.typical_ms,
                    throughput: c.throughput,
                    queueing: c.queueing,
                    signal: c.signal,
                    pressure: c.pressure,
                    long_lived: c.long_lived as f64,
                    probes: c.probes as f64,
                }
            },
            shadow: self.gate.config().shadow.is_some(),
            shadow_enforce_percent: self.gate.config().shadow.unwrap_or(0.0),
        }
    }

    /// A slot taken in `epoch` comes back: its request finished `latencyMs` after it took it
    /// (negative: refused or abandoned after, no sample). `waiting`: requests waiting for a slot; returns how many of them
    /// may start now (their slots taken).
    #[napi(catch_unwind)]
    pub fn release_slot(&self, env: Env, epoch: f64, latency_ms: f64, waiting: f64) -> Result<u32> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::release_slot");
        let latency = (latency_ms.is_finite() && latency_ms >= 0.0).then_some((latency_ms * 1e6) as u64);
        Ok(self.gate.release(epoch as u64, latency, waiting_count(waiting)?, gate_now_ns()))
    }

    /// Slots for up to `waiting` requests without a release (the limit may have risen).
    #[napi(catch_unwind)]
    pub fn hand_over_slots(&self, env: Env, waiting: f64) -> Result<u32> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::hand_over_slots");
        Ok(self.gate.hand_over(waiting_count(waiting)?, gate_now_ns()))
    }

    /// The epoch of slots handed over now (given back with `releaseSlot`).
    #[napi(catch_unwind)]
    pub fn slot_epoch(&self, env: Env) -> f64 {
        let _panic = raw::throw_on_panic(&env, "GateHandle::slot_epoch");
        self.gate.slot_epoch() as f64
    }

    /// The users' signals (requests waiting downstream over its size, 0: none), their largest.
    #[napi(catch_unwind)]
    pub fn set_concurrency_signal(&self, env: Env, v: f64) {
        let _panic = raw::throw_on_panic(&env, "GateHandle::set_concurrency_signal");
        self.gate.set_concurrency_signal(v);
    }

    /// Test seam: the controller reads exactly these figures (and no in-band estimate) from now on,
    /// and moves on the next decision.
    #[napi(catch_unwind)]
    pub fn inject_health(&self, env: Env, h: HealthInput) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::inject_health");
        let num = |v: Option<f64>, name: &str| -> Result<f64> {
            let v = v.unwrap_or(0.0);
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(invalid(format!("{name} must be a finite number >= 0")))
            }
        };
        let lag = num(h.lag_ms, "lagMs")?;
        self.gate.inject_health(&HealthSample {
            latest_lag_ms: lag,
            ewma_lag_ms: h.ewma_lag_ms.map_or(Ok(lag), |v| num(Some(v), "ewmaLagMs"))?,
            p99_lag_ms: h.p99_lag_ms.map_or(Ok(lag), |v| num(Some(v), "p99LagMs"))?,
            elu: num(h.elu, "elu")?,
            heap_used: num(h.heap_used, "heapUsed")? as u64,
            heap_limit: num(h.heap_limit, "heapLimit")? as u64,
            stalled: h.stalled.unwrap_or(false),
            ticks: 1,
        });
        Ok(())
    }

    /// Ends an injection: reads the live sampler again (or idle health without one).
    #[napi(catch_unwind)]
    pub fn use_live_health(&self, env: Env) {
        let _panic = raw::throw_on_panic(&env, "GateHandle::use_live_health");
        let health = match &self.guard {
            Some(g) => g.health().clone(),
            None => Arc::new(LoopHealth::default()),
        };
        self.gate.use_health(health);
    }

    /// Moves the controller now (tests and `stats()` freshness), whatever the update interval.
    #[napi(catch_unwind)]
    pub fn update(&self, env: Env) -> bool {
        let _panic = raw::throw_on_panic(&env, "GateHandle::update");
        self.gate.update_now(gate_now_ns(), unsafe { idle_ns(self.loop_) })
    }

    /// Per tier, the per-key quota the ledger enforces (for the rate-limit policy header).
    #[napi(catch_unwind)]
    pub fn per_key_quotas(&self, env: Env) -> Vec<KeyQuota> {
        let _panic = raw::throw_on_panic(&env, "GateHandle::per_key_quotas");
        self.gate
            .ledger()
            .config()
            .iter()
            .map(|t| match &t.per_key {
                Some(pk) => KeyQuota { capacity: pk.capacity, refill_per_sec: pk.refill_per_sec },
                None => KeyQuota { capacity: 0.0, refill_per_sec: 0.0 },
            })
            .collect()
    }

    #[napi(catch_unwind)]
    pub fn reset_counters(&self, env: Env) {
        let _panic = raw::throw_on_panic(&env, "GateHandle::reset_counters");
        self.gate.reset_counters();
    }
}

/// A count of requests waiting for a slot, as JS gives it: below 0 is none (a JS count that went
/// negative must not wrap to four billion, each handed a slot while the loop is the bottleneck).
fn waiting_count(v: f64) -> Result<u32> {
    if !v.is_finite() {
        return Err(Error::new(Status::InvalidArg, format!("waiting must be a finite number, got {v}")));
    }
    Ok(v.clamp(0.0, f64::from(u32::MAX)) as u32)
}

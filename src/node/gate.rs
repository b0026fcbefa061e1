//! `GateHandle`: the napi face of `core::gate::Gate`, the gatekeeper's per-request decision.
//!
//! Construction, stats and the health test seam are ordinary `#[napi]`. The hot path is one raw
//! callback, `decide(sel, header, key)`, that `bind` defines on the JS gate object with the gate as its
//! data pointer: it reads the header and key into stack buffers, reads the thread's loop health, moves
//! the shed controller when due, debits the ledger, writes the details into a Float64Array (`result`)
//! and returns the verdict as a small integer. One crossing into Rust per request.
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::concurrency::{ConcurrencyConfig, Slot};
use crate::core::defense::FairShare;
use crate::core::gate::{check_cost, Decision, Gate, GateConfig, InlineRuns, OptionValue, ShedOptions, TierSource, Verdict, MAX_HEADER_LEN, SHED_OPTIONS};
use crate::core::health::{HealthSample, LoopHealth};
use crate::core::names::named_enum;
use crate::core::net::ipkey::IpKeyConfig;
use crate::core::shed::{Cause, LagSignal};
use crate::core::token::signature::TierSigner;
use crate::node::lag::{acquire_thread_sampler_with, current_turn, current_turn_age_ms, SamplerGuard};
use crate::node::ledger::{LedgerHandle, MAX_KEY_BYTES};
use crate::node::raw;
use crate::node::uv::{event_loop, idle_ns, UvLoop};
use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;
use std::cell::UnsafeCell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

named_enum! {
    /// The Float64Array `decide` fills: one figure per field, at the field's number. JS reads the
    /// numbers by name from `gateConstants().result`.
    #[derive(Clone, Copy)]
    enum R: u8 {
        Verdict = "VERDICT",
        Tier = "TIER",
        Source = "SOURCE",
        Remaining = "REMAINING",
        Limit = "LIMIT",
        RetryAfterMs = "RETRY_AFTER_MS",
        ResetMs = "RESET_MS",
        Scale = "SCALE",
        Pressure = "PRESSURE",
        LagMs = "LAG_MS",
        Cause = "CAUSE",
        /// With the turn queue off, for an admitted unprotected request: the shorter of the last two
        /// runs of the loop turn between the unprotected requests it admitted inline (0 when it
        /// admitted fewer than two before this one, or when the queue was on).
        /// lib/gatekeeper/turn-queue.js starts on it.
        InlineRunMs = "INLINE_RUN_MS",
        /// An admitted request's slot of the concurrency limit: 0 none, 1 held, 2 held in shadow
        /// mode (it would have waited), 3 wait for one (queue it in tier order, or shed it).
        Slot = "SLOT",
        /// The concurrency limit's pressure, 0..1.
        Load = "LOAD",
        /// The epoch of the slot (given back with `releaseSlot`).
        SlotEpoch = "SLOT_EPOCH",
    }
}

pub const RESULT_LEN: usize = R::NAMES.len();

/// `sel` (the first argument of `decide`): low byte = tier id + 1 (0: not chosen by the caller),
/// `KEY_IS_IP` = the key is a client IP to normalise, `TURN_QUEUED` = the gatekeeper's turn queue is
/// running: it spends the turn budget itself (an unprotected request past it waits for a later turn
/// instead of being shed), so the gate does not apply it.
const SEL_TIER_MASK: i32 = 0xff;
const SEL_KEY_IS_IP: i32 = 0x100;
const SEL_TURN_QUEUED: i32 = 0x200;
/// Tiers a gate can select through `sel` (ids 0..=253 as id + 1 in the low byte).
const MAX_TIERS: i32 = SEL_TIER_MASK - 1;

/// Everything lib/gatekeeper.js has validated and filled in, but the `shed` options: those come as
/// their own object, read by name through `core::gate::SHED_OPTIONS`.
#[napi(object)]
pub struct GateOptions {
    pub default_tier: u32,
    pub trust_header: bool,
    /// HMAC secrets for signed tier tokens, the first one current.
    pub secrets: Option<Vec<Buffer>>,
    pub ipv4_prefix: u32,
    pub ipv6_prefix: u32,
    pub cost: f64,
    /// false: no live sampler (health stays idle unless injected): a gate that only rate-limits.
    pub sampler: bool,
    /// The learned concurrency limit; `None`: off.
    pub concurrency: Option<GateConcurrencyOptions>,
}

#[napi(object)]
pub struct GateConcurrencyOptions {
    pub shadow: bool,
    pub min_limit: u32,
    pub max_limit: u32,
    pub initial_limit: u32,
}

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
}

/// A tier's per-key quota (capacity 0: the tier keeps no per-key buckets).
#[napi(object)]
pub struct KeyQuota {
    pub capacity: f64,
    pub refill_per_sec: f64,
}

/// A health reading to inject (the test seam). Missing figures are 0 / false.
#[napi(object)]
pub struct HealthInput {
    pub lag_ms: Option<f64>,
    pub ewma_lag_ms: Option<f64>,
    pub p99_lag_ms: Option<f64>,
    pub elu: Option<f64>,
    pub heap_used: Option<f64>,
    pub heap_limit: Option<f64>,
    pub stalled: Option<bool>,
}

/// What the raw callback carries (also the defense's combined call: src/node/defense.rs).
pub(crate) struct Bound {
    gate: Arc<Gate>,
    out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    /// The loop of the thread that owns the function (only read on that thread).
    loop_: *mut UvLoop,
    /// The unprotected requests admitted with the turn queue off, by loop turn (only touched on the
    /// owning thread).
    inline: InlineRuns,
}

// The result buffer is only written by the JS thread that owns the function and the array.
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

#[napi]
pub struct GateHandle {
    gate: Arc<Gate>,
    loop_: *mut UvLoop,
    /// Keeps this thread's sampler running while the gate lives; `None` without a live sampler.
    guard: Option<SamplerGuard>,
    /// What `bind` gave `decide`, for a defense that decides in the same call (`DefenseHandle::bind_gate`).
    bound: parking_lot::Mutex<Option<Arc<Bound>>>,
}

pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}

fn config(o: &GateOptions, shed: &ShedOptions) -> Result<GateConfig> {
    let signer = match &o.secrets {
        Some(s) if !s.is_empty() => {
            let keys: Vec<&[u8]> = s.iter().map(|b| b.as_ref()).collect();
            Some(TierSigner::new(&keys).map_err(|e| invalid(e.0))?)
        }
        _ => None,
    };
    let prefix = |v: u32, max: u32, name: &str| {
        u8::try_from(v).ok().filter(|p| u32::from(*p) <= max).ok_or_else(|| invalid(format!("{name} must be an integer in 0..{max}")))
    };
    let ip = IpKeyConfig::new(prefix(o.ipv4_prefix, 32, "ipv4Prefix")?, prefix(o.ipv6_prefix, 128, "ipv6Prefix")?).map_err(invalid)?;
    Ok(GateConfig {
        shed: shed.shed.clone(),
        lag_signal: shed.lag_signal,
        update_interval_ms: shed.update_interval_ms,
        resolution_ms: if o.sampler { shed.sampler.resolution_ms as f64 } else { 0.0 },
        default_tier: o.default_tier as usize,
        trust_header: o.trust_header,
        signer,
        ip,
        cost: o.cost,
        concurrency: match &o.concurrency {
            Some(c) => ConcurrencyConfig { enabled: true, shadow: c.shadow, min_limit: c.min_limit, max_limit: c.max_limit, initial_limit: c.initial_limit },
            None => ConcurrencyConfig { enabled: false, ..ConcurrencyConfig::default() },
        },
    })
}

/// Reads every shed option from `obj` by its JS name (absent ones keep their defaults).
unsafe fn shed_options(env: sys::napi_env, obj: sys::napi_value) -> Result<ShedOptions> {
    let mut o = ShedOptions::default();
    for opt in SHED_OPTIONS {
        let name = std::ffi::CString::new(opt.name).map_err(|e| invalid(e.to_string()))?;
        let mut v = std::ptr::null_mut();
        raw::check(sys::napi_get_named_property(env, obj, name.as_ptr(), &mut v))?;
        let mut stack = [0u8; 64];
        let mut heap = Vec::new();
        let value = match raw::type_of(env, v) {
            sys::ValueType::napi_undefined => OptionValue::Undefined,
            sys::ValueType::napi_number => OptionValue::Number(raw::get_f64(env, v).unwrap_or(f64::NAN)),
            sys::ValueType::napi_boolean => OptionValue::Bool(raw::get_bool(env, v).unwrap_or(false)),
            sys::ValueType::napi_string => match raw::get_str(env, v, &mut stack, &mut heap) {
                Some(t) => OptionValue::Text(std::str::from_utf8(t).unwrap_or("")),
                None => OptionValue::Undefined,
            },
            _ => return Err(invalid(format!("shed.{} must be a number, a boolean or a string", opt.name))),
        };
        o.set(opt.name, value).map_err(|e| invalid(format!("shed.{e}")))?;
    }
    Ok(o)
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
                    shadow: cfg.shadow,
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
        }
    }

    /// A slot taken in `epoch` comes back: its request finished `latencyMs` after it took it
    /// (negative: refused or abandoned after, no sample). `waiting`: requests waiting for a slot; returns how many of them
    /// may start now (their slots taken).
    #[napi(catch_unwind)]
    pub fn release_slot(&self, env: Env, epoch: f64, latency_ms: f64, waiting: u32) -> u32 {
        let _panic = raw::throw_on_panic(&env, "GateHandle::release_slot");
        let latency = (latency_ms.is_finite() && latency_ms >= 0.0).then_some((latency_ms * 1e6) as u64);
        self.gate.release(epoch as u64, latency, waiting, gate_now_ns())
    }

    /// Slots for up to `waiting` requests without a release (the limit may have risen).
    #[napi(catch_unwind)]
    pub fn hand_over_slots(&self, env: Env, waiting: u32) -> u32 {
        let _panic = raw::throw_on_panic(&env, "GateHandle::hand_over_slots");
        self.gate.hand_over(waiting, gate_now_ns())
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

/// An object of `name: number` for `names`, numbered in order.
fn numbered(env: &Env, names: &[&str], key: impl Fn(&str) -> String) -> Result<Object<'static>> {
    let mut o = Object::new(env)?;
    for (i, n) in names.iter().enumerate() {
        o.set(key(n), i as u32)?;
    }
    freeze(env, o)
}

/// `o[name] = v`, frozen.
fn set_frozen<V: ToNapiValue>(env: &Env, o: &Object, name: &std::ffi::CStr, v: V) -> Result<()> {
    unsafe {
        let v = V::to_napi_value(env.raw(), v)?;
        raw::check(sys::napi_object_freeze(env.raw(), v))?;
        raw::check(sys::napi_set_named_property(env.raw(), o.raw(), name.as_ptr(), v))
    }
}

fn freeze(env: &Env, o: Object) -> Result<Object<'static>> {
    unsafe {
        raw::check(sys::napi_object_freeze(env.raw(), o.raw()))?;
        Ok(Object::from_raw(env.raw(), o.raw()))
    }
}

/// What lib/gatekeeper.js shares with `decide`, declared once on this side: `result` (the indices of
/// the `result` array, and `LENGTH`), `verdict` (`ADMIT: 0`, ...), `verdictNames`, `verdictStatus`
/// (the HTTP status per verdict), `sources`, `causes`, `lagSignals` (names by code), `sel` (`KEY_IS_IP`,
/// `MAX_TIERS`), `shedDefaults` (every `shed` option by name; `false` = off, `undefined` = derived).
/// Frozen.
#[napi(js_name = "gateConstants", catch_unwind)]
pub fn gate_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "gate_constants");
    let env = &env;
    let mut result = Object::new(env)?;
    for (i, n) in R::NAMES.iter().enumerate() {
        result.set(n, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let statuses: Vec<u32> = Verdict::ALL.iter().map(|v| u32::from(v.http_status())).collect();
    let mut shed = Object::new(env)?;
    for (name, v) in ShedOptions::defaults() {
        match v {
            OptionValue::Number(n) => shed.set(name, n)?,
            OptionValue::Bool(b) => shed.set(name, b)?,
            OptionValue::Text(t) => shed.set(name, t)?,
            OptionValue::Undefined => shed.set(name, ())?,
        }
    }
    let mut sel = Object::new(env)?;
    sel.set("KEY_IS_IP", SEL_KEY_IS_IP)?;
    sel.set("TURN_QUEUED", SEL_TURN_QUEUED)?;
    sel.set("MAX_TIERS", MAX_TIERS)?;
    let mut o = Object::new(env)?;
    o.set("result", freeze(env, result)?)?;
    o.set("verdict", numbered(env, Verdict::NAMES, |n| n.to_uppercase().replace('-', "_"))?)?;
    set_frozen(env, &o, c"verdictNames", Verdict::NAMES.to_vec())?;
    set_frozen(env, &o, c"verdictStatus", statuses)?;
    set_frozen(env, &o, c"sources", TierSource::NAMES.to_vec())?;
    set_frozen(env, &o, c"causes", Cause::NAMES.to_vec())?;
    set_frozen(env, &o, c"lagSignals", LagSignal::NAMES.to_vec())?;
    o.set("sel", freeze(env, sel)?)?;
    o.set("shedDefaults", freeze(env, shed)?)?;
    freeze(env, o)
}

/// Mints a signed tier token valid until `expires_at_sec` (Unix seconds, exclusive).
#[napi(catch_unwind)]
pub fn mint_tier_token(env: Env, secret: Buffer, tier: String, expires_at_sec: f64) -> Result<String> {
    let _panic = raw::throw_on_panic(&env, "mint_tier_token");
    if !(expires_at_sec.is_finite() && expires_at_sec >= 0.0 && expires_at_sec.fract() == 0.0) {
        return Err(invalid("expiresAt must be a whole number of seconds >= 0"));
    }
    let signer = TierSigner::new(&[secret.as_ref()]).map_err(|e| invalid(e.0))?;
    signer.sign(&tier, expires_at_sec as u64).map_err(|e| invalid(e.0))
}

/// The gate's time: the controller's hold and recovery, the in-band lag estimate and the debits all
/// read the kernel's monotonic clock (vDSO `clock_gettime`), one time base for everything the gate
/// does, and the same clock the ledger reads.
#[inline(always)]
pub(crate) fn gate_now_ns() -> u64 {
    MonotonicClock.now_ns()
}

pub(crate) fn unix_now_sec() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Reads a string argument into `buf` without spilling: `Some(len)` (a length above `MAX_HEADER_LEN`
/// means "too long", the rest was cut), `None` if `v` is not a string.
#[inline(always)]
pub(crate) unsafe fn read_bounded<const N: usize>(env: sys::napi_env, v: sys::napi_value, buf: &mut [u8; N]) -> Option<usize> {
    let mut len = 0usize;
    if sys::napi_get_value_string_utf8(env, v, buf.as_mut_ptr().cast(), N, &mut len) != sys::Status::napi_ok {
        return None;
    }
    Some(len)
}

#[inline(always)]
fn write_result(out: &mut [f64; RESULT_LEN], d: &Decision) {
    out[R::Verdict as usize] = d.verdict as u8 as f64;
    out[R::Tier as usize] = d.tier as f64;
    out[R::Source as usize] = d.source as u8 as f64;
    out[R::Remaining as usize] = d.outcome.remaining;
    out[R::Limit as usize] = d.outcome.limit;
    out[R::RetryAfterMs as usize] = d.outcome.retry_after_ms;
    out[R::ResetMs as usize] = d.outcome.reset_ms;
    out[R::Scale as usize] = d.scale;
    out[R::Pressure as usize] = d.pressure;
    out[R::LagMs as usize] = d.lag_ms;
    out[R::Cause as usize] = d.cause as u8 as f64;
    out[R::Slot as usize] = match d.slot {
        Slot::None => 0.0,
        Slot::Held => 1.0,
        Slot::Shadow => 2.0,
        Slot::Wait => 3.0,
    };
    out[R::Load as usize] = d.load;
    out[R::SlotEpoch as usize] = d.epoch as f64;
}

raw::guarded!(decide = "Gate.decide" => decide_unguarded);
/// `decide(sel, header?, key?) -> verdict` (0 admit, 1 shed, 2 tier full, 3 rate-limited); details in
/// `result`. `sel`: see `SEL_*`. `header`: the tier header's value or undefined. `key`: the per-key
/// identity or undefined.
#[inline(always)]
unsafe fn decide_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<3>(env, info);
    match decide_args(env, &*(data as *const Bound), &argv, argc, gate_now_ns(), None) {
        Some(v) => raw::int32(env, v),
        None => std::ptr::null_mut(),
    }
}

/// `decide`'s work on its arguments `argv[..argc]` (at least 3 slots) at `now_ns` (the gate's clock,
/// `gate_now_ns`, read by the caller: the defense's call shares its reading): the verdict, or `None`
/// with an exception pending. `ranked`: the fair-share backstop, the request's client address and the
/// loop's load (`FairShare::load`).
#[inline(always)]
pub(crate) unsafe fn decide_args(
    env: sys::napi_env,
    bound: &Bound,
    argv: &[sys::napi_value],
    argc: usize,
    now_ns: u64,
    ranked: Option<(&FairShare, Option<IpAddr>, f64)>,
) -> Option<i32> {
    let gate = &bound.gate;
    let sel = match raw::get_f64(env, argv[0]) {
        Some(n) if argc >= 1 && f64::from(n as u16) == n => i32::from(n as u16),
        _ => {
            raw::throw_type_error(env, "decide: sel must be an integer 0..65535");
            return None;
        }
    };
    let tier = match sel & SEL_TIER_MASK {
        0 => None,
        t => Some(t as usize - 1),
    };
    // The header is only looked at when the caller did not choose the tier.
    let mut hbuf = [0u8; MAX_HEADER_LEN + 8];
    let header = if tier.is_none() && argc >= 2 { read_bounded(env, argv[1], &mut hbuf).map(|len| &hbuf[..len]) } else { None };
    let mut kstack = [0u8; 256];
    let mut kheap = Vec::new();
    let key = if argc >= 3 {
        match raw::get_key(env, argv[2], &mut kstack, &mut kheap) {
            // A client IP (from a socket or a trusted X-Forwarded-For) is the request's doing, not the
            // caller's: any length is fine, an unparsable one maps to the shared invalid-IP key.
            Some(k) if k.len() <= MAX_KEY_BYTES || sel & SEL_KEY_IS_IP != 0 => Some((k, sel & SEL_KEY_IS_IP != 0)),
            Some(k) => {
                raw::throw_range_error(env, &format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len()));
                return None;
            }
            None => None,
        }
    } else {
        None
    };
    let ranked = ranked.map(|(fair, ip, load)| {
        let mut share = None;
        (move |tokens, budget| fair.admits(ip, now_ns, tokens, budget, load, &mut share), move || fair.count_refusal())
    });
    let queued = sel & SEL_TURN_QUEUED != 0;
    let turn_age_ms = move || if queued { 0.0 } else { current_turn_age_ms() };
    let d = gate.decide_ranked(tier, header, key, now_ns, || idle_ns(bound.loop_), turn_age_ms, unix_now_sec, ranked);
    let out = &mut *bound.out.get();
    write_result(out, &d);
    // Costly requests running back to back start the turn queue (core/gate/burst.rs).
    let noted = !queued && gate.config().shed.turn_budget_ms > 0.0 && d.verdict == Verdict::Admit && !gate.ledger().is_protected(d.tier);
    out[R::InlineRunMs as usize] = if noted { current_turn().map_or(0.0, |(turn_ns, age_ms)| bound.inline.note(turn_ns, age_ms)) } else { 0.0 };
    Some(d.verdict as i32)
}

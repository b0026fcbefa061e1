//! The hot path: `decide(sel, header?, key?)`, a raw callback over the gate, and the layout of the
//! `result` array it fills (also run by the defense's combined call, src/node/defense/hot.rs).
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::concurrency::Slot;
use crate::core::defense::FairShare;
use crate::core::gate::{Decision, Gate, InlineRuns, MAX_HEADER_LEN};
use crate::core::names::named_enum;
use crate::node::lag::{current_turn, current_turn_age_ms};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use crate::node::uv::{idle_ns, UvLoop};
use napi::sys;
use std::cell::UnsafeCell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

named_enum! {
    /// The Float64Array `decide` fills: one figure per field, at the field's number. JS reads the
    /// numbers by name from `gateConstants().result`.
    #[derive(Clone, Copy)]
    pub(crate) enum R: u8 {
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
        /// Shadow mode: 1 when the controller would have shed this admitted request.
        Shadow = "SHADOW",
    }
}

pub const RESULT_LEN: usize = R::NAMES.len();

/// `sel` (the first argument of `decide`): low byte = tier id + 1 (0: not chosen by the caller),
/// `KEY_IS_IP` = the key is a client IP to normalise, `TURN_QUEUED` = the gatekeeper's turn queue is
/// running: it spends the turn budget itself (an unprotected request past it waits for a later turn
/// instead of being shed), so the gate does not apply it.
pub(crate) const SEL_TIER_MASK: i32 = 0xff;
pub(crate) const SEL_KEY_IS_IP: i32 = 0x100;
pub(crate) const SEL_TURN_QUEUED: i32 = 0x200;
/// Tiers a gate can select through `sel` (ids 0..=253 as id + 1 in the low byte).
pub(crate) const MAX_TIERS: i32 = SEL_TIER_MASK - 1;

/// What the raw callback carries (also the defense's combined call: src/node/defense/hot.rs).
pub(crate) struct Bound {
    pub(crate) gate: Arc<Gate>,
    pub(crate) out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    /// The loop of the thread that owns the function (only read on that thread).
    pub(crate) loop_: *mut UvLoop,
    /// The unprotected requests admitted with the turn queue off, by loop turn (only touched on the
    /// owning thread).
    pub(crate) inline: InlineRuns,
}

// The result buffer is only written by the JS thread that owns the function and the array.
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

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
pub(crate) fn write_result(out: &mut [f64; RESULT_LEN], d: &Decision) {
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
    out[R::Shadow as usize] = f64::from(u8::from(d.shadow));
}

raw::guarded!(pub(crate) decide = "Gate.decide" => decide_unguarded);
/// `decide(sel, header?, key?) -> verdict` (0 admit, 1 shed, 2 tier full, 3 rate-limited); details in
/// `result`. `sel`: see `SEL_*`. `header`: the tier header's value or undefined. `key`: the per-key
/// identity or undefined.
#[inline(always)]
pub(crate) unsafe fn decide_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
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
    let d = gate.decide(tier, header, key, now_ns, || idle_ns(bound.loop_), turn_age_ms, unix_now_sec, ranked);
    let out = &mut *bound.out.get();
    write_result(out, &d);
    // Costly requests running back to back start the turn queue (core/gate/burst.rs).
    let noted = gate.notes_inline(&d, queued);
    out[R::InlineRunMs as usize] = if noted { current_turn().map_or(0.0, |(turn_ns, age_ms)| bound.inline.note(turn_ns, age_ms)) } else { 0.0 };
    Some(d.verdict as i32)
}

//! The hot path: `defend(flags, ip, pass?, cost, key0, ..)` and the combined `defendAndDecide`, raw
//! callbacks over the handle's shared state, and the layout of the `result` array they fill.
use super::handle::Shared;
use super::records::unix_ms;
use crate::core::defense::{Answer, ClientRequest, KeySpan, PassCheck, Scratch, Verdict, MAX_IP_INPUT, MAX_PASS_LEN};
use crate::core::limit::{MAX_LIMITS, NEVER};
use crate::core::names::named_enum;
use crate::node::gate::{decide_args, gate_now_ns, read_bounded, Bound as GateBound};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::sys;
use std::cell::UnsafeCell;
use std::sync::Arc;

named_enum! {
    /// The fixed part of the Float64Array `defend` fills; then, per limit i, its remaining units at
    /// `LIMITS + 2i` and its reset (ms) at `LIMITS + 2i + 1`, meaningful where `EVALUATED` has bit i.
    #[derive(Clone, Copy)]
    pub(crate) enum R: u8 {
        Verdict = "VERDICT",
        /// The refusing limit's index, or -1.
        RefusedBy = "REFUSED_BY",
        RetryAfterMs = "RETRY_AFTER_MS",
        /// A shaper's delay for an admitted request.
        DelayMs = "DELAY_MS",
        /// A ban's time left (Infinity: permanent).
        BanLeftMs = "BAN_LEFT_MS",
        ByCidr = "BY_CIDR",
        /// Ban events waiting for `takeEvents()`.
        Events = "EVENTS",
        /// 0: no pass presented; 1: valid; 2 + `PassError`: refused.
        Pass = "PASS",
        Evaluated = "EVALUATED",
        /// The tightest limit's index (the core's `Answer::tightest`), or -1; its units left and reset (ms).
        Tightest = "TIGHTEST",
        TightestRemaining = "TIGHTEST_REMAINING",
        TightestResetMs = "TIGHTEST_RESET_MS",
        Limits = "LIMITS",
    }
}

/// The fixed fields (`R::Limits` names where the per-limit pairs start).
pub(crate) const FIXED: usize = R::NAMES.len() - 1;
pub(crate) const RESULT_LEN: usize = FIXED + 2 * MAX_LIMITS;
/// `defend`'s leading arguments before the keys.
pub(crate) const ARGS: usize = 4;
/// `flags` bit: the user's `skip(req)` said so.
pub(crate) const FLAG_SKIP: i32 = 1;
/// `flags` bit (the combined call): an exempt request is served without the gate (`exemptSkipsShedding`).
pub(crate) const FLAG_EXEMPT_ENDS: i32 = 2;
/// The combined call's gate arguments, before the defense's.
pub(crate) const GATE_ARGS: usize = 3;
/// Limits whose keys the hot path reads in its first `napi_get_cb_info`: N-API fills every slot it is
/// given (the missing ones with `undefined`, a few instructions each), so sets of more limits are read
/// again with room for `MAX_LIMITS`.
pub(crate) const FEW_LIMITS: usize = 4;

/// What the raw callback carries: the shared state and this thread's reusable buffers.
pub(crate) struct Bound {
    pub(crate) shared: Arc<Shared>,
    pub(crate) out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    pub(crate) scratch: UnsafeCell<Scratch>,
}

// `out` and `scratch` are only used by the JS thread that owns the function (one call at a time).
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

/// The combined call's state: the defense's and the gate's, on the thread that bound both.
pub(crate) struct Both {
    pub(crate) defense: Arc<Bound>,
    pub(crate) gate: Arc<GateBound>,
}

#[inline(always)]
pub(crate) fn ms(ns: u64) -> f64 {
    if ns == NEVER || ns == u64::MAX {
        f64::INFINITY
    } else {
        ns as f64 / 1e6
    }
}

#[inline(always)]
pub(crate) fn whole_cost(c: f64) -> Option<u32> {
    // Whole and in range iff the saturating conversion gives it back (NaN gives 0, which differs);
    // cheaper than `fract()`, which is a libm call on this target.
    let w = c as u32;
    (f64::from(w) == c).then_some(w)
}

/// A Float64Array's elements; `None` for anything else.
#[inline(always)]
pub(crate) unsafe fn f64_array<'a>(env: sys::napi_env, v: sys::napi_value) -> Option<&'a [f64]> {
    let mut is = false;
    if sys::napi_is_typedarray(env, v, &mut is) != sys::Status::napi_ok || !is {
        return None;
    }
    let (mut ty, mut len, mut data, mut ab, mut off) = (0, 0usize, std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
    if sys::napi_get_typedarray_info(env, v, &mut ty, &mut len, &mut data, &mut ab, &mut off) != sys::Status::napi_ok
        || ty != sys::TypedarrayType::float64_array
    {
        return None;
    }
    if len == 0 {
        return Some(&[]);
    }
    Some(std::slice::from_raw_parts(data as *const f64, len))
}

raw::guarded!(pub(crate) defend = "Defense.defend" => defend_unguarded);
/// `defend(flags, ip, pass?, cost, key0, .., keyN-1) -> verdict` (`Verdict` codes); details in `result`.
#[inline(always)]
pub(crate) unsafe fn defend_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<{ ARGS + FEW_LIMITS }>(env, info);
    let bound = &*(data as *const Bound);
    if bound.shared.front.defense().limits().len() > FEW_LIMITS {
        let (argv, argc, _) = raw::args::<{ ARGS + MAX_LIMITS }>(env, info);
        return defend_on(env, bound, &argv, argc);
    }
    defend_on(env, bound, &argv, argc)
}

#[inline(always)]
pub(crate) unsafe fn defend_on(env: sys::napi_env, bound: &Bound, argv: &[sys::napi_value], argc: usize) -> sys::napi_value {
    match defend_args(env, bound, argv, argc, gate_now_ns()) {
        Some((a, _)) => raw::int32(env, a.verdict as i32),
        None => std::ptr::null_mut(),
    }
}

raw::guarded!(pub(crate) defend_and_decide = "Defense.defendAndDecide" => defend_and_decide_unguarded);
/// See `DefenseHandle::bind_gate`.
#[inline(always)]
pub(crate) unsafe fn defend_and_decide_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<{ GATE_ARGS + ARGS + FEW_LIMITS }>(env, info);
    let both = &*(data as *const Both);
    if both.defense.shared.front.defense().limits().len() > FEW_LIMITS {
        let (argv, argc, _) = raw::args::<{ GATE_ARGS + ARGS + MAX_LIMITS }>(env, info);
        return defend_and_decide_on(env, both, &argv, argc);
    }
    defend_and_decide_on(env, both, &argv, argc)
}

#[inline(always)]
pub(crate) unsafe fn defend_and_decide_on(env: sys::napi_env, both: &Both, argv: &[sys::napi_value], argc: usize) -> sys::napi_value {
    // One clock reading for both (the gate's clock, the one the limits and bans run on too).
    let now_ns = gate_now_ns();
    let Some((answer, flags)) = defend_args(env, &both.defense, &argv[GATE_ARGS..], argc.saturating_sub(GATE_ARGS), now_ns) else {
        return std::ptr::null_mut();
    };
    let v = answer.verdict;
    if !answer.gate_follows(flags & FLAG_EXEMPT_ENDS != 0) {
        return raw::int32(env, v as i32);
    }
    // The fair-share backstop ranks what reaches the pool: requests the defense let on.
    let shared = &*both.defense.shared;
    let ranked = shared.front.ranked(shared.loop_health.as_deref()).filter(|_| v == Verdict::Pass).map(|(f, load)| (f, answer.ip, load));
    match decide_args(env, &both.gate, &argv[..GATE_ARGS], GATE_ARGS, now_ns, ranked) {
        Some(g) => raw::int32(env, v as i32 | ((g + 1) << 4)),
        None => std::ptr::null_mut(),
    }
}

/// `defend`'s work on its arguments `argv[..argc]`: reads them, has the core decide, writes `result`.
/// The answer and the flags, or `None` with an exception pending.
#[inline(always)]
unsafe fn defend_args(env: sys::napi_env, bound: &Bound, argv: &[sys::napi_value], argc: usize, now_ns: u64) -> Option<(Answer, i32)> {
    let s = &*bound.shared;
    let n = s.front.defense().limits().len();
    if argc < ARGS + n {
        raw::throw_type_error(env, "defend: expected (flags, ip, pass, cost) and one key per limit");
        return None;
    }
    let flags = match raw::get_f64(env, argv[0]) {
        Some(f) if f64::from(f as u8) == f => i32::from(f as u8),
        _ => {
            raw::throw_type_error(env, "defend: flags must be an integer 0..255");
            return None;
        }
    };
    let mut ipbuf = [0u8; 256];
    let mut ipheap = Vec::new();
    let Some(ip_in) = raw::get_key(env, argv[1], &mut ipbuf, &mut ipheap) else {
        raw::throw_type_error(env, "defend: ip must be a string");
        return None;
    };
    let ip_in = &ip_in[..ip_in.len().min(MAX_IP_INPUT)];
    // One cost for every limit, or a Float64Array of one per limit.
    let mut costs = [0u32; MAX_LIMITS];
    let ncosts = match raw::get_f64(env, argv[3]) {
        Some(c) => match whole_cost(c) {
            Some(c) => {
                costs[0] = c;
                1
            }
            None => {
                raw::throw_range_error(env, "defend: cost must be an integer 0..4294967295");
                return None;
            }
        },
        None => match f64_array(env, argv[3]) {
            Some(a) if a.len() >= n => {
                for (c, &v) in costs.iter_mut().zip(&a[..n]) {
                    match whole_cost(v) {
                        Some(v) => *c = v,
                        None => {
                            raw::throw_range_error(env, "defend: every cost must be an integer 0..4294967295");
                            return None;
                        }
                    }
                }
                n.max(1)
            }
            _ => {
                raw::throw_type_error(env, "defend: cost must be a number or a Float64Array of one cost per limit");
                return None;
            }
        },
    };
    // A pass that is not read whole is malformed: the core refuses one longer than `MAX_PASS_LEN`.
    let mut pbuf = [0u8; MAX_PASS_LEN + 8];
    let pass = if raw::is_string(env, argv[2]) { Some(read_bounded(env, argv[2], &mut pbuf).map_or(&pbuf[..], |len| &pbuf[..len])) } else { None };
    let sc = &mut *bound.scratch.get();
    // Given keys into the reused scratch buffer; address keys are the core's to make.
    sc.keys.clear();
    let mut spans = [KeySpan::None; MAX_LIMITS];
    let mut kstack = [0u8; 256];
    let mut kheap = Vec::new();
    for (i, span) in spans.iter_mut().enumerate().take(n) {
        let v = argv[ARGS + i];
        // In the order of their frequency, each test one check (`napi_typeof` runs up to ten).
        if raw::get_bool(env, v).is_some() {
            *span = KeySpan::Address;
            continue;
        }
        match raw::get_key(env, v, &mut kstack, &mut kheap) {
            Some(k) if k.len() <= MAX_KEY_BYTES => {
                *span = KeySpan::Given(sc.keys.len() as u32, k.len() as u32);
                sc.keys.extend_from_slice(k);
            }
            Some(k) => {
                raw::throw_range_error(env, &format!("defend: key {i} is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len()));
                return None;
            }
            None => match raw::type_of(env, v) {
                sys::ValueType::napi_undefined | sys::ValueType::napi_null => {}
                _ => {
                    raw::throw_type_error(env, "defend: a key must be undefined, true or a string");
                    return None;
                }
            },
        }
    }
    let (cost, per_limit) = if ncosts == 1 { (costs[0], &costs[..0]) } else { (1, &costs[..n]) };
    let req = ClientRequest { ip: ip_in, pass, skip: flags & FLAG_SKIP != 0, keys: &spans[..n], cost, costs: per_limit };
    let answer = {
        let lists = s.lists.read();
        s.front.decide(&lists.access, &req, now_ns, unix_ms, sc)
    };
    let out = &mut *bound.out.get();
    out[R::Pass as usize] = match answer.pass {
        PassCheck::Absent => 0.0,
        PassCheck::Valid => 1.0,
        PassCheck::Refused(e) => 2.0 + f64::from(e as u8),
    };
    let d = &sc.outcome.limits;
    out[R::Verdict as usize] = f64::from(answer.verdict as u8);
    out[R::RefusedBy as usize] = d.refused_by.map_or(-1.0, |i| i as f64);
    out[R::RetryAfterMs as usize] = ms(answer.retry_after_ns);
    out[R::DelayMs as usize] = ms(answer.delay_ns);
    out[R::BanLeftMs as usize] = ms(answer.ban_left_ns);
    out[R::ByCidr as usize] = f64::from(u8::from(answer.by_cidr));
    out[R::Evaluated as usize] = f64::from(d.evaluated);
    match answer.tightest {
        Some(t) => {
            out[R::Tightest as usize] = t.index as f64;
            out[R::TightestRemaining as usize] = t.remaining as f64;
            out[R::TightestResetMs as usize] = ms(t.reset_ns);
        }
        None => {
            out[R::Tightest as usize] = -1.0;
            out[R::TightestRemaining as usize] = 0.0;
            out[R::TightestResetMs as usize] = 0.0;
        }
    }
    let mut bits = d.evaluated;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        out[FIXED + 2 * i] = d.checks[i].remaining as f64;
        out[FIXED + 2 * i + 1] = ms(d.checks[i].reset_ns);
    }
    if !sc.events.is_empty() {
        let mut p = s.pending.lock();
        p.append(&mut sc.events);
        out[R::Events as usize] = p.len() as f64;
    } else {
        out[R::Events as usize] = 0.0;
    }
    Some((answer, flags))
}

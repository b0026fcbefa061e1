//! The hot path: `tryConsume`, `tryConsumeKeyed`, `tryConsumeSlot` and `consume`, raw callbacks over
//! the ledger, and the layout of the `result` array `consume` fills.
use super::MAX_KEY_BYTES;
use crate::core::ledger::{js_number, Ledger, Slot};
use crate::node::raw;
use napi::sys;
use std::cell::UnsafeCell;
use std::ptr;
use std::sync::Arc;

/// The layout of the Float64Array `consume` fills, declared here only: JS reads it from
/// `ledgerConstants()` (lib/ledger/index.js exports it as LEDGER_RESULT).
pub const RESULT_LEN: usize = 6;
pub(crate) const R_ALLOWED: usize = 0;
pub(crate) const R_REMAINING: usize = 1;
pub(crate) const R_LIMIT: usize = 2;
pub(crate) const R_RETRY_AFTER_MS: usize = 3;
pub(crate) const R_RESET_MS: usize = 4;
pub(crate) const R_LIMITED_BY: usize = 5;
pub(crate) const RESULT_FIELDS: [(&str, usize); RESULT_LEN] = [
    ("ALLOWED", R_ALLOWED),
    ("REMAINING", R_REMAINING),
    ("LIMIT", R_LIMIT),
    ("RETRY_AFTER_MS", R_RETRY_AFTER_MS),
    ("RESET_MS", R_RESET_MS),
    ("LIMITED_BY", R_LIMITED_BY),
];

/// What the raw callbacks carry: the ledger, this JS object's result buffer, and per tier the slots of
/// the keys that this JS object's key cache (lib/ledger.js) holds, by the index the cache gave them.
pub(crate) struct Bound {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    pub(crate) slots: Box<[UnsafeCell<Vec<Slot>>]>,
    /// `tryConsumeSlot`'s arguments `[code, cost]`, written by JS into a Float64Array over them: two
    /// typed-array stores cost less than reading a number argument through N-API.
    pub(crate) slot_args: Box<UnsafeCell<[f64; 3]>>,
    /// Per tier, the debits `tryConsumeSlot` made: how lib/ledger.js tells whether its key cache pays.
    pub(crate) slot_hits: UnsafeCell<Box<[f64]>>,
    /// Bits of a `tryConsumeSlot` code that hold the tier.
    pub(crate) code_bits: u32,
    /// The ledger is `LedgerHandle::exclusive` (this thread's alone).
    pub(crate) exclusive: bool,
}

/// The bits `tryConsumeSlot` codes give to the tier, for `tiers` tiers.
pub(crate) fn code_bits(tiers: usize) -> u32 {
    tiers.next_power_of_two().trailing_zeros()
}

// The result buffer and the slots are only used by the JS thread that owns the functions and the
// array (a JS object never crosses threads; each thread of a Ledger.shared has its own Bound).
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

/// The most slots one tier's key cache may index (lib/ledger.js caps its cache at this).
pub(crate) const MAX_SLOTS: usize = 1 << 20;

pub(crate) fn type_name(t: sys::napi_valuetype) -> &'static str {
    match t {
        sys::ValueType::napi_undefined => "undefined",
        sys::ValueType::napi_null => "null",
        sys::ValueType::napi_boolean => "boolean",
        sys::ValueType::napi_number => "number",
        sys::ValueType::napi_string => "string",
        sys::ValueType::napi_symbol => "symbol",
        sys::ValueType::napi_object => "object",
        sys::ValueType::napi_function => "function",
        sys::ValueType::napi_bigint => "bigint",
        _ => "external",
    }
}

/// Reads the tier argument: an id (integer number) or a name (string). `Err` means an exception is
/// pending.
#[inline(always)]
pub(crate) unsafe fn tier_arg(env: sys::napi_env, ledger: &Ledger, v: sys::napi_value) -> std::result::Result<usize, ()> {
    if let Some(n) = raw::get_f64(env, v) {
        // `(n as usize) as f64 == n` is the integer test (`fract` is a libm call, not inlined).
        if n >= 0.0 && n < ledger.tier_count() as f64 && (n as usize) as f64 == n {
            return Ok(n as usize);
        }
        raw::throw_range_error(env, &format!("tier {} is not a tier id of this ledger (ids are 0 to {})", js_number(n), ledger.tier_count() - 1));
        return Err(());
    }
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    match raw::get_key(env, v, &mut stack, &mut heap) {
        Some(name) => ledger.tier_id(name).ok_or_else(|| {
            raw::throw_range_error(env, &format!("unknown tier {:?}", String::from_utf8_lossy(name)));
        }),
        None => {
            let t = type_name(raw::type_of(env, v));
            raw::throw_type_error(env, &format!("tier must be a tier name (string) or id (number), got {t}"));
            Err(())
        }
    }
}

/// Reads the cost argument: `undefined` (or absent) is 1; otherwise a finite number >= 0.
#[inline(always)]
pub(crate) unsafe fn cost_arg(env: sys::napi_env, argc: usize, v: sys::napi_value) -> std::result::Result<f64, ()> {
    if argc < 3 {
        return Ok(1.0);
    }
    if let Some(c) = raw::get_f64(env, v) {
        if c.is_finite() && c >= 0.0 {
            return Ok(c);
        }
        raw::throw_range_error(env, &format!("cost must be a finite number >= 0 (got {})", js_number(c)));
        return Err(());
    }
    let t = raw::type_of(env, v);
    if t == sys::ValueType::napi_undefined {
        return Ok(1.0);
    }
    raw::throw_type_error(env, &format!("cost must be a number, got {}", type_name(t)));
    Err(())
}

/// Reads the arguments `(tier, key?, cost?)` and debits (`consume` with `DETAIL`, else `try_consume`,
/// whose outcome carries only `allowed`). `None` means an exception is pending.
#[inline(always)]
pub(crate) unsafe fn debit<const DETAIL: bool>(
    env: sys::napi_env,
    ledger: &Ledger,
    argv: &[sys::napi_value],
    argc: usize,
) -> Option<crate::core::ledger::Outcome> {
    let tier = tier_arg(env, ledger, argv[0]).ok()?;
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let key = if argc < 2 {
        None
    } else {
        match raw::get_key(env, argv[1], &mut stack, &mut heap) {
            Some(k) if k.len() <= MAX_KEY_BYTES => Some(k),
            Some(k) => {
                raw::throw_range_error(env, &format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len()));
                return None;
            }
            None => {
                let t = raw::type_of(env, argv[1]);
                if t != sys::ValueType::napi_undefined {
                    raw::throw_type_error(env, &format!("key must be a string or undefined, got {}", type_name(t)));
                    return None;
                }
                None
            }
        }
    };
    let cost = cost_arg(env, argc, argv[2]).ok()?;
    // `consume` reports waits, so it reads the precise clock; `tryConsume` lets the ledger read the
    // coarse one where that is safe (core::ledger notes).
    if DETAIL {
        Some(ledger.consume(tier, key, cost, ledger.now_ns()))
    } else {
        let allowed = ledger.try_consume_now(tier, key, cost);
        Some(crate::core::ledger::Outcome { allowed, ..crate::core::ledger::Outcome::DENIED })
    }
}

raw::guarded!(pub(crate) try_consume = "Ledger.tryConsume" => try_consume_unguarded);
/// `tryConsume(tier, key?, cost = 1) -> boolean`
#[inline(always)]
pub(crate) unsafe fn try_consume_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<3>(env, info);
    let bound = &*(data as *const Bound);
    match debit::<false>(env, &bound.ledger, &argv, argc) {
        Some(o) => raw::boolean(env, o.allowed),
        None => ptr::null_mut(),
    }
}

raw::guarded!(pub(crate) try_consume_keyed = "Ledger.tryConsumeKeyed" => try_consume_keyed_unguarded);
/// `tryConsumeKeyed(tier, key, cost, index) -> boolean`: `tryConsume(tier, key, cost)` with every
/// argument read and checked as there, which also records where the key's bucket is as slot `index`
/// of the tier, for `tryConsumeSlot`. `index` may be at most the count of slots recorded so far (it
/// then adds one); anything else is not recorded.
#[inline(always)]
pub(crate) unsafe fn try_consume_keyed_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, _, data) = raw::args::<4>(env, info);
    let bound = &*(data as *const Bound);
    let ledger = &bound.ledger;
    let Ok(tier) = tier_arg(env, ledger, argv[0]) else { return ptr::null_mut() };
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let key = match raw::get_key(env, argv[1], &mut stack, &mut heap) {
        Some(k) if k.len() <= MAX_KEY_BYTES => k,
        Some(k) => return raw::throw_range_error(env, &format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len())),
        None => return raw::throw_type_error(env, &format!("key must be a string or undefined, got {}", type_name(raw::type_of(env, argv[1])))),
    };
    let Ok(cost) = cost_arg(env, 3, argv[2]) else { return ptr::null_mut() };
    let (allowed, slot) = ledger.try_consume_now_slot(tier, key, cost);
    if let (Some(slot), Some(index)) = (slot, raw::get_f64(env, argv[3])) {
        let slots = &mut *bound.slots[tier].get();
        let i = index as usize;
        if i as f64 == index && i < MAX_SLOTS {
            if i < slots.len() {
                slots[i] = slot;
            } else if i == slots.len() {
                slots.push(slot);
            }
        }
    }
    raw::boolean(env, allowed)
}

raw::guarded!(pub(crate) try_consume_slot = "Ledger.tryConsumeSlot" => try_consume_slot_unguarded);
/// `tryConsumeSlot(code, cost = 1) -> boolean | null`: `tryConsume(tier, key, cost)` for the key
/// recorded as slot `index` of `tier` by `tryConsumeKeyed`, without reading or hashing the key; `code`
/// is `index * 2^b + tier`, `b` the bits of the tier count (`slotCodeBits`; one argument fewer to
/// read, ~2 ns). `null` when there is no such slot or it went stale (evicted, moved, reset): nothing
/// was debited; look the key up again with `tryConsumeKeyed`. `code` is trusted to be a non-negative
/// integer (lib/ledger.js passes its own); `cost` is checked as `tryConsume` checks it.
#[inline(always)]
pub(crate) unsafe fn try_consume_slot_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (_, _, data) = raw::args::<0>(env, info);
    let bound = &*(data as *const Bound);
    let io = &mut *bound.slot_args.get();
    let [code, cost, _] = *io;
    io[2] = SLOT_STALE;
    // A non-negative integer below 2^53 (lib/key-cache.js): one conversion instruction, not Rust's
    // saturating f64 -> u64 sequence.
    let code = code as i64 as u64;
    let tier = (code & ((1 << bound.code_bits) - 1)) as usize;
    let Some(slots) = bound.slots.get(tier) else { return ptr::null_mut() };
    let slots = &*slots.get();
    let Some(&slot) = slots.get((code >> bound.code_bits) as usize) else { return ptr::null_mut() };
    if !(cost.is_finite() && cost >= 0.0) {
        return raw::throw_range_error(env, &format!("cost must be a finite number >= 0 (got {})", js_number(cost)));
    }
    // Safety of the exclusive debit: `bound.exclusive` says only this thread reaches the ledger, and
    // no native call into it is running (this thread is here).
    let debited = if bound.exclusive { bound.ledger.try_consume_slot_exclusive(tier, slot, cost) } else { bound.ledger.try_consume_slot_now(tier, slot, cost) };
    if let Some(allowed) = debited {
        io[2] = f64::from(u8::from(allowed));
        (*bound.slot_hits.get())[tier] += 1.0;
    }
    // No return value (undefined): creating a boolean is one more N-API call.
    ptr::null_mut()
}

/// `slotArgs[2]` after a `tryConsumeSlot` that debited nothing because the slot is stale or unknown.
pub(crate) const SLOT_STALE: f64 = -1.0;

raw::guarded!(pub(crate) consume = "Ledger.consume" => consume_unguarded);
/// `consume(tier, key?, cost = 1, out?) -> boolean`, writing
/// `[allowed, remaining, limit, retryAfterMs, resetMs, limitedBy]` into `out` (a Float64Array of at
/// least 6) or into the ledger's own `result`.
#[inline(always)]
pub(crate) unsafe fn consume_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<4>(env, info);
    let bound = &*(data as *const Bound);
    let mut out = bound.out.get() as *mut f64;
    if argc >= 4 && raw::type_of(env, argv[3]) != sys::ValueType::napi_undefined {
        let mut is_ta = false;
        sys::napi_is_typedarray(env, argv[3], &mut is_ta);
        let (mut ty, mut len, mut p) = (0, 0usize, ptr::null_mut());
        if is_ta {
            sys::napi_get_typedarray_info(env, argv[3], &mut ty, &mut len, &mut p, ptr::null_mut(), ptr::null_mut());
        }
        if !is_ta || ty != sys::TypedarrayType::float64_array {
            return raw::throw_type_error(env, "out must be a Float64Array");
        }
        if len < RESULT_LEN {
            return raw::throw_range_error(env, &format!("out must have at least {RESULT_LEN} elements (got {len})"));
        }
        out = p as *mut f64;
    }
    match debit::<true>(env, &bound.ledger, &argv, argc.min(3)) {
        Some(o) => {
            let out = std::slice::from_raw_parts_mut(out, RESULT_LEN);
            out[R_ALLOWED] = f64::from(u8::from(o.allowed));
            out[R_REMAINING] = o.remaining;
            out[R_LIMIT] = o.limit;
            out[R_RETRY_AFTER_MS] = o.retry_after_ms;
            out[R_RESET_MS] = o.reset_ms;
            out[R_LIMITED_BY] = o.limited_by as u8 as f64;
            raw::boolean(env, o.allowed)
        }
        None => ptr::null_mut(),
    }
}

//! `LedgerHandle`: the napi face of `core::ledger::Ledger`.
//!
//! Off the hot path (construction, snapshot, reset, refill scale) it is an ordinary `#[napi]` class. The
//! hot path — `tryConsume` and `consume` — is two raw callbacks that `bind` defines as own properties of
//! the JS `Ledger` object, each carrying the `Arc<Ledger>` as its data pointer: one `napi_get_cb_info`,
//! the tier read as a number (or a short name read into a stack buffer), the key read into a stack
//! buffer, a primitive returned. `consume` writes its details into a Float64Array instead of allocating
//! an object per call.
use crate::core::ledger::{js_number, ConfigError, Ledger, PerKeyConfig, Slot, TierConfig};
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ptr;
use std::sync::{Arc, LazyLock, Mutex, Weak};

#[napi(object)]
pub struct PerKeyOptions {
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub max_keys: f64,
    pub idle_ttl_ms: f64,
}

/// One tier, complete (lib/ledger.js checks types and fills defaults; the core checks values).
#[napi(object)]
pub struct TierOptions {
    pub name: String,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub protected: bool,
    pub per_key: Option<PerKeyOptions>,
}

#[napi(object)]
pub struct TierSnapshot {
    pub name: String,
    pub protected: bool,
    pub tokens: f64,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub refill_scale: f64,
    pub keys: u32,
}

/// The layout of the Float64Array `consume` fills, declared here only: JS reads it from
/// `ledgerConstants()` (lib/ledger/index.js exports it as LEDGER_RESULT).
pub const RESULT_LEN: usize = 6;
const R_ALLOWED: usize = 0;
const R_REMAINING: usize = 1;
const R_LIMIT: usize = 2;
const R_RETRY_AFTER_MS: usize = 3;
const R_RESET_MS: usize = 4;
const R_LIMITED_BY: usize = 5;
const RESULT_FIELDS: [(&str, usize); RESULT_LEN] = [
    ("ALLOWED", R_ALLOWED),
    ("REMAINING", R_REMAINING),
    ("LIMIT", R_LIMIT),
    ("RETRY_AFTER_MS", R_RETRY_AFTER_MS),
    ("RESET_MS", R_RESET_MS),
    ("LIMITED_BY", R_LIMITED_BY),
];

/// `{ result: { ALLOWED: 0, ..., LENGTH }, limitedBy: ['none', 'tier', 'key'] }`: what lib/ledger
/// shares with `consume`.
#[napi(js_name = "ledgerConstants", catch_unwind)]
pub fn ledger_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "ledger_constants");
    let mut result = Object::new(&env)?;
    for (name, i) in RESULT_FIELDS {
        result.set(name, i as u32)?;
    }
    result.set("LENGTH", RESULT_LEN as u32)?;
    let mut o = Object::new(&env)?;
    o.set("result", result)?;
    o.set("limitedBy", crate::core::ledger::Limit::NAMES.to_vec())?;
    Ok(Object::from_raw(env.raw(), o.raw()))
}

/// Keys longer than this are refused: keyed memory is bounded by `maxKeys` times this.
pub const MAX_KEY_BYTES: usize = 1024;

fn to_core(tiers: Vec<TierOptions>) -> std::result::Result<Vec<TierConfig>, ConfigError> {
    tiers
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let per_key = match t.per_key {
                None => None,
                Some(pk) => {
                    if !(pk.max_keys.fract() == 0.0 && pk.max_keys >= 1.0 && pk.max_keys <= u32::MAX as f64) {
                        return Err(ConfigError(format!(
                            "tiers[{i}].perKey.maxKeys must be an integer from 1 to {} (got {})",
                            u32::MAX,
                            js_number(pk.max_keys)
                        )));
                    }
                    Some(PerKeyConfig { capacity: pk.capacity, refill_per_sec: pk.refill_per_sec, max_keys: pk.max_keys as usize, idle_ttl_ms: pk.idle_ttl_ms })
                }
            };
            Ok(TierConfig { name: t.name, capacity: t.capacity, refill_per_sec: t.refill_per_sec, protected: t.protected, per_key })
        })
        .collect()
}

/// Config errors surface as `InvalidArg`; lib/ledger.js rethrows them as `RangeError`.
fn config_error(e: ConfigError) -> Error {
    Error::new(Status::InvalidArg, e.0)
}

fn build(tiers: Vec<TierOptions>) -> Result<Ledger> {
    Ledger::new(to_core(tiers).map_err(config_error)?).map_err(config_error)
}

/// Ledgers shared by name across the process's threads. Held weakly: a shared ledger lives while any
/// thread holds it.
static SHARED: LazyLock<Mutex<HashMap<String, Weak<Ledger>>>> = LazyLock::new(Default::default);

#[napi]
pub struct LedgerHandle {
    pub(crate) inner: Arc<Ledger>,
    /// Made by `new`: never in `SHARED`, so only the JS thread that made it can reach it (a JS object
    /// does not cross threads), and its slot debits need no atomic read-modify-write.
    exclusive: bool,
}

#[napi]
impl LedgerHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, tiers: Vec<TierOptions>) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::new");
        Ok(LedgerHandle { inner: Arc::new(build(tiers)?), exclusive: true })
    }

    /// The ledger registered under `name` in this process, created from `tiers` if there is none.
    /// `tiers` must equal the existing ledger's configuration; without `tiers`, the ledger must exist.
    #[napi(factory, catch_unwind)]
    pub fn shared(env: Env, name: String, tiers: Option<Vec<TierOptions>>) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::shared");
        let config = tiers.map(to_core).transpose().map_err(config_error)?;
        let mut map = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = map.get(&name).and_then(Weak::upgrade) {
            if let Some(config) = &config {
                if existing.config() != config.as_slice() {
                    return Err(Error::new(Status::GenericFailure, format!("Ledger.shared({name:?}): a ledger of that name exists with a different config")));
                }
            }
            return Ok(LedgerHandle { inner: existing, exclusive: false });
        }
        let Some(config) = config else {
            return Err(Error::new(Status::GenericFailure, format!("Ledger.shared({name:?}): no ledger of that name exists yet; pass its config")));
        };
        let ledger = Arc::new(Ledger::new(config).map_err(config_error)?);
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(name, Arc::downgrade(&ledger));
        Ok(LedgerHandle { inner: ledger, exclusive: false })
    }

    /// Whether two handles share one native ledger.
    #[napi(catch_unwind)]
    pub fn same_as(&self, env: Env, other: &LedgerHandle) -> bool {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::same_as");
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The bits of a `tryConsumeSlot` code that hold the tier (its other bits hold the slot index).
    #[napi(catch_unwind)]
    pub fn slot_code_bits(&self, env: Env) -> u32 {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::slot_code_bits");
        code_bits(self.inner.tier_count())
    }

    /// Per tier, its per-key `maxKeys`, or 0 for a tier without per-key buckets.
    #[napi(catch_unwind)]
    pub fn max_keys(&self, env: Env) -> Vec<f64> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::max_keys");
        self.inner.config().iter().map(|t| t.per_key.as_ref().map_or(0.0, |k| k.max_keys as f64)).collect()
    }

    #[napi(catch_unwind)]
    pub fn tier_names(&self, env: Env) -> Vec<String> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::tier_names");
        (0..self.inner.tier_count()).map(|i| self.inner.tier_name(i).to_owned()).collect()
    }

    /// An out-of-range tier would panic in the core, and a panic here aborts the process: every
    /// method that takes a tier id checks it, whatever lib/ledger.js already checked.
    fn tier(&self, tier: u32) -> Result<usize> {
        let count = self.inner.tier_count();
        if (tier as usize) < count {
            Ok(tier as usize)
        } else {
            Err(Error::new(Status::InvalidArg, format!("tier id {tier} is out of range (the ledger has {count} tiers)")))
        }
    }

    #[napi(catch_unwind)]
    pub fn set_refill_scale(&self, env: Env, tier: u32, scale: f64) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::set_refill_scale");
        if !(0.0..=1.0).contains(&scale) {
            return Err(Error::new(Status::InvalidArg, format!("scale must be between 0 and 1 (got {scale})")));
        }
        self.inner.set_refill_scale(self.tier(tier)?, scale);
        Ok(())
    }

    #[napi(catch_unwind)]
    pub fn refill_scale(&self, env: Env, tier: u32) -> Result<f64> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::refill_scale");
        Ok(self.inner.refill_scale(self.tier(tier)?))
    }

    #[napi(catch_unwind)]
    pub fn snapshot(&self, env: Env) -> Vec<TierSnapshot> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::snapshot");
        self.inner
            .snapshot()
            .into_iter()
            .map(|s| TierSnapshot {
                name: s.name,
                protected: s.protected,
                tokens: s.tokens,
                capacity: s.capacity,
                refill_per_sec: s.refill_per_sec,
                refill_scale: s.refill_scale,
                keys: s.keys as u32,
            })
            .collect()
    }

    /// Returns how many buckets were reset.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: Env, tier: Option<u32>, key: Option<String>) -> Result<u32> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::reset");
        let tier = tier.map(|t| self.tier(t)).transpose()?;
        Ok(self.inner.reset(tier, key.as_deref().map(str::as_bytes)) as u32)
    }

    /// Defines the hot-path function `consume` and the Float64Array `result` on `target` (the JS
    /// `Ledger`), and on `internal` (kept private by lib/ledger.js, which builds the public
    /// `tryConsume` from them) the raw callbacks `tryConsume(tier, key?, cost?)`,
    /// `tryConsumeKeyed(tier, key, cost, index)` and `tryConsumeSlot(tier, index, cost)`.
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object, internal: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "LedgerHandle::bind");
        let slots = (0..self.inner.tier_count()).map(|_| UnsafeCell::new(Vec::new())).collect();
        let code_bits = code_bits(self.inner.tier_count());
        let bound = Arc::new(Bound {
            ledger: self.inner.clone(),
            out: Box::new(UnsafeCell::new([0.0; RESULT_LEN])),
            slots,
            slot_args: Box::new(UnsafeCell::new([0.0; 3])),
            slot_hits: UnsafeCell::new(vec![0.0; self.inner.tier_count()].into_boxed_slice()),
            code_bits,
            exclusive: self.exclusive,
        });
        let (env, target, internal) = (env.raw(), target.raw(), internal.raw());
        unsafe {
            let out = bound.out.get() as *mut f64;
            raw::define_f64_view(env, target, c"result", out, RESULT_LEN, &bound)?;
            raw::define_fn(env, target, "consume", consume, bound.clone())?;
            raw::define_fn(env, internal, "tryConsume", try_consume, bound.clone())?;
            raw::define_fn(env, internal, "tryConsumeKeyed", try_consume_keyed, bound.clone())?;
            let args = bound.slot_args.get() as *mut f64;
            raw::define_f64_view(env, internal, c"slotArgs", args, 3, &bound)?;
            let hits = &mut *bound.slot_hits.get();
            raw::define_f64_view(env, internal, c"slotHits", hits.as_mut_ptr(), hits.len(), &bound)?;
            raw::define_fn(env, internal, "tryConsumeSlot", try_consume_slot, bound)?;
        }
        Ok(())
    }
}

/// What the raw callbacks carry: the ledger, this JS object's result buffer, and per tier the slots of
/// the keys that this JS object's key cache (lib/ledger.js) holds, by the index the cache gave them.
struct Bound {
    ledger: Arc<Ledger>,
    out: Box<UnsafeCell<[f64; RESULT_LEN]>>,
    slots: Box<[UnsafeCell<Vec<Slot>>]>,
    /// `tryConsumeSlot`'s arguments `[code, cost]`, written by JS into a Float64Array over them: two
    /// typed-array stores cost less than reading a number argument through N-API.
    slot_args: Box<UnsafeCell<[f64; 3]>>,
    /// Per tier, the debits `tryConsumeSlot` made: how lib/ledger.js tells whether its key cache pays.
    slot_hits: UnsafeCell<Box<[f64]>>,
    /// Bits of a `tryConsumeSlot` code that hold the tier.
    code_bits: u32,
    /// The ledger is `LedgerHandle::exclusive` (this thread's alone).
    exclusive: bool,
}

/// The bits `tryConsumeSlot` codes give to the tier, for `tiers` tiers.
fn code_bits(tiers: usize) -> u32 {
    tiers.next_power_of_two().trailing_zeros()
}

// The result buffer and the slots are only used by the JS thread that owns the functions and the
// array (a JS object never crosses threads; each thread of a Ledger.shared has its own Bound).
unsafe impl Send for Bound {}
unsafe impl Sync for Bound {}

/// The most slots one tier's key cache may index (lib/ledger.js caps its cache at this).
const MAX_SLOTS: usize = 1 << 20;

/// Defines, for the benchmark, `target.noop(tier, key, cost)`: a raw callback that takes the same
/// arguments as `tryConsume` and returns `false` (the floor), and `target.readKey(tier, key)`, which
/// also reads the key into a stack buffer (the floor plus the string read).
#[napi(catch_unwind)]
pub fn define_bench_floor(env: Env, target: Object) -> Result<()> {
    let _panic = raw::throw_on_panic(&env, "define_bench_floor");
    raw::guarded!(noop = "benchFloor.noop" => noop_unguarded);
    raw::guarded!(read_key = "benchFloor.readKey" => read_key_unguarded);
    #[inline(always)]
    unsafe fn noop_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
        let _ = raw::args::<3>(env, info);
        raw::boolean(env, false)
    }
    #[inline(always)]
    unsafe fn read_key_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
        let (argv, _, _) = raw::args::<3>(env, info);
        let mut stack = [0u8; 256];
        let mut heap = Vec::new();
        let len = raw::get_key(env, argv[1], &mut stack, &mut heap).map_or(0, |k| k.len());
        raw::boolean(env, len == 0)
    }
    unsafe {
        raw::define_fn(env.raw(), target.raw(), "noop", noop, Arc::new(()))?;
        raw::define_fn(env.raw(), target.raw(), "readKey", read_key, Arc::new(()))
    }
}

fn type_name(t: sys::napi_valuetype) -> &'static str {
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
unsafe fn tier_arg(env: sys::napi_env, ledger: &Ledger, v: sys::napi_value) -> std::result::Result<usize, ()> {
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
unsafe fn cost_arg(env: sys::napi_env, argc: usize, v: sys::napi_value) -> std::result::Result<f64, ()> {
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
unsafe fn debit<const DETAIL: bool>(env: sys::napi_env, ledger: &Ledger, argv: &[sys::napi_value], argc: usize) -> Option<crate::core::ledger::Outcome> {
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

raw::guarded!(try_consume = "Ledger.tryConsume" => try_consume_unguarded);
/// `tryConsume(tier, key?, cost = 1) -> boolean`
#[inline(always)]
unsafe fn try_consume_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<3>(env, info);
    let bound = &*(data as *const Bound);
    match debit::<false>(env, &bound.ledger, &argv, argc) {
        Some(o) => raw::boolean(env, o.allowed),
        None => ptr::null_mut(),
    }
}

raw::guarded!(try_consume_keyed = "Ledger.tryConsumeKeyed" => try_consume_keyed_unguarded);
/// `tryConsumeKeyed(tier, key, cost, index) -> boolean`: `tryConsume(tier, key, cost)` with every
/// argument read and checked as there, which also records where the key's bucket is as slot `index`
/// of the tier, for `tryConsumeSlot`. `index` may be at most the count of slots recorded so far (it
/// then adds one); anything else is not recorded.
#[inline(always)]
unsafe fn try_consume_keyed_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
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

raw::guarded!(try_consume_slot = "Ledger.tryConsumeSlot" => try_consume_slot_unguarded);
/// `tryConsumeSlot(code, cost = 1) -> boolean | null`: `tryConsume(tier, key, cost)` for the key
/// recorded as slot `index` of `tier` by `tryConsumeKeyed`, without reading or hashing the key; `code`
/// is `index * 2^b + tier`, `b` the bits of the tier count (`slotCodeBits`; one argument fewer to
/// read, ~2 ns). `null` when there is no such slot or it went stale (evicted, moved, reset): nothing
/// was debited; look the key up again with `tryConsumeKeyed`. `code` is trusted to be a non-negative
/// integer (lib/ledger.js passes its own); `cost` is checked as `tryConsume` checks it.
#[inline(always)]
unsafe fn try_consume_slot_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
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
const SLOT_STALE: f64 = -1.0;

raw::guarded!(consume = "Ledger.consume" => consume_unguarded);
/// `consume(tier, key?, cost = 1, out?) -> boolean`, writing
/// `[allowed, remaining, limit, retryAfterMs, resetMs, limitedBy]` into `out` (a Float64Array of at
/// least 6) or into the ledger's own `result`.
#[inline(always)]
unsafe fn consume_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
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

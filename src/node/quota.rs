//! `QuotaHandle`: the napi face of `core::quota::Quota`, the lease engine of cluster mode and the
//! decision service.
//!
//! Off the hot path (construction, `poll`, `grant`, `fail`, `releaseAll`, stats) it is an ordinary
//! `#[napi]` class: those run once per store round trip, not per request. The hot path, `trySpend`,
//! is a raw callback that `bind` defines on the JS object with the engine as its data pointer: the
//! limit read as a number, the key into a stack buffer, a small integer returned (`Code`), the wait
//! of a refusal written into a Float64Array (`result`). A spend that needs a lease leaves its request
//! with the engine's outbox for the next `poll` (lib/quota/driver.js polls at once when told so), so
//! no object crosses on the hot path either way.
use crate::core::clock::{Clock, MonotonicClock};
use crate::core::ledger::{js_number, ConfigError};
use crate::core::names::named_enum;
use crate::core::quota::{
    Action, Algorithm, Fallback, Grant, LeaseId, LimitConfig, LimitId, Quota, QuotaConfig, Refusal, Request, RequestId, Return, ReturnReason, Source, Spend,
    Unfunded,
};
use crate::core::quota::{
    IDLE_TTL_MS, INITIAL_LEASE, LEAD_TIME_MS, LEASE_TTL_MS, MAX_KEYS, MAX_LEASE, MIN_HOLDERS, RENEWAL_PERIOD_MS, RETRY_MS, SWEEP_PER_POLL,
};
use crate::node::ledger::MAX_KEY_BYTES;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;
use parking_lot::Mutex;
use std::cell::UnsafeCell;
use std::sync::Arc;

named_enum! {
    /// What `trySpend` returns. Admitted: `Lease`, `Provisional`, `Fallback`. Waiting on the store:
    /// `NeedLease` (a request is queued for the next poll), `Awaiting` (one is in flight). The rest
    /// are refusals, with `result[0]` the ms until asking again may succeed (Infinity: not by waiting).
    #[derive(Clone, Copy)]
    enum Code: u8 {
        Lease = "LEASE",
        Provisional = "PROVISIONAL",
        Fallback = "FALLBACK",
        NeedLease = "NEED_LEASE",
        Awaiting = "AWAITING",
        Exhausted = "EXHAUSTED",
        StoreDown = "STORE_DOWN",
        Share = "SHARE",
        Full = "FULL",
        /// Never from `trySpend`: lib/quota/driver.js's answer to a spend that waited its whole
        /// `storeTimeoutMs` for its key while the store kept answering (a contended key near its
        /// limit, its last tokens going out one per round trip). A refusal; not a fallback.
        Waited = "WAITED",
    }
}

named_enum! {
    /// `ReturnReason` as JS reads it.
    #[derive(Clone, Copy)]
    enum Reason: u8 {
        Released = "released",
        Evicted = "evicted",
        Expired = "expired",
        Late = "late",
        Unusable = "unusable",
        Overflow = "overflow",
        Spent = "spent",
    }
}

fn reason(r: ReturnReason) -> Reason {
    match r {
        ReturnReason::Released => Reason::Released,
        ReturnReason::Evicted => Reason::Evicted,
        ReturnReason::Expired => Reason::Expired,
        ReturnReason::Late => Reason::Late,
        ReturnReason::Unusable => Reason::Unusable,
        ReturnReason::Overflow => Reason::Overflow,
        ReturnReason::Spent => Reason::Spent,
    }
}

/// Tokens and ids cross as JS numbers: exact up to 2^53.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
const NS_PER_MS: f64 = 1e6;

/// One limit, complete (lib/quota/engine.js checks types and fills defaults; the core checks values).
#[napi(object)]
pub struct QuotaLimitOptions {
    pub name: String,
    /// "bucket" (`rate`, `burst`), "window" (a fixed window: `limit`, `windowMs`) or "sliding" (a
    /// sliding window: the same, and the store is told when a lease runs dry).
    pub algorithm: String,
    pub rate: f64,
    pub burst: f64,
    pub limit: f64,
    pub window_ms: f64,
    /// The provisional allowance; 0: a key without lease waits for the store (exact).
    pub provisional: f64,
    /// "open" or "closed".
    pub fallback: String,
    pub renewal_period_ms: f64,
    pub lead_time_ms: f64,
    pub lease_ttl_ms: f64,
    pub max_lease: f64,
    pub initial_lease: f64,
    pub retry_ms: f64,
    pub min_holders: f64,
}

#[napi(object)]
pub struct QuotaOptions {
    pub limits: Vec<QuotaLimitOptions>,
    pub max_keys: f64,
    pub idle_ttl_ms: f64,
    pub sweep_per_poll: f64,
}

/// "Lease `size` tokens of `key` under limit `limit` for `ttlMs`": answer with `grant` or `fail`.
#[napi(object)]
pub struct QuotaRequest {
    pub id: f64,
    pub limit: u32,
    pub key: String,
    pub size: f64,
    pub ttl_ms: f64,
}

/// Tokens of `lease` the engine will not spend: send them back (best effort).
#[napi(object)]
pub struct QuotaReturn {
    pub limit: u32,
    pub key: String,
    pub lease: f64,
    pub tokens: f64,
    pub reason: String,
    /// Ms since the lease was last spent from, when it was (a sliding window's record ends one
    /// window after that).
    pub idle_ms: Option<f64>,
}

#[napi(object)]
pub struct QuotaWork {
    pub requests: Vec<QuotaRequest>,
    pub returns: Vec<QuotaReturn>,
}

/// The store's answer to a request (`wire::Grant`, times in ms).
#[napi(object)]
pub struct QuotaGrant {
    pub granted: f64,
    pub ttl_ms: f64,
    pub remaining: f64,
    pub holders: f64,
    pub lease: f64,
    pub retry_after_ms: f64,
}

#[napi(object)]
pub struct QuotaStats {
    pub spent_lease: f64,
    pub spent_provisional: f64,
    pub spent_fallback: f64,
    pub refused: f64,
    pub requests: f64,
    pub grants: f64,
    pub failures: f64,
    pub abandoned: f64,
    pub granted: f64,
    pub repaid: f64,
    pub expired: f64,
    pub returned: f64,
    pub returns_dropped: f64,
    pub evicted: f64,
    pub keys: u32,
    pub store_up: bool,
}

/// `{ codes: { LEASE: 0, ... }, reasons: [...], defaults: { renewalPeriodMs, ... }, maxKeyBytes }`:
/// what lib/quota shares with the engine, declared here only.
#[napi(js_name = "quotaConstants", catch_unwind)]
pub fn quota_constants(env: Env) -> Result<Object<'static>> {
    let _panic = raw::throw_on_panic(&env, "quota_constants");
    let mut codes = Object::new(&env)?;
    for (i, name) in Code::NAMES.iter().enumerate() {
        codes.set(*name, i as u32)?;
    }
    let mut d = Object::new(&env)?;
    d.set("renewalPeriodMs", RENEWAL_PERIOD_MS)?;
    d.set("leadTimeMs", LEAD_TIME_MS)?;
    d.set("leaseTtlMs", LEASE_TTL_MS)?;
    d.set("maxLease", MAX_LEASE as f64)?;
    d.set("initialLease", INITIAL_LEASE as f64)?;
    d.set("retryMs", RETRY_MS)?;
    d.set("minHolders", MIN_HOLDERS)?;
    d.set("maxKeys", MAX_KEYS as f64)?;
    d.set("idleTtlMs", IDLE_TTL_MS)?;
    d.set("sweepPerPoll", SWEEP_PER_POLL as f64)?;
    let mut o = Object::new(&env)?;
    o.set("codes", codes)?;
    o.set("reasons", Reason::NAMES.to_vec())?;
    o.set("defaults", d)?;
    o.set("maxKeyBytes", MAX_KEY_BYTES as u32)?;
    Ok(Object::from_raw(env.raw(), o.raw()))
}

/// An integer option given as a JS number (the core checks its range).
fn integer(what: &str, v: f64) -> std::result::Result<u64, ConfigError> {
    if v.is_finite() && v.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&v) {
        Ok(v as u64)
    } else {
        Err(ConfigError(format!("{what} must be an integer >= 0 (got {})", js_number(v))))
    }
}

fn to_core(o: QuotaOptions) -> std::result::Result<QuotaConfig, ConfigError> {
    let mut limits = Vec::with_capacity(o.limits.len());
    for (i, l) in o.limits.into_iter().enumerate() {
        let at = |f: &str| format!("limits[{i}].{f}");
        let algorithm = match l.algorithm.as_str() {
            "bucket" => Algorithm::TokenBucket { rate_per_sec: l.rate, burst: l.burst },
            "window" | "sliding" => Algorithm::Window { limit: l.limit, window_ms: l.window_ms },
            other => return Err(ConfigError(format!("{} must be \"bucket\", \"window\" or \"sliding\" (got {other:?})", at("algorithm")))),
        };
        let spent_returns = l.algorithm == "sliding";
        let fallback = match l.fallback.as_str() {
            "open" => Fallback::Open,
            "closed" => Fallback::Closed,
            other => return Err(ConfigError(format!("{} must be \"open\" or \"closed\" (got {other:?})", at("fallback")))),
        };
        let allowance = integer(&at("provisional"), l.provisional)?;
        let min_holders = integer(&at("minHolders"), l.min_holders)?;
        limits.push(LimitConfig {
            name: l.name,
            algorithm,
            unfunded: if allowance == 0 { Unfunded::Wait } else { Unfunded::Provisional { allowance } },
            fallback,
            renewal_period_ms: l.renewal_period_ms,
            lead_time_ms: l.lead_time_ms,
            lease_ttl_ms: l.lease_ttl_ms,
            max_lease: integer(&at("maxLease"), l.max_lease)?,
            initial_lease: integer(&at("initialLease"), l.initial_lease)?,
            retry_ms: l.retry_ms,
            min_holders: u32::try_from(min_holders).map_err(|_| ConfigError(format!("{} must be at most {}", at("minHolders"), u32::MAX)))?,
            spent_returns,
        });
    }
    let mut cfg = QuotaConfig::new(limits);
    cfg.max_keys = integer("maxKeys", o.max_keys)? as usize;
    cfg.idle_ttl_ms = o.idle_ttl_ms;
    cfg.sweep_per_poll = integer("sweepPerPoll", o.sweep_per_poll)? as usize;
    Ok(cfg)
}

/// Config errors surface as `InvalidArg`; lib/quota/engine.js rethrows them as `RangeError`.
fn invalid(msg: String) -> Error {
    Error::new(Status::InvalidArg, msg)
}

/// The engine and what the raw callback writes. One lock: the engine is `&mut self` throughout, and
/// every call is short (no I/O under it).
struct Engine {
    quota: Mutex<State>,
    clock: MonotonicClock,
    limits: usize,
    /// `[retryAfterMs]` of the last refusal, viewed by JS as `result`.
    out: Box<UnsafeCell<[f64; 1]>>,
}

// `out` is only written by the JS thread that owns the function and the array; the engine is locked.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

/// The engine, and the requests of spends that came back `NeedLease`, for the next `poll`.
struct State {
    quota: Quota,
    urgent: Vec<Request>,
}

impl Engine {
    fn now(&self) -> u64 {
        self.clock.now_ns()
    }
}

fn request(r: Request) -> QuotaRequest {
    QuotaRequest {
        id: r.id.0 as f64,
        limit: u32::from(r.limit.index() as u16),
        key: String::from_utf8_lossy(&r.key).into_owned(),
        size: r.size as f64,
        ttl_ms: r.ttl_ns as f64 / NS_PER_MS,
    }
}

fn give_back(r: Return) -> QuotaReturn {
    QuotaReturn {
        limit: r.limit.index() as u32,
        key: String::from_utf8_lossy(&r.key).into_owned(),
        lease: r.lease.0 as f64,
        tokens: r.tokens as f64,
        reason: reason(r.reason).as_str().to_owned(),
        // Rounded down: the store's record then ends no earlier than one window after the last spend.
        idle_ms: r.idle_ns.map(|ns| (ns / 1_000_000) as f64),
    }
}

#[napi]
pub struct QuotaHandle {
    inner: Arc<Engine>,
}

#[napi]
impl QuotaHandle {
    #[napi(constructor, catch_unwind)]
    pub fn new(env: Env, options: QuotaOptions) -> Result<Self> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::new");
        let cfg = to_core(options).map_err(|e| invalid(e.0))?;
        let limits = cfg.limits.len();
        let quota = Quota::new(cfg).map_err(|e| invalid(e.0))?;
        Ok(QuotaHandle {
            inner: Arc::new(Engine {
                quota: Mutex::new(State { quota, urgent: Vec::new() }),
                clock: MonotonicClock,
                limits,
                out: Box::new(UnsafeCell::new([0.0])),
            }),
        })
    }

    /// Limit names by id.
    #[napi(catch_unwind)]
    pub fn limit_names(&self, env: Env) -> Vec<String> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::limit_names");
        let st = self.inner.quota.lock();
        let q = &st.quota;
        (0..self.inner.limits).filter_map(|i| q.limit_at(i)).map(|l| q.limit_config(l).name.clone()).collect()
    }

    /// The work due now: requests to send and returns to send.
    #[napi(catch_unwind)]
    pub fn poll(&self, env: Env) -> QuotaWork {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::poll");
        let now = self.inner.now();
        let mut st = self.inner.quota.lock();
        let mut urgent = std::mem::take(&mut st.urgent);
        for r in &mut urgent {
            st.quota.top_up(r);
        }
        let mut work = QuotaWork { requests: urgent.into_iter().map(request).collect(), returns: Vec::new() };
        for a in st.quota.poll(now) {
            match a {
                Action::Request(r) => work.requests.push(request(r)),
                Action::Return(r) => work.returns.push(give_back(r)),
            }
        }
        work
    }

    /// Whether `poll` has work now.
    #[napi(catch_unwind)]
    pub fn wants_poll(&self, env: Env) -> bool {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::wants_poll");
        let st = self.inner.quota.lock();
        !st.urgent.is_empty() || st.quota.wants_poll()
    }

    /// The store's answer to request `id`; returns the tokens to send back at once, if any.
    #[napi(catch_unwind)]
    pub fn grant(&self, env: Env, limit: u32, key: String, id: f64, g: QuotaGrant) -> Result<Option<QuotaReturn>> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::grant");
        let limit = self.limit(limit)?;
        let count = |what: &str, v: f64| -> Result<u64> {
            if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v <= MAX_SAFE {
                Ok(v as u64)
            } else {
                Err(invalid(format!("grant: {what} must be an integer >= 0 (got {})", js_number(v))))
            }
        };
        let ms = |what: &str, v: f64| -> Result<u64> {
            if v.is_finite() && v >= 0.0 {
                // Down, never up: the engine's expiry must not be later than the store's.
                Ok((v * NS_PER_MS).floor() as u64)
            } else {
                Err(invalid(format!("grant: {what} must be a finite number >= 0 (got {})", js_number(v))))
            }
        };
        let grant = Grant {
            granted: count("granted", g.granted)?,
            ttl_ns: ms("ttlMs", g.ttl_ms)?,
            remaining: count("remaining", g.remaining)?,
            holders: u32::try_from(count("holders", g.holders)?).unwrap_or(u32::MAX),
            lease: LeaseId(count("lease", g.lease)?),
            retry_after_ns: ms("retryAfterMs", g.retry_after_ms)?,
        };
        let id = RequestId(count("id", id)?);
        let now = self.inner.now();
        Ok(self.inner.quota.lock().quota.grant(limit, key.as_bytes(), id, grant, now).map(give_back))
    }

    /// The store did not answer request `id` (an error, or the caller's timeout).
    #[napi(catch_unwind)]
    pub fn fail(&self, env: Env, limit: u32, key: String, id: f64) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::fail");
        let limit = self.limit(limit)?;
        if !(id.is_finite() && (0.0..=MAX_SAFE).contains(&id)) {
            return Err(invalid(format!("fail: id must be an integer >= 0 (got {})", js_number(id))));
        }
        let now = self.inner.now();
        self.inner.quota.lock().quota.fail(limit, key.as_bytes(), RequestId(id as u64), now);
        Ok(())
    }

    /// Every unspent lease token, to send back at shutdown; the engine is left empty.
    #[napi(catch_unwind)]
    pub fn release_all(&self, env: Env) -> Vec<QuotaReturn> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::release_all");
        let now = self.inner.now();
        let mut st = self.inner.quota.lock();
        st.urgent.clear();
        st.quota.release_all(now).into_iter().map(give_back).collect()
    }

    #[napi(catch_unwind)]
    pub fn stats(&self, env: Env) -> QuotaStats {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::stats");
        let st = self.inner.quota.lock();
        let q = &st.quota;
        let s = q.stats();
        QuotaStats {
            spent_lease: s.spent_lease as f64,
            spent_provisional: s.spent_provisional as f64,
            spent_fallback: s.spent_fallback as f64,
            refused: s.refused as f64,
            requests: s.requests as f64,
            grants: s.grants as f64,
            failures: s.failures as f64,
            abandoned: s.abandoned as f64,
            granted: s.granted as f64,
            repaid: s.repaid as f64,
            expired: s.expired as f64,
            returned: s.returned as f64,
            returns_dropped: s.returns_dropped as f64,
            evicted: s.evicted as f64,
            keys: q.keys() as u32,
            store_up: q.store_up(),
        }
    }

    /// `[held, debt, pending]` of `key`: unexpired lease tokens, provisional debt, a request in flight.
    #[napi(catch_unwind)]
    pub fn key_state(&self, env: Env, limit: u32, key: String) -> Result<Vec<f64>> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::key_state");
        let limit = self.limit(limit)?;
        let now = self.inner.now();
        let st = self.inner.quota.lock();
        let q = &st.quota;
        let k = key.as_bytes();
        Ok(vec![q.held(limit, k, now) as f64, q.debt(limit, k) as f64, f64::from(u8::from(q.pending(limit, k)))])
    }

    /// Defines `trySpend(limit, key, cost = 1) -> code` (raw callback) and the Float64Array `result`
    /// on `target`.
    #[napi(catch_unwind)]
    pub fn bind(&self, env: Env, target: Object) -> Result<()> {
        let _panic = raw::throw_on_panic(&env, "QuotaHandle::bind");
        let (env, target) = (env.raw(), target.raw());
        unsafe {
            let out = self.inner.out.get() as *mut f64;
            raw::define_f64_view(env, target, c"result", out, 1, &self.inner)?;
            raw::define_fn(env, target, "trySpend", try_spend, self.inner.clone())
        }
    }

    /// An out-of-range limit would panic in the core: every method that takes one checks it.
    fn limit(&self, limit: u32) -> Result<LimitId> {
        let st = self.inner.quota.lock();
        let q = &st.quota;
        q.limit_at(limit as usize).ok_or_else(|| invalid(format!("limit id {limit} is out of range (the engine has {} limits)", self.inner.limits)))
    }
}

raw::guarded!(try_spend = "Quota.trySpend" => try_spend_unguarded);
/// `trySpend(limit, key, cost = 1) -> code` (`Code`): one spend, from local state only.
#[inline(always)]
unsafe fn try_spend_unguarded(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let (argv, argc, data) = raw::args::<3>(env, info);
    let engine = &*(data as *const Engine);
    let limit = match raw::get_f64(env, argv[0]) {
        Some(n) if n >= 0.0 && n < engine.limits as f64 && (n as usize) as f64 == n => n as usize,
        Some(n) => {
            return raw::throw_range_error(env, &format!("limit {} is not a limit id of this engine (ids are 0 to {})", js_number(n), engine.limits - 1))
        }
        None => return raw::throw_type_error(env, "limit must be a limit id (number)"),
    };
    let mut stack = [0u8; 256];
    let mut heap = Vec::new();
    let key = match raw::get_key(env, argv[1], &mut stack, &mut heap) {
        Some(k) if k.len() <= MAX_KEY_BYTES => k,
        Some(k) => return raw::throw_range_error(env, &format!("key is {} bytes long; the limit is {MAX_KEY_BYTES}", k.len())),
        None => return raw::throw_type_error(env, "key must be a string"),
    };
    let cost = if argc < 3 || raw::type_of(env, argv[2]) == sys::ValueType::napi_undefined {
        1
    } else {
        match raw::get_f64(env, argv[2]) {
            Some(c) if (0.0..=MAX_SAFE).contains(&c) && (c as u64) as f64 == c => c as u64,
            Some(c) => return raw::throw_range_error(env, &format!("cost must be an integer >= 0 (got {})", js_number(c))),
            None => return raw::throw_type_error(env, "cost must be a number"),
        }
    };
    let now = engine.now();
    let mut st = engine.quota.lock();
    let id = st.quota.limit_at(limit).expect("limit checked above");
    let spend = st.quota.try_spend(id, key, cost, now);
    let code = match spend {
        Spend::Spent(Source::Lease) => Code::Lease,
        Spend::Spent(Source::Provisional) => Code::Provisional,
        Spend::Spent(Source::Fallback) => Code::Fallback,
        // The engine has marked the key pending; its request goes out with the next poll.
        Spend::NeedLease(r) => {
            st.urgent.push(r);
            Code::NeedLease
        }
        Spend::Awaiting => Code::Awaiting,
        Spend::Refused { reason, retry_after_ns } => {
            (*engine.out.get())[0] = if retry_after_ns == u64::MAX { f64::INFINITY } else { retry_after_ns as f64 / NS_PER_MS };
            match reason {
                Refusal::Exhausted => Code::Exhausted,
                Refusal::StoreDown => Code::StoreDown,
                Refusal::Share => Code::Share,
                Refusal::Full => Code::Full,
            }
        }
    };
    drop(st);
    raw::int32(env, code as i32)
}

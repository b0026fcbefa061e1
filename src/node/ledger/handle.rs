//! The `#[napi]` class `LedgerHandle`: construction (own or shared by name), binding the hot path,
//! refill scales, snapshots and resets. Off the hot path.
use super::hot::{code_bits, consume, try_consume, try_consume_keyed, try_consume_slot, Bound, RESULT_LEN};
use super::options::{build, config_error, to_core, TierOptions};
use crate::core::ledger::Ledger;
use crate::node::raw;
use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

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

/// Ledgers shared by name across the process's threads. Held weakly: a shared ledger lives while any
/// thread holds it.
pub(crate) static SHARED: LazyLock<Mutex<HashMap<String, Weak<Ledger>>>> = LazyLock::new(Default::default);

#[napi]
pub struct LedgerHandle {
    pub(crate) inner: Arc<Ledger>,
    /// Made by `new`: never in `SHARED`, so only the JS thread that made it can reach it (a JS object
    /// does not cross threads), and its slot debits need no atomic read-modify-write.
    pub(crate) exclusive: bool,
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

//! The in-memory ledger: tiers of token buckets, highest priority first, each with a shared pool and,
//! optionally, one bucket per key (user, IP, API client) inside it.
//!
//! * A keyed debit takes from the tier pool and the key's bucket atomically: both or neither. The key's
//!   entry lock (a `parking_lot::Mutex`, one per key, on the entry's own cache line) is held while the
//!   tier is debited (lock order: shard, then entry, then pool; nothing takes them the other way round),
//!   so no other debit of that key can slip in between the check and the debit. The shard's lock (also
//!   parking_lot: its holder allocates and scans for eviction, so a waiter must park rather than spin
//!   behind a preempted holder) is held only to find or insert the key; a debit by slot skips it.
//! * Tokens are fractional and refilled continuously from a monotonic nanosecond clock, clamped to the
//!   capacity. A cost above the capacity never succeeds.
//! * `try_consume_now`, the boolean hot path, reads CLOCK_MONOTONIC_COARSE where that is safe
//!   (`coarse_is_safe`); everything else (`consume` with its headers, snapshots, scale changes) reads
//!   CLOCK_MONOTONIC. The precise clock costs 20–50 ns a read here (most of a keyed debit), the coarse
//!   one ~5 ns, but it lags the true time by up to one tick T (4 ms here). That lag loses no token: a
//!   bucket credits `(now − last_ns) × rate` from its stored timestamp and never moves it backwards, so
//!   whatever mix of readings it sees, it has been credited exactly `(latest reading − first) × rate`
//!   (clamped); a lagging reading only leaves the rest for the next call. Nor does it refuse anything
//!   the precise clock would admit: a refusal short of at most two ticks' refill is asked again at the
//!   precise time (one further short stands either way, as long as the lag is under two ticks). What remains is that an admitted
//!   debit may be stamped up to T early, so a bucket full at that moment is credited up to `rate × T`
//!   more than the precise clock would give it: a window of length W may grant up to
//!   `capacity + rate × (W + T)` instead of `capacity + rate × W`. Hence the coarse clock only where
//!   `rate × T` is at most 1/`COARSE_SHARE` of the capacity of every pool and per-key bucket. Eviction's
//!   "least recently touched" is likewise resolved to a tick.
//! * `set_refill_scale` (0..=1) scales the refill of a tier pool: the lever the shed controller pulls.
//!   Keyed buckets are quotas and keep their own rate.
//! * The pool scales across threads: each thread debits a small lease of the pool's tokens held in its
//!   own cache-line-padded atomic stripe (keyed debits too), and only takes the pool's lock to renew
//!   the lease. A keyed debit of a key this thread already found (a slot) thus writes only its entry's
//!   line and its stripe's: no line another thread's debits use. Leases are the pool's tokens moved,
//!   never created: a debit is refused only after every stripe's lease has been pulled back into the
//!   pool (`lease.rs`), so "allowed iff the tier holds `cost` tokens" stays exact.
//! * Keyed state is bounded: see `core::keymap` (shards, slots, eviction).
//!
//! Files: `config.rs` (tier options and their validation), `outcome.rs` (what a debit returns),
//! `coarse.rs` (the ledger's clocks), `tier.rs` (a tier and its pool), `stripes.rs` (per-thread lease
//! stripes), `lease.rs` (the lease protocol), `debit.rs` (the debits themselves), `model.rs` (the
//! protocol model-checked with loom, under `cfg(loom)`: `npm run test:model`).
mod coarse;
mod config;
mod debit;
mod lease;
#[cfg(all(test, loom))]
mod model;
mod outcome;
mod stripes;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod thread_tests;
mod tier;

pub use crate::core::keymap::Slot;
pub use config::{js_number, ConfigError, PerKeyConfig, TierConfig};
pub use outcome::{Limit, Outcome, TierSnapshot};

use crate::core::bucket::Bucket;
use crate::core::clock::{Clock, CoarseClock};
use crate::core::keymap::{EntryData, KeyMap};
use crate::core::padded::Padded;
use crate::core::sync::{AtomicU64, Mutex};
use coarse::{coarse_is_safe, LedgerClock};
use config::validate;
use std::sync::Arc;
use stripes::STRIPES;
use tier::{Pool, Tier, LEASE_FRACTION};

/// Tiers of token buckets; `Send + Sync`, shared across threads behind an `Arc`.
pub struct Ledger {
    tiers: Box<[Tier]>,
    configs: Vec<TierConfig>,
    /// The precise clock.
    clock: LedgerClock,
    /// The coarse clock `try_consume_now` reads first, where it is safe (module notes), and its tick.
    coarse: Option<LedgerClock>,
    tick_ms: f64,
}

impl Ledger {
    /// A ledger on the process's monotonic clock (`MonotonicClock`), with `CoarseClock` for
    /// `try_consume_now` where its tick is safe for these tiers (module notes).
    pub fn new(tiers: Vec<TierConfig>) -> Result<Ledger, ConfigError> {
        Ledger::build(tiers, LedgerClock::Monotonic, CoarseClock::new().map(LedgerClock::Coarse))
    }

    /// A ledger whose own time (`now_ns`, `set_refill_scale`, `snapshot`, `reset`) comes from `clock`.
    pub fn with_clock(tiers: Vec<TierConfig>, clock: Arc<dyn Clock>) -> Result<Ledger, ConfigError> {
        Ledger::build(tiers, LedgerClock::Custom(clock), None)
    }

    /// `with_clock` plus a coarse clock for `try_consume_now`, used where its `resolution_ns` is safe for
    /// these tiers: for tests of the coarse path.
    pub fn with_clocks(tiers: Vec<TierConfig>, clock: Arc<dyn Clock>, coarse: Arc<dyn Clock>) -> Result<Ledger, ConfigError> {
        Ledger::build(tiers, LedgerClock::Custom(clock), Some(LedgerClock::Custom(coarse)))
    }

    fn build(tiers: Vec<TierConfig>, clock: LedgerClock, coarse: Option<LedgerClock>) -> Result<Ledger, ConfigError> {
        validate(&tiers)?;
        let now = clock.now_ns();
        let built = tiers
            .iter()
            .map(|t| Tier {
                name: t.name.clone(),
                capacity: t.capacity,
                refill_per_sec: t.refill_per_sec,
                protected: t.protected,
                pool: Padded(Mutex::new(Pool { bucket: Bucket::full(t.capacity, now), scale: 1.0, leased_out: 0.0 })),
                stripes: (0..STRIPES).map(|_| Padded(AtomicU64::new(0f64.to_bits()))).collect(),
                lease: t.capacity * LEASE_FRACTION,
                keys: t.per_key.clone().map(KeyMap::new),
            })
            .collect();
        let coarse = coarse.filter(|c| coarse_is_safe(&tiers, c.resolution_ns()));
        let tick_ms = coarse.as_ref().map_or(0.0, |c| c.resolution_ns() as f64 / 1e6);
        Ok(Ledger { tiers: built, configs: tiers, clock, coarse, tick_ms })
    }

    /// The tick of the coarse clock `try_consume_now` reads first, in ns; 0 if it reads the precise one.
    pub fn coarse_tick_ns(&self) -> u64 {
        self.coarse.as_ref().map_or(0, LedgerClock::resolution_ns)
    }

    /// The ledger's clock reading, the `now_ns` its JS binding passes to `consume`.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The configuration the ledger was built from (to compare `Ledger.shared` requests).
    pub fn config(&self) -> &[TierConfig] {
        &self.configs
    }

    #[inline]
    pub fn tier_id(&self, name: &[u8]) -> Option<usize> {
        self.tiers.iter().position(|t| t.name.as_bytes() == name)
    }

    #[inline]
    pub fn tier_count(&self) -> usize {
        self.tiers.len()
    }

    pub fn tier_name(&self, tier: usize) -> &str {
        &self.tiers[tier].name
    }

    pub fn is_protected(&self, tier: usize) -> bool {
        self.tiers[tier].protected
    }

    /// Whether `tier` keeps a bucket per key (a key passed for another tier is ignored).
    pub fn has_per_key(&self, tier: usize) -> bool {
        self.tiers[tier].keys.is_some()
    }

    /// Debits `cost` tokens from the tier pool and, if `key` is given and the tier keeps per-key
    /// buckets, from the key's bucket: both or neither. `tier` must be `< tier_count()` and `cost` a
    /// finite number >= 0 (callers validate).
    #[inline]
    pub fn consume(&self, tier: usize, key: Option<&[u8]>, cost: f64, now_ns: u64) -> Outcome {
        self.debit::<true>(tier, key, cost, || now_ns)
    }

    /// `consume` for a caller that only needs `allowed`: a tier-only debit skips reading the pool's
    /// total for `remaining`/`reset_ms` (the other fields are as `consume` gives them).
    #[inline]
    pub fn try_consume(&self, tier: usize, key: Option<&[u8]>, cost: f64, now_ns: u64) -> bool {
        self.debit::<false>(tier, key, cost, || now_ns).allowed
    }

    /// `try_consume` at the ledger's own clock, read only if the debit needs the time: a tier-only
    /// debit served from this thread's lease does not (saves a clock read). The coarse clock first,
    /// where there is one (module notes).
    #[inline]
    pub fn try_consume_now(&self, tier: usize, key: Option<&[u8]>, cost: f64) -> bool {
        if let Some(coarse) = &self.coarse {
            let o = self.debit::<false>(tier, key, cost, || coarse.now_ns());
            // Refused, but short of no more than a tick's refill (two, for a late timer interrupt): the
            // lagging reading may be why. Ask again at the precise time, so that the coarse clock never
            // refuses what the precise one admits.
            if o.allowed || o.retry_after_ms > 2.0 * self.tick_ms {
                return o.allowed;
            }
        }
        self.debit::<false>(tier, key, cost, || self.clock.now_ns()).allowed
    }

    /// `try_consume_now` for a keyed tier that also returns where the key's bucket is, for
    /// `try_consume_slot_now`; `None` for a tier without per-key buckets (the debit is then the tier's
    /// alone, as `try_consume_now` does it).
    #[inline]
    pub fn try_consume_now_slot(&self, tier: usize, key: &[u8], cost: f64) -> (bool, Option<Slot>) {
        let t = &self.tiers[tier];
        let Some(map) = &t.keys else {
            return (self.try_consume_now(tier, None, cost), None);
        };
        let hash = map.hasher.hash_one(key);
        let Some(coarse) = &self.coarse else {
            let (o, slot) = Self::debit_key::<false>(t, map, hash, key, cost, || self.clock.now_ns());
            return (o.allowed, Some(slot));
        };
        let (mut e, slot, now_ns) = map.entry(hash, key, || coarse.now_ns());
        let o = Self::debit_entry::<false, true>(t, map, &mut e, cost, now_ns);
        if o.allowed || o.retry_after_ms > 2.0 * self.tick_ms {
            return (o.allowed, Some(slot));
        }
        (self.debit_precise::<true>(t, map, &mut e, cost), Some(slot))
    }

    /// `try_consume_now` of the key whose bucket `slot` names (from `try_consume_now_slot` on the same
    /// tier): the same debit without hashing or looking up the key, under the entry's lock alone.
    /// `None` if the slot is stale (the entry was evicted or reset since): nothing was debited, look
    /// the key up again.
    #[inline]
    pub fn try_consume_slot_now(&self, tier: usize, slot: Slot, cost: f64) -> Option<bool> {
        let t = &self.tiers[tier];
        let map = t.keys.as_ref()?;
        let mut e = map.at(&slot)?;
        Some(self.debit_slot::<true>(t, map, &mut e, cost))
    }

    /// `try_consume_slot_now` for a ledger that no other thread can reach: the same debit without an
    /// atomic read-modify-write (no entry lock; the thread's stripe by load and store).
    ///
    /// # Safety
    /// No other thread may call into this ledger, or hold it, while this runs (a ledger made for one
    /// JS thread and never shared: src/node/ledger/handle.rs, `exclusive`).
    #[inline]
    pub unsafe fn try_consume_slot_exclusive(&self, tier: usize, slot: Slot, cost: f64) -> Option<bool> {
        #[cfg(loom)]
        return self.try_consume_slot_now(tier, slot, cost);
        #[cfg(not(loom))]
        {
            let t = &self.tiers[tier];
            let map = t.keys.as_ref()?;
            let e = map.at_unlocked(&slot)?;
            Some(self.debit_slot::<false>(t, map, e, cost))
        }
    }

    /// As `try_consume_now`, with the precise retry out of the usual case's way (coarse clock,
    /// admitted), which compiles into the caller.
    #[inline(always)]
    fn debit_slot<const SHARED: bool>(&self, t: &Tier, map: &KeyMap, e: &mut EntryData, cost: f64) -> bool {
        if let Some(coarse) = &self.coarse {
            let o = Self::debit_entry::<false, SHARED>(t, map, e, cost, coarse.now_ns());
            if o.allowed || o.retry_after_ms > 2.0 * self.tick_ms {
                return o.allowed;
            }
        }
        self.debit_precise::<SHARED>(t, map, e, cost)
    }

    /// A keyed debit at the precise clock, under the entry's lock the caller holds (or exclusive).
    #[cold]
    #[inline(never)]
    fn debit_precise<const SHARED: bool>(&self, t: &Tier, map: &KeyMap, e: &mut EntryData, cost: f64) -> bool {
        Self::debit_entry::<false, SHARED>(t, map, e, cost, self.clock.now_ns()).allowed
    }

    /// Scales the refill of `tier`'s pool (0 = no refill at all, 1 = the configured rate) from now on:
    /// the pool is first brought up to now at the old scale. `scale` in 0..=1, validated by the caller.
    pub fn set_refill_scale(&self, tier: usize, scale: f64) {
        self.set_refill_scale_at(tier, scale, self.clock.now_ns());
    }

    pub fn set_refill_scale_at(&self, tier: usize, scale: f64, now_ns: u64) {
        let t = &self.tiers[tier];
        let mut pool = t.pool.0.lock();
        let rate = t.rate(&pool);
        t.refill(&mut pool, rate, now_ns);
        pool.scale = scale;
    }

    /// `tier`'s tokens at `now_ns` (pool and leases), its budget (capacity × refill scale) and its
    /// refill rate now: one lock of the pool.
    pub fn level(&self, tier: usize, now_ns: u64) -> (f64, f64, f64) {
        self.tiers[tier].level(now_ns)
    }

    pub fn refill_scale(&self, tier: usize) -> f64 {
        self.tiers[tier].pool.0.lock().scale
    }

    /// Every tier as of now (pools refilled for the reading, not changed).
    pub fn snapshot(&self) -> Vec<TierSnapshot> {
        self.snapshot_at(self.clock.now_ns())
    }

    pub fn snapshot_at(&self, now_ns: u64) -> Vec<TierSnapshot> {
        self.tiers
            .iter()
            .map(|t| {
                let (tokens, _) = t.view(now_ns);
                let scale = t.pool.0.lock().scale;
                TierSnapshot {
                    name: t.name.clone(),
                    protected: t.protected,
                    tokens,
                    capacity: t.capacity,
                    refill_per_sec: t.refill_per_sec,
                    refill_scale: scale,
                    keys: t.keys.as_ref().map_or(0, KeyMap::len),
                }
            })
            .collect()
    }

    /// The tokens `key` holds in `tier` now, or `None` if the tier holds no bucket for it (a new key
    /// starts full).
    pub fn key_tokens(&self, tier: usize, key: &[u8], now_ns: u64) -> Option<f64> {
        self.tiers[tier].keys.as_ref().and_then(|m| m.tokens(key, now_ns))
    }

    /// Resets state to full buckets. `(None, None)`: every tier pool refilled and every key forgotten;
    /// `(Some(t), None)`: tier `t` only; `(t, Some(key))`: forgets `key` in tier `t` (or in every tier),
    /// leaving the pools alone. Refill scales are left as they are (the shed controller owns them).
    /// Returns how many buckets were reset.
    pub fn reset(&self, tier: Option<usize>, key: Option<&[u8]>) -> usize {
        self.reset_at(tier, key, self.clock.now_ns())
    }

    pub fn reset_at(&self, tier: Option<usize>, key: Option<&[u8]>, now_ns: u64) -> usize {
        let range = match tier {
            Some(t) => t..t + 1,
            None => 0..self.tiers.len(),
        };
        let mut n = 0;
        for t in &self.tiers[range] {
            match key {
                Some(key) => n += t.keys.as_ref().map_or(0, |m| usize::from(m.remove(key))),
                None => {
                    // The stripes' leases are forgotten with the pool's tokens (under the pool's lock,
                    // which every new lease needs).
                    let mut pool = t.pool.0.lock();
                    t.drain();
                    pool.leased_out = 0.0;
                    pool.bucket = Bucket::full(t.capacity, now_ns);
                    drop(pool);
                    n += 1;
                    if let Some(m) = &t.keys {
                        n += m.len();
                        m.clear();
                    }
                }
            }
        }
        n
    }

    /// Bytes of memory held per keyed bucket (entry + its share of the table + the key's own bytes,
    /// rounded to the allocator's 16-byte granule), for reports. An estimate from the layout, not a
    /// measurement.
    pub fn estimated_bytes_per_key(key_len: usize) -> usize {
        let entry = crate::core::keymap::ENTRY_BYTES;
        let table = (std::mem::size_of::<(u64, u32)>() + 1) * 8 / 7 + 1;
        let key = if key_len > crate::core::keymap::INLINE_KEY { (key_len + 8).div_ceil(16) * 16 } else { 0 };
        entry + table + key
    }
}

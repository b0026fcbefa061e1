//! The in-memory ledger: tiers of token buckets, highest priority first, each with a shared pool and,
//! optionally, one bucket per key (user, IP, API client) inside it.
//!
//! * A keyed debit takes from the tier pool and the key's bucket atomically: both or neither. The key's
//!   shard lock (a spin lock: one atomic per lock/unlock, measured against parking_lot in the commit
//!   log) is held while the tier pool is debited (lock order: shard, then pool; nothing takes them the
//!   other way round), so no other debit of that key can slip in between the check and the debit.
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
//!   own cache-line-padded atomic stripe, and only takes the pool's lock to renew the lease. A keyed
//!   debit instead pays from a lease held by the key's shard, under the shard lock it holds anyway (a
//!   plain store, not a second atomic read-modify-write). Leases are the pool's tokens moved, never
//!   created: a debit is refused only after every stripe and every shard's lease has been drained back
//!   into the pool (no new shard lease is granted meanwhile), so "allowed iff the tier holds `cost`
//!   tokens" stays exact.
//! * Keyed state is bounded: the keys of a tier live in `shards` hash tables whose capacities add up to
//!   `max_keys`. A new key in a full shard evicts, from a small clock-hand scan, the first bucket that is
//!   idle (untouched for `idle_ttl_ms`) or full (a full bucket is the same as a new one, so forgetting it
//!   loses nothing); failing both, the least recently touched bucket of the scan. Each insert also
//!   sweeps two entries for idleness, so memory drains back without any timer.
use crate::core::bucket::Bucket;
use crate::core::clock::{Clock, CoarseClock, MonotonicClock};
use crate::core::spinlock::SpinLock;
use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::Mutex;
use std::cell::Cell;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct TierConfig {
    pub name: String,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub protected: bool,
    pub per_key: Option<PerKeyConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PerKeyConfig {
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub max_keys: usize,
    pub idle_ttl_ms: f64,
}

/// An invalid configuration; `Display` names the offending option as a JS user writes it
/// (`tiers[1].refillPerSec`).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Which bucket refused a debit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    None = 0,
    Tier = 1,
    Key = 2,
}

/// The result of a debit, with what rate-limit headers need. `remaining`, `limit` and `reset_ms`
/// describe the key's bucket when the debit was keyed, else the tier pool. `retry_after_ms` is 0 when
/// allowed, else the wait of the bucket that refused (`limited_by`); infinity when it can never succeed
/// (cost above capacity, or no refill).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    pub allowed: bool,
    pub limited_by: Limit,
    pub remaining: f64,
    pub limit: f64,
    pub retry_after_ms: f64,
    pub reset_ms: f64,
}

impl Outcome {
    /// A refusal with no details, a starting point for callers that fill in their own.
    pub const DENIED: Outcome = Outcome {
        allowed: false,
        limited_by: Limit::Tier,
        remaining: 0.0,
        limit: 0.0,
        retry_after_ms: 0.0,
        reset_ms: 0.0,
    };
}

/// One tier as `snapshot` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct TierSnapshot {
    pub name: String,
    pub protected: bool,
    pub tokens: f64,
    pub capacity: f64,
    pub refill_per_sec: f64,
    pub refill_scale: f64,
    /// Keyed buckets held now (0 for a tier without `per_key`).
    pub keys: usize,
}

/// The largest number of keyed buckets one eviction looks at.
const EVICT_SCAN: usize = 32;
/// Entries checked for idleness on every insert of a new key.
const SWEEP: usize = 2;
/// Most shards per tier; fewer when `max_keys` is small, so that every shard holds at least
/// `MIN_PER_SHARD` keys and the per-shard caps add up to `max_keys` exactly.
const MAX_SHARDS: usize = 64;
const MIN_PER_SHARD: usize = 256;

struct Pool {
    /// The tokens not leased out to a stripe.
    bucket: Bucket,
    scale: f64,
    /// An upper bound of the tokens held by the stripes (leases granted minus leases drained; threads
    /// spend from their stripes without telling the pool). Read exactly only when the pool nears full.
    leased_out: f64,
    /// The same for the leases held by the key shards (`ShardCell::lease`).
    shard_leased: f64,
    /// Debits draining the shards' leases right now: while any does, no shard lease is granted.
    draining: u32,
}

/// Why the pool could not pay: a wait (ms), or shard leases that must be drained first (`Tier::take`).
enum Short {
    Wait(f64),
    Drain,
}

/// Lowers `draining` again when a debit that raised it is done.
struct DrainGuard<'a>(&'a Tier);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        self.0.pool.0.lock().draining -= 1;
    }
}

/// Lease stripes per tier pool; threads are spread over them round-robin.
const STRIPES: usize = 16;
/// A lease is this fraction of the tier's capacity (or whatever the pool holds, if less).
const LEASE_FRACTION: f64 = 1.0 / 64.0;

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe.
#[inline]
fn my_stripe() -> usize {
    STRIPE.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT_STRIPE.fetch_add(1, Relaxed) % STRIPES;
        s.set(v);
        v
    })
}

/// Keys up to this many bytes are stored inline in their entry (IPv4/IPv6 prefixes, short ids), so a
/// lookup reads one cache line and compares a fixed-size array; longer keys live on the heap.
const INLINE_KEY: usize = 24;

struct StoredKey {
    len: u32,
    /// The entry's generation (`Slot`). It lives here, in what would be the key's padding, so the
    /// entry stays one cache line.
    gen: u32,
    inline: [u8; INLINE_KEY],
    /// A thin pointer (8 bytes, not a 16-byte slice pointer), so the entry fits one cache line.
    heap: Option<Box<Box<[u8]>>>,
}

/// A key being looked up, zero-padded once per call so it compares with stored keys as one array.
struct Probe<'a> {
    key: &'a [u8],
    padded: [u8; INLINE_KEY],
}

impl<'a> Probe<'a> {
    #[inline]
    fn new(key: &'a [u8]) -> Probe<'a> {
        let mut padded = [0u8; INLINE_KEY];
        if key.len() <= INLINE_KEY {
            padded[..key.len()].copy_from_slice(key);
        }
        Probe { key, padded }
    }
}

impl StoredKey {
    fn new(key: &[u8]) -> StoredKey {
        let probe = Probe::new(key);
        StoredKey {
            len: key.len() as u32,
            gen: 0,
            inline: probe.padded,
            heap: (key.len() > INLINE_KEY).then(|| Box::new(key.into())),
        }
    }

    #[inline]
    fn matches(&self, p: &Probe) -> bool {
        self.len as usize == p.key.len()
            && if p.key.len() <= INLINE_KEY { self.inline == p.padded } else { self.heap.as_deref().map(|b| &**b) == Some(p.key) }
    }
}

struct Entry {
    hash: u64,
    bucket: Bucket,
    key: StoredKey,
}

struct Shard {
    table: HashTable<u32>,
    entries: Vec<Entry>,
    cap: usize,
    hand: usize,
    /// The generation the next entry placed at an index gets (wrapping; never reset).
    next_gen: u32,
}

/// Where a key's bucket was found: for a caller that looks a key up once and then debits it by
/// position (`try_consume_slot_now`), skipping the key's hashing and table lookup. A slot goes stale
/// when its entry is removed or moved (eviction, sweep, reset); it is then refused, never misread:
/// the entry at `idx` must carry both `gen` (a per-shard counter stamped on every entry placed at an
/// index) and the key's 64-bit `hash` (which also picks the shard). A wrong match needs the counter
/// to wrap at that very index (2^32 placements in the shard) onto a key of the same 64-bit hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    hash: u64,
    idx: u32,
    gen: u32,
}

/// Keeps each lock on its own cache line, so two threads on different shards do not slow each other.
#[repr(align(128))]
struct Padded<T>(T);

/// A shard and its lease of the tier pool. A keyed debit holds the shard's lock anyway, so it pays the
/// tier from this lease with a plain store instead of a second atomic read-modify-write (a thread
/// stripe's compare-exchange, ~2.5 ns of a ~50 ns call). The lease is written only under the shard's
/// lock; others read it (atomically, without the lock) to count the tier's tokens. Like the stripes'
/// leases these are the pool's tokens moved, never created, and a debit is refused for want of tier
/// tokens only once every shard's lease has been drained back (`Tier::take`).
struct ShardCell {
    lock: SpinLock<Shard>,
    /// Tokens, as f64 bits.
    lease: AtomicU64,
}

struct KeyMap {
    cfg: PerKeyConfig,
    idle_ttl_ns: f64,
    hasher: DefaultHashBuilder,
    shards: Box<[Padded<ShardCell>]>,
    shard_shift: u32,
}

struct Tier {
    name: String,
    capacity: f64,
    refill_per_sec: f64,
    protected: bool,
    pool: Padded<Mutex<Pool>>,
    /// Leased tokens, as f64 bits, one stripe per group of threads.
    stripes: Box<[Padded<AtomicU64>]>,
    lease: f64,
    keys: Option<KeyMap>,
}

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

/// The process clocks, called directly (inlined on the hot path), or an injected one.
enum LedgerClock {
    Monotonic,
    Coarse(CoarseClock),
    Custom(Arc<dyn Clock>),
}

impl LedgerClock {
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        match self {
            LedgerClock::Monotonic => MonotonicClock.now_ns(),
            LedgerClock::Coarse(c) => c.now_ns(),
            LedgerClock::Custom(c) => c.now_ns(),
        }
    }

    fn resolution_ns(&self) -> u64 {
        match self {
            LedgerClock::Monotonic => 0,
            LedgerClock::Coarse(c) => c.resolution_ns(),
            LedgerClock::Custom(c) => c.resolution_ns(),
        }
    }
}

/// One tick's refill may be at most this fraction (1/COARSE_SHARE) of a bucket's capacity for the ledger
/// to read the coarse clock (module notes).
const COARSE_SHARE: f64 = 64.0;

/// Whether a clock lagging by up to `resolution_ns` changes every bucket of `tiers` by at most
/// 1/`COARSE_SHARE` of its capacity (module notes).
fn coarse_is_safe(tiers: &[TierConfig], resolution_ns: u64) -> bool {
    let tick_s = resolution_ns as f64 / 1e9;
    let ok = |capacity: f64, rate: f64| rate * tick_s <= capacity / COARSE_SHARE;
    tiers.iter().all(|t| {
        ok(t.capacity, t.refill_per_sec) && t.per_key.as_ref().map_or(true, |k| ok(k.capacity, k.refill_per_sec))
    })
}

/// A number as JavaScript prints it (`Infinity`, not `inf`), for messages a JS user reads.
pub fn js_number(v: f64) -> String {
    if v.is_infinite() {
        (if v > 0.0 { "Infinity" } else { "-Infinity" }).to_string()
    } else {
        format!("{v}")
    }
}

fn check_positive(what: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number > 0 (got {})", js_number(v))))
    }
}

fn check_rate(what: String, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ConfigError(format!("{what} must be a finite number >= 0 (got {})", js_number(v))))
    }
}

fn validate(tiers: &[TierConfig]) -> Result<(), ConfigError> {
    if tiers.is_empty() {
        return Err(ConfigError("tiers must list at least one tier".into()));
    }
    for (i, t) in tiers.iter().enumerate() {
        if t.name.is_empty() {
            return Err(ConfigError(format!("tiers[{i}].name must be a non-empty string")));
        }
        if let Some(j) = tiers[..i].iter().position(|o| o.name == t.name) {
            return Err(ConfigError(format!(
                "tiers[{i}].name {:?} is a duplicate of tiers[{j}].name",
                t.name
            )));
        }
        check_positive(format!("tiers[{i}].capacity"), t.capacity)?;
        check_rate(format!("tiers[{i}].refillPerSec"), t.refill_per_sec)?;
        if let Some(pk) = &t.per_key {
            check_positive(format!("tiers[{i}].perKey.capacity"), pk.capacity)?;
            check_rate(format!("tiers[{i}].perKey.refillPerSec"), pk.refill_per_sec)?;
            if pk.max_keys == 0 || pk.max_keys > u32::MAX as usize {
                return Err(ConfigError(format!(
                    "tiers[{i}].perKey.maxKeys must be an integer from 1 to {} (got {})",
                    u32::MAX,
                    pk.max_keys
                )));
            }
            check_positive(format!("tiers[{i}].perKey.idleTtlMs"), pk.idle_ttl_ms)?;
        }
    }
    Ok(())
}

impl KeyMap {
    fn new(cfg: PerKeyConfig) -> KeyMap {
        let mut n = 1;
        while n < MAX_SHARDS && cfg.max_keys / (n * 2) >= MIN_PER_SHARD {
            n *= 2;
        }
        let (base, extra) = (cfg.max_keys / n, cfg.max_keys % n);
        let shards = (0..n)
            .map(|i| {
                Padded(ShardCell {
                    lock: SpinLock::new(Shard {
                        table: HashTable::new(),
                        entries: Vec::new(),
                        cap: base + usize::from(i < extra),
                        hand: 0,
                        next_gen: 0,
                    }),
                    lease: AtomicU64::new(0f64.to_bits()),
                })
            })
            .collect();
        KeyMap {
            idle_ttl_ns: cfg.idle_ttl_ms * 1e6,
            cfg,
            hasher: DefaultHashBuilder::default(),
            shards,
            shard_shift: 64 - n.trailing_zeros(),
        }
    }

    #[inline]
    fn shard(&self, hash: u64) -> &ShardCell {
        // The top bits pick the shard; the table uses the low bits, so they stay independent.
        let i = if self.shard_shift == 64 { 0 } else { (hash >> self.shard_shift) as usize };
        &self.shards[i].0
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock.lock().entries.len()).sum()
    }

    fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.0.lock.lock();
            s.table = HashTable::new();
            s.entries = Vec::new();
            s.hand = 0;
        }
    }

    fn remove(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash_one(key);
        let mut shard = self.shard(hash).lock.lock();
        match shard.find(hash, key) {
            Some(i) => {
                shard.remove_at(i);
                true
            }
            None => false,
        }
    }

    fn tokens(&self, key: &[u8], now_ns: u64) -> Option<f64> {
        let hash = self.hasher.hash_one(key);
        let shard = self.shard(hash).lock.lock();
        shard
            .find(hash, key)
            .map(|i| shard.entries[i].bucket.tokens_at(self.cfg.capacity, self.cfg.refill_per_sec, now_ns))
    }
}

impl Shard {
    #[inline]
    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let probe = Probe::new(key);
        let entries = &self.entries;
        self.table
            .find(hash, |&i| {
                let e = &entries[i as usize];
                e.hash == hash && e.key.matches(&probe)
            })
            .map(|&i| i as usize)
    }

    fn remove_at(&mut self, idx: usize) {
        let hash = self.entries[idx].hash;
        if let Ok(slot) = self.table.find_entry(hash, |&i| i as usize == idx) {
            slot.remove();
        }
        let last = self.entries.len() - 1;
        if idx != last {
            let moved = self.entries[last].hash;
            if let Some(slot) = self.table.find_mut(moved, |&i| i as usize == last) {
                *slot = idx as u32;
            }
            // The moved entry is at a new index: slots that knew it at `last` go stale.
            self.entries[last].key.gen = self.new_gen();
        }
        self.entries.swap_remove(idx);
    }

    #[inline]
    fn new_gen(&mut self) -> u32 {
        self.next_gen = self.next_gen.wrapping_add(1);
        self.next_gen
    }

    /// The index a slot names, if its entry is still there.
    #[inline]
    fn at(&self, slot: &Slot) -> Option<usize> {
        let i = slot.idx as usize;
        let e = self.entries.get(i)?;
        (e.key.gen == slot.gen && e.hash == slot.hash).then_some(i)
    }

    fn is_idle(e: &Entry, idle_ttl_ns: f64, now_ns: u64) -> bool {
        now_ns.saturating_sub(e.bucket.last_ns) as f64 >= idle_ttl_ns
    }

    /// The entry to evict for a new key: the first idle or full one in a scan from the hand, else the
    /// least recently touched one of the scan.
    fn victim(&mut self, cfg: &PerKeyConfig, idle_ttl_ns: f64, now_ns: u64) -> usize {
        let n = self.entries.len();
        let scan = n.min(EVICT_SCAN);
        let mut oldest = (u64::MAX, 0);
        for s in 0..scan {
            let i = (self.hand + s) % n;
            let e = &self.entries[i];
            if Self::is_idle(e, idle_ttl_ns, now_ns)
                || e.bucket.tokens_at(cfg.capacity, cfg.refill_per_sec, now_ns) >= cfg.capacity
            {
                self.hand = i + 1;
                return i;
            }
            if e.bucket.last_ns < oldest.0 {
                oldest = (e.bucket.last_ns, i);
            }
        }
        self.hand += scan;
        oldest.1
    }

    /// Drops up to `SWEEP` idle entries at the hand: how memory drains back without timers.
    fn sweep(&mut self, idle_ttl_ns: f64, now_ns: u64) {
        for _ in 0..SWEEP {
            let n = self.entries.len();
            if n == 0 {
                return;
            }
            let i = self.hand % n;
            if Self::is_idle(&self.entries[i], idle_ttl_ns, now_ns) {
                self.remove_at(i);
            } else {
                self.hand = i + 1;
            }
        }
    }

    /// The index of `key`'s bucket, inserting a full one (evicting if the shard is at its cap).
    #[inline]
    fn get_or_insert(&mut self, map: &KeyMap, hash: u64, key: &[u8], now_ns: u64) -> usize {
        if let Some(i) = self.find(hash, key) {
            return i;
        }
        self.sweep(map.idle_ttl_ns, now_ns);
        if self.entries.len() >= self.cap {
            let v = self.victim(&map.cfg, map.idle_ttl_ns, now_ns);
            self.remove_at(v);
        }
        let idx = self.entries.len();
        if idx == self.entries.capacity() {
            // Grow by doubling, but never past the shard's cap.
            self.entries.reserve_exact(idx.max(8).min(self.cap - idx));
        }
        let mut stored = StoredKey::new(key);
        stored.gen = self.new_gen();
        self.entries.push(Entry { hash, key: stored, bucket: Bucket::full(map.cfg.capacity, now_ns) });
        let entries = &self.entries;
        self.table.insert_unique(hash, idx as u32, |&i| entries[i as usize].hash);
        idx
    }
}

impl Tier {
    #[inline]
    fn rate(&self, pool: &Pool) -> f64 {
        self.refill_per_sec * pool.scale
    }

    /// Debits `cost` from the tier: `Err(retry_after_ms)` if the tier does not hold it.
    #[inline]
    fn debit(&self, cost: f64, now: impl Fn() -> u64) -> Result<(), f64> {
        if cost > self.capacity {
            return Err(f64::INFINITY);
        }
        let stripe = &self.stripes[my_stripe()].0;
        let mut cur = stripe.load(Relaxed);
        loop {
            let held = f64::from_bits(cur);
            if held < cost {
                return self.debit_slow(stripe, cost, now);
            }
            match stripe.compare_exchange_weak(cur, (held - cost).to_bits(), Relaxed, Relaxed) {
                Ok(_) => return Ok(()),
                Err(seen) => cur = seen,
            }
        }
    }

    /// The lease does not cover `cost`: debit the pool under its lock and renew the lease (`take`
    /// decides, draining the shards' leases first if it must).
    #[inline(never)]
    fn debit_slow(&self, stripe: &AtomicU64, cost: f64, now: impl Fn() -> u64) -> Result<(), f64> {
        let attempt = |drained: bool| {
            let mut pool = self.pool.0.lock();
            let rate = self.rate(&pool);
            self.refill(&mut pool, rate, now());
            self.take(&mut pool, cost, rate, drained)?;
            let lease = pool.bucket.tokens.min(self.lease);
            if lease > 0.0 {
                pool.bucket.tokens -= lease;
                pool.leased_out += lease;
                add_f64(stripe, lease);
            }
            Ok(())
        };
        match attempt(false) {
            Ok(()) => Ok(()),
            Err(Short::Wait(ms)) => Err(ms),
            Err(Short::Drain) => {
                let _drain = DrainGuard(self);
                self.drain_shards();
                attempt(true).map_err(|s| match s {
                    Short::Wait(ms) => ms,
                    Short::Drain => unreachable!("take never asks twice"),
                })
            }
        }
    }

    /// A keyed debit, under the lock of the key's shard, whose `lease` does not cover `cost`: give
    /// back what is left of the lease, debit the pool, and take a new lease if the pool is well
    /// above empty and nobody is draining.
    #[inline(never)]
    fn debit_keyed_slow(&self, lease: &AtomicU64, cost: f64, now_ns: u64, drained: bool) -> Result<(), Short> {
        let mut pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        self.refill(&mut pool, rate, now_ns);
        let held = f64::from_bits(lease.swap(0f64.to_bits(), Relaxed));
        pool.bucket.tokens += held;
        pool.shard_leased = (pool.shard_leased - held).max(0.0);
        self.take(&mut pool, cost, rate, drained)?;
        if pool.draining == 0 && pool.bucket.tokens >= 2.0 * self.lease {
            pool.bucket.tokens -= self.lease;
            pool.shard_leased += self.lease;
            lease.store(self.lease.to_bits(), Relaxed);
        }
        Ok(())
    }

    /// Under the pool's lock: takes `cost` from the pool, pulling the stripes' leases back first if it
    /// is short. Still short while shards may hold leases: `Short::Drain` (with `draining` raised: the
    /// caller drains them with `drain_shards`, lowers it with a `DrainGuard` and asks again with
    /// `drained`). Only then is the tier short: "refused iff the tier holds less than `cost`" stays
    /// exact, since nothing can be leased out between the drain and the second asking.
    fn take(&self, pool: &mut Pool, cost: f64, rate: f64, drained: bool) -> Result<(), Short> {
        if pool.bucket.tokens < cost {
            pool.bucket.tokens += self.drain();
            pool.leased_out = 0.0;
        }
        if pool.bucket.tokens < cost {
            if pool.shard_leased > 0.0 {
                pool.shard_leased = self.shard_leases();
            }
            if pool.shard_leased > 0.0 && !drained {
                pool.draining += 1;
                return Err(Short::Drain);
            }
            return Err(Short::Wait(pool.bucket.wait_ms(cost, self.capacity, rate)));
        }
        pool.bucket.tokens -= cost;
        Ok(())
    }

    /// Moves every shard's lease back into the pool, one shard at a time, taking its lock and then the
    /// pool's (a keyed debit's lock order). The caller has raised `draining`.
    fn drain_shards(&self) {
        let Some(map) = &self.keys else { return };
        for cell in map.shards.iter() {
            let _shard = cell.0.lock.lock();
            let held = f64::from_bits(cell.0.lease.load(Relaxed));
            if held > 0.0 {
                let mut pool = self.pool.0.lock();
                pool.bucket.tokens += held;
                pool.shard_leased = (pool.shard_leased - held).max(0.0);
                cell.0.lease.store(0f64.to_bits(), Relaxed);
            }
        }
    }

    /// The tokens the shards' leases hold. Read under the pool's lock it is an upper bound: no lease
    /// grows or is returned without that lock, and debits only spend from them.
    fn shard_leases(&self) -> f64 {
        self.keys.as_ref().map_or(0.0, |m| m.shards.iter().map(|c| f64::from_bits(c.0.lease.load(Relaxed))).sum())
    }

    /// Brings the pool up to `now_ns`; pool plus leases never exceed the capacity.
    fn refill(&self, pool: &mut Pool, rate: f64, now_ns: u64) {
        if now_ns <= pool.bucket.last_ns {
            return;
        }
        let mut cap = self.capacity - pool.leased_out - pool.shard_leased;
        if (pool.leased_out > 0.0 || pool.shard_leased > 0.0) && pool.bucket.tokens_at(self.capacity, rate, now_ns) > cap {
            pool.leased_out = self.leased();
            pool.shard_leased = self.shard_leases();
            cap = self.capacity - pool.leased_out - pool.shard_leased;
        }
        pool.bucket.refill(cap.max(0.0), rate, now_ns);
    }

    fn leased(&self) -> f64 {
        self.stripes.iter().map(|s| f64::from_bits(s.0.load(Relaxed))).sum()
    }

    fn drain(&self) -> f64 {
        self.stripes.iter().map(|s| f64::from_bits(s.0.swap(0f64.to_bits(), Relaxed))).sum()
    }

    /// The tier's tokens now (pool and leases) and its current refill rate.
    fn view(&self, now_ns: u64) -> (f64, f64) {
        let pool = self.pool.0.lock();
        let rate = self.rate(&pool);
        let leased = self.leased() + self.shard_leases();
        let cap = (self.capacity - leased).max(0.0);
        (pool.bucket.tokens_at(cap, rate, now_ns).min(cap) + leased, rate)
    }
}

fn add_f64(a: &AtomicU64, v: f64) {
    let mut cur = a.load(Relaxed);
    while let Err(seen) = a.compare_exchange_weak(cur, (f64::from_bits(cur) + v).to_bits(), Relaxed, Relaxed) {
        cur = seen;
    }
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
                pool: Padded(Mutex::new(Pool {
                    bucket: Bucket::full(t.capacity, now),
                    scale: 1.0,
                    leased_out: 0.0,
                    shard_leased: 0.0,
                    draining: 0,
                })),
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
        let found = self.coarse_then_precise(|clock| {
            self.debit_keyed::<false>(t, map, hash, |s, now_ns| Some(s.get_or_insert(map, hash, key, now_ns)), cost, || clock.now_ns())
        });
        match found {
            Some((o, slot)) => (o.allowed, Some(slot)),
            None => unreachable!("a key lookup always finds or inserts its entry"),
        }
    }

    /// `try_consume_now` of the key whose bucket `slot` names (from `try_consume_now_slot` on the same
    /// tier): the same debit without hashing or looking up the key. `None` if the slot is stale (the
    /// entry was evicted, moved or reset since): nothing was debited, look the key up again.
    #[inline]
    pub fn try_consume_slot_now(&self, tier: usize, slot: Slot, cost: f64) -> Option<bool> {
        let t = &self.tiers[tier];
        let map = t.keys.as_ref()?;
        // `coarse_then_precise`, written out so that the usual case (coarse clock, admitted) compiles
        // into this one function and the precise retry stays out of its way.
        if let Some(coarse) = &self.coarse {
            let (o, _) = self.debit_keyed::<false>(t, map, slot.hash, |s, _| s.at(&slot), cost, || coarse.now_ns())?;
            if o.allowed || o.retry_after_ms > 2.0 * self.tick_ms {
                return Some(o.allowed);
            }
        }
        self.try_consume_slot_precise(t, map, slot, cost)
    }

    #[cold]
    #[inline(never)]
    fn try_consume_slot_precise(&self, t: &Tier, map: &KeyMap, slot: Slot, cost: f64) -> Option<bool> {
        let (o, _) = self.debit_keyed::<false>(t, map, slot.hash, |s, _| s.at(&slot), cost, || self.clock.now_ns())?;
        Some(o.allowed)
    }

    /// Runs a debit at the coarse clock where there is one, and again at the precise clock if it was
    /// refused short of no more than two ticks' refill (as `try_consume_now`). `None` from `attempt`
    /// is passed through.
    #[inline(always)]
    fn coarse_then_precise<R>(&self, attempt: impl Fn(&LedgerClock) -> Option<(Outcome, R)>) -> Option<(Outcome, R)> {
        if let Some(coarse) = &self.coarse {
            let r = attempt(coarse)?;
            if r.0.allowed || r.0.retry_after_ms > 2.0 * self.tick_ms {
                return Some(r);
            }
        }
        attempt(&self.clock)
    }

    /// The keyed debit: under the shard lock of `hash`, `locate` finds (or inserts) the entry; then the
    /// key's bucket and the tier pool are debited, both or neither. `None` if `locate` finds nothing.
    #[inline(always)]
    fn debit_keyed<const DETAIL: bool>(
        &self,
        t: &Tier,
        map: &KeyMap,
        hash: u64,
        locate: impl Fn(&mut Shard, u64) -> Option<usize>,
        cost: f64,
        now: impl Fn() -> u64,
    ) -> Option<(Outcome, Slot)> {
        let cfg = &map.cfg;
        let cell = map.shard(hash);
        // Set once the shards' leases had to be drained (then `draining` stays raised until done).
        let mut drain: Option<DrainGuard> = None;
        loop {
            let mut shard = cell.lock.lock();
            let now_ns = now();
            let i = locate(&mut shard, now_ns)?;
            let e = &mut shard.entries[i];
            let slot = Slot { hash, idx: i as u32, gen: e.key.gen };
            let kb = &mut e.bucket;
            kb.refill(cfg.capacity, cfg.refill_per_sec, now_ns);
            let mut out = Outcome {
                allowed: false,
                limited_by: Limit::Key,
                remaining: kb.tokens,
                limit: cfg.capacity,
                retry_after_ms: 0.0,
                reset_ms: 0.0,
            };
            if cost > cfg.capacity || kb.tokens < cost {
                out.retry_after_ms = kb.wait_ms(cost, cfg.capacity, cfg.refill_per_sec);
            } else {
                // The tier pays from the shard's lease, held under the shard's lock (`ShardCell`).
                let held = f64::from_bits(cell.lease.load(Relaxed));
                let paid = if cost > t.capacity {
                    Err(Short::Wait(f64::INFINITY))
                } else if held >= cost {
                    cell.lease.store((held - cost).to_bits(), Relaxed);
                    Ok(())
                } else {
                    t.debit_keyed_slow(&cell.lease, cost, now_ns, drain.is_some())
                };
                match paid {
                    Ok(()) => {
                        kb.tokens -= cost;
                        out.allowed = true;
                        out.limited_by = Limit::None;
                        out.remaining = kb.tokens;
                    }
                    Err(Short::Wait(retry)) => {
                        out.limited_by = Limit::Tier;
                        out.retry_after_ms = retry;
                    }
                    Err(Short::Drain) => {
                        // Other shards may hold the tokens: drain them without holding this shard's
                        // lock (they are taken shard first), then ask again from the start.
                        drop(shard);
                        drain = Some(DrainGuard(t));
                        t.drain_shards();
                        continue;
                    }
                }
            }
            if DETAIL {
                out.reset_ms = kb.reset_ms(cfg.capacity, cfg.refill_per_sec);
            }
            return Some((out, slot));
        }
    }

    #[inline(always)]
    fn debit<const DETAIL: bool>(
        &self,
        tier: usize,
        key: Option<&[u8]>,
        cost: f64,
        now: impl Fn() -> u64,
    ) -> Outcome {
        let t = &self.tiers[tier];
        match (key, &t.keys) {
            (Some(key), Some(map)) => {
                let hash = map.hasher.hash_one(key);
                match self.debit_keyed::<DETAIL>(t, map, hash, |s, now_ns| Some(s.get_or_insert(map, hash, key, now_ns)), cost, now) {
                    Some((o, _)) => o,
                    None => unreachable!("a key lookup always finds or inserts its entry"),
                }
            }
            _ => {
                // The time, read at most once and only if needed.
                let seen = Cell::new(None);
                let clock = || *seen.get().get_or_insert_with(|| {
                    let v = now();
                    seen.set(Some(v));
                    v
                });
                let (allowed, retry_after_ms) = match t.debit(cost, clock) {
                    Ok(()) => (true, 0.0),
                    Err(retry) => (false, retry),
                };
                let mut out = Outcome {
                    allowed,
                    limited_by: if allowed { Limit::None } else { Limit::Tier },
                    remaining: 0.0,
                    limit: t.capacity,
                    retry_after_ms,
                    reset_ms: 0.0,
                };
                if DETAIL {
                    let now_ns = clock();
                    let (tokens, rate) = t.view(now_ns);
                    out.remaining = tokens;
                    out.reset_ms = Bucket { tokens, last_ns: now_ns }.reset_ms(t.capacity, rate);
                }
                out
            }
        }
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
                    // The shards' leases are forgotten with the pool's tokens; no new one is granted
                    // between forgetting them and refilling the pool.
                    t.pool.0.lock().draining += 1;
                    let _drain = DrainGuard(t);
                    if let Some(m) = &t.keys {
                        for cell in m.shards.iter() {
                            let _shard = cell.0.lock.lock();
                            cell.0.lease.store(0f64.to_bits(), Relaxed);
                        }
                    }
                    let mut pool = t.pool.0.lock();
                    t.drain();
                    pool.leased_out = 0.0;
                    pool.shard_leased = 0.0;
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
        let entry = std::mem::size_of::<Entry>();
        let table = (std::mem::size_of::<u32>() + 1) * 8 / 7 + 1;
        let key = if key_len > INLINE_KEY { (key_len + 8).div_ceil(16) * 16 } else { 0 };
        entry + table + key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::ManualClock;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000_000_000;

    fn tier(name: &str, capacity: f64, refill: f64) -> TierConfig {
        TierConfig { name: name.into(), capacity, refill_per_sec: refill, protected: false, per_key: None }
    }

    fn keyed(name: &str, capacity: f64, refill: f64, key_cap: f64, key_refill: f64, max_keys: usize) -> TierConfig {
        TierConfig {
            per_key: Some(PerKeyConfig {
                capacity: key_cap,
                refill_per_sec: key_refill,
                max_keys,
                idle_ttl_ms: 60_000.0,
            }),
            ..tier(name, capacity, refill)
        }
    }

    fn ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(0));
        (Ledger::with_clock(tiers, clock.clone()).unwrap(), clock)
    }

    fn err(tiers: Vec<TierConfig>) -> String {
        Ledger::new(tiers).err().expect("config should be rejected").to_string()
    }

    #[test]
    fn ledger_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<Ledger>();
    }

    #[test]
    fn names_and_ids() {
        let (l, _) = ledger(vec![tier("gold", 1.0, 1.0), TierConfig { protected: true, ..tier("free", 1.0, 1.0) }]);
        assert_eq!(l.tier_count(), 2);
        assert_eq!(l.tier_id(b"free"), Some(1));
        assert_eq!(l.tier_id(b"nope"), None);
        assert_eq!(l.tier_name(0), "gold");
        assert!(l.is_protected(1) && !l.is_protected(0));
    }

    #[test]
    fn invalid_configs_name_the_option() {
        assert!(err(vec![]).contains("tiers must list at least one tier"));
        assert!(err(vec![tier("", 1.0, 1.0)]).contains("tiers[0].name"));
        assert!(err(vec![tier("a", 1.0, 1.0), tier("a", 1.0, 1.0)]).contains("tiers[1].name \"a\" is a duplicate"));
        assert!(err(vec![tier("a", 0.0, 1.0)]).contains("tiers[0].capacity must be a finite number > 0"));
        assert!(err(vec![tier("a", f64::NAN, 1.0)]).contains("tiers[0].capacity"));
        assert!(err(vec![tier("a", f64::INFINITY, 1.0)]).contains("tiers[0].capacity"));
        assert!(err(vec![tier("a", 1.0, -1.0)]).contains("tiers[0].refillPerSec must be a finite number >= 0"));
        assert!(err(vec![keyed("a", 1.0, 1.0, -1.0, 1.0, 1)]).contains("tiers[0].perKey.capacity"));
        assert!(err(vec![keyed("a", 1.0, 1.0, 1.0, f64::NAN, 1)]).contains("tiers[0].perKey.refillPerSec"));
        assert!(err(vec![keyed("a", 1.0, 1.0, 1.0, 1.0, 0)]).contains("tiers[0].perKey.maxKeys"));
        let mut t = keyed("a", 1.0, 1.0, 1.0, 1.0, 1);
        t.per_key.as_mut().unwrap().idle_ttl_ms = 0.0;
        assert!(err(vec![t]).contains("tiers[0].perKey.idleTtlMs"));
        // Zero refill is allowed: a fixed allowance.
        assert!(Ledger::new(vec![tier("a", 1.0, 0.0)]).is_ok());
    }

    #[test]
    fn refill_over_time_and_clamp() {
        let (l, _) = ledger(vec![tier("t", 10.0, 100.0)]);
        for _ in 0..10 {
            assert!(l.consume(0, None, 1.0, 0).allowed);
        }
        let o = l.consume(0, None, 1.0, 0);
        assert!(!o.allowed);
        assert_eq!(o.limited_by, Limit::Tier);
        assert_eq!(o.retry_after_ms, 10.0);
        assert_eq!(o.reset_ms, 100.0);
        // 50 ms at 100/s = 5 tokens.
        let o = l.consume(0, None, 1.0, 50 * MS);
        assert!(o.allowed);
        assert_eq!(o.remaining, 4.0);
        // A long pause clamps at capacity.
        let o = l.consume(0, None, 0.0, 3600 * SEC);
        assert_eq!((o.remaining, o.reset_ms), (10.0, 0.0));
    }

    #[test]
    fn fractional_refill() {
        let (l, _) = ledger(vec![tier("t", 2.0, 2.0)]);
        assert!(l.consume(0, None, 2.0, 0).allowed);
        // 250 ms at 2/s is half a token: not enough for 1, enough for 0.5.
        let o = l.consume(0, None, 1.0, 250 * MS);
        assert!(!o.allowed);
        assert_eq!(o.remaining, 0.5);
        assert_eq!(o.retry_after_ms, 250.0);
        let o = l.consume(0, None, 0.5, 250 * MS);
        assert!(o.allowed);
        assert_eq!(o.remaining, 0.0);
        let o = l.consume(0, None, 0.25, 375 * MS);
        assert!(o.allowed);
        assert_eq!(o.remaining, 0.0);
    }

    #[test]
    fn cost_above_capacity_never_succeeds() {
        let (l, _) = ledger(vec![tier("t", 5.0, 1000.0), keyed("k", 100.0, 0.0, 3.0, 1.0, 10)]);
        let o = l.consume(0, None, 5.5, 10 * SEC);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_ms, f64::INFINITY);
        assert_eq!(o.remaining, 5.0, "a refused debit takes nothing");
        assert!(l.consume(0, None, 5.0, 10 * SEC).allowed);
        let o = l.consume(1, Some(b"u"), 4.0, 0);
        assert!(!o.allowed);
        assert_eq!((o.limited_by, o.retry_after_ms), (Limit::Key, f64::INFINITY));
        assert_eq!(l.snapshot_at(0)[1].tokens, 100.0);
    }

    #[test]
    fn clock_that_does_not_advance() {
        let (l, _) = ledger(vec![tier("t", 3.0, 1e9)]);
        let granted = (0..100).filter(|_| l.consume(0, None, 1.0, 7 * SEC).allowed).count();
        assert_eq!(granted, 3);
        // An older reading (another thread's, taken before ours) adds nothing either.
        assert!(!l.consume(0, None, 1.0, 6 * SEC).allowed);
    }

    #[test]
    fn refill_scale_zero_stops_refill_and_one_restores_it() {
        let (l, clock) = ledger(vec![tier("t", 10.0, 10.0)]);
        assert!(l.consume(0, None, 10.0, 0).allowed);
        l.set_refill_scale(0, 0.0);
        assert_eq!(l.refill_scale(0), 0.0);
        clock.set_ns(10 * SEC);
        let o = l.consume(0, None, 1.0, 10 * SEC);
        assert!(!o.allowed);
        assert_eq!((o.remaining, o.retry_after_ms, o.reset_ms), (0.0, f64::INFINITY, f64::INFINITY));
        l.set_refill_scale(0, 1.0);
        // The ten seconds at scale 0 are not credited afterwards.
        let o = l.consume(0, None, 0.0, 10 * SEC + 500 * MS);
        assert_eq!(o.remaining, 5.0);
        // Half scale: half the rate.
        clock.set_ns(10 * SEC + 500 * MS);
        l.set_refill_scale(0, 0.5);
        let o = l.consume(0, None, 0.0, 11 * SEC + 500 * MS);
        assert_eq!(o.remaining, 10.0);
        assert!(l.consume(0, None, 10.0, 11 * SEC + 500 * MS).allowed);
        assert_eq!(l.consume(0, None, 0.0, 12 * SEC + 500 * MS).remaining, 5.0);
    }

    #[test]
    fn set_refill_scale_credits_the_time_before_it() {
        let (l, clock) = ledger(vec![tier("t", 10.0, 10.0)]);
        assert!(l.consume(0, None, 10.0, 0).allowed);
        clock.set_ns(300 * MS);
        l.set_refill_scale(0, 0.0);
        assert_eq!(l.consume(0, None, 0.0, 5 * SEC).remaining, 3.0);
    }

    #[test]
    fn keyed_debit_is_both_or_neither() {
        let (l, _) = ledger(vec![keyed("t", 3.0, 0.0, 2.0, 0.0, 100)]);
        assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
        assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
        // The key is empty: refused by the key, and the pool keeps its token.
        let o = l.consume(0, Some(b"a"), 1.0, 0);
        assert_eq!((o.allowed, o.limited_by, o.remaining, o.limit), (false, Limit::Key, 0.0, 2.0));
        assert_eq!(l.snapshot_at(0)[0].tokens, 1.0);
        assert!(l.consume(0, Some(b"b"), 1.0, 0).allowed);
        // The pool is empty: refused by the tier, and b keeps its token.
        let o = l.consume(0, Some(b"b"), 1.0, 0);
        assert_eq!((o.allowed, o.limited_by, o.remaining), (false, Limit::Tier, 1.0));
        assert_eq!(o.retry_after_ms, f64::INFINITY);
        assert_eq!(l.key_tokens(0, b"b", 0), Some(1.0));
        assert_eq!(l.key_tokens(0, b"c", 0), None);
    }

    #[test]
    fn keyed_outcome_describes_the_key() {
        let (l, _) = ledger(vec![keyed("t", 1000.0, 1000.0, 10.0, 2.0, 100)]);
        let o = l.consume(0, Some(b"u"), 4.0, 0);
        assert_eq!((o.allowed, o.remaining, o.limit, o.retry_after_ms, o.reset_ms), (true, 6.0, 10.0, 0.0, 2000.0));
        assert!(l.consume(0, Some(b"u"), 6.0, 0).allowed);
        let o = l.consume(0, Some(b"u"), 3.0, 500 * MS);
        assert_eq!((o.allowed, o.remaining, o.retry_after_ms, o.reset_ms), (false, 1.0, 1000.0, 4500.0));
    }

    #[test]
    fn key_ignored_for_a_tier_without_per_key() {
        let (l, _) = ledger(vec![tier("t", 2.0, 0.0)]);
        assert!(l.consume(0, Some(b"a"), 1.0, 0).allowed);
        assert!(l.consume(0, Some(b"b"), 1.0, 0).allowed);
        assert!(!l.consume(0, Some(b"c"), 1.0, 0).allowed);
        assert_eq!(l.snapshot_at(0)[0].keys, 0);
    }

    #[test]
    fn eviction_prefers_full_buckets() {
        let (l, _) = ledger(vec![keyed("t", 1e9, 0.0, 10.0, 1.0, 3)]);
        // c: drained at 2 s, a: drained at 0, b: drained at 1 s. By 10 s only a is full again; c is
        // the first entry of the shard, b the least recently touched.
        l.consume(0, Some(b"c"), 10.0, 2 * SEC);
        l.consume(0, Some(b"a"), 10.0, 0);
        l.consume(0, Some(b"b"), 10.0, SEC);
        l.consume(0, Some(b"d"), 1.0, 10 * SEC);
        assert_eq!(l.key_tokens(0, b"a", 10 * SEC), None, "the full bucket goes first");
        assert_eq!(l.key_tokens(0, b"b", 10 * SEC), Some(9.0));
        assert_eq!(l.key_tokens(0, b"c", 10 * SEC), Some(8.0));
        assert_eq!(l.key_tokens(0, b"d", 10 * SEC), Some(9.0));
        assert_eq!(l.snapshot_at(10 * SEC)[0].keys, 3);
    }

    #[test]
    fn eviction_prefers_idle_buckets_then_least_recent() {
        let mut t = keyed("t", 1e9, 0.0, 10.0, 0.0, 3);
        t.per_key.as_mut().unwrap().idle_ttl_ms = 5_000.0;
        let (l, _) = ledger(vec![t]);
        // No refill: nobody is ever full again. b is touched last at 0 s, a at 3 s, c at 4 s.
        l.consume(0, Some(b"b"), 1.0, 0);
        l.consume(0, Some(b"a"), 1.0, 1 * SEC);
        l.consume(0, Some(b"c"), 1.0, 2 * SEC);
        l.consume(0, Some(b"a"), 1.0, 3 * SEC);
        l.consume(0, Some(b"c"), 1.0, 4 * SEC);
        // At 4.5 s nobody is idle: the least recently touched (b) goes.
        l.consume(0, Some(b"d"), 1.0, 4 * SEC + 500 * MS);
        assert_eq!(l.key_tokens(0, b"b", 5 * SEC), None);
        assert_eq!(l.key_tokens(0, b"a", 5 * SEC), Some(8.0));
        // By 9 s a (touched at 3 s) and c (4 s) are idle; d, touched again at 8.5 s, is not. New keys
        // sweep the idle ones out and d stays, though it is the oldest entry of the shard.
        l.consume(0, Some(b"d"), 1.0, 8 * SEC + 500 * MS);
        l.consume(0, Some(b"e"), 1.0, 9 * SEC);
        l.consume(0, Some(b"f"), 1.0, 9 * SEC);
        assert_eq!(l.key_tokens(0, b"d", 9 * SEC), Some(8.0));
        assert_eq!(l.key_tokens(0, b"e", 9 * SEC), Some(9.0));
        assert_eq!(l.key_tokens(0, b"f", 9 * SEC), Some(9.0));
        assert_eq!(l.key_tokens(0, b"a", 9 * SEC), None);
        assert_eq!(l.key_tokens(0, b"c", 9 * SEC), None);
    }

    #[test]
    fn idle_keys_drain_without_reaching_the_cap() {
        let mut t = keyed("t", 1e9, 0.0, 10.0, 0.0, 1000);
        t.per_key.as_mut().unwrap().idle_ttl_ms = 1_000.0;
        let (l, _) = ledger(vec![t]);
        for i in 0..500u32 {
            l.consume(0, Some(&i.to_le_bytes()), 1.0, 0);
        }
        assert_eq!(l.snapshot_at(0)[0].keys, 500);
        // Later, fresh keys sweep the old ones out as they arrive.
        for i in 1000..1300u32 {
            l.consume(0, Some(&i.to_le_bytes()), 1.0, 10 * SEC);
        }
        assert!(l.snapshot_at(10 * SEC)[0].keys < 500, "idle keys were swept");
    }

    #[test]
    fn max_keys_holds_under_a_flood_of_unique_keys() {
        let (l, _) = ledger(vec![keyed("t", 1e12, 0.0, 5.0, 0.0, 5000)]);
        for i in 0..200_000u64 {
            let o = l.consume(0, Some(format!("user-{i}").as_bytes()), 1.0, i * MS);
            assert!(o.allowed);
        }
        let keys = l.snapshot_at(200 * SEC)[0].keys;
        assert!(keys <= 5000 && keys >= 4900, "{keys}");
    }

    #[test]
    fn inline_and_heap_keys_are_told_apart() {
        let (l, _) = ledger(vec![keyed("t", 1e9, 0.0, 5.0, 0.0, 100)]);
        let long_a = [b'a'; 40];
        let mut long_b = long_a;
        long_b[39] = b'b';
        let keys: [&[u8]; 8] = [b"", b"a", b"a\0", &[b'x'; 24], &[b'x'; 25], &long_a, &long_b, &long_a[..39]];
        for (i, k) in keys.iter().enumerate() {
            assert!(l.consume(0, Some(k), (i + 1) as f64 * 0.5, 0).allowed);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(l.key_tokens(0, k, 0), Some(5.0 - (i + 1) as f64 * 0.5), "key {i}");
        }
        assert_eq!(l.snapshot_at(0)[0].keys, keys.len());
        assert_eq!(std::mem::size_of::<Entry>(), 64, "one cache line per entry");
    }

    #[test]
    fn shard_caps_add_up_to_max_keys() {
        for max in [1usize, 7, 255, 256, 513, 10_000, 1_000_000, 1_000_003] {
            let m = KeyMap::new(PerKeyConfig { capacity: 1.0, refill_per_sec: 1.0, max_keys: max, idle_ttl_ms: 1.0 });
            let total: usize = m.shards.iter().map(|s| s.0.lock.lock().cap).sum();
            assert_eq!(total, max);
            assert!(m.shards.len().is_power_of_two() && m.shards.len() <= MAX_SHARDS);
        }
    }

    #[test]
    fn snapshot_and_reset() {
        let (l, clock) = ledger(vec![tier("a", 10.0, 1.0), keyed("b", 10.0, 0.0, 2.0, 0.0, 10)]);
        l.consume(0, None, 4.0, 0);
        l.consume(1, Some(b"x"), 2.0, 0);
        l.consume(1, Some(b"y"), 1.0, 0);
        l.set_refill_scale(0, 0.5);
        clock.set_ns(2 * SEC);
        let s = l.snapshot();
        assert_eq!(s[0], TierSnapshot {
            name: "a".into(),
            protected: false,
            tokens: 7.0,
            capacity: 10.0,
            refill_per_sec: 1.0,
            refill_scale: 0.5,
            keys: 0
        });
        assert_eq!((s[1].tokens, s[1].keys), (7.0, 2));
        assert_eq!(l.reset(Some(1), Some(b"x")), 1);
        assert_eq!(l.key_tokens(1, b"x", 0), None);
        assert_eq!(l.key_tokens(1, b"y", 0), Some(1.0));
        assert_eq!(l.snapshot()[1].tokens, 7.0, "forgetting a key leaves the pool alone");
        assert_eq!(l.reset(Some(1), None), 2);
        assert_eq!(l.snapshot()[1], TierSnapshot { tokens: 10.0, keys: 0, ..s[1].clone() });
        assert_eq!(l.snapshot()[0].tokens, 7.0);
        l.reset(None, None);
        assert_eq!(l.snapshot()[0].tokens, 10.0);
        assert_eq!(l.refill_scale(0), 0.5, "reset leaves the shed controller's scale alone");
    }

    #[test]
    fn a_lease_held_by_another_thread_is_pulled_back_before_refusing() {
        let l = Arc::new(Ledger::new(vec![tier("t", 640.0, 0.0)]).unwrap());
        // Another thread takes one token and with it a lease of 10 (capacity / 64).
        let other = l.clone();
        assert!(std::thread::spawn(move || other.try_consume(0, None, 1.0, 0)).join().unwrap());
        assert_eq!(l.snapshot_at(0)[0].tokens, 639.0, "leases count as the tier's tokens");
        // This thread can still take every remaining token, then nothing more.
        assert!(l.consume(0, None, 639.0, 0).allowed);
        let o = l.consume(0, None, 0.5, 0);
        assert_eq!((o.allowed, o.remaining), (false, 0.0));
    }

    #[test]
    fn leases_do_not_lift_the_pool_above_capacity() {
        let l = Arc::new(Ledger::with_clock(vec![tier("t", 64.0, 1000.0)], Arc::new(ManualClock::new(0))).unwrap());
        let other = l.clone();
        assert!(std::thread::spawn(move || other.try_consume(0, None, 1.0, 0)).join().unwrap());
        assert!(l.consume(0, None, 1.0, 0).allowed);
        // After a long pause the pool refills to capacity minus the leases, never above.
        assert_eq!(l.snapshot_at(60 * SEC)[0].tokens, 64.0);
        let o = l.consume(0, None, 64.0, 60 * SEC);
        assert!(o.allowed, "all 64 tokens, leases included");
        assert!(!l.consume(0, None, 0.001, 60 * SEC).allowed);
    }

    #[test]
    fn try_consume_now_reads_the_clock_only_when_the_debit_needs_it() {
        struct Counting(AtomicU64);
        impl Clock for Counting {
            fn now_ns(&self) -> u64 {
                self.0.fetch_add(1, Relaxed);
                0
            }
        }
        let clock = Arc::new(Counting(AtomicU64::new(0)));
        let l = Ledger::with_clock(vec![tier("t", 6400.0, 1.0), keyed("k", 100.0, 1.0, 10.0, 1.0, 10)], clock.clone()).unwrap();
        let reads = || clock.0.load(Relaxed);
        let base = reads();
        assert!(l.try_consume_now(0, None, 1.0)); // takes a lease of 100: one read, to refill the pool
        assert_eq!(reads(), base + 1);
        for _ in 0..99 {
            assert!(l.try_consume_now(0, None, 1.0));
        }
        assert_eq!(reads(), base + 1, "debits from the lease never read the clock");
        assert!(l.try_consume_now(1, Some(b"u"), 1.0));
        assert_eq!(reads(), base + 2, "a keyed debit reads it once");
    }

    /// A clock that reads the true time (set by the test) rounded down to its 4 ms tick, as
    /// CLOCK_MONOTONIC_COARSE does.
    struct Ticking(Arc<ManualClock>);
    const TICK: u64 = 4 * MS;
    impl Clock for Ticking {
        fn now_ns(&self) -> u64 {
            self.0.now_ns() / TICK * TICK
        }
        fn resolution_ns(&self) -> u64 {
            TICK
        }
    }

    /// A ledger with a precise and a ticking clock over one true time.
    fn coarse_ledger(tiers: Vec<TierConfig>) -> (Ledger, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(0));
        let l = Ledger::with_clocks(tiers, clock.clone(), Arc::new(Ticking(clock.clone()))).unwrap();
        (l, clock)
    }

    #[test]
    fn coarse_clock_only_where_one_tick_is_a_small_share() {
        // 250 tokens/s for 4 ms is one token: at most capacity / 64.
        assert!(coarse_is_safe(&[tier("t", 64.0, 250.0)], TICK));
        assert!(!coarse_is_safe(&[tier("t", 63.0, 250.0)], TICK));
        assert!(!coarse_is_safe(&[tier("a", 1e6, 1.0), keyed("b", 1e6, 1.0, 10.0, 1000.0, 10)], TICK));
        assert_eq!(coarse_ledger(vec![tier("t", 64.0, 250.0)]).0.coarse_tick_ns(), TICK);
        assert_eq!(coarse_ledger(vec![tier("t", 63.0, 250.0)]).0.coarse_tick_ns(), 0);
        let l = Ledger::new(vec![keyed("t", 1e15, 1e15, 1e15, 1e15, 10)]).unwrap();
        assert_eq!(l.coarse_tick_ns(), CoarseClock::new().map_or(0, |c| c.resolution_ns()));
        assert_eq!(Ledger::new(vec![tier("smooth", 1.0, 1000.0)]).unwrap().coarse_tick_ns(), 0, "1 ms of burst");
    }

    #[test]
    fn the_coarse_clock_loses_no_token_and_refuses_nothing_the_precise_one_admits() {
        // A key of 64 tokens refilled at 250/s (one token per 4 ms tick), asked for one token every
        // 125 µs (32 asks per token: always short) for 10 s; the same on a precise-only ledger.
        let k = || vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)];
        let precise = Arc::new(ManualClock::new(0));
        let lp = Ledger::with_clock(k(), precise.clone()).unwrap();
        let (lc, clock) = coarse_ledger(k());
        let (mut gp, mut gc) = (0u64, 0u64);
        for step in 0..80_000u64 {
            let t = step * 125_000;
            precise.set_ns(t);
            clock.set_ns(t);
            gp += u64::from(lp.try_consume_now(0, Some(b"k"), 1.0));
            gc += u64::from(lc.try_consume_now(0, Some(b"k"), 1.0));
            assert_eq!(gc, gp, "at {t} ns");
        }
        // The burst plus every whole token of refill (the last ask is at 9.999875 s).
        assert_eq!(gp, 64 + 2499);
        assert_eq!(lc.key_tokens(0, b"k", 10 * SEC), lp.key_tokens(0, b"k", 10 * SEC));
    }

    #[test]
    fn the_coarse_clock_stamps_an_admitted_debit_at_most_a_tick_early() {
        // The bound the module notes state: a full bucket debited 3 ms into a tick is stamped at the
        // tick, so it is credited those 3 ms again: 0.75 tokens at 250/s, under one tick's refill.
        let (l, clock) = coarse_ledger(vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)]);
        clock.set_ns(3 * MS);
        assert!(l.try_consume_now(0, Some(b"k"), 64.0));
        assert_eq!(l.key_tokens(0, b"k", 3 * MS), Some(0.75));
        // Just before the next tick the coarse reading says 0 tokens, the precise one just under 1: a
        // whole token is refused by both, 0.9 admitted at the precise reading.
        clock.set_ns(TICK - 1);
        assert!(!l.try_consume_now(0, Some(b"k"), 1.0));
        assert!(l.try_consume_now(0, Some(b"k"), 0.9));
    }

    #[test]
    fn concurrent_debits_evictions_snapshots_and_scale_changes_keep_exact_totals() {
        // 4 threads debit 64 keys (each with 50 tokens, no refill) through a tier pool of 2,000 while
        // a fifth thread snapshots and moves the refill scale (no refill to scale: totals stay exact).
        // maxKeys 64 holds every key, so no key is ever forgotten: each grants at most 50.
        let l = Arc::new(Ledger::new(vec![keyed("t", 2000.0, 0.0, 50.0, 0.0, 64)]).unwrap());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let noise = {
            let (l, stop) = (l.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Relaxed) {
                    let s = l.snapshot();
                    assert!(s[0].tokens >= 0.0 && s[0].tokens <= 2000.0 && s[0].keys <= 64);
                    l.set_refill_scale(0, f64::from(n % 3) / 2.0);
                    n += 1;
                }
            })
        };
        let per_key: Vec<Vec<u32>> = (0..4u64)
            .map(|w| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut granted = vec![0u32; 64];
                    let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..20_000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = (x % 64) as usize;
                        if l.try_consume_now(0, Some(format!("key-{k}").as_bytes()), 1.0) {
                            granted[k] += 1;
                        }
                    }
                    granted
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        stop.store(true, Relaxed);
        noise.join().unwrap();
        let totals: Vec<u32> = (0..64).map(|k| per_key.iter().map(|g| g[k]).sum()).collect();
        assert!(totals.iter().all(|&t| t <= 50), "{totals:?}");
        assert_eq!(totals.iter().sum::<u32>(), 2000);
        assert_eq!(l.snapshot()[0].tokens, 0.0);
    }

    /// Two keys whose buckets live in different shards of tier `tier`.
    fn keys_in_two_shards(l: &Ledger, tier: usize) -> (Vec<u8>, Vec<u8>) {
        let map = l.tiers[tier].keys.as_ref().unwrap();
        let shard_of = |k: &[u8]| map.shard(map.hasher.hash_one(k)) as *const ShardCell;
        let a = b"key-0".to_vec();
        let b = (1..1000).map(|i| format!("key-{i}").into_bytes()).find(|k| shard_of(k) != shard_of(&a)).unwrap();
        (a, b)
    }

    #[test]
    fn shard_leases_are_drained_back_before_the_tier_refuses() {
        // A pool of 640: a keyed debit also takes a lease of 10 into its shard.
        let (l, _) = ledger(vec![keyed("t", 640.0, 0.0, 1e9, 0.0, 1024)]);
        let (a, b) = keys_in_two_shards(&l, 0);
        assert!(l.consume(0, Some(&a), 1.0, 0).allowed);
        assert_eq!(l.tiers[0].shard_leases(), 10.0, "a's shard holds a lease");
        assert_eq!(l.snapshot_at(0)[0].tokens, 639.0, "leases count as the tier's tokens");
        // b, in another shard, can take everything that is left, a's shard's lease included.
        assert!(l.consume(0, Some(&b), 639.0, 0).allowed);
        assert_eq!(l.tiers[0].shard_leases(), 0.0);
        let o = l.consume(0, Some(&a), 0.5, 0);
        assert_eq!((o.allowed, o.limited_by), (false, Limit::Tier));
        assert_eq!(l.snapshot_at(0)[0].tokens, 0.0);
        // The same for a debit without a key.
        l.reset(Some(0), None);
        assert!(l.consume(0, Some(&a), 1.0, 0).allowed);
        assert!(l.consume(0, None, 639.0, 0).allowed, "a tier-only debit drains the shards' leases too");
        assert!(!l.consume(0, None, 0.001, 0).allowed);
    }

    #[test]
    fn no_shard_lease_when_the_pool_is_near_empty_and_reset_forgets_them() {
        let (l, _) = ledger(vec![keyed("t", 640.0, 0.0, 1e9, 0.0, 1024)]);
        let (a, b) = keys_in_two_shards(&l, 0);
        assert!(l.consume(0, Some(&a), 620.0, 0).allowed);
        assert_eq!(l.tiers[0].shard_leases(), 10.0, "20 were left: a's shard leased 10");
        assert!(l.consume(0, Some(&b), 1.0, 0).allowed);
        assert_eq!(l.tiers[0].shard_leases(), 10.0, "9 left in the pool: b's shard leases nothing");
        assert!(l.consume(0, Some(&a), 19.0, 0).allowed, "a's shard's lease and the pool");
        assert!(!l.consume(0, Some(&a), 1.0, 0).allowed);
        l.reset(Some(0), None);
        assert!(l.consume(0, Some(&a), 1.0, 0).allowed);
        assert_eq!(l.tiers[0].shard_leases(), 10.0);
        l.reset(Some(0), None);
        assert_eq!(l.tiers[0].shard_leases(), 0.0);
        assert_eq!(l.snapshot_at(0)[0].tokens, 640.0, "pool full, no lease left over: nothing created");
        assert!(l.consume(0, None, 640.0, 0).allowed);
    }

    #[test]
    fn refill_counts_shard_leases_so_the_tier_never_exceeds_its_capacity() {
        let (l, _) = ledger(vec![keyed("t", 640.0, 1000.0, 1e9, 0.0, 1024)]);
        let (a, _) = keys_in_two_shards(&l, 0);
        assert!(l.consume(0, Some(&a), 1.0, 0).allowed);
        // A minute later the pool is full again: pool plus a's shard's lease, never more than 640.
        assert_eq!(l.snapshot_at(60 * SEC)[0].tokens, 640.0);
        assert!(l.consume(0, None, 640.0, 60 * SEC).allowed);
        assert!(!l.consume(0, None, 0.001, 60 * SEC).allowed);
    }

    #[test]
    fn shard_leases_keep_exact_totals_across_threads() {
        // 4 threads, keyed debits over many shards mixed with tier-only ones, through a pool of 5,000
        // (leases of 78): exactly the pool is granted, whichever shard or stripe held the tokens.
        for _ in 0..5 {
            let l = Arc::new(Ledger::new(vec![keyed("t", 5000.0, 0.0, 1e9, 0.0, 16_384)]).unwrap());
            let granted: u32 = (0..4u64)
                .map(|w| {
                    let l = l.clone();
                    std::thread::spawn(move || {
                        let mut granted = 0u32;
                        for i in 0..20_000u64 {
                            let key = format!("k{}", (i * 31 + w * 7) % 3000);
                            let keyed = i % 3 != 0;
                            let cost = if i % 5 == 0 { 2.5 } else { 1.0 };
                            granted += u32::from(l.try_consume_now(0, keyed.then_some(key.as_bytes()), cost)) * if cost == 1.0 { 2 } else { 5 };
                        }
                        granted
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum();
            // Granted is counted in half tokens; the pool ends empty (no cost is left unpaid at 5,000).
            assert_eq!(l.snapshot()[0].tokens, 5000.0 - f64::from(granted) / 2.0);
            assert!(l.snapshot()[0].tokens < 1.0, "{}", l.snapshot()[0].tokens);
            assert_eq!(l.tiers[0].shard_leases(), 0.0);
        }
    }

    #[test]
    fn a_slot_debits_its_key_as_the_key_itself_would() {
        let (l, _) = ledger(vec![tier("plain", 10.0, 0.0), keyed("k", 100.0, 0.0, 3.0, 0.0, 10)]);
        assert_eq!(l.try_consume_now_slot(0, b"u", 1.0), (true, None), "no per-key buckets: no slot");
        let (allowed, slot) = l.try_consume_now_slot(1, b"u", 1.0);
        let slot = slot.expect("a keyed tier gives a slot");
        assert!(allowed);
        assert_eq!(l.try_consume_slot_now(1, slot, 1.5), Some(true));
        assert_eq!(l.key_tokens(1, b"u", 0), Some(0.5));
        assert_eq!(l.try_consume_slot_now(1, slot, 1.0), Some(false), "the key's quota refuses");
        assert_eq!(l.try_consume_slot_now(1, slot, 0.5), Some(true));
        assert_eq!(l.snapshot_at(0)[1].tokens, 97.0, "the pool paid what the key granted");
        assert_eq!(l.try_consume_now_slot(1, b"u", 0.0), (true, Some(slot)), "the same key, the same slot");
        assert_eq!(l.try_consume_slot_now(0, slot, 1.0), None, "a tier without keys has no slots");
    }

    #[test]
    fn a_slot_goes_stale_when_its_entry_is_forgotten_moved_or_reused() {
        let (l, clock) = ledger(vec![keyed("k", 1e9, 0.0, 5.0, 0.0, 2)]);
        let slot = |k: &[u8]| l.try_consume_now_slot(0, k, 1.0).1.unwrap();
        // Forgotten by reset(key); the key comes back as a new entry with a new slot.
        let a = slot(b"a");
        assert_eq!(l.reset(Some(0), Some(b"a")), 1);
        assert_eq!(l.try_consume_slot_now(0, a, 1.0), None);
        let a = slot(b"a");
        assert_ne!(l.try_consume_slot_now(0, a, 1.0), None);
        // Moved: removing an entry moves the last one into its place.
        let b = slot(b"b");
        assert_eq!(l.reset(Some(0), Some(b"a")), 1);
        assert_eq!(l.try_consume_slot_now(0, b, 1.0), None, "b moved to a's index");
        let b = slot(b"b");
        assert_eq!(l.key_tokens(0, b"b", 0), Some(3.0));
        // Reused: with maxKeys 2, newer keys evict b (the least recently touched), and whatever then
        // sits at b's index is not b.
        clock.set_ns(SEC);
        let mut others = Vec::new();
        for i in 0..10u8 {
            others.push([b'x', i]);
            slot(&others[others.len() - 1]);
            if l.key_tokens(0, b"b", 0).is_none() {
                break;
            }
        }
        assert_eq!(l.key_tokens(0, b"b", 0), None, "b was evicted");
        assert_eq!(l.try_consume_slot_now(0, b, 1.0), None);
        for k in &others {
            assert!(matches!(l.key_tokens(0, k, SEC), None | Some(4.0)), "nobody else paid for b");
        }
        // Cleared: reset(tier) forgets every key.
        let c = slot(b"c");
        l.reset(Some(0), None);
        assert_eq!(l.try_consume_slot_now(0, c, 1.0), None);
    }

    #[test]
    fn a_slot_on_the_coarse_clock_refuses_nothing_the_precise_one_admits() {
        // As the key test above: one token per 4 ms tick, asked for every 125 µs, by slot.
        let k = || vec![keyed("t", 1e9, 0.0, 64.0, 250.0, 10)];
        let precise = Arc::new(ManualClock::new(0));
        let lp = Ledger::with_clock(k(), precise.clone()).unwrap();
        let (lc, clock) = coarse_ledger(k());
        let slot = lc.try_consume_now_slot(0, b"k", 0.0).1.unwrap();
        let (mut gp, mut gc) = (0u64, 0u64);
        for step in 0..80_000u64 {
            let t = step * 125_000;
            precise.set_ns(t);
            clock.set_ns(t);
            gp += u64::from(lp.try_consume_now(0, Some(b"k"), 1.0));
            gc += u64::from(lc.try_consume_slot_now(0, slot, 1.0).unwrap());
            assert_eq!(gc, gp, "at {t} ns");
        }
        assert_eq!(gp, 64 + 2499);
    }

    #[test]
    fn slots_keep_exact_totals_across_threads() {
        // 4 threads debit 64 keys by slot (each key 50 tokens, no refill) through a pool of 2,000,
        // while a fifth resets keys, so slots go stale and are looked up again.
        let l = Arc::new(Ledger::new(vec![keyed("t", 2000.0, 0.0, 50.0, 0.0, 64)]).unwrap());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let resetter = {
            let (l, stop) = (l.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut resets = 0u32;
                while !stop.load(Relaxed) || resets == 0 {
                    resets += l.reset(Some(0), Some(format!("key-{}", resets % 64).as_bytes())) as u32;
                    std::thread::yield_now();
                }
                resets
            })
        };
        let granted: u32 = (0..4u64)
            .map(|w| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let keys: Vec<Vec<u8>> = (0..64).map(|k| format!("key-{k}").into_bytes()).collect();
                    let mut slots: Vec<Option<Slot>> = vec![None; 64];
                    let mut granted = 0u32;
                    for i in 0..20_000u64 {
                        let k = ((i * 7 + w * 13) % 64) as usize;
                        let allowed = match slots[k].and_then(|s| l.try_consume_slot_now(0, s, 1.0)) {
                            Some(a) => a,
                            None => {
                                let (a, s) = l.try_consume_now_slot(0, &keys[k], 1.0);
                                slots[k] = s;
                                a
                            }
                        };
                        granted += u32::from(allowed);
                    }
                    granted
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        stop.store(true, Relaxed);
        assert!(resetter.join().unwrap() > 0);
        assert_eq!(granted, 2000, "keys reset to full never lift the pool");
        assert_eq!(l.snapshot()[0].tokens, 0.0);
    }

    #[test]
    fn concurrent_floods_stay_within_max_keys() {
        let l = Arc::new(Ledger::new(vec![keyed("t", 1e12, 0.0, 5.0, 0.0, 1000)]).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..50_000 {
                        assert!(l.try_consume_now(0, Some(format!("w{w}-{i}").as_bytes()), 1.0));
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let s = l.snapshot()[0].clone();
        assert!(s.keys <= 1000 && s.keys > 900, "{}", s.keys);
        assert_eq!(s.tokens, 1e12 - 200_000.0);
    }

    #[test]
    fn exact_accounting_across_threads() {
        // Half the attempts on one key (300 tokens), half on unique keys; the pool holds 1000.
        let l = Arc::new(Ledger::new(vec![keyed("t", 1000.0, 0.0, 300.0, 0.0, 100_000)]).unwrap());
        let (granted, shared) = (0..4)
            .map(|w| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let (mut all, mut shared) = (0, 0);
                    for i in 0..10_000 {
                        let key = if i % 2 == 0 { b"shared".to_vec() } else { format!("w{w}-{i}").into_bytes() };
                        if l.consume(0, Some(&key), 1.0, l.now_ns()).allowed {
                            all += 1;
                            shared += usize::from(i % 2 == 0);
                        }
                    }
                    (all, shared)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!(granted, 1000);
        assert_eq!(shared, 300);
    }
}

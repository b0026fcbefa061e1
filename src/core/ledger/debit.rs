//! The debits: a keyed one under the key's shard lock (key bucket and tier, both or neither), a
//! tier-only one from the thread's stripe, and the coarse-then-precise clock retry.
use super::coarse::LedgerClock;
use super::lease::{DrainGuard, Short};
use super::tier::Tier;
use super::{Ledger, Limit, Outcome};
use crate::core::bucket::Bucket;
use crate::core::keymap::{KeyMap, Shard, Slot};
use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;

impl Ledger {
    /// Runs a debit at the coarse clock where there is one, and again at the precise clock if it was
    /// refused short of no more than two ticks' refill (as `try_consume_now`). `None` from `attempt`
    /// is passed through.
    #[inline(always)]
    pub(crate) fn coarse_then_precise<R>(&self, attempt: impl Fn(&LedgerClock) -> Option<(Outcome, R)>) -> Option<(Outcome, R)> {
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
    pub(crate) fn debit_keyed<const DETAIL: bool>(
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
        // Set once the shards' leases had to be drained: held until the debit is done.
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
                    t.debit_keyed_slow(&cell.lease, cost, now_ns, drain.as_ref())
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
                    Err(Short::Drain(guard)) => {
                        // Other shards may hold the tokens: drain them without holding this shard's
                        // lock (they are taken shard first), then ask again from the start.
                        drop(shard);
                        guard.drain();
                        drain = Some(guard);
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
    pub(crate) fn debit<const DETAIL: bool>(
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
}
